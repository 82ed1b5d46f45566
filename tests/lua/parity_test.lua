-- One backend, four doors: for every tool in the registry, the same calls
-- through REST, MCP over HTTP, MCP over stdio in-process and MCP over stdio
-- with --api give the same results and the same errors (validation naming
-- each field and rule, NOT_FOUND, AWS errors). Table-driven over the whole
-- registry as `hypd serve` lists it; AWS is a sandbox process. The
-- registry includes an operator's playbook tool (examples/playbooks:
-- subnets through hypd.aws, nodes through hypd.k8s), also called with the
-- command line in-process and with --api.
local t = require "hypd.tap"
local http = require "hypd.http"
local json = require "hypd.json"
local merge = require "sandbox.k8s.merge"
local task = require "hypd.task"
local H = dofile("tests/lua/helpers.lua")

local dir = H.tmpdir()
-- one state directory per process that owns one: the sandbox's is dir/state
-- (H.sandbox_process), the server's dir/serve, MCP stdio in-process its own
local state = dir .. "/serve"
local env, pids = {}, {}
local url, token

local function env_prefix()
  local parts = { "env -u AWS_SESSION_TOKEN -u AWS_PROFILE" }
  for k, v in pairs(env) do parts[#parts + 1] = k .. "=" .. H.quote(v) end
  return table.concat(parts, " ") .. " HYPD_CLOCK=virtual HYPD_STATE=" .. H.quote(state)
end

-- valid calls per tool (the rest get only the invalid ones)
local SAMPLES = {
  aws_get_availability_zones = {}, aws_get_instance_types = { gpu_only = true }, cluster_list = {},
  cluster_get_status = {}, cluster_switch = { cluster = "nope" }, operation_list = { limit = 3 },
  operation_get = { operation_id = "op-0000000000000000" },
  operation_cancel = { operation_id = "op-0000000000000000" },
  cluster_get_creation_status = { cluster_tag = "nobody" },
  diagnose_subnets_nodes = { cluster = "par-demo" },
}
local PLAYBOOKS = "examples/playbooks"

local cases = {}

t.test("a sandbox and a hypd serve in front of it", function()
  local sbx
  env, sbx = H.sandbox_process(dir, "--virtual-clock")
  pids[#pids + 1] = sbx
  t.ok(env and env.AWS_ENDPOINT_URL, "the sandbox started")
  -- an EKS cluster with HyperPod nodes, for the playbook tool that lists them
  local rc, _, err = H.with_env(env, dir, "python3 tests/tools/hyperpod_cluster.py par-demo hp-par ml.g5.12xlarge 2")
  t.eq(rc, 0, err)
  local p = io.popen(env_prefix() .. " " .. H.hypd .. " --playbooks " .. PLAYBOOKS .. " serve --listen 127.0.0.1:0 >" .. dir ..
    "/serve.out 2>" .. dir .. "/serve.err & echo $!")
  pids[#pids + 1] = p:read("l")
  p:close()
  for _ = 1, 200 do
    local out = H.read(dir .. "/serve.out") or ""
    url, token = out:match("listening on (%S+)"), out:match("admin token %b(): (%S+)")
    if url and token then break end
    task.sleep(0.05)
  end
  t.ok(url and token, "serve printed its URL and token")
end)

local function rest(name, args)
  local resp = assert(http.request { method = "POST", url = url .. "/api/v1/tools/" .. name,
    headers = { authorization = "Bearer " .. token, ["content-type"] = "application/json" },
    body = json.encode(args) })
  local body = json.decode(resp.body)
  if resp.status >= 400 then return { error = body.error } end
  return { result = body }
end

local session
local function mcp(method, params, id)
  local headers = { authorization = "Bearer " .. token, ["content-type"] = "application/json",
    accept = "application/json, text/event-stream", ["mcp-protocol-version"] = "2025-11-25",
    ["mcp-session-id"] = session }
  local resp = assert(http.request { method = "POST", url = url .. "/mcp", headers = headers,
    body = json.encode { jsonrpc = "2.0", id = id, method = method, params = params } })
  session = session or resp.headers["mcp-session-id"]
  return resp.status, resp.body ~= "" and json.decode(resp.body) or nil
end

local function mcp_call(name, args)
  local _, msg = mcp("tools/call", { name = name, arguments = args }, #cases + 100)
  if msg.error then return { protocol = { code = msg.error.code, message = msg.error.message } } end
  if msg.result.isError then return { error = msg.result.structuredContent.error } end
  return { result = msg.result.structuredContent }
end

local function stdio(extra, env_more)
  local calls, out = dir .. "/calls.json", dir .. "/stdio-" .. tostring(#pids) .. ".json"
  local list = {}
  for i, c in ipairs(cases) do list[i] = { c.tool, c.args } end
  H.write(calls, json.encode(list))
  local rc, _, err = H.sh(env_prefix() .. " " .. (env_more or "") .. " python3 tests/tools/mcp_stdio.py " ..
    calls .. " " .. out .. " -- " .. H.hypd .. " mcp --toolsets all " .. (extra or ""))
  pids[#pids + 1] = "none"
  if rc ~= 0 then error("mcp_stdio.py failed: " .. tostring(err), 0) end
  return json.decode(H.read(out))
end

t.test("the cases: invalid and valid calls for every tool the server lists", function()
  local resp = assert(http.request { url = url .. "/api/v1/tools", headers = { authorization = "Bearer " .. token } })
  local tools = json.decode(resp.body).tools
  t.ok(#tools >= 10, #tools .. " tools")
  for _, tl in ipairs(tools) do
    cases[#cases + 1] = { tool = tl.name, args = { not_a_param = 1 } }
    local props = tl.input_schema and tl.input_schema.properties or {}
    local first = next(props)
    if first then
      local wrong = props[first].type == "string" and 42 or "x"
      cases[#cases + 1] = { tool = tl.name, args = { [first] = wrong } }
    end
    if SAMPLES[tl.name] then cases[#cases + 1] = { tool = tl.name, args = SAMPLES[tl.name], valid = true } end
  end
  t.ok(#cases > 25, #cases .. " cases")
end)

t.test("REST, MCP over HTTP, MCP stdio in-process and MCP stdio --api agree on every case", function()
  local st = mcp("initialize", { protocolVersion = "2025-11-25", capabilities = json.object(),
    clientInfo = { name = "parity", version = "1" } }, 1)
  t.eq(st, 200)
  mcp("notifications/initialized", nil, nil)
  local by_rest, by_http = {}, {}
  for i, c in ipairs(cases) do
    by_rest[i] = rest(c.tool, c.args)
    by_http[i] = mcp_call(c.tool, c.args)
  end
  local by_stdio = stdio("--playbooks " .. PLAYBOOKS, "AWS_REGION=us-west-2 HYPD_STATE=" .. H.quote(dir .. "/stdio"))
  local by_api = stdio("--api " .. url, "HYPD_TOKEN=" .. H.quote(token))
  -- each door makes its own AWS call: only the request id may differ
  for _, set in ipairs { by_rest, by_http, by_stdio, by_api } do
    for _, r in ipairs(set) do if r.error then r.error.request_id = nil end end
  end
  local errors_seen, results_seen = 0, 0
  for i, c in ipairs(cases) do
    local label = c.tool .. " " .. json.encode(c.args)
    t.ok(merge.equal(by_rest[i], by_http[i]), label .. ": REST = MCP HTTP" ..
      (merge.equal(by_rest[i], by_http[i]) and "" or "\n  " .. json.encode(by_rest[i]) .. "\n  " .. json.encode(by_http[i])))
    t.ok(merge.equal(by_rest[i], by_stdio[i]), label .. ": REST = MCP stdio" ..
      (merge.equal(by_rest[i], by_stdio[i]) and "" or "\n  " .. json.encode(by_rest[i]) .. "\n  " .. json.encode(by_stdio[i])))
    t.ok(merge.equal(by_rest[i], by_api[i]), label .. ": REST = MCP stdio --api" ..
      (merge.equal(by_rest[i], by_api[i]) and "" or "\n  " .. json.encode(by_rest[i]) .. "\n  " .. json.encode(by_api[i])))
    if by_rest[i].error then errors_seen = errors_seen + 1 else results_seen = results_seen + 1 end
    if not c.valid then
      t.eq(by_rest[i].error and by_rest[i].error.code, "VALIDATION", label .. " is refused before any work")
    end
  end
  t.ok(results_seen >= 4 and errors_seen > 20, results_seen .. " results, " .. errors_seen .. " errors compared")
end)

t.test("the operator's playbook tool answers the same on the command line, in-process and with --api", function()
  local want = rest("diagnose_subnets_nodes", SAMPLES.diagnose_subnets_nodes).result
  t.eq(#(want and want.nodes or {}), 2, "REST lists the cluster's two nodes")
  t.ok(#(want and want.subnets or {}) >= 2, "and its subnets")
  local rc, out, err = H.sh(env_prefix() .. " HYPD_STATE=" .. H.quote(dir .. "/cli") .. " " .. H.hypd ..
    " --playbooks " .. PLAYBOOKS .. " call diagnose_subnets_nodes cluster=par-demo")
  t.eq(rc, 0, err)
  t.ok(merge.equal(json.decode(out), want), "in-process = REST")
  rc, out, err = H.sh(env_prefix() .. " HYPD_TOKEN=" .. H.quote(token) .. " " .. H.hypd ..
    " call --api " .. url .. " diagnose_subnets_nodes cluster=par-demo")
  t.eq(rc, 0, err)
  t.ok(merge.equal(json.decode(out), want), "--api = REST")
end)

t.test("the example staged playbook plans its node labels, applies them, then plans nothing", function()
  t.ok(rest("cluster_switch", { cluster = "par-demo" }).result, "par-demo is the active cluster")
  local plan = rest("job_label_nodes", { label = "team-a", plan = true }).result or {}
  t.eq(plan.change, 2, "both nodes would change: " .. json.encode(plan))
  local acc = rest("job_label_nodes", { label = "team-a" }).result or {}
  local v
  for _ = 1, 200 do
    local resp = assert(http.request { url = url .. "/api/v1/operations/" .. tostring(acc.operation_id) ..
      "?wait_seconds=2", headers = { authorization = "Bearer " .. token } })
    v = json.decode(resp.body) or {}
    if v.status ~= "running" then break end
  end
  t.eq(v.status, "succeeded", json.encode(v.error or json.null))
  t.eq((rest("job_label_nodes", { label = "team-a", plan = true }).result or {}).change, 0, "nothing left to change")
end)

t.cleanup(function()
  for _, p in ipairs(pids) do
    if p ~= "none" then os.execute("kill " .. p .. " 2>/dev/null") end
  end
  os.execute("rm -rf " .. H.quote(dir))
end)
