-- The REST API as a client sees it: the serve router on a real loopback
-- server in this process, AWS answered by the sandbox (also in-process).
-- Refused requests change nothing; every answer is JSON with a stable code.
local t = require "hypd.tap"
local auth = require "hypd.api.auth"
local errors = require "hypd.errors"
local http = require "hypd.http"
local json = require "hypd.json"
local metrics = require "hypd.api.metrics"
local op = require "hypd.tool.operations"
local rest = require "hypd.api.rest"
local serve = require "hypd.api.gateway"
local server = require "hypd.http_server"
local store = require "hypd.store"
local dispatch = require "hypd.tool.dispatch"
local tool = require "hypd.tool.registry"

require("hypd.tool.loader").load()
metrics.install()

local H = dofile("tests/lua/helpers.lua")
local sbx = H.sandbox_here() -- AWS answered by the sandbox, through the standard endpoint variables

local srv = assert(server.start { listen = "127.0.0.1:0", handler = serve.handle, max_body = 2 * rest.MAX_BODY })
local BASE = "http://127.0.0.1:" .. srv.port

local READ = auth.create { name = "reader", scope = "read" }
local OPERATE = auth.create { name = "operator", scope = "operate" }
local ADMIN = auth.create { name = "boss", scope = "admin" }

-- test tools: a staged one, one that calls AWS, one that breaks
tool.define {
  name = "diagnose_rest_staged", summary = "a staged test tool", description = "Two steps that sleep.",
  kind = "mutating", status_tool = "operation_get",
  params = { tag = { type = "string", required = true, pattern = "^[a-z]+$" },
    seconds = { type = "integer", minimum = 0, default = 30 } },
  target = function(p) return "test/" .. p.tag end,
  steps = {
    { name = "first", run = function(ctx) ctx:sleep(ctx.params.seconds) end },
    { name = "second", run = function(ctx) ctx:sleep(ctx.params.seconds) ctx.state.result = { done = true } end },
  },
}
tool.define {
  name = "diagnose_rest_aws", summary = "DescribeCluster", description = "Calls EKS DescribeCluster.",
  kind = "read", aws = { "eks:DescribeCluster" },
  params = { endpoint = { type = "string" }, cluster = { type = "string", required = true } },
  result = { type = "object", properties = { names = { type = "array", items = { type = "string" } } } },
  run = function(_, p)
    local aws = require "hypd.aws"
    local r = aws.call("eks", "DescribeCluster", { name = p.cluster },
      { endpoint_url = p.endpoint, max_attempts = 1 })
    return { names = { r.cluster.name } }
  end,
}
tool.define {
  name = "diagnose_rest_broken", summary = "raises", description = "Raises a Lua error.", kind = "read",
  run = function() error("secret detail at /some/file.lua:12") end,
}

-- req(method, path, {token, body, json, ctype, keep_failures}) -> status, decoded body, response
local function req(method, path, o)
  o = o or {}
  if not o.keep_failures then auth.reset() end
  local headers = {}
  if o.token then headers.authorization = "Bearer " .. o.token end
  local body = o.body
  if o.json ~= nil then body = json.encode(o.json) end
  if body then headers["content-type"] = o.ctype or "application/json" end
  local r = assert(http.request { method = method, url = BASE .. path, headers = headers, body = body })
  return r.status, json.decode(r.body), r
end

