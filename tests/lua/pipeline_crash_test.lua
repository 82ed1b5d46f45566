-- cluster_create survives kill -9: the whole pipeline (EKS, dependencies,
-- HyperPod, S3 storage, the training operator) against a sandbox process
-- under the virtual clock, its host process killed with SIGKILL at twenty
-- points spread over the pipeline (each right after a phase is recorded,
-- before the mutation or wait it names), restarted each time. The pipeline
-- finishes; its AWS mutations, counted per operation in the sandbox's audit
-- log, are exactly those of an uninterrupted run of the same pipeline in
-- another sandbox (every resource made once, nothing orphaned); and the
-- resources are there once, read back with boto3.
local t = require "hypd.tap"
local json = require "hypd.json"
local H = dofile("tests/lua/helpers.lua")

local ARGS = json.encode { cluster_tag = "crash", instance_type = "ml.g5.12xlarge", instance_count = 1,
  availability_zone = "us-west-2a", features = { training_operator = true } }
local KILLS = 20

local runs = {} -- control and crash: {dir, env, pid}
local function start(name)
  local r = { dir = H.tmpdir() }
  r.env, r.pid = H.sandbox_process(r.dir, "--virtual-clock")
  runs[name] = r
  return r
end

-- driver(r, extra [, tool, args]): the host process once (cluster_create by default)
local function driver(r, extra, tool, args)
  return H.with_env(r.env, r.dir, "HYPD_CLOCK=virtual TOOL=" .. (tool or "cluster_create") .. " ARGS=" ..
    H.quote(args or ARGS) .. " " .. (extra or "") .. " " .. H.hypd .. " test tests/tools/op_driver.lua")
end

local function result_of(out) return json.decode(out:match("# result ([^\n]+)") or "null") end

