-- docs/tools.md is the tool reference `hypd tools --markdown` prints from
-- the registry of the built-in tools: the committed file is what the
-- registry says now (a tool added, removed or changed without regenerating
-- it fails here, with the command that regenerates it), and the reference
-- says what the registry holds for every tool.
local t = require "hypd.tap"
local json = require "hypd.json"
local H = dofile("tests/lua/helpers.lua")

local dir = H.tmpdir()
local REGENERATE = "make docs (or: build/hypd tools --markdown > docs/tools.md)"

-- hypd(...) -> status, stdout, stderr: the binary with the built-in tools only
local function hypd(...)
  local parts = { "env -u HYPD_PLAYBOOKS HYPD_LOG_LEVEL=off HYPD_STATE=" .. H.quote(dir .. "/state"), H.hypd }
  for _, a in ipairs { ... } do parts[#parts + 1] = H.quote(a) end
  return H.sh(table.concat(parts, " "))
end

local rc, generated, err = hypd("tools", "--markdown")
local committed = H.read("docs/tools.md")

-- first_difference(a, b) -> line number, a's line, b's line where they part
local function first_difference(a, b)
  local la, lb = {}, {}
  for l in (a .. "\n"):gmatch("([^\n]*)\n") do la[#la + 1] = l end
  for l in (b .. "\n"):gmatch("([^\n]*)\n") do lb[#lb + 1] = l end
  for i = 1, math.max(#la, #lb) do
    if la[i] ~= lb[i] then return i, la[i], lb[i] end
  end
end

t.test("hypd tools --markdown prints the reference and exits 0", function()
  t.eq(rc, 0, "exit status; stderr: " .. tostring(err))
  t.like(generated or "", "^# Tool reference\n")
end)

t.test("the same registry gives the same reference, byte for byte", function()
  local rc2, again = hypd("tools", "--markdown")
  t.eq(rc2, 0)
  t.ok(again == generated, "two runs differ at line " .. tostring((first_difference(again or "", generated or ""))))
end)

t.test("docs/tools.md is what hypd tools --markdown prints (else run " .. REGENERATE .. ")", function()
  t.ok(committed ~= nil, "docs/tools.md exists; make it with " .. REGENERATE)
  if committed and generated and committed ~= generated then
    local n, have, want = first_difference(committed, generated)
    t.ok(false, "docs/tools.md is stale from line " .. n .. ": it has " .. string.format("%q", tostring(have)):sub(1, 200) ..
      ", the registry says " .. string.format("%q", tostring(want)):sub(1, 200) .. "; regenerate it: " .. REGENERATE)
  else
    t.ok(committed ~= nil and committed == generated, "docs/tools.md matches the registry")
  end
end)

t.test("every tool of the registry has its section, with its kind, parameters, actions and status tool", function()
  local rcj, out = hypd("tools", "--json")
  t.eq(rcj, 0)
  local tools = (json.decode(out or "") or {}).tools or {}
  t.ok(#tools > 10, "the registry has its tools: " .. #tools)
  local doc = generated or ""
  local sections, current = {}, nil -- name -> the lines under its "## name" heading
  for line in (doc .. "\n"):gmatch("([^\n]*)\n") do
    local name = line:match("^## ([%w_]+)$")
    if name then
      current = name
      sections[name] = ""
    elseif current then
      sections[current] = sections[current] .. line .. "\n"
    end
  end
  for _, d in ipairs(tools) do
    local body = sections[d.name]
    t.ok(body ~= nil, "a section for " .. d.name)
    if body then
      t.ok(body:find("Kind: **" .. d.kind .. "**", 1, true), d.name .. ": its kind " .. d.kind)
      for p in pairs(d.input_schema.properties or {}) do
        t.ok(body:find("| `" .. p .. "` |", 1, true), d.name .. ": its parameter " .. p)
      end
      for _, a in ipairs(d.aws or {}) do t.ok(body:find("`" .. a .. "`", 1, true), d.name .. ": its action " .. a) end
      if d.status_tool then
        t.ok(body:find("Status tool: [" .. d.status_tool .. "]", 1, true), d.name .. ": its status tool")
      end
    end
  end
  local n = 0
  for _ in pairs(sections) do n = n + 1 end
  t.eq(n, #tools, "one section per tool, no more")
end)

t.test("a tool's declared calls and a parameter's required, default and enum are in its section", function()
  local doc = generated or ""
  local delete = doc:match("\n## cluster_delete\n(.-)\n## ") or ""
  t.like(delete, "Calls: %[storage_list%]%(#storage_list%)", "cluster_delete calls storage_list")
  t.like(delete, "| `cluster_tag` | string | yes |", "cluster_tag is required")
  t.like(delete, "| `force` | boolean |  | `false` |", "force defaults to false")
  t.like(doc, "one of `\"system\"`, `\"user\"`", "an enum's values")
end)

t.test("--markdown takes neither --json nor --skills", function()
  local rc2, _, e = hypd("tools", "--markdown", "--json")
  t.eq(rc2, 2)
  t.like(e or "", "neither %-%-json nor %-%-skills")
end)

t.cleanup(function() os.execute("rm -rf " .. H.quote(dir)) end)
