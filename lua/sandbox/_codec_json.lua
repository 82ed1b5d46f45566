-- sandbox._codec_json: the server side of awsJson1.0/1.1 (SageMaker, FSx,
-- SSM, CloudWatch Logs): the operation named by X-Amz-Target
-- ("SageMaker.CreateCluster"), the input as one JSON object, the output as
-- one JSON object, errors as {"__type": code, "message": ...}.
local json = require "hypd.json"
local V = require "sandbox._codec_value"

local M = {}

local function wire(m) return m.name or m[1] end
M.wire = wire

-- body_object(body) -> the JSON object of a request body ("" is {}), or
-- nil, message
function M.body_object(body)
  if body == nil or body:match("^%s*$") then return json.object() end
  local v, err = json.decode(body)
  if v == nil then return nil, "malformed JSON: " .. tostring(err and err.message or err) end
  if type(v) ~= "table" or json.is_array(v) then
    return nil, "the body must be a JSON object, not " .. (type(v) == "table" and "an array" or type(v))
  end
  return v
end

-- read(model, head, obj) -> input; or nil, kind, detail. Absent required
-- members are not refused here: sandbox.codec lists them with the broken
-- constraints, in one message, as AWS's Coral services do
function M.read(model, head, obj)
  local C = V.context("coral", wire)
  local input = V.from_json(C, model, head, {}, obj, "")
  if C.bad then return nil, "type", C.bad end
  return input
end

-- decode(model, req) -> operation name, input; or nil, kind, detail
function M.decode(model, req)
  local target = (req.headers or {})["x-amz-target"]
  if type(target) ~= "string" or target == "" then
    return nil, "unknown", "the request has no X-Amz-Target header naming the operation"
  end
  local prefix, name = target:match("^(.*)%.([^.]+)$")
  local op = prefix == model.metadata.targetPrefix and model.operations[name]
  if type(op) ~= "table" then return nil, "unknown", "unknown operation " .. target:sub(1, 200) end
  local obj, msg = M.body_object(req.body)
  if not obj then return nil, "malformed", msg end
  if not op.input then return name, json.object() end
  local input, kind, detail = M.read(model, op.input, obj)
  if not input then return nil, kind, detail end
  return name, input
end

local function content_type(model) return "application/x-amz-json-" .. (model.metadata.jsonVersion or "1.0") end

-- encode(model, op, name, output, rid) -> status, headers, body
function M.encode(model, op, _, output, rid)
  local body = op.output and V.to_json(model, op.output, {}, output) or json.object()
  return 200, { ["content-type"] = content_type(model), ["x-amzn-requestid"] = rid }, json.encode(body)
end

-- error_body(err, extra) -> a JSON error object: message plus the error's
-- modelled fields (extra: { __type = ... } etc.)
function M.error_body(err, extra)
  local body = json.object()
  if type(err.fields) == "table" then
    for k, v in pairs(err.fields) do
      if type(k) == "string" then body[k] = v end
    end
  end
  for k, v in pairs(extra or {}) do body[k] = v end
  body.message = V.utf8_clean(tostring(err.message), true)
  local ok, text = pcall(json.encode, body)
  if ok then return text end
  return json.encode(json.object { message = body.message, __type = body.__type })
end

-- encode_error(model, err, rid, status) -> status, headers, body
function M.encode_error(model, err, rid, status)
  return status, {
    ["content-type"] = content_type(model),
    ["x-amzn-requestid"] = rid,
    ["x-amzn-errortype"] = err.code,
  }, M.error_body(err, { __type = err.code })
end

return M
