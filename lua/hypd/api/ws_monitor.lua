-- hypd.api.ws_monitor: the /ws topic monitor:<cluster>. A subscriber gets
-- {type = "event", topic = "monitor:<cluster>", event = {kind = "monitor.snapshot",
-- snapshot = <monitor_get_cluster's answer with no filter>}} at once, then
-- whenever the cluster's monitoring cache changes (and the answer with it),
-- at most once every THROTTLE seconds. The snapshot is the tool's answer,
-- called with the subscriber as its caller: authorised as the tool is (a
-- read tool: any scope), under its guard, from the cache the tool keeps.
local dispatch = require "hypd.tool.dispatch"
local json = require "hypd.json"
local kcache = require "hypd.k8s.cache"
local registry = require "hypd.tool.registry"
local sched = require "hypd._sched"
local task = require "hypd.task"

local M = {}
M.THROTTLE = 2 -- seconds between two snapshots of one subscription
M.QUIET = 30 -- seconds a subscription waits for a change before it looks again
M.TOOL = "monitor_get_cluster"

-- cluster(topic) -> the cluster a monitor topic names, or nil
function M.cluster(topic)
  local name = topic:match("^monitor:(.+)$")
  if name and name:match("^%w[%w_%-]*$") and #name <= 100 then return name end -- EKS' rule
end

local function same(a, b)
  if not a or not b then return false end
  local function strip(s)
    local c = {}
    for k, v in pairs(s) do if k ~= "cache" then c[k] = v end end
    return json.encode(c)
  end
  return strip(a) == strip(b)
end

-- follow(topic, caller, send) -> stop(): sends the topic's snapshots until stopped
function M.follow(topic, caller, send)
  local name = M.cluster(topic)
  local def = registry.get(M.TOOL)
  if not def then return nil, "no " .. M.TOOL .. " tool" end
  local ok, err = registry.allowed(def, caller)
  if not ok then return nil, err.message end
  local stopped = false
  local t = sched.spawn(function()
    local last, region
    while not stopped do
      local c = region and kcache.find(M.TOOL, name, region)
      local before = c and c.version -- a change from here on makes the next snapshot
      local snap, cerr = dispatch.call(M.TOOL, { cluster = name }, caller)
      if stopped then return end
      if not snap then
        send { type = "error", topic = topic, message = tostring(cerr and cerr.message or cerr) }
        return
      end
      if not same(snap, last) then
        send { type = "event", topic = topic, event = { kind = "monitor.snapshot", snapshot = snap } }
        last = snap
      end
      region = snap.region
      c = kcache.find(M.TOOL, name, region)
      before = before or (c and c.version) -- (the first time: now, the snapshot is that fresh)
      task.sleep(M.THROTTLE)
      if c then
        c:touch()
        c:wait_change(before or c.version, M.QUIET) -- at once when it changed since the snapshot
      end
    end
  end, { name = "ws " .. topic, daemon = true })
  return function()
    stopped = true
    sched.cancel(t)
  end
end

return M
