-- Handles (liolib's shape): servers, their websockets and HTTP client
-- streams are born closed, close idempotently, fail cleanly once closed,
-- and release their C resource when collected or when a <close> variable
-- leaves its scope.
local t = require "hypd.tap"
local core = require "hypd.core"
local server = require "hypd.http_server"
local hserver = require "hypd._server"
local http = require "hypd.http"
local json = require "hypd.json"
local task = require "hypd.task"
local H = dofile("tests/lua/helpers.lua")

local dir = H.tmpdir()

local function hello() return { body = "hello" } end

local function get(port, path)
  return http.request { url = "http://127.0.0.1:" .. port .. (path or "/"), timeout = 5 }
end

-- waits until cond() or 10 s pass
local function eventually(cond, what)
  local deadline = core.mono() + 10
  while not cond() do
    if core.mono() > deadline then
      error("timed out waiting for " .. (type(what) == "function" and what() or what), 2)
    end
    task.sleep(0.02)
  end
end

-- starts a server, checks it answers, and drops it; returns its port
local function start_and_drop(handler)
  local srv = assert(server.start { handler = handler or hello })
  t.eq(get(srv.port).body, "hello")
  return srv.port
end

t.test("a server dropped without stop is collected: its port is free and nothing listens", function()
  local port = start_and_drop()
  t.eq(hserver.listening(), 1, "running until collected")
  local taken, terr = server.start { listen = "127.0.0.1:" .. port, handler = hello }
  t.fails(taken, terr, "LISTEN", "the port is taken while the dropped server runs")
  collectgarbage()
  t.eq(hserver.listening(), nil, "the collector stopped it")
  local again <close> = assert(server.start { listen = "127.0.0.1:" .. port, handler = function()
    return { body = "again" }
  end })
  t.eq(again.port, port)
  t.eq(get(port).body, "again", "a new server took the port")
end)

t.test("local srv <close> = server.start{...} stops it at the end of the scope", function()
  local kept, port
  do
    local srv <close> = assert(server.start { handler = hello })
    kept, port = srv, srv.port
    t.eq(get(port).body, "hello")
    t.eq(hserver.listening(), 1)
  end
  t.eq(hserver.listening(), nil)
  t.eq(kept:running(), false)
  local r, err = get(port)
  t.fails(r, err, "CONNECT", "nothing listens on the port any more")
end)

t.test("a <close> server is stopped when its scope ends by an error too", function()
  local kept
  local ok, err = pcall(function()
    local srv <close> = assert(server.start { handler = hello })
    kept = srv
    error({ code = "BOOM" }, 0)
  end)
  t.eq({ ok, err.code }, { false, "BOOM" })
  t.eq(kept:running(), false)
  t.eq(hserver.listening(), nil)
end)

t.test("stop twice is fine; after stop the handle's methods raise CLOSED naming it", function()
  local srv = assert(server.start { handler = hello })
  local port, handle = srv.port, srv.handle
  t.eq(srv:requests(), 0)
  t.eq(srv:stop(), true)
  t.eq(srv:stop(), false, "the second stop does nothing")
  t.eq(srv:close(), false, "close is stop")
  t.eq({ srv.port, srv.handle, srv:running(), srv:websockets() }, { port, handle, false, 0 },
    "its fields stay readable")
  local err = t.raises(function() return srv:requests() end, "CLOSED")
  t.eq(err.message, "hypd.server " .. handle .. " (port " .. port .. ") is stopped")
  err = t.raises(function() return srv._h:port() end, "CLOSED")
  t.like(err.message, "^hypd%.server " .. handle .. " ")
  t.eq(tostring(srv), "hypd.server " .. handle .. " (stopped)")
  t.eq(hserver.respond(handle, 1, 200, {}, ""), false, "a stopped server answers nothing")
end)

t.test("a request in flight keeps a dropped server alive until it is answered", function()
  local release = task.signal()
  local entered = false
  local port = (function()
    local srv = assert(server.start { handler = function()
      entered = true
      release:wait()
      return { body = "late" }
    end })
    return srv.port
  end)()
  local client = task.spawn(get, nil, port, "/")
  eventually(function() return entered end, "the handler to start")
  collectgarbage()
  t.eq(hserver.listening(), 1, "the request's task holds its server")
  release:fire()
  local ok, r = client:wait()
  t.eq({ ok, r and r.status, r and r.body }, { true, 200, "late" })
  collectgarbage()
  t.eq(hserver.listening(), nil, "collected once the request was answered")
end)

-- prints the status of GET /q on port argv[1], or 000 when the connection breaks
local CLIENT = [[
import sys, urllib.error, urllib.request
try:
    print(urllib.request.urlopen("http://127.0.0.1:%s/q" % sys.argv[1], timeout=10).status)
except urllib.error.HTTPError as e:
    print(e.code)
except Exception:
    print("000")
]]

t.test("a server collected with a request queued for the engine answers 503 or drops it; the handler never runs", function()
  local ran = false
  local out = dir .. "/queued.txt"
  os.remove(out)
  local port = (function()
    local srv = assert(server.start { handler = function() ran = true return { body = "no" } end })
    os.execute(string.format("python3 -c %s %d >%s 2>/dev/null &", H.quote(CLIENT), srv.port, H.quote(out)))
    -- the engine does not poll while this task runs: the request waits in
    -- the server (parked) and in the engine's queue
    local deadline = core.mono() + 10
    while srv:requests() == 0 and core.mono() < deadline do os.execute("sleep 0.01") end
    t.eq(srv:requests(), 1, "the request arrived")
    return srv.port
  end)()
  collectgarbage()
  t.eq(hserver.listening(), nil)
  eventually(function() return (H.read(out) or ""):find("\n") end, "the client's answer")
  local code = H.read(out):match("%d+")
  t.ok(code == "503" or code == "000", "503 or a dropped connection, got " .. tostring(code))
  task.sleep(0.05) -- the engine takes the queued request and finds no server
  t.eq(ran, false)
  t.eq(core.inflight(true), 0)
  t.eq(get(port) == nil, true, "the port is closed")
end)

-- a streaming server's handler: "hello\n", then a byte every 20 ms (or
-- 4 KiB every 2 ms on /flood) until the client leaves; seen.left counts
-- the writers that saw it go
local function streamer(seen)
  seen.left = 0
  return function(req)
    return { stream = function(w)
      if not w:write("hello\n") then return end
      if req.path == "/flood" then
        local block = ("x"):rep(4096)
        while w:write(block) do task.sleep(0.002) end
      else
        while w:write(".") do task.sleep(0.02) end
      end
      seen.left = seen.left + 1
    end }
  end
