-- hypd.k8s.cache: a watch-backed cache of a cluster's objects, one per
-- cluster and spec name, shared by every call that opens it (monitor_get_cluster,
-- the /ws topic monitor:<cluster>). Per kind: one paginated list, each page
-- decoded only as far as the kind's projection (json.decode keep) and
-- reduced to a small record, then a watch from the list's resourceVersion
-- (bookmarks asked for). A 410 Gone relists and replaces the kind's set, so
-- what went during the gap goes; a dropped watch resumes from the last
-- resourceVersion. A kind the server does not serve (a CRD not installed)
-- is "absent", looked for again at each sample. Stopped after IDLE seconds
-- without a use.
--
--   local c = cache.open { name = "monitor", cluster = "demo", region = "us-west-2",
--     kinds = { { name = "pods", api_version = "v1", kind = "Pod", keep = {...},
--                 reduce = function(obj) -> record | nil, fields = "...", split = true } },
--     sample = function(c) -> a table (kept with t, one a SAMPLE, HISTORY of them) }
--   c:ready(timeout) -> true | nil, err   (every kind listed once, or absent)
--   c:items(name) -> key ("ns/name") -> record; c:kind_state(name) -> {state, count, err}
--   c.version (bumped at every change), c.sig (fired at every change),
--   c:wait_change(version, seconds) -> true when c.version moved
--   c:touch(), c:info() -> {state, built_seconds, age_seconds, kinds = {name = count}}
--   c:history() -> the samples, oldest first; cache.find(name, cluster, region) -> c | nil
--   cache.stop_all(), cache.stats() -> {caches, lists, watches} (tests)
--
-- The guard: the cache's tasks are detached from the call that opens it (it
-- outlives the call) and run under a guard of their own, made from the
-- guard of that call (hypd.tool.guard.new{tool = its definition}): every
-- list and watch passes the chokepoint as that read tool's declared
-- list/watch, audited under its name with the caller "hypd.k8s.cache". A
-- read tool that does not declare list and watch cannot open one.
local core = require "hypd.core"
local errors = require "hypd.errors"
local guard = require "hypd.tool.guard"
local k8s = require "hypd.k8s"
local log = require "hypd.log"
local readonly = require "hypd._readonly"
local sched = require "hypd._sched"
local task = require "hypd.task"

local M = {}
M.IDLE = 600 -- seconds without a use before a cache stops
M.SAMPLE = 60 -- seconds between samples (history)
M.HISTORY = 60 -- samples kept (an hour)
M.PAGE = 500 -- objects per list page (as kubectl; 2,000 saved ~10% of a cold build for 60 MB more RSS)

local caches = {}
local counts = { lists = 0, watches = 0 }

local C = {}
C.__index = C

local function key_of(name, cluster, region) return name .. "|" .. tostring(region) .. "|" .. cluster end

local function okey(obj)
  local md = obj.metadata or {}
  return (md.namespace or "") .. "/" .. tostring(md.name)
end

function C:changed()
  self.version = self.version + 1
  self.sig:fire()
end

-- same(a, b) -> true when two records hold the same values (a change
-- that leaves a record as it was, a node's heartbeat, is no change)
local function same(a, b)
  if a == b then return true end
  if type(a) ~= "table" or type(b) ~= "table" then return false end
  for key, v in pairs(a) do if not same(v, b[key]) then return false end end
  for key in pairs(b) do if a[key] == nil then return false end end
  return true
end

-- list_into(k, fresh, namespace) -> the list's resourceVersion (a number
-- when it is one): every page of k (in namespace, or everywhere) into fresh
function C:list_into(k, fresh, namespace)
  counts.lists = counts.lists + 1
  local items, meta = self.conn:list(k.api_version, k.kind, { all_namespaces = namespace == nil,
    namespace = namespace, fields = k.fields, labels = k.labels, limit = M.PAGE, keep = k.keep, each = function(obj)
      local rec = k.reduce(obj)
      if rec ~= nil then fresh[okey(obj)] = rec end
    end })
  if not items then error(meta, 0) end
  return meta.resourceVersion
end

