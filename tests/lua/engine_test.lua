-- The engine: coroutines, timers, the virtual clock, cancellation,
-- deadlines and asynchronous HTTP.
local t = require "hypd.tap"
local core = require "hypd.core"
local task = require "hypd.task"
local http = require "hypd.http"
local H = dofile("tests/lua/helpers.lua")

local base, stop_server = H.echo_server()

t.test("sleeping tasks wake in the order of their deadlines", function()
  local order = {}
  local a = task.spawn(function() task.sleep(0.03); order[#order + 1] = "c" end)
  local b = task.spawn(function() task.sleep(0.01); order[#order + 1] = "a" end)
  local c = task.spawn(function() task.sleep(0.02); order[#order + 1] = "b" end)
  a:wait(); b:wait(); c:wait()
  t.eq(order, { "a", "b", "c" })
end)

t.test("a signal wakes every waiting task; a timeout returns false; cancel leaves no waiter", function()
  local sig = task.signal()
  local got = {}
  local a = task.spawn(function() local r = sig:wait(); got[#got + 1] = r end)
  local b = task.spawn(function() local r = sig:wait(60); got[#got + 1] = r end)
  local c = task.spawn(function() return sig:wait(0.01) end)
  t.eq({ select(2, c:wait()) }, { false })
  task.checkpoint()
  sig:fire()
  a:wait(); b:wait()
  t.eq(got, { true, true })
  local d = task.spawn(function() sig:wait() end)
  task.checkpoint()
  d:cancel()
  t.eq(d:wait(), false)
  t.eq(next(sig.waiters), nil)
  t.eq(task.stats().timers, 0)
end)

t.test("a task's results come back from wait", function()
  local x = task.spawn(function(p, q) task.sleep(0); return p + q, "sum" end, nil, 2, 3)
  local ok, v, label = x:wait()
  t.eq({ ok, v, label }, { true, 5, "sum" })
end)

t.test("a failing task reports its error table with a traceback", function()
  local x = task.spawn(function() error({ code = "NOT_FOUND", message = "gone" }) end)
  local ok, err = x:wait()
  t.eq(ok, false)
  t.eq(err.code, "NOT_FOUND")
  t.like(err.traceback, "engine_test.lua")
end)

t.test("a string error becomes an INTERNAL error table", function()
  local x = task.spawn(function() local n = nil; return n.field end)
  local _, err = x:wait()
  t.eq(err.code, "INTERNAL")
  t.like(err.message, "attempt to index")
end)

t.test("12 virtual minutes of sleep pass at once and move the clock by 12 minutes", function()
  core.virtual(true)
  local before, real_before = core.now(), core.mono()
  task.sleep(12 * 60)
  local after, real_after = core.now(), core.mono()
  core.virtual(false)
  t.eq(after - before, 720)
  t.ok(real_after - real_before < 5, "real time stays short")
end)

t.test("under the virtual clock concurrent sleepers wake deterministically", function()
  core.virtual(true)
  local start, log = core.now(), {}
  local tasks = {}
  for i = 1, 5 do
    tasks[i] = task.spawn(function()
      for step = 1, 3 do
        task.sleep(i * 60)
        log[#log + 1] = string.format("%d@%d", i, math.floor(core.now() - start + 0.5))
        if step == 3 then return end
      end
    end)
  end
  for _, x in ipairs(tasks) do x:wait() end
  core.virtual(false)
  t.eq(#log, 15)
  t.eq(log[1], "1@60")
  t.eq(log[#log], "5@900")
end)

t.test("cancelling a sleeping task wakes it with CANCELLED at once", function()
  local started = core.mono()
  local x = task.spawn(function() task.sleep(3600) end)
  task.sleep(0.01)
  t.ok(x:cancel("operator asked"), "cancel reports the task was running")
  local ok, err = x:wait()
  t.eq(ok, false)
  t.eq(err.code, "CANCELLED")
  t.eq(err.message, "operator asked")
  t.ok(core.mono() - started < 5, "no waiting for the hour")
end)

t.test("cancellation is sticky: a task that catches it fails its next wait", function()
  local caught
  local x = task.spawn(function()
    local ok, err = pcall(task.sleep, 3600)
    caught = not ok and err.code
    task.sleep(1) -- must fail at once
    return "should not get here"
  end)
  task.sleep(0)
  x:cancel()
  local ok, err = x:wait()
  t.eq(caught, "CANCELLED")
  t.eq({ ok, err.code }, { false, "CANCELLED" })
end)

t.test("a task past its deadline fails with TIMEOUT while it waits", function()
  local x = task.spawn(function() task.sleep(3600) end, { timeout = 0.05 })
  local ok, err = x:wait()
  t.eq({ ok, err.code }, { false, "TIMEOUT" })
end)

t.test("a CPU loop past its deadline is stopped by the hook", function()
  local x = task.spawn(function() local n = 0; while true do n = n + 1 end end, { timeout = 0.2 })
  local ok, err = x:wait()
  t.eq({ ok, err.code }, { false, "TIMEOUT" })
end)

t.test("cancelling a task that never started finishes it without running it", function()
  local ran = false
  local x = task.spawn(function() ran = true end)
  x:cancel()
  local ok, err = x:wait()
  t.eq({ ok, err.code, ran }, { false, "CANCELLED", false })
end)

t.test("a long-lived task does not keep the finished tasks it started", function()
  local sched = require "hypd._sched"
  local me = sched.current()
  local kids = {}
  for i = 1, 500 do kids[i] = task.spawn(function() task.sleep(0) end) end
  local slow = task.spawn(function() task.sleep(3600) end)
  for _, k in ipairs(kids) do k:wait() end
  local n = 0
  for _ in pairs(me.children) do n = n + 1 end
  t.eq(n, 1, "only the running child is still tracked")
  slow:cancel()
  slow:wait()
  t.eq(next(me.children), nil)
end)

t.test("an HTTP request yields and resumes with the response", function()
  local resp, err = http.request { method = "POST", url = base .. "/echo/x", body = "payload",
    headers = { ["content-type"] = "text/plain" } }
  t.eq(err, nil)
  t.eq(resp.status, 200)
  t.eq(resp.body, "POST /echo/x payload")
  t.eq(resp.headers["x-echo"], "yes")
end)

t.test("request headers reach the server", function()
  local resp = http.request { url = base .. "/header", headers = { ["x-test"] = "value 42" } }
  t.eq(resp.body, "value 42")
end)

t.test("an HTTP error status is a response, not a failure", function()
  local resp = http.request { url = base .. "/status/503" }
  t.eq({ resp.status, resp.body }, { 503, "status 503" })
end)

t.test("1,000 coroutines each make a request to a loopback server and all get their own answer", function()
  local tasks = {}
  for i = 1, 1000 do
    tasks[i] = task.spawn(function()
      local resp, err = http.request { url = base .. "/echo/" .. i }
      if not resp then return nil, err end
      return resp.status, resp.body
    end)
  end
  local good = 0
  for i, x in ipairs(tasks) do
    local ok, status, body = x:wait()
    if ok and status == 200 and body == "GET /echo/" .. i .. " " then good = good + 1 end
  end
  t.eq(good, 1000)
end)

t.test("a response larger than max_body fails with TOO_LARGE", function()
  local resp, err = http.request { url = base .. "/big/100000", max_body = 1000 }
  t.fails(resp, err, "TOO_LARGE")
  local ok = http.request { url = base .. "/big/1000", max_body = 1000 }
  t.eq(#ok.body, 1000)
end)

t.test("a slow server fails with TIMEOUT after the request's timeout", function()
  local resp, err = http.request { url = base .. "/delay/3000", timeout = 0.2 }
  t.fails(resp, err, "TIMEOUT")
end)

t.test("a refused connection fails with CONNECT", function()
  local resp, err = http.request { url = "http://127.0.0.1:1/" }
  t.fails(resp, err, "CONNECT")
end)

t.test("a bad inline CA certificate fails the request, not the engine", function()
  local resp, err = http.request { url = "https://127.0.0.1:1/", ca_pem = "not a certificate" }
  t.ok(resp == nil and err and err.code, "an error table")
end)

t.test("bad request fields are refused before anything is sent", function()
  t.fails(http.request { url = base, colour = "red" }, select(2, http.request { url = base, colour = "red" }),
    "VALIDATION")
  local r, err = http.request { url = "ftp://example/" }
  t.fails(r, err, "VALIDATION")
end)

t.test("cancelling a task waiting on HTTP aborts the transfer", function()
  local x = task.spawn(function() return http.request { url = base .. "/delay/2000" } end)
  task.sleep(0.05)
  x:cancel()
  local ok, err = x:wait()
  t.eq({ ok, err.code }, { false, "CANCELLED" })
  task.sleep(0) -- the aborted transfer is reaped on the next poll
  local deadline = core.mono() + 2
  while task.stats().http > 0 and core.mono() < deadline do task.sleep(0.01) end
  t.eq(task.stats().http, 0)
end)

t.test("HTTPS works with an inline CA certificate and fails TLS without it", function()
  local dir = H.tmpdir()
  local cert, key, pem = H.self_signed(dir)
  local url, stop = H.echo_server(cert, key)
  local resp, err = http.request { url = url .. "/echo/tls", ca_pem = pem }
  local bad, bad_err = http.request { url = url .. "/echo/tls", ca_file = "/etc/ssl/certs/ca-certificates.crt" }
  local file_resp = http.request { url = url .. "/echo/tls", ca_file = cert }
  stop()
  os.execute("rm -rf " .. H.quote(dir))
  t.eq(err, nil)
  t.eq({ resp.status, resp.body }, { 200, "GET /echo/tls " })
  t.fails(bad, bad_err, "TLS")
  t.eq(file_resp.status, 200, "a CA bundle file works too")
end)

t.cleanup(function()
  stop_server()
end)
