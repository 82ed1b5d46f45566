-- operation_list: the operations hypd ran or runs, whichever front end started them.
local P = require "_params"
local VIEW = require "operation._view"

return tool {
  name = "operation_list",
  summary = "List operations, newest first",
  description = "Lists the operations (mutating tool calls) hypd has run or is running, newest first, with " ..
    "their tool, target, status and current phase. Filter by status or tool. Use operation_get for one " ..
    "operation's steps and timings.",
  kind = "read",
  params = P.form({},
    { "limit", "status", "tool" },
    {
    status = { type = "string", enum = { "running", "succeeded", "failed", "cancelled" },
      description = "only operations in this status" },
    tool = { type = "string", pattern = "^[a-z][a-z0-9_]*$", pattern_help = "a tool name (snake_case)",
      description = "only operations of this tool" },
    limit = { type = "integer", minimum = 1, maximum = 500, default = 50, description = "at most this many" },
  }),
  result = { type = "object", properties = { operations = { type = "array", items = VIEW } } },
  run = function(_, p)
    return { operations = hypd.operations.list { status = p.status, tool = p.tool, limit = p.limit } }
  end,
}
