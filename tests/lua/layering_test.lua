-- Dependencies point one way, judged on the sources built into the binary
-- (hypd.core.embedded), requires inside function bodies included:
--   * a workflow area (lua/workflows/<area>/) requires no other area's
--     private helper (<other>._x): what two areas share lives below them,
--     in lua/workflows/_<name>.lua or in the kit;
--   * a top-level workflow helper (lua/workflows/_<name>.lua) requires
--     nothing of an area: areas -> shared helpers -> the hypd API;
--   * the sandbox (lua/sandbox/) requires no product module by a private
--     name (a path segment starting with "_", e.g. hypd.aws._shape).
-- A module name counts where it is required (require "x", require("x"))
-- and where a helper names a module it requires later as a string literal
-- ({ karpenter = "hyperpod._feat_karpenter" }).
local t = require "hypd.tap"
local core = require "hypd.core"

local function code_of(module)
  local src = assert(core.embedded(module), "no embedded source for " .. module)
  src = src:gsub("%-%-%[(=*)%[.-%]%1%]", "")   -- long comments
  return (src:gsub("%-%-[^\n]*", ""))          -- line comments
end

-- names(src) -> the module names a source requires or names, "/" read as "."
local function names(src)
  local out, seen = {}, {}
  local function add(n)
    n = n:gsub("/", ".")
    if not seen[n] then seen[n] = true; out[#out + 1] = n end
  end
  for n in src:gmatch("require%s*%(?%s*[\"']([%w_./]+)[\"']") do add(n) end
  for n in src:gmatch("[\"']([%a][%w_]*[./]_[%w_]+)[\"']") do add(n) end
  return out
end

local function private(name)
  for seg in name:gmatch("[^.]+") do
    if seg:sub(1, 1) == "_" then return true end
  end
  return false
end

local workflows = core.embedded_list("workflows.")
local sandbox = {}
for _, m in ipairs(core.embedded_list("sandbox")) do
  if m == "sandbox" or m:match("^sandbox%.") then sandbox[#sandbox + 1] = m end
end
local areas = {}
for _, m in ipairs(workflows) do
  local area = m:match("^workflows%.([%w_]+)%.")
  if area then areas[area] = true end
end

-- the area a workflow module name (as a playbook requires it) belongs to
local function area_of(name)
  local first = name:match("^([%w_]+)%.")
  if first and areas[first] then return first end
end

t.test("the binary holds the workflow areas and the sandbox to judge", function()
  local n = 0
  for _ in pairs(areas) do n = n + 1 end
  t.ok(n >= 6, "workflow areas found: " .. n)
  t.ok(#workflows >= 100, "workflow modules found: " .. #workflows)
  t.ok(#sandbox >= 50, "sandbox modules found: " .. #sandbox)
  t.ok(#names(code_of("workflows.hyperpod.hyperpod_create")) > 0, "hyperpod_create's requires are read")
end)

t.test("no workflow area requires another area's private helper", function()
  local bad = {}
  for _, m in ipairs(workflows) do
    local own = m:match("^workflows%.([%w_]+)%.")
    if own then
      for _, n in ipairs(names(code_of(m))) do
        local a = area_of(n)
        if a and a ~= own and private(n) then bad[#bad + 1] = m .. " -> " .. n end
      end
    end
  end
  t.eq(#bad, 0, "cross-area requires of private helpers:\n  " .. table.concat(bad, "\n  "))
end)

t.test("a top-level workflow helper requires nothing of an area", function()
  local bad, helpers = {}, 0
  for _, m in ipairs(workflows) do
    if m:match("^workflows%._[%w_]+$") then
      helpers = helpers + 1
      for _, n in ipairs(names(code_of(m))) do
        if area_of(n) then bad[#bad + 1] = m .. " -> " .. n end
      end
    end
  end
  t.ok(helpers >= 6, "top-level helpers found: " .. helpers)
  t.eq(#bad, 0, "top-level helpers that require an area's module:\n  " .. table.concat(bad, "\n  "))
end)

t.test("the sandbox requires no product module by a private name", function()
  local bad, product = {}, 0
  for _, m in ipairs(sandbox) do
    for _, n in ipairs(names(code_of(m))) do
      if n:match("^hypd%.") then
        product = product + 1
        if private(n) then bad[#bad + 1] = m .. " -> " .. n end
      end
    end
  end
  t.ok(product >= 20, "product requires found in the sandbox: " .. product)
  t.eq(#bad, 0, "sandbox modules that require a private product module:\n  " .. table.concat(bad, "\n  "))
end)
