-- hypd.http_server: HTTP and HTTPS servers on the engine. Server threads only
-- queue requests; each request runs as its own task here. Any number of
-- servers may run at once, each with its own handler.
--
--   local srv = assert(server.start { listen = "127.0.0.1:0", handler = function(req)
--     return { status = 200, headers = { ["content-type"] = "text/plain" }, body = "hi" }
--   end })
--   -- srv.port (the bound port), srv.handle, srv:stop()
--
-- srv is a handle (liolib's shape): srv:stop() is idempotent, and a server
-- nobody references any more is stopped when it is collected, so one
-- dropped without stop does not keep its port and thread. A request's
-- task keeps its server alive while it runs. `local srv <close> =
-- assert(server.start {...})` stops it at the end of the scope.
--
-- tls = { cert_pem = "...", key_pem = "..." } (PEM text; an EC P-256 or RSA
-- key) serves HTTPS.
--
-- Requests whose length or header block is ambiguous (RFC 9112: Content-
-- Length with Transfer-Encoding, two lengths, a coding other than chunked,
-- obs-fold, a NUL or control character, no Host) never reach the handler:
-- the server answers 400 (501 for an unimplemented coding) with a JSON
-- error and closes the connection; a Content-Length over max_body gets 413
-- before the body is read (host/framing.h).
--
-- req = { server (the handle), id, method, path (raw, percent-encoded),
-- query (raw, no '?'), headers (lower-case names), body, peer, websocket
-- (true when the request is a valid WebSocket opening handshake) }.
--
-- A handler returns { status, headers, body }, or streams a body of unknown
-- length (chunked for HTTP/1.1 clients, no Content-Length):
--
--   return { status = 200, headers = {...}, stream = function(w)
--     for line in lines do
--       if not w:write(line) then return end -- the client left
--       task.sleep(1)
--     end
--   end }
--
-- stream(w) runs in the request's task after the status and headers went
-- out. w:write(data) -> true | false: false when the client is gone (stop
-- then) or too slow (more than 8 MiB unsent: the stream is cut); writes do
-- not wait; w:write("") only asks whether the client is still there. The
-- body ends when stream returns; if it raises, the error goes to the log
-- and the connection is cut so the client sees a truncated body.
--
-- Or it takes the connection over as a WebSocket (RFC 6455):
--
--   return { headers = { ["sec-websocket-protocol"] = "chat" }, websocket = function(ws)
--     while true do
--       local msg, kind = ws:recv()       -- kind: "text" or "binary"
--       if not msg then return end        -- kind is the error: CLOSED, TIMEOUT
--       ws:send("echo " .. msg)
--     end
--   end }
--
-- The server answers 101 (with the handler's headers), or 400 when the
-- request is no WebSocket handshake, 426 when its version is not 13; then
-- websocket(ws) does not run. It runs in the request's task:
--   ws:recv([timeout]) -> data, "text" | "binary" | nil, err: err.code
--     CLOSED (err.status the close code: the client's, 1005 when it sent
--     none, the server's own, 1001 when the server stops, 1006 when the
--     connection dropped) or TIMEOUT (err.again = true: the websocket is
--     still open). Messages that arrived before the close are read first.
--   ws:send(text) -> true | false (closed or gone); text must be UTF-8
--   ws:send_binary(bytes), ws:ping([data]) -> true | false
--   ws:close([code [, reason]]) -> true | false (already closed); 1000 by
--     default; recv then answers CLOSED. Idempotent; after it sends
--     return false. `local w <close> = ws` closes at the end of the scope
--     (1011 when it ends by an error).
--   ws.req (the request), ws.protocol (the Sec-WebSocket-Protocol chosen)
-- When websocket returns the server closes with 1000 (1011 if it raised).
-- Sends never wait: frames queue in C (more than 8 MiB unsent drops the
-- client). The client's frames are checked in C: unmasked or malformed
-- -> close 1002, a message over websocket.max_message -> 1009, text that
-- is not UTF-8 -> 1007; pings are answered, fragments reassembled. The
-- server pings every websocket.ping seconds (30) and drops a client silent
-- for websocket.idle seconds (90). More than 16 MiB of messages left
-- unread closes the websocket with 1008.
--
-- A handler that raises answers 500 with the error code (never a
-- traceback); the error goes to the log.
local core = require "hypd.core"
local errors = require "hypd.errors"
local hserver = require "hypd._server"
local log = require "hypd.log"
local sched = require "hypd._sched"

local M = {}

-- handle -> srv while it runs; weak, so that a server nobody holds is
-- collected (its C handle's __gc stops it)
local servers = setmetatable({}, { __mode = "v" })
local sockets = {} -- "handle:id" -> ws, from the 101 until C's closed event
local nsockets = {} -- handle -> websockets in sockets

local Server = {}
Server.__index = Server

-- srv:stop() -> true | false (it had stopped): stops listening and closes
-- the connections still open (their clients see a reset, also those whose
-- request still waits for the engine, which then never reaches a handler;
-- stream writers get false; websockets close with 1001). Idempotent;
-- srv:close() and a <close> variable do the same.
function Server:stop()
  servers[self.handle] = nil
  return self._h:stop()
end

Server.close = Server.stop
Server.__close = Server.stop

-- srv:running() -> true until stopped
function Server:running() return self._h:running() end

-- srv:requests() -> requests received and not yet answered; raises CLOSED
-- naming the server once it is stopped
function Server:requests() return self._h:requests() end

-- srv:websockets() -> websockets not yet fully closed (their last event,
-- CLOSED, has not reached the engine; after srv:stop() it is on its way)
function Server:websockets()
  return nsockets[self.handle] or 0
end

function Server:__tostring() return tostring(self._h) end

local function as_error(e)
  if type(e) ~= "table" then e = errors.new("INTERNAL", tostring(e)) end
  if not getmetatable(e) then setmetatable(e, errors.mt) end
  return e
end

local Writer = {}
Writer.__index = Writer

function Writer:write(data)
  local req = self.req
  return hserver.stream_write(req.server, req.id, data)
end

local function stream(req, resp)
  if not hserver.stream_start(req.server, req.id, resp.status or 200, resp.headers or {}) then
    return log.debug("server", "%s %s: the client left before the stream", req.method, req.path)
  end
  local ok, err = pcall(resp.stream, setmetatable({ req = req }, Writer))
  if not ok then
    log.error("server", "%s %s: the stream failed: %s", req.method, req.path, tostring(as_error(err)))
  end
  hserver.stream_end(req.server, req.id, not ok)
end

local function answer(req, resp)
  local ok = hserver.respond(req.server, req.id, resp.status or 200, resp.headers or {}, resp.body or "")
  if not ok then log.debug("server", "%s %s: the client left before the answer", req.method, req.path) end
end

-- websockets

local UNREAD_MAX = 16 << 20

local WebSocket = {}
WebSocket.__index = WebSocket

local function closed_error(ws)
  return errors.new("CLOSED", "the websocket is closed (" .. ws.closed .. ")",
    { status = ws.closed, reason = ws.reason })
end

function WebSocket:recv(timeout)
  if timeout ~= nil and (type(timeout) ~= "number" or timeout ~= timeout or timeout < 0) then
    error("ws:recv: timeout must be a non-negative number of seconds", 2)
  end
  local deadline = timeout and core.now() + timeout
  while true do
    if self.head <= self.tail then
      local m = self.queue[self.head]
      self.queue[self.head] = nil
      self.head = self.head + 1
      self.unread = self.unread - #m.data
      return m.data, m.binary and "binary" or "text"
    end
    if self.closed then return nil, closed_error(self) end
    if deadline then
      local left = deadline - core.now()
      if left <= 0 or not self.signal:wait(left) and self.head > self.tail and not self.closed then
        return nil, errors.new("TIMEOUT", string.format("no websocket message within %gs", timeout),
          { again = true })
      end
    else
      self.signal:wait() -- no timer: an idle websocket does not hold the virtual clock
    end
  end
end

function WebSocket:send(text)
  if self.closed then return false end
  return self._h:send(text, "text")
end

function WebSocket:send_binary(bytes)
  if self.closed then return false end
  return self._h:send(bytes, "binary")
end

function WebSocket:ping(data)
  if self.closed then return false end
  return self._h:send(data or "", "ping")
end

-- ws:close([code [, reason]]) -> true | false (already closed); idempotent
function WebSocket:close(code, reason)
  if self.closed then return false end
  local ok = self._h:close(code or 1000, reason or "")
  self.closed = code or 1000
  self.signal:fire()
  return ok
end

-- `local ws <close> = ws`: 1000 at the end of the scope, 1011 on an error
function WebSocket:__close(err)
  if err ~= nil then return self:close(1011, "internal error") end
  self:close()
end

function WebSocket:__tostring()
  return "hypd.websocket " .. self.req.path .. (self.closed and " (closed " .. self.closed .. ")" or "")
end

-- a websocket event from C: a message, or the end (always last)
local function ws_event(ev)
  local key = ev.server .. ":" .. ev.ws
  local ws = sockets[key]
  if not ws then return end
  if ev.closed then
    sockets[key] = nil
    nsockets[ev.server] = nsockets[ev.server] - 1
    ws._h:close() -- C is done with it: this only marks the handle closed
    if not ws.closed then ws.closed, ws.reason = ev.closed, ev.reason end
  elseif not ws.closed then
    ws.tail = ws.tail + 1
    ws.queue[ws.tail] = ev
    ws.unread = ws.unread + #ev.data
    if ws.unread > UNREAD_MAX then
      log.warn("server", "websocket %s: more than %d bytes unread; closing it", ws.req.path, UNREAD_MAX)
      ws:close(1008, "too many unread messages")
    end
  end
  ws.signal:fire()
end

local function header(headers, name)
  for k, v in pairs(headers) do
    if type(k) == "string" and k:lower() == name then return v end
  end
end

local function websocket(req, resp)
  local h, status = hserver.ws_accept(req.server, req.id, resp.headers or {})
  if not h then
    if status then
      return log.debug("server", "%s %s: not a websocket handshake (%d)", req.method, req.path, status)
    end
    return log.debug("server", "%s %s: the client left before the upgrade", req.method, req.path)
  end
  local ws = setmetatable({ server = req.server, id = req.id, req = req, _h = h,
    protocol = header(resp.headers or {}, "sec-websocket-protocol"),
    queue = {}, head = 1, tail = 0, unread = 0, signal = sched.signal() }, WebSocket)
  sockets[req.server .. ":" .. req.id] = ws
  nsockets[req.server] = (nsockets[req.server] or 0) + 1
  local fine, err = pcall(resp.websocket, ws)
  if not fine then
    log.error("server", "%s %s: the websocket failed: %s", req.method, req.path, tostring(as_error(err)))
    ws:close(1011, "internal error")
  else
    ws:close(1000)
  end
end

local function serve(srv, req)
  local ok, resp = pcall(srv.handler, req)
  -- answered: a stream or websocket it goes on to serve may sleep for ever
  -- without anyone waiting for its answer (hypd._sched's serving_asleep)
  local me = sched.current()
  if me then me.serving = nil end
  if ok and type(resp) ~= "table" then
    ok, resp = false, errors.new("INTERNAL", "the handler returned " .. type(resp) .. ", not a response table")
  end
  if not ok then
    local e = as_error(resp)
    log.error("server", "%s %s failed: %s", req.method, req.path, tostring(e))
    resp = { status = 500, headers = { ["content-type"] = "text/plain" },
             body = "internal error: " .. tostring(e.code) .. "\n" }
  end
  -- no tail calls: srv stays on this task's stack, so a server dropped by
  -- its owner is not collected while a request of it still runs
  if resp.stream then
    stream(req, resp)
  elseif type(resp.websocket) == "function" then
    websocket(req, resp)
  else
    answer(req, resp)
  end
end

-- every request and websocket event of every server arrives here (from the
-- scheduler)
sched.serve_request = function(req)
  if req.ws then return ws_event(req) end
  local srv = servers[req.server]
  if not srv then -- stopped (or collected) while the request was on its way
    return hserver.respond(req.server, req.id, 503, {}, "")
  end
  sched.spawn(serve, { name = "request " .. req.method .. " " .. req.path, daemon = true, serving = true,
    steady = srv.steady }, srv, req)
end

local function check_tls(tls)
  if tls == nil then return true end
  if type(tls) ~= "table" or type(tls.cert_pem) ~= "string" or type(tls.key_pem) ~= "string" then
    return errors.fail("VALIDATION", "tls must be { cert_pem = PEM, key_pem = PEM }", { field = "tls" })
  end
  return true
end

local function check_ws(ws)
  if ws == nil then return true end
  if type(ws) ~= "table" then
    return errors.fail("VALIDATION", "websocket must be { max_message, ping, idle }", { field = "websocket" })
  end
  for _, k in ipairs { "max_message", "ping", "idle" } do
    local v = ws[k]
    if v ~= nil and (type(v) ~= "number" or v ~= v or v <= 0 or (k == "max_message" and math.type(v) ~= "integer")) then
      return errors.fail("VALIDATION", "websocket." .. k .. " must be a positive number", { field = "websocket." .. k })
    end
  end
  return true
end

-- start{listen = "ADDR:PORT", handler = fn, max_body = bytes, tls = {cert_pem, key_pem},
-- websocket = {max_message = bytes (1 MiB), ping = seconds (30), idle = seconds (90)},
-- threads = n (libmicrohttpd's: 1 polls with poll(), the default; more share
-- the connections with epoll; the engine stays one thread either way),
-- max_per_client = n (open connections from one IP address, default 64 of
-- the 1,000), header_timeout = seconds (a new connection's first headers
-- must have arrived by then, however slowly they trickle; default 15),
-- steady = true (its request tasks are steady: hypd.task, the host's interrupt
-- does not strike them)} -> srv | nil, err
function M.start(opts)
  local addr, port = tostring(opts.listen or "127.0.0.1:0"):match("^([%d.]+):(%d+)$")
  if not addr then
    return errors.fail("VALIDATION", "listen must be IPv4-ADDRESS:PORT, e.g. 127.0.0.1:4566", { field = "listen" })
  end
  if type(opts.handler) ~= "function" then
    return errors.fail("VALIDATION", "handler must be a function", { field = "handler" })
  end
  local ok, err = check_tls(opts.tls)
  if not ok then return nil, err end
  ok, err = check_ws(opts.websocket)
  if not ok then return nil, err end
  local threads = opts.threads
  if threads ~= nil and (math.type(threads) ~= "integer" or threads < 1 or threads > 64) then
    return errors.fail("VALIDATION", "threads must be an integer from 1 to 64", { field = "threads" })
  end
  local per, ht = opts.max_per_client, opts.header_timeout
  if per ~= nil and (math.type(per) ~= "integer" or per < 1 or per > 1000) then
    return errors.fail("VALIDATION", "max_per_client must be an integer from 1 to 1000", { field = "max_per_client" })
  end
  if ht ~= nil and (type(ht) ~= "number" or ht ~= ht or ht <= 0 or ht > 3600) then
    return errors.fail("VALIDATION", "header_timeout must be a number of seconds above 0, at most 3600",
      { field = "header_timeout" })
  end
  local h, bound = hserver.start(addr, tonumber(port), opts.max_body, opts.tls, opts.websocket,
    opts.threads, { max_per_client = per, header_timeout = ht })
  if not h then return nil, bound end
  local srv = setmetatable({ handle = h:handle(), port = bound, handler = opts.handler, _h = h,
    steady = opts.steady }, Server)
  servers[srv.handle] = srv
  return srv
end

return M
