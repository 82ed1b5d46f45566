-- operation_cancel: a person's or an agent's request to stop an operation.
local P = require "_params"

return tool {
  name = "operation_cancel",
  summary = "Cancel a running operation at its next step boundary",
  description = "Asks a running operation to stop. It stops at its next wait or step boundary, keeps what it " ..
    "made (a later call of the same tool reuses it) and records status cancelled with the phase it stopped in. " ..
    "The answer is the operation as it stopped; follow it with operation_get (its status tool).",
  kind = "mutating",
  status_tool = "operation_get",
  audit = false, -- the operation layer records it, whichever front end asks
  params = P.form({ "operation_id" },
    {},
    { operation_id = P.with(P.operation_id, { required = true, description = "the operation to cancel" }) }),
  result = require "operation._view",
  run = function(_, p)
    local v, err = hypd.operations.cancel(p.operation_id)
    if not v then error(err, 0) end
    return v
  end,
}
