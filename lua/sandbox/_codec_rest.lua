-- sandbox._codec_rest: the HTTP binding of restJson1 (EKS) and restXml
-- (S3) on the server side: finding the operation by method, URI template
-- and query literals (the most specific route wins; required query and
-- header members break ties, so PUT /b/k with x-amz-copy-source is
-- CopyObject), reading labels, query members, headers and header maps
-- back into members, and writing output members to headers and status.
-- The bodies themselves belong to the caller (codec.lua, _codec_s3.lua).
local json = require "hypd.json"
local S = require "hypd.aws.shape"
local Q = require "sandbox._codec_query"
local V = require "sandbox._codec_value"

local M = {}

local cache = setmetatable({}, { __mode = "k" })

local function compile_route(model, name, op)
  local tpath, tquery = (op.uri or "/"):match("^([^?]*)%??(.*)$")
  local r = { name = name, op = op, method = (op.method or "POST"):upper(), segs = {}, lits = 0, qlits = {},
    req = {} }
  for seg in tpath:gmatch("[^/]+") do
    local label = seg:match("^{(.+)}$")
    if label then
      local greedy = label:sub(-1) == "+"
      r.segs[#r.segs + 1] = { label = greedy and label:sub(1, -2) or label, greedy = greedy }
    else
      r.segs[#r.segs + 1] = { lit = seg }
      r.lits = r.lits + 1
    end
  end
  for part in tquery:gmatch("[^&]+") do
    local k, v = part:match("^([^=]*)=(.*)$")
    r.qlits[#r.qlits + 1] = { k or part, v }
  end
  local shape = op.input and model.shapes[op.input]
  if shape then
    local idx = S.index(shape)
    for _, rname in ipairs(shape.required or {}) do
      local m = idx[rname]
      if m and (m.loc == "querystring" or m.loc == "header") then
        r.req[#r.req + 1] = { m.loc, m.loc == "header" and (m.name or m[1]):lower() or m.name or m[1] }
      end
    end
  end
  return r
end

local function routes(model)
  local list = cache[model]
  if not list then
    list = {}
    for name, op in pairs(model.operations) do list[#list + 1] = compile_route(model, name, op) end
    table.sort(list, function(a, b) return a.name < b.name end)
    cache[model] = list
  end
  return list
end

-- parse_query(s) -> { first = { k = v }, all = { k = { v... } }, keys = { k... } }
function M.parse_query(s)
  local q = { first = {}, all = {}, keys = {} }
  for _, p in ipairs(Q.form_pairs(s or "")) do
    local k, v = p[1], p[2]
    if q.all[k] then
      table.insert(q.all[k], v)
    else
      q.first[k], q.all[k] = v, { v }
      q.keys[#q.keys + 1] = k
    end
  end
  return q
end

-- split_path(raw) -> raw segments (no empty last one), trailing slash
function M.split_path(raw)
  raw = tostring(raw or "/"):match("^[^?#]*")
  if raw:sub(1, 1) ~= "/" then raw = raw:match("^%a[%w+.-]*://[^/]*(/.*)$") or "/" .. raw end
  local segs = {}
  for seg in (raw:sub(2) .. "/"):gmatch("([^/]*)/") do segs[#segs + 1] = seg end
  local trailing = false
  if segs[#segs] == "" then
    segs[#segs] = nil
    trailing = #segs > 0
  end
  return segs, trailing
end

local function match_path(route, segs, trailing)
  local labels, i = {}, 1
  for _, ts in ipairs(route.segs) do
    if ts.greedy then
      if i > #segs then return nil end
      local rest = table.concat(segs, "/", i) .. (trailing and "/" or "")
      if rest == "" then return nil end
      labels[ts.label] = Q.unescape(rest)
      return labels
    end
    local seg = segs[i]
    if seg == nil or seg == "" then return nil end
    local d = Q.unescape(seg)
    if ts.lit then
      if d ~= ts.lit then return nil end
    else
      labels[ts.label] = d
    end
    i = i + 1
  end
  if i <= #segs then return nil end
  return labels
end

-- route(model, method, segs, trailing, q, headers) -> route, labels; or nil
function M.route(model, method, segs, trailing, q, headers)
  local best, best_labels, best_score
  local xid = q.first["x-id"]
  if xid and not model.operations[xid] then xid = nil end
  for _, r in ipairs(routes(model)) do
    local labels = r.method == method and (not xid or xid == r.name) and match_path(r, segs, trailing)
    if labels then
      local ok = true
      for _, lit in ipairs(r.qlits) do
        local v = q.first[lit[1]]
        if v == nil or lit[2] and v ~= lit[2] then ok = false break end
      end
      if ok then
        local score = #r.qlits * 1000 + r.lits * 10
        for _, need in ipairs(r.req) do
          local present = need[1] == "header" and headers[need[2]] or need[1] == "querystring" and q.first[need[2]]
          score = score + (present and 100 or -100000)
        end
        if not best or score > best_score then best, best_labels, best_score = r, labels, score end
      end
    end
  end
  return best, best_labels
end

-- split_header(v) -> the items of a list header ("a, \"b,c\"")
function M.split_header(v)
  local out, i, n = {}, 1, #v
  while i <= n do
    local s = v:find("[^%s]", i)
    if not s then break end
    if v:sub(s, s) == '"' then
      local buf, j = {}, s + 1
      while j <= n and v:sub(j, j) ~= '"' do
        if v:sub(j, j) == "\\" then j = j + 1 end
        buf[#buf + 1] = v:sub(j, j)
        j = j + 1
      end
      out[#out + 1] = table.concat(buf)
      i = (v:find(",", j, true) or n) + 1
    else
      local e = v:find(",", s, true) or n + 1
      out[#out + 1] = v:sub(s, e - 1):match("^(.-)%s*$")
      i = e + 1
    end
  end
  return out
end

local function list_of(C, model, head, items, path)
  local _, shape = S.kind(model, head)
  local ihead, it = S.ref(shape[2])
  local out = json.array()
  for i, x in ipairs(items) do
    local v = V.text_value(C, model, ihead, it, x, C.item(path, i))
    if v == nil then return nil end
    out[i] = v
  end
  return out
end

local function query_map(C, model, m, q, bound, path)
  local _, shape = S.kind(model, m[2])
  local vhead, vt = S.ref(shape[3])
  local vtyp = S.kind(model, vhead)
  local out = json.object()
  for _, k in ipairs(q.keys) do
    if not bound[k] then
      local v
      if vtyp == "list" then v = list_of(C, model, vhead, q.all[k], C.field(path, k))
      else v = V.text_value(C, model, vhead, vt, q.first[k], C.field(path, k)) end
      if v == nil then return nil end
      out[k] = v
    end
  end
  return next(out) and out or nil
end

-- bind(C, model, route, labels, q, headers) -> input with the members the
-- URI, query string and headers carry (nil and C.bad on a bad value)
function M.bind(C, model, route, labels, q, headers)
  local input = json.object()
  local shape = route.op.input and model.shapes[route.op.input]
  if not shape then return input end
  local bound = { ["x-id"] = true }
  for _, lit in ipairs(route.qlits) do bound[lit[1]] = true end
  for _, m in ipairs(shape[2]) do
    if m.loc == "querystring" then bound[m.name or m[1]] = true end
  end
  for _, m in ipairs(shape[2]) do
    local key, loc, v = m.name or m[1], m.loc, nil
    local path = C.field("", key)
    local typ = loc and S.kind(model, m[2])
    if loc == "uri" then
      if labels[key] then v = V.text_value(C, model, m[2], m, labels[key], path) end
    elseif loc == "querystring" then
      if typ == "map" then v = query_map(C, model, m, q, bound, path)
      elseif typ == "list" then v = q.all[key] and list_of(C, model, m[2], q.all[key], path)
      elseif q.first[key] then v = V.text_value(C, model, m[2], m, q.first[key], path) end
    elseif loc == "header" then
      local h = headers[key:lower()]
      if h and typ == "list" then v = list_of(C, model, m[2], M.split_header(h), path)
      elseif h then v = V.text_value(C, model, m[2], m, h, path) end
    elseif loc == "headers" then
      local prefix, map = key:lower(), json.object()
      for hk, hv in pairs(headers) do
        if #hk > #prefix and hk:sub(1, #prefix) == prefix then map[hk:sub(#prefix + 1)] = hv end
      end
      if next(map) then v = map end
    end
    if C.bad then return nil end
    if v ~= nil then input[m[1]] = v end
  end
  return input
end

-- payload(model, shape) -> the payload member, whether it is raw bytes
function M.payload(model, shape)
  local m = shape and shape.payload and S.index(shape)[shape.payload]
  if not m then return nil end
  local typ = S.kind(model, m[2])
  return m, typ == "blob" or typ == "string"
end

-- has_body_members(shape) -> whether some member travels in the body
function M.has_body_members(shape)
  for _, m in ipairs(shape and shape[2] or {}) do
    if not m.loc then return true end
  end
  return false
end

local function header_text(model, m, x)
  local typ, shape = S.kind(model, m[2])
  if typ ~= "list" then return V.text(model, m[2], m, x, "rfc822") end
  if type(x) ~= "table" or #x == 0 then return nil end
  local ihead, it = S.ref(shape[2])
  local parts = {}
  for _, item in ipairs(x) do
    local s = V.text(model, ihead, it, item, "rfc822")
    if s then parts[#parts + 1] = s:find('[",]') and '"' .. s:gsub('[\\"]', "\\%0") .. '"' or s end
  end
  return table.concat(parts, ", ")
end

-- write_headers(model, shape, output, headers) -> status from a statusCode
-- member or nil; sets the header members of output in headers
function M.write_headers(model, shape, output, headers)
  local status
  for _, m in ipairs(shape[2]) do
    local x = output[m[1]]
    if S.present(x) then
      if m.loc == "header" then
        headers[(m.name or m[1]):lower()] = header_text(model, m, x)
      elseif m.loc == "headers" and type(x) == "table" then
        for k, v in pairs(x) do
          if type(k) == "string" then headers[((m.name or "") .. k):lower()] = tostring(v) end
        end
      elseif m.loc == "statusCode" then
        status = math.tointeger(x)
      end
    end
  end
  return status
end

return M
