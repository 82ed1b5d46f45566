-- The virtual clock with a server and its client in one process (hypd
-- serve --sandbox: a tool calling the in-process sandbox): a request
-- handler that sleeps (a simulated latency) while the client's transfer is
-- in flight gets its time, so the answer comes at once in real time; a
-- handler that already answered and streams, asleep between writes, does
-- not move time for a transfer in flight (what tests rely on to hold
-- simulated time still while a client connects).
local t = require "hypd.tap"
local core = require "hypd.core"
local http = require "hypd.http"
local server = require "hypd.http_server"
local task = require "hypd.task"

core.virtual(true)

t.test("a handler sleeping 30 simulated seconds answers a client of this process at once, 30 s later in " ..
  "simulated time", function()
  local srv = assert(server.start { listen = "127.0.0.1:0", handler = function()
    task.sleep(30)
    return { status = 200, body = "slept" }
  end })
  local v0, r0 = core.now(), core.wall()
  local resp = http.request { url = "http://127.0.0.1:" .. srv.port .. "/x", timeout = 10 }
  local waited = (core.wall()) - r0
  srv:stop()
  t.eq(resp and resp.status, 200)
  t.eq(resp and resp.body, "slept")
  t.ok(core.now() - v0 >= 30, "30 simulated seconds passed: " .. (core.now() - v0))
  t.ok(waited < 5, "no real wait for the simulated one: " .. waited)
end)

t.test("a streaming handler asleep between writes does not move time while another transfer is in flight",
  function()
    local srv = assert(server.start { listen = "127.0.0.1:0", handler = function(req)
      if req.path == "/stream" then
        return { stream = function(w) for i = 1, 1000 do w:write(i .. "\n") task.sleep(60) end end }
      end
      return { status = 200, body = "now" }
    end })
    local base = "http://127.0.0.1:" .. srv.port
    local s = http.stream { url = base .. "/stream", timeout = 10 }
    t.ok(s, "the stream is open")
    task.sleep(0) -- let it start
    local v0 = core.now()
    for _ = 1, 20 do
      local resp = http.request { url = base .. "/now", timeout = 5 }
      t.eq(resp and resp.body, "now")
    end
    t.ok(core.now() - v0 < 60, "time stood still for the plain requests: " .. (core.now() - v0))
    if s and s.close then s:close() end
    srv:stop()
  end)
