-- hypd.k8s.yaml: the YAML subset kubeconfig files use (what `aws eks
-- update-kubeconfig` and kubectl write): block mappings and sequences by
-- indentation, plain and quoted scalars, `{}` and `[]`, comments.
-- Anchors, tags, multi-line scalars and flow collections with content are
-- refused with the line number, never guessed.
local json = require "hypd.json"

local M = {}

local function fail(n, msg) error({ code = "VALIDATION", message = string.format("line %d: %s", n, msg) }, 0) end

local function scalar(s, n)
  s = s:gsub("%s+#.*$", ""):gsub("%s+$", "")
  if s == "" or s == "~" or s == "null" then return json.null end
  if s == "{}" then return json.object() end
  if s == "[]" then return json.array() end
  local c = s:sub(1, 1)
  if c == '"' then
    local body = s:match('^"(.*)"$')
    if not body then fail(n, "unterminated double-quoted string") end
    return (body:gsub("\\(.)", { n = "\n", t = "\t", ['"'] = '"', ["\\"] = "\\", ["/"] = "/" }))
  elseif c == "'" then
    local body = s:match("^'(.*)'$")
    if not body then fail(n, "unterminated single-quoted string") end
    return (body:gsub("''", "'"))
  elseif c == "&" or c == "*" or c == "!" or c == "|" or c == ">" or c == "{" or c == "[" then
    fail(n, "unsupported YAML (anchors, tags, block or flow scalars): " .. s)
  end
  if s == "true" then return true end
  if s == "false" then return false end
  if s:match("^%-?%d+$") then return math.tointeger(tonumber(s)) end
  if s:match("^%-?%d+%.%d+$") then return tonumber(s) end
  return s
end

-- lines -> { indent, text, n } without blanks and comments
local function lex(text)
  local out = {}
  local n = 0
  for line in (text .. "\n"):gmatch("(.-)\r?\n") do
    n = n + 1
    if line:find("\t", 1, true) and line:match("^%s*\t") then fail(n, "tabs are not allowed for indentation") end
    local ind, rest = line:match("^( *)(.*)$")
    if rest ~= "" and not rest:match("^#") and rest ~= "---" then
      out[#out + 1] = { indent = #ind, text = rest, n = n }
    end
  end
  return out
end

local parse_block

-- "key: value" -> key, value-text (nil when the value is a nested block)
local function key_value(text, n)
  local key, rest
  if text:sub(1, 1) == '"' or text:sub(1, 1) == "'" then
    local q = text:sub(1, 1)
    local close = text:find(q, 2, true)
    if not close then fail(n, "unterminated quoted key") end
    key, rest = text:sub(2, close - 1), text:sub(close + 1)
    rest = rest:match("^:%s*(.*)$")
  else
    key, rest = text:match("^([^:]-):%s+(.*)$")
    if not key then key, rest = text:match("^([^:]-):$"), "" end
  end
  if not key or rest == nil then return nil end
  return key, rest
end

local function parse_map(lines, i, indent)
  local map = json.object()
  while lines[i] and lines[i].indent == indent and lines[i].text:sub(1, 2) ~= "- " and lines[i].text ~= "-" do
    local l = lines[i]
    local key, rest = key_value(l.text, l.n)
    if not key then fail(l.n, "expected 'key: value'") end
    if rest == "" or rest:match("^#") then
      local nxt = lines[i + 1]
      if nxt and (nxt.indent > indent or (nxt.indent == indent and nxt.text:sub(1, 1) == "-")) then
        map[key], i = parse_block(lines, i + 1, nxt.indent)
      else
        map[key], i = json.null, i + 1
      end
    else
      map[key], i = scalar(rest, l.n), i + 1
    end
  end
  return map, i
end

local function parse_seq(lines, i, indent)
  local seq = json.array()
  while lines[i] and lines[i].indent == indent and (lines[i].text:sub(1, 2) == "- " or lines[i].text == "-") do
    local l = lines[i]
    local rest = l.text:sub(3)
    if rest == "" then
      local nxt = lines[i + 1]
      if nxt and nxt.indent > indent then
        seq[#seq + 1], i = parse_block(lines, i + 1, nxt.indent)
      else
        seq[#seq + 1], i = json.null, i + 1
      end
    elseif key_value(rest, l.n) then
      -- "- key: value" starts a mapping indented past the dash
      local inner = indent + 2
      lines[i] = { indent = inner, text = rest, n = l.n }
      seq[#seq + 1], i = parse_map(lines, i, inner)
    else
      seq[#seq + 1], i = scalar(rest, l.n), i + 1
    end
  end
  return seq, i
end

parse_block = function(lines, i, indent)
  local l = lines[i]
  if l.text:sub(1, 2) == "- " or l.text == "-" then return parse_seq(lines, i, indent) end
  return parse_map(lines, i, indent)
end

-- decode(text) -> value | nil, err
function M.decode(text)
  local ok, v = pcall(function()
    local lines = lex(text)
    if #lines == 0 then return json.object() end
    local value, i = parse_block(lines, 1, lines[1].indent)
    if lines[i] then fail(lines[i].n, "unexpected indentation") end
    return value
  end)
  if not ok then
    if type(v) ~= "table" then v = { code = "VALIDATION", message = tostring(v) } end
    return nil, require("hypd.errors").new(v.code, v.message)
  end
  return v
end

return M
