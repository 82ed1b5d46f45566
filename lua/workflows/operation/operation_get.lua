-- operation_get: one operation, optionally waiting for its next change.
local P = require "_params"
local R = require "_running"
local W = require "_wait"

return tool {
  name = "operation_get",
  summary = "One operation: status, phase, steps with timings, result or error",
  description = "Shows one operation by id: its status (running, succeeded, failed, cancelled), the phase it " ..
    "is in, each step with start, finish and duration, the result or the error, and its child operations. " ..
    "With wait_seconds it answers at once when the operation has ended, else as soon as its phase or " ..
    "status changes, else when the time is up; waited says which (the children show each child's phase).",
  kind = "read",
  params = P.form({ "operation_id" },
    { "wait_seconds" },
    { operation_id = P.with(P.operation_id, { required = true }), wait_seconds = P.wait_seconds }),
  result = require "operation._view",
  run = function(_, p)
    local view = hypd.operations.get(p.operation_id)
    if not view then hypd.errors.raise("NOT_FOUND", "no operation " .. p.operation_id, { field = "operation_id" }) end
    local function read()
      local v = hypd.operations.get(p.operation_id)
      v.running_child = R.short(v).running_child
      return v
    end
    -- the store is local: a change is seen within half a second
    local out, waited = W.follow(p.wait_seconds, { read = read, every = 0.5,
      settled = function(v) return v.status ~= "running" end,
      -- its own phase and status (a follower sees each child in children;
      -- cluster_get_creation_status follows the stages too)
      signature = function(v) return tostring(v.status) .. "/" .. tostring(v.phase) end })
    out.waited = waited
    return out
  end,
}