end

-- opens a stream, reads its first line and drops it
local function open_and_drop(base)
  local s = assert(http.stream { url = base .. "/forever" })
  t.like(s:read(), "^hello\n")
  t.eq(task.stats().http, 1)
  t.eq(task.stats().streams, 1)
end

t.test("a stream dropped mid-transfer is cancelled when collected: nothing stays in flight", function()
  local seen = {}
  local srv <close> = assert(server.start { handler = streamer(seen) })
  local base = "http://127.0.0.1:" .. srv.port
  open_and_drop(base)
  collectgarbage()
  t.eq(task.stats().http, 0, "the collected handle cancelled the transfer")
  t.eq(core.inflight(true), 0)
  eventually(function() return task.stats().streams == 0 end, "the scheduler to forget the stream")
  eventually(function() return seen.left == 1 end, "the server's writer to see the client go")
end)

t.test("a <close> stream is cancelled at the end of its scope; its handle then raises CLOSED", function()
  local seen = {}
  local srv <close> = assert(server.start { handler = streamer(seen) })
  local base = "http://127.0.0.1:" .. srv.port
  local kept
  do
    local s <close> = assert(http.stream { url = base .. "/forever" })
    kept = s
    t.like(s:read(), "^hello\n")
    t.eq(task.stats().http, 1)
  end
  t.eq(task.stats().http, 0)
  t.eq(task.stats().streams, 0)
  local chunk, err = kept:read()
  t.fails(chunk, err, "CANCELLED")
  kept:close() -- twice is fine
  t.eq(kept._h:isopen(), false)
  local e = t.raises(function() return kept._h:pause(true) end, "CLOSED")
  t.eq(e.message, "hypd.http_stream " .. kept._id .. " is closed")
  t.like(tostring(kept), "%(closed%)")
  eventually(function() return seen.left == 1 end, "the server's writer to see the client go")
end)

-- 10 streams read as fast as bytes come, and 20 more opened and dropped
-- at once, each round of 5 followed by full collections inside the
-- engine's poll (core.gc_in_poll: finalizers then run inside httpc_poll's
-- callbacks, where a cancel has to wait for the poll to return); the
-- readers' streams are closed on return
local function flood(base)
  local readers, keep = {}, {}
  for i = 1, 10 do
    keep[i] = assert(http.stream { url = base .. "/flood" })
    readers[i] = task.spawn(function(s) while s:read() do end end, nil, keep[i])
  end
  for i = 1, 20 do
    assert(assert(http.stream { url = base .. "/flood" }):read())
    if i % 5 == 0 then
      core.gc_in_poll(3)
      task.sleep(0.05)
    end
  end
  for i = 1, 10 do
    keep[i]:close()
    readers[i]:wait()
  end
