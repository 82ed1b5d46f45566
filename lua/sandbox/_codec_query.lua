-- sandbox._codec_query: the server side of the AWS query protocol (IAM,
-- STS, CloudFormation) and its EC2 variant: form-encoded requests
-- (Action=...&Version=...&Tags.member.1.Key=...) read back into members,
-- answers as <OpResponse><OpResult>...</OpResult><ResponseMetadata> (query)
-- or <OpResponse><requestId>... (EC2), errors as <ErrorResponse> (query)
-- or <Response><Errors> (EC2).
local json = require "hypd.json"
local S = require "hypd.aws.shape"
local V = require "sandbox._codec_value"
local X = require "sandbox._codec_xml"

local M = {}

local MAX_PAIRS, MAX_KEY = 10000, 512

local function hexchar(h) return string.char(tonumber(h, 16)) end

-- unescape(s, plus) -> percent-decoded s ("+" is a space when plus)
function M.unescape(s, plus)
  if plus then s = s:gsub("+", " ") end
  return (s:gsub("%%(%x%x)", hexchar))
end

-- form_pairs(s, out) -> out with the decoded { key, value } pairs of a
-- form body or query string appended
function M.form_pairs(s, out)
  out = out or {}
  for part in s:gmatch("[^&]+") do
    local k, v = part:match("^([^=]*)=(.*)$")
    out[#out + 1] = { M.unescape(k or part, true), M.unescape(v or "", true) }
  end
  return out
end

local function ec2_name(m)
  if m.qname then return m.qname end
  if m.name then return m.name:sub(1, 1):upper() .. m.name:sub(2) end
  return m[1]
end
M.ec2_name = ec2_name

local function query_name(m) return m.name or m[1] end

local function join(key, name) return key == "" and name or key .. "." .. name end

-- indices(Q, base) -> the numeric components under base, in order
local function indices(Q, base)
  local idx = {}
  for comp in pairs(Q.kids[base] or {}) do
    if comp:match("^%d+$") and tonumber(comp) >= 1 then idx[#idx + 1] = comp end
  end
  table.sort(idx, function(a, b) return tonumber(a) < tonumber(b) end)
  return idx
end

local read

local function read_list(Q, model, shape, traits, key, path)
  local item, t = S.ref(shape[2])
  local base
  if Q.ec2 then
    base = key
  elseif traits.flat then
    base = key
    if t.name then
      local parent = key:match("^(.*)%.[^.]*$")
      base = parent and parent .. "." .. t.name or t.name
    end
  else
    base = key .. "." .. (t.name or "member")
  end
  local idx = indices(Q, base)
  if #idx == 0 then
    if not Q.ec2 and Q.params[key] == "" then return json.array() end
    return nil
  end
  local out = json.array()
  for _, comp in ipairs(idx) do
    local v = read(Q, model, item, t, base .. "." .. comp, Q.C.item(path, #out + 1))
    if Q.C.bad then return nil end
    if v ~= nil then out[#out + 1] = v end
  end
  return out
end

local function read_map(Q, model, shape, traits, key, path)
  local khead, kt = S.ref(shape[2])
  local vhead, vt = S.ref(shape[3])
  local base = traits.flat and key or key .. ".entry"
  local idx = indices(Q, base)
  if #idx == 0 then return nil end
  local out = json.object()
  for _, comp in ipairs(idx) do
    local k = read(Q, model, khead, kt, base .. "." .. comp .. "." .. (kt.name or "key"), path)
    if Q.C.bad then return nil end
    if type(k) == "string" then
      local v = read(Q, model, vhead, vt, base .. "." .. comp .. "." .. (vt.name or "value"), Q.C.field(path, k))
      if Q.C.bad then return nil end
      if v ~= nil then out[k] = v end
    end
  end
  return out
end

-- read(Q, model, head, traits, key, path) -> the input value whose
-- parameters start with key; nil when there are none (or Q.C.bad is set)
read = function(Q, model, head, traits, key, path)
  local typ, shape = S.kind(model, head)
  if typ == "structure" then
    if key ~= "" and not Q.kids[key] then return nil end
    local out = json.object()
    for _, m in ipairs(shape[2]) do
      local name = Q.ec2 and ec2_name(m) or query_name(m)
      local v = read(Q, model, m[2], m, join(key, name), Q.C.field(path, Q.C.wire(m)))
      if Q.C.bad then return nil end
      if v ~= nil then out[m[1]] = v end
    end
    return out
  elseif typ == "list" then
    return read_list(Q, model, shape, traits, key, path)
  elseif typ == "map" then
    return read_map(Q, model, shape, traits, key, path)
  end
  local text = Q.params[key]
  if text == nil then return nil end
  return V.text_value(Q.C, model, head, traits, text, path)
end

-- decode(model, req) -> operation name, input; or nil, kind, detail
-- (kind: "unknown", "malformed", "missing" with a list of paths, "type"
-- with C.bad)
function M.decode(model, req)
  local ec2 = model.metadata.protocol == "ec2"
  local list = M.form_pairs(req.query or "")
  local ctype = (req.headers or {})["content-type"] or ""
  if req.body ~= "" then
    if ctype ~= "" and not ctype:lower():find("x-www-form-urlencoded", 1, true) then
      return nil, "malformed", "the body must be application/x-www-form-urlencoded, not " .. ctype:sub(1, 100)
    end
    M.form_pairs(req.body, list)
  end
  if #list > MAX_PAIRS then return nil, "malformed", "the request has more than " .. MAX_PAIRS .. " parameters" end
  local params, kids = {}, { [""] = {} }
  for _, p in ipairs(list) do
    local k = p[1]
    if #k <= MAX_KEY then
      params[k] = p[2]
      local acc = ""
      for comp in (k .. "."):gmatch("([^.]*)%.") do
        local sub = kids[acc]
        if not sub then sub = {} kids[acc] = sub end
        sub[comp] = true
        acc = acc == "" and comp or acc .. "." .. comp
      end
    end
  end
  local action = params.Action
  if not action or action == "" then return nil, "unknown", "the request has no Action", "MissingAction" end
  local op = model.operations[action]
  if type(op) ~= "table" then
    if ec2 then return nil, "unknown", "The action " .. action .. " is not valid for this web service." end
    return nil, "unknown", "Could not find operation " .. action .. " for version " .. tostring(params.Version or "")
  end
  local C = V.context(ec2 and "wire" or "coral", ec2 and ec2_name or query_name)
  local Q = { params = params, kids = kids, ec2 = ec2, C = C }
  local input = json.object()
  if op.input then
    input = read(Q, model, op.input, {}, "", "")
    if C.bad then return nil, "type", C.bad end
    -- EC2 refuses the first absent parameter (MissingParameter); the
    -- Coral query services (IAM, STS) list absent members with the broken
    -- constraints, which sandbox.codec checks
    local missing = ec2 and V.missing(C, model, op.input, input, "") or {}
    if #missing > 0 then return nil, "missing", missing end
  end
  return action, input
end

-- encode(model, op, name, output, rid) -> status, headers, body
function M.encode(model, op, name, output, rid)
  local ns = model.metadata.xmlNamespace or ""
  local shape = op.output and model.shapes[op.output]
  local buf = { X.DECL }
  if model.metadata.protocol == "ec2" then
    if ns:sub(-1) ~= "/" then ns = ns .. "/" end
    buf[#buf + 1] = string.format('<%sResponse xmlns="%s">%s', name, ns, X.leaf("requestId", rid))
    if shape then X.write_members(buf, model, shape, output) end
  else
    buf[#buf + 1] = string.format('<%sResponse xmlns="%s">', name, ns)
    if shape and op.result_wrapper then
      buf[#buf + 1] = "<" .. op.result_wrapper .. ">"
      X.write_members(buf, model, shape, output)
      buf[#buf + 1] = "</" .. op.result_wrapper .. ">"
    elseif shape then
      X.write_members(buf, model, shape, output)
    end
    buf[#buf + 1] = "<ResponseMetadata>" .. X.leaf("RequestId", rid) .. "</ResponseMetadata>"
  end
  buf[#buf + 1] = "</" .. name .. "Response>"
  return 200, { ["content-type"] = "text/xml;charset=UTF-8", ["x-amzn-requestid"] = rid }, table.concat(buf)
end

-- fields_xml(fields) -> <Name>value</Name>... for an error's extra members
function M.fields_xml(fields)
  local keys, buf = {}, {}
  for k, v in pairs(type(fields) == "table" and fields or {}) do
    local t = type(v)
    if type(k) == "string" and k:match("^[%a_][%w_.-]*$") and (t == "string" or t == "number" or t == "boolean") then
      keys[#keys + 1] = k
    end
  end
  table.sort(keys)
  for _, k in ipairs(keys) do buf[#buf + 1] = X.leaf(k, tostring(fields[k])) end
  return table.concat(buf)
end

-- encode_error(model, err, rid) -> status, headers, body
function M.encode_error(model, err, rid, status)
  local body
  if model.metadata.protocol == "ec2" then
    body = X.DECL .. "<Response><Errors><Error>" .. X.leaf("Code", err.code) .. X.leaf("Message", err.message) ..
      M.fields_xml(err.fields) .. "</Error></Errors>" .. X.leaf("RequestID", rid) .. "</Response>"
  else
    local kind = err.type or (status >= 500 and "Receiver" or "Sender")
    body = X.DECL .. string.format('<ErrorResponse xmlns="%s"><Error>', model.metadata.xmlNamespace or "") ..
      X.leaf("Type", kind) .. X.leaf("Code", err.code) .. X.leaf("Message", err.message) ..
      M.fields_xml(err.fields) .. "</Error>" .. X.leaf("RequestId", rid) .. "</ErrorResponse>"
  end
  return status, { ["content-type"] = "text/xml;charset=UTF-8", ["x-amzn-requestid"] = rid }, body
end

return M
