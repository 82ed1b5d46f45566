-- hypd.hints: the tool calls that hypd's answers suggest ("create it with
-- hyperpod_add_instance_group instance_group=system instance_type=..."),
-- found in text and checked against the registry. A suggested call is a
-- complete call: the person or agent who reads it can run it as written.
--
-- The form of a suggested call, the one every error, result `next` and
-- progress note uses:
--
--   TOOL key=value key:=json ...
--
-- TOOL is a registered tool's name; each argument is one word (no spaces;
-- a value with spaces is quoted '...' or "..." as a shell would), value as
-- `hypd call` reads it, json after `:=`. A value that hypd cannot know (the
-- person decides it, or it comes from a resource the caller names) is a
-- placeholder: <what> in angle brackets, lowercase words joined by - or _
-- (instance_type=<gpu-instance-type>, prompt=<prompt>, params:=<json-object>).
-- A call is complete when every required parameter of TOOL is given, as a
-- value or a placeholder, and every value given passes TOOL's schema.
--
-- A tool name followed by no argument ("follow it with operation_get") is a
-- reference, not a suggested call; only a word with a tool prefix followed
-- by key=value words is taken as a call (one whose TOOL is not registered
-- is an incomplete call: no such tool).
--
--   extract(text) -> { {tool, args = {{key, value, json = bool, placeholder = bool}}, text}, ... }
--   check(call) -> true | nil, problems (list of text)
--   scan(v) -> every suggested call in every string of v (tables walked;
--     under a key next, fix or hint a bare tool name is a call too)
local tool = require "hypd.tool.registry"
local json = require "hypd.json"

local M = {}

M.PLACEHOLDER = "^<[a-z0-9][a-z0-9_-]*>$" -- a Lua pattern: <what>

local function prefixed(word)
  for _, p in ipairs(tool.PREFIXES) do
    if word:sub(1, #p) == p and #word > #p then return true end
  end
  return false
end

-- words(text) -> the words of text, shell-like: a quoted part ('...' or
-- "...", at a word's or a value's start) is one word with its quotes
-- dropped; backticks are word bounds
local function words(text)
  local out, i, n = {}, 1, #text
  while i <= n do
    local c = text:sub(i, i)
    if c:match("[%s`]") then
      i = i + 1
    else
      local w = {}
      while i <= n and not text:sub(i, i):match("[%s`]") do
        c = text:sub(i, i)
        -- a quote opens a quoted part at a word's start or a value's
        -- ('key=a b' or key='a b'); elsewhere it is prose (the model's)
        if (c == "'" or c == '"') and (#w == 0 or w[#w] == "=") then
          local j = text:find(c, i + 1, true)
          if not j then j = n + 1 end
          w[#w + 1] = text:sub(i + 1, j - 1)
          i = j + 1
        else
          w[#w + 1] = c
          i = i + 1
        end
      end
      out[#out + 1] = table.concat(w)
    end
  end
  return out
end

-- trim(word) -> the word without the punctuation that ends a clause
-- around it in prose: "(hyperpod_create instance_count=1)." -> "...=1"
local function trim(w)
  w = w:gsub("^[%(%[]+", "")
  local prev
  repeat
    prev = w
    w = w:gsub("[%),;%.:%]]$", "")
    -- a closing bracket that is the value's own ("<zone>", "{...}", "[...]") stays
    local _, opens = prev:gsub("%[", "")
    local _, shuts = prev:gsub("%]", "")
    if prev:match(">$") or (prev:match("}$") and prev:find("{", 1, true)) or
      (prev:match("%]$") and opens >= shuts) then
      w = prev
    end
  until w == prev
  return w
end

local function arg_of(w)
  local key, value = w:match("^([a-z][a-z0-9_]*):=(.*)$")
  if key then return { key = key, value = value, json = true, placeholder = value:match(M.PLACEHOLDER) ~= nil } end
  key, value = w:match("^([a-z][a-z0-9_]*)=(.*)$")
  if key then return { key = key, value = value, json = false, placeholder = value:match(M.PLACEHOLDER) ~= nil } end
end

-- extract(text [, strict]) -> the suggested calls in text; strict (a
-- result's `next`, whose text is calls): a tool's name with no argument
-- is a call too
function M.extract(text, strict)
  local out = {}
  if type(text) ~= "string" then return out end
  local ws = {}
  for _, w in ipairs(words(text)) do
    -- a whole call in quotes ('training_submit recipe=<recipe>') is read as its words
    if w:find("%s") and not w:match("^[a-z][a-z0-9_]*:?=") then
      for _, x in ipairs(words(w)) do ws[#ws + 1] = x end
    else
      ws[#ws + 1] = w
    end
  end
  local i = 1
  while i <= #ws do
    local name = trim(ws[i])
    if name:match("^[a-z][a-z0-9_]*[a-z0-9]$") and prefixed(name) and
      ((ws[i + 1] and arg_of(trim(ws[i + 1]))) or (strict and tool.get(name))) then
      local call = { tool = name, args = {} }
      local j = i + 1
      while ws[j] do
        local raw = ws[j]
        local a = arg_of(trim(raw))
        if not a then break end
        call.args[#call.args + 1] = a
        j = j + 1
        if raw:match("[%),;]$") or (raw:match("%.$") and not a.placeholder) then break end -- the clause ends
      end
      local shown = { name }
      for _, a in ipairs(call.args) do shown[#shown + 1] = a.key .. (a.json and ":=" or "=") .. a.value end
      call.text = table.concat(shown, " ")
      out[#out + 1] = call
      i = j
    else
      i = i + 1
    end
  end
  return out
end

-- check(call) -> true | nil, problems: the call against the registry
function M.check(call)
  local def = tool.get(call.tool)
  if not def then return nil, { "no tool named " .. call.tool } end
  local problems, args, placeheld = {}, {}, {}
  for _, a in ipairs(call.args) do
    if not def.params[a.key] then
      problems[#problems + 1] = a.key .. ": " .. call.tool .. " has no such parameter"
    elseif a.placeholder then
      placeheld[a.key] = true
    elseif a.json then
      local v = json.decode(a.value)
      if v == nil then problems[#problems + 1] = a.key .. ": not JSON: " .. a.value else args[a.key] = v end
    else
      args[a.key] = tool.coerce(def.params, a.key, a.value)
    end
  end
  local _, err = tool.validate(def, args)
  for _, f in ipairs(err and err.fields or {}) do
    if not (f.rule == "required" and placeheld[f.field]) and f.rule ~= "unknown" then
      problems[#problems + 1] = f.message
    end
  end
  if err and not err.fields then problems[#problems + 1] = tostring(err.message) end
  if #problems > 0 then return nil, problems end
  return true
end

-- scan(v) -> every suggested call in every string of v (a string under
-- a key `next`, `fix` or `hint` read strictly)
M.STRICT_KEYS = { next = true, fix = true, hint = true }
function M.scan(v, out, depth, strict)
  out, depth = out or {}, depth or 0
  if type(v) == "string" then
    for _, c in ipairs(M.extract(v, strict)) do out[#out + 1] = c end
  elseif type(v) == "table" and depth < 32 then
    for k, x in pairs(v) do M.scan(x, out, depth + 1, M.STRICT_KEYS[k] == true) end
  end
  return out
end

return M