end

t.test("streams dropped while bytes flow are cancelled, also when collected inside the engine's poll", function()
  local seen = {}
  local srv <close> = assert(server.start { handler = streamer(seen), threads = 2 })
  local ok, err = pcall(flood, "http://127.0.0.1:" .. srv.port)
  core.gc_in_poll(0)
  collectgarbage()
  if not ok then error(err, 0) end
  t.eq(task.stats().http, 0)
  eventually(function() return task.stats().streams == 0 end, "the scheduler to forget every stream")
  eventually(function() return seen.left == 30 end, function()
    return "every writer to see its client go (" .. seen.left .. " did)"
  end)
end)

-- opens a stream whose server sends "hello\n", then "bye\n" 50 ms later
-- and ends; reads the first line and drops it
local function drop_before_end(base)
  assert(assert(http.stream { url = base .. "/short" }):read())
end

t.test("a stream collected in the poll that delivers its last bytes is cancelled once, after it", function()
  local srv <close> = assert(server.start { handler = function()
    return { stream = function(w)
      if w:write("hello\n") then
        task.sleep(0.05)
        w:write("bye\n")
      end
    end }
  end })
  local base = "http://127.0.0.1:" .. srv.port
  -- its finalizer runs inside the callback that hands over "bye\n" just
  -- before the transfer's end: cancelling there at once freed the
  -- transfer twice (caught by ASan)
  for _ = 1, 10 do
    drop_before_end(base)
    core.gc_in_poll(1)
    task.sleep(0.1)
  end
  core.gc_in_poll(0)
  collectgarbage()
  t.eq(task.stats().http, 0)
  eventually(function() return task.stats().streams == 0 end, "the scheduler to forget every stream")
end)

-- a websocket handler's observations, and the client's
local function ws_session(handler)
  local got = {}
  local srv <close> = assert(server.start { handler = function()
    return { websocket = function(ws) handler(ws, got) end }
  end })
  local out = dir .. "/ws-" .. tostring(math.random(1 << 30)) .. ".json"
  os.execute(string.format("python3 tests/tools/ws_client.py %d hold %s >%s.log 2>&1 &", srv.port,
    H.quote(out), H.quote(out)))
  eventually(function() return H.read(out) ~= nil end, "the client's report")
  eventually(function() return got.done end, "the handler's end")
  local r = json.decode(H.read(out))
  eventually(function() return srv:websockets() == 0 end, "the websocket's end")
  return got, r
end

t.test("a websocket closed twice is fine; after close send is false, recv CLOSED, the handle raises", function()
  local got, r = ws_session(function(ws, got)
    got.msg = ws:recv()
    got.first = ws:close(4000, "once")
    got.second = ws:close()
    got.third = ws:close(1000, "again")
    got.send = { ws:send("x"), ws:send_binary("y"), ws:ping() }
    local msg, err = ws:recv()
    got.recv = { msg, err and err.code, err and err.status }
    local ok, e = pcall(ws._h.send, ws._h, "x")
    got.raw = { ok, e.code, e.message }
    got.id, got.server = ws.id, ws.server
    got.done = true
  end)
  t.eq(got.msg, "hold")
  t.eq({ got.first, got.second, got.third }, { true, false, false })
  t.eq(got.send, { false, false, false })
  t.eq(got.recv, { nil, "CLOSED", 4000 })
  t.eq(got.raw, { false, "CLOSED", "hypd.websocket " .. got.id .. " of server " .. got.server .. " is closed" })
  t.eq(r.close, { 4000, "once" }, "the client saw one close, the first")
end)

t.test("local w <close> = ws closes the websocket at the end of the scope", function()
  local got, r = ws_session(function(ws, got)
    do
      local w <close> = ws
      got.msg = w:recv()
      w:send("bye")
    end
    got.after = ws:send("late")
    got.done = true
  end)
  t.eq(got.msg, "hold")
  t.eq(got.after, false)
  t.eq(r.frames, { { 1, "bye" } })
  t.eq(r.close, { 1000, "" })
end)

t.cleanup(function() os.execute("rm -rf " .. H.quote(dir)) end)