-- relist(k) -> resourceVersion: the lists replacing k's set. A kind marked
-- split (pods: most of a cluster's bytes) is listed namespace by namespace,
-- SPLIT lists at a time, so the API server answers one while this process
-- decodes another; the watch then starts from the oldest of their
-- resourceVersions (what changed after it is replayed: upserts and deletes
-- that end in the state the later lists saw)
M.SPLIT = 4
function C:relist(k)
  local set = self.sets[k.name]
  local fresh = {}
  set.lists = set.lists + 1
  local namespaces
  if k.split then
    local ok, list = pcall(self.conn.list, self.conn, "v1", "Namespace", { keep = { metadata = { name = true } } })
    if ok and list then
      namespaces = {}
      for _, n in ipairs(list) do namespaces[#namespaces + 1] = n.metadata.name end
    end
  end
  local rv
  if not namespaces or #namespaces < 2 then
    rv = self:list_into(k, fresh)
  else
    local next_ns, oldest, failed = 1, nil, nil
    local workers = {}
    for w = 1, math.min(M.SPLIT, #namespaces) do
      workers[w] = task.spawn(function()
        while not failed and next_ns <= #namespaces do
          local ns = namespaces[next_ns]
          next_ns = next_ns + 1
          local ok, r = pcall(self.list_into, self, k, fresh, ns)
          if not ok then failed = r return end
          local n = tonumber(r)
          if n and (not oldest or n < oldest) then oldest = n end
        end
      end, { name = "k8s cache list " .. k.kind, daemon = true })
    end
    for _, w in ipairs(workers) do w:wait() end
    if failed then error(failed, 0) end
    rv = oldest and tostring(oldest)
  end
  set.items = fresh
  set.state = "watching"
  set.err = nil
  self:changed()
  return rv
end

-- follow(k): list, then watch until the cache stops; errors wait and retry
function C:follow(k)
  local set = self.sets[k.name]
  while not self.stopped do
    local ok, err = pcall(function()
      local known, kerr = self.conn:kind(k.api_version, k.kind)
      if not known then
        if kerr.code == "NotFound" then
          if set.state ~= "absent" then
            set.state, set.items = "absent", {}
            self:changed()
          end
          return "absent"
        end
        error(kerr, 0)
      end
      local rv = self:relist(k)
      counts.watches = counts.watches + 1
      self.conn:watch(k.api_version, k.kind, { all_namespaces = true, fields = k.fields, labels = k.labels,
        resource_version = rv, keep = k.keep,
        relist = function()
          if self.stopped then return nil end
          return self:relist(k)
        end }, function(ev)
          if self.stopped then return false end
          local id = okey(ev.object)
          local rec = ev.type ~= "DELETED" and k.reduce(ev.object) or nil
          if not same(set.items[id], rec) then
            set.items[id] = rec
            self:changed()
          end
          return true
        end)
    end)
    if self.stopped then return end
    if ok and err == "absent" then
      self.absent_sig:wait(M.SAMPLE) -- looked for again at the next sample
    elseif not ok then
      set.state, set.err = set.state == "listing" and "error" or set.state, tostring(err and err.message or err)
      log.warn("k8s", "cache %s %s: %s; retrying", self.cluster, k.kind, set.err)
      self:changed()
      task.sleep(5)
    end
  end
end

function C:built()
  for _, s in pairs(self.sets) do
    if s.state == "listing" then return false end -- (an error is reported, not waited for)
  end
  return true
end

-- ready(timeout) -> true | nil, err: every kind listed once (or absent)
function C:ready(timeout)
  local deadline = core.now() + (timeout or 60)
  while not self:built() do
    local left = deadline - core.now()
    if left <= 0 then
      local why = {}
      for name, s in pairs(self.sets) do
        if s.state ~= "watching" and s.state ~= "absent" then why[#why + 1] = name .. ": " .. tostring(s.err or s.state) end
      end
      table.sort(why)
      return nil, errors.new("TIMEOUT", "the cache of " .. self.cluster .. " is not built yet (" ..
        table.concat(why, "; ") .. ")")
    end
    self.sig:wait(left)
  end
  if not self.built_seconds then
    self.built_seconds = core.mono() - self.started_mono
    self:take_sample() -- the first point of the history, at once
  end
  return true
end

function C:items(name) return (self.sets[name] or {}).items or {} end

function C:kind_state(name)
  local s = self.sets[name]
  if not s then return nil end
  return { state = s.state, err = s.err, lists = s.lists }
end

function C:touch() self.used = core.now() end

-- wait_change(version, seconds) -> true when the cache changed after version
function C:wait_change(version, seconds)
  local deadline = core.now() + seconds
  while self.version == version and not self.stopped do
    local left = deadline - core.now()
    if left <= 0 then return false end
    self.sig:wait(left)
  end
  return self.version ~= version
end

function C:info()
  local kinds = {}
  for name, s in pairs(self.sets) do
    if s.state ~= "absent" then
      if s.counted ~= self.version then -- counted once a version
        local n = 0
        for _ in pairs(s.items) do n = n + 1 end
        s.count, s.counted = n, self.version
      end
      kinds[name] = s.count
    end
  end
  return { state = self.built_seconds and "warm" or "cold", built_seconds = self.built_seconds,
    age_seconds = core.now() - self.started, kinds = kinds }
end

function C:history()
  local out = {}
  for i, s in ipairs(self.samples) do out[i] = s end
  return out
end

function C:take_sample()
  if not self.spec.sample or not self:built() then return end
  local ok, s = pcall(self.spec.sample, self:facade())
  if not ok or type(s) ~= "table" then return end
  s.t = core.now()
  self.samples[#self.samples + 1] = s
  while #self.samples > M.HISTORY do table.remove(self.samples, 1) end
end

-- facade() -> what a playbook holds of the cache: functions only, in a
-- read-only view (the records are the opening tool's own: read, not changed)
function C:facade()
  if self.view then return self.view end
  local c = self
  self.view = readonly.view({
    ready = function(timeout) return c:ready(timeout) end,
    items = function(kind) return c:items(kind) end,
    kind_state = function(kind) return c:kind_state(kind) end,
    version = function() return c.version end,
    wait_change = function(version, seconds) return c:wait_change(version, seconds) end,
    info = function() return c:info() end,
    history = function() return c:history() end,
    touch = function() c:touch() end,
    conn = function() return c.conn end,
  }, "hypd.k8s.cache")
  return self.view
end

function C:stop()
  if self.stopped then return end
  self.stopped = true
  caches[self.key] = nil
  for _, t in ipairs(self.tasks) do sched.cancel_tree(t) end
  self.sig:fire()
end

-- the sampler: a sample a minute, absent kinds looked for again, and the
-- stop once unused for IDLE seconds
function C:tick()
  self:ready(3600)
  while not self.stopped do
    task.sleep(M.SAMPLE)
    if core.now() - self.used > M.IDLE then
      log.info("k8s", "cache of %s: unused for %ds; stopping", self.cluster, M.IDLE)
      self:stop()
      return
    end
    self:take_sample()
    self.absent_sig:fire()
  end
end

-- open(spec) -> the cache (started on the first open, shared after)
function M.open(spec)
  local key = key_of(spec.name, spec.cluster, spec.region)
  local c = caches[key]
  if c then
    c:touch()
    return c
  end
  local g = guard.current()
  local def = g and g.tool
  if def then
    local verbs = {}
    for _, v in ipairs(def.k8s or {}) do verbs[v] = true end
    if not (verbs.list and verbs.watch) then
      errors.raise("GUARDRAIL", string.format("%s may not open a Kubernetes cache: it lists and watches, and the " ..
        "tool declares %s", tostring(def.name), table.concat(def.k8s or {}, ", ")),
        { tool = def.name, action = "kubernetes list/watch", rule = "a cache lists and watches" })
    end
  end
  local conn = spec.conn or k8s.connect { cluster = spec.cluster, region = spec.region, endpoint_url = spec.endpoint_url }
  c = setmetatable({ key = key, spec = spec, cluster = spec.cluster, region = spec.region, conn = conn, sets = {},
    version = 0, sig = task.signal(), absent_sig = task.signal(), samples = {}, tasks = {},
    started = core.now(), started_mono = core.mono(), used = core.now() }, C)
  caches[key] = c
  local own = def and guard.new { tool = def, caller = { name = "hypd.k8s.cache", front = "cache" } }
  local function run(fn, ...)
    if own then return guard.with(own, fn, ...) end
    return fn(...)
  end
  for _, k in ipairs(spec.kinds) do
    c.sets[k.name] = { state = "listing", items = {}, lists = 0 }
  end
  for _, k in ipairs(spec.kinds) do
    c.tasks[#c.tasks + 1] = sched.spawn(function() run(C.follow, c, k) end,
      { name = "k8s cache " .. spec.cluster .. " " .. k.kind, detached = true, daemon = true })
  end
  c.tasks[#c.tasks + 1] = sched.spawn(function() run(C.tick, c) end,
    { name = "k8s cache " .. spec.cluster .. " sampler", detached = true, daemon = true })
  return c
end

function M.find(name, cluster, region) return caches[key_of(name, cluster, region)] end

function M.stop_all()
  local all = {}
  for _, c in pairs(caches) do all[#all + 1] = c end
  for _, c in ipairs(all) do c:stop() end
end

function M.stats()
  local n = 0
  for _ in pairs(caches) do n = n + 1 end
  return { caches = n, lists = counts.lists, watches = counts.watches }
end

return M
