-- No tool stops the server: a real `hypd serve` with misbehaving playbook
-- tools (a sleep(0) loop, a CPU loop, CPU bursts between checkpoints, a CPU
-- loop in a coroutine of its own, a finalizer, a junk coroutine.yield, a
-- binding's bad argument), and beside each call a health probe. Each call
-- ends with a clear error, never hangs, never ends the process, and the
-- server answers afterwards.
--
-- The probe: 20 GET /api/v1/health while the call runs. The issue asks that
-- the probe never waits more than 100 ms. Timed assertions are fragile on a
-- machine shared by parallel test runs, so the test holds the median to
-- 100 ms (what the engine promises: playbook code is preempted every 20 ms)
-- and every probe to 500 ms (a loaded machine's margin; today's tree holds
-- a probe for 30 s or for ever). A probe that gets no answer within 3 s
-- ends the probing (one is enough to fail). For the CPU cases the call
-- must still be running after the probes, so they really stood beside it;
-- each of them lasts a tool's CPU budget (hypd._sched: 3 s of the engine
-- thread's CPU), longer in real time on a loaded machine.
--
-- And, in-process, the playbook sandbox's setmetatable: __gc is refused,
-- and a __gc added to a metatable after setmetatable is never called.
local t = require "hypd.tap"
local core = require "hypd.core"
local http = require "hypd.http"
local json = require "hypd.json"
local playbook = require "hypd.playbook"
local task = require "hypd.task"
local H = dofile("tests/lua/helpers.lua")

local dir = H.tmpdir()
local playbooks = dir .. "/playbooks"
os.execute("mkdir -p " .. H.quote(playbooks))

-- a read tool whose main is body
local function tool(name, body)
  H.write(playbooks .. "/" .. name .. ".lua", string.format([[
return tool {
  name = %q, summary = "Misbehaves", kind = "read",
  description = "A tool of the stall suite: it misbehaves on purpose.", params = {},
  run = function()
%s
  end,
}]], name, body))
end

tool("diagnose_stall_sleep0", "    while true do hypd.sleep(0) end")
tool("diagnose_stall_cpu", "    local n = 0\n    while true do n = n + 1 end")
tool("diagnose_stall_bursts", [[
    while true do
      local t0 = os.clock()
      while os.clock() - t0 < 0.01 do end -- 10 ms of CPU, then a checkpoint
      hypd.checkpoint()
    end]])
tool("diagnose_stall_coroutine", [[
    local co = coroutine.wrap(function() local n = 0 while true do n = n + 1 end end)
    co()]])
tool("diagnose_stall_gc", [[
    setmetatable({}, { __gc = function() while true do end end })
    return { survived = true }]])
tool("diagnose_stall_yield", [[
    coroutine.yield("junk")
    return { survived = true }]])
tool("diagnose_stall_http_aws", [[
    return hypd.http.request { url = "http://127.0.0.1:1/", aws = {} }]])
tool("diagnose_stall_http_eks", [[
    return hypd.http.request { url = "http://127.0.0.1:1/", eks = {} }]])

-- start() -> a fresh `hypd serve`, as a person runs it, for one case (a
-- server one case stalled must not fail the next): sets url, token, base
local url, token, base
local n = 0
local bases = {} -- every server started, for cleanup (a failed assertion ends a case early)

local function exited() return H.read(base .. ".rc") end

local function start()
  n = n + 1
  base = dir .. "/serve" .. n
  os.execute(string.format("(%s --state %s --playbooks %s serve --listen 127.0.0.1:0 >%s.out 2>%s.err " ..
    "</dev/null & echo $! >%s.pid; wait $!; echo $? >%s.rc) >/dev/null 2>&1 </dev/null &",
    H.hypd, H.quote(dir .. "/state" .. n), H.quote(playbooks), base, base, base, base))
  url, token = nil, nil
  bases[#bases + 1] = base
  for _ = 1, 750 do
    local out = H.read(base .. ".out") or ""
    url, token = out:match("listening on (http://[%d.:]+)"), out:match("token %b(): (hypd_[%w_-]+)")
    if (url and token) or exited() then break end
    os.execute("sleep 0.02")
  end
  assert(url and token, "hypd serve did not start: " .. tostring(H.read(base .. ".err")))
end

-- stop([b]): ends the case's server b (the process this test started),
-- unless it has exited
local function stop(b)
  b = b or base
  local pid = (H.read(b .. ".pid") or ""):match("%d+")
  if pid and not H.read(b .. ".rc") then os.execute("kill -9 " .. pid .. " 2>/dev/null") end
end

-- health() -> seconds it took, status (nil when no answer within 3 s)
local function health()
  local t0 = core.mono()
  local resp = http.request { url = url .. "/api/v1/health", timeout = 3 }
  return core.mono() - t0, resp and resp.status
end

-- call(name) -> a task: its wait() gives status, decoded body
local function call(name)
  return task.spawn(function()
    local resp, err = http.request { method = "POST", url = url .. "/api/v1/tools/" .. name, body = "{}",
      timeout = 120, headers = { authorization = "Bearer " .. token, ["content-type"] = "application/json" } }
    if not resp then return nil, err end
    return resp.status, json.decode(resp.body)
  end, { name = "call " .. name })
end

-- probe() -> the probes' seconds, sorted, and whether every one answered 200
local function probe()
  local times, all = {}, true
  for i = 1, 20 do
    local s, status = health()
    times[i] = s
    if status ~= 200 then all = false break end
  end
  table.sort(times)
  return times, all
end

local function ms(s) return string.format("%.0f ms", s * 1000) end

-- the misbehaving call beside the probes, on a fresh server; returns its
-- status, body and the server's log
local function beside(name, still_running)
  start()
  local c = call(name)
  task.sleep(0.2) -- the call is in the server's hands
  local times, all = probe()
  t.ok(all, name .. ": every probe answered 200 (" .. #times .. " answered)")
  if all then
    local median, worst = times[10], times[20]
    io.write("# ", name, ": probes ", ms(times[1]), " .. ", ms(median), " (median) .. ", ms(worst), "\n")
    t.ok(median < 0.1, name .. ": the median probe took under 100 ms (" .. ms(median) .. ")")
    t.ok(worst < 0.5, name .. ": every probe took under 500 ms (the slowest: " .. ms(worst) .. ")")
  end
  if still_running then t.eq(c:finished(), false, name .. ": the probes ran while the call still ran") end
  local ok, status, body = c:wait()
  t.ok(ok and status, name .. ": the call got an answer: " .. tostring(body))
  t.eq(exited(), nil, name .. ": the server is still running")
  local s, st = health()
  t.eq(st, 200, name .. ": health answers after the call (" .. ms(s) .. ")")
  local log = H.read(base .. ".err") or ""
  stop()
  return status, type(body) == "table" and body or {}, log
end

local function code(body) return body.error and body.error.code end

t.test("a tool looping on sleep(0) neither holds health nor runs for ever: it fails with CPU", function()
  local status, body, log = beside("diagnose_stall_sleep0", true)
  t.eq(status, 500)
  t.eq(code(body), "CPU")
  t.like(log, "CPU: used its CPU budget of 3s", "the server's log names the budget")
end)

t.test("a tool in a plain CPU loop neither holds health nor runs for ever: it fails with CPU", function()
  local status, body, log = beside("diagnose_stall_cpu", true)
  t.eq(status, 500)
  t.eq(code(body), "CPU")
  t.like(log, "CPU: used its CPU budget of 3s", "the server's log names the budget")
end)

t.test("a tool computing in bursts between checkpoints is held to its CPU budget across the yields", function()
  local status, body, log = beside("diagnose_stall_bursts", true)
  t.eq(status, 500)
  t.eq(code(body), "CPU")
  t.like(log, "CPU: used its CPU budget of 3s", "the server's log names the budget")
end)

t.test("a CPU loop in a coroutine of the tool's own is preempted too, and fails with CPU", function()
  local status, body, log = beside("diagnose_stall_coroutine", true)
  t.eq(status, 500)
  t.eq(code(body), "CPU")
  t.like(log, "CPU: used its CPU budget of 3s", "the server's log names the budget")
end)

t.test("a playbook's __gc finalizer is refused with SANDBOX before it can loop outside the task", function()
  local status, body = beside("diagnose_stall_gc")
  t.eq(status, 500)
  t.eq(code(body), "SANDBOX")
end)

t.test("coroutine.yield('junk') in a tool fails the call with SANDBOX instead of leaving it hanging", function()
  local status, body = beside("diagnose_stall_yield")
  t.eq(status, 500)
  t.eq(code(body), "SANDBOX")
end)

t.test("hypd.http.request with aws = {} fails the call, and the server does not exit", function()
  local status, body = beside("diagnose_stall_http_aws")
  t.eq({ status, code(body) }, { 400, "VALIDATION" })
  t.like(body.error and body.error.message, "aws%.service", "the message names the field")
end)

t.test("hypd.http.request with eks = {} fails the call, and the server does not exit", function()
  local status, body = beside("diagnose_stall_http_eks")
  t.eq({ status, code(body) }, { 400, "VALIDATION" })
  t.like(body.error and body.error.message, "eks%.cluster", "the message names the field")
end)

-- in-process: the playbook sandbox's setmetatable
local function run_playbook(src, ...)
  local env = playbook.env("stall_gc_test", function() error("no require here") end)
  local fn = assert(load(src, "=stall_gc_test", "t", env))
  return pcall(fn, ...)
end

t.test("a playbook's setmetatable refuses __gc and names the rule; __close and __mode stay allowed", function()
  local ok, err = run_playbook("setmetatable({}, { __gc = function() end })")
  t.eq(ok, false)
  t.eq(type(err) == "table" and err.code, "SANDBOX")
  t.like(tostring(type(err) == "table" and err.message or err), "setmetatable: .*__gc")
  t.ok((run_playbook("local weak = setmetatable({}, { __mode = 'k' }) " ..
    "do local c <close> = setmetatable({}, { __close = function() end }) end return weak")),
    "__mode and __close work")
end)

t.test("a __gc added to a metatable after setmetatable is never called", function()
  local box = {}
  local ok = run_playbook([[
    local box = ...
    local mt = {}
    for _ = 1, 10 do setmetatable({}, mt) end
    mt.__gc = function() box.ran = true end]], box)
  t.ok(ok, "the playbook ran")
  collectgarbage()
  collectgarbage()
  t.eq(box.ran, nil, "the late __gc never ran")
end)

t.cleanup(function()
  for _, b in ipairs(bases) do stop(b) end
  os.execute("sleep 0.1; rm -rf " .. H.quote(dir))
end)
