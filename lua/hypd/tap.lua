-- hypd.tap: the test runner for Lua tests that run inside the host with the
-- real bindings (`hypd test FILE...`, TAP output).
--
--   local t = require "hypd.tap"
--   t.test("a sleeping task can be cancelled", function()
--     t.eq(actual, expected)
--   end)
--
-- Each test runs as its own task. A test fails on the first failed
-- assertion, on an error, or when it leaves tasks, timers or HTTP transfers
-- behind (leaked handles).
--
-- A test that cannot run says so and is counted apart, never as a pass:
--
--   t.test("kubectl applies a manifest", function()
--     if not have_kubectl then return t.skip("no kubectl on this machine") end
--     ...
--   end)
--
-- prints "ok N - kubectl applies a manifest # SKIP no kubectl on this
-- machine" (TAP's skip directive; tests/run counts it as skipped).
--
-- Cleanup is not a test: t.cleanup(fn) registers fn to run after the file's
-- last test (the last registered first), whatever the tests did. A cleanup
-- that passes prints nothing and is not counted; one that raises or leaves
-- tasks, timers or HTTP transfers behind prints a "not ok N - cleanup ..."
-- line, which fails the file.
local errors = require "hypd.errors"
local json = require "hypd.json"
local sched = require "hypd._sched"

local M = {}
local registered = {}
local cleanups = {}

