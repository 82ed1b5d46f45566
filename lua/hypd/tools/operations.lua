-- operation_list, operation_get, operation_cancel: the operations hypd ran
-- or runs, whichever front end started them.
local errors = require "hypd.errors"
local op = require "hypd.op"
local tool = require "hypd.tool"

local VIEW = { type = "object", properties = { operation_id = { type = "string" }, tool = { type = "string" },
  status = { type = "string", enum = { "running", "succeeded", "failed", "cancelled" } },
  phase = { type = "string" }, steps = { type = "array" }, result = {}, error = {} } }

tool.define {
  name = "operation_list",
  summary = "List operations, newest first",
  description = "Lists the operations (mutating tool calls) hypd has run or is running, newest first, with " ..
    "their tool, target, status and current phase. Filter by status or tool. Use operation_get for one " ..
    "operation's steps and timings.",
  kind = "read",
  params = {
    status = { type = "string", enum = { "running", "succeeded", "failed", "cancelled" },
      description = "only operations in this status" },
    tool = { type = "string", pattern = "^[a-z][a-z0-9_]*$", description = "only operations of this tool" },
    limit = { type = "integer", minimum = 1, maximum = 500, default = 50, description = "at most this many" },
  },
  result = { type = "object", properties = { operations = { type = "array", items = VIEW } } },
  run = function(_, p)
    local out = {}
    for i, rec in ipairs(op.list { status = p.status, tool = p.tool, limit = p.limit }) do out[i] = op.view(rec) end
    return { operations = out }
  end,
}

tool.define {
  name = "operation_get",
  summary = "One operation: status, phase, steps with timings, result or error",
  description = "Shows one operation by id: its status (running, succeeded, failed, cancelled), the phase it " ..
    "is in, each step with start, finish and duration, and the result or the error.",
  kind = "read",
  params = { operation_id = { type = "string", required = true, pattern = "^op-[0-9a-f]{16}$",
    description = "the id a mutating tool returned" } },
  result = VIEW,
  run = function(_, p)
    local rec = op.get(p.operation_id)
    if not rec then errors.raise("NOT_FOUND", "no operation " .. p.operation_id, { field = "operation_id" }) end
    return op.view(rec)
  end,
}

tool.define {
  name = "operation_cancel",
  summary = "Cancel a running operation at its next step boundary",
  description = "Asks a running operation to stop. It stops at its next wait or step boundary, keeps what it " ..
    "made (a later call of the same tool reuses it) and records status cancelled with the phase it stopped in.",
  kind = "mutating",
  audit = false, -- op.cancel records it, whichever front end asks
  params = { operation_id = { type = "string", required = true, pattern = "^op-[0-9a-f]{16}$",
    description = "the operation to cancel" } },
  result = VIEW,
  run = function(ctx, p)
    local v, err = op.cancel(p.operation_id, ctx.caller)
    if not v then error(err, 0) end
    return v
  end,
}
