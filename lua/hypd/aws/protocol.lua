-- hypd.aws.protocol: AWS requests and responses by the service's model
-- (lua/hypd/aws/models/<service>.lua), for the protocols hypd's services
-- speak: awsJson1.x, restJson1, query, EC2 query and restXml.
--
--   local req, err = protocol.build(model, "DescribeCluster", { name = "eks1" })
--   -- req = { method, path (URI-encoded), query (encoded, may be ""),
--   --         headers (lower-case names), body ("" when none),
--   --         host_prefix, bucket (S3: the Bucket member, for virtual
--   --         hosting), idempotency_token_filled, class }
--   local result, err = protocol.parse(model, "DescribeCluster",
--     { status = 200, headers = { ... lower-case ... }, body = "..." })
--
-- Parameters and results use the API's own member names. Results carry
-- ResponseMetadata = { RequestId } when the service sent one; timestamps
-- come back as "2023-11-14T22:13:20.123Z" (UTC, milliseconds only when not
-- zero), blobs as raw strings, lists as json.array tables. AWS errors are
-- { code = "ResourceNotFoundException", message, status, request_id,
-- type = "Sender" | nil }; bad parameters fail with VALIDATION naming the
-- field ("Filters[1].Name") before anything is built, and so do values
-- that break the model's constraints (hypd.aws.constraints: enum, length,
-- range, pattern), which the service would refuse.
local constraints = require "hypd.aws.constraints"
local errors = require "hypd.errors"
local S = require "hypd.aws.shape"
local sys = require "hypd.sys"

local M = {}

local IMPL = {
  json = "hypd.aws.protocol.json",
  ["rest-json"] = "hypd.aws.protocol.rest_json",
  query = "hypd.aws.protocol.query",
  ec2 = "hypd.aws.protocol.query",
  ["rest-xml"] = "hypd.aws.protocol.rest_xml",
}

local function impl(model)
  local name = IMPL[model.metadata.protocol]
  if not name then
    errors.raise("INTERNAL", "hypd speaks no AWS protocol '" .. tostring(model.metadata.protocol) .. "'")
  end
  return require(name)
end

-- the client names members as a playbook writes them: Filters[1].Name
local PATHS = {
  field = function(p, m) return p == "" and m[1] or p .. "." .. m[1] end,
  item = function(p, i) return p .. "[" .. i .. "]" end,
}

-- broken(model, op, params) -> nil, or a VALIDATION error naming the first
-- member whose value breaks a constraint and the rule; the value is quoted
-- cut short (errors.echo) and kept out of the error's fields, since a
-- parameter may carry a secret; a member the model marks sensitive is
-- not quoted at all
local function broken(model, op, params)
  local found = constraints.check(model, op.input, params, PATHS)
  if #found == 0 then return nil end
  local f = found[1]
  local more = #found > 1 and string.format(" (and %d more)", #found - 1) or ""
  local what = f.value and "value '" .. errors.echo(f.value, 40) .. "'" or "its value (sensitive, not shown)"
  return errors.new("VALIDATION", string.format("invalid parameter %s: %s breaks the %s model's " ..
    "constraint: %s%s", f.path, what, model.metadata.serviceId or "service", f.rule, more),
    { field = f.path, constraint = f.rule })
end

local function operation(model, name)
  local op = model.operations[name]
  if not op then
    return nil, errors.new("VALIDATION", (model.metadata.serviceId or "the service") .. " has no operation '" ..
      tostring(name) .. "'", { field = "operation" })
  end
  return op
end

-- host_prefix(op, params) -> "data." etc., or nil, err
local function host_prefix(op, params)
  local bad
  local prefix = op.host_prefix:gsub("{([^}]+)}", function(label)
    local v = params[label]
    if type(v) ~= "string" or not v:match("^[%w.-]+$") then
      bad = bad or label
      return ""
    end
    return v
  end)
  if bad then
    return nil, errors.new("VALIDATION", "invalid parameter " .. bad ..
      ": must contain only letters, digits, hyphens and periods (it is part of the host name)", { field = bad })
  end
  return prefix
end

-- build(model, op_name, params, opts) -> request table, or nil, err
-- (opts.check_constraints = false: the model's constraints are not checked)
function M.build(model, name, params, opts)
  local op, err = operation(model, name)
  if not op then return nil, err end
  params = params or {}
  err = S.validate(model, op.input, params)
    or (not opts or opts.check_constraints ~= false) and broken(model, op, params) or nil
  if err then return nil, err end
  local filled
  local tok = op.idempotency_token
  if tok and not S.present(params[tok]) then
    local copy = {}
    for k, v in pairs(params) do copy[k] = v end
    copy[tok] = S.uuid4()
    params, filled = copy, true
  end
  local req
  req, err = impl(model).build(model, op, name, params)
  if not req then return nil, err end
  if op.host_prefix then
    req.host_prefix, err = host_prefix(op, params)
    if not req.host_prefix then return nil, err end
  end
  if op.checksum_required and not req.headers["content-md5"] then
    req.headers["content-md5"] = sys.digest("md5", req.body, "base64")
  end
  req.idempotency_token_filled = filled
  req.class = op.class
  return req
end

-- parse(model, op_name, resp) -> result, or nil, err
function M.parse(model, name, resp)
  local op, err = operation(model, name)
  if not op then return nil, err end
  return impl(model).parse(model, op, name, resp)
end

return M
