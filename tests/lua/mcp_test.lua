-- MCP: the message handler driven directly (initialize, tools, prompts from
-- skills, resources, logging, JSON-RPC errors), Streamable HTTP on a loopback
-- server (sessions, DNS-rebinding protection, protocol version header, SSE
-- with progress), and stdio in-process and through a hypd server's REST API.
local t = require "hypd.tap"
local core = require "hypd.core"
local http = require "hypd.http"
local json = require "hypd.json"
local mcp = require "hypd.api.mcp"
local mcp_http = require "hypd.api.mcp_http"
local mcp_stdio = require "hypd.api.mcp_stdio"
local op = require "hypd.tool.operations"
local server = require "hypd.http_server"
local task = require "hypd.task"
local dispatch = require "hypd.tool.dispatch"
local tool = require "hypd.tool.registry"
local H = dofile("tests/lua/helpers.lua")
require("hypd.tool.loader").load()

local ADMIN = { name = "tester", scope = "admin", front = "test" }

-- a staged tool of the test's own: two quick steps, deduped by name
tool.define {
  name = "operation_mcp_demo",
  summary = "A demo staged tool for the MCP tests",
  description = "Runs two short steps so the MCP tests have an operation to follow and read.",
  kind = "mutating",
  status_tool = "operation_get",
  target = function(p) return "demo/" .. p.name end,
  params = { name = { type = "string", required = true, pattern = "^[a-z]+$", description = "a name" } },
  steps = {
    { name = "first", run = function(ctx) ctx:progress("half way"); task.sleep(0.05) end },
    { name = "second", run = function() task.sleep(0.05) end },
  },
}

-- a read tool that takes long, for cancellation
tool.define { name = "monitor_slow_demo", summary = "Waits a long time", kind = "read",
  description = "Sleeps for the given seconds so a test can cancel it while it runs.",
  params = { seconds = { type = "number", required = true } },
  run = function(_, p) task.sleep(p.seconds); return { slept = p.seconds } end }

local skills = H.tmpdir()
os.execute("mkdir -p " .. skills .. "/demo-skill " .. skills .. "/broken")
H.write(skills .. "/demo-skill/SKILL.md", "---\nname: demo-skill\ndescription: \"Do the demo: a test skill.\"\n" ..
  "---\n\n# Demo\n\nStep one.\n")
H.write(skills .. "/broken/SKILL.md", "no front matter here\n")
mcp.skills_dir = skills

local function session(send) return mcp.session { caller = ADMIN, send = send } end

local function rpc(s, method, params, id, opts)
  return mcp.handle(s, { jsonrpc = "2.0", id = id or 1, method = method, params = params }, opts)
end

local function find_tool(list, name)
  for _, x in ipairs(list) do if x.name == name then return x end end
end

t.test("initialize answers the client's version when supported, else 2025-11-25, with the capabilities", function()
  local s = session()
  local r = rpc(s, "initialize", { protocolVersion = "2025-06-18", capabilities = {},
    clientInfo = { name = "c", version = "1" } })
  t.eq(r.jsonrpc, "2.0")
  t.eq(r.id, 1)
  t.eq(r.result.protocolVersion, "2025-06-18")
  t.eq(r.result.serverInfo.name, "hypd")
  t.ok(type(r.result.serverInfo.version) == "string", "a version")
  t.eq(r.result.capabilities.tools, { listChanged = true })
  t.eq(r.result.capabilities.resources, { subscribe = false, listChanged = false })
  t.eq(r.result.capabilities.prompts, { listChanged = false })
  t.like(json.encode(r.result.capabilities), '"logging":{}')
  t.like(r.result.instructions, "operation_id")
  t.eq(rpc(s, "initialize", { protocolVersion = "2024-11-05" }).result.protocolVersion, "2025-11-25")
  t.eq(rpc(s, "initialize", { protocolVersion = "2025-11-25" }).result.protocolVersion, "2025-11-25")
  t.eq(mcp.handle(s, { jsonrpc = "2.0", method = "notifications/initialized" }), nil)
  t.eq(json.encode(rpc(s, "ping").result), "{}")
end)