-- kills(r, list, n, tool, args) -> points, final: n runs, each killed at or past the
-- i-th of n + 1 equal parts of the phases in file list, then one to the end
local function kills(r, list, count, n, tool, args)
  local at, final = {}, nil
  for i = 1, n do
    local _, out = driver(r, "CRASH_LIST=" .. H.quote(list) .. " CRASH_FROM=" .. (i * count // (n + 1)), tool, args)
    local point = out:match("# crash at ([^\n]*)")
    if not point then
      final = result_of(out)
      break
    end
    at[#at + 1] = point
  end
  if not final then
    local _, out = driver(r, nil, tool, args)
    final = result_of(out)
  end
  return at, final
end

-- mutations(r) -> {operation = count} of the sandbox's audit log
local function mutations(r)
  local _, out = H.sh("curl -s " .. r.env.AWS_ENDPOINT_URL .. "/_sandbox/audit")
  local counts = {}
  for _, a in ipairs(json.decode(out) or {}) do
    if not a.refused then
      local k = a.service .. " " .. a.operation
      counts[k] = (counts[k] or 0) + 1
    end
  end
  return counts
end

local control_phases, LIST = 0, nil
t.test("an uninterrupted cluster_create in one sandbox process succeeds (the control)", function()
  local r = start("control")
  t.ok(r.env and r.env.AWS_ENDPOINT_URL, "the sandbox started")
  local rc, out = driver(r, "PHASES=1")
  t.eq(rc, 0, out:sub(-2000))
  t.eq((result_of(out) or {}).status, "succeeded", out:sub(-2000))
  local lines = {}
  for p in out:gmatch("# phase ([^\n]+)") do lines[#lines + 1] = p end
  control_phases = #lines
  LIST = r.dir .. "/phases"
  H.write(LIST, table.concat(lines, "\n") .. "\n")
  t.ok(control_phases > 2 * KILLS, control_phases .. " phases")
end)

t.test("killed with SIGKILL at twenty points of the pipeline, cluster_create still completes", function()
  if control_phases == 0 then return t.skip("the control run failed") end
  local r = start("crash")
  -- run i dies at the first phase at or past the i-th of KILLS + 1 equal
  -- parts of the uninterrupted run's phases
  local at, final = kills(r, LIST, control_phases, KILLS)
  t.eq(#at, KILLS, "killed at " .. #at .. " points: " .. table.concat(at, " | "))
  print("# killed at: " .. table.concat(at, " | "))
  t.eq((final or {}).status, "succeeded", json.encode(final))
end)

t.test("each AWS mutation happened as often as in the uninterrupted run: every resource once, nothing orphaned",
  function()
    if not runs.crash or not runs.control then return t.skip("a run did not happen") end
    local want, got = mutations(runs.control), mutations(runs.crash)
    t.eq(got, want)
    t.eq(want["ec2 CreateVpc"], 1)
    t.eq(want["sagemaker CreateCluster"], 1)
    if H.sh("python3 -c 'import boto3'") ~= 0 then return t.skip("boto3 is absent") end
    local rc, out, err = H.with_env(runs.crash.env, runs.crash.dir, [==[python3 -c '
import boto3, json
f = [{"Name": "tag:hypd:cluster-tag", "Values": ["crash"]}]
ec2, sm, iam = boto3.client("ec2"), boto3.client("sagemaker"), boto3.client("iam")
print(json.dumps({"vpcs": len(ec2.describe_vpcs(Filters=f)["Vpcs"]),
  "nat": len([n for n in ec2.describe_nat_gateways(Filter=f)["NatGateways"] if n["State"] != "deleted"]),
  "hyperpod": [c["ClusterName"] for c in sm.list_clusters()["ClusterSummaries"]],
  "status": sm.describe_cluster(ClusterName="hypd-crash-hp")["ClusterStatus"]}))']==])
    t.eq(rc, 0, err)
    t.eq(json.decode(out), { vpcs = 1, nat = 1, hyperpod = { "hypd-crash-hp" }, status = "InService" })
  end)

t.test("cluster_create again after success sends no mutation", function()
  if not runs.crash then return t.skip("no crash run") end
  local before = mutations(runs.crash)
  local rc, out = driver(runs.crash, "AGAIN=1")
  t.eq(rc, 0)
  t.eq((result_of(out) or {}).status, "succeeded")
  t.eq(mutations(runs.crash), before)
end)

-- the teardown, killed too
local TEARDOWN = json.encode { cluster_tag = "crash", force = true }
local teardown_list, teardown_phases = nil, 0
t.test("an uninterrupted cluster_delete in the control sandbox takes it all away", function()
  if not runs.control then return t.skip("no control run") end
  local rc, out = driver(runs.control, "PHASES=1", "cluster_delete", TEARDOWN)
  t.eq(rc, 0, out:sub(-1500))
  t.eq((result_of(out) or {}).status, "succeeded", out:sub(-1500))
  local lines = {}
  for p in out:gmatch("# phase ([^\n]+)") do lines[#lines + 1] = p end
  teardown_phases = #lines
  teardown_list = runs.control.dir .. "/teardown-phases"
  H.write(teardown_list, table.concat(lines, "\n") .. "\n")
  t.ok(teardown_phases > 20, teardown_phases .. " phases")
end)

t.test("cluster_delete killed with SIGKILL at ten points still completes, deleting each thing once, nothing left",
  function()
    if not runs.crash or teardown_phases == 0 then return t.skip("no cluster or no control teardown") end
    local at, final = kills(runs.crash, teardown_list, teardown_phases, 10, "cluster_delete", TEARDOWN)
    t.eq(#at, 10, "killed at " .. table.concat(at, " | "))
    t.eq((final or {}).status, "succeeded", json.encode(final))
    t.eq(mutations(runs.crash), mutations(runs.control), "the same calls as the uninterrupted teardown, each once")
    if H.sh("python3 -c 'import boto3'") ~= 0 then return t.skip("boto3 is absent") end
    local rc, out, err = H.with_env(runs.crash.env, runs.crash.dir, [==[python3 -c '
import boto3, json
f = [{"Name": "tag:hypd:cluster-tag", "Values": ["crash"]}]
ec2, sm, eks = boto3.client("ec2"), boto3.client("sagemaker"), boto3.client("eks")
print(json.dumps({"vpcs": len(ec2.describe_vpcs(Filters=f)["Vpcs"]),
  "subnets": len(ec2.describe_subnets(Filters=f)["Subnets"]),
  "hyperpod": len(sm.list_clusters()["ClusterSummaries"]), "eks": len(eks.list_clusters()["clusters"])}))']==])
    t.eq(rc, 0, err)
    t.eq(json.decode(out), { vpcs = 0, subnets = 0, hyperpod = 0, eks = 0 })
  end)

t.cleanup(function()
  for _, r in pairs(runs) do
    if r.pid then os.execute("kill " .. tostring(r.pid) .. " 2>/dev/null") end
    os.execute("rm -rf " .. H.quote(r.dir))
  end
end)
