-- Progress on every long wait, checked on every staged tool of the
-- registry (issue 19): `hypd serve --sandbox` as its own process under the
-- virtual clock, each staged tool run through `hypd call --api URL TOOL
-- --json ARGS --wait` (the CLI, stderr a pipe), one after another on one
-- sandbox state (a cluster with GPU and CPU groups, storage, workloads, then
-- their teardown). For each operation and each of its children (read back
-- over REST: /operations/{id} and /operations/{id}/events):
--   * no gap of more than GAP seconds of the operation's clock without an
--     event, from its start to its end (a wait that is not a kit.poll, or a
--     poll at a slow pace that says nothing between its checks, shows here);
--   * every progress event of a wait says what it waits for and how long
--     so far; a parent's log carries its children's progress;
--   * the CLI printed the operation's phases and notes.
-- Every staged tool in the registry must have been run by a scenario here:
-- a new staged tool without one fails the coverage test.
-- Then a capacity fault (HyperPod's InsufficientCapacity, continuous
-- provisioning): the wait for the nodes shows HyperPod's message in the
-- CLI's progress lines and in the operation's events over REST.
local t = require "hypd.tap"
local http = require "hypd.http"
local json = require "hypd.json"
local H = dofile("tests/lua/helpers.lua")

local GAP = 15 -- seconds (the rule: at least a line every 15 s)

local dir = H.tmpdir()
local state = dir .. "/state"
local url, admin, pid, sandbox_url
local sandbox_env = {} -- the sandbox's AWS environment, as serve prints it
local absent
local function skip() return t.skip(absent or "an earlier step failed") end

t.cleanup(function()
  if pid then os.execute("kill " .. pid .. " 2>/dev/null") end
  os.execute("sleep 0.3; rm -rf " .. H.quote(dir))
end)

local function get(path)
  local resp = assert(http.request { url = url .. "/api/v1" .. path, timeout = 120,
    headers = { authorization = "Bearer " .. admin } })
  return resp.status, json.decode(resp.body ~= "" and resp.body or "null")
end

