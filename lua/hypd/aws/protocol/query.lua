-- hypd.aws.protocol.query: the AWS query protocol (IAM, STS,
-- CloudFormation) and its EC2 variant. Requests are POST / with a form
-- body (Action, Version, then the members flattened into dotted names);
-- answers are XML: <OpResponse><OpResult>...</OpResult> for query, the
-- response element itself for EC2. Errors: <ErrorResponse><Error><Code>
-- (query), <Response><Errors><Error><Code> (EC2).
local errors = require "hypd.errors"
local json = require "hypd.json"
local sys = require "hypd.sys"
local xml = require "hypd.xml"
local S = require "hypd.aws.shape"
local X = require "hypd.aws.xml"

local M = {}

local function ec2_name(m)
  if m.qname then return m.qname end
  if m.name then return m.name:sub(1, 1):upper() .. m.name:sub(2) end
  return m[1]
end

local function scalar_text(typ, traits, v)
  if typ == "boolean" then return v and "true" or "false" end
  if typ == "timestamp" then
    local f = S.format_timestamp(v, traits.ts or "iso8601")
    return type(f) == "number" and S.number_text(f) or f
  end
  if typ == "blob" then return sys.b64encode(v) end
  if typ == "integer" or typ == "long" then return string.format("%d", math.tointeger(v)) end
  if typ == "double" or typ == "float" then return S.number_text(v) end
  return tostring(v)
end

-- flatten(out, model, head, traits, v, prefix, ec2): appends {name, value}
local function flatten(out, model, head, traits, v, prefix, ec2)
  local typ, shape = S.kind(model, head)
  if typ == "structure" then
    for _, m in ipairs(shape[2]) do
      local x = v[m[1]]
      if S.present(x) then
        local name = ec2 and ec2_name(m) or m.name or m[1]
        flatten(out, model, m[2], m, x, prefix == "" and name or prefix .. "." .. name, ec2)
      end
    end
  elseif typ == "list" then
    local item, t = S.ref(shape[2])
    local base
    if ec2 then
      base = prefix
    elseif #v == 0 then
      out[#out + 1] = { prefix, "" }
      return
    elseif traits.flat then
      base = prefix
      if t.name then
        local parent = prefix:match("^(.*)%.[^.]*$")
        base = parent and parent .. "." .. t.name or t.name
      end
    else
      base = prefix .. "." .. (t.name or "member")
    end
    for i, x in ipairs(v) do flatten(out, model, item, t, x, base .. "." .. i, ec2) end
  elseif typ == "map" then
    local khead, kt = S.ref(shape[2])
    local vhead, vt = S.ref(shape[3])
    local base = traits.flat and prefix or prefix .. ".entry"
    local keys = {}
    for k in pairs(v) do keys[#keys + 1] = k end
    table.sort(keys)
    for i, k in ipairs(keys) do
      flatten(out, model, khead, kt, k, base .. "." .. i .. "." .. (kt.name or "key"), ec2)
      flatten(out, model, vhead, vt, v[k], base .. "." .. i .. "." .. (vt.name or "value"), ec2)
    end
  else
    out[#out + 1] = { prefix, scalar_text(typ, traits, v) }
  end
end

function M.build(model, op, name, params)
  local pairs_ = { { "Action", name }, { "Version", model.metadata.apiVersion } }
  local ec2 = model.metadata.protocol == "ec2"
  if op.input then flatten(pairs_, model, op.input, {}, params, "", ec2) end
  local parts = {}
  for i, p in ipairs(pairs_) do parts[i] = S.form_encode(p[1]) .. "=" .. S.form_encode(p[2]) end
  return {
    method = op.method or "POST",
    path = "/",
    query = "",
    headers = { ["content-type"] = "application/x-www-form-urlencoded; charset=utf-8" },
    body = table.concat(parts, "&"),
  }
end

-- find(node, name, depth) -> the first element called name within depth
local function find(node, name, depth)
  for _, c in ipairs(node) do
    if c.name == name then return c end
  end
  if depth > 1 then
    for _, c in ipairs(node) do
      local f = find(c, name, depth - 1)
      if f then return f end
    end
  end
end

local function text_of(node, name)
  local c = node and find(node, name, 1)
  return c and c.text or nil
end

local STATUS_TEXT = { [400] = "Bad Request", [403] = "Forbidden", [404] = "Not Found", [500] = "Internal Server Error",
  [502] = "Bad Gateway", [503] = "Service Unavailable", [504] = "Gateway Timeout" }

-- xml_error(resp, root) -> the AWS error of a failed XML response
-- (query, EC2 and restXml share it; root may be nil)
function M.xml_error(resp, root, request_id)
  local e = root and (root.name == "Error" and root or find(root, "Error", 2))
  local code = text_of(e, "Code")
  local fields = { status = resp.status, type = text_of(e, "Type") }
  fields.request_id = root and (text_of(root, "RequestId") or text_of(root, "RequestID") or text_of(e, "RequestId"))
    or nil
  fields.request_id = fields.request_id or request_id
  if not code then code = tostring(resp.status) end
  local message = text_of(e, "Message") or STATUS_TEXT[resp.status] or code
  return errors.new(code, message, fields)
end

function M.parse(model, op, _, resp)
  local root
  if resp.body and resp.body ~= "" then root = xml.decode(resp.body) end
  if resp.status >= 300 then return nil, M.xml_error(resp, root) end
  if not root then
    return nil, errors.new("XML", "the service answered with a body that is not XML",
      { status = resp.status })
  end
  local out
  local start = root
  if op.result_wrapper then start = X.by_name(root)[op.result_wrapper] end
  if op.output and start then
    out = X.parse(model, op.output, {}, start)
  else
    out = json.object()
  end
  local rid
  if model.metadata.protocol == "ec2" then
    rid = text_of(root, "requestId")
  else
    local meta = find(root, "ResponseMetadata", 1)
    rid = meta and text_of(meta, "RequestId")
  end
  if rid then out.ResponseMetadata = { RequestId = rid } end
  return out
end

return M
