-- hypd.aws.protocol.rest_xml: restXml (S3): the HTTP binding of
-- hypd.aws._rest, XML bodies for configurations, raw payloads (PutObject
-- Body, GetObject Body) as Lua strings, errors as <Error><Code>. Path style
-- only: req.bucket names the bucket so the caller can move it to the host.
local errors = require "hypd.errors"
local xml = require "hypd.xml"
local Q = require "hypd.aws.protocol.query"
local R = require "hypd.aws._rest"
local S = require "hypd.aws.shape"
local X = require "hypd.aws.xml"

local M = {}

-- a structure payload member's value as the body, as XML ("" when it is
-- absent)
local function payload(model, pm, v)
  if not S.present(v) then return "" end
  return X.encode(model, pm[2], pm, v, pm.name or pm[1])
end

-- the members left for the body as the input's XML element
local function members(model, op, params, input)
  if next(input.members) then
    return X.encode(model, op.input, { xmlns = op.input_xmlns }, params, op.input_name or op.input)
  end
  return ""
end

M.build = R.builder(payload, members)

local function decode(resp)
  if not resp.body or resp.body == "" then return nil end
  return xml.decode(resp.body)
end

function M.parse(model, op, _, resp)
  local rid = R.request_id(resp)
  if resp.status >= 300 then return nil, Q.xml_error(resp, decode(resp), rid) end
  return R.parse(model, op, resp, function(shape, pm, out)
    local root, err = decode(resp)
    if err then
      return nil, errors.new("XML", "the service answered with XML hypd cannot read: " .. err.message,
        { status = resp.status, request_id = rid })
    end
    if root and root.name == "Error" and (pm and pm.name or op.output) ~= "Error" then
      return nil, Q.xml_error(resp, root, rid) -- S3 can fail with status 200
    end
    local leaf = root and root[1] == nil and S.index(shape)[root.name]
    if root and pm then
      out[pm[1]] = X.parse(model, pm[2], pm, root)
    elseif leaf and S.kind(model, leaf[2]) == "string" then
      -- a bare element for a one-member output: GetBucketLocation's
      -- <LocationConstraint>us-west-2</LocationConstraint>
      out[root.name] = root.text or ""
    elseif root then
      for k, v in pairs(X.parse(model, op.output, {}, root)) do out[k] = v end
    end
    return true
  end)
end

return M
