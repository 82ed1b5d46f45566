-- The HTTP server: requests from libmicrohttpd threads become tasks on the
-- engine; answers go back through suspended connections.
local t = require "hypd.tap"
local server = require "hypd.http_server"
local hserver = require "hypd._server"
local http = require "hypd.http"
local task = require "hypd.task"
local H = dofile("tests/lua/helpers.lua")

local function with_server(handler, fn, opts)
  local srv = assert(server.start { listen = "127.0.0.1:0", handler = handler, max_body = opts and opts.max_body })
  local ok, err = pcall(fn, "http://127.0.0.1:" .. srv.port, srv)
  srv:stop()
  if not ok then error(err, 0) end
end

t.test("200 concurrent requests each get their own answer, with the raw path, query and body", function()
  with_server(function(req)
    task.sleep(0.01)
    return { status = 201, headers = { ["x-a"] = "b" },
             body = req.method .. " " .. req.path .. "?" .. req.query .. " " .. req.body }
  end, function(base)
    local tasks = {}
    for i = 1, 200 do
      tasks[i] = task.spawn(function()
        return http.request { method = "POST", url = base .. "/a%20b/" .. i .. "?x=1&y", body = "hi" }
      end)
    end
    local good = 0
    for i, x in ipairs(tasks) do
      local _, r = x:wait()
      if r and r.status == 201 and r.body == "POST /a%20b/" .. i .. "?x=1&y hi" and r.headers["x-a"] == "b" then
        good = good + 1
      end
    end
    t.eq(good, 200)
  end)
end)

t.test("with epoll and a pool of 3 threads, 200 concurrent requests and streams get their own answers", function()
  local srv = assert(server.start { threads = 3, handler = function(req)
    task.sleep(0.01)
    if req.path:find("^/s") then
      return { stream = function(w) w:write("s ") task.sleep(0.01) w:write(req.path) end }
    end
    return { body = req.path .. " " .. req.body }
  end })
  local ok, err = pcall(function()
    local base = "http://127.0.0.1:" .. srv.port
    local tasks = {}
    for i = 1, 200 do
      tasks[i] = task.spawn(function()
        if i % 2 == 0 then return http.request { url = base .. "/s" .. i } end
        return http.request { method = "POST", url = base .. "/r" .. i, body = "b" }
      end)
    end
    local good = 0
    for i, x in ipairs(tasks) do
      local _, r = x:wait()
      local want = i % 2 == 0 and "s /s" .. i or "/r" .. i .. " b"
      if r and r.status == 200 and r.body == want then good = good + 1 end
    end
    t.eq(good, 200)
  end)
  srv:stop()
  if not ok then error(err, 0) end
end)

t.test("request headers arrive lower-cased", function()
  with_server(function(req) return { body = req.headers["x-custom-thing"] or "none" } end, function(base)
    t.eq(http.request { url = base .. "/", headers = { ["X-Custom-Thing"] = "v 1" } }.body, "v 1")
  end)
end)

t.test("a handler that raises answers 500 with the error code and no traceback", function()
  with_server(function() error({ code = "BOOM", message = "secret detail" }) end, function(base)
    local r = http.request { url = base .. "/" }
    t.eq(r.status, 500)
    t.eq(r.body, "internal error: BOOM\n")
  end)
end)

t.test("a body over the cap gets 413 without reaching the handler", function()
  local reached = false
  with_server(function() reached = true return { body = "x" } end, function(base)
    local r = http.request { method = "PUT", url = base .. "/", body = string.rep("x", 5000) }
    t.eq(r.status, 413)
  end, { max_body = 1000 })
  t.eq(reached, false)
end)

t.test("a HEAD answer declares the length of the body it does not send", function()
  with_server(function(req)
    if req.method == "HEAD" then return { headers = { ["content-length"] = "12345" } } end
    return { body = "x" }
  end, function(base)
    local r = http.request { method = "HEAD", url = base .. "/obj" }
    t.eq({ r.status, r.headers["content-length"], r.body }, { 200, "12345", "" })
  end)
end)


t.test("a bad listen address, a missing handler and bad TLS material are refused", function()
  local srv, err = server.start { listen = "localhost", handler = function() end }
  t.fails(srv, err, "VALIDATION")
  srv, err = server.start { listen = "127.0.0.1:0" }
  t.fails(srv, err, "VALIDATION")
  srv, err = server.start { handler = function() end, tls = { cert_pem = "x" } }
  t.fails(srv, err, "VALIDATION")
  srv, err = server.start { handler = function() end, tls = { cert_pem = "not pem", key_pem = "not pem" } }
  t.fails(srv, err, "LISTEN")
end)

t.test("two servers run at once, each with its own handler; stopping one leaves the other answering", function()
  local a = assert(server.start { handler = function(req) return { body = "a " .. req.server } end })
  local b = assert(server.start { handler = function(req) return { body = "b " .. req.server } end })
  local ok, err = pcall(function()
    t.ok(a.handle ~= b.handle and a.port ~= b.port, "distinct handles and ports")
    t.eq(hserver.listening(), 2)
    local tasks = {}
    for i = 1, 20 do
      local srv = i % 2 == 0 and a or b
      tasks[i] = task.spawn(function() return http.request { url = "http://127.0.0.1:" .. srv.port .. "/" }.body end)
    end
    for i, x in ipairs(tasks) do
      local _, body = x:wait()
      t.eq(body, i % 2 == 0 and "a " .. a.handle or "b " .. b.handle)
    end
    a:stop()
    t.eq(hserver.listening(), 1)
    local gone, gone_err = http.request { url = "http://127.0.0.1:" .. a.port .. "/", timeout = 5 }
    t.fails(gone, gone_err, "CONNECT")
    t.eq(http.request { url = "http://127.0.0.1:" .. b.port .. "/" }.body, "b " .. b.handle)
    t.eq(hserver.respond(a.handle, 1, 200, {}, ""), false, "a stopped server answers nothing")
  end)
  a:stop()
  b:stop()
  if not ok then error(err, 0) end
  t.eq(hserver.listening(), nil)
end)

