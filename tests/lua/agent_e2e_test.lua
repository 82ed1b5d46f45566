-- The agent, end to end, without a model: a scripted MCP client of `hypd
-- mcp` (a child process over stdio, its state its own) in front of a
-- sandbox process, both under the virtual clock. It reads the
-- create-cluster skill from the server (prompts/get) and makes the calls the
-- skill shows, in its order, filling each <placeholder> as the skill says:
-- the person's decisions from what the read calls offered, the operation id
-- from the create's answer. It follows the operation with wait_seconds to its
-- end, checks every answer holds what the skill says the agent needs next,
-- then injects a node fault (the sandbox's node_health: a GPU lost), sees it
-- come with monitor_get_cluster wait_seconds, and runs diagnose_node_health:
-- a finding with quoted evidence and the suggested reboot and replace calls,
-- in that order, each a call that validates, and no mutation while it ran.
local t = require "hypd.tap"
local json = require "hypd.json"
local hints = require "hypd.hints"
local task = require "hypd.task"
local tool = require "hypd.tool.registry"
local H = dofile("tests/lua/helpers.lua")
local SK = dofile("tests/lua/skills_names.lua")
require("hypd.tool.loader").load()

local TAG = "agent"
local CLUSTER = "hypd-" .. TAG
local COUNT = 2

local dir = H.tmpdir()
local env, sandbox_pid = H.sandbox_process(dir, "--virtual-clock")
t.cleanup(function() if sandbox_pid then os.execute("kill " .. sandbox_pid .. " 2>/dev/null") end end)

-- the MCP server: hypd mcp reading a FIFO, writing a file the test reads
local server_pid, to_server
local out_at, answers = 0, {}
local function start_server()
  os.execute("mkfifo " .. H.quote(dir .. "/in"))
  local parts = { "env -u AWS_SESSION_TOKEN -u AWS_PROFILE HYPD_CLOCK=virtual" }
  for k, v in pairs(env) do parts[#parts + 1] = k .. "=" .. H.quote(v) end
  parts[#parts + 1] = "HYPD_STATE=" .. H.quote(dir .. "/client")
  local cmd = table.concat(parts, " ") .. " " .. H.hypd .. " mcp --toolsets default <" .. H.quote(dir .. "/in") ..
    " >" .. H.quote(dir .. "/out") .. " 2>" .. H.quote(dir .. "/err") .. " & echo $!"
  local p = io.popen(cmd)
  server_pid = p:read("l")
  p:close()
  t.cleanup(function() os.execute("kill " .. tostring(server_pid) .. " 2>/dev/null") end)
  to_server = assert(io.open(dir .. "/in", "w"))
end

local function read_answers()
  local f = io.open(dir .. "/out", "rb")
  if not f then return end
  f:seek("set", out_at)
  local text = f:read("a") or ""
  f:close()
  local last = text:match(".*\n()")
  if not last then return end
  out_at = out_at + last - 1
  for line in text:sub(1, last - 1):gmatch("[^\n]+") do
    local v = json.decode(line)
    if type(v) == "table" and v.id ~= nil then answers[v.id] = v end
  end
end

local next_id = 0
-- rpc(method, params) -> the JSON-RPC answer (waits up to 300 s of real time)
local function rpc(method, params)
  next_id = next_id + 1
  local id = next_id
  to_server:write(json.encode { jsonrpc = "2.0", id = id, method = method, params = params or json.object() }, "\n")
  to_server:flush()
  for i = 1, 6000 do
    read_answers()
    if answers[id] then return answers[id] end
    if i % 20 == 0 and not os.execute("kill -0 " .. tostring(server_pid) .. " 2>/dev/null") then
      read_answers()
      if answers[id] then return answers[id] end
      error("hypd mcp has exited; stderr: " .. tostring(H.read(dir .. "/err")):sub(-1500), 0)
    end
    task.sleep(0.05)
  end
  error("no answer to " .. method .. " in 300 s; stderr: " .. tostring(H.read(dir .. "/err")):sub(-1500), 0)
end

-- call(c, fill) -> structuredContent, the whole result: a call the skill
-- shows (hypd.hints form), each placeholder filled by fill[<what>]
local function call(c, fill)
  local args = {}
  for _, a in ipairs(c.args) do
    local v = a.value
    if a.placeholder then
      v = fill[v:match("^<(.*)>$")]
      assert(v ~= nil, c.text .. ": the skill's placeholder " .. a.value .. " has no value yet")
      args[a.key] = v
    elseif a.json then
      args[a.key] = json.decode(v)
    else
      local def = tool.get(c.tool) -- a tool this process does not have is the server's to refuse
      args[a.key] = def and tool.coerce(def.params, a.key, v) or v
    end
  end
  local r = rpc("tools/call", { name = c.tool, arguments = next(args) and args or json.object() })
  t.ok(r.result, c.text .. ": answered" .. (r.error and ": " .. tostring(r.error.message) or ""))
  local res = r.result or {}
  t.ok(not res.isError, c.text .. ": no error" .. (res.isError and ": " .. tostring(res.content[1].text) or ""))
  return res.structuredContent or {}, res
end

local function sandbox_post(path, body)
  local _, out = H.sh("curl -s -X POST -d " .. H.quote(json.encode(body)) .. " " .. env.AWS_ENDPOINT_URL .. path)
  return out
end

local function mutations()
  local _, out = H.sh("curl -s " .. env.AWS_ENDPOINT_URL .. "/_sandbox/audit")
  local n = 0
  for _, a in ipairs(json.decode(out) or {}) do if not a.refused then n = n + 1 end end
  return n
end

local steps, fill = {}, { ["cluster-name"] = CLUSTER, tag = TAG, count = COUNT }

t.test("the client initializes hypd mcp and reads the create-cluster skill from it", function()
  t.ok(env and env.AWS_ENDPOINT_URL, "the sandbox started")
  start_server()
  local init = rpc("initialize", { protocolVersion = "2025-11-25", capabilities = json.object(),
    clientInfo = { name = "scripted-agent", version = "1" } })
  t.eq(init.result.serverInfo.name, "hypd")
  to_server:write(json.encode { jsonrpc = "2.0", method = "notifications/initialized" }, "\n")
  local prompts = rpc("prompts/list").result.prompts
  local names = {}
  for _, p in ipairs(prompts) do names[p.name] = true end
  t.ok(names["create-cluster"] and names.diagnose and names.monitor, "the skills are prompts")
  local skill = rpc("prompts/get", { name = "create-cluster" }).result.messages[1].content.text
  steps = SK.calls(skill)
  t.ok(#steps >= 8, "the skill shows its steps as calls: " .. #steps)
end)

-- the skill's calls up to the one that matches pred, in order
local at = 1
local function step(pred, what)
  while steps[at] and not pred(steps[at]) do at = at + 1 end
  local c = steps[at]
  t.ok(c, "the skill shows " .. what)
  at = at + 1
  return c
end
local function has(c, key)
  for _, a in ipairs(c.args) do if a.key == key then return true end end
end
local function named(name) return function(c) return c.tool == name end end

t.test("it looks first: clusters, zones, instance types; the answers offer the decisions", function()
  local list = call(step(named("cluster_list"), "cluster_list first"), fill)
  t.eq(type(list.clusters), "table", "cluster_list answers clusters")
  for _, c in ipairs(list.clusters or {}) do t.ok(c.cluster_tag ~= TAG, "the tag is free") end
  local zones = call(step(named("aws_get_availability_zones"), "the zones"), fill)
  t.ok(#(zones.zones or {}) > 1, "zones")
  t.ok(zones.zones[1].name and zones.zones[1].zone_id, "each zone with its name and zone ID")
  fill.zone = zones.zones[1].name -- the person chooses the first zone offered
  local types = call(step(named("aws_get_instance_types"), "the instance types"), fill)
  t.ok(#(types.instance_types or {}) > 0, "instance types")
  local in_zone = call(step(function(c) return c.tool == "aws_get_instance_types" and has(c, "zone") end,
    "the types of the chosen zone"), fill)
  local offered = {}
  for _, it in ipairs(in_zone.instance_types or {}) do offered[it.name] = it end
  t.ok(offered["ml.g5.12xlarge"], "the zone offers ml.g5.12xlarge, the person's choice")
  t.ok(offered["ml.g5.12xlarge"] and offered["ml.g5.12xlarge"].accelerator_count, "with its GPUs")
  fill["instance-type"] = "ml.g5.12xlarge"
end)

local op_id
t.test("it plans, then creates: the plan changes nothing, the create answers an operation to follow", function()
  local before = mutations()
  local plan = call(step(function(c) return c.tool == "cluster_create" and has(c, "plan") end, "the plan"), fill)
  t.ok((plan.create or 0) > 0 and #(plan.plan or {}) > 0, "the plan lists what it would create")
  t.eq(plan.operation_id, nil, "a plan starts no operation")
  t.eq(mutations(), before, "a plan makes nothing")
  local acc = call(step(function(c) return c.tool == "cluster_create" and not has(c, "plan") end, "the create"), fill)
  t.like(acc.operation_id or "", "^op%-%x+$", "an operation id")
  t.eq(acc.status, "running")
  t.eq(acc.status_tool, "cluster_get_creation_status", "the status tool the skill follows it with")
  t.ok(acc.poll_after_seconds, "how soon to look again")
  op_id = acc.operation_id
  fill["operation-id"] = op_id
end)

t.test("it follows the operation with wait_seconds until it has succeeded", function()
  local follow = step(function(c) return c.tool == "cluster_get_creation_status" and has(c, "wait_seconds") end,
    "the follow-up with wait_seconds")
  local last
  local calls, stages = 0, {}
  repeat
    calls = calls + 1
    last = call(follow, fill)
    t.ok(last.status and last.phase, "each answer has status and phase")
    for _, ch in ipairs(last.children or {}) do stages[ch.tool] = true end
  until calls >= 60 or last.status == "succeeded" or last.status == "failed" or last.status == "cancelled"
  t.eq(last.status, "succeeded", "the operation ended well: " .. json.encode(last.error or last.phase))
  t.ok(calls < 60, "followed to its end in " .. calls .. " calls")
  t.ok(stages.cluster_create_eks and stages.hyperpod_create, "the answers showed the stages as they ran")
  t.ok(type(last.result) == "table", "the result of every stage")
end)

t.test("the cluster, monitored as the skill says, has its nodes and GPUs", function()
  local m = call(step(named("monitor_get_cluster"), "monitor_get_cluster after the create"), fill)
  t.eq(m.nodes and m.nodes.total, COUNT, "the nodes")
  t.eq(m.nodes and m.nodes.by_health and m.nodes.by_health.healthy, COUNT, "all healthy")
  t.eq(m.gpus and m.gpus.capacity, COUNT * 4, "ml.g5.12xlarge has 4 GPUs each")
end)

t.test("after a node loses a GPU, diagnose_node_health finds it with evidence and suggests reboot, then replace", function()
  local nodes = call({ tool = "hyperpod_list_nodes", args = { { key = "cluster", value = CLUSTER } },
    text = "hyperpod_list_nodes cluster=" .. CLUSTER }, fill)
  local victim = nodes.nodes and nodes.nodes[1]
  t.ok(victim and victim.instance_id and victim.node_name, "a node to fail")
  -- the sandbox's node_health fault (sandbox.faults_nodes): the device plugin reports a GPU fewer
  t.eq(sandbox_post("/_sandbox/faults", { node_health = { { cluster = nodes.hyperpod_cluster,
    node = victim.node_name, gpu_lost = 1 } } }), "ok", "the fault is injected")
  -- the monitor skill's way to see it come: monitor_get_cluster with wait_seconds
  local seen
  for _ = 1, 20 do
    local m = call({ tool = "monitor_get_cluster", args = { { key = "cluster", value = CLUSTER },
      { key = "wait_seconds", value = "60" } }, text = "monitor_get_cluster cluster=" .. CLUSTER .. " wait_seconds=60" },
      fill)
    for _, n in ipairs(m.nodes and m.nodes.items or {}) do
      if n.name == victim.node_name and n.gpu and n.gpu.allocatable < n.gpu.capacity then seen = n end
    end
    if seen then break end
  end
  t.ok(seen, "monitor_get_cluster shows the node's GPUs below capacity")
  local before = mutations()
  local d = call({ tool = "diagnose_node_health", args = { { key = "cluster", value = CLUSTER } },
    text = "diagnose_node_health cluster=" .. CLUSTER }, fill)
  t.eq(mutations(), before, "the diagnostic changed nothing")
  t.eq(d.healthy, false, "not healthy")
  local f
  for _, x in ipairs(d.findings or {}) do
    if (x.subject or ""):find(victim.node_name, 1, true) or (x.subject or ""):find(victim.instance_id, 1, true) then
      f = f or x
    end
  end
  t.ok(f, "a finding about the failed node")
  if not f then return end
  t.eq(f.severity, "critical")
  t.ok(#(f.evidence or {}) > 0 and f.evidence[1].source and f.evidence[1].quote, "quoted evidence with its source")
  t.ok(f.explanation and #f.explanation > 0, "an explanation")
  local order, reboot, replace = {}, nil, nil
  for i, s in ipairs(f.next or {}) do
    order[#order + 1] = s.action
    local c = hints.extract(s.call, true)[1]
    t.ok(c and hints.check(c), "the suggested call validates: " .. tostring(s.call))
    if s.tool == "hyperpod_node_reboot" then reboot = reboot or i end
    if s.tool == "hyperpod_node_replace" then replace = replace or i end
    if s.tool == "hyperpod_node_reboot" or s.tool == "hyperpod_node_replace" then
      t.like(json.encode(s.args), victim.instance_id:gsub("%-", "%%-"), s.tool .. " names the node")
    end
  end
  t.ok(reboot and replace and reboot < replace, "reboot is suggested before replace: " .. table.concat(order, ", "))
  local rank = { inspect = 1, fix = 2, reboot = 3, replace = 4 }
  for i = 2, #order do t.ok(rank[order[i - 1]] <= rank[order[i]], "escalation order: " .. table.concat(order, ", ")) end
end)

t.test("(the client leaves)", function()
  if to_server then to_server:close() end
  os.execute("kill " .. tostring(server_pid) .. " 2>/dev/null")
  os.execute("rm -rf " .. H.quote(dir))
  t.ok(true)
end)
