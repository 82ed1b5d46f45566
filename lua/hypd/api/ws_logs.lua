-- hypd.api.ws_logs: live log streams on /ws (hypd.logstream underneath).
--
--   client -> {"type": "logs.follow", "id": "<client-chosen id>", "cluster"?, "region"?, "namespace"?,
--              "kind": "training_job|job|deployment|inference|pod", "name": "...", "container"?, "tail"?}
--   server -> {"type": "logs.line", "id", "pod", "container", "time", "line"}   (in order per pod)
--   server -> {"type": "logs.end", "id", "reason": "completed|deleted|stopped|error", "message"?}
--   client -> {"type": "logs.stop", "id"}          (answered by logs.end reason "stopped")
--   server -> {"type": "error", "id", "message"}   (a refused follow or stop)
--
-- A follow is the tool job_get_logs (tail = 0) called with the connection's
-- token (scope read or more): the same parameters, validation and
-- guardrails, and the same pods. tail (default 100, at most 5000) is how
-- many of each container's last lines come first; then lines arrive as
-- they are written. Every subscriber of the same target, on any connection,
-- shares one upstream stream per pod; closing the connection stops its
-- follows.
local logstream = require "hypd.logstream"
local json = require "hypd.json"
local dispatch = require "hypd.tool.dispatch"
local log = require "hypd.log"

local M = {}
M.MAX_FOLLOWS = 32 -- follows one connection may have open

local FIELDS = { cluster = "string", region = "string", namespace = "string", kind = "string", name = "string",
  container = "string" }

local Session = {}
Session.__index = Session

-- session(ws, user) -> the logs part of one /ws connection
function M.session(ws, user)
  return setmetatable({ ws = ws, caller = { name = user.name, scope = user.scope, front = "ws" }, subs = {},
    n = 0 }, Session)
end

function Session:send(msg) return self.ws:send(json.encode(msg)) end

function Session:error(id, message)
  self:send { type = "error", id = id, message = message }
end

-- resolver(args) -> a function that resolves the target through job_get_logs
local function resolver(args, caller)
  return function()
    local r, err = dispatch.call("job_get_logs", args, caller)
    if not r and type(err) == "table" and err.code == "CONFLICT" and err.phase then
      -- no pods yet (or none started): wait for them
      return { phase = err.phase, finished = err.finished, cluster = err.cluster, region = err.region, pods = {} }
    end
    return r, err
  end
end

function Session:follow(msg)
  local id = msg.id
  if type(id) ~= "string" or id == "" or #id > 128 then
    return self:error(type(id) == "string" and id:sub(1, 128) or nil, "logs.follow needs an id: a string of 1 " ..
      "to 128 characters the client chooses")
  end
  if self.subs[id] then return self:error(id, "a follow with id " .. id .. " is already open") end
  if self.n >= M.MAX_FOLLOWS then
    return self:error(id, string.format("at most %d follows per connection", M.MAX_FOLLOWS))
  end
  local args = { tail = 0 }
  for k, want in pairs(FIELDS) do
    if msg[k] ~= nil then
      if type(msg[k]) ~= want then return self:error(id, k .. ": must be a " .. want) end
      args[k] = msg[k]
    end
  end
  local tail = msg.tail
  if tail ~= nil and (math.type(tail) ~= "integer" or tail < 0 or tail > logstream.TAIL_MAX) then
    return self:error(id, "tail: an integer from 0 to " .. logstream.TAIL_MAX)
  end
  local resolve = resolver(args, self.caller)
  local r, err = resolve()
  if not r then return self:error(id, tostring(type(err) == "table" and err.message or err)) end
  -- the cluster as resolved now, so a later cluster_switch does not move the follow
  args.cluster, args.region = r.cluster or args.cluster, r.region or args.region
  args.namespace = r.namespace or args.namespace or "default"
  local target = { cluster = args.cluster, region = args.region, namespace = args.namespace, kind = args.kind,
    name = args.name, container = args.container }
  self.n = self.n + 1
  local sub
  sub = logstream.subscribe { target = target, resolve = resolver(args, self.caller), resolved = r, id = id,
    tail = tail, caller = self.caller,
    send = function(m)
      if m.type == "logs.end" and self.subs[id] == sub then self.subs[id], self.n = nil, self.n - 1 end
      self:send(m)
    end }
  if not sub.done then self.subs[id] = sub end
end

function Session:stop(msg)
  local sub = type(msg.id) == "string" and self.subs[msg.id]
  if not sub then
    return self:error(type(msg.id) == "string" and msg.id:sub(1, 128) or nil,
      "no open follow with id " .. tostring(msg.id))
  end
  sub:stop("stopped")
end

-- handle(msg) -> true when msg was a logs.* message (answered); logs.idle:
-- the session's own note that a follower said nothing for a while
function Session:handle(msg)
  local fn = msg.type == "logs.follow" and self.follow or msg.type == "logs.stop" and self.stop
  if not fn then return msg.type == "logs.idle" end
  local ok, err = pcall(fn, self, msg)
  if not ok then
    if type(err) == "table" and err.code == "CANCELLED" then error(err, 0) end
    log.warn("ws", "%s failed: %s", msg.type, tostring(type(err) == "table" and err.message or err))
    self:error(type(msg.id) == "string" and msg.id:sub(1, 128) or nil, msg.type .. " failed: " ..
      tostring(type(err) == "table" and err.code or "INTERNAL"))
  end
  return true
end

-- active() -> the follows open on this connection
function Session:active() return self.n end

-- close(): the connection ended; its follows stop without a message
function Session:close()
  for id, sub in pairs(self.subs) do
    self.subs[id] = nil
    sub:stop(false)
  end
  self.n = 0
end

return M
