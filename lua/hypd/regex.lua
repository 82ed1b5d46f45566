-- hypd.regex: the subset of ECMAScript regular expressions that JSON Schema
-- `pattern`s use, so a tool's pattern means the same to hypd's validation
-- and to every client that reads its schema.
--
--   local re = regex.compile("^[a-z][a-z0-9-]{1,30}$")   -> re | nil, err
--   re:test(s) -> boolean   (unanchored search, as JSON Schema specifies)
--   re:match(s) -> nil | {group texts}  (the same search, with its captures)
--
-- Supported: literals, `.`, classes `[a-z0-9-]` and `[^...]`, escapes \d \w
-- \s \D \W \S and escaped punctuation, groups `( )` and `(?: )` with `|`,
-- quantifiers ? * + {m} {m,} {m,n} (greedy), anchors ^ $. Backreferences,
-- lookaround and flags are refused at compile time. Matching takes time
-- linear in the subject (hypd.regex_vm says how).
local vm = require "hypd.regex_vm"

local M = {}

local CLASSES = {
  d = function(c) return c:match("%d") ~= nil end,
  w = function(c) return c:match("[%w_]") ~= nil end,
  s = function(c) return c:match("%s") ~= nil end,
}

local function class_escape(ch)
  local f = CLASSES[ch:lower()]
  if not f then return nil end
  if ch:match("%u") then return function(c) return not f(c) end end
  return f
end

-- parser: produces nodes {t = "char"|"any"|"set"|"group"|"bol"|"eol", ...}
local Parser = {}
Parser.__index = Parser

local function perr(p, msg) error({ regex = true, message = string.format("%s at %d in /%s/", msg, p.i, p.src) }, 0) end

function Parser:peek() return self.src:sub(self.i, self.i) end
function Parser:next() local c = self:peek(); self.i = self.i + 1; return c end

function Parser:set()
  local negate = false
  if self:peek() == "^" then negate, self.i = true, self.i + 1 end
  local items = {}
  local first = true
  while true do
    local c = self:next()
    if c == "" then perr(self, "unterminated character class") end
    if c == "]" and not first then break end
    first = false
    local lo
    if c == "\\" then
      local e = self:next()
      local f = class_escape(e)
      if f then
        items[#items + 1] = f
      else
        lo = e
      end
    else
      lo = c
    end
    if lo then
      if self:peek() == "-" and self.src:sub(self.i + 1, self.i + 1) ~= "]" and self.src:sub(self.i + 1, self.i + 1) ~= "" then
        self.i = self.i + 1
        local hi = self:next()
        if hi == "\\" then hi = self:next() end
        if hi < lo then perr(self, "bad range") end
        items[#items + 1] = function(x) return x >= lo and x <= hi end
      else
        items[#items + 1] = function(x) return x == lo end
      end
    end
  end
  return { t = "set", negate = negate, items = items }
end

function Parser:atom()
  local c = self:next()
  if c == "(" then
    local cap
    if self.src:sub(self.i, self.i + 1) == "?:" then
      self.i = self.i + 2
    elseif self:peek() == "?" then
      perr(self, "lookaround is not supported")
    else
      self.groups = (self.groups or 0) + 1
      cap = self.groups
    end
    local alts = self:alternation()
    if self:next() ~= ")" then perr(self, "missing )") end
    return { t = "group", alts = alts, cap = cap }
  elseif c == "[" then
    return self:set()
  elseif c == "." then
    return { t = "any" }
  elseif c == "^" then
    return { t = "bol" }
  elseif c == "$" then
    return { t = "eol" }
  elseif c == "\\" then
    local e = self:next()
    if e == "" then perr(self, "trailing backslash") end
    if e:match("%d") then perr(self, "backreferences are not supported") end
    local f = class_escape(e)
    if f then return { t = "set", items = { f } } end
    if e == "n" then return { t = "char", c = "\n" } end
    if e == "t" then return { t = "char", c = "\t" } end
    return { t = "char", c = e }
  elseif c == "*" or c == "+" or c == "?" or c == "{" then
    perr(self, "nothing to repeat")
  end
  return { t = "char", c = c }
end

function Parser:quantified()
  local a = self:atom()
  local c = self:peek()
  local min, max
  if c == "*" then min, max = 0, math.huge
  elseif c == "+" then min, max = 1, math.huge
  elseif c == "?" then min, max = 0, 1
  elseif c == "{" then
    local m, rest = self.src:match("^{(%d+)(.-)}", self.i)
    if not m then return a end -- a literal "{"
    min = tonumber(m)
    if rest == "" then max = min
    elseif rest == "," then max = math.huge
    else
      local n = rest:match("^,(%d+)$")
      if not n then perr(self, "bad {m,n}") end
      max = tonumber(n)
    end
    if max < min then perr(self, "{m,n} with n < m") end
    self.i = self.i + #("{" .. m .. rest .. "}") - 1
  else
    return a
  end
  self.i = self.i + 1
  if self:peek() == "?" then perr(self, "lazy quantifiers are not supported") end
  return { t = "rep", node = a, min = min, max = max }
end

function Parser:sequence()
  local seq = {}
  while self.i <= #self.src and self:peek() ~= "|" and self:peek() ~= ")" do
    seq[#seq + 1] = self:quantified()
  end
  return seq
end

function Parser:alternation()
  local alts = { self:sequence() }
  while self:peek() == "|" do
    self.i = self.i + 1
    alts[#alts + 1] = self:sequence()
  end
  return alts
end

-- matching: hypd.regex_vm, linear in the subject (no backtracking)
local Re = {}
Re.__index = Re

function Re:test(s) return vm.test(self.prog, tostring(s)) end

-- re:match(s) -> nil | { [n] = the text of capturing group n (false when
-- it took no part) }: the leftmost match, groups numbered by their "(" as
-- ECMAScript numbers them
function Re:match(s)
  s = tostring(s)
  local caps = vm.match(self.prog, s)
  if not caps then return nil end
  local out = {}
  for n = 1, self.groups or 0 do
    local from, to = caps[2 * n], caps[2 * n + 1]
    out[n] = from and to and s:sub(from, to - 1) or false
  end
  return out
end

local cache = {}

function M.compile(src)
  if cache[src] then return cache[src] end
  local p = setmetatable({ src = src, i = 1 }, Parser)
  local ok, alts = pcall(function()
    local a = p:alternation()
    if p.i <= #src then perr(p, "unmatched )") end
    return a
  end)
  if not ok then
    if type(alts) == "table" and alts.regex then return nil, alts.message end
    error(alts, 0)
  end
  local prog, perr2 = vm.compile(alts, p.groups)
  if not prog then return nil, perr2 .. " in /" .. src .. "/" end
  local re = setmetatable({ src = src, groups = p.groups, prog = prog }, Re)
  cache[src] = re
  return re
end

return M
