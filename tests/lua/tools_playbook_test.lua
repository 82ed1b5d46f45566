-- Tools declared by playbooks in the playbook directory: same definition
-- checks, validation, scopes and operations as built-in tools, and the
-- playbook sandbox (no shell).
local t = require "hypd.tap"
local config = require "hypd.config"
local op = require "hypd.tool.operations"
local dispatch = require "hypd.tool.dispatch"
local tool = require "hypd.tool.registry"
local tools = require "hypd.tool.loader"
local H = dofile("tests/lua/helpers.lua")

local dir = H.tmpdir()
H.write(dir .. "/echo.lua", [[
return tool {
  name = "monitor_echo", summary = "Echo a word", kind = "read",
  description = "Returns the word it was given, repeated, to show a playbook tool end to end.",
  params = { word = { type = "string", required = true, pattern = "^[a-z]+$" },
             times = { type = "integer", minimum = 1, maximum = 3, default = 1 } },
  run = function(_, p) return { said = string.rep(p.word, p.times, " ") } end,
}]])
H.write(dir .. "/label.lua", [[
return tool {
  name = "job_label", summary = "Record a label", kind = "mutating",
  description = "A mutating playbook tool: runs as an operation with a record, like a built-in one.",
  params = { label = { type = "string", required = true } },
  status_tool = "operation_get",
  target = function(p) return "label/" .. p.label end,
  steps = { { name = "label", run = function(ctx)
    hypd.state.put("label", ctx.params.label)
    ctx.state.result = { label = ctx.params.label }
  end } },
}]])
H.write(dir .. "/shell.lua", [[
return tool {
  name = "diagnose_shell", summary = "Tries a shell", kind = "read",
  description = "Tries to run a shell command, which playbooks cannot do.", params = {},
  run = function() return os.execute("id") end,
}]])
H.write(dir .. "/badname.lua", [[
return tool { name = "rm_everything", summary = "x", description = "y", kind = "read", params = {},
  run = function() end }]])
H.write(dir .. "/oldform.lua", [[
return { tool = { name = "diagnose_old", summary = "x", description = "y", kind = "read", params = {} },
  main = function() end }]])
H.write(dir .. "/plain.lua", [[return { main = function() return 1 end }]])
config.playbooks_dir = dir

t.test("playbooks that declare a tool register it; a bad definition is refused and logged", function()
  local report = tools.reload()
  table.sort(report.defined)
  t.eq(report.defined, { "diagnose_shell", "job_label", "monitor_echo" })
  t.ok(tool.get("monitor_echo") and tool.get("job_label") and tool.get("diagnose_shell"), "registered")
  t.eq(tool.get("rm_everything"), nil, "a name without a tool prefix is refused")
  t.eq(tool.get("diagnose_old"), nil, "a table with a tool field is no tool")
  table.sort(report.errors, function(a, b) return a.file < b.file end)
  t.eq(#report.errors, 2, "and each is named as an error")
  t.like(report.errors[1].file, "badname%.lua$")
  t.like(report.errors[1].message, "name must start with one of")
  t.like(report.errors[2].file, "oldform%.lua$")
  t.like(report.errors[2].message, "a tool is declared with tool{...}")
end)

t.test("a playbook tool validates like a built-in one and runs in the sandbox", function()
  t.eq(assert(dispatch.call("monitor_echo", { word = "hi", times = 2 }, { scope = "read" })), { said = "hi hi" })
  local _, err = dispatch.call("monitor_echo", { word = "Hi", times = 9, extra = true }, { scope = "read" })
  t.eq(err.code, "VALIDATION")
  local rules = {}
  for _, f in ipairs(err.fields) do rules[#rules + 1] = f.field .. ":" .. f.rule end
  t.eq(rules, { "extra:unknown", "times:maximum", "word:pattern" })
  local _, shell = dispatch.call("diagnose_shell", {}, { scope = "read" })
  t.eq(shell.code, "SANDBOX")
  t.like(shell.message, "os.execute is not available to playbooks")
end)

t.test("a mutating playbook tool runs as an operation and needs the operate scope", function()
  local _, forbidden = dispatch.call("job_label", { label = "x" }, { scope = "read" })
  t.eq(forbidden.code, "FORBIDDEN")
  local acc = assert(dispatch.call("job_label", { label = "blue" }, { scope = "operate", name = "me", front = "test" }))
  t.like(acc.operation_id, "^op%-%x+$")
  t.eq(acc.status_tool, "operation_get")
  local v = op.wait(acc.operation_id, 10)
  t.eq(v.status, "succeeded")
  t.eq(v.result, { label = "blue" })
  t.eq(v.caller, "me")
end)

t.cleanup(function()
  os.execute("rm -rf " .. H.quote(dir))
end)
