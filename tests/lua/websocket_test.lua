-- WebSockets on the HTTP server: a handler returns { websocket = fn }, the
-- server upgrades the connection and fn(ws) talks to the client from the
-- request's task. The client is tests/tools/ws_client.py (raw sockets, no
-- third-party modules), run in the background so the engine keeps serving
-- while it talks; the test polls for the JSON file it leaves.
local t = require "hypd.tap"
local core = require "hypd.core"
local server = require "hypd.http_server"
local http = require "hypd.http"
local json = require "hypd.json"
local task = require "hypd.task"
local H = dofile("tests/lua/helpers.lua")

local dir = H.tmpdir()
local runs = 0

-- start_client(port, scenario) -> wait(): starts the client in the
-- background; wait() returns the table it wrote (waits up to 60 s)
local function start_client(port, scenario, ca)
  runs = runs + 1
  local out = string.format("%s/%s-%d.json", dir, scenario, runs)
  os.execute(string.format("python3 tests/tools/ws_client.py %d %s %s %s >%s.log 2>&1 &",
    port, scenario, H.quote(out), ca and H.quote(ca) or "", H.quote(out)))
  return function()
    local deadline = core.mono() + 60
    while core.mono() < deadline do
      local text = H.read(out)
      if text then return json.decode(text) end
      task.sleep(0.05)
    end
    error("ws_client.py " .. scenario .. " wrote nothing: " .. tostring(H.read(out .. ".log")))
  end
end

local function client(port, scenario, ca) return start_client(port, scenario, ca)() end

-- an echo server; `seen` collects how each websocket ended
local function echo_server(seen, opts)
  opts = opts or {}
  return assert(server.start { websocket = opts.websocket, tls = opts.tls, threads = opts.threads,
    handler = function(req)
    if req.path == "/plain" then return { body = "plain" } end
    return { headers = { ["sec-websocket-protocol"] = req.headers["sec-websocket-protocol"] and "chat" },
      websocket = function(ws)
        while true do
          local msg, kind = ws:recv()
          if not msg then
            seen[#seen + 1] = { code = kind.code, status = kind.status, reason = kind.reason,
                                websocket = req.websocket, protocol = ws.protocol }
            return
          end
          if msg == "close me" then
            ws:close(4002, "go away")
          elseif msg == "ping me" then
            ws:ping("srv")
          elseif msg == "hold" then
            seen.holding = (seen.holding or 0) + 1
          elseif kind == "binary" then
            ws:send_binary(msg)
          else
            ws:send(msg)
          end
        end
      end }
  end })
end

-- waits until cond() or 10 s pass
local function eventually(cond, what)
  local deadline = core.mono() + 10
  while not cond() do
    if core.mono() > deadline then error("timed out waiting for " .. what, 2) end
    task.sleep(0.02)
  end
end

-- stops srv and waits for the last events of its websockets
local function stop(srv)
  srv:stop()
  eventually(function() return srv:websockets() == 0 end, "every websocket's end")
end

local function with_echo(fn, opts)
  local seen = {}
  local srv = echo_server(seen, opts)
  local ok, err = pcall(fn, srv.port, seen, srv)
  stop(srv)
  if not ok then error(err, 0) end
end

