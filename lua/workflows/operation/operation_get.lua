-- operation_get: one operation, optionally waiting for its next change.
local P = require "_params"

return tool {
  name = "operation_get",
  summary = "One operation: status, phase, steps with timings, result or error",
  description = "Shows one operation by id: its status (running, succeeded, failed, cancelled), the phase it " ..
    "is in, each step with start, finish and duration, the result or the error, and its child operations. " ..
    "With wait_seconds it answers as soon as the phase or status changes, so a follower needs a handful of " ..
    "calls for a long operation.",
  kind = "read",
  params = { operation_id = P.with(P.operation_id, { required = true }), wait_seconds = P.wait_seconds },
  result = require "operation._view",
  run = function(_, p)
    local view = hypd.operations.get(p.operation_id)
    if not view then hypd.errors.raise("NOT_FOUND", "no operation " .. p.operation_id, { field = "operation_id" }) end
    if p.wait_seconds > 0 then return hypd.operations.wait(p.operation_id, p.wait_seconds) end
    return view
  end,
}
