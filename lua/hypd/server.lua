-- hypd.server: the HTTP server on the engine. Server threads only queue
-- requests; each request runs as its own task here.
--
--   local port = server.start { listen = "127.0.0.1:0", handler = function(req)
--     return { status = 200, headers = { ["content-type"] = "text/plain" }, body = "hi" }
--   end }
--
-- req = { id, method, path (raw, percent-encoded), query (raw, no '?'),
-- headers (lower-case names), body, peer }. A handler that raises answers
-- 500 with the error code (never a traceback); the error goes to the log.
local core = require "hypd.core"
local errors = require "hypd.errors"
local log = require "hypd.log"
local sched = require "hypd._sched"

local M = {}

local function answer(req, resp)
  local headers = resp.headers or {}
  local ok = core.server_respond(req.id, resp.status or 200, headers, resp.body or "")
  if not ok then log.debug("server", "%s %s: the client left before the answer", req.method, req.path) end
end

-- start{listen = "ADDR:PORT", handler = fn, max_body = bytes} -> port | nil, err
function M.start(opts)
  local addr, port = tostring(opts.listen or "127.0.0.1:0"):match("^([%d.]+):(%d+)$")
  if not addr then
    return errors.fail("VALIDATION", "listen must be IPv4-ADDRESS:PORT, e.g. 127.0.0.1:4566", { field = "listen" })
  end
  local handler = opts.handler
  local bound, err = core.server_start(addr, tonumber(port), opts.max_body)
  if not bound then return nil, err end
  sched.serve_request = function(req)
    sched.spawn(function()
      local ok, resp = pcall(handler, req)
      if not ok then
        local e = resp
        if type(e) ~= "table" then e = errors.new("INTERNAL", tostring(e)) end
        if not getmetatable(e) then setmetatable(e, errors.mt) end
        log.error("server", "%s %s failed: %s", req.method, req.path, tostring(e))
        resp = { status = 500, headers = { ["content-type"] = "text/plain" },
                 body = "internal error: " .. tostring(e.code) .. "\n" }
      end
      answer(req, resp)
    end, { name = "request " .. req.method .. " " .. req.path, daemon = true })
  end
  return bound
end

function M.stop()
  core.server_stop()
end

function M.port() return core.listening() end

return M
