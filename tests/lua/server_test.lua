-- The HTTP server: requests from libmicrohttpd threads become tasks on the
-- engine; answers go back through suspended connections.
local t = require "hypd.tap"
local server = require "hypd.server"
local http = require "hypd.http"
local task = require "hypd.task"

local function with_server(handler, fn, opts)
  local port = assert(server.start { listen = "127.0.0.1:0", handler = handler, max_body = opts and opts.max_body })
  local ok, err = pcall(fn, "http://127.0.0.1:" .. port)
  server.stop()
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

t.test("a second server in the same host is refused", function()
  with_server(function() return {} end, function()
    local port, err = server.start { listen = "127.0.0.1:0", handler = function() end }
    t.fails(port, err, "STATE")
  end)
end)

t.test("a bad listen address is refused", function()
  local port, err = server.start { listen = "localhost", handler = function() end }
  t.fails(port, err, "VALIDATION")
end)
