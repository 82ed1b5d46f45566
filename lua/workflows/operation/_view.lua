-- operation/_view: the JSON Schema of an operation as the operation tools
-- show it (hypd.operations views).
return { type = "object", properties = { operation_id = { type = "string" }, tool = { type = "string" },
  status = { type = "string", enum = { "running", "succeeded", "failed", "cancelled" } },
  phase = { type = "string" }, steps = { type = "array" }, result = {}, error = {},
  parent = { type = "string" }, children = { type = "array" }, source = { type = "string" },
  cancelled = { type = "array" }, cancelled_by = { type = "object" }, waited = { type = "object" } } }
