-- hypd.aws.protocol.rest_json: restJson1 (EKS): the HTTP binding of
-- hypd.aws._rest, the remaining members as a JSON body (or the payload
-- member alone), errors named by the x-amzn-errortype header or the body.
local errors = require "hypd.errors"
local json = require "hypd.json"
local J = require "hypd.aws.protocol.json"
local R = require "hypd.aws._rest"
local S = require "hypd.aws.shape"

local M = {}

-- a structure payload member's value as the body ("{}" when it is absent)
local function payload(model, pm, v)
  return S.present(v) and json.encode(J.encode(model, pm[2], pm, v)) or "{}", "application/json"
end

-- the members left for the body as a JSON object ("{}" when the input has
-- body members and none is given)
local function members(model, op, params, input)
  if next(input.members) then return json.encode(J.encode(model, op.input, {}, params)), "application/json" end
  for _, m in ipairs(input.shape[2]) do
    if not m.loc then return "{}", "application/json" end
  end
  return ""
end

M.build = R.builder(payload, members)

function M.parse(model, op, _, resp)
  if resp.status >= 300 then
    return nil, J.error_from(resp, J.decode_body(resp.body), true)
  end
  return R.parse(model, op, resp, function(_, pm, out)
    local body, text = J.decode_body(resp.body)
    if not body then
      return nil, errors.new("JSON", "the service answered with text that is not JSON: " .. text:sub(1, 200),
        { status = resp.status, request_id = R.request_id(resp) })
    end
    if pm then
      out[pm[1]] = J.decode(model, pm[2], pm, body)
    else
      for k, v in pairs(J.decode(model, op.output, {}, body) or {}) do out[k] = v end
    end
    return true
  end)
end

return M
