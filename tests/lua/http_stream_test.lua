-- Streaming HTTP responses: http.stream hands the body over as it arrives
-- (Kubernetes watches, followed logs), ends cleanly or with the transport's
-- error, and never outlives its reader.
local t = require "hypd.tap"
local core = require "hypd.core"
local task = require "hypd.task"
local http = require "hypd.http"
local H = dofile("tests/lua/helpers.lua")

-- A chunked HTTP/1.1 server with paths that send slowly, drop the
-- connection, or send a lot; it prints "PORT n PID p" and exits after 120 s.
local SERVER = [==[
import http.server, os, socket, sys, threading, time

def chunk(w, data):
    w.write(b"%x\r\n%s\r\n" % (len(data), data))

class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def start(self, status=200):
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("X-Stream", "yes")
        self.end_headers()
    def end(self):
        self.wfile.write(b"0\r\n\r\n")
    def do_GET(self):
        p = self.path
        if p == "/gate":          # line 1 now, line 2 only 300 ms later
            self.start(); chunk(self.wfile, b"line 1\n")
            time.sleep(0.3); chunk(self.wfile, b"line 2\n"); self.end()
        elif p == "/drop":        # one chunk, then the connection breaks
            self.start(); chunk(self.wfile, b"partial\n"); time.sleep(0.05)
            self.connection.shutdown(socket.SHUT_RDWR); self.close_connection = True
        elif p == "/forever":     # one line, then silence
            self.start(); chunk(self.wfile, b"hello\n"); time.sleep(30)
        elif p == "/quiet":       # headers, then silence
            self.start(); time.sleep(30)
        elif p == "/split":       # 300 lines cut into 7-byte chunks
            self.start()
            data = b"".join(b"item %d %s\n" % (i, b"x" * (i % 13)) for i in range(300))
            for i in range(0, len(data), 7):
                chunk(self.wfile, data[i:i + 7])
                if i % 700 == 0: time.sleep(0.002)
            self.end()
        elif p.startswith("/big/"):  # n bytes as fast as the client takes them
            n = int(p[5:]); self.start()
            block = bytes(range(256)) * 64
            while n > 0:
                k = min(n, len(block)); chunk(self.wfile, block[:k]); n -= k
            self.end()
        elif p == "/status/404":
            self.start(404); chunk(self.wfile, b"nope"); self.end()
        else:
            self.start(400); self.end()

class S(http.server.ThreadingHTTPServer):
    daemon_threads = True

s = S(("127.0.0.1", 0), H)
print("PORT %d PID %d" % (s.server_address[1], os.getpid()), flush=True)
threading.Timer(120, lambda: os._exit(0)).start()
s.serve_forever()
]==]

local dir = H.tmpdir()
local base, stop_server = H.spawn_server("python3 " .. H.write(dir .. "/stream_server.py", SERVER))

-- waits (briefly) until every cancelled transfer has been reaped
local function settle()
  local deadline = core.mono() + 2
  while task.stats().http > 0 and core.mono() < deadline do task.sleep(0.01) end
  return task.stats().http
end

t.test("the first chunk arrives while the server still sleeps before the second", function()
  local started = core.mono()
  local s = assert(http.stream { url = base .. "/gate" })
  local status, headers = s:headers()
  t.eq({ status, headers["x-stream"] }, { 200, "yes" })
  t.eq({ s.status, s.response_headers["content-type"] }, { 200, "text/plain" })
  t.eq(s:read(), "line 1\n")
  local first = core.mono() - started
  t.ok(first < 0.25, "line 1 came before the server's 300 ms pause ended (" .. first .. " s)")
  t.eq(s:read(), "line 2\n")
  t.ok(core.mono() - started >= 0.25, "line 2 waited for the server")
  t.eq({ s:read() }, {}, "a clean end is nil, nil")
  t.eq({ s:read() }, {}, "and stays so")
  s:close()
end)

t.test("a dropped connection ends the stream with RESET after the bytes that came", function()
  local s = assert(http.stream { url = base .. "/drop" })
  t.eq(s:read(), "partial\n")
  local chunk, err = s:read()
  t.fails(chunk, err, nil)
  t.ok(err.code == "RESET" or err.code == "HTTP", "RESET or HTTP, got " .. tostring(err.code))
  t.eq(s.err, err)
  local again, err2 = s:read()
  t.eq({ again, err2 and err2.code }, { nil, err.code }, "every later read fails the same way")
  s:close()
end)

