-- hypd.cli._words: what `hypd call` says to the person at the terminal when
-- a call cannot go ahead. The registry's messages are written for agents
-- ("required (a decision: ask the person who wants the cluster)" tells an
-- agent to go and ask); the person typing is the one who decides, so the
-- CLI says what the value is and how to give it. MCP and REST keep the
-- registry's wording.
--
--   suggest(word, names) -> the closest name, or nil (did you mean)
--   argument(word, props) -> message | nil: a word that is not key=value
--   unknown_tool(name, names) -> message
--   explain(err, props, tool) -> err with a message for a person (VALIDATION)
--   unreachable(url, err) -> message: nothing listens where --api points
local M = {}

-- distance(a, b) -> the edit distance (insert, delete, replace, swap of
-- two neighbours), capped: names are short, so the quadratic table is small
local function distance(a, b)
  local la, lb = #a, #b
  if math.abs(la - lb) > 3 then return 99 end
  local d = {}
  for i = 0, la do d[i] = { [0] = i } end
  for j = 0, lb do d[0][j] = j end
  for i = 1, la do
    for j = 1, lb do
      local cost = a:byte(i) == b:byte(j) and 0 or 1
      local v = math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
      if i > 1 and j > 1 and a:byte(i) == b:byte(j - 1) and a:byte(i - 1) == b:byte(j) then
        v = math.min(v, d[i - 2][j - 2] + 1)
      end
      d[i][j] = v
    end
  end
  return d[la][lb]
end

-- suggest(word, names) -> the name closest to word: the same once - is _
-- and case is ignored, else the one at the smallest edit distance within
-- a third of its length (at least 2), else one that contains word or
-- that word contains; nil when none is close
function M.suggest(word, names)
  local w = tostring(word):lower():gsub("%-", "_")
  local best, bd
  for _, n in ipairs(names) do
    if n == w then return n end
    local dist = distance(w, n)
    if dist <= math.max(2, #n // 3) and (not bd or dist < bd or (dist == bd and n < best)) then best, bd = n, dist end
  end
  if best then return best end
  if #w >= 4 then
    for _, n in ipairs(names) do
      if n:find(w, 1, true) or w:find(n, 1, true) then return n end
    end
  end
end

local function sorted_keys(props)
  local names = {}
  for k in pairs(props or {}) do names[#names + 1] = k end
  table.sort(names)
  return names
end

-- argument(word, props) -> the message for a word that is neither
-- key=value nor key:=json (props: the tool's parameters), naming the
-- parameter it probably meant
function M.argument(word, props)
  local k, sep, v = word:match("^([^=:]+)(:?=)(.*)$")
  local hint = ""
  if k then
    local near = M.suggest(k, sorted_keys(props))
    if near then hint = ": did you mean " .. near .. sep .. v .. "?" end
    if hint == "" then
      hint = ": '" .. k .. "' is not a parameter name (letters, digits and _; `hypd tools --json` lists each tool's)"
    end
  else
    hint = ": give each argument as key=value, or key:=json for typed values (count:=3, tags:='[\"a\"]')"
  end
  return "argument '" .. word .. "' is not key=value or key:=json" .. hint
end

-- unknown_tool(name, names) -> the message for a tool the registry lacks
function M.unknown_tool(name, names)
  local near = M.suggest(name, names)
  return "there is no tool named '" .. tostring(name) .. "'" .. (near and ": did you mean " .. near .. "?" or "") ..
    " (`hypd tools` lists them)"
end

-- what a parameter is, in a clause: its description up to the first
-- sentence end, its first letter lowercased
local function what(spec)
  local d = type(spec) == "table" and type(spec.description) == "string" and spec.description or ""
  d = d:match("^(.-)[%.;]%s") or d:match("^(.-)%.?$") or d
  -- an agent is told to ask; the person at the terminal is the one asked
  d = d:gsub("%s*%(ask the person:%s*([^()]*)%)", " (%1)"):gsub(":?%s*a decision[^;.]*", "")
  if d == "" then return nil end
  if #d > 160 then d = d:sub(1, 157) .. "..." end
  return (d:gsub("^%u", string.lower))
end

-- explain(err, props, tool) -> err: a VALIDATION error's message said for
-- a person, field by field, after the tool's name (props: its parameters
-- by name); other errors are returned as they are
function M.explain(err, props, tool)
  if type(err) ~= "table" or err.code ~= "VALIDATION" or type(err.fields) ~= "table" or #err.fields == 0 then
    return err
  end
  local names, parts = sorted_keys(props), {}
  for _, f in ipairs(err.fields) do
    local field = tostring(f.field or "")
    local spec = props and props[field]
    if f.rule == "required" and spec then
      local w = what(spec)
      parts[#parts + 1] = field .. " is required" .. (w and ": " .. w or "") .. " (give it as " .. field .. "=...)"
    elseif f.rule == "unknown" and props then
      local near = M.suggest(field, names)
      parts[#parts + 1] = field .. " is not a parameter of this tool" ..
        (near and ": did you mean " .. near .. "?" or "") ..
        " (it takes " .. (#names > 0 and table.concat(names, ", ") or "no arguments") .. ")"
    else
      parts[#parts + 1] = tostring(f.message or field)
    end
  end
  err.message = (tool and tool .. ": " or "") .. table.concat(parts, "; ")
  return err
end

-- unreachable(url, err) -> the message for a call whose server did not
-- answer: what to start, not the transport's words alone
function M.unreachable(url, err)
  local hostport = tostring(url):match("^https?://([^/]+)") or tostring(url)
  return "nothing listens on " .. hostport .. " (" .. tostring(err and err.message or "no answer") ..
    "): is hypd serve running? `make run` prints its URL, or start one with hypd serve --listen " .. hostport
end

return M