t.test("a TLS server answers over https, with an EC or an RSA key, and streams", function()
  local dir = H.tmpdir()
  local _, key, pem = H.self_signed(dir)
  local keys = { ec = { pem, H.read(key) } }
  local rc = H.sh("openssl req -x509 -newkey rsa:2048 -nodes -keyout " .. dir .. "/rsa.key -out " ..
    dir .. "/rsa.pem -days 2 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1")
  keys.rsa = { H.read(dir .. "/rsa.pem"), H.read(dir .. "/rsa.key") }
  os.execute("rm -rf " .. H.quote(dir))
  t.eq(rc, 0, "openssl made an RSA certificate")
  for kind, k in pairs(keys) do
    local srv = assert(server.start { tls = { cert_pem = k[1], key_pem = k[2] }, handler = function(req)
      if req.path == "/s" then
        return { stream = function(w) w:write("s1 ") task.sleep(0.01) w:write(kind) end }
      end
      return { body = kind .. " " .. req.path }
    end })
    local r, err = http.request { url = "https://127.0.0.1:" .. srv.port .. "/x", ca_pem = k[1] }
    local s, serr = http.request { url = "https://127.0.0.1:" .. srv.port .. "/s", ca_pem = k[1] }
    srv:stop()
    t.eq(err, nil, kind)
    t.eq({ r.status, r.body }, { 200, kind .. " /x" })
    t.eq(serr, nil, kind .. " stream")
    t.eq({ s.status, s.body }, { 200, "s1 " .. kind })
  end
end)

t.test("a streamed answer arrives whole, chunked, without a content-length", function()
  local wrote = {}
  with_server(function()
    return { status = 201, headers = { ["x-s"] = "1" }, stream = function(w)
      for _, part in ipairs { "one ", "two ", "three" } do
        wrote[#wrote + 1] = w:write(part)
        task.sleep(0.02)
      end
    end }
  end, function(base)
    local r = assert(http.request { url = base .. "/s" })
    t.eq({ r.status, r.body, r.headers["x-s"], r.headers["content-length"], r.headers["transfer-encoding"] },
         { 201, "one two three", "1", nil, "chunked" })
  end)
  t.eq(wrote, { true, true, true })
end)

t.test("a streaming writer sees false within a few writes once its client disconnects", function()
  local probe, failed_at, after = nil, nil, 0
  local left, done = false, task.signal()
  with_server(function()
    return { stream = function(w)
      probe = w:write("")
      for i = 1, 1000 do
        if not w:write(string.rep("x", 1024)) then failed_at = i break end
        if left then after = after + 1 end
        task.sleep(0.01)
      end
      done:fire()
    end }
  end, function(base)
    local r, err = http.request { url = base .. "/", timeout = 0.2 }
    t.fails(r, err, "TIMEOUT")
    left = true
    if not failed_at then done:wait(5) end
  end)
  t.eq(probe, true, "the empty write finds the client there")
  t.ok(failed_at, "a write returned false")
  t.ok(after <= 5, "false came " .. after .. " writes after the client left")
end)

t.test("a stream that raises cuts the connection instead of ending the body", function()
  with_server(function()
    return { stream = function(w) w:write("partial") task.sleep(0.02) error("boom") end }
  end, function(base)
    local r, err = http.request { url = base .. "/" }
    t.fails(r, err)
  end)
end)

t.test("a write past 8 MiB unsent cuts the stream (a slow client)", function()
  local wrote
  with_server(function()
    return { stream = function(w) wrote = w:write(string.rep("x", (8 << 20) + 1)) end }
  end, function(base)
    local r, err = http.request { url = base .. "/" }
    t.fails(r, err)
  end)
  t.eq(wrote, false)
end)

t.test("a handler that returns no table answers 500", function()
  with_server(function() return nil end, function(base)
    t.eq(http.request { url = base .. "/" }.status, 500)
  end)
end)

t.test("stopping a server cuts its open streams and unanswered requests", function()
  local stopped_at
  local srv = assert(server.start { handler = function(req)
    if req.path == "/slow" then task.sleep(0.3) return { body = "late" } end
    return { stream = function(w)
      w:write("x")
      for i = 1, 100 do
        task.sleep(0.02)
        if not w:write("") then stopped_at = i return end
      end
    end }
  end })
  local base = "http://127.0.0.1:" .. srv.port
  local a = task.spawn(function() return http.request { url = base .. "/s", timeout = 5 } end)
  local b = task.spawn(function() return http.request { url = base .. "/slow", timeout = 5 } end)
  task.sleep(0.1)
  srv:stop()
  local _, ra, ea = a:wait()
  local _, rb, eb = b:wait()
  t.fails(ra, ea)
  t.ok(rb == nil or rb.status == 503, "the unanswered request is refused: " .. tostring(rb and rb.status or eb))
  task.sleep(0.05)
  t.ok(stopped_at, "the stream's writer saw false")
end)
