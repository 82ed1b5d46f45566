-- hypd.server: HTTP and HTTPS servers on the engine. Server threads only
-- queue requests; each request runs as its own task here. Any number of
-- servers may run at once, each with its own handler.
--
--   local srv = assert(server.start { listen = "127.0.0.1:0", handler = function(req)
--     return { status = 200, headers = { ["content-type"] = "text/plain" }, body = "hi" }
--   end })
--   -- srv.port (the bound port), srv.handle, srv:stop()
--
-- tls = { cert_pem = "...", key_pem = "..." } (PEM text; an EC P-256 or RSA
-- key) serves HTTPS.
--
-- req = { server (the handle), id, method, path (raw, percent-encoded),
-- query (raw, no '?'), headers (lower-case names), body, peer }.
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
-- A handler that raises answers 500 with the error code (never a
-- traceback); the error goes to the log.
local core = require "hypd.core"
local errors = require "hypd.errors"
local log = require "hypd.log"
local sched = require "hypd._sched"

local M = {}

local servers = {} -- handle -> srv (running servers)

local Server = {}
Server.__index = Server

-- srv:stop(): stops listening and closes the connections still open
-- (their clients see a reset; stream writers get false). Idempotent.
function Server:stop()
  if servers[self.handle] ~= self then return end
  servers[self.handle] = nil
  core.server_stop(self.handle)
end

local function as_error(e)
  if type(e) ~= "table" then e = errors.new("INTERNAL", tostring(e)) end
  if not getmetatable(e) then setmetatable(e, errors.mt) end
  return e
end

local Writer = {}
Writer.__index = Writer

function Writer:write(data)
  local req = self.req
  return core.server_stream_write(req.server, req.id, data)
end

local function stream(req, resp)
  if not core.server_stream_start(req.server, req.id, resp.status or 200, resp.headers or {}) then
    return log.debug("server", "%s %s: the client left before the stream", req.method, req.path)
  end
  local ok, err = pcall(resp.stream, setmetatable({ req = req }, Writer))
  if not ok then
    log.error("server", "%s %s: the stream failed: %s", req.method, req.path, tostring(as_error(err)))
  end
  core.server_stream_end(req.server, req.id, not ok)
end

local function answer(req, resp)
  local ok = core.server_respond(req.server, req.id, resp.status or 200, resp.headers or {}, resp.body or "")
  if not ok then log.debug("server", "%s %s: the client left before the answer", req.method, req.path) end
end

local function serve(srv, req)
  local ok, resp = pcall(srv.handler, req)
  if ok and type(resp) ~= "table" then
    ok, resp = false, errors.new("INTERNAL", "the handler returned " .. type(resp) .. ", not a response table")
  end
  if not ok then
    local e = as_error(resp)
    log.error("server", "%s %s failed: %s", req.method, req.path, tostring(e))
    resp = { status = 500, headers = { ["content-type"] = "text/plain" },
             body = "internal error: " .. tostring(e.code) .. "\n" }
  end
  if resp.stream then return stream(req, resp) end
  answer(req, resp)
end

-- every request of every server arrives here (from the scheduler)
sched.serve_request = function(req)
  local srv = servers[req.server]
  if not srv then -- stopped while the request was on its way
    return core.server_respond(req.server, req.id, 503, {}, "")
  end
  sched.spawn(serve, { name = "request " .. req.method .. " " .. req.path, daemon = true }, srv, req)
end

local function check_tls(tls)
  if tls == nil then return true end
  if type(tls) ~= "table" or type(tls.cert_pem) ~= "string" or type(tls.key_pem) ~= "string" then
    return errors.fail("VALIDATION", "tls must be { cert_pem = PEM, key_pem = PEM }", { field = "tls" })
  end
  return true
end

-- start{listen = "ADDR:PORT", handler = fn, max_body = bytes, tls = {cert_pem, key_pem}}
-- -> srv | nil, err
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
  local handle, bound = core.server_start(addr, tonumber(port), opts.max_body, opts.tls)
  if not handle then return nil, bound end
  local srv = setmetatable({ handle = handle, port = bound, handler = opts.handler }, Server)
  servers[handle] = srv
  return srv
end

return M
