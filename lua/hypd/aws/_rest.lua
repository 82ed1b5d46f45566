-- hypd.aws._rest: the HTTP binding shared by restJson1 and restXml: the URI
-- template with its labels ({name}, greedy {Key+}), query-string members,
-- header members and header maps (x-amz-meta-*), and the same members read
-- back from a response.
local errors = require "hypd.errors"
local json = require "hypd.json"
local S = require "hypd.aws.shape"
local sys = require "hypd.sys"

local M = {}

local function bad(field, rule)
  return errors.new("VALIDATION", "invalid parameter " .. field .. ": " .. rule, { field = field })
end

-- text(model, head, traits, v, ts_default) -> v as the text of a URI label,
-- query value or header
local function text(model, head, traits, v, ts_default)
  local typ = S.kind(model, head)
  if typ == "boolean" then return v and "true" or "false" end
  if typ == "timestamp" then
    local f = S.format_timestamp(v, traits.ts or ts_default)
    return type(f) == "number" and S.number_text(f) or f
  end
  if typ == "integer" or typ == "long" then return string.format("%d", math.tointeger(v)) end
  if typ == "double" or typ == "float" then return S.number_text(v) end
  if typ == "blob" then return sys.b64encode(v) end
  if typ == "string" and traits.jsonvalue then return sys.b64encode(json.encode(v)) end
  return tostring(v)
end

local function header_list_item(s)
  if s:find('[",]') then return '"' .. s:gsub('"', '\\"') .. '"' end
  return s
end

-- payload(model, shape) -> the member named by the shape's payload trait,
-- and whether it goes as is (a blob or a string), or nil when none
function M.payload(model, shape)
  local m = shape.payload and S.index(shape)[shape.payload]
  if not m then return nil end
  local typ = S.kind(model, m[2])
  return m, typ == "blob" or typ == "string"
end

