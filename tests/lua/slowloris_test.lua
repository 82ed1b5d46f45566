-- Slow clients cannot lock the others out (slowloris): one address holds
-- at most max_per_client of the server's 1,000 connections, and a new
-- connection whose first headers have not arrived by header_timeout is
-- closed however slowly they trickle, while a request the engine takes
-- long to answer and a websocket live on past it. The attacker is
-- tests/tools/slowloris.py on 127.0.0.2 (any 127.0.0.0/8 address is
-- loopback on Linux), the valid client this process on 127.0.0.1.
local t = require "hypd.tap"
local core = require "hypd.core"
local http = require "hypd.http"
local json = require "hypd.json"
local server = require "hypd.http_server"
local task = require "hypd.task"
local H = dofile("tests/lua/helpers.lua")

local dir = H.tmpdir()
local HEADER_TIMEOUT = 4

local function handler(req)
  if req.path == "/slow" then
    task.sleep(HEADER_TIMEOUT / 2 + 1)
    return { body = "slow and fine" }
  end
  if req.path == "/ws" then
    return { websocket = function(ws)
      ws:recv() -- the client's "hold"
      task.sleep(HEADER_TIMEOUT / 2 + 1)
      ws:send("still here")
      ws:close(4000, "done")
    end }
  end
  return { body = "ok" }
end

local function poll(path, seconds)
  local deadline = core.mono() + seconds
  while core.mono() < deadline do
    local text = H.read(path)
    if text then return text end
    task.sleep(0.05)
  end
end

local function get(port, path, timeout)
  local t0 = core.mono()
  local resp = http.request { url = "http://127.0.0.1:" .. port .. path, timeout = timeout or 3 }
  return resp and resp.status, core.mono() - t0, resp and resp.body
end

t.test("1,000 half-open connections from one address leave another client served at once", function()
  local srv = assert(server.start { listen = "127.0.0.1:0", handler = handler, header_timeout = HEADER_TIMEOUT })
  local ready, out = dir .. "/ready", dir .. "/result.json"
  local seconds = HEADER_TIMEOUT + 4
  os.execute(string.format("python3 tests/tools/slowloris.py %d 127.0.0.2 1000 %d %s %s >%s/slowloris.log 2>&1 &",
    srv.port, seconds, H.quote(ready), H.quote(out), H.quote(dir)))
  t.ok(poll(ready, 30), "the 1,000 connects were made")
  local statuses, slowest = {}, 0
  for i = 1, 5 do
    local st, took = get(srv.port, "/ok")
    statuses[i] = st or "failed"
    slowest = math.max(slowest, took)
  end
  t.eq(statuses, { 200, 200, 200, 200, 200 }, "five requests from 127.0.0.1 answered while they are held")
  t.ok(slowest < 2, string.format("each within 2 s (the slowest took %.2f s)", slowest))
  local r = json.decode(assert(poll(out, seconds + 30), "slowloris.py finished: " ..
    tostring(H.read(dir .. "/slowloris.log"))))
  local held, early = {}, 0
  -- refused ones close at once (seen late only if the connects took long)
  for _, took in ipairs(r.closed) do
    if took < HEADER_TIMEOUT - 1 then early = early + 1 else held[#held + 1] = took end
  end
  t.eq(r.opened, 1000, "1,000 connects from 127.0.0.2")
  t.eq(#held, 64, "64 held (the per-client limit); " .. early .. " closed at once")
  t.eq(r.open, 0, "none still open after " .. seconds .. " s")
  local late = {}
  for _, took in ipairs(held) do
    if took > HEADER_TIMEOUT + 3 or took < HEADER_TIMEOUT - 0.5 then late[#late + 1] = took end
  end
  t.eq(late, {}, "each held one closed at its header deadline (" .. HEADER_TIMEOUT .. " s), though it was " ..
    "still sending a byte every 0.5 s")
  t.eq((get(srv.port, "/ok")), 200, "served after")
  srv:stop()
end)

t.test("a request answered after the header deadline, and a websocket, live on past it", function()
  local srv = assert(server.start { listen = "127.0.0.1:0", handler = handler, header_timeout = 1 })
  HEADER_TIMEOUT = 1
  local out = dir .. "/ws.json"
  os.execute(string.format("python3 tests/tools/ws_client.py %d hold %s >%s.log 2>&1 &", srv.port, H.quote(out),
    H.quote(out)))
  local st, took, body = get(srv.port, "/slow", 10)
  t.eq({ st, body }, { 200, "slow and fine" }, string.format("the slow answer came after %.1f s", took))
  local r = json.decode(assert(poll(out, 30), "ws_client.py finished"))
  t.eq({ r.frames, r.close }, { { { 1, "still here" } }, { 4000, "done" } },
    "the websocket got its message after the deadline, then the close")
  srv:stop()
end)

t.test("server.start refuses bad limits, naming them", function()
  local _, err = server.start { listen = "127.0.0.1:0", handler = handler, max_per_client = 0 }
  t.eq(err and err.field, "max_per_client", "max_per_client 0")
  _, err = server.start { listen = "127.0.0.1:0", handler = handler, header_timeout = -1 }
  t.eq(err and err.field, "header_timeout", "header_timeout -1")
end)

t.test("hypd serve --max-per-client takes 1 to 1000 and names itself otherwise", function()
  for _, bad in ipairs { "0", "2.5", "many", "1001" } do
    local rc, _, err = H.run_hypd(nil, "serve", "--listen", "127.0.0.1:0", "--max-per-client", bad)
    t.ok(rc ~= 0 and tostring(err):find("--max-per-client must be a whole number of connections from 1 to 1000",
      1, true), "--max-per-client " .. bad .. " refused: " .. tostring(err))
  end
end)
