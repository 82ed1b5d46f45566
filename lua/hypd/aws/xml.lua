-- hypd.aws.xml: model shapes <-> XML, for the query, EC2 and restXml
-- protocols. Reading walks the tree of hypd.xml.decode (elements are
-- { name, attrs, text, [1..n] = children }); writing produces the few XML
-- bodies restXml sends (S3 configurations, DeleteObjects), the way
-- botocore's ElementTree writes them.
local json = require "hypd.json"
local S = require "hypd.aws.shape"
local sys = require "hypd.sys"

local M = {}

-- by_name(node) -> { name = element | { element, element, ..., multi = true } }
function M.by_name(node)
  local d = {}
  for _, c in ipairs(node) do
    local cur = d[c.name]
    if cur == nil then
      d[c.name] = c
    elseif cur.multi then
      cur[#cur + 1] = c
    else
      d[c.name] = { cur, c, multi = true }
    end
  end
  return d
end

local function first(x) return x.multi and x[1] or x end
local function all(x) return x.multi and x or { x } end

local parse

-- the element name a structure member is read from
function M.member_key(model, m)
  if m.flat then
    local typ, shape = S.kind(model, m[2])
    if typ == "list" then
      local _, t = S.ref(shape[2])
      if t.name then return t.name end
    end
  end
  return m.name or m[1]
end

local function parse_structure(model, shape, x)
  local node = first(x)
  local d = M.by_name(node)
  local out = json.object()
  for _, m in ipairs(shape[2]) do
    if not m.loc then
      local child = d[M.member_key(model, m)]
      if child then
        out[m[1]] = parse(model, m[2], m, child)
      elseif m.attr and node.attrs then
        local v = node.attrs[m.name]
        if v then out[m[1]] = v end
      end
    end
  end
  return out
end

-- parse(model, head, traits, x) -> Lua value of element x (or of the
-- elements of a flattened list or map, x.multi)
parse = function(model, head, traits, x)
  local typ, shape = S.kind(model, head)
  if typ == "structure" then
    return parse_structure(model, shape, x)
  elseif typ == "list" then
    local item, t = S.ref(shape[2])
    local out = json.array()
    local nodes = traits.flat and all(x) or first(x)
    for i, c in ipairs(nodes) do out[i] = parse(model, item, t, c) end
    return out
  elseif typ == "map" then
    local khead, kt = S.ref(shape[2])
    local vhead, vt = S.ref(shape[3])
    local kname, vname = kt.name or "key", vt.name or "value"
    local out = json.object()
    for _, entry in ipairs(traits.flat and all(x) or first(x)) do
      local d = M.by_name(entry)
      if d[kname] then
        local k = parse(model, khead, kt, d[kname])
        out[k] = d[vname] and parse(model, vhead, vt, d[vname]) or json.null
      end
    end
    return out
  end
  local node = first(x)
  return S.parse_scalar(typ, node.text or "", traits)
end
M.parse = parse

-- --- writing ------------------------------------------------------------

local TEXT_ESC = { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;" }
local ATTR_ESC = { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;", ["\n"] = "&#10;",
  ["\r"] = "&#13;", ["\t"] = "&#09;" }

local function text_esc(s) return (s:gsub("[&<>]", TEXT_ESC)) end
local function attr_esc(s) return (s:gsub('[&<>"\n\r\t]', ATTR_ESC)) end

-- start_tag(name, traits, attrs [, esc]) -> "<name" with the shape's
-- xmlns trait (xmlns, or xmlns:prefix with traits.xmlns_prefix) and attrs
-- {{name, value}} as attributes, each value escaped by esc (default: as
-- botocore escapes it); the caller closes the tag (">" or " />")
function M.start_tag(name, traits, attrs, esc)
  esc = esc or attr_esc
  local buf = { "<" .. name }
  if traits.xmlns then
    buf[#buf + 1] = string.format(' xmlns%s="%s"', traits.xmlns_prefix and ":" .. traits.xmlns_prefix or "",
      esc(traits.xmlns))
  end
  for _, a in ipairs(attrs or {}) do buf[#buf + 1] = string.format(' %s="%s"', a[1], esc(a[2])) end
  return table.concat(buf)
end

local function open(buf, name, traits, attrs) buf[#buf + 1] = M.start_tag(name, traits, attrs) end

local function leaf(buf, name, traits, text)
  open(buf, name, traits)
  if text == "" then
    buf[#buf + 1] = " />"
  else
    buf[#buf + 1] = ">" .. text_esc(text) .. "</" .. name .. ">"
  end
end

local write

local function write_structure(buf, model, shape, traits, v, name)
  local attrs, children = {}, {}
  for _, m in ipairs(shape[2]) do
    local x = v[m[1]]
    if S.present(x) and not m.loc then
      if m.attr then attrs[#attrs + 1] = { m.name, tostring(x) } else children[#children + 1] = m end
    end
  end
  open(buf, name, traits, attrs)
  if #children == 0 then
    buf[#buf + 1] = " />"
    return
  end
  buf[#buf + 1] = ">"
  for _, m in ipairs(children) do write(buf, model, m[2], m, v[m[1]], m.name or m[1]) end
  buf[#buf + 1] = "</" .. name .. ">"
end

-- write(buf, model, head, traits, v, name): appends element `name` for v
write = function(buf, model, head, traits, v, name)
  local typ, shape = S.kind(model, head)
  if typ == "structure" then
    return write_structure(buf, model, shape, traits, v, name)
  elseif typ == "list" then
    local item, t = S.ref(shape[2])
    if traits.flat then
      for _, x in ipairs(v) do write(buf, model, item, t, x, name) end
      return
    end
    open(buf, name, traits)
    if #v == 0 then buf[#buf + 1] = " />" return end
    buf[#buf + 1] = ">"
    for _, x in ipairs(v) do write(buf, model, item, t, x, t.name or "member") end
    buf[#buf + 1] = "</" .. name .. ">"
    return
  elseif typ == "map" then
    local khead, kt = S.ref(shape[2])
    local vhead, vt = S.ref(shape[3])
    local keys = {}
    for k in pairs(v) do keys[#keys + 1] = k end
    table.sort(keys)
    if not traits.flat then open(buf, name, traits) buf[#buf + 1] = ">" end
    for _, k in ipairs(keys) do
      buf[#buf + 1] = traits.flat and "<" .. name .. ">" or "<entry>"
      write(buf, model, khead, kt, k, kt.name or "key")
      write(buf, model, vhead, vt, v[k], vt.name or "value")
      buf[#buf + 1] = traits.flat and "</" .. name .. ">" or "</entry>"
    end
    if not traits.flat then buf[#buf + 1] = "</" .. name .. ">" end
    return
  end
  local text
  if typ == "boolean" then
    text = v and "true" or "false"
  elseif typ == "blob" then
    text = sys.b64encode(v)
  elseif typ == "timestamp" then
    text = S.format_timestamp(v, traits.ts or "iso8601")
    if type(text) == "number" then text = S.number_text(text) end
  elseif typ == "integer" or typ == "long" then
    text = string.format("%d", math.tointeger(v))
  elseif typ == "double" or typ == "float" then
    text = S.number_text(v)
  else
    text = tostring(v)
  end
  leaf(buf, name, traits, text)
end

-- encode(model, head, traits, v, name) -> the XML text of one element
function M.encode(model, head, traits, v, name)
  local buf = {}
  write(buf, model, head, traits, v, name)
  return table.concat(buf)
end

return M
