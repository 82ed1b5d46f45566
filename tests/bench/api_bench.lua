-- make bench: the front doors. Tool calls per second through the registry
-- in-process, REST and MCP over HTTP (loopback, bearer token), from 1 and
-- 20 concurrent clients; and operations started per second.
local t = require "hypd.tap"
local auth = require "hypd.api.auth"
local core = require "hypd.core"
local http = require "hypd.http"
local json = require "hypd.json"
local op = require "hypd.tool.operations"
local serve = require "hypd.api.gateway"
local server = require "hypd.http_server"
local task = require "hypd.task"
local dispatch = require "hypd.tool.dispatch"
local tool = require "hypd.tool.registry"
require("hypd.tool.loader").load()

local function report(name, value, unit)
  print(string.format("# bench %-40s %12.1f %s", name .. ":", value, unit))
end

local srv = assert(server.start { listen = "127.0.0.1:0", handler = serve.handle })
local base = "http://127.0.0.1:" .. srv.port
local token = assert(auth.create { name = "bench", scope = "admin" })
local H = { authorization = "Bearer " .. token, ["content-type"] = "application/json" }

local function rate(n, conc, fn)
  local start = core.mono()
  local tasks = {}
  for c = 1, conc do
    tasks[c] = task.spawn(function()
      for i = 1, n // conc do assert(fn(i), "a call failed") end
    end)
  end
  for _, x in ipairs(tasks) do assert(x:wait()) end
  return n / (core.mono() - start)
end

t.test("tool calls: in-process, REST, MCP over HTTP", function()
  local who = { name = "bench", scope = "admin", front = "bench" }
  report("dispatch.call operation_list (in-process)", rate(5000, 1, function()
    return dispatch.call("operation_list", { limit = 5 }, who)
  end), "calls/s")
  for _, conc in ipairs { 1, 20 } do
    report(string.format("REST POST /tools/operation_list (%d)", conc), rate(2000, conc, function()
      local r = http.request { method = "POST", url = base .. "/api/v1/tools/operation_list", headers = H,
        body = '{"limit":5}' }
      return r and r.status == 200
    end), "req/s")
  end
  local init = assert(http.request { method = "POST", url = base .. "/mcp", headers = {
    authorization = H.authorization, ["content-type"] = "application/json",
    accept = "application/json, text/event-stream" }, body = json.encode { jsonrpc = "2.0", id = 1,
    method = "initialize", params = { protocolVersion = "2025-11-25", capabilities = json.object(),
      clientInfo = { name = "bench", version = "1" } } } })
  local sid = init.headers["mcp-session-id"]
  local mh = { authorization = H.authorization, ["content-type"] = "application/json",
    accept = "application/json, text/event-stream", ["mcp-session-id"] = sid,
    ["mcp-protocol-version"] = "2025-11-25" }
  for _, conc in ipairs { 1, 20 } do
    report(string.format("MCP tools/call operation_list (%d)", conc), rate(2000, conc, function(i)
      local r = http.request { method = "POST", url = base .. "/mcp", headers = mh, body = json.encode {
        jsonrpc = "2.0", id = i + 10, method = "tools/call", params = { name = "operation_list",
          arguments = { limit = 5 } } } }
      return r and r.status == 200
    end), "req/s")
  end
end)

t.test("operations started and finished", function()
  tool.define { name = "job_bench_noop", summary = "bench", kind = "mutating", status_tool = "operation_get",
    description = "A one-step operation that does nothing, to time the operation machinery itself.",
    params = { n = { type = "integer", required = true } }, target = function(p) return "bench/" .. p.n end,
    steps = { { name = "noop", run = function(ctx) ctx:phase("nothing") end } } }
  local who = { name = "bench", scope = "admin", front = "bench" }
  local ids = {}
  local start = core.mono()
  for i = 1, 500 do ids[i] = assert(dispatch.call("job_bench_noop", { n = i }, who)).operation_id end
  local done = 0
  for _, id in ipairs(ids) do if op.wait(id).status == "succeeded" then done = done + 1 end end
  report("operations (record, 1 step, finish)", 500 / (core.mono() - start), "ops/s")
  t.eq(done, 500)
  srv:stop()
end)
