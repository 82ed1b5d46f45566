-- sandbox.k8s.controllers._ctl: what the simulated controllers share. A
-- served cluster has one Ctl: a queue of keys ("kind|key") that the
-- controllers' hooks fill inside the store's commit (hooks only mark work,
-- they never write), keys due at a simulated time, and one daemon task that
-- drains both and calls M.handlers[kind](ctl, key). A handler reads the
-- store and writes only what differs, which is what lets the loop settle:
-- an update that changes nothing commits nothing and wakes nobody.
--
-- A marked key runs LAG seconds later, as a real controller reacts a moment
-- after its watch event: a client that writes twice in a row sees its own
-- two writes first, and a key marked many times in between runs once.
-- Waiting is cl.sig:wait() (every commit fires it; so does enqueue), with a
-- timeout only while some key is due: under the virtual clock nothing here
-- keeps the clock running once the simulated work is done.
local core = require "hypd.core"
local log = require "hypd.log"
local merge = require "sandbox.k8s.merge"
local objects = require "sandbox.k8s.objects"
local sys = require "hypd.sys"
local task = require "hypd.task"

local M = {}
M.handlers = {}   -- kind -> fn(ctl, key)
M.LAG = 0.02      -- seconds from a change to the reconcile it causes
M.NOISY = 1000    -- runs of one key without the cluster settling before a warning
M.SLICE = 500     -- handler calls between yields to the other tasks

local running = {} -- "region/name" -> ctl

-- speed() -> the sandbox speed factor (simulated seconds per real second)
function M.speed()
  local ok, sb = pcall(require, "sandbox")
  return ok and tonumber(sb.speed) or 1
end

local Ctl = {}
Ctl.__index = Ctl

-- new(cl, region, eks_record) -> the cluster's Ctl (not started)
function M.new(cl, region, eks)
  local ctl = setmetatable({ cl = cl, region = region, eks = eks, version = (eks and eks.version) or cl.version,
    queue = {}, head = 1, tail = 0, -- marked keys, {k, at} in time order
    dirty = {},                     -- k -> true while k is in the queue
    heap = {}, due = {},            -- timers: a min-heap of {at, k}; k -> its earliest time
    weak = {},                      -- k -> time: at_weak's timers under the virtual clock
    runs = {}, mem = {} }, Ctl)
  running[region .. "/" .. cl.name] = ctl
  return ctl
end

-- find(region, name) -> the live Ctl of that EKS cluster, or nil
function M.find(region, name)
  local ctl = running[region .. "/" .. name]
  if ctl and not ctl.cl.gone then return ctl end
end

