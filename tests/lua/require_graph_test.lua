-- The require graph of lua/hypd has no cycle: dependencies point one way
-- (front ends -> hypd.tool.dispatch -> operations -> ctx -> kit and guard
-- -> bindings), and the tool system is the one package lua/hypd/tool/.
-- The graph is read from the sources compiled into the binary under test,
-- every require in a file counted, the ones inside function bodies too (a
-- require that runs late still makes a cycle).
local t = require "hypd.tap"
local core = require "hypd.core"

-- requires(src) -> the module names src requires by a literal name, in
-- order: require "x", require 'x', require("x"), require [[x]]; comments
-- and the text of other strings skipped
local function requires(src)
  local out, i, n = {}, 1, #src
  local last -- the previous token: "require", "(" after it, or nil
  local function long_end(at)
    local eq = src:match("^%[(=*)%[", at)
    if not eq then return nil end
    local _, e = src:find("]" .. eq .. "]", at, true)
    return e and e + 1 or n + 1, src:sub(at + #eq + 2, (e or n + 1) - #eq - 2)
  end
  local function str(v)
    if last == "require" or last == "require(" then out[#out + 1] = v end
    last = nil
  end
  while i <= n do
    local c = src:sub(i, i)
    if src:sub(i, i + 1) == "--" then
      local j = long_end(i + 2)
      i = j or (src:find("\n", i, true) or n) + 1
    elseif c:match("%s") then
      i = i + 1
    elseif c == "[" and src:match("^%[=*%[", i) then
      local j, body = long_end(i)
      str(body)
      i = j
    elseif c == '"' or c == "'" then
      local j, buf = i + 1, {}
      while j <= n and src:sub(j, j) ~= c do
        if src:sub(j, j) == "\\" then j = j + 1 end
        buf[#buf + 1] = src:sub(j, j)
        j = j + 1
      end
      str(table.concat(buf))
      i = j + 1
    elseif c:match("[%a_]") then
      local w = src:match("^[%w_]+", i)
      last = w == "require" and "require" or nil
      i = i + #w
    else
      last = (c == "(" and last == "require") and "require(" or nil
      i = i + 1
    end
  end
  return out
end

-- graph(prefix) -> {module = {required module, ...}}: the embedded modules
-- under prefix and their requires of one another
local function graph(prefix)
  local g = {}
  for _, m in ipairs(core.embedded_list(prefix)) do g[m] = true end
  for m in pairs(g) do
    local deps, seen = {}, {}
    for _, d in ipairs(requires((core.embedded(m)))) do
      if g[d] and not seen[d] then seen[d] = true; deps[#deps + 1] = d end
    end
    table.sort(deps)
    g[m] = deps
  end
  return g
end

-- cycles(g) -> one cycle per strongly connected component of more than
-- one module (or a module that requires itself), each as "a -> b -> a"
local function cycles(g)
  local index, low, on, stack, nexti, out = {}, {}, {}, {}, 0, {}
  local names = {}
  for m in pairs(g) do names[#names + 1] = m end
  table.sort(names)
  local function path(comp) -- a cycle through the component, from its first module
    local inside = {}
    for _, m in ipairs(comp) do inside[m] = true end
    local from, prev, queue, head = comp[1], {}, { comp[1] }, 1
    while head <= #queue do
      local m = queue[head]; head = head + 1
      for _, d in ipairs(g[m]) do
        if d == from then
          local p = { from }
          local x = m
          while x ~= from do table.insert(p, 2, x); x = prev[x] end
          p[#p + 1] = from
          return table.concat(p, " -> ")
        end
        if inside[d] and not prev[d] then prev[d] = m; queue[#queue + 1] = d end
      end
    end
  end
  local function visit(m)
    nexti = nexti + 1
    index[m], low[m] = nexti, nexti
    stack[#stack + 1], on[m] = m, true
    for _, d in ipairs(g[m]) do
      if not index[d] then
        visit(d)
        low[m] = math.min(low[m], low[d])
      elseif on[d] then
        low[m] = math.min(low[m], index[d])
      end
    end
    if low[m] == index[m] then
      local comp = {}
      repeat
        local x = table.remove(stack)
        on[x] = nil
        comp[#comp + 1] = x
      until x == m
      table.sort(comp)
      local self = false
      for _, d in ipairs(g[m]) do self = self or d == m end
      if #comp > 1 or self then out[#out + 1] = path(comp) end
    end
  end
  for _, m in ipairs(names) do if not index[m] then visit(m) end end
  table.sort(out)
  return out
end

t.test("the reader finds literal requires and skips comments and other strings", function()
  t.eq(requires([===[
local a = require "hypd.a" -- require "hypd.not"
local b = require('hypd.b')
--[==[ require "hypd.not2" ]==]
local s = "require 'hypd.not3'"
local function f() return require("hypd.c").x, require [[hypd.d]] end
local dyn = require(name)
]===]), { "hypd.a", "hypd.b", "hypd.c", "hypd.d" })
end)

t.test("the cycle finder names a cycle and passes a graph without one", function()
  t.eq(cycles { a = { "b" }, b = { "c" }, c = { "a" }, d = { "a" } }, { "a -> b -> c -> a" })
  t.eq(cycles { a = { "a" } }, { "a -> a" })
  t.eq(cycles { a = { "b", "c" }, b = { "c" }, c = {} }, {})
end)

t.test("no module of lua/hypd requires, directly or through others, itself", function()
  local g = graph("hypd.")
  local n = 0
  for _ in pairs(g) do n = n + 1 end
  t.ok(n > 50 and g["hypd.errors"], "the embedded tree is read (" .. n .. " modules)")
  local found = cycles(g)
  for _, c in ipairs(found) do print("# cycle: " .. c) end
  t.eq(found, {}, "require cycles in lua/hypd")
end)

t.test("the tool system is the package hypd.tool, under no other name", function()
  local have = {}
  for _, m in ipairs(core.embedded_list("hypd.")) do have[m] = true end
  for _, m in ipairs { "registry", "dispatch", "operations", "ctx", "kit", "guard", "guard_request", "loader" } do
    t.ok(have["hypd.tool." .. m], "hypd.tool." .. m)
  end
  for _, m in ipairs { "hypd.tool", "hypd.tools", "hypd.op", "hypd.ctx", "hypd.kit", "hypd.guard",
    "hypd.guard_request", "hypd.serve", "hypd.server" } do
    t.eq(have[m], nil, m .. " is gone")
  end
end)