local function counts()
  local audits = 0
  for _, e in ipairs(assert(store.events(0, 100000))) do
    if e.kind == "audit" then audits = audits + 1 end
  end
  return { ops = #op.list {}, audits = audits }
end

t.test("GET /api/v1/health needs no token and reports version, tools and running operations", function()
  local status, b = req("GET", "/api/v1/health")
  t.eq(status, 200)
  t.eq(b.ok, true)
  t.like(b.version, "^%d+%.%d+%.%d+")
  t.eq(b.tools, #tool.list())
  t.eq(b.operations_running, 0)
end)

t.test("GET / is the web UI, whose page names the API, the OpenAPI document and MCP without JavaScript, " ..
  "with a strict CSP", function()
  local _, _, r = req("GET", "/")
  t.eq(r.status, 200)
  t.like(r.headers["content-type"], "^text/html")
  t.like(r.headers["content-security-policy"], "default%-src 'none'")
  t.like(r.headers["content-security-policy"], "frame%-ancestors 'none'")
  t.eq(r.headers["x-content-type-options"], "nosniff")
  for _, want in ipairs { "/api/v1", "openapi.json", "/mcp" } do t.ok(r.body:find(want, 1, true), want) end
end)

t.test("no token or a bad one is 401 with WWW-Authenticate: Bearer and a JSON error", function()
  local status, b, r = req("GET", "/api/v1/tools")
  t.eq(status, 401)
  t.like(r.headers["www-authenticate"], "^Bearer")
  t.eq(b.error.code, "UNAUTHORIZED")
  t.like(b.error.message, "a token is required: send it in the Authorization header with the scheme 'Bearer'")
  status, b, r = req("GET", "/api/v1/tools", { token = "hypd_notatoken" })
  t.eq(status, 401)
  t.like(r.headers["www-authenticate"], "^Bearer")
  t.eq(b.error.code, "UNAUTHORIZED")
  t.eq(b.error.message, "the bearer token is not valid (revoked?)", "the message reads as written")
  status = req("POST", "/api/v1/tools/operation_list", { token = READ .. "x", json = {} })
  t.eq(status, 401)
  t.eq((req("GET", "/metrics")), 401, "metrics need a token too")
end)

t.test("repeated failures from one address get 429 with Retry-After; a good token is still served", function()
  auth.reset()
  for _ = 1, auth.MAX_FAILURES do req("GET", "/api/v1/tools", { token = "hypd_guess", keep_failures = true }) end
  local status, b, r = req("GET", "/api/v1/tools", { token = "hypd_guess", keep_failures = true })
  t.eq(status, 429)
  t.eq(b.error.code, "THROTTLED")
  t.like(r.headers["retry-after"], "^%d+$")
  t.eq((req("GET", "/api/v1/tools", { token = ADMIN, keep_failures = true })), 200)
  auth.reset()
  t.eq((req("GET", "/api/v1/tools", { token = ADMIN })), 200)
end)

t.test("a read token may not cancel: 403 FORBIDDEN, and nothing changes", function()
  local acc = assert(dispatch.call("diagnose_rest_staged", { tag = "forbidden", seconds = 3600 },
    { name = "setup", scope = "operate" }))
  local before = counts()
  local status, b = req("POST", "/api/v1/operations/" .. acc.operation_id .. "/cancel", { token = READ })
  t.eq(status, 403)
  t.eq(b.error.code, "FORBIDDEN")
  t.like(b.error.message, "scope operate")
  status, b = req("POST", "/api/v1/tools/operation_cancel", { token = READ,
    json = { operation_id = acc.operation_id } })
  t.eq(status, 403)
  t.eq(b.error.code, "FORBIDDEN")
  t.eq(counts(), before)
  t.eq(op.get(acc.operation_id).status, "running")
  assert(op.cancel(acc.operation_id, { name = "cleanup" }))
end)

t.test("GET /tools lists every tool with kind, scope, summary and its JSON Schemas", function()
  local status, b = req("GET", "/api/v1/tools", { token = READ })
  t.eq(status, 200)
  t.eq(#b.tools, #tool.list())
  local by = {}
  for _, d in ipairs(b.tools) do by[d.name] = d end
  local l = by.operation_list
  t.eq(l.kind, "read")
  t.eq(l.scope, "read")
  t.eq(l.input_schema.type, "object")
  t.eq(l.input_schema.additionalProperties, false)
  t.eq(l.input_schema.properties.limit.type, "integer")
  t.eq(l.output_schema.properties.operations.type, "array")
  local s = by.diagnose_rest_staged
  t.eq(s.staged, true)
  t.eq(s.status_tool, "operation_get")
  t.eq(s.output_schema.anyOf[1].required[1], "operation_id", "an operation is accepted, or (plan) a plan")
  t.eq(s.input_schema.properties.plan.type, "boolean", "every staged tool takes plan")
  t.eq(s.input_schema.required, { "tag" })
  status, b = req("GET", "/api/v1/tools/operation_get", { token = READ })
  t.eq(status, 200)
  t.eq(b.name, "operation_get")
end)

t.test("POST /tools/operation_list answers 200 with the result; an empty list is []", function()
  local status, b, r = req("POST", "/api/v1/tools/operation_list", { token = READ,
    json = { status = "failed", limit = 5 } })
  t.eq(status, 200)
  t.eq(r.headers["content-type"], "application/json")
  t.like(r.body, '"operations":%[%]')
  t.eq(#b.operations, 0)
  status = req("POST", "/api/v1/tools/operation_list", { token = READ, body = "" })
  t.eq(status, 200, "an empty body is no arguments")
end)

t.test("invalid parameters are 400 VALIDATION with each field and rule", function()
  local before = counts()
  local status, b = req("POST", "/api/v1/tools/operation_list", { token = READ,
    json = { limit = 0, status = "sleeping", bogus = true } })
  t.eq(status, 400)
  t.eq(b.error.code, "VALIDATION")
  local rules = {}
  for _, f in ipairs(b.error.fields) do rules[f.field] = f.rule end
  t.eq(rules, { bogus = "unknown", limit = "minimum", status = "enum" })
  status, b = req("POST", "/api/v1/tools/diagnose_rest_staged", { token = OPERATE, json = {} })
  t.eq(status, 400)
  t.eq(b.error.fields[1].field, "tag")
  t.eq(b.error.fields[1].rule, "required")
  t.eq(counts(), before)
end)

t.test("unknown tools, operations and routes are 404; a wrong method is 405 with Allow", function()
  local status, b = req("POST", "/api/v1/tools/no_such_tool", { token = ADMIN, json = {} })
  t.eq(status, 404)
  t.eq(b.error.code, "NOT_FOUND")
  status, b = req("GET", "/api/v1/operations/op-0123456789abcdef", { token = READ })
  t.eq(status, 404)
  t.eq(b.error.code, "NOT_FOUND")
  t.eq((req("GET", "/api/v1/operations/bogus", { token = READ })), 404)
  t.eq((req("GET", "/api/v1/nothing/here", { token = READ })), 404)
  status, b = req("GET", "/elsewhere", { token = READ })
  t.eq(status, 404)
  t.eq(b.error.code, "NOT_FOUND")
  local r
  status, b, r = req("DELETE", "/api/v1/tools", { token = READ })
  t.eq(status, 405)
  t.eq(r.headers.allow, "GET")
  t.eq(b.error.code, "METHOD_NOT_ALLOWED")
end)

t.test("/mcp needs a token; /mcp and /ws are 404 while their modules are absent", function()
  t.eq((req("POST", "/mcp", { json = {} })), 401)
  local has_mcp = pcall(require, "hypd.api.mcp")
  if not has_mcp then t.eq((req("POST", "/mcp", { token = READ, json = {} })), 404) end
  local has_ws = pcall(require, "hypd.api.ws")
  if not has_ws then t.eq((req("GET", "/ws", { token = READ })), 404) end
end)

t.test("malformed JSON and a body that is not an object are 400", function()
  local before = counts()
  local status, b = req("POST", "/api/v1/tools/diagnose_rest_staged", { token = OPERATE, body = '{"tag": ' })
  t.eq(status, 400)
  t.eq(b.error.code, "VALIDATION")
  t.eq(b.error.fields[1].rule, "json")
  status, b = req("POST", "/api/v1/tools/diagnose_rest_staged", { token = OPERATE, body = '["tag"]' })
  t.eq(status, 400)
  t.eq(b.error.fields[1].rule, "type")
  t.eq((req("POST", "/api/v1/tools/diagnose_rest_staged", { token = OPERATE, body = '"x"' })), 400)
  t.eq(counts(), before)
end)

t.test("a body over 1 MiB is 413 and a body that is not JSON is 415; nothing changes", function()
  local before = counts()
  local big = '{"tag": "' .. string.rep("a", rest.MAX_BODY) .. '"}'
  local status, b = req("POST", "/api/v1/tools/diagnose_rest_staged", { token = OPERATE, body = big })
  t.eq(status, 413)
  t.eq(b.error.code, "TOO_LARGE")
  status, b = req("POST", "/api/v1/tools/diagnose_rest_staged", { token = OPERATE,
    body = string.rep("x", 3 * rest.MAX_BODY) })
  t.eq(status, 413, "the server's own cap")
  t.eq(b.error.code, "TOO_LARGE", "in the same JSON error shape")
  status, b = req("POST", "/api/v1/tools/diagnose_rest_staged", { token = OPERATE, body = "tag=abc",
    ctype = "application/x-www-form-urlencoded" })
  t.eq(status, 415)
  t.eq(b.error.code, "UNSUPPORTED_MEDIA_TYPE")
  t.eq((req("POST", "/api/v1/tools/diagnose_rest_staged", { token = OPERATE, body = '{"tag":"abc"}',
    ctype = "text/plain" })), 415)
  t.eq(counts(), before)
end)

t.test("a staged tool answers 202 with the operation; a repeat joins it; it can be followed and cancelled", function()
  local status, a, r = req("POST", "/api/v1/tools/diagnose_rest_staged", { token = OPERATE,
    json = { tag = "accepted", seconds = 600 } })
  t.eq(status, 202)
  t.like(a.operation_id, "^op%-%x+$")
  t.eq(a.status, "running")
  t.eq(a.status_tool, "operation_get")
  t.eq(r.headers.location, "/api/v1/operations/" .. a.operation_id)
  local again
  status, again = req("POST", "/api/v1/tools/diagnose_rest_staged", { token = OPERATE,
    json = { tag = "accepted", seconds = 600 } })
  t.eq(status, 202)
  t.eq(again.operation_id, a.operation_id)
  t.eq(again.existing, true)
  local v
  status, v = req("GET", "/api/v1/operations/" .. a.operation_id, { token = READ })
  t.eq(status, 200)
  t.eq(v.tool, "diagnose_rest_staged")
  t.eq(v.caller, "operator")
  t.eq(v.frontend, "rest")
  local list
  status, list = req("GET", "/api/v1/operations?status=running&tool=diagnose_rest_staged&limit=5", { token = READ })
  t.eq(status, 200)
  t.eq(list.operations[1].operation_id, a.operation_id)
  t.eq((req("GET", "/api/v1/operations?limit=many", { token = READ })), 400)
  status, v = req("POST", "/api/v1/operations/" .. a.operation_id .. "/cancel", { token = OPERATE })
  t.eq(status, 200)
  t.eq(v.status, "cancelled")
  local b
  status, b = req("POST", "/api/v1/operations/" .. a.operation_id .. "/cancel", { token = OPERATE })
  t.eq(status, 409)
  t.eq(b.error.code, "CONFLICT")
end)

t.test("an operation runs to the end and is listed as succeeded", function()
  local status, a = req("POST", "/api/v1/tools/diagnose_rest_staged", { token = ADMIN,
    json = { tag = "finishes", seconds = 5 } })
  t.eq(status, 202)
  t.eq(op.wait(a.operation_id).status, "succeeded")
  local _, v = req("GET", "/api/v1/operations/" .. a.operation_id, { token = READ })
  t.eq(v.status, "succeeded")
  t.eq(v.result, { done = true })
end)

t.test("a mutating call is audit-logged with the token's name and front rest", function()
  req("POST", "/api/v1/tools/diagnose_rest_staged", { token = OPERATE, json = { tag = "audited", seconds = 0 } })
  local found
  for _, e in ipairs(assert(store.events(0, 100000))) do
    if e.kind == "audit" and e.data.tool == "diagnose_rest_staged" and (e.data.params or {}).tag == "audited" then
      found = e.data
    end
  end
  t.ok(found, "an audit event")
  t.eq(found.caller, "operator")
  t.eq(found.front, "rest")
end)

t.test("AWS errors keep their 4xx status and code; an unreachable endpoint is 502", function()
  local status, b = req("POST", "/api/v1/tools/diagnose_rest_aws", { token = READ, json = { cluster = "absent" } })
  t.eq(status, 404)
  t.eq(b.error.code, "ResourceNotFoundException")
  t.eq(b.error.service, "eks")
  t.eq(b.error.operation, "DescribeCluster")
  status, b = req("POST", "/api/v1/tools/diagnose_rest_aws", { token = READ,
    json = { cluster = "absent", endpoint = "http://127.0.0.1:9" } })
  t.eq(status, 502)
  t.eq(b.error.code, "CONNECT")
end)

t.test("a tool that breaks answers 500 with the code only, never a traceback", function()
  local status, b, r = req("POST", "/api/v1/tools/diagnose_rest_broken", { token = READ, json = {} })
  t.eq(status, 500)
  t.eq(b.error.code, "INTERNAL")
  t.ok(not r.body:find("secret detail", 1, true), "no message")
  t.ok(not r.body:find("traceback", 1, true) and not r.body:find("%.lua"), "no traceback")
end)

t.test("openapi.json is OpenAPI 3.1 with a path per tool, bearer security and the error schema", function()
  local status, d = req("GET", "/api/v1/openapi.json", { token = READ })
  t.eq(status, 200)
  t.eq(d.openapi, "3.1.0")
  t.eq(d.info.title, "hypd")
  t.eq(d.servers[1].url, "/api/v1")
  t.eq(d.components.securitySchemes.bearer, d.components.securitySchemes.bearer.type == "http" and
    d.components.securitySchemes.bearer or nil)
  t.eq(d.components.securitySchemes.bearer.scheme, "bearer")
  t.eq(d.security[1].bearer, json.array())
  t.eq(d.paths["/health"].get.security, json.array(), "health needs no token")
  t.eq(d.components.schemas.Error.properties.error.required, { "code", "message" })
  for _, def in ipairs(tool.list()) do
    local p = d.paths["/tools/" .. def.name]
    t.ok(p and p.post, "a path for " .. def.name)
    t.eq(p.post.operationId, def.name)
    local schema = p.post.requestBody.content["application/json"].schema
    t.eq(schema.type, "object")
    t.eq(schema.additionalProperties, false)
    local ok = def.steps and p.post.responses["202"] or p.post.responses["200"]
    t.ok(ok and ok.content["application/json"].schema, def.name .. " has its answer schema")
    t.eq(p.post.responses["400"]["$ref"], "#/components/responses/BadRequest")
    t.eq(p.post.responses["401"]["$ref"], "#/components/responses/Unauthorized")
  end
  t.eq(d.paths["/tools/diagnose_rest_staged"].post.responses["202"].content["application/json"].schema["$ref"],
    "#/components/schemas/Accepted")
  for _, path in ipairs { "/tools", "/operations", "/operations/{id}", "/operations/{id}/cancel", "/openapi.json" } do
    t.ok(d.paths[path], path)
  end
  -- every $ref resolves
  local function walk(v)
    if type(v) ~= "table" then return end
    for k, x in pairs(v) do
      if k == "$ref" then
        local node = d
        for part in x:sub(3):gmatch("[^/]+") do node = node and node[part] end
        t.ok(node, "resolves " .. x)
      else
        walk(x)
      end
    end
  end
  walk(d)
end)

t.test("/metrics is Prometheus text with requests, tool calls, AWS calls, durations and engine tasks", function()
  req("POST", "/api/v1/tools/operation_list", { token = READ, json = {} })
  local status, _, r = req("GET", "/metrics", { token = READ })
  t.eq(status, 200)
  t.like(r.headers["content-type"], "^text/plain; version=0%.0%.4")
  local m = r.body
  t.like(m, '\nhypd_http_requests_total{route="/api/v1/tools/{name}",status="200"} %d+\n')
  t.like(m, '\nhypd_http_requests_total{route="/api/v1/tools",status="401"} %d+\n')
  t.like(m, '\nhypd_tool_calls_total{tool="operation_list",outcome="ok"} %d+\n')
  t.like(m, '\nhypd_tool_calls_total{tool="diagnose_rest_staged",outcome="accepted"} %d+\n')
  t.like(m, '\nhypd_tool_calls_total{tool="operation_cancel",outcome="FORBIDDEN"} %d+\n')
  t.like(m, '\nhypd_aws_calls_total{service="eks",operation="DescribeCluster",outcome="ResourceNotFoundException"} 1\n')
  t.like(m, '\nhypd_aws_calls_total{service="eks",operation="DescribeCluster",outcome="CONNECT"} 1\n')
  t.like(m, '\nhypd_operation_duration_seconds_bucket{tool="diagnose_rest_staged",status="succeeded",le="15"} %d+\n')
  t.like(m, '\nhypd_operation_duration_seconds_count{tool="diagnose_rest_staged",status="cancelled"} %d+\n')
  t.like(m, "\n# TYPE hypd_aws_retries_total counter\n")
  t.like(m, "\nhypd_engine_tasks %d+\n")
  t.like(m, "\n# TYPE hypd_operation_duration_seconds histogram\n")
  for line in m:gmatch("[^\n]+") do
    t.ok(line:match("^# ") or line:match('^[a-z_]+{[a-z_]+=".*"} [%d.e+-]+$') or line:match("^[a-z_]+ [%d.e+-]+$"),
      "an exposition line: " .. line)
  end
end)

t.test("error bodies are {error = {code, message, fields}} for every refused request", function()
  for _, c in ipairs {
    { "GET", "/api/v1/tools" },
    { "POST", "/api/v1/tools/no_such", ADMIN },
    { "POST", "/api/v1/tools/operation_list", READ, { limit = -1 } },
  } do
    local _, b = req(c[1], c[2], { token = c[3], json = c[4] or (c[1] == "POST" and {} or nil) })
    t.ok(type(b.error) == "table" and type(b.error.code) == "string" and type(b.error.message) == "string",
      c[1] .. " " .. c[2])
  end
  local _, b = req("POST", "/api/v1/tools/operation_list", { token = READ, json = { limit = -1 } })
  t.eq(b.error.fields[1], { field = "limit", rule = "minimum", message = b.error.fields[1].message })
  t.ok(errors ~= nil)
end)

-- the servers are handles: they run while referenced (this holds them to
-- the end of the file) and stop here
t.cleanup(function()
  assert(srv:stop() and sbx:stop(), "both servers were still running")
end)