-- each(region) -> the live Ctls of a region
function M.each(region)
  local out = {}
  for _, ctl in pairs(running) do
    if ctl.region == region and not ctl.cl.gone then out[#out + 1] = ctl end
  end
  return out
end

-- all() -> the live Ctls of every region
function M.all()
  local out = {}
  for _, ctl in pairs(running) do
    if not ctl.cl.gone then out[#out + 1] = ctl end
  end
  return out
end

local function mark(self, k)
  if self.dirty[k] then return end
  self.dirty[k] = true
  self.tail = self.tail + 1
  self.queue[self.tail] = { k, core.now() + M.LAG }
end

-- enqueue(kind [, key]): the key is reconciled in a moment
function Ctl:enqueue(kind, key)
  mark(self, kind .. "|" .. (key or ""))
  self.cl.sig:fire()
end

local function heap_push(h, e)
  h[#h + 1] = e
  local i = #h
  while i > 1 and h[i // 2][1] > h[i][1] do
    h[i], h[i // 2] = h[i // 2], h[i]
    i = i // 2
  end
end

local function heap_pop(h)
  local top, last = h[1], h[#h]
  h[#h] = nil
  if #h > 0 then
    h[1] = last
    local i = 1
    while true do
      local l, r, m = 2 * i, 2 * i + 1, i
      if h[l] and h[l][1] < h[m][1] then m = l end
      if h[r] and h[r][1] < h[m][1] then m = r end
      if m == i then break end
      h[i], h[m] = h[m], h[i]
      i = m
    end
  end
  return top
end

-- at(t, kind [, key]): the key is reconciled at engine time t (the earliest
-- of the times asked for)
function Ctl:at(t, kind, key)
  local k = kind .. "|" .. (key or "")
  if self.due[k] and self.due[k] <= t then return end
  self.due[k] = t
  heap_push(self.heap, { t, k })
  self.cl.sig:fire()
end

-- cancel(kind [, key]): forget the time at asked for (under the virtual
-- clock a forgotten timer no longer moves the clock)
function Ctl:cancel(kind, key)
  self.due[kind .. "|" .. (key or "")] = nil
end

-- at_weak(t, kind [, key]): as at, but under the virtual clock the time
-- does not move the clock by itself (a periodic schedule, a CronJob's,
-- would run it for ever): the key runs at the first wake (any commit in
-- the cluster, any due key) once the clock has passed t
function Ctl:at_weak(t, kind, key)
  if not core.virtual() then return self:at(t, kind, key) end
  local k = kind .. "|" .. (key or "")
  if self.weak[k] and self.weak[k] <= t then return end
  self.weak[k] = t
end

-- after(seconds, kind [, key]): ... after `seconds` of simulated time
function Ctl:after(seconds, kind, key)
  self:at(core.now() + seconds / M.speed(), kind, key)
end

-- memo(name) -> a table a controller keeps in memory for this cluster
function Ctl:memo(name)
  local t = self.mem[name]
  if not t then t = {}; self.mem[name] = t end
  return t
end

function Ctl:r(group, version, resource) return self.cl.reg:find(group, version, resource) end

-- next_wake() -> the engine time the daemon has work at, or nil
local function next_wake(self)
  local h = self.heap
  while h[1] and self.due[h[1][2]] ~= h[1][1] do heap_pop(h) end -- superseded
  local q = self.queue[self.head]
  local t = q and q[2]
  if h[1] and (not t or h[1][1] < t) then t = h[1][1] end
  return t
end

local function run(self, k)
  local kind, key = k:match("^([^|]*)|(.*)$")
  local h = M.handlers[kind]
  if not h then return end
  local ok, err = pcall(h, self, key)
  if not ok then
    log.error("sandbox", "k8s controller %s %s (cluster %s) failed: %s", kind, key, self.cl.name, tostring(err))
  end
  local n = (self.runs[k] or 0) + 1
  self.runs[k] = n
  if n == M.NOISY then
    log.warn("sandbox", "k8s controller %s %s (cluster %s) ran %d times without the cluster settling", kind, key,
      self.cl.name, n)
  end
end

-- drain(): runs every key that is due now
function Ctl:drain()
  local calls = 0
  while not self.cl.gone do
    local now = core.now()
    for k, t in pairs(self.weak) do
      if t <= now then self.weak[k] = nil; mark(self, k) end
    end
    local h = self.heap
    while h[1] and h[1][1] <= now do
      local e = heap_pop(h)
      if self.due[e[2]] == e[1] then
        self.due[e[2]] = nil
        mark(self, e[2])
      end
    end
    local q = self.queue[self.head]
    if not q or q[2] > now then
      if not q then
        self.queue, self.head, self.tail = {}, 1, 0
        self.runs = {} -- settled
      end
      return
    end
    self.queue[self.head] = nil
    self.head = self.head + 1
    self.dirty[q[1]] = nil
    run(self, q[1])
    calls = calls + 1
    if calls % M.SLICE == 0 then task.checkpoint() end
  end
end

-- start(): the daemon task that drains the queue until the cluster goes
function Ctl:start()
  if self.task then return end
  self.task = task.spawn(function()
    while not self.cl.gone do
      self:drain()
      if self.cl.gone then break end
      local at = next_wake(self)
      if at then
        self.cl.sig:wait(math.max(0, at - core.now()))
      else
        self.cl.sig:wait()
      end
    end
    if running[self.region .. "/" .. self.cl.name] == self then running[self.region .. "/" .. self.cl.name] = nil end
  end, { daemon = true, name = "sandbox k8s controllers " .. self.cl.name })
end

-- helpers every controller uses -------------------------------------------

M.copy = merge.copy
M.equal = merge.equal

function M.stamp(t) return objects.rfc3339(t or core.now()) end

function M.hex(n)
  return (sys.random_bytes((n + 1) // 2):gsub(".", function(c) return string.format("%02x", c:byte()) end)):sub(1, n)
end

-- fnv1a64(s) -> the 64-bit FNV-1a hash of s (a Lua integer, so signed)
M.FNV64_PRIME = 1099511628211
function M.fnv1a64(s)
  local h = -3750763034362895579 -- 14695981039346656037 as a signed 64-bit integer
  for i = 1, #s do h = (h ~ s:byte(i)) * M.FNV64_PRIME end
  return h
end

-- hash(s [, n]) -> n (10) characters of the alphabet Kubernetes uses for
-- pod-template-hash (FNV-1a, 64 bits)
local SAFE = "bcdfghjklmnpqrstvwxz2456789"
function M.hash(s, n)
  local h = M.fnv1a64(s)
  local out = {}
  for i = 1, n or 10 do
    if i > 1 and (i - 1) % 12 == 0 then h = (h ~ i) * M.FNV64_PRIME end -- 12 characters a round
    local d = (h >> (((i - 1) % 12) * 5)) & 31
    d = d % #SAFE + 1
    out[i] = SAFE:sub(d, d)
  end
  return table.concat(out)
end

-- quantity(v) -> a number for "2", 2, "500m", "1Gi", "64Ki"
local SUFFIX = { m = 1e-3, k = 1e3, M = 1e6, G = 1e9, T = 1e12, Ki = 1024, Mi = 1024 ^ 2, Gi = 1024 ^ 3,
  Ti = 1024 ^ 4 }
function M.quantity(v)
  if type(v) == "number" then return v end
  if type(v) ~= "string" then return 0 end
  local n, s = v:match("^([%d%.]+)(%a*)$")
  if not n then return 0 end
  return (tonumber(n) or 0) * (s == "" and 1 or SUFFIX[s] or 1)
end

-- condition(list, type) -> the condition of that type, or nil
function M.condition(list, ctype)
  for _, c in ipairs(list or {}) do
    if c.type == ctype then return c end
  end
end

-- set_condition(list, type, status, reason, message [, extra]) -> a new list
-- with that condition set; its lastTransitionTime moves only when its status
-- changes (so setting the same condition twice changes nothing). extra:
-- {update = true} also keeps lastUpdateTime (Deployments); {last = true}
-- moves the condition to the end (the newest state last, as operators do)
function M.set_condition(list, ctype, status, reason, message, extra)
  extra = extra or {}
  local out, found = {}, nil
  for _, c in ipairs(list or {}) do
    if c.type == ctype then found = c else out[#out + 1] = c end
  end
  local now = M.stamp()
  local c = found and M.copy(found) or { type = ctype }
  if c.status ~= status then c.lastTransitionTime = now end
  if extra.update and (c.status ~= status or c.reason ~= reason or c.message ~= message) then c.lastUpdateTime = now end
  c.status, c.reason, c.message = status, reason, message
  if found and not extra.last then
    -- keep its place
    local placed = {}
    for _, x in ipairs(list) do placed[#placed + 1] = x.type == ctype and c or x end
    return placed
  end
  out[#out + 1] = c
  return out
end

-- is_true(list, type) -> the condition of that type is True
function M.is_true(list, ctype)
  local c = M.condition(list, ctype)
  return c ~= nil and c.status == "True"
end

-- owner(obj [, kind]) -> the controller ownerReference (of that kind)
function M.owner(obj, kind)
  for _, o in ipairs(obj.metadata.ownerReferences or {}) do
    if o.controller and (not kind or o.kind == kind) then return o end
  end
end

function M.owned_by(obj, uid)
  for _, o in ipairs(obj.metadata.ownerReferences or {}) do
    if o.uid == uid then return true end
  end
  return false
end

-- owner_ref(obj) -> a controller reference to obj
function M.owner_ref(obj)
  return { apiVersion = obj.apiVersion, kind = obj.kind, name = obj.metadata.name, uid = obj.metadata.uid,
    controller = true, blockOwnerDeletion = true }
end

-- children(ctl, r, owner) -> the objects of r in owner's namespace it controls
function M.children(ctl, r, owner)
  local out = {}
  for _, o in ipairs(ctl.cl:list(r, owner.metadata.namespace)) do
    if M.owned_by(o, owner.metadata.uid) then out[#out + 1] = o end
  end
  return out
end

function M.phase(pod) return (pod.status or {}).phase or "Pending" end
function M.finished(pod)
  local p = M.phase(pod)
  return p == "Succeeded" or p == "Failed"
end
function M.pod_ready(pod) return M.is_true((pod.status or {}).conditions, "Ready") end

-- put_status(ctl, r, obj, status) -> the stored object: writes status when it differs
function M.put_status(ctl, r, obj, status)
  if M.equal(obj.status, status) then return obj end
  local c = M.copy(obj)
  c.status = status
  return ctl.cl:update(r, c, { subresource = "status" }) or obj
end

-- event(ctl, obj, type, reason, message, component): a core/v1 Event about
-- obj; the same event again (same object, type, reason, message and
-- source) counts up the one there is and moves its lastTimestamp, as the
-- event recorder's correlator does (kubectl describe: "(x3 over 2m)")
-- field: the involvedObject's fieldPath (a container: "spec.containers{name}")
function M.event(ctl, obj, etype, reason, message, component, field)
  local er = ctl:r("", "v1", "events")
  local now = M.stamp()
  local ns = obj.metadata.namespace or "default"
  component = component or "sandbox"
  -- the kubelet names its node (source.host, reportingInstance), as kubectl get events -o wide shows
  local host = component == "kubelet" and obj.kind == "Pod" and (obj.spec or {}).nodeName or nil
  local seen = ctl:memo("events")
  local k = table.concat({ tostring(obj.metadata.uid), etype, reason, message, component, host or "", field or "" }, "|")
  local prev = seen[k] and ctl.cl:get(er, ns, seen[k])
  if prev then
    local c = M.copy(prev)
    c.count, c.lastTimestamp = (c.count or 1) + 1, now
    return ctl.cl:update(er, c)
  end
  local name = obj.metadata.name .. "." .. M.hex(16)
  seen[k] = name
  return ctl.cl:create(er, {
    metadata = { name = name, namespace = ns },
    involvedObject = { kind = obj.kind, namespace = obj.metadata.namespace, name = obj.metadata.name,
      uid = obj.metadata.uid, apiVersion = obj.apiVersion, resourceVersion = obj.metadata.resourceVersion,
      fieldPath = field },
    reason = reason, message = message, type = etype, count = 1,
    source = { component = component, host = host }, firstTimestamp = now, lastTimestamp = now,
    reportingComponent = component, reportingInstance = host or component,
  })
end

-- pod(owner, template, name, labels [, generate]) -> a new Pod object of
-- owner's (name is a generateName when `generate`), with the defaults the
-- API server and its admission plugins would add
function M.pod(owner, template, name, labels, generate)
  local tm = template.metadata or {}
  local spec = M.copy(template.spec or {})
  spec.restartPolicy = spec.restartPolicy or "Always"
  spec.schedulerName = spec.schedulerName or "default-scheduler"
  spec.serviceAccountName = spec.serviceAccountName or spec.serviceAccount or "default"
  spec.terminationGracePeriodSeconds = spec.terminationGracePeriodSeconds or 30
  spec.dnsPolicy = spec.dnsPolicy or "ClusterFirst"
  spec.tolerations = spec.tolerations or {}
  local have = {}
  for _, t in ipairs(spec.tolerations) do have[(t.key or "") .. "/" .. (t.effect or "")] = true end
  for _, k in ipairs { "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable" } do
    if not have[k .. "/NoExecute"] then
      spec.tolerations[#spec.tolerations + 1] = { key = k, operator = "Exists", effect = "NoExecute",
        tolerationSeconds = 300 }
    end
  end
  for _, c in ipairs(spec.containers or {}) do
    c.imagePullPolicy = c.imagePullPolicy or ((c.image or ""):find(":latest$") or not (c.image or ""):find(":[^/]+$"))
      and "Always" or "IfNotPresent"
    c.terminationMessagePath = c.terminationMessagePath or "/dev/termination-log"
    c.terminationMessagePolicy = c.terminationMessagePolicy or "File"
  end
  local l = M.copy(tm.labels or {})
  for k, v in pairs(labels or {}) do l[k] = v end
  local md = { namespace = owner.metadata.namespace, labels = l, annotations = tm.annotations and M.copy(tm.annotations),
    ownerReferences = { M.owner_ref(owner) } }
  if generate then
    -- the API server's generateName suffix: 5 characters of this alphabet
    local suffix = {}
    for i = 1, 5 do
      local d = math.random(1, #SAFE)
      suffix[i] = SAFE:sub(d, d)
    end
    md.generateName, md.name = name, name .. table.concat(suffix)
  else
    md.name = name
  end
  return { apiVersion = "v1", kind = "Pod", metadata = md, spec = spec, status = { phase = "Pending" } }
end

-- key(obj) -> "namespace/name", the queue key of a namespaced object
function M.key(obj) return obj.metadata.namespace .. "/" .. obj.metadata.name end

-- nz(n) -> n, or nil for 0 (status counts the API server leaves out at zero)
function M.nz(n) return n > 0 and n or nil end

return M
