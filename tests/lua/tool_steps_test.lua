-- The steps are in the tool's file: a reader of a built-in staged tool's
-- lua/workflows/<area>/<tool>.lua sees every step's name and the function
-- it calls without opening a helper. Judged on the sources compiled into
-- the binary under test (hypd.core.embedded), not the files on disk.
--
-- The rules, both static:
--   1. For each staged built-in tool of the registry, each of its steps'
--      names appears in the tool's own module as a literal
--      `name = "<step>"` with a `run =` after it on the same line: the
--      step's entry, declared in the file.
--   2. No helper module under lua/workflows (a module whose last name
--      starts with "_") declares a step: no table constructor of its has
--      both a `name =` and a `run =` field of its own (fields of the same
--      table, not of tables nested in it; comments and strings ignored).
--      A helper holds the functions the steps call (`run = eks.cluster`),
--      never the step entries, nor a function that returns them.
local t = require "hypd.tap"
local core = require "hypd.core"
require("hypd.tool.loader").load()
local playbook, tool = require "hypd.playbook", require "hypd.tool.registry"

local function source(module)
  local src = core.embedded("workflows." .. module)
  return src
end

-- code(src) -> src with comments and the contents of strings blanked
-- (spaces; newlines kept), so braces and words inside them do not count
local function code(src)
  local out, i, n = {}, 1, #src
  local function blank(s) return (s:gsub("[^\n]", " ")) end
  while i <= n do
    local c = src:sub(i, i)
    local long = src:match("^%[(=*)%[", i)
    if src:sub(i, i + 1) == "--" then
      local lvl = src:match("^%-%-%[(=*)%[", i)
      local j
      if lvl then
        local _, e = src:find("]" .. lvl .. "]", i, true)
        j = e or n
      else
        j = (src:find("\n", i, true) or n + 1) - 1
      end
      out[#out + 1] = blank(src:sub(i, j))
      i = j + 1
    elseif long then
      local _, e = src:find("]" .. long .. "]", i, true)
      e = e or n
      out[#out + 1] = '""' .. blank(src:sub(i + 2, e))
      i = e + 1
    elseif c == '"' or c == "'" then
      local j = i + 1
      while j <= n and src:sub(j, j) ~= c do
        if src:sub(j, j) == "\\" then j = j + 1 end
        j = j + 1
      end
      out[#out + 1] = c .. blank(src:sub(i + 1, j - 1)) .. c
      i = j + 1
    else
      out[#out + 1] = c
      i = i + 1
    end
  end
  return table.concat(out)
end

-- step_tables(src) -> the line numbers of table constructors with both a
-- name and a run field of their own, the run not a string (a table of
-- labels may name both words)
local function step_tables(src)
  local found = {}
  local function walk(text, offset)
    for s, body in text:gmatch("()(%b{})") do
      local inner = body:sub(2, -2)
      local own = inner:gsub("%b{}", function(b) return (b:gsub("[^\n]", " ")) end)
      if own:find("%f[%w_]name%s*=[^=]") and own:find('%f[%w_]run%s*=%s*[^=%s"]') then
        local _, lines = src:sub(1, offset + s - 1):gsub("\n", "")
        found[#found + 1] = lines + 1
      end
      walk(inner, offset + s)
    end
  end
  walk(src, 0)
  return found
end

local staged = {}
for _, d in ipairs(tool.list()) do
  if d.steps and d.source == "built-in" then staged[#staged + 1] = d end
end

t.test("each staged built-in tool's file declares each of its steps: name = \"<step>\" and its run", function()
  local missing = {}
  for _, d in ipairs(staged) do
    local src = source(d.module)
    if not src then
      missing[#missing + 1] = d.name .. ": no embedded source workflows." .. tostring(d.module)
    else
      local text = code(src)
      for _, st in ipairs(d.steps) do
        -- the name literal survives code() as `name = "` + blanks + `"`: look it up in the source itself,
        -- at a position code() kept as code
        local found = false
        for at, e in src:gmatch('()name%s*=%s*"' .. st.name:gsub("%p", "%%%0") .. '"()') do
          local line_end = src:find("\n", e, true) or #src + 1
          if text:sub(at, at + 3) == "name" and text:sub(e, line_end):find("%f[%w_]run%s*=[^=]") then
            found = true
            break
          end
        end
        if not found then missing[#missing + 1] = d.name .. ": step " .. st.name end
      end
    end
  end
  t.eq(missing, {}, "steps whose entry is not in the tool's own file (declare { name = \"<step>\", run = ... } there)")
  t.ok(#staged >= 30, "the registry's staged built-in tools were read: " .. #staged)
end)

t.test("no helper module under lua/workflows declares a step (a table with a name and a run)", function()
  local helpers, bad = 0, {}
  for _, m in ipairs(core.embedded_list("workflows.")) do
    local module = m:sub(#"workflows." + 1)
    if module:match("[^.]+$"):sub(1, 1) == "_" then
      helpers = helpers + 1
      for _, line in ipairs(step_tables(code(source(module)))) do
        bad[#bad + 1] = module .. ":" .. line
      end
    end
  end
  t.eq(bad, {}, "helpers with a table of a step's name and run (move the step entries into the tool's file)")
  t.ok(helpers >= 40, "the helpers were read: " .. helpers)
end)

t.test("the rules see what they look for", function()
  t.eq(step_tables(code('local M = {}\nM.steps = {\n  { name = "check", run = check },\n}\n')), { 3 })
  t.eq(step_tables(code('return { name = name, on_call = true,\n  run = function(ctx) end }\n')), { 1 })
  t.eq(step_tables(code('M.LABELS = { name = "Name", run = "MLflow run" }\n')), {})
  t.eq(step_tables(code('local x = { name = "a", spec = { run = 1 } }\n-- { name = "b", run = f }\n' ..
    'local s = "{ name = 1, run = 2 }"\nif a.name == b.run then end\n')), {})
end)

t.test("the feature tools have a step for every feature, in dependency order (off: in reverse)", function()
  local order = playbook.load("hyperpod._feat").ORDER
  local function names(tool_name, first, last)
    local out = {}
    for i = first, last do out[#out + 1] = tool.get(tool_name).steps[i].name end
    return out
  end
  local reversed = {}
  for i = #order, 1, -1 do reversed[#reversed + 1] = order[i] end
  t.eq(names("hyperpod_update_advanced_features", 3, 2 + #order), order)
  t.eq(names("hyperpod_disable_advanced_features", 2, 1 + #order), reversed)
end)
