-- A read-scope token may plan (issue 22): a staged tool called with
-- plan = true changes nothing, so REST and MCP (Streamable HTTP, with the
-- token) answer a read token's plan of cluster_create; the same call
-- without plan is refused FORBIDDEN, naming the scope applying needs. The
-- plan is still unable to mutate: the sandbox's audit of what AWS saw is
-- unchanged and no operation is recorded, and a hostile staged playbook
-- whose steps try to mutate while planning (an AWS CreateVpc, hypd's
-- active cluster, a nested mutating tool) is refused at each, with a read
-- token as with any other.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
local auth = require "hypd.api.auth"
local clusters = require "hypd.clusters"
local config = require "hypd.config"
local http = require "hypd.http"
local json = require "hypd.json"
local serve = require "hypd.api.gateway"
local server = require "hypd.http_server"
local store = require "hypd.store"
local tools = require "hypd.tool.loader"

local sbx = H.sandbox_here() -- kept: the server stops when collected
local dir = H.tmpdir()
H.write(dir .. "/plan_grabber.lua", [[
return tool {
  name = "cluster_plan_grabber", summary = "Tries to mutate while it plans", kind = "mutating",
  description = "Each step tries one mutation, planned or not; the test plans it with a read token.",
  aws = { "ec2:CreateVpc", "ec2:DescribeVpcs" }, status_tool = "operation_get",
  params = { how = { type = "string", enum = { "aws", "active", "tool" }, required = true } },
  target = function(p) return "grabber/" .. p.how end,
  steps = {
    { name = "grab", run = function(ctx)
      local how = ctx.params.how
      if how == "aws" then hypd.aws.call("ec2", "CreateVpc", { CidrBlock = "10.88.0.0/16" }) end
      if how == "active" then hypd.clusters.set_active { name = "hypd-grabbed", region = "us-west-2" } end
      if how == "tool" then hypd.tools.call("cluster_switch", { cluster = "hypd-grabbed" }) end
    end },
  },
}]])
config.playbooks_dir = dir
tools.load()
local loaded = tools.reload { name = "plan-admin", scope = "admin", front = "test" }
assert(#loaded.errors == 0, json.encode(loaded.errors))

local srv = assert(server.start { listen = "127.0.0.1:0", handler = serve.handle })
local BASE = "http://127.0.0.1:" .. srv.port
local READ = assert(auth.create { name = "plan-reader", scope = "read" })
t.cleanup(function() srv:stop(); os.execute("rm -rf " .. H.quote(dir)) end)

local DECISIONS = { cluster_tag = "readplan", instance_type = "ml.g5.12xlarge", instance_count = 2,
  availability_zone = "us-west-2a" }
local function with(extra)
  local out = {}
  for k, v in pairs(DECISIONS) do out[k] = v end
  for k, v in pairs(extra or {}) do out[k] = v end
  return out
end

local function sandbox_mutations() return H.sandbox_mutations(sbx.port) end

local function operations() return #(store.op_list { limit = 100000 } or {}) end

local function post(path, body, headers)
  local h = { ["content-type"] = "application/json", authorization = "Bearer " .. READ }
  for k, v in pairs(headers or {}) do h[k] = v end
  local resp = assert(http.request { method = "POST", url = BASE .. path, headers = h, body = json.encode(body) })
  return resp.status, json.decode(resp.body), resp
end

-- unchanged(what, fn): fn's results, after checking that AWS saw no mutation and no operation was recorded
local function unchanged(what, fn)
  local aws_before, ops_before = sandbox_mutations(), operations()
  local r = table.pack(fn())
  t.eq(sandbox_mutations(), aws_before, what .. ": the sandbox saw no mutation")
  t.eq(operations(), ops_before, what .. ": no operation was recorded")
  return table.unpack(r, 1, r.n)
end

t.test("REST: a read token's plan of cluster_create answers the plan; its apply is FORBIDDEN", function()
  local st, body = unchanged("the plan", function() return post("/api/v1/tools/cluster_create", with { plan = true }) end)
  t.eq(st, 200, "the plan answers: " .. json.encode(body))
  t.ok((body.create or 0) > 0 and #(body.plan or {}) > 0, "it lists what it would create: " .. tostring(body.create))
  local named = {}
  for _, r in ipairs(body.plan or {}) do named[r.type .. " " .. r.name] = r.action end
  t.eq(named["eks:cluster hypd-readplan"], "create", "the EKS cluster is planned")
  st, body = unchanged("the apply", function() return post("/api/v1/tools/cluster_create", with()) end)
  t.eq({ st, body.error and body.error.code }, { 403, "FORBIDDEN" })
  t.like(body.error.message, "needs a token with scope operate")
  t.like(body.error.message, "it may still plan")
end)

-- the headers of a Streamable HTTP request of session sid
local function mcp_headers(sid)
  return { accept = "application/json, text/event-stream", ["mcp-protocol-version"] = "2025-11-25",
    ["mcp-session-id"] = sid }
end

t.test("MCP over HTTP: a read token's tools/call of cluster_create with plan answers; without plan isError FORBIDDEN",
  function()
    local st, _, resp = post("/mcp", { jsonrpc = "2.0", id = 1, method = "initialize", params = {
      protocolVersion = "2025-11-25", capabilities = json.object(), clientInfo = { name = "plan", version = "1" } } },
      mcp_headers(nil))
    t.eq(st, 200)
    local sid = resp.headers["mcp-session-id"]
    t.ok(sid, "a session")
    post("/mcp", { jsonrpc = "2.0", method = "notifications/initialized" }, mcp_headers(sid))
    local body
    st, body = unchanged("the MCP plan", function()
      return post("/mcp", { jsonrpc = "2.0", id = 2, method = "tools/call",
        params = { name = "cluster_create", arguments = with { plan = true } } }, mcp_headers(sid))
    end)
    t.eq(st, 200)
    local r = body.result or {}
    t.ok(not r.isError, "the plan is no error: " .. json.encode(r.content))
    t.ok(((r.structuredContent or {}).create or 0) > 0, "the plan's counts are its structured content")
    st, body = unchanged("the MCP apply", function()
      return post("/mcp", { jsonrpc = "2.0", id = 3, method = "tools/call",
        params = { name = "cluster_create", arguments = with() } }, mcp_headers(sid))
    end)
    t.eq(st, 200, "a tool's refusal is a result, not an HTTP error")
    r = body.result or {}
    t.eq(r.isError, true)
    t.eq(((r.structuredContent or {}).error or {}).code, "FORBIDDEN")
  end)

t.test("a plan still cannot mutate with a read token: AWS, hypd's active cluster and a nested mutating tool refused",
  function()
    local want = { aws = { 403, "GUARDRAIL" }, active = { 403, "GUARDRAIL" }, tool = { 403, "FORBIDDEN" } }
    for _, how in ipairs { "aws", "active", "tool" } do
      local st, body = unchanged("the " .. how .. " grab", function()
        return post("/api/v1/tools/cluster_plan_grabber", { how = how, plan = true })
      end)
      t.eq({ st, body.error and body.error.code }, want[how], how .. ": " .. json.encode(body))
    end
    local st, body = post("/api/v1/tools/cluster_plan_grabber", { how = "aws" })
    t.eq({ st, body.error and body.error.code }, { 403, "FORBIDDEN" }, "its apply needs operate")
    t.ok((clusters.active() or {}).name ~= "hypd-grabbed", "the active cluster is not the grabbed one")
  end)

