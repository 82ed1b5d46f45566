-- hypd.aws.protocol.rest_json: restJson1 (EKS): the HTTP binding of
-- hypd.aws._rest, the remaining members as a JSON body (or the payload
-- member alone), errors named by the x-amzn-errortype header or the body.
local errors = require "hypd.errors"
local json = require "hypd.json"
local J = require "hypd.aws.protocol.json"
local R = require "hypd.aws._rest"
local S = require "hypd.aws._shape"

local M = {}

function M.build(model, op, _, params)
  local req, input = R.build(model, op, params)
  if not req or not input then return req, input end
  local pm, raw = input.payload, input.raw
  if pm then
    local v = params[pm[1]]
    if raw then
      req.body = S.present(v) and v or ""
    else
      req.body = S.present(v) and json.encode(J.encode(model, pm[2], pm, v)) or "{}"
    end
  elseif next(input.members) then
    req.body = json.encode(J.encode(model, op.input, {}, params))
  else
    for _, m in ipairs(input.shape[2]) do
      if not m.loc then req.body = "{}" break end
    end
  end
  if req.body ~= "" and not raw and not req.headers["content-type"] then
    req.headers["content-type"] = "application/json"
  end
  return req
end

function M.parse(model, op, _, resp)
  if resp.status >= 300 then
    return nil, J.error_from(resp, J.decode_body(resp.body), true)
  end
  local out = json.object()
  local shape = op.output and model.shapes[op.output]
  if shape then
    R.parse_headers(model, shape, resp, out)
    local pm, raw = R.payload(model, shape)
    if pm and raw then
      out[pm[1]] = resp.body or ""
    else
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
    end
  end
  local rid = R.request_id(resp)
  if rid then out.ResponseMetadata = { RequestId = rid } end
  return out
end

return M
