-- The scheduler against playbook code that never waits, in-process: the
-- count hook preempts it, so other tasks run beside it; a task preempted
-- mid-loop still ends when cancelled or at its deadline (the error is
-- raised where it runs, since no await is there to answer); a playbook's
-- own coroutine is preempted too; host code is never preempted; and a
-- task that keeps waking itself (sleep(0)) lets timers and other tasks in
-- between two of its runs. (hypd serve with a health probe beside such
-- tools: stall_test.lua.)
local t = require "hypd.tap"
local core = require "hypd.core"
local playbook = require "hypd.playbook"
local task = require "hypd.task"

-- a playbook chunk (its code is preemptible, as the loader registers it)
local n = 0
local function playbook_fn(src)
  n = n + 1
  local name = "@preempt_test_" .. n .. ".lua"
  local fn = assert(load(src, name, "t", playbook.env("preempt_test", function() error("no require") end)))
  if core.playbook_chunk then core.playbook_chunk(name) end -- what hypd.playbook's loader does (not on today's tree)
  return fn
end

-- other(): a task that counts its turns until stop is set
local function counter()
  local c = { turns = 0 }
  c.task = task.spawn(function()
    while not c.stop do
      c.turns = c.turns + 1
      task.sleep(0.001)
    end
  end, { name = "counter" })
  return c
end

t.test("a playbook's CPU loop is preempted: another task runs beside it; cancelled, it ends with CANCELLED", function()
  local loop = task.spawn(playbook_fn("local n = 0 while true do n = n + 1 end"), { name = "cpu loop" })
  local c = counter()
  task.sleep(0.3)
  t.ok(c.turns >= 5, "the counter ran beside the loop (" .. c.turns .. " turns)")
  t.eq(loop:finished(), false, "the loop still runs")
  loop:cancel("enough")
  local ok, err = loop:wait()
  t.eq(ok, false)
  t.eq(err and err.code, "CANCELLED")
  c.stop = true
  c.task:wait()
end)

t.test("a preempted playbook loop ends at its task's deadline with TIMEOUT", function()
  local loop = task.spawn(playbook_fn("while true do end"), { name = "cpu loop", timeout = 0.2 })
  local c = counter()
  local ok, err = loop:wait()
  t.eq(ok, false)
  t.eq(err and err.code, "TIMEOUT")
  t.ok(c.turns >= 3, "the counter ran meanwhile (" .. c.turns .. " turns)")
  c.stop = true
  c.task:wait()
end)

t.test("a CPU loop inside a playbook's own coroutine is preempted too, and its coroutine.resume is not fooled",
    function()
  local loop = task.spawn(playbook_fn([[
    local co = coroutine.create(function() local n = 0 while n < 3e7 do n = n + 1 end return n end)
    return coroutine.resume(co)]]), { name = "coroutine loop" })
  local c = counter()
  local ok, fine, v = loop:wait()
  t.eq({ ok, fine, v }, { true, true, 30000000 }, "the coroutine ran to its end, resumed as it yielded nothing")
  t.ok(c.turns >= 3, "the counter ran meanwhile (" .. c.turns .. " turns)")
  c.stop = true
  c.task:wait()
end)

t.test("host code is never preempted: a host loop of 0.2 s runs alone", function()
  local c = counter()
  task.sleep(0.01)
  local hostloop = task.spawn(function()
    local before, t0 = c.turns, core.mono()
    while core.mono() - t0 < 0.2 do end
    return before, c.turns
  end, { name = "host loop" })
  local ok, before, after = hostloop:wait()
  t.ok(ok)
  t.eq(after, before, "no turn of the counter during the host loop")
  c.stop = true
  c.task:wait()
end)

t.test("a task looping on sleep(0) lets a timer and the other tasks in between its runs", function()
  local spins = 0
  local spinner = task.spawn(function()
    while spins < 3e6 do spins = spins + 1 task.sleep(0) end -- ends by itself (today's tree: only then)
  end, { name = "spinner" })
  task.sleep(0.05)
  t.eq(spinner:finished(), false, "the timer fired while the spinner still spun (" .. spins .. " spins)")
  spins = 3e6
  spinner:wait()
end)

-- One top-level load's functions can require lazily from several tasks (a
-- stage's parts side by side). A module whose top level is preempted halfway
-- in one task is waited for by the other, not seen as the false a require
-- cycle sees (plans_true_test once failed so: "attempt to index a boolean
-- value (local 'mod')" in hyperpod._feat's feature()).
t.test("a module another task is still loading (preempted) is waited for, not seen half-made", function()
  local H = dofile("tests/lua/helpers.lua")
  local config = require "hypd.config"
  local dir = H.tmpdir()
  local function write(name, text)
    local f = assert(io.open(dir .. "/" .. name .. ".lua", "w"))
    f:write(text)
    f:close()
  end
  write("preempt_slow", "local n = 0 for i = 1, 3e6 do n = n + i end return { sum = n }")
  write("preempt_top", "return { get = function() return require('preempt_slow').sum end }")
  local was = config.playbooks_dir
  config.playbooks_dir = dir
  local top = playbook.load("preempt_top")
  local a = task.spawn(function() return top.get() end, { name = "first" })
  local b = task.spawn(function() return top.get() end, { name = "second" })
  local oka, va = a:wait()
  local okb, vb = b:wait()
  config.playbooks_dir = was
  t.eq({ oka, okb }, { true, true }, "both tasks got the module: " .. tostring(va) .. " / " .. tostring(vb))
  t.eq(va, vb, "the same module")
  t.ok(type(va) == "number", "its value, not false: " .. tostring(va))
end)
