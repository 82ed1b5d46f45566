-- hypd.logstream: live pod logs, shared. A subscriber follows a target (a
-- workload: training job, job, deployment, inference deployment or pod);
-- every subscriber of the same target shares one group, and every group
-- that needs a pod's container shares ONE upstream: a followed
-- pods/{name}/log?follow=true&timestamps=true through hypd's Kubernetes
-- client.
--
--   local sub = logstream.subscribe {
--     target = {cluster, region, namespace, kind, name, container},
--     resolve = function() -> {finished, pods = {{name, uid, containers = {{name, state}}}}} | nil, err,
--     resolved = <what resolve() answered just now, optional: followed at once>,
--     send = function(msg) end,  -- logs.line / logs.end messages (below)
--     id = "client id", tail = 100, caller = {name, scope, front} }
--   sub:stop()                    -- logs.end reason "stopped"; idempotent
--   logstream.stats()             -> {groups, upstreams, subscribers, follows_opened, reconnects,
--                                     history_reads, lines, deduped}
--
-- Messages: {type = "logs.line", id, pod, container, time, line} (in order
-- per pod's container) and, last, {type = "logs.end", id, reason =
-- completed|deleted|stopped|error, message}.
--
-- An upstream first reads the container's last TAIL_MAX lines (timestamps=
-- true) into a ring, from which each subscriber gets its `tail` (also one
-- who joins later), then follows from the last timestamp it has. When the
-- follow drops (the API server or kubelet ends a long stream, the network
-- breaks) it reconnects with sinceTime = that timestamp (to the second) and
-- drops the lines it already delivered: older than the last one, or the
-- same time and text as one delivered at that time, so nothing is lost or
-- repeated. A follow silent for IDLE seconds is reopened the same way, so a
-- connection that died without an error is noticed.
--
-- A group re-resolves its target POLL seconds after a change (doubling up
-- to POLL_MAX while nothing changes; at once when one of its upstreams
-- ends): new pods (a restarted job's, a deployment's new replica) are
-- followed from their first line. The group ends with completed once its
-- target is finished and every pod it followed has ended, deleted when the
-- target is gone, error after repeated failures. The last subscriber
-- leaving a group stops it; the last group leaving an upstream closes the
-- stream. Lines are never logged; neither are tokens (the EKS token is
-- attached in C).
local errors = require "hypd.errors"
local guard = require "hypd.tool.guard"
local k8s = require "hypd.k8s"
local log = require "hypd.log"
local task = require "hypd.task"

local M = {}
M.TAIL = 100              -- default tail of a subscriber
M.TAIL_MAX = 5000         -- lines an upstream keeps (and a subscriber may ask for)
M.POLL = 2                -- seconds between re-resolutions of a target after a change
M.POLL_MAX = 16           -- ... doubling up to this while nothing changes
M.HISTORY_BYTES = 4 << 20 -- limitBytes of an upstream's first read
M.FAILURES = 8            -- failed attempts in a row before an upstream or group gives up
M.IDLE = 300              -- a follow silent this long is reopened (a dead connection shows no error)

local groups, upstreams = {}, {}
local counters = { follows_opened = 0, reconnects = 0, history_reads = 0, lines = 0, deduped = 0 }

-- the guardrail an upstream runs under: a read-only caller of the logs
local GUARD_TOOL = { name = "logs.follow", kind = "read", aws = { "eks:DescribeCluster" }, k8s = { "get", "logs" } }

local key, parse = k8s.time_key, k8s.log_line
M.key = key

local function since_time(k) return k:match("^([^%.]+)") .. "Z" end

local function count(set)
  local n = 0
  for _ in pairs(set) do n = n + 1 end
  return n
end

function M.stats()
  local subs = 0
  for _, g in pairs(groups) do subs = subs + count(g.subs) end
  return { groups = count(groups), upstreams = count(upstreams), subscribers = subs,
    follows_opened = counters.follows_opened, reconnects = counters.reconnects,
    history_reads = counters.history_reads, lines = counters.lines, deduped = counters.deduped }
end

-- upstreams -----------------------------------------------------------------

local Up = {}
Up.__index = Up

-- accept(u, ts, text) -> true when the line is new (see the header)
local function accept(u, ts, text)
  local k = key(ts)
  if u.last then
    if k < u.last then counters.deduped = counters.deduped + 1; return false end
    if k == u.last then
      local n = u.skip[text]
      if n and n > 0 then
        u.skip[text] = n - 1
        counters.deduped = counters.deduped + 1
        return false
      end
    end
  end
  if k ~= u.last then u.last, u.seen, u.skip = k, {}, {} end
  u.seen[text] = (u.seen[text] or 0) + 1
  return true
