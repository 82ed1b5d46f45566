-- sandbox.codec: the server side of the AWS wire protocols, for the
-- sandbox's simulated AWS account. It reads what real SDKs (boto3,
-- @aws-sdk/client-*) send and writes what they parse, by the same compact
-- models the client uses (lua/hypd/aws/models/<service>.lua).
--
--   local call, err = codec.decode("eks", { method = "GET", path = "/clusters/eks1",
--     query = "", headers = { ... lower-case ... }, body = "", host = "127.0.0.1:4566" })
--   -- call = { operation = "DescribeCluster", input = { name = "eks1" }, service = "eks",
--   --          bucket = <S3 only> }
--   local resp = codec.encode("eks", "DescribeCluster", { cluster = { ... } }, { request_id = "..." })
--   local resp = codec.encode_error("eks", "DescribeCluster",
--     { code = "ResourceNotFoundException", message = "...", status = 404 }, ctx)
--   -- resp = { status = 200, headers = { lower-case name = value }, body = "..." }
--
-- Inputs use the API's member names and Lua types: integers, booleans,
-- timestamps as "2023-11-14T22:13:20.123Z", blobs as raw strings, lists
-- and maps as json.array / json.object tables. decode never raises: a bad
-- request is an error table { code, message, status } in the protocol's
-- own words (UnknownOperationException, InvalidAction, MethodNotAllowed,
-- SerializationException, MalformedXML, ValidationException,
-- ValidationError, MissingParameter, InvalidParameterValue, ...), ready for
-- encode_error. Outputs may give timestamps as epoch seconds or ISO text;
-- members that do not fit their shape are left out rather than raised on.
-- ctx: { request_id, method (the request's, so errors to HEAD have no body) }.
--
-- S3: a bucket in the Host ("b.s3.<anything>", "b.localhost[:port]",
-- bucket_from_host) makes a request virtual-hosted; aws-chunked uploads are
-- decoded (chunk signatures are not checked here) and their trailers read
-- as headers. HEAD answers keep the object's content-length header with an
-- empty body; other answers with a Content-Length member carry #body.
-- Unknown input members are ignored.
--
-- Every decoded input is then checked against the model's constraints
-- (enum, min, max, pattern: hypd.aws.constraints, the checker hypd's
-- client uses too), before any handler sees it, as AWS validates before it
-- acts: JSON and REST-JSON services answer ValidationException and the
-- query services ValidationError, "N validation errors detected: Value 'x'
-- at 'instanceGroups.1.member.instanceType' failed to satisfy constraint:
-- ..." (every failure, joined with "; "); EC2 answers
-- InvalidParameterValue and EKS InvalidParameterException, in their own
-- words, for the first one. The JSON and query (Coral) services list an
-- absent required member in the same message, in member order ("Value
-- null at 'clusterName' failed to satisfy constraint: Member must not be
-- null"); EC2 (MissingParameter), REST-JSON and S3 refuse absent members
-- first, in their decoders. A sensitive member's value is never echoed
-- ("Value at 'password' failed ..."). S3 is not checked this way
-- (constraints.applies): it refuses some enums in its own words, one at a
-- time (InvalidStorageClass, InvalidArgument, MalformedXML for a body,
-- sandbox._codec_s3_rules says which and why).
local json = require "hypd.json"
local S = require "hypd.aws.shape"
local constraints = require "hypd.aws.constraints"
local Q = require "sandbox._codec_query"
local S3_RULES = require "sandbox._codec_s3_rules"

local M = {}

local IMPL = {
  json = require "sandbox._codec_json",
  ["rest-json"] = require "sandbox._codec_restjson",
  query = require "sandbox._codec_query",
  ec2 = require "sandbox._codec_query",
  ["rest-xml"] = require "sandbox._codec_s3",
}

local ALIAS = { ["api.sagemaker"] = "sagemaker" }

-- per protocol: the error codes of its validation failures
local CODES = {
  json = { unknown = "UnknownOperationException", unknown_status = 400, malformed = "SerializationException",
    missing = "ValidationException", type = "SerializationException" },
  ["rest-json"] = { unknown = "UnknownOperationException", unknown_status = 404, malformed = "SerializationException",
    missing = "ValidationException", type = "SerializationException" },
  query = { unknown = "InvalidAction", unknown_status = 400, malformed = "MalformedQueryString",
    missing = "ValidationError", type = "ValidationError" },
  ec2 = { unknown = "InvalidAction", unknown_status = 400, malformed = "MalformedQueryString",
    missing = "MissingParameter", type = "InvalidParameterValue" },
  ["rest-xml"] = { unknown = "MethodNotAllowed", unknown_status = 405, malformed = "MalformedXML",
    missing = "InvalidRequest", type = "InvalidArgument" },
}

-- model(service) -> the model of a service, or nil
function M.model(service)
  service = ALIAS[service] or service
  if type(service) ~= "string" or not service:match("^[%w-]+$") then return nil end
  local ok, model = pcall(require, "hypd.aws.models." .. service)
  if ok and type(model) == "table" and type(model.metadata) == "table" and IMPL[model.metadata.protocol] then
    return model
  end
  return nil
end

local function show(v)
  if type(v) == "table" then return json.is_array(v) and "an array" or "an object" end
  local s = tostring(v)
  return #s > 100 and s:sub(1, 100) .. "..." or s
end

local function coral(paths, what)
  local parts = {}
  for i, p in ipairs(paths) do parts[i] = string.format(what, p) end
  return string.format("%d validation error%s detected: %s", #parts, #parts == 1 and "" or "s",
    table.concat(parts, "; "))
end

-- failure(proto, kind, detail, code) -> the error table of a bad request
local function failure(proto, kind, detail, code)
  local c = CODES[proto]
  local status = 400
  local message
  if kind == "unknown" then
    status, message = c.unknown_status, detail
    code = code or c.unknown
  elseif kind == "malformed" then
    message = detail
  elseif kind == "missing" then
    code = code or c.missing
    if proto == "ec2" then
      message = "The request must contain the parameter " .. detail[1]
    elseif code == "MissingRequestBodyError" then
      message = "Request Body is empty"
    elseif code == "MalformedXML" then
      message = "The XML you provided was not well-formed or did not validate against our published schema"
    elseif proto == "rest-xml" then
      message = "Missing required parameter: " .. detail[1]
    else
      message = coral(detail, "Value null at '%s' failed to satisfy constraint: Member must not be null")
    end
  else -- type
    local where, value, want = detail.path, show(detail.value), detail.want
    if proto == "ec2" then
      message = string.format("Value (%s) for parameter %s is invalid. Expected %s.", value, where, want)
    elseif proto == "query" then
      message = coral({ where }, "Value '" .. value:gsub("%%", "%%%%") .. "' at '%s' failed to satisfy " ..
        "constraint: Member must be " .. want)
    elseif proto == "rest-xml" then
      message = string.format("Invalid value '%s' for %s: expected %s", value, where, want)
    else
      message = string.format("Cannot deserialize the value at '%s' (%s): expected %s", where, value, want)
    end
  end
  return { code = code or c[kind], message = message, status = status }
end

local function lcfirst(s) return (s:gsub("^%u", string.lower)) end

-- how each protocol names a member in its constraint errors: AWS's Java
-- services by the member's own name, lowerCamel, wherever it travels (a
-- URI label too); EC2 by its query name
local CORAL = {
  field = function(p, m) local n = lcfirst(m[1]) return p == "" and n or p .. "." .. n end,
  item = function(p, i) return p .. "." .. i .. ".member" end,
}
local PATHS = {
  json = CORAL, ["rest-json"] = CORAL, query = CORAL,
  ec2 = {
    field = function(p, m) local n = Q.ec2_name(m) return p == "" and n or p .. "." .. n end,
    item = function(p, i) return p .. "." .. i end,
  },
}

-- eks_message(f) -> EKS's words for a broken constraint: EKS answers
-- InvalidParameterException for the first one, naming the member ("The
-- clusterName parameter contains invalid characters. It should conform to
-- the regular expression ...", "maxSize can't be less than 1")
local function eks_message(f)
  local leaf = f.path:match("([%a][%w]*)$") or f.path
  local n = type(f.limit) == "number" and constraints.number_text(f.limit) or nil
  if f.kind == "pattern" then
    return string.format('The %s parameter contains invalid characters. It should conform to the regular ' ..
      'expression "%s"', leaf, f.limit)
  elseif f.kind == "min_value" then return leaf .. " can't be less than " .. n
  elseif f.kind == "max_value" then return leaf .. " can't be greater than " .. n
  elseif f.kind == "max_length" then return leaf .. " can't be longer than " .. n
  elseif f.kind == "min_length" then return leaf .. " can't be shorter than " .. n
  elseif f.kind == "enum" then
    return string.format("%s is not a valid %s: it must be one of %s", f.value or "The value", leaf,
      table.concat(f.limit, ", "))
  end
  return string.format("The %s parameter has an invalid value: %s", leaf, f.rule)
end

-- the protocols whose services list absent required members with the
-- broken constraints (the others' decoders refuse them first)
local REQUIRED_LISTED = { json = true, query = true }

-- broken(model, proto, operation, input) -> nil, or the error of the
-- constraints input breaks
local function broken(model, proto, operation, input)
  local op = model.operations[operation]
  if not op or not op.input then return nil end
  if proto == "rest-xml" then
    return S3_RULES.error(model, op.input, constraints.check(model, op.input, input, S3_RULES.PATHS, { all = true }),
      input)
  end
  if not PATHS[proto] then return nil end
  local found = constraints.check(model, op.input, input, PATHS[proto], { required = REQUIRED_LISTED[proto] })
  if #found == 0 then return nil end
  if model.metadata.endpointPrefix == "eks" then
    return { code = "InvalidParameterException", status = 400, message = eks_message(found[1]) }
  end
  if proto == "ec2" then
    local f = found[1]
    return { code = "InvalidParameterValue", status = 400, message = string.format(
      "Value %sfor parameter %s is invalid. %s", f.value and "(" .. f.value .. ") " or "", f.path, f.rule) }
  end
  return { code = proto == "query" and "ValidationError" or "ValidationException", status = 400,
    message = constraints.coral(found) }
end

local function request(req)
  local r = { headers = {} }
  r.method = type(req.method) == "string" and req.method:upper() or "POST"
  r.path = type(req.path) == "string" and req.path or "/"
  r.query = type(req.query) == "string" and req.query or ""
  r.body = type(req.body) == "string" and req.body or ""
  for k, v in pairs(type(req.headers) == "table" and req.headers or {}) do
    if type(k) == "string" and (type(v) == "string" or type(v) == "number") then r.headers[k:lower()] = tostring(v) end
  end
  r.host = type(req.host) == "string" and req.host or r.headers.host
  return r
end

local function decode(service, req)
  local model = M.model(service)
  if not model then
    return nil, { code = "UnknownService", message = "the sandbox has no service '" .. show(service) .. "'",
      status = 400 }
  end
  local proto = model.metadata.protocol
  local a, b, c, d = IMPL[proto].decode(model, request(type(req) == "table" and req or {}))
  if not a then return nil, proto == "rest-xml" and b == "type" and S3_RULES.type_error(c) or failure(proto, b, c, d) end
  local err = broken(model, proto, a, b)
  if err then return nil, err end
  return { operation = a, input = b, service = service, bucket = proto == "rest-xml" and c or nil }
end

-- decode(service, req) -> call, or nil, err (never raises)
function M.decode(service, req)
  local ok, call, err = pcall(decode, service, req)
  if not ok then
    return nil, { code = "InternalFailure", message = "the sandbox could not read the request: " .. tostring(call),
      status = 500 }
  end
  return call, err
end

local function clean_headers(headers)
  local out = {}
  for k, v in pairs(headers) do
    if v ~= nil then out[k] = (tostring(v):gsub("[%c]", " ")) end
  end
  return out
end

local function request_id(ctx) return type(ctx.request_id) == "string" and ctx.request_id or S.uuid4() end

local function generic_error(err, rid)
  return {
    status = err.status,
    headers = { ["content-type"] = "application/json", ["x-amzn-requestid"] = rid, ["x-amzn-errortype"] = err.code },
    body = IMPL.json.error_body(err, { __type = err.code }),
  }
end

-- encode_error(service, operation_or_nil, err, ctx) -> { status, headers, body }
function M.encode_error(service, operation, err, ctx)
  ctx = type(ctx) == "table" and ctx or {}
  err = type(err) == "table" and err or { message = tostring(err) }
  local rid = request_id(ctx)
  local e = {
    code = tostring(err.code or "InternalFailure"),
    status = math.tointeger(err.status) or 400,
    type = err.type,
    fields = type(err.fields) == "table" and err.fields or nil,
  }
  e.message = tostring(err.message or e.code)
  local model = M.model(service)
  if not model then return generic_error(e, rid) end
  local op = type(operation) == "string" and model.operations[operation]
  local method = type(ctx.method) == "string" and ctx.method:upper() or type(op) == "table" and op.method or nil
  local ok, status, headers, body = pcall(IMPL[model.metadata.protocol].encode_error, model, e, rid, e.status, method)
  if not ok then return generic_error(e, rid) end
  return { status = status, headers = clean_headers(headers), body = body }
end

-- encode(service, operation, output, ctx) -> { status, headers, body }
function M.encode(service, operation, output, ctx)
  ctx = type(ctx) == "table" and ctx or {}
  local model = M.model(service)
  local op = model and type(operation) == "string" and model.operations[operation]
  if type(op) ~= "table" then
    return M.encode_error(service, nil, { code = "InternalFailure", status = 500,
      message = "the sandbox has no operation " .. show(service) .. " " .. show(operation) }, ctx)
  end
  local rid = request_id(ctx)
  local method = type(ctx.method) == "string" and ctx.method:upper() or op.method
  local ok, status, headers, body = pcall(IMPL[model.metadata.protocol].encode, model, op, operation,
    type(output) == "table" and output or {}, rid, method)
  if not ok then
    return M.encode_error(service, operation, { code = "InternalFailure", status = 500,
      message = "the sandbox could not write the answer: " .. tostring(status) }, ctx)
  end
  return { status = status, headers = clean_headers(headers), body = body }
end

-- bucket_from_host(host) -> the S3 bucket a virtual-hosted request names
M.bucket_from_host = IMPL["rest-xml"].bucket_from_host

return M