-- bind(model, op, params) -> req, input | nil, err: req has every member
-- bound to the URI, query string and headers, and an empty body; input =
-- {shape, members (the set of member names left for the body), payload,
-- raw (see payload)}, nil when the operation takes no input
local function bind(model, op, params)
  local template = op.uri or "/"
  local path, static = template:match("^([^?]*)%??(.*)$")
  local query, headers, labels, body_members = {}, {}, {}, {}
  for part in static:gmatch("[^&]+") do
    local k, v = part:match("^([^=]*)=(.*)$")
    query[#query + 1] = k and S.uri_encode(k) .. "=" .. S.uri_encode(v) or S.uri_encode(part)
  end
  local shape = op.input and model.shapes[op.input]
  local bucket
  for _, m in ipairs(shape and shape[2] or {}) do
    local name, v, loc = m[1], params[m[1]], m.loc
    local key = m.name or name
    if not S.present(v) then
      if loc == "uri" then labels[key] = false end
    elseif loc == "uri" then
      labels[key] = text(model, m[2], m, v, "iso8601")
      if name == "Bucket" then bucket = v end
    elseif loc == "querystring" then
      local typ, sh = S.kind(model, m[2])
      if typ == "map" then
        local vhead, vt = S.ref(sh[3])
        local keys = {}
        for k in pairs(v) do keys[#keys + 1] = k end
        table.sort(keys)
        for _, k in ipairs(keys) do
          local vtyp, vsh = S.kind(model, vhead)
          local items = vtyp == "list" and v[k] or { v[k] }
          local ihead, it = vhead, vt
          if vtyp == "list" then ihead, it = S.ref(vsh[2]) end
          for _, x in ipairs(items) do
            query[#query + 1] = S.uri_encode(k) .. "=" .. S.uri_encode(text(model, ihead, it, x, "iso8601"))
          end
        end
      elseif typ == "list" then
        local ihead, it = S.ref(sh[2])
        for _, x in ipairs(v) do
          query[#query + 1] = S.uri_encode(key) .. "=" .. S.uri_encode(text(model, ihead, it, x, "iso8601"))
        end
      else
        query[#query + 1] = S.uri_encode(key) .. "=" .. S.uri_encode(text(model, m[2], m, v, "iso8601"))
      end
    elseif loc == "header" then
      local typ, sh = S.kind(model, m[2])
      if typ == "list" then
        if #v > 0 then
          local ihead, it = S.ref(sh[2])
          local parts = {}
          for i, x in ipairs(v) do
            local s = text(model, ihead, it, x, "rfc822")
            parts[i] = S.kind(model, ihead) == "string" and header_list_item(s) or s
          end
          headers[key:lower()] = table.concat(parts, ",")
        end
      else
        headers[key:lower()] = text(model, m[2], m, v, "rfc822")
      end
    elseif loc == "headers" then
      for k, x in pairs(v) do headers[(key .. k):lower()] = tostring(x) end
    elseif not loc then
      body_members[name] = true
    end
  end
  local missing
  path = path:gsub("{([^}]+)}", function(label)
    local greedy = label:sub(-1) == "+"
    local key = greedy and label:sub(1, -2) or label
    local v = labels[key]
    if not v or v == "" then
      missing = missing or key
      return ""
    end
    return S.uri_encode(v, greedy)
  end)
  if missing then
    local field = missing
    for _, m in ipairs(shape and shape[2] or {}) do
      if m.loc == "uri" and (m.name or m[1]) == missing then field = m[1] end
    end
    return nil, bad(field, "is required and must not be empty (it is part of the URI)")
  end
  local req = {
    method = op.method or "POST",
    path = path,
    query = table.concat(query, "&"),
    headers = headers,
    body = "",
    bucket = bucket,
  }
  if not shape then return req end
  local pm, raw = M.payload(model, shape)
  return req, { shape = shape, members = body_members, payload = pm, raw = raw }
end

-- builder(payload, members) -> build(model, op, name, params) -> req |
-- nil, err: a REST protocol's build. When the operation takes input, the
-- request's body is a raw payload member as it is ("" when absent), a
-- structure payload member's value (absent or not) from payload(model,
-- member, value), else the members left for the body from members(model,
-- op, params, input); both answer body [, content-type], the content-type
-- set when the body is not empty and no member set one
function M.builder(payload, members)
  return function(model, op, _, params)
    local req, input = bind(model, op, params)
    if not req or not input then return req, input end
    local pm = input.payload
    local body, content_type
    if not pm then
      body, content_type = members(model, op, params, input)
    elseif input.raw then
      local v = params[pm[1]]
      body = S.present(v) and v or ""
    else
      body, content_type = payload(model, pm, params[pm[1]])
    end
    req.body = body
    if content_type and body ~= "" and not req.headers["content-type"] then
      req.headers["content-type"] = content_type
    end
    return req
  end
end

-- parse_headers(model, shape, resp, out): sets the members of out that the
-- response carries in its status line and headers
local function parse_headers(model, shape, resp, out)
  local h = resp.headers or {}
  for _, m in ipairs(shape[2]) do
    local loc = m.loc
    if loc == "statusCode" then
      out[m[1]] = resp.status
    elseif loc == "header" then
      local v = h[(m.name or m[1]):lower()]
      if v then
        local typ, sh = S.kind(model, m[2])
        if typ == "list" then
          local ihead, it = S.ref(sh[2])
          local list = json.array()
          for item in (v .. ","):gmatch("%s*(.-)%s*,") do
            list[#list + 1] = S.parse_scalar(S.kind(model, ihead), item, it)
          end
          out[m[1]] = list
        else
          out[m[1]] = S.parse_scalar(typ, v, m)
        end
      end
    elseif loc == "headers" then
      local prefix = (m.name or ""):lower()
      local map = json.object()
      for k, v in pairs(h) do
        if k:sub(1, #prefix) == prefix then map[k:sub(#prefix + 1)] = v end
      end
      out[m[1]] = map
    end
  end
end

-- request_id(resp) -> the request id a REST service sent in its headers
function M.request_id(resp)
  local h = resp.headers or {}
  return h["x-amzn-requestid"] or h["x-amz-request-id"]
end

-- parse(model, op, resp, decode) -> out | nil, err: a successful response's
-- members from its headers, a raw payload member as the body is, the others
-- from decode(shape, payload member or nil, out) -> true | nil, err, and
-- ResponseMetadata.RequestId
function M.parse(model, op, resp, decode)
  local out = json.object()
  local shape = op.output and model.shapes[op.output]
  if shape then
    parse_headers(model, shape, resp, out)
    local pm, raw = M.payload(model, shape)
    if pm and raw then
      out[pm[1]] = resp.body or ""
    else
      local ok, err = decode(shape, pm, out)
      if not ok then return nil, err end
    end
  end
  local rid = M.request_id(resp)
  if rid then out.ResponseMetadata = { RequestId = rid } end
  return out
end

return M