t.test("lines() yields whole lines whatever the chunk boundaries", function()
  local s <close> = assert(http.stream { url = base .. "/split" })
  local got = {}
  for line in s:lines() do got[#got + 1] = line end
  t.eq(s.err, nil)
  t.eq(#got, 300)
  local bad
  for i, line in ipairs(got) do
    if line ~= string.format("item %d %s", i - 1, ("x"):rep((i - 1) % 13)) then bad = bad or i end
  end
  t.eq(bad, nil, "every line intact and in order")
end)

t.test("close() cancels the transfer and leaves nothing in flight", function()
  local s = assert(http.stream { url = base .. "/forever" })
  t.eq(s:read(), "hello\n")
  t.eq(task.stats().http, 1)
  s:close()
  s:close() -- idempotent
  local chunk, err = s:read()
  t.fails(chunk, err, "CANCELLED")
  t.eq(settle(), 0)
  t.eq(core.inflight(), 0)
end)

t.test("a read with a timeout returns TIMEOUT with again = true and the stream stays open", function()
  local s = assert(http.stream { url = base .. "/forever" })
  t.eq(s:read(5), "hello\n")
  local started = core.mono()
  local chunk, err = s:read(0.1)
  t.fails(chunk, err, "TIMEOUT")
  t.eq(err.again, true)
  t.ok(core.mono() - started >= 0.09, "it waited the timeout")
  t.eq(s.err, nil, "the stream did not fail")
  t.fails(s:read(0))
  s:close()
  t.eq(settle(), 0)
end)

t.test("cancelling the task that reads a stream cancels its transfer", function()
  local x = task.spawn(function()
    local s = assert(http.stream { url = base .. "/forever" })
    s:read()
    return s:read() -- waits for the server's silence to end
  end)
  task.sleep(0.1)
  t.eq(task.stats().http, 1)
  x:cancel()
  local ok, err = x:wait()
  t.eq({ ok, err.code }, { false, "CANCELLED" })
  t.eq(settle(), 0)
end)

t.test("a task that returns without closing its stream does not leak the transfer", function()
  local x = task.spawn(function()
    local s = assert(http.stream { url = base .. "/forever" })
    return s:read(), s
  end)
  local ok, first, s = x:wait()
  t.eq({ ok, first }, { true, "hello\n" })
  t.fails(s:read()) -- CANCELLED: its owner ended
  t.eq(settle(), 0)
end)

t.test("an HTTP error status streams like any other response", function()
  local s <close> = assert(http.stream { url = base .. "/status/404" })
  t.eq(s:headers(), 404)
  t.eq(s:read(), "nope")
  t.eq({ s:read() }, {})
end)

t.test("a stream that cannot connect fails headers() and read() with CONNECT", function()
  local s <close> = assert(http.stream { url = "http://127.0.0.1:1/" })
  t.fails(s:headers())
  local chunk, err = s:read()
  t.fails(chunk, err, "CONNECT")
end)

t.test("headers() returns as soon as the headers arrive, before any body byte", function()
  local s = assert(http.stream { url = base .. "/quiet" })
  local started = core.mono()
  t.eq(s:headers(), 200)
  t.ok(core.mono() - started < 5, "no wait for a body")
  t.fails(s:read(0.05))
  s:close()
  t.eq(settle(), 0)
end)

t.test("headers() still answers when the headers came before it was called", function()
  local s = assert(http.stream { url = base .. "/quiet" })
  for _ = 1, 100 do
    if s.status then break end
    task.sleep(0.02)
  end
  t.eq(s.status, 200, "the headers arrived while nobody asked")
  t.eq(s:headers(), 200, "the method is not hidden by what arrived")
  s:close()
  t.eq(settle(), 0)
end)

t.test("idle_timeout fails a stream whose server falls silent", function()
  local s <close> = assert(http.stream { url = base .. "/forever", idle_timeout = 1 })
  local started = core.mono()
  t.eq(s:read(), "hello\n")
  local chunk, err = s:read(15)
  t.fails(chunk, err, "TIMEOUT")
  t.eq(err.again, nil, "the transfer's failure, not the read's")
  t.ok(core.mono() - started < 10, "within a few seconds")
end)

t.test("a reader that falls behind pauses the sender; every byte still arrives in order", function()
  local n = 4 << 20
  local s <close> = assert(http.stream { url = base .. "/big/" .. n, max_body = 64 << 10 })
  t.eq(s:headers(), 200)
  task.sleep(0.3) -- read nothing while the server could send everything
  t.ok(s._buffered <= 2 * (64 << 10) + (64 << 10), "buffered " .. s._buffered .. " bytes, not " .. n)
  local got = {}
  while true do
    local chunk, err = s:read()
    if not chunk then t.eq(err, nil); break end
    got[#got + 1] = chunk
  end
  local block = {}
  for i = 0, 255 do block[#block + 1] = string.char(i) end
  local body = table.concat(got)
  t.eq(#body, n)
  local good = body == table.concat(block):rep(64 * (n // 16384))
  t.ok(good, "the bytes are the server's, in order")
end)

t.test("bad stream fields are refused before anything is sent", function()
  t.fails(http.stream { url = base, colour = "red" })
  local s, err = http.stream { url = base, idle_timeout = -1 }
  t.fails(s, err, "VALIDATION")
  t.eq(err.field, "idle_timeout")
  t.fails(http.stream { url = "ftp://example/" })
  t.fails(http.stream "http://x/")
end)

t.cleanup(function()
  stop_server()
  os.execute("rm -rf " .. H.quote(dir))
end)