t.test("tools/list: schemas, annotations, and the status tool named in a staged tool's description", function()
  local list = rpc(session(), "tools/list").result.tools
  t.eq(#list, #tool.list())
  local ol = find_tool(list, "operation_list")
  t.eq(ol.inputSchema["$schema"], "https://json-schema.org/draft/2020-12/schema")
  t.eq(ol.inputSchema.type, "object")
  t.eq(ol.inputSchema.properties.limit.maximum, 500)
  t.eq(ol.outputSchema.type, "object")
  t.eq(ol.title, tool.get("operation_list").summary)
  t.eq(ol.annotations, { title = ol.title, readOnlyHint = true, destructiveHint = false, idempotentHint = true,
    openWorldHint = true })
  local demo = find_tool(list, "operation_mcp_demo")
  t.like(demo.description, "Mutating: returns an operation_id at once; call operation_get every " ..
    op.POLL_AFTER .. " s until status is succeeded/failed%.$")
  t.eq(demo.annotations.readOnlyHint, false)
  t.eq(demo.annotations.idempotentHint, true)
  t.eq(demo.outputSchema.anyOf[1].required[1], "operation_id", "an operation is accepted, or (plan) a plan")
  local cancel = find_tool(list, "operation_cancel")
  t.eq(cancel.annotations.idempotentHint, false, "a quick mutation is not idempotent")
  t.ok(not cancel.description:find("Mutating:"), "no status tool, no polling advice")
  -- the whole list encodes, and empty property lists stay objects
  t.ok(not json.encode(list):find('"properties":%[%]'), "no properties: []")
end)

t.test("tools/call operation_list: structuredContent is the result, the text its JSON", function()
  local r = rpc(session(), "tools/call", { name = "operation_list", arguments = { limit = 5 } }).result
  t.eq(r.isError, nil)
  t.ok(json.is_array(r.structuredContent.operations), "operations is an array")
  t.eq(r.content[1].type, "text")
  t.eq(json.decode(r.content[1].text), json.decode(json.encode(r.structuredContent)))
  t.like(r.content[1].text, '^{"operations":%[')
end)

t.test("a validation failure is a result with isError naming the field, never a protocol error", function()
  local r = rpc(session(), "tools/call", { name = "operation_list", arguments = { limit = 0, bogus = 1 } })
  t.eq(r.error, nil)
  local res = r.result
  t.eq(res.isError, true)
  t.like(res.content[1].text, "limit: must be at least 1")
  t.like(res.content[1].text, "bogus: unknown field")
  local e = res.structuredContent.error
  t.eq(e.code, "VALIDATION")
  t.eq({ e.fields[1].field, e.fields[1].rule }, { "bogus", "unknown" })
  t.eq({ e.fields[2].field, e.fields[2].rule }, { "limit", "minimum" })
  -- a read-scope caller may not mutate: FORBIDDEN, as a result too
  local ro = mcp.session { caller = { name = "ro", scope = "read" } }
  local f = rpc(ro, "tools/call", { name = "operation_mcp_demo", arguments = { name = "x" } }).result
  t.eq(f.isError, true)
  t.eq(f.structuredContent.error.code, "FORBIDDEN")
end)

t.test("an unknown tool is -32602, an unknown method -32601, bad params -32602", function()
  local s = session()
  local r = rpc(s, "tools/call", { name = "no_such_tool" })
  t.eq(r.error.code, -32602)
  t.like(r.error.message, "Unknown tool: no_such_tool")
  t.eq(rpc(s, "tools/call", {}).error.code, -32602)
  local m = rpc(s, "completion/complete", {}, "abc")
  t.eq(m.id, "abc")
  t.eq(m.error.code, -32601)
  t.eq(mcp.handle(s, { jsonrpc = "2.0", id = 3, method = "ping", params = json.array { 1, 2 } }).error.code, -32602)
  t.eq(rpc(s, "logging/setLevel", { level = "loud" }).error.code, -32602)
  t.eq(mcp.handle(s, { jsonrpc = "2.0", method = "no/such/notification" }), nil, "notifications get no answer")
end)

t.test("JSON-RPC framing: parse error -32700, batches and malformed messages -32600", function()
  local s = session()
  local p = mcp.handle(s, '{"jsonrpc":"2.0","id":1,"method":')
  t.eq(p.error.code, -32700)
  t.eq(p.id, json.null)
  local b = mcp.handle(s, '[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]')
  t.eq(b.error.code, -32600)
  t.like(b.error.message, "batches")
  t.eq(mcp.handle(s, "[]").error.code, -32600)
  t.eq(mcp.handle(s, "42").error.code, -32600)
  t.eq(mcp.handle(s, '{"id":1,"method":"ping"}').error.code, -32600, "no jsonrpc")
  t.eq(mcp.handle(s, '{"jsonrpc":"2.0","id":{},"method":"ping"}').error.code, -32600, "an object id")
  t.eq(mcp.handle(s, '{"jsonrpc":"2.0","id":5}').error.code, -32600, "no method, no result")
  t.eq(mcp.handle(s, '{"jsonrpc":"2.0","id":5,"result":{}}'), nil, "a response is taken quietly")
  t.eq(json.encode(mcp.handle(s, '{"jsonrpc":"2.0","id":7,"method":"ping"}')), '{"id":7,"jsonrpc":"2.0","result":{}}')
end)

t.test("prompts are the skills: name and description from the front matter, the body as the message", function()
  local s = session()
  local list = rpc(s, "prompts/list").result.prompts
  t.eq(list, { { name = "demo-skill", description = "Do the demo: a test skill." } })
  local g = rpc(s, "prompts/get", { name = "demo-skill" }).result
  t.eq(g.description, "Do the demo: a test skill.")
  t.eq(g.messages, { { role = "user", content = { type = "text", text = "# Demo\n\nStep one.\n" } } })
  t.eq(rpc(s, "prompts/get", { name = "nope" }).error.code, -32602)
  -- the tree's own skills
  mcp.skills_dir = "skills"
  local real = rpc(s, "prompts/list").result.prompts
  mcp.skills_dir = skills
  local names = {}
  for _, p in ipairs(real) do names[p.name] = p.description end
  t.like(names["create-eks"], "cluster_create_eks")
end)

t.test("a staged tool answers with its operation; progress and log notifications follow it", function()
  local sent = {}
  local s = session(function(m) sent[#sent + 1] = m; return true end)
  t.eq(json.encode(rpc(s, "logging/setLevel", { level = "info" }).result), "{}")
  local stop = mcp.watch(s, s.send)
  local r = rpc(s, "tools/call", { name = "operation_mcp_demo", arguments = { name = "alpha" },
    _meta = { progressToken = "tok" } }).result
  t.eq(r.isError, nil)
  local id = r.structuredContent.operation_id
  t.like(id, "^op%-%x+$")
  t.eq(r.structuredContent.status_tool, "operation_get")
  t.eq(op.wait(id).status, "succeeded")
  stop()
  local progress, logs = {}, {}
  for _, m in ipairs(sent) do
    if m.method == "notifications/progress" then progress[#progress + 1] = m.params end
    if m.method == "notifications/message" then logs[#logs + 1] = m.params end
  end
  t.ok(#progress >= 1, "progress while the call was answered")
  t.eq(progress[1].progressToken, "tok")
  t.ok(progress[1].message:find(id, 1, true), "the progress names the operation")
  local kinds = {}
  for _, l in ipairs(logs) do
    t.eq(l.level, "info")
    t.eq(l.logger, "hypd.operations")
    if l.data.operation_id == id then kinds[#kinds + 1] = l.data.event end
  end
  t.eq(kinds[1], "operation.started")
  t.eq(kinds[#kinds], "operation.finished")
  -- at level error, an operation's events are not sent
  rpc(s, "logging/setLevel", { level = "error" })
  local before = #sent
  stop = mcp.watch(s, s.send)
  local r2 = rpc(s, "tools/call", { name = "operation_mcp_demo", arguments = { name = "beta" } }).result
  op.wait(r2.structuredContent.operation_id)
  stop()
  t.eq(#sent, before)
end)

-- a staged tool of the test's own that waits with the kit's poll
tool.define {
  name = "operation_mcp_wait",
  summary = "A demo staged tool that waits for something, for the MCP tests",
  description = "Polls five times, a short pause apart, so the MCP tests can follow a wait's progress.",
  kind = "mutating",
  status_tool = "operation_get",
  target = function(p) return "wait/" .. p.name end,
  params = { name = { type = "string", required = true, pattern = "^[a-z]+$", description = "a name" } },
  steps = {
    { name = "wait", run = function(ctx)
      local n = 0
      ctx:poll { what = "the demo thing to be ready", every = 0.2, check = function()
        n = n + 1
        return n == 5, "the demo thing is Pending: ImagePullBackOff (check " .. n .. ")"
      end }
    end },
  },
}

t.test("an agent following an operation with operation_list_events hears its waits as progress " ..
  "notifications", function()
  local sent = {}
  local s = session(function(m) sent[#sent + 1] = m; return true end)
  local r = rpc(s, "tools/call", { name = "operation_mcp_wait", arguments = { name = "gamma" } }).result
  local id = r.structuredContent.operation_id
  local after, heard = 0, {}
  for _ = 1, 20 do
    local before = #sent
    local l = rpc(s, "tools/call", { name = "operation_list_events", arguments = { operation_id = id, after = after,
      wait_seconds = 10 }, _meta = { progressToken = "follow" } }).result.structuredContent
    for i = before + 1, #sent do
      local m = sent[i]
      if m.method == "notifications/progress" and m.params.progressToken == "follow" then
        heard[#heard + 1] = m.params.message
      end
    end
    after = l.next
    if l.status ~= "running" and #l.events == 0 then break end
  end
  local waits = 0
  for _, m in ipairs(heard) do
    if m:find(id, 1, true) and m:find("ImagePullBackOff", 1, true) then waits = waits + 1 end
  end
  t.ok(waits >= 3, "the wait's notes came as progress of the follower's calls: " .. table.concat(heard, " | "))
  t.eq(op.wait(id).status, "succeeded")
end)

t.test("a read tool reports progress through caller.progress when the client gave a token", function()
  tool.define { name = "operation_mcp_slow", summary = "slow read", kind = "read",
    description = "A read tool of the test that reports progress three times through the caller.",
    run = function(ctx)
      for i = 1, 3 do
        if ctx.caller.progress then ctx.caller.progress(i, 3, "step " .. i) end
      end
      return { done = true }
    end }
  local sent = {}
  local s = session(function(m) sent[#sent + 1] = m; return true end)
  local r = rpc(s, "tools/call", { name = "operation_mcp_slow", _meta = { progressToken = 7 } }).result
  t.eq(r.structuredContent, { done = true })
  t.eq(#sent, 3)
  t.eq(sent[3].params, { progressToken = 7, progress = 3, total = 3, message = "step 3" })
  sent = {}
  rpc(s, "tools/call", { name = "operation_mcp_slow" })
  t.eq(#sent, 0, "no token, no progress")
end)

t.test("resources: the active cluster and recent operations, an operation read as JSON", function()
  local s = session()
  local acc = assert(dispatch.call("operation_mcp_demo", { name = "gamma" }, ADMIN))
  op.wait(acc.operation_id)
  local list = rpc(s, "resources/list").result.resources
  t.eq(list[1].uri, "hypd://cluster/active")
  local found
  for _, x in ipairs(list) do
    if x.uri == "hypd://operations/" .. acc.operation_id then found = x end
  end
  t.ok(found, "the operation is listed")
  t.eq(found.mimeType, "application/json")
  local tpl = rpc(s, "resources/templates/list").result.resourceTemplates
  t.eq(tpl[1].uriTemplate, "hypd://operations/{id}")
  local rd = rpc(s, "resources/read", { uri = found.uri }).result.contents[1]
  t.eq(rd.uri, found.uri)
  local v = json.decode(rd.text)
  t.eq({ v.operation_id, v.tool, v.status }, { acc.operation_id, "operation_mcp_demo", "succeeded" })
  local nf = rpc(s, "resources/read", { uri = "hypd://operations/op-0000000000000000" })
  t.eq(nf.error.code, -32002)
  t.eq(rpc(s, "resources/read", { uri = "file:///etc/passwd" }).error.code, -32002)
  t.eq(rpc(s, "resources/read", {}).error.code, -32602)
end)

-- Streamable HTTP ------------------------------------------------------------------------

local function with_http(fn)
  local srv = assert(server.start { listen = "127.0.0.1:0", handler = function(req)
    if req.path == "/mcp" then return mcp_http.handle(req, ADMIN) end
    return { status = 404, body = "" }
  end })
  local base = "http://127.0.0.1:" .. srv.port .. "/mcp"
  local ok, err = pcall(fn, base)
  srv:stop()
  if not ok then error(err, 0) end
end

local JSON_HEADERS = { ["content-type"] = "application/json", accept = "application/json, text/event-stream" }

local function post(url, body, extra)
  local headers = {}
  for k, v in pairs(JSON_HEADERS) do headers[k] = v end
  for k, v in pairs(extra or {}) do headers[k] = v end
  local resp = assert(http.request { method = "POST", url = url, headers = headers,
    body = type(body) == "string" and body or json.encode(body) })
  return resp, resp.body ~= "" and json.decode(resp.body) or nil
end

local INIT = { jsonrpc = "2.0", id = 1, method = "initialize", params = { protocolVersion = "2025-11-25",
  capabilities = {}, clientInfo = { name = "test", version = "1" } } }

t.test("HTTP: initialize issues a session that later requests must carry", function()
  with_http(function(url)
    local r, body = post(url, INIT)
    t.eq(r.status, 200)
    t.like(r.headers["content-type"], "^application/json")
    t.eq(body.result.protocolVersion, "2025-11-25")
    local sid = r.headers["mcp-session-id"]
    t.like(sid, "^%x+$")
    local n = post(url, { jsonrpc = "2.0", method = "notifications/initialized" },
      { ["mcp-session-id"] = sid, ["mcp-protocol-version"] = "2025-11-25" })
    t.eq(n.status, 202)
    t.eq(n.body, "")
    local l, lb = post(url, { jsonrpc = "2.0", id = 2, method = "tools/list" },
      { ["mcp-session-id"] = sid, ["mcp-protocol-version"] = "2025-11-25" })
    t.eq(l.status, 200)
    t.ok(find_tool(lb.result.tools, "operation_list"), "tools listed")
    local c, cb = post(url, { jsonrpc = "2.0", id = 3, method = "tools/call",
      params = { name = "operation_list", arguments = { limit = 2 } } }, { ["mcp-session-id"] = sid })
    t.eq(c.status, 200, c.body)
    t.ok(json.is_array(cb.result.structuredContent.operations), "structured content")
    local none, nb = post(url, { jsonrpc = "2.0", id = 4, method = "tools/list" })
    t.eq(none.status, 400)
    t.like(nb.error.message, "Mcp%-Session%-Id")
    t.eq(post(url, { jsonrpc = "2.0", id = 5, method = "tools/list" }, { ["mcp-session-id"] = "feed" }).status, 404)
    local d = assert(http.request { method = "DELETE", url = url, headers = { ["mcp-session-id"] = sid } })
    t.eq(d.status, 204)
    t.eq(post(url, { jsonrpc = "2.0", id = 6, method = "ping" }, { ["mcp-session-id"] = sid }).status, 404)
    local g = assert(http.request { method = "GET", url = url, headers = { accept = "application/json" } })
    t.eq(g.status, 405, "GET without Accept: text/event-stream")
    t.like(g.headers.allow, "POST")
    local g2 = assert(http.request { method = "GET", url = url, headers = { accept = "text/event-stream" } })
    t.eq(g2.status, 400, "a GET stream needs a session")
  end)
end)

t.test("HTTP: notifications/cancelled stops a running tool call, which ends at once as CANCELLED", function()
  with_http(function(url)
    local r = post(url, INIT)
    local h = { ["mcp-session-id"] = r.headers["mcp-session-id"], ["mcp-protocol-version"] = "2025-11-25" }
    post(url, { jsonrpc = "2.0", method = "notifications/initialized" }, h)
    local started = require("hypd.core").mono()
    local call = task.spawn(function()
      return post(url, { jsonrpc = "2.0", id = 77, method = "tools/call",
        params = { name = "monitor_slow_demo", arguments = { seconds = 30 } } }, h)
    end)
    task.sleep(0.2)
    local n = post(url, { jsonrpc = "2.0", method = "notifications/cancelled",
      params = { requestId = 77, reason = "the person changed their mind" } }, h)
    t.eq(n.status, 202)
    local ok, resp, body = call:wait()
    t.eq(ok, true)
    t.eq(resp.status, 200)
    t.eq(body.id, 77)
    local e = body.result and body.result.structuredContent.error
    t.eq(body.result and body.result.isError, true)
    t.eq(e and e.code, "CANCELLED")
    t.like(e and e.message, "the person changed their mind")
    t.ok(require("hypd.core").mono() - started < 10, "answered at once, not after 30 s")
  end)
end)

t.test("HTTP: GET opens the session's own SSE stream; operation events arrive on it", function()
  with_http(function(url)
    local r = post(url, INIT)
    local sid = r.headers["mcp-session-id"]
    local h = { ["mcp-session-id"] = sid, ["mcp-protocol-version"] = "2025-11-25" }
    post(url, { jsonrpc = "2.0", method = "notifications/initialized" }, h)
    post(url, { jsonrpc = "2.0", id = 2, method = "logging/setLevel", params = { level = "info" } }, h)
    local s = assert(http.stream { url = url, headers = { accept = "text/event-stream", ["mcp-session-id"] = sid,
      ["mcp-protocol-version"] = "2025-11-25" } })
    local st, hd = s:headers()
    t.eq(st, 200)
    t.like(hd["content-type"], "^text/event%-stream")
    task.sleep(0.05)
    local c = post(url, { jsonrpc = "2.0", id = 3, method = "tools/call",
      params = { name = "operation_mcp_demo", arguments = { name = "stream" } } }, h)
    t.eq(c.status, 200)
    local seen
    for line in s:lines() do
      local data = line:match("^data: (.*)$")
      local m = data and json.decode(data)
      if m and m.method == "notifications/message" and m.params.data.event == "operation.finished" then
        seen = m
        break
      end
    end
    s:close()
    t.ok(seen, "the finished operation arrived on the GET stream")
    task.sleep(0.05)
  end)
end)

t.test("HTTP: a forged Origin or Host is 403; a bad MCP-Protocol-Version 400; garbage 400", function()
  with_http(function(url)
    local r, body = post(url, INIT, { origin = "http://evil.example.com" })
    t.eq(r.status, 403)
    t.eq(body.error.code, -32000)
    t.eq(body.id, json.null)
    t.eq(post(url, INIT, { host = "evil.example.com", origin = "http://evil.example.com" }).status, 403)
    t.eq(post(url, INIT, { host = "evil.example.com:80" }).status, 403)
    t.eq(post(url, INIT, { origin = "null" }).status, 403)
    t.eq(post(url, INIT, { origin = "http://localhost:5173" }).status, 200)
    t.eq(post(url, INIT, { origin = "http://[::1]:8080", host = "[::1]:8080" }).status, 200)
    t.eq(post(url, INIT, { host = "hypd.example.com", authorization = "Bearer x" }).status, 200,
      "an explicit credential is not a rebinding page")
    mcp_http.allowed_origins["https://ui.example.com"] = true
    t.eq(post(url, INIT, { origin = "https://ui.example.com" }).status, 200)
    mcp_http.allowed_origins["https://ui.example.com"] = nil
    local v, vb = post(url, INIT, { ["mcp-protocol-version"] = "1999-01-01" })
    t.eq(v.status, 400)
    t.like(vb.error.message, "MCP%-Protocol%-Version")
    t.eq(post(url, INIT, { ["mcp-protocol-version"] = "2025-03-26" }).status, 200)
    local p, pb = post(url, '{"jsonrpc":"2.0",')
    t.eq(p.status, 400)
    t.eq(pb.error.code, -32700)
    local b, bb = post(url, "[" .. json.encode(INIT) .. "]")
    t.eq(b.status, 400)
    t.eq(bb.error.code, -32600)
    t.eq(post(url, INIT, { ["content-type"] = "text/plain" }).status, 415)
    t.eq(post(url, INIT, { accept = "text/html" }).status, 406)
  end)
end)

t.test("HTTP: a tools/call with a progressToken streams its notifications, then the response, as SSE", function()
  with_http(function(url)
    local r = post(url, INIT)
    local sid = r.headers["mcp-session-id"]
    local resp = assert(http.request { method = "POST", url = url, headers = { ["content-type"] = "application/json",
      accept = "application/json, text/event-stream", ["mcp-session-id"] = sid }, body = json.encode {
        jsonrpc = "2.0", id = 9, method = "tools/call", params = { name = "operation_mcp_slow",
          _meta = { progressToken = "p1" } } } })
    t.eq(resp.status, 200)
    t.like(resp.headers["content-type"], "^text/event%-stream")
    local msgs = {}
    for data in resp.body:gmatch("data: ([^\n]*)\n") do msgs[#msgs + 1] = json.decode(data) end
    t.eq(#msgs, 4)
    t.eq(msgs[1].method, "notifications/progress")
    t.eq(msgs[3].params.progress, 3)
    t.eq(msgs[4].id, 9)
    t.eq(msgs[4].result.structuredContent, { done = true })
  end)
end)

-- stdio ------------------------------------------------------------------------------------

-- stdio(lines [, opts]) -> the decoded lines main wrote
local function stdio(lines, opts)
  local out, i = {}, 0
  opts = opts or {}
  opts.read = function()
    task.checkpoint()
    i = i + 1
    if lines[i] == nil then return nil end
    if type(lines[i]) == "function" then return lines[i]() end
    return type(lines[i]) == "string" and lines[i] or json.encode(lines[i])
  end
  opts.write = function(text)
    t.ok(not text:find("\n"), "one message per line")
    out[#out + 1] = json.decode(text)
    return true
  end
  t.eq(mcp_stdio.main(opts), 0)
  local by = {}
  for _, m in ipairs(out) do if m.id ~= nil then by[m.id] = m end end
  return out, by
end

t.test("stdio in-process: initialize, tools, a call, a tool error, framing errors", function()
  local out, by = stdio {
    INIT,
    { jsonrpc = "2.0", method = "notifications/initialized" },
    { jsonrpc = "2.0", id = 2, method = "tools/list" },
    { jsonrpc = "2.0", id = 3, method = "tools/call", params = { name = "operation_list", arguments = {} } },
    { jsonrpc = "2.0", id = 4, method = "tools/call", params = { name = "operation_list", arguments = { limit = "x" } } },
    "not json",
    "",
    "[]",
  }
  t.eq(by[1].result.serverInfo.name, "hypd")
  t.ok(find_tool(by[2].result.tools, "operation_list"), "tools/list")
  t.ok(json.is_array(by[3].result.structuredContent.operations), "a call")
  t.eq(by[4].result.isError, true)
  t.like(by[4].result.content[1].text, "limit: must be an integer")
  local codes = {}
  for _, m in ipairs(out) do if m.id == json.null then codes[#codes + 1] = m.error.code end end
  t.eq(codes, { -32700, -32600 })
end)

t.test("stdio: a slow read is cancelled by notifications/cancelled and never answered", function()
  tool.define { name = "operation_mcp_sleepy", summary = "sleeps", kind = "read",
    description = "A read tool of the test that sleeps for a minute unless it is cancelled first.",
    run = function() task.sleep(60); return { slept = true } end }
  local started = core.now()
  local out, by = stdio {
    { jsonrpc = "2.0", id = 1, method = "tools/call", params = { name = "operation_mcp_sleepy" } },
    function() task.sleep(0.1); return json.encode { jsonrpc = "2.0", id = 2, method = "ping" } end,
    { jsonrpc = "2.0", method = "notifications/cancelled", params = { requestId = 1 } },
  }
  t.eq(by[1], nil, "no answer for the cancelled request")
  t.eq(json.encode(by[2].result), "{}")
  t.eq(#out, 1)
  t.ok(core.now() - started < 30, "it did not wait for the sleeper")
end)

t.test("stdio --api: tools and operations come from a hypd server's REST API with the token", function()
  local auth = require "hypd.api.auth"
  local serve = require "hypd.api.gateway"
  local token = assert(auth.create { name = "mcp-remote", scope = "admin" })
  local srv = assert(server.start { listen = "127.0.0.1:0", handler = serve.handle })
  local base = "http://127.0.0.1:" .. srv.port
  local acc = assert(dispatch.call("operation_mcp_demo", { name = "delta" }, ADMIN))
  op.wait(acc.operation_id)
  local ok, err = pcall(function()
    local _, by = stdio({
      INIT,
      { jsonrpc = "2.0", id = 2, method = "tools/list" },
      { jsonrpc = "2.0", id = 3, method = "tools/call", params = { name = "operation_get",
        arguments = { operation_id = acc.operation_id } } },
      { jsonrpc = "2.0", id = 4, method = "tools/call", params = { name = "operation_get",
        arguments = { operation_id = "nope" } } },
      { jsonrpc = "2.0", id = 5, method = "tools/call", params = { name = "no_such_tool" } },
      { jsonrpc = "2.0", id = 6, method = "resources/read", params = { uri = "hypd://operations/" .. acc.operation_id } },
      { jsonrpc = "2.0", id = 7, method = "resources/list" },
    }, { api = base .. "/", token = token })
    local demo = find_tool(by[2].result.tools, "operation_mcp_demo")
    t.like(demo.description, "call operation_get every")
    t.eq(demo.annotations.idempotentHint, true)
    t.eq(by[3].result.structuredContent.status, "succeeded")
    t.eq(by[4].result.isError, true)
    t.eq(by[4].result.structuredContent.error.fields[1].field, "operation_id")
    t.eq(by[5].error.code, -32602)
    t.eq(json.decode(by[6].result.contents[1].text).operation_id, acc.operation_id)
    t.ok(#by[7].result.resources >= 2, "resources listed through REST")
    -- a wrong token: every call is an isError naming the problem
    local _, bad = stdio({ { jsonrpc = "2.0", id = 1, method = "tools/call", params = { name = "operation_list" } } },
      { api = base, token = "hypd_wrong" })
    t.eq(bad[1].result.isError, true)
    t.like(bad[1].result.content[1].text, "HYPD_TOKEN")
  end)
  srv:stop()
  if not ok then error(err, 0) end
end)

t.test("stdio --api: an unreachable server is an isError result naming the URL", function()
  local _, by = stdio({ { jsonrpc = "2.0", id = 1, method = "tools/call", params = { name = "operation_list" } },
    { jsonrpc = "2.0", id = 2, method = "tools/list" } }, { api = "http://127.0.0.1:9", token = "x" })
  t.eq(by[1].result.isError, true)
  t.like(by[1].result.content[1].text, "cannot reach hypd at http://127.0.0.1:9")
  t.eq(by[2].error.code, -32603)
end)

t.test("(the skills fixture is removed)", function()
  os.execute("rm -rf " .. skills)
  t.ok(not H.read(skills .. "/demo-skill/SKILL.md"), "gone")
end)
