-- hypd.aws.protocol.json: awsJson1.0/1.1 (SageMaker, FSx, SSM, CloudWatch
-- Logs): POST / with X-Amz-Target, the input as a JSON object, the output
-- as a JSON object, errors named by __type. The value walkers here are
-- shared with restJson1 (protocol/rest_json.lua).
local errors = require "hypd.errors"
local json = require "hypd.json"
local S = require "hypd.aws.shape"
local sys = require "hypd.sys"

local M = {}

-- encode(model, head, traits, v) -> the JSON-ready Lua value of input v
local function encode(model, head, traits, v)
  local typ, shape = S.kind(model, head)
  if typ == "structure" then
    local out = json.object()
    for _, m in ipairs(shape[2]) do
      local x = v[m[1]]
      if S.present(x) and not m.loc then out[m.name or m[1]] = encode(model, m[2], m, x) end
    end
    return out
  elseif typ == "list" then
    local out = json.array()
    local item, t = S.ref(shape[2])
    for i, x in ipairs(v) do out[i] = encode(model, item, t, x) end
    return out
  elseif typ == "map" then
    local out = json.object()
    local value, t = S.ref(shape[3])
    for k, x in pairs(v) do out[k] = S.present(x) and encode(model, value, t, x) or json.null end
    return out
  elseif typ == "timestamp" then
    return S.format_timestamp(v, traits.ts or "unixtimestamp")
  elseif typ == "blob" then
    return sys.b64encode(v)
  elseif typ == "integer" or typ == "long" then
    return math.tointeger(v)
  end
  return v
end
M.encode = encode

-- decode(model, head, traits, v) -> the output value for JSON value v
local function decode(model, head, _, v)
  if v == nil or v == json.null then return nil end
  local typ, shape = S.kind(model, head)
  if typ == "structure" then
    if type(v) ~= "table" then return nil end
    local out = json.object()
    for _, m in ipairs(shape[2]) do
      if not m.loc then
        local x = v[m.name or m[1]]
        if x ~= nil and x ~= json.null then out[m[1]] = decode(model, m[2], m, x) end
      end
    end
    return out
  elseif typ == "list" then
    local out = json.array()
    if type(v) ~= "table" then return out end
    local item, t = S.ref(shape[2])
    for i, x in ipairs(v) do
      local y = decode(model, item, t, x)
      if y == nil then y = json.null end
      out[i] = y
    end
    return out
  elseif typ == "map" then
    local out = json.object()
    if type(v) ~= "table" then return out end
    local value, t = S.ref(shape[3])
    for k, x in pairs(v) do
      local y = decode(model, value, t, x)
      if y == nil then y = json.null end
      out[k] = y
    end
    return out
  elseif typ == "timestamp" then
    return S.output_timestamp(v)
  elseif typ == "blob" then
    return type(v) == "string" and (sys.b64decode(v) or v) or v
  elseif typ == "boolean" and type(v) == "string" then
    return v == "true"
  elseif (typ == "integer" or typ == "long") and type(v) == "string" then
    return math.tointeger(tonumber(v)) or v
  elseif typ == "double" or typ == "float" then
    if type(v) == "number" then return v + 0.0 end
    return type(v) == "string" and S.parse_scalar(typ, v) or v -- "NaN", "Infinity"
  end
  return v
end
M.decode = decode

local function strip_code(code)
  code = code:match("^([^:]*)")
  return code:match("#([^#]*)$") or code
end

-- error_from(resp, body, rest) -> the AWS error of a failed JSON response
-- (body: the decoded JSON or nil). restJson1 prefers the x-amzn-errortype
-- header; awsJson prefers __type.
function M.error_from(resp, body, rest)
  local h = resp.headers or {}
  body = type(body) == "table" and body or {}
  local header = h["x-amzn-errortype"]
  local from_body = body.__type or (rest and (body.code or body.Code)) or nil
  if type(from_body) ~= "string" then from_body = nil end
  local code
  if rest then code = header or from_body else code = from_body or header end
  code = code and strip_code(code) or tostring(resp.status)
  local message = body.message or body.Message or body.errorMessage
  local fields = { status = resp.status, request_id = h["x-amzn-requestid"] }
  local qe = h["x-amzn-query-error"]
  if qe then
    local qcode, qtype = qe:match("^([^;]+);(.*)$")
    if qcode then code, fields.type = qcode, qtype end
  end
  if type(message) ~= "string" then message = code end
  return errors.new(code, message, fields)
end

local function decode_body(text)
  if text == nil or text == "" then return json.object() end
  local v = json.decode(text)
  if v == nil then return nil, text end
  return v
end
M.decode_body = decode_body

function M.build(model, op, name, params)
  local meta = model.metadata
  local body = json.object()
  if op.input then body = encode(model, op.input, {}, params) end
  return {
    method = op.method or "POST",
    path = "/",
    query = "",
    headers = {
      ["x-amz-target"] = meta.targetPrefix .. "." .. name,
      ["content-type"] = "application/x-amz-json-" .. (meta.jsonVersion or "1.0"),
    },
    body = json.encode(body),
  }
end

function M.parse(model, op, _, resp)
  local body, raw = decode_body(resp.body)
  if resp.status >= 300 then return nil, M.error_from(resp, body, false) end
  if not body then
    return nil, errors.new("JSON", "the service answered with text that is not JSON: " .. raw:sub(1, 200),
      { status = resp.status, request_id = (resp.headers or {})["x-amzn-requestid"] })
  end
  local out = op.output and decode(model, op.output, {}, body) or json.object()
  local rid = (resp.headers or {})["x-amzn-requestid"]
  if rid then out.ResponseMetadata = { RequestId = rid } end
  return out
end

return M