t.test("the handshake answers 101 with the RFC 6455 accept value and the chosen subprotocol", function()
  with_echo(function(port, seen)
    local r = client(port, "handshake")
    t.eq(r.error, nil)
    t.eq(r.status, 101)
    t.eq(r.accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    t.eq(r.expected, r.accept, "Python's own computation agrees")
    t.eq(r.protocol, "chat")
    t.eq(r.upgrade, "websocket")
    t.eq(r.close, { 1000, "" }, "the close is echoed with its code")
    t.eq(r.eof, true, "then the server closes the connection")
    eventually(function() return #seen == 1 end, "the handler's end")
    t.eq(seen[1], { code = "CLOSED", status = 1000, reason = "bye", websocket = true, protocol = "chat" })
  end)
end)

t.test("text and binary messages echo, of any length, and an empty one", function()
  with_echo(function(port)
    local r = client(port, "echo")
    t.eq(r.error, nil)
    t.eq(r.text, { 1, "hello \u{2603}" })
    t.eq(r.binary, { 2, true, 256 })
    t.eq(r.big, { 1, 70000, true })
    t.eq(r.empty, { 1, "" })
    t.eq(r.close, { 1000, "" })
  end)
end)

t.test("a fragmented message is reassembled, with a ping between its fragments", function()
  with_echo(function(port)
    local r = client(port, "fragment")
    t.eq(r.error, nil)
    t.eq(r.frames, { { 10, "mid" }, { 1, "fragmented \u{e9}" } }, "the pong first, then the whole message")
    t.eq(r.split, { 1, "a\u{2603}" }, "a character split across fragments")
  end)
end)

t.test("a ping gets its pong; the server pings with ws:ping; pongs are ignored", function()
  with_echo(function(port)
    local r = client(port, "ping")
    t.eq(r.error, nil)
    t.eq(r.pong, { 10, "abc" })
    t.eq(r.server_ping, { 9, "srv" })
    t.eq(r.after, { 1, "after" })
  end)
end)

t.test("a client's close is echoed with its code and reaches recv as CLOSED", function()
  with_echo(function(port, seen)
    local r = client(port, "client_close")
    t.eq(r.error, nil)
    t.eq(r.close, { 4001, "" })
    t.eq(r.eof, true)
    eventually(function() return #seen == 1 end, "the handler's end")
    t.eq({ seen[1].code, seen[1].status, seen[1].reason }, { "CLOSED", 4001, "bye now" })
  end)
end)

t.test("ws:close sends its code and reason, and recv then answers CLOSED", function()
  with_echo(function(port, seen)
    local r = client(port, "server_close")
    t.eq(r.error, nil)
    t.eq(r.close, { 4002, "go away" })
    t.eq(r.eof, true)
    eventually(function() return #seen == 1 end, "the handler's end")
    t.eq({ seen[1].code, seen[1].status }, { "CLOSED", 4002 })
  end)
end)

t.test("an unmasked client frame closes the websocket with 1002", function()
  with_echo(function(port, seen)
    local r = client(port, "unmasked")
    t.eq(r.error, nil)
    t.eq(r.close[1], 1002)
    t.eq(r.eof, true)
    eventually(function() return #seen == 1 end, "the handler's end")
    t.eq(seen[1].status, 1002)
  end)
end)

t.test("a message over 1 MiB closes with 1009, announced in one frame or in fragments", function()
  with_echo(function(port)
    local r = client(port, "oversized")
    t.eq(r.error, nil)
    t.eq(r.close[1], 1009)
    t.eq(r.fragments.close[1], 1009)
  end)
end)

t.test("text that is not UTF-8 closes with 1007; valid text of every width echoes", function()
  with_echo(function(port)
    local r = client(port, "utf8")
    t.eq(r.error, nil)
    for _, hex in ipairs { "48656c6c6f", "c3a9", "e282ac", "f09f9880", "f48fbfbf", "ed9fbf", "efbbbf" } do
      t.eq(r[hex], "echo", hex)
    end
    for _, hex in ipairs { "ff", "c0af", "c1bf", "e080af", "eda080", "edbfbf", "f4908080", "f8888080af",
                           "80", "c3", "e282", "f09f98", "c328" } do
      t.eq(r[hex], 1007, hex)
    end
    t.eq(r.close_reason, 1007, "a close reason that is not UTF-8")
    t.eq(r.close_1005, 1002, "a close code no frame may carry")
    t.eq(r.orphan_continuation, 1002, "a continuation with nothing to continue")
    t.eq(r.long_ping, 1002, "a control frame over 125 bytes")
  end)
end)

t.test("a request to a websocket handler without a valid upgrade gets 400, a wrong version 426", function()
  with_echo(function(port)
    local base = "http://127.0.0.1:" .. port
    local r = assert(http.request { url = base .. "/ws" })
    t.eq(r.status, 400)
    r = assert(http.request { url = base .. "/ws", headers = { upgrade = "websocket", connection = "Upgrade",
      ["sec-websocket-key"] = "dGhlIHNhbXBsZSBub25jZQ==", ["sec-websocket-version"] = "8" } })
    t.eq(r.status, 426)
    t.eq(r.headers["sec-websocket-version"], "13")
    r = assert(http.request { url = base .. "/ws", headers = { upgrade = "websocket", connection = "Upgrade",
      ["sec-websocket-key"] = "short", ["sec-websocket-version"] = "13" } })
    t.eq(r.status, 400, "a key that is not 16 bytes of base64")
    t.eq(http.request { url = base .. "/plain" }.body, "plain", "other routes still answer")
  end)
end)

t.test("stopping the server closes open websockets with 1001; their handlers see CLOSED", function()
  local seen = {}
  local srv = echo_server(seen)
  local waits = {}
  for i = 1, 3 do waits[i] = start_client(srv.port, "hold") end
  eventually(function() return seen.holding == 3 end, "three clients holding")
  t.eq(srv:websockets(), 3)
  local t0 = core.mono()
  srv:stop()
  t.ok(core.mono() - t0 < 2, "stop returns within the close handshake's bound")
  eventually(function() return srv:websockets() == 0 end, "every websocket's end")
  eventually(function() return #seen == 3 end, "the handlers' ends")
  for i = 1, 3 do
    t.eq({ seen[i].code, seen[i].status }, { "CLOSED", 1001 })
  end
  for i = 1, 3 do
    local r = waits[i]()
    t.eq(r.frames, {}, "nothing but the close")
    t.eq(r.close, { 1001, "server stopping" })
    t.eq(r.eof, true)
  end
end)

t.test("the server pings a silent client and drops it once it stays silent past idle", function()
  with_echo(function(port, seen)
    local r = client(port, "silent")
    t.eq(r.error, nil)
    t.ok(r.pings >= 2, "pinged at least twice, got " .. tostring(r.pings))
    t.ok(r.seconds >= 0.5 and r.seconds < 5, "dropped after about 0.6 s, took " .. tostring(r.seconds))
    eventually(function() return #seen == 1 end, "the handler's end")
    t.eq(seen[1].status, 1006)
  end, { websocket = { ping = 0.2, idle = 0.6 } })
end)

t.test("50 concurrent clients each echo 20 messages", function()
  with_echo(function(port, seen)
    local r = client(port, "many")
    t.eq(r.error, nil)
    local good = 0
    for _, n in ipairs(r.results) do
      if n == 20 then good = good + 1 end
    end
    t.eq(good, 50, "clients with 20 echoes: " .. json.encode(r.results))
    eventually(function() return #seen == 50 end, "every handler's end")
  end)
end)

t.test("websockets work over TLS too: echo, and a stop still closes with 1001", function()
  local cert, key, pem = H.self_signed(dir)
  local seen = {}
  local srv = echo_server(seen, { tls = { cert_pem = pem, key_pem = H.read(key) } })
  local ok, err = pcall(function()
    local r = client(srv.port, "echo", cert)
    t.eq(r.error, nil)
    t.eq(r.text, { 1, "hello \u{2603}" })
    t.eq(r.big, { 1, 70000, true })
    t.eq(r.close, { 1000, "" })
    local wait = start_client(srv.port, "hold", cert)
    eventually(function() return seen.holding == 1 end, "the client holding")
    stop(srv)
    t.eq(wait().close, { 1001, "server stopping" })
    t.eq(seen[#seen].status, 1001)
  end)
  stop(srv)
  if not ok then error(err, 0) end
end)

t.test("with epoll and a pool of 3 threads, 50 clients echo over plain and TLS, and a stop closes with 1001", function()
  with_echo(function(port, seen)
    local r = client(port, "many")
    t.eq(r.error, nil)
    local good = 0
    for _, n in ipairs(r.results) do
      if n == 20 then good = good + 1 end
    end
    t.eq(good, 50, "clients with 20 echoes: " .. json.encode(r.results))
    eventually(function() return #seen == 50 end, "every handler's end")
  end, { threads = 3 })
  local cert, key, pem = H.self_signed(dir)
  local seen = {}
  local srv = echo_server(seen, { tls = { cert_pem = pem, key_pem = H.read(key) }, threads = 3 })
  local ok, err = pcall(function()
    local r = client(srv.port, "echo", cert)
    t.eq({ r.error, r.text, r.close }, { nil, { 1, "hello \u{2603}" }, { 1000, "" } })
    local wait = start_client(srv.port, "hold", cert)
    eventually(function() return seen.holding == 1 end, "the client holding")
    stop(srv)
    t.eq(wait().close, { 1001, "server stopping" })
  end)
  stop(srv)
  if not ok then error(err, 0) end
end)

t.test("frames sent at once wait for the upgrade; text must be UTF-8; returning closes with 1000", function()
  local got = {}
  local srv = assert(server.start { handler = function()
    return { websocket = function(ws)
      got.sent = { ws:send("welcome"), ws:send_binary("\0\1"), ws:ping("p") }
      got.bad = select(2, pcall(ws.send, ws, "\xff\xfe")).code
      got.bad_code = pcall(ws.close, ws, 1005)
    end }
  end })
  local ok, err = pcall(function()
    local r = client(srv.port, "hold")
    t.eq(r.error, nil)
    t.eq(r.frames, { { 1, "welcome" }, { 2, "\0\1" }, { 9, "p" } })
    t.eq(r.close, { 1000, "" })
    t.eq(r.eof, true)
    t.eq(got, { sent = { true, true, true }, bad = "VALIDATION", bad_code = false })
  end)
  stop(srv)
  if not ok then error(err, 0) end
end)

t.test("recv with a timeout answers TIMEOUT (again) and the websocket stays usable", function()
  local got = {}
  local srv = assert(server.start { handler = function()
    return { websocket = function(ws)
      local msg, err = ws:recv(0) -- nothing can have arrived yet
      got.first = { msg, err and err.code, err and err.again }
      got.second = { ws:recv() }
      local t0 = core.mono()
      msg, err = ws:recv(0.1) -- the client waits for us: a real timeout
      got.third = { msg, err and err.code, core.mono() - t0 >= 0.09 }
      ws:send("late " .. tostring(got.second[1]))
    end }
  end })
  local ok, err = pcall(function()
    local r = client(srv.port, "hold")
    t.eq(r.frames, { { 1, "late hold" } })
    t.eq(r.close, { 1000, "" }, "the handler returned: closed with 1000")
    t.eq(got.first, { nil, "TIMEOUT", true })
    t.eq(got.second, { "hold", "text" })
    t.eq(got.third, { nil, "TIMEOUT", true })
  end)
  stop(srv)
  if not ok then error(err, 0) end
end)

t.test("under the virtual clock a task blocked in recv does not hold time still", function()
  local waiting = false
  local srv = assert(server.start { handler = function()
    return { websocket = function(ws)
      waiting = ws:recv() == "hold"
      ws:recv() -- blocks until the server stops
    end }
  end })
  local ok, err = pcall(function()
    local wait = start_client(srv.port, "hold")
    eventually(function() return waiting end, "the handler in recv")
    core.virtual(true)
    local t0, r0 = core.now(), core.mono()
    local vok, verr = pcall(task.sleep, 3600)
    local moved, real = core.now() - t0, core.mono() - r0
    core.virtual(false)
    if not vok then error(verr, 0) end
    t.ok(moved >= 3600, "virtual time moved an hour")
    t.ok(real < 5, "in little real time")
    stop(srv)
    t.eq(wait().close[1], 1001)
  end)
  stop(srv)
  core.virtual(false)
  if not ok then error(err, 0) end
end)

t.cleanup(function()
  os.execute("rm -rf " .. H.quote(dir))
end)
