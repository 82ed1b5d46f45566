-- sandbox._codec_xml: XML for the sandbox codec: output values written the
-- way the query, EC2 and restXml services write them (the mirror of the
-- client's hypd.aws.xml reader), request bodies (S3 configurations,
-- DeleteObjects) read strictly by shape, and the XML error documents.
local json = require "hypd.json"
local X0 = require "hypd.aws.xml"
local S = require "hypd.aws.shape"
local V = require "sandbox._codec_value"

local M = {}

M.DECL = '<?xml version="1.0" encoding="UTF-8"?>\n'

local TEXT_ESC = { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ["\r"] = "&#13;" }
local ATTR_ESC = { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;", ["\n"] = "&#10;",
  ["\r"] = "&#13;", ["\t"] = "&#9;" }

-- esc(s) -> s as XML character data (valid UTF-8, no control characters)
function M.esc(s) return (V.utf8_clean(tostring(s)):gsub("[&<>\r]", TEXT_ESC)) end
local function attr_esc(s) return (V.utf8_clean(tostring(s)):gsub('[&<>"\n\r\t]', ATTR_ESC)) end

-- leaf(name, text) -> "<name>text</name>"
function M.leaf(name, text) return "<" .. name .. ">" .. M.esc(text) .. "</" .. name .. ">" end

-- the element name a structure member is written as: the one the client
-- reads it from (flattened lists use their member's name)
local member_key = X0.member_key

-- open(buf, name, traits, attrs): the element's start tag, as the client
-- writes one (hypd.aws.xml.start_tag), with the sandbox's escaping
local function open(buf, name, traits, attrs) buf[#buf + 1] = X0.start_tag(name, traits, attrs, attr_esc) .. ">" end

local write

local function write_members(buf, model, shape, v)
  for _, m in ipairs(shape[2]) do
    local x = v[m[1]]
    if S.present(x) and not m.loc and not m.attr then write(buf, model, m[2], m, x, member_key(model, m)) end
  end
end
M.write_members = write_members

-- write(buf, model, head, traits, v, name): appends element `name` for
-- output value v (nothing when v does not fit the shape)
write = function(buf, model, head, traits, v, name)
  local typ, shape = S.kind(model, head)
  if typ == "structure" then
    if type(v) ~= "table" then return end
    local attrs = {}
    for _, m in ipairs(shape[2]) do
      local x = v[m[1]]
      if m.attr and S.present(x) then
        local s = V.text(model, m[2], m, x, "iso8601")
        if s then attrs[#attrs + 1] = { m.name or m[1], s } end
      end
    end
    open(buf, name, traits, attrs)
    write_members(buf, model, shape, v)
    buf[#buf + 1] = "</" .. name .. ">"
  elseif typ == "list" then
    if type(v) ~= "table" then return end
    local item, t = S.ref(shape[2])
    if traits.flat then
      for _, x in ipairs(v) do
        if S.present(x) then write(buf, model, item, t, x, name) end
      end
      return
    end
    open(buf, name, traits)
    for _, x in ipairs(v) do
      if S.present(x) then write(buf, model, item, t, x, t.name or "member") end
    end
    buf[#buf + 1] = "</" .. name .. ">"
  elseif typ == "map" then
    if type(v) ~= "table" then return end
    local khead, kt = S.ref(shape[2])
    local vhead, vt = S.ref(shape[3])
    local keys = {}
    for k, x in pairs(v) do
      if type(k) == "string" and S.present(x) then keys[#keys + 1] = k end
    end
    table.sort(keys)
    if not traits.flat then open(buf, name, traits) end
    for _, k in ipairs(keys) do
      local entry = traits.flat and name or "entry"
      buf[#buf + 1] = "<" .. entry .. ">"
      write(buf, model, khead, kt, k, kt.name or "key")
      write(buf, model, vhead, vt, v[k], vt.name or "value")
      buf[#buf + 1] = "</" .. entry .. ">"
    end
    if not traits.flat then buf[#buf + 1] = "</" .. name .. ">" end
  else
    local s = V.text(model, head, traits, v, "iso8601")
    if s then buf[#buf + 1] = M.leaf(name, s) end
  end
end
M.write = write

-- --- reading request bodies --------------------------------------------------

local function first(x) return x.multi and x[1] or x end
local function all(x) return x.multi and x or { x } end

local read

local function read_structure(C, model, shape, x, path)
  local node = first(x)
  local d = X0.by_name(node)
  local out = json.object()
  for _, m in ipairs(shape[2]) do
    if not m.loc then
      local key = member_key(model, m)
      local child = d[key]
      local p = C.field(path, key)
      if child then
        local v = read(C, model, m[2], m, child, p)
        if v == nil then return nil end
        out[m[1]] = v
      elseif m.attr and node.attrs and node.attrs[m.name or m[1]] then
        local v = V.text_value(C, model, m[2], m, node.attrs[m.name or m[1]], p)
        if v == nil then return nil end
        out[m[1]] = v
      end
    end
  end
  return out
end

-- read(C, model, head, traits, x, path) -> the input value of element x
-- (or of the elements of a flattened list, x.multi); nil and C.bad when a
-- scalar does not parse
read = function(C, model, head, traits, x, path)
  local typ, shape = S.kind(model, head)
  if typ == "structure" then
    return read_structure(C, model, shape, x, path)
  elseif typ == "list" then
    local item, t = S.ref(shape[2])
    local out = json.array()
    for i, c in ipairs(traits.flat and all(x) or first(x)) do
      local v = read(C, model, item, t, c, C.item(path, i))
      if v == nil then return nil end
      out[i] = v
    end
    return out
  elseif typ == "map" then
    local khead, kt = S.ref(shape[2])
    local vhead, vt = S.ref(shape[3])
    local out = json.object()
    for _, entry in ipairs(traits.flat and all(x) or first(x)) do
      local d = X0.by_name(entry)
      local kx, vx = d[kt.name or "key"], d[vt.name or "value"]
      if kx and vx then
        local k = read(C, model, khead, kt, kx, path)
        if type(k) ~= "string" then return V.bad(C, path, "", "map") end
        local v = read(C, model, vhead, vt, vx, C.field(path, k))
        if v == nil then return nil end
        out[k] = v
      end
    end
    return out
  end
  local node = first(x)
  if not node.text then return V.bad(C, path, "<" .. node.name .. ">", typ) end
  return V.text_value(C, model, head, traits, node.text, path)
end
M.read = read

return M
