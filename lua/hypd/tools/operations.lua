-- operation_list, operation_get, operation_cancel: the operations hypd ran
-- or runs, whichever front end started them.
local errors = require "hypd.errors"
local op = require "hypd.op"
local tool = require "hypd.tool"

local OP_ID = { type = "string", required = true, pattern = "^op-[0-9a-f]{16}$",
  pattern_help = "an operation id: op- and 16 hex digits", description = "the id a mutating tool returned" }
local WAIT = { type = "integer", minimum = 0, maximum = 300, default = 0,
  description = "wait up to this many seconds for a change (the phase or status; for events, a new event) " ..
    "before answering; 0 answers at once" }

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
    tool = { type = "string", pattern = "^[a-z][a-z0-9_]*$",
      pattern_help = "a tool name (snake_case)", description = "only operations of this tool" },
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
  params = { operation_id = OP_ID,
    wait_seconds = WAIT },
  result = VIEW,
  run = function(_, p)
    local rec = op.get(p.operation_id)
    if not rec then errors.raise("NOT_FOUND", "no operation " .. p.operation_id, { field = "operation_id" }) end
    if p.wait_seconds and p.wait_seconds > 0 then return op.wait_change(p.operation_id, p.wait_seconds) end
    return op.view(rec)
  end,
}

local EVENT = { type = "object", properties = { seq = { type = "integer" }, at = { type = "number" },
  kind = { type = "string" }, phase = { type = "string" }, status = { type = "string" },
  message = { type = "string" } } }

tool.define {
  name = "operation_list_events",
  summary = "An operation's events: each phase, progress note and its end, oldest first",
  description = "Lists one operation's events after a cursor (after = the last seq you saw; 0 for all): " ..
    "operation.phase, operation.progress notes and the final operation.finished, operation.failed or " ..
    "operation.cancelled. With wait_seconds it answers as soon as a new event exists or the operation has " ..
    "ended, so a follower sees every phase and note with a few calls.",
  kind = "read",
  params = { operation_id = OP_ID, wait_seconds = WAIT,
    after = { type = "integer", minimum = 0, default = 0, description = "the seq of the last event you saw" },
    limit = { type = "integer", minimum = 1, maximum = 1000, default = 200, description = "at most this many" } },
  result = { type = "object", properties = { events = { type = "array", items = EVENT }, next = { type = "integer" },
    status = { type = "string" }, phase = { type = "string" } } },
  run = function(_, p)
    local r, err = op.events(p.operation_id, p.after, p.limit, p.wait_seconds)
    if not r then error(err, 0) end
    return r
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
    pattern_help = "an operation id: op- and 16 hex digits", description = "the operation to cancel" } },
  result = VIEW,
  run = function(ctx, p)
    local v, err = op.cancel(p.operation_id, ctx.caller)
    if not v then error(err, 0) end
    return v
  end,
}
