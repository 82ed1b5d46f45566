-- sandbox._codec_restjson: the server side of restJson1 (EKS): routes and
-- bindings from _codec_rest.lua, the rest of the input from a JSON body
-- (or the payload member alone), the output as a JSON body, errors named
-- by the x-amzn-ErrorType header with {"message": ...}.
local json = require "hypd.json"
local J = require "sandbox._codec_json"
local R = require "sandbox._codec_rest"
local V = require "sandbox._codec_value"

local M = {}

-- body(C, model, route, req, input) -> true; or nil, kind, detail
local function body(C, model, route, req, input)
  local shape = route.op.input and model.shapes[route.op.input]
  if not shape then return true end
  local pm, raw = R.payload(model, shape)
  local text = req.body or ""
  if pm and raw then
    if text ~= "" then input[pm[1]] = text end
    return true
  end
  if not pm and not R.has_body_members(shape) then return true end
  if pm and text:match("^%s*$") then return true end
  local obj, msg = J.body_object(text)
  if not obj then return nil, "malformed", msg end
  if pm then
    local v = V.from_json(C, model, pm[2], pm, obj, C.field("", pm.name or pm[1]))
    if v == nil then return nil, "type", C.bad end
    input[pm[1]] = v
  else
    local v = V.from_json(C, model, route.op.input, {}, obj, "")
    if v == nil then return nil, "type", C.bad end
    for k, x in pairs(v) do input[k] = x end
  end
  return true
end

-- decode(model, req) -> operation name, input; or nil, kind, detail
function M.decode(model, req)
  local segs, trailing = R.split_path(req.path)
  local q = R.parse_query(req.query)
  local route, labels = R.route(model, req.method, segs, trailing, q, req.headers)
  if not route then
    return nil, "unknown", "no operation matches " .. req.method .. " " .. tostring(req.path):sub(1, 200)
  end
  local C = V.context("coral", J.wire)
  local input = R.bind(C, model, route, labels, q, req.headers)
  if not input then return nil, "type", C.bad end
  local ok, kind, detail = body(C, model, route, req, input)
  if not ok then return nil, kind, detail end
  if route.op.input then
    local missing = V.missing(C, model, route.op.input, input, "")
    if #missing > 0 then return nil, "missing", missing end
  end
  return route.name, input
end

-- encode(model, op, name, output, rid) -> status, headers, body
function M.encode(model, op, _, output, rid)
  local headers = { ["x-amzn-requestid"] = rid }
  local shape = op.output and model.shapes[op.output]
  local status = op.status or 200
  if shape then status = R.write_headers(model, shape, output, headers) or status end
  local pm, raw = R.payload(model, shape)
  local x = pm and output[pm[1]]
  if pm and raw then
    headers["content-type"] = headers["content-type"] or "application/octet-stream"
    return status, headers, type(x) == "string" and x or ""
  end
  headers["content-type"] = headers["content-type"] or "application/json"
  if not shape then return status, headers, "{}" end
  local v
  if pm then
    v = x ~= nil and V.to_json(model, pm[2], pm, x) or json.object()
  else
    v = V.to_json(model, op.output, {}, output) or json.object()
  end
  return status, headers, json.encode(v)
end

-- encode_error(model, err, rid, status) -> status, headers, body
function M.encode_error(_, err, rid, status)
  return status, {
    ["content-type"] = "application/json",
    ["x-amzn-requestid"] = rid,
    ["x-amzn-errortype"] = err.code,
  }, J.error_body(err)
end

return M
