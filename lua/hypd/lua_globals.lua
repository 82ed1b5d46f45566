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

-- A scan in progress: the tokens, the globals found so far, and what is
-- open at the current token.
local Scan = {}
Scan.__index = Scan

local EOF = { t = "eof", v = "" }

local function new_scan(toks)
  return setmetatable({
    toks = toks,
    found = {},
    scopes = { {} },  -- stack of sets of local names
    blocks = {},      -- what each open block is: "function" | "do" | "then" | "repeat"
    brackets = {},    -- "{" "(" "[" nesting, for table keys; "F" opens a function body
    pending = nil,    -- locals a for/function declares in the block it opens next
  }, Scan)
end

function Scan:tok(j) return self.toks[j] or EOF end

function Scan:declare(name) self.scopes[#self.scopes][name] = true end

function Scan:is_local(name)
  for k = #self.scopes, 1, -1 do if self.scopes[k][name] then return true end end
  return false
end

function Scan:global(t, write)
  self.found[#self.found + 1] = { name = t.v, line = t.line, write = write }
end

-- open(kind): a block begins, with the pending locals in its scope
function Scan:open(kind)
  self.blocks[#self.blocks + 1] = kind
  self.scopes[#self.scopes + 1] = {}
  for _, nm in ipairs(self.pending or {}) do self:declare(nm) end
  self.pending = nil
  if kind == "function" then self.brackets[#self.brackets + 1] = "F" end
end

-- close(): the innermost block ends (a function's body drops the brackets
-- left open in it)
function Scan:close()
  local brackets = self.brackets
  if self.blocks[#self.blocks] == "function" then
    while #brackets > 0 and brackets[#brackets] ~= "F" do brackets[#brackets] = nil end
    brackets[#brackets] = nil
  end
  self.blocks[#self.blocks] = nil
  if #self.scopes > 1 then self.scopes[#self.scopes] = nil end
end

-- params(j, names) -> index after ")": adds the names of a function's
-- parameter list at j = "(" to names
function Scan:params(j, names)
  j = j + 1
  while self:tok(j).v ~= ")" and self:tok(j).t ~= "eof" do
    if self:tok(j).t == "name" then names[#names + 1] = self:tok(j).v end
    j = j + 1
  end
  return j + 1
end

-- function_body(j, names) -> index after the parameter list at j: the
-- function's block opens with its parameters (and names) as locals
function Scan:function_body(j, names)
  local k = self:params(j, names)
  self.pending = names
  self:open("function")
  return k
end

-- Each statement reader takes the index of its keyword and returns the
-- index of the token after what it read.

-- local function f(...)
function Scan:local_function(k)
  self:declare(self:tok(k + 2).v)
  return self:function_body(k + 3, {})
end

-- local a <const>, b <close> (the values that follow are read as usual)
function Scan:local_names(k)
  local j = k + 1
  while self:tok(j).t == "name" do
    self:declare(self:tok(j).v)
    j = j + 1
    if self:tok(j).v == "<" then j = j + 3 end -- <const>, <close>
    if self:tok(j).v == "," then j = j + 1 else break end
  end
  return j
end

-- function a.b:c(...) or function(...): a global name written, self for a method
function Scan:function_stat(k)
  local j, names = k + 1, {}
  if self:tok(j).t == "name" then
    if not self:is_local(self:tok(j).v) then self:global(self:tok(j), true) end
    while self:tok(j + 1).v == "." or self:tok(j + 1).v == ":" do
      if self:tok(j + 1).v == ":" then names[#names + 1] = "self" end
      j = j + 2
    end
    j = j + 1
  end
  return self:function_body(j, names)
end

-- for a, b in / for i =: the names are locals of the do block that follows
function Scan:for_names(k)
  local j, names = k + 1, {}
  while self:tok(j).t == "name" or self:tok(j).v == "," do
    if self:tok(j).t == "name" then names[#names + 1] = self:tok(j).v end
    j = j + 1
  end
  self.pending = names
  return j
end

function Scan:keyword(k)
  local v, nxt = self:tok(k).v, self:tok(k + 1)
  if v == "local" and nxt.v == "function" then return self:local_function(k) end
  if v == "local" then return self:local_names(k) end
  if v == "function" then return self:function_stat(k) end
  if v == "for" then return self:for_names(k) end
  if v == "goto" then return k + 2 end
  if v == "do" or v == "then" or v == "repeat" then
    self:open(v)
  elseif v == "elseif" or v == "else" then
    self:close()
    if v == "else" then self:open("then") end
  elseif v == "end" or v == "until" then
    self:close()
  end
  return k + 1
end

function Scan:symbol(k)
  local v, brackets = self:tok(k).v, self.brackets
  if v == "{" or v == "(" or v == "[" then
    brackets[#brackets + 1] = v
  elseif (v == "}" or v == ")" or v == "]") and brackets[#brackets] ~= "F" then
    brackets[#brackets] = nil
  elseif v == "::" then
    return k + 3 -- a goto label
  end
  return k + 1
end

-- a name that is not a field (a.b, a:b), a table key ({b = 1}) or a local
-- is a global: written when assigned outside any bracket
function Scan:name(k)
  local t, prev, nxt, brackets = self:tok(k), self:tok(k - 1), self:tok(k + 1), self.brackets
  local field = prev.v == "." or prev.v == ":"
  local key = brackets[#brackets] == "{" and nxt.v == "=" and (prev.v == "{" or prev.v == "," or prev.v == ";")
  if not field and not key and not self:is_local(t.v) then
    local top = #brackets == 0 or brackets[#brackets] == "F"
    self:global(t, nxt.v == "=" and top)
  end
  return k + 1
end

local READ = { kw = Scan.keyword, sym = Scan.symbol, name = Scan.name }

function M.scan(text)
  local toks, err = tokens(text)
  if not toks then return nil, err end
  local scan = new_scan(toks)
  local k = 1
  while k <= #toks do
    local read = READ[toks[k].t]
    k = read and read(scan, k) or k + 1
  end
  return scan.found
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