end

local function push(u, ts, text)
  local e = { pod = u.pod, container = u.container, time = ts, line = text }
  u.tail = u.tail + 1
  u.ring[u.tail] = e
  if u.tail - u.head + 1 > M.TAIL_MAX then
    u.ring[u.head] = nil
    u.head = u.head + 1
  end
  if u.ready then
    counters.lines = counters.lines + 1
    for g in pairs(u.groups) do g:line(e) end
  end
end

-- newest(n) -> the newest n lines of the ring
function Up:newest(n)
  local out = {}
  for i = math.max(self.head, self.tail - n + 1), self.tail do out[#out + 1] = self.ring[i] end
  return out
end

local function take(u, text)
  for line in tostring(text):gmatch("[^\n]+") do
    local ts, body = parse(line)
    if ts and accept(u, ts, body) then push(u, ts, body) end
  end
end

local function message(err) return tostring(type(err) == "table" and err.message or err) end

local function starting(err)
  local m = message(err)
  return m:find("waiting to start", 1, true) or m:find("ContainerCreating", 1, true) or
    m:find("PodInitializing", 1, true)
end

-- state(u, conn) -> "running" | "ended" (the pod or, never to restart, the
-- container finished) | "gone"
-- (the pod was deleted or replaced) | nil, err
local function state(u, conn)
  local pod, err = conn:get("v1", "Pod", u.pod, { namespace = u.ns })
  if not pod then
    if type(err) == "table" and (err.code == "NotFound" or err.status == 404) then return "gone" end
    return nil, err
  end
  if pod.metadata.uid ~= u.uid then return "gone" end
  local phase = (pod.status or {}).phase
  if phase == "Succeeded" or phase == "Failed" then return "ended" end
  -- a container that finished for good in a running pod (a sidecar, a pod
  -- whose other containers still run): it writes no more
  if (pod.spec or {}).restartPolicy == "Never" then
    for _, cs in ipairs((pod.status or {}).containerStatuses or {}) do
      if cs.name == u.container and cs.state and cs.state.terminated then return "ended" end
    end
  end
  return "running"
end

function Up:run()
  local failures = 0
  local function backoff(err)
    failures = failures + 1
    if failures > M.FAILURES then error(err, 0) end
    task.sleep(math.min(5, 0.2 * 2 ^ (failures - 1)))
  end
  local conn
  while not conn do
    local ok, c = pcall(k8s.connect, { cluster = self.cluster, region = self.region })
    if ok then conn = c else backoff(c) end
  end
  -- the history: the container's last TAIL_MAX lines
  while not self.ready do
    counters.history_reads = counters.history_reads + 1
    local text, err = conn:logs(self.pod, { namespace = self.ns, container = self.container, tail = M.TAIL_MAX,
      timestamps = true, limit_bytes = M.HISTORY_BYTES })
    if text then
      take(self, text)
      self.ready = true
      for g in pairs(self.groups) do g:ready(self) end
    else
      local st = state(self, conn)
      if st == "gone" then return "deleted" end
      if starting(err) then task.sleep(1) else backoff(err) end
    end
  end
  failures = 0
  local quiet = 0 -- follows in a row that ended cleanly with nothing new (a container restarting)
  while true do
    local fresh = 0
    self.skip = {}
    for k, v in pairs(self.seen or {}) do self.skip[k] = v end
    local s, err = conn:log_stream(self.pod, { namespace = self.ns, container = self.container, timestamps = true,
      since_time = self.last and since_time(self.last) or nil, idle_timeout = M.IDLE })
    if s then
      counters.follows_opened = counters.follows_opened + 1
      self.follows = self.follows + 1
      if self.follows > 1 then counters.reconnects = counters.reconnects + 1 end
      for line in s:lines() do
        local ts, body = parse(line)
        if ts and accept(self, ts, body) then
          push(self, ts, body)
          fresh = fresh + 1
        end
        failures = 0
      end
      err = s.err
      s:close()
    end
    local st, serr = state(self, conn)
    if st == "gone" then return "deleted" end
    if st == "ended" then
      -- what the last follow may not have carried (it dropped near the end)
      self.skip = {}
      for k, v in pairs(self.seen or {}) do self.skip[k] = v end
      local text = conn:logs(self.pod, { namespace = self.ns, container = self.container, timestamps = true,
        since_time = self.last and since_time(self.last) or nil, limit_bytes = M.HISTORY_BYTES })
      if text then take(self, text) end
      return "completed"
    end
    local idle = err and err.code == "TIMEOUT" -- silent for M.IDLE: reopened at once, not a failure
    quiet = (fresh == 0 and not err) and quiet + 1 or 0
    if not st then backoff(serr)
    elseif idle then log.debug("logstream", "the log of %s/%s (%s) was silent; reopening", self.ns, self.pod,
      self.container)
    elseif err and starting(err) then task.sleep(1)
    elseif quiet > 0 then task.sleep(math.min(5, 0.5 * 2 ^ (quiet - 1)))
    elseif err then
      log.debug("logstream", "the log of %s/%s (%s) dropped: %s; resuming from %s", self.ns, self.pod,
        self.container, tostring(err.code), tostring(self.last))
      -- a stream that carried lines dropped: at once; one that did not: later and later
      if fresh == 0 then backoff(err) end
    end
  end
end

local function ukey(target, pod, uid, container)
  return table.concat({ target.cluster, target.region or "", target.namespace, pod, uid or "", container }, "|")
end

local function upstream(target, pod, uid, container, caller)
  local k = ukey(target, pod, uid, container)
  local u = upstreams[k]
  if u then return u end
  u = setmetatable({ key = k, cluster = target.cluster, region = target.region, ns = target.namespace, pod = pod,
    uid = uid, container = container, groups = {}, ring = {}, head = 1, tail = 0, ready = false, follows = 0,
    seen = {}, skip = {} }, Up)
  upstreams[k] = u
  u.task = task.spawn(function()
    local ok, reason = pcall(guard.with, guard.new { tool = GUARD_TOOL, caller = caller }, Up.run, u)
    if upstreams[k] == u then upstreams[k] = nil end
    if not ok and not (type(reason) == "table" and reason.code == "CANCELLED") then
      u.error = errors.is(reason) and reason or errors.new("INTERNAL", tostring(reason))
      log.warn("logstream", "following %s/%s (%s) failed: %s", u.ns, u.pod, u.container, message(reason))
      reason = "error"
    end
    u.ended = ok and reason or "error"
    for g in pairs(u.groups) do g.wake:fire() end
  end, { name = "logs " .. target.namespace .. "/" .. pod .. "/" .. container })
  return u
end

-- detach(u, g): the group no longer needs the upstream; the last one out
-- closes it
local function detach(u, g)
  u.groups[g] = nil
  if next(u.groups) == nil and not u.ended then
    if upstreams[u.key] == u then upstreams[u.key] = nil end
    u.task:cancel("nobody follows the log any more")
  end
end

-- groups ----------------------------------------------------------------------

local Group = {}
Group.__index = Group

local function send(sub, msg)
  local ok, err = pcall(sub.send, msg)
  if not ok then log.debug("logstream", "a subscriber's send failed: %s", tostring(err)) end
end

local function line_msg(sub, e)
  return { type = "logs.line", id = sub.id, pod = e.pod, container = e.container, time = e.time, line = e.line }
end

function Group:line(e)
  for sub in pairs(self.subs) do send(sub, line_msg(sub, e)) end
end

-- ready(u): u read its history; the group's subscribers get their tail of it
function Group:ready(u)
  for sub in pairs(self.subs) do
    for _, e in ipairs(u:newest(sub.tail)) do send(sub, line_msg(sub, e)) end
  end
end

-- history(sub) -> the tail of every ready upstream, interleaved by time
function Group:history(sub)
  local all = {}
  for _, u in pairs(self.ups) do
    if u.ready and u.groups[self] then
      for _, e in ipairs(u:newest(sub.tail)) do all[#all + 1] = e end
    end
  end
  for i, e in ipairs(all) do e.k, e.i = key(e.time), i end
  table.sort(all, function(a, b) if a.k ~= b.k then return a.k < b.k end return a.i < b.i end)
  for _, e in ipairs(all) do send(sub, line_msg(sub, e)) end
end

-- finish(reason, message): every subscriber gets logs.end; the group stops
function Group:finish(reason, msg)
  if self.closed then return end
  for sub in pairs(self.subs) do
    sub.done = true
    send(sub, { type = "logs.end", id = sub.id, reason = reason, message = msg })
  end
  self.subs = {}
  self:close()
end

function Group:close()
  if self.closed then return end
  self.closed = true
  if groups[self.key] == self then groups[self.key] = nil end
  for _, u in pairs(self.ups) do detach(u, self) end
  if self.task and task.current() ~= self.task then self.task:cancel("the log stream was stopped") end
end

-- attach(r): follows every started container of the resolved pods
function Group:attach(r)
  for _, pod in ipairs(r.pods or {}) do
    for _, c in ipairs(pod.containers or {}) do
      if c.state ~= "waiting" and (not self.target.container or c.name == self.target.container) then
        -- a container followed once is never followed again (its upstream
        -- may have ended: the pod finished); a new pod has a new uid
        if not self.ups[ukey(self.target, pod.name, pod.uid, c.name)] then
          local u = upstream(self.target, pod.name, pod.uid, c.name, self.caller)
          self.ups[u.key] = u
          u.groups[self] = true
          if u.ready then self:ready(u) end
        end
      end
    end
  end
end

-- signature(r) -> what a resolution says, to see whether anything changed
local function signature(r)
  local parts = { tostring(r.phase), tostring(r.finished) }
  for _, pod in ipairs(r.pods or {}) do
    parts[#parts + 1] = tostring(pod.name) .. "/" .. tostring(pod.uid)
    for _, c in ipairs(pod.containers or {}) do parts[#parts + 1] = tostring(c.name) .. "=" .. tostring(c.state) end
  end
  return table.concat(parts, " ")
end

function Group:run()
  local failures, every = 0, M.POLL
  while not self.closed do
    local ok, r, err = true, self.initial, nil
    self.initial = nil
    if not r then ok, r, err = pcall(self.resolve) end
    if not ok then r, err = nil, r end
    if not r then
      if type(err) == "table" and err.code == "NOT_FOUND" then
        return self:finish("deleted", message(err))
      end
      failures = failures + 1
      if failures > M.FAILURES then return self:finish("error", message(err)) end
    else
      failures = 0
      local sig = signature(r)
      every = sig == self.sig and math.min(M.POLL_MAX, every * 2) or M.POLL
      self.sig = sig
      self:attach(r)
      local all_ended = true
      for _, u in pairs(self.ups) do if not u.ended then all_ended = false end end
      if r.finished and all_ended then return self:finish("completed", r.phase and ("the " ..
        tostring(self.target.kind):gsub("_", " ") .. " is " .. tostring(r.phase)) or nil) end
      local broken
      for _, u in pairs(self.ups) do if u.ended == "error" then broken = u end end
      if broken and all_ended and next(self.ups) then
        return self:finish("error", "following " .. broken.pod .. " failed: " .. message(broken.error))
      end
    end
    if self.wake:wait(every) then every = M.POLL end -- an upstream ended: look again soon
  end
end

-- subscribe(opts) -> sub (see the header)
function M.subscribe(o)
  local t = o.target
  local tail = math.max(0, math.min(M.TAIL_MAX, math.tointeger(o.tail) or M.TAIL))
  local k = table.concat({ t.cluster, t.region or "", t.namespace, t.kind, t.name, t.container or "" }, "|")
  local g = groups[k]
  local sub = { id = o.id, tail = tail, send = o.send }
  if not g then
    g = setmetatable({ key = k, target = t, resolve = o.resolve, caller = o.caller, subs = {}, ups = {},
      wake = task.signal(), initial = o.resolved }, Group)
    groups[k] = g
    g.subs[sub] = true
    sub.group = g
    -- the pods known now are followed at once (the group's task resolves again later)
    if o.resolved then g:attach(o.resolved) end
    g.task = task.spawn(function()
      local ok, err = pcall(Group.run, g)
      if not ok and not (type(err) == "table" and err.code == "CANCELLED") then
        g:finish("error", message(err))
      end
    end, { name = "logs group " .. t.kind .. "/" .. t.name })
  else
    g.subs[sub] = true
    sub.group = g
    g:history(sub)
  end
  return setmetatable(sub, { __index = { stop = function(self, reason, msg)
    if self.done then return false end
    self.done = true
    local grp = self.group
    grp.subs[self] = nil
    if reason ~= false then send(self, { type = "logs.end", id = self.id, reason = reason or "stopped", message = msg }) end
    if next(grp.subs) == nil then grp:close() end
    return true
  end } })
end

return M