-- events(id) -> every event of the operation, oldest first
local function events(id)
  local out, after = {}, 0
  while true do
    local code, r = get("/operations/" .. id .. "/events?after=" .. after .. "&limit=1000")
    assert(code == 200, "events of " .. id .. ": " .. tostring(code))
    for _, e in ipairs(r.events) do out[#out + 1] = e end
    if #r.events < 1000 then return out end
    after = r.next
  end
end

-- cli(tool, args) -> rc, view (the CLI's stdout: the finished operation),
-- the CLI's stderr
local function cli(tool, args)
  local rc, out, err = H.run_hypd({ HYPD_TOKEN = admin, HYPD_STATE = dir .. "/client" }, "call", "--api", url,
    tool, "--json", json.encode(args or json.object()), "--wait")
  return rc, json.decode(out or "") or {}, err or ""
end

local covered = {}    -- tool -> operations of it checked
local findings = {}   -- what broke the rule, by tool

-- check(id, depth) -> the operation's view: its gaps, its waits' progress,
-- then its children's
local function check(id, depth)
  local _, v = get("/operations/" .. id)
  local evs = events(id)
  local times, last, worst, where = {}, v.created_at, 0, nil
  for _, e in ipairs(evs) do times[#times + 1] = e end
  for _, e in ipairs(times) do
    if e.at - last > worst then worst, where = e.at - last, e end
    last = e.at
    if e.kind == "operation.progress" and e.wait then
      if not (type(e.wait.what) == "string" and type(e.wait.waited) == "number") then
        findings[#findings + 1] = v.tool .. ": a wait's progress without what or waited: " .. json.encode(e)
      end
    end
  end
  local ended = v.finished_at or last
  if ended - last > worst then worst, where = ended - last, { message = "(the end)", at = ended } end
  covered[v.tool] = (covered[v.tool] or 0) + 1
  io.stdout:write(string.format("# %s%s %s: %s, %d events, longest silence %.0f s%s\n", string.rep("  ", depth or 0),
    v.tool, id, v.status, #evs, worst, v.error and (" (" .. tostring(v.error.message):sub(1, 200) .. ")") or ""))
  if worst > GAP then
    findings[#findings + 1] = string.format("%s %s (%s): %.0f s without an event before %s", v.tool, id, v.status,
      worst, json.encode(where and (where.message or where.phase or where.kind)))
  end
  for _, c in ipairs(v.children or {}) do
    check(c.operation_id, (depth or 0) + 1)
    -- the parent's log has the child's progress, relayed
    local relayed = false
    for _, e in ipairs(evs) do
      if e.child and e.child.operation_id == c.operation_id then relayed = true end
    end
    if not relayed then findings[#findings + 1] = v.tool .. ": nothing of its child " .. c.tool .. " in its events" end
  end
  return v, evs
end

-- staged(tool, args [, want]) runs the tool through the CLI and checks its
-- operation; want: the status it must end with ("succeeded" by default;
-- false: any)
local function staged(tool, args, want)
  if absent then return skip() end
  local rc, v, err = cli(tool, args)
  if not v.operation_id then
    t.ok(false, tool .. " ran as an operation: rc " .. tostring(rc) .. ": " .. err)
    return nil
  end
  if want ~= false then t.eq(v.status, want or "succeeded", tool .. ": " .. json.encode(v.error)) end
  t.ok(err:find(v.operation_id .. ": ", 1, true), tool .. ": the CLI printed its phases: " .. err:sub(1, 300))
  check(v.operation_id)
  return v, err
end

t.test("hypd serve --sandbox starts under the virtual clock and prints its URL and token", function()
  os.execute("mkdir -p " .. H.quote(state))
  local out = dir .. "/serve.out"
  local p = io.popen(string.format("HYPD_CLOCK=virtual HYPD_STATE=%s %s serve --sandbox --listen 127.0.0.1:0 " ..
    ">%s 2>%s/serve.err </dev/null & echo $!", H.quote(state), H.hypd, H.quote(out), H.quote(dir)))
  pid = p:read("l")
  p:close()
  local printed = ""
  for _ = 1, 300 do
    printed = H.read(out) or ""
    if printed:find("stops it", 1, true) then break end
    os.execute("sleep 0.05")
  end
  url, admin = printed:match("listening on (%S+)"), printed:match("export HYPD_TOKEN=(%S+)")
  sandbox_url = printed:match("export AWS_ENDPOINT_URL=(%S+)")
  for k, v in printed:gmatch("export (AWS_[%w_]+)=(%S+)") do sandbox_env[k] = v end
  t.ok(url and admin and sandbox_url, "the URL and the admin token: " .. printed)
  if not (url and admin and sandbox_url) then absent = "hypd serve --sandbox did not start" end
end)

local CAP = { instance_group = "short", instance_type = "ml.g5.12xlarge", instance_count = 2,
  availability_zone = "us-west-2b" }

-- the scenarios, in order, on one state: each staged tool at least once
t.test("the cluster: cluster_create (EKS, dependencies, HyperPod, S3, operators as child operations)", function()
  local v = staged("cluster_create", { cluster_tag = "gaps", instance_type = "ml.g5.12xlarge", instance_count = 2,
    availability_zone = "us-west-2a", features = { training_operator = true, inference_operator = true } })
  if not v or v.status ~= "succeeded" then absent = "the cluster could not be made" end
end)

t.test("EKS node groups: cluster_scale_node_group and cluster_delete_node_group on a managed node group", function()
  if absent then return skip() end
  local sys, aws = require "hypd.sys", require "hypd.aws"
  sys.setenv("AWS_PROFILE")
  sys.setenv("AWS_SESSION_TOKEN")
  for svc in pairs(aws.SERVICES) do sys.setenv(aws.endpoint_env(svc)) end
  for k, v in pairs(sandbox_env) do sys.setenv(k, v) end
  local function call(s, o, p) return aws.call(s, o, p, { region = sandbox_env.AWS_REGION }) end
  local c = call("eks", "DescribeCluster", { name = "hypd-gaps" }).cluster
  local role = call("iam", "CreateRole", { RoleName = "gaps-ng", AssumeRolePolicyDocument = json.encode {
    Version = "2012-10-17", Statement = { { Effect = "Allow", Principal = { Service = "ec2.amazonaws.com" },
      Action = "sts:AssumeRole" } } } }).Role.Arn
  call("eks", "CreateNodegroup", { clusterName = "hypd-gaps", nodegroupName = "extra", nodeRole = role,
    subnets = c.resourcesVpcConfig.subnetIds, scalingConfig = { minSize = 0, maxSize = 2, desiredSize = 1 } })
  local status
  for _ = 1, 600 do
    status = call("eks", "DescribeNodegroup", { clusterName = "hypd-gaps", nodegroupName = "extra" }).nodegroup.status
    if status == "ACTIVE" then break end
    os.execute("sleep 0.1")
  end
  t.eq(status, "ACTIVE", "the node group the test made")
  staged("cluster_scale_node_group", { node_group = "extra", desired_size = 2 })
  staged("cluster_delete_node_group", { node_group = "extra" })
end)

t.test("stage tools on the cluster: dependencies, instance groups, software, FSx storage", function()
  staged("cluster_configure_dependencies", {})
  staged("hyperpod_add_instance_group", { instance_group = "cpu", instance_type = "ml.m5.2xlarge",
    instance_count = 1, availability_zone = "us-west-2a" })
  staged("hyperpod_scale_instance_group", { instance_group = "cpu", instance_count = 2 })
  staged("hyperpod_update_software", {})
  staged("storage_create_fsx", { availability_zone = "us-west-2a" })
  staged("storage_delete", { claim_name = "fsx-claim", delete_file_system = true })
end)

t.test("workloads: a model download, container and pool inference, a router, managed and JumpStart " ..
  "inference, autoscaling, a training job, MLflow", function()
  local d = staged("model_download", { model_id = "Qwen/Qwen2.5-0.5B-Instruct" })
  staged("job_delete", { name = d and d.result and d.result.name or "hf-download-qwen-qwen2-5-0-5b-instruct" })
  staged("inference_deploy_container", { name = "qwen", engine = "vllm", gpus = 1, instance_type = "ml.g5.12xlarge",
    args = { "--model", "/s3/models/qwen", "--port", "8000" } })
  staged("inference_deploy_container", { name = "warm", engine = "sglang", gpus = 1, instance_type = "ml.g5.12xlarge",
    replicas = 3, service = "pool", command = { "python3", "-m", "sglang.launch_server", "--model-path",
      "/s3/models/llama", "--host", "0.0.0.0" } })
  staged("inference_assign_pool_pod", { pool = "warm", model = "llama", count = 2 })
  staged("inference_release_pool_pod", { model = "llama", count = 1 })
  staged("inference_scale", { name = "warm", replicas = 2 })
  staged("inference_set_autoscaling", { name = "qwen", max_replicas = 2, threshold = 5 })
  staged("inference_deploy_container", { name = "sgl-a", engine = "sglang", gpus = 1, instance_type = "ml.g5.12xlarge",
    command = { "python3", "-m", "sglang.launch_server", "--model-path", "/s3/models/llama", "--host", "0.0.0.0" } })
  staged("inference_deploy_router", { workers = { "sgl-a" }, policy = "cache_aware" })
  staged("inference_deploy_managed", { name = "mgd", model_source = "s3", s3_bucket = "hypd-gaps-models",
    model_location = "models/qwen", instance_type = "ml.g5.12xlarge", image = "vllm/vllm-openai:v0.8.5", gpus = 1,
    port = 8000 }, false)
  staged("inference_deploy_jumpstart", { name = "llama", model_id = "meta-textgeneration-llama-3-2-1b-instruct",
    instance_type = "ml.g5.12xlarge", accept_eula = true, endpoint_name = "llama-sm" }, false)
  staged("inference_delete", { name = "warm", force = true })
  staged("training_submit", { recipe = "pytorch-torchrun", params = { job_name = "demo",
    instance_type = "ml.g5.12xlarge", script = "scripts/train.py" } })
  staged("training_delete_job", { name = "demo" })
  staged("training_setup_mlflow", {})
end)

t.test("a capacity fault: the wait for the nodes shows HyperPod's InsufficientCapacity message in the CLI's " ..
  "progress and in the operation's events over REST", function()
  if absent then return skip() end
  local resp = assert(http.request { method = "POST", url = sandbox_url .. "/_sandbox/faults", timeout = 30,
    body = json.encode { insufficient_capacity = { { instance_type = CAP.instance_type, zone = CAP.availability_zone } } } })
  t.eq(resp.status, 200, resp.body)
  local rc, v, err = cli("hyperpod_add_instance_group", CAP)
  t.eq({ rc, v.status }, { 1, "failed" }, "it gives up after HyperPod's grace: " .. json.encode(v.error))
  t.like(json.encode(v.error), "INSUFFICIENT_CAPACITY")
  -- while it waited, every front end heard why
  local lines = {}
  for line in err:gmatch("[^\n]+") do
    if line:find("waiting", 1, true) or line:find("Ready in Kubernetes", 1, true) then lines[#lines + 1] = line end
  end
  t.like(err, "nodes of short Ready in Kubernetes; HyperPod says: 2 nodes %a+: Waiting for capacity: " ..
    "InsufficientCapacity: We currently do not have sufficient capacity", "the CLI's progress: " ..
    table.concat(lines, "\n"))
  local said = 0
  for _, e in ipairs(events(v.operation_id)) do
    if e.kind == "operation.progress" and (e.message or ""):find("InsufficientCapacity", 1, true) then
      said = said + 1
      t.eq(e.wait and e.wait.what, "2 nodes of short to join Kubernetes", "the progress names the wait")
    end
  end
  t.ok(said >= 2, "the operation's events over REST carry it at every check: " .. said)
  check(v.operation_id)
  resp = assert(http.request { method = "POST", url = sandbox_url .. "/_sandbox/faults", timeout = 30,
    body = "{}" })
  t.eq(resp.status, 200)
end)

t.test("teardown: instance group, features, node groups, HyperPod and the cluster", function()
  staged("hyperpod_delete_instance_group", { instance_group = "cpu" })
  staged("hyperpod_disable_advanced_features", { features = { "inference_operator" } }, false)
  -- the workloads that mount the S3 claim go first (storage_delete refuses a claim in use)
  for _, name in ipairs { "sglang-router", "sgl-a", "qwen", "mgd", "llama" } do
    staged("inference_delete", { name = name, force = true }, false)
  end
  staged("hyperpod_delete", { force = true }, false)
  staged("cluster_delete", { cluster_tag = "gaps", force = true }, false)
end)

t.test("every staged tool of the registry ran here, and none of their operations or children went more than " ..
  GAP .. " s without a progress event", function()
  if absent then return skip() end
  local code, list = get("/tools")
  t.eq(code, 200)
  local missing = {}
  for _, d in ipairs(list.tools or list) do
    if d.staged and not covered[d.name] then missing[#missing + 1] = d.name end
  end
  table.sort(missing)
  t.eq(missing, {}, "staged tools no scenario ran")
  t.eq(findings, {}, "gaps and waits without what or waited")
end)
