-- operation_list_events: one operation's story, event by event.
local P = require "_params"

local EVENT = { type = "object", properties = { seq = { type = "integer" }, at = { type = "number" },
  kind = { type = "string" }, phase = { type = "string" }, status = { type = "string" },
  message = { type = "string" },
  -- a wait's progress (hypd.tool.kit's poll): what is awaited, what was seen, seconds so far
  wait = { type = "object", properties = { what = { type = "string" }, seen = { type = "string" },
    waited = { type = "number" } } },
  -- a child operation's event relayed to its parent (cluster_create's stages)
  child = { type = "object", properties = { operation_id = { type = "string" }, tool = { type = "string" },
    phase = { type = "string" }, status = { type = "string" } } } } }

return tool {
  name = "operation_list_events",
  summary = "An operation's events: each phase, progress note and its end, oldest first",
  description = "Lists one operation's events after a cursor (after = the last seq you saw; 0 for all): " ..
    "operation.phase, operation.progress notes and the final operation.finished, operation.failed or " ..
    "operation.cancelled. With wait_seconds it answers as soon as a new event exists or the operation has " ..
    "ended, so a follower sees every phase and note with a few calls.",
  kind = "read",
  params = P.form({ "operation_id" },
    { "after", "limit", "wait_seconds" },
    { operation_id = P.with(P.operation_id, { required = true }), wait_seconds = P.wait_seconds,
    after = { type = "integer", minimum = 0, default = 0, description = "the seq of the last event you saw" },
    limit = { type = "integer", minimum = 1, maximum = 1000, default = 200, description = "at most this many" } }),
  result = { type = "object", properties = { events = { type = "array", items = EVENT }, next = { type = "integer" },
    status = { type = "string" }, phase = { type = "string" }, waited = { type = "object" } } },
  run = function(_, p)
    local started = hypd.now()
    local r, err = hypd.operations.events(p.operation_id, p.after, p.limit, p.wait_seconds)
    if not r then error(err, 0) end
    if p.wait_seconds > 0 then
      -- the convention of every wait_seconds (workflows _wait): which way it ended
      local seconds = math.floor((hypd.now() - started) * 1000 + 0.5) / 1000
      r.waited = { seconds = seconds, ended = #r.events > 0 and "changed" or r.status ~= "running" and "settled" or
        "timeout" }
    end
    return r
  end,
}
