-- hypd.lua_globals: the global names a Lua chunk reads and writes, and the
-- modules it requires, found by reading its text (no run): for `hypd
-- playbook check` (a playbook reaching a global its sandbox does not have
-- fails only when that line runs; this says so beforehand) and for the
-- playbook loader (hypd.playbook lists every module a tool loads).
--
--   lua_globals.scan(text) -> { {name, line, write = bool}, ... } | nil, err
--   lua_globals.requires(text) -> the module names its require calls give
--
-- A scope-aware scan of Lua 5.4's tokens: locals (local, local function,
-- function parameters, for variables, self of methods) hide names for the
-- rest of their block; fields (a.b, a:b) and table keys ({b = 1}) are not
-- variables; goto labels are skipped. It does not evaluate, so _ENV tricks
-- and load() are beyond it.
local M = {}

local KEYWORDS = {}
for w in ([[and break do else elseif end false for function goto if in local nil not or repeat return then
  true until while]]):gmatch("%a+") do KEYWORDS[w] = true end

-- tokens(text) -> array of {t = "name"|"kw"|"sym"|"str"|"num", v, line} | nil, err
local function tokens(s)
  local out, i, line, n = {}, 1, 1, #s
  local function add(t, v) out[#out + 1] = { t = t, v = v, line = line } end
  local function long_bracket(at)
    local eq = s:match("^%[(=*)%[", at)
    if not eq then return nil end
    local close = "]" .. eq .. "]"
    local e = s:find(close, at, true)
    if not e then return nil, "unfinished long string or comment" end
    local body = s:sub(at, e + #close - 1)
    return e + #close, select(2, body:gsub("\n", ""))
  end
  while i <= n do
    local c = s:sub(i, i)
    if c == "\n" then
      line, i = line + 1, i + 1
    elseif c:match("%s") then
      i = i + 1
    elseif s:sub(i, i + 1) == "--" then
      local j, nl = long_bracket(i + 2)
      if j then
        i, line = j, line + nl
      elseif nl then
        return nil, "line " .. line .. ": " .. nl
      else
        local e = s:find("\n", i, true)
        i = e or n + 1
      end
    elseif c == "[" and s:match("^%[=*%[", i) then
      local j, nl = long_bracket(i)
      if not j then return nil, "line " .. line .. ": " .. tostring(nl) end
      add("str", "")
      i, line = j, line + nl
    elseif c == '"' or c == "'" then
      local j = i + 1
      while j <= n and s:sub(j, j) ~= c do
        if s:sub(j, j) == "\\" then j = j + 1 end
        if s:sub(j, j) == "\n" then line = line + 1 end
        j = j + 1
      end
      if j > n then return nil, "line " .. line .. ": unfinished string" end
      add("str", "")
      i = j + 1
    elseif c:match("[%a_]") then
      local w = s:match("^[%w_]+", i)
      add(KEYWORDS[w] and "kw" or "name", w)
      i = i + #w
    elseif c:match("%d") or (c == "." and s:sub(i + 1, i + 1):match("%d")) then
      local num = s:match("^0[xX][%x%.]*[pP]?[%+%-]?%x*", i) or s:match("^[%d%.]+[eE]?[%+%-]?%d*", i)
      add("num", num)
      i = i + #num
    else
      local sym = s:match("^%.%.%.", i) or s:match("^%.%.", i) or s:match("^[=~<>]=", i) or
        s:match("^<<", i) or s:match("^>>", i) or s:match("^//", i) or s:match("^::", i) or c
      add("sym", sym)
      i = i + #sym
    end
  end
  return out
end

function M.scan(text)
  local toks, err = tokens(text)
  if not toks then return nil, err end
  local found = {}
  local scopes = { {} }              -- stack of sets of local names
  local blocks = {}                  -- what each open block is: "function" | "do" | "then" | "repeat" | "table" ...
  local pending                      -- locals a for/function declares in the block it opens next
  local function declare(name) scopes[#scopes][name] = true end
  local function is_local(name)
    for k = #scopes, 1, -1 do if scopes[k][name] then return true end end
    return false
  end
  local brackets = {}                -- "{" "(" "[" nesting, for table keys; "F" opens a function body
  local function open(kind)
    blocks[#blocks + 1] = kind
    scopes[#scopes + 1] = {}
    for _, nm in ipairs(pending or {}) do declare(nm) end
    pending = nil
    if kind == "function" then brackets[#brackets + 1] = "F" end
  end
  local function close()
    if blocks[#blocks] == "function" then
      while #brackets > 0 and brackets[#brackets] ~= "F" do brackets[#brackets] = nil end
      brackets[#brackets] = nil
    end
    blocks[#blocks] = nil
    if #scopes > 1 then scopes[#scopes] = nil end
  end
  local k = 1
  local function tok(j) return toks[j] or { t = "eof", v = "" } end
  -- params(j) -> index after ")": the names of a function's parameter list at j = "("
  local function params(j, names)
    j = j + 1
    while tok(j).v ~= ")" and tok(j).t ~= "eof" do
      if tok(j).t == "name" then names[#names + 1] = tok(j).v end
      j = j + 1
    end
    return j + 1
  end
  while k <= #toks do
    local t = toks[k]
    local prev, nxt = tok(k - 1), tok(k + 1)
    if t.t == "kw" then
      local v = t.v
      if v == "local" and nxt.v == "function" then
        declare(tok(k + 2).v)
        local names = {}
        k = params(k + 3, names)
        pending = names
        open("function")
        goto continue
      elseif v == "local" then
        local j = k + 1
        while tok(j).t == "name" do
          declare(tok(j).v)
          j = j + 1
          if tok(j).v == "<" then j = j + 3 end -- <const>, <close>
          if tok(j).v == "," then j = j + 1 else break end
        end
        k = j
        goto continue
      elseif v == "function" then
        local j, names = k + 1, {}
        if tok(j).t == "name" then
          local first = tok(j).v
          if not is_local(first) then found[#found + 1] = { name = first, line = tok(j).line, write = true } end
          while tok(j + 1).v == "." or tok(j + 1).v == ":" do
            if tok(j + 1).v == ":" then names[#names + 1] = "self" end
            j = j + 2
          end
          j = j + 1
        end
        k = params(j, names)
        pending = names
        open("function")
        goto continue
      elseif v == "for" then
        local j, names = k + 1, {}
        while tok(j).t == "name" or tok(j).v == "," do
          if tok(j).t == "name" then names[#names + 1] = tok(j).v end
          j = j + 1
        end
        pending = names
        k = j
        goto continue
      elseif v == "do" then
        open("do")
      elseif v == "then" then
        open("then")
      elseif v == "repeat" then
        open("repeat")
      elseif v == "elseif" or v == "else" then
        close()
        if v == "else" then open("then") end
      elseif v == "end" or v == "until" then
        close()
      elseif v == "goto" then
        k = k + 2
        goto continue
      end
    elseif t.t == "sym" then
      if t.v == "{" or t.v == "(" or t.v == "[" then
        brackets[#brackets + 1] = t.v
      elseif (t.v == "}" or t.v == ")" or t.v == "]") and brackets[#brackets] ~= "F" then
        brackets[#brackets] = nil
      elseif t.v == "::" then
        k = k + 3
        goto continue
      end
    elseif t.t == "name" then
      local field = prev.v == "." or prev.v == ":"
      local key = brackets[#brackets] == "{" and nxt.v == "=" and (prev.v == "{" or prev.v == "," or prev.v == ";")
      if not field and not key and not is_local(t.v) then
        local top = #brackets == 0 or brackets[#brackets] == "F"
        found[#found + 1] = { name = t.v, line = t.line, write = nxt.v == "=" and top }
      end
    end
    k = k + 1
    ::continue::
  end
  return found
end

-- requires(text) -> names, computed | nil, err: the module names its
-- require calls give as a quoted string (require "x", require("x")), in
-- order, each once; computed: the lines where require is used otherwise (a
-- name put together at run time, require passed as a value). It reads
-- comments and strings only to skip them (every tool load reads every
-- module it may load, so it finds with patterns rather than tokens).
function M.requires(s)
  local names, seen, computed = {}, {}, {}
  local i, n = 1, #s
  local word = s:find("%f[%w_]require%f[^%w_]", 1)
  while true do
    local q = s:find("[\"'%[%-]", i)
    while word and word < i do word = s:find("%f[%w_]require%f[^%w_]", word + 1) end
    if word and (not q or word < q) then
      local k = word - 1 -- the character before the name, past spaces: a field (x.require) is no call
      while k > 0 and s:find("^%s", k) do k = k - 1 end
      local field = k > 0 and s:find("^[%.:]", k) ~= nil
      local after = word + #"require"
      local _, e, name = s:find("^%s*%(%s*[\"']([%w_%.%-]*)[\"']%s*%)", after)
      if not e then _, e, name = s:find("^%s*[\"']([%w_%.%-]*)[\"']", after) end
      if not field then
        if not name then
          computed[#computed + 1] = select(2, s:sub(1, word):gsub("\n", "")) + 1
        elseif not seen[name] then
          seen[name] = true
          names[#names + 1] = name
        end
      end
      i = e and e + 1 or after
    elseif not q then
      break
    else
      local c = s:sub(q, q)
      local eq = (c == "[" and s:match("^%[(=*)%[", q)) or (c == "-" and s:match("^%-%-%[(=*)%[", q))
      if eq then -- a long string or comment
        local _, e = s:find("]" .. eq .. "]", q, true)
        if not e then return nil, "unfinished long string or comment" end
        i = e + 1
      elseif c == "-" and s:sub(q + 1, q + 1) == "-" then
        i = (s:find("\n", q, true) or n) + 1
      elseif c == "\"" or c == "'" then
        local j = q + 1
        while true do
          local k = s:find("[\\" .. c .. "\n]", j)
          if not k or s:sub(k, k) == "\n" then return nil, "unfinished string" end
          if s:sub(k, k) == "\\" then j = k + 2 else i = k + 1 break end
        end
      else
        i = q + 1
      end
    end
  end
  return names, computed
end

-- unknown(text, known) -> the scan's names that are not in known (a set),
-- one entry per name (its first line)
function M.unknown(text, known)
  local all, err = M.scan(text)
  if not all then return nil, err end
  local out, seen = {}, {}
  for _, g in ipairs(all) do
    if not known[g.name] and not seen[g.name] then
      seen[g.name] = true
      out[#out + 1] = g
    end
  end
  return out
end

return M