function M.test(name, fn) registered[#registered + 1] = { name = name, fn = fn } end

-- skip(reason): ends the running test as skipped ("ok N - name # SKIP
-- reason"), not passed; what it asserted before does not count either way
function M.skip(reason)
  error(errors.new("SKIP", tostring(reason or "no reason given"), { tap_skip = true }), 2)
end

-- cleanup(fn): fn runs after the file's tests (see the top of this file)
function M.cleanup(fn)
  local where = debug.getinfo(2, "Sl")
  cleanups[#cleanups + 1] = { fn = fn, where = where.short_src:match("([^/]+)$") .. ":" .. where.currentline }
end

local function fail(msg, level) error(errors.new("ASSERT", msg), level and level + 1 or 3) end

local function show(v)
  if type(v) == "string" then return string.format("%q", v) end
  if type(v) == "table" and not errors.is(v) then
    local ok, s = pcall(json.encode, v)
    if ok then return s end
  end
  return tostring(v)
end

local function deep_eq(a, b, path)
  if a == b then return true end
  if type(a) ~= "table" or type(b) ~= "table" then
    if type(a) == "number" and type(b) == "number" and a ~= a and b ~= b then return true end
    return false, path
  end
  for k, v in pairs(a) do
    local ok, where = deep_eq(v, b[k], path .. "." .. tostring(k))
    if not ok then return false, where end
  end
  for k in pairs(b) do
    if a[k] == nil then return false, path .. "." .. tostring(k) end
  end
  return true
end

function M.ok(v, msg)
  if not v then fail((msg or "expected a true value") .. ", got " .. show(v)) end
  return v
end

function M.eq(actual, expected, msg)
  local same, where = deep_eq(actual, expected, "")
  if not same then
    fail(string.format("%s%s: expected %s, got %s", msg and msg .. ": " or "",
      where ~= "" and "at " .. where or "values differ", show(expected), show(actual)))
  end
end

function M.like(s, pattern, msg)
  if type(s) ~= "string" or not s:find(pattern) then
    fail(string.format("%sexpected %s to match %q", msg and msg .. ": " or "", show(s), pattern))
  end
end

-- raises(fn, code) -> the error table fn raised (with that code)
function M.raises(fn, code, msg)
  local ok, err = pcall(fn)
  if ok then fail((msg or "expected an error") .. (code and " " .. code or "") .. ", got none") end
  if code and not (type(err) == "table" and err.code == code) then
    fail(string.format("%sexpected error %s, got %s", msg and msg .. ": " or "", code, show(err)))
  end
  return err
end

-- fails(v, err, code): checks a `nil, err` return with that code; returns err
function M.fails(v, err, code, msg)
  if v ~= nil or type(err) ~= "table" then
    fail(string.format("%sexpected nil, err(%s), got %s, %s", msg and msg .. ": " or "",
      code or "", show(v), show(err)))
  end
  if code and err.code ~= code then
    fail(string.format("%sexpected error %s, got %s", msg and msg .. ": " or "", code, show(err)))
  end
  return err
end

local function leaks()
  local s = sched.stats()
  local parts = {}
  if s.tasks > 0 then parts[#parts + 1] = s.tasks .. " task(s)" end
  if s.timers > 0 then parts[#parts + 1] = s.timers .. " timer(s)" end
  if s.http > 0 then parts[#parts + 1] = s.http .. " HTTP transfer(s)" end
  return #parts > 0 and table.concat(parts, ", ") or nil
end

-- run_one(label, fn, n) -> "pass" | "fail" | "skip": runs fn as a task and
-- prints its TAP line (a cleanup's only when it fails: quiet)
local function run_one(label, fn, n, quiet)
  local t = sched.spawn(fn, { name = label })
  sched.run(function() return t:finished() end)
  local passed, why = t.status == "done", nil
  local skipped = not passed and type(t.err) == "table" and t.err.code == "SKIP" and t.err.tap_skip == true
  if skipped then
    passed = true
  elseif not passed then
    why = t.err and tostring(t.err) or "the test never finished (it waits for nothing)"
    if t.err and t.err.code ~= "ASSERT" and t.err.traceback then
      why = why .. "\n" .. t.err.traceback
    elseif t.err and t.err.traceback then
      why = why .. "\n" .. (t.err.traceback:match("\n[^\n]*\n%s*([^\n]+_test%.lua:%d+:[^\n]*)") or "")
    end
  end
  local leaked = leaks()
  if leaked then
    -- clean up so the next test starts from nothing
    sched.cancel_tree(t)
    sched.run(function() return leaks() == nil end)
    if passed then passed, skipped, why = false, false, "left behind " .. leaked end
  end
  if passed and quiet then return "pass" end
  print(string.format("%s %d - %s%s", passed and "ok" or "not ok", n, label,
    skipped and " # SKIP " .. tostring(t.err.message):gsub("[\r\n]+", " ") or ""))
  if not passed then
    for line in why:gmatch("[^\n]+") do print("#   " .. line) end
  end
  io.stdout:flush()
  return skipped and "skip" or passed and "pass" or "fail"
end

-- run_files(paths) -> true when no test and no cleanup failed (skips do not fail)
function M.run_files(paths)
  local n, failed = 0, 0
  for _, path in ipairs(paths) do
    registered, cleanups = {}, {}
    local short = path:match("([^/]+)$")
    print("# " .. path)
    local env = setmetatable({}, { __index = _G })
    local chunk, err = loadfile(path, "t", env)
    local loaded = chunk ~= nil
    if chunk then
      local t = sched.spawn(chunk, { name = path })
      sched.run(function() return t:finished() end)
      if t.status ~= "done" then loaded, err = false, tostring(t.err) .. "\n" .. (t.err.traceback or "") end
    end
    if not loaded then
      n, failed = n + 1, failed + 1
      print(string.format("not ok %d - %s loads", n, short))
      for line in tostring(err):gmatch("[^\n]+") do print("#   " .. line) end
    end
    for _, case in ipairs(loaded and registered or {}) do
      n = n + 1
      if run_one(case.name, case.fn, n) == "fail" then failed = failed + 1 end
    end
    -- the cleanups, even when the file failed to load part-way
    for i = #cleanups, 1, -1 do
      local c = cleanups[i]
      if run_one("cleanup at " .. c.where, c.fn, n + 1, true) == "fail" then n, failed = n + 1, failed + 1 end
    end
  end
  print("1.." .. n)
  return failed == 0
end

return M
