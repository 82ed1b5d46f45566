-- Adversarial tests for the playbook sandbox ("try to trick the global
-- protection"). Each hostile playbook fails with a clear error and the host
-- keeps working: a well-behaved playbook runs right after each one.
local t = require "hypd.tap"
local playbook = require "hypd.playbook"
local task = require "hypd.task"
local H = dofile("tests/lua/helpers.lua")

local dir = H.tmpdir()
local n = 0

-- runs playbook source text as a file; returns ok, result-or-error
local function run(src, args, timeout)
  n = n + 1
  local path = H.write(string.format("%s/p%d.lua", dir, n), src)
  local x = task.spawn(function() return playbook.run(path, args or {}) end, { timeout = timeout or 5 })
  return x:wait()
end

local GOOD = "return { main = function(a) hypd.sleep(0); return (a.x or 0) + 1 end }"

local function still_works()
  local ok, v = run(GOOD, { x = 41 })
  t.eq({ ok, v }, { true, 42 }, "a good playbook still runs")
end

local function refused(src, code, pattern, timeout)
  local ok, err = run(src, {}, timeout)
  t.eq(ok, false, "the playbook fails")
  t.eq(err.code, code)
  if pattern then t.like(err.message, pattern) end
  still_works()
  return err
end

t.test("reading an undefined global fails and names the global and the line", function()
  refused("return { main = function() return undefined_thing end }", "SANDBOX",
    "p%d+%.lua:1: undefined global 'undefined_thing'")
end)

t.test("assigning a global fails and suggests a local", function()
  refused("leak = 1\nreturn { main = function() end }", "SANDBOX",
    "assignment to undefined global 'leak' %(declare it local%)")
end)

t.test("replacing _ENV's metatable fails", function()
  refused("setmetatable(_ENV, nil)\nreturn { main = function() end }", "INTERNAL",
    "cannot change a protected metatable")
end)

t.test("getmetatable(_ENV) reveals nothing", function()
  local ok, v = run("return { main = function() return tostring(getmetatable(_ENV)) end }")
  t.eq({ ok, v }, { true, "locked" })
end)

t.test("calling os.execute fails: it is not there", function()
  refused("return { main = function() return os.execute('touch /tmp/hypd-pwned') end }", "SANDBOX",
    "os.execute is not available to playbooks")
  t.eq(H.read("/tmp/hypd-pwned"), nil, "nothing ran")
end)

t.test("os.exit, io, debug, package and require of host modules are out of reach", function()
  refused("return { main = function() os.exit(1) end }", "SANDBOX", "os.exit")
  refused("return { main = function() return io.open('/etc/passwd') end }", "SANDBOX", "undefined global 'io'")
  refused("return { main = function() return debug.getinfo(1) end }", "SANDBOX", "undefined global 'debug'")
  refused("return { main = function() return package.loadlib end }", "SANDBOX", "undefined global 'package'")
  refused("return { main = function() return require('hypd.store') end }", "NOT_FOUND", "no playbook named 'hypd.store'")
end)

t.test("loading bytecode fails", function()
  -- bytecode smuggled in as a string argument (its signature is enough:
  -- this state has no string.dump to make a whole chunk)
  local bytecode = "\27Lua\x54\0\x19\x93\r\n\x1a\n"
  t.eq(string.dump, nil, "the host has no string.dump")
  local ok, err = run("return { main = function(a) local f, e = load(a.code); return f and 'loaded' or e end }",
    { code = bytecode })
  t.eq(ok, true)
  t.like(err, "attempt to load a binary chunk")
  refused("return { main = function() return load('return 1', 'x', 'b') end }", "SANDBOX", "text chunks only")
  refused("return { main = function() return string.dump(print) end }", "INTERNAL", "attempt to call a nil value")
  still_works()
end)

t.test("a playbook that loops forever is stopped by its deadline", function()
  refused("return { main = function() while true do end end }", "TIMEOUT", "deadline", 0.3)
end)

t.test("pcall cannot swallow the deadline", function()
  refused([[return { main = function()
    while true do pcall(function() while true do end end) end
  end }]], "TIMEOUT", nil, 0.3)
end)

t.test("a playbook cannot reach or change the host's shared metatables", function()
  local ok, v = run([[return { main = function()
    local s = getmetatable("")
    local e = getmetatable(hypd.errors.new("X", "y"))
    local j = getmetatable(hypd.json.object())
    return { s = tostring(s), e = tostring(e), j = tostring(j) }
  end }]])
  t.eq({ ok, v }, { true, { s = "locked", e = "locked", j = "locked" } })
  t.eq(("abc"):upper(), "ABC", "string methods intact")
end)

t.test("changing the string library inside a playbook changes only its copy", function()
  local ok = run("string.upper = nil\nreturn { main = function() return 1 end }")
  t.eq(ok, true)
  t.eq(string.upper("x"), "X")
end)

t.test("a playbook's coroutines may sleep: engine requests pass through them", function()
  local ok, v = run([[return { main = function()
    local gen = coroutine.wrap(function() for i = 1, 3 do hypd.sleep(0); coroutine.yield(i) end end)
    return gen() + gen() + gen()
  end }]])
  t.eq({ ok, v }, { true, 6 })
end)

t.test("a raw yield from a playbook's main fails the call cleanly", function()
  refused("return { main = function() coroutine.yield(1) end }", "SANDBOX",
    "coroutine.yield.*a playbook may not yield to the engine directly")
end)

t.test("a syntax error is reported with the file and line", function()
  refused("return { main = function( }", "VALIDATION", "does not compile: .*p%d+%.lua:1")
end)

t.test("a playbook without main is refused with a clear message", function()
  refused("return 42", "VALIDATION", "must return a table with a main function")
end)

t.test("memory is capped: a huge string fails, the host survives", function()
  local err = refused("return { main = function() return string.rep('x', 3 << 29) end }", "INTERNAL")
  t.like(err.message, "memory")
end)

t.test("playbook state is namespaced per playbook", function()
  local ok, v = run("return { main = function() hypd.state.put('k', {n = 1}); return hypd.state.get('k') end }")
  t.eq({ ok, v }, { true, { n = 1 } })
end)

t.cleanup(function() os.execute("rm -rf " .. H.quote(dir)) end)
