-- Helpers of the capacity and node tests (hyperpod_capacity_test.lua,
-- hyperpod_nodes_test.lua): a sandbox process under the virtual clock with
-- an EKS cluster and a HyperPod cluster boto3 made (tests/tools/
-- hyperpod_capacity.py), this process's tools pointed at it, boto3's view
-- of it (hyperpod_groups.py), its audit log, and the AWS requests hypd sent.
--   local C = dofile("tests/lua/capacity_helpers.lua")
--   local S = C.start("cap-demo", "hp-cap")   -- in the first test
local t = require "hypd.tap"
local aws = require "hypd.aws"
local core = require "hypd.core"
local json = require "hypd.json"
local op = require "hypd.tool.operations"
local dispatch = require "hypd.tool.dispatch"
local sys = require "hypd.sys"
local H = dofile("tests/lua/helpers.lua")

local C = {}
C.OPER = { name = "tester", scope = "operate", front = "test" }
C.ADMIN = { name = "tester", scope = "admin", front = "test" }
C.UNKNOWN = "i-0123456789abcdef0" -- a well-formed instance id no cluster has

-- the requests hypd sends for these operations, as sent (params copied)
C.sent = {}
local WATCH = { UpdateCluster = true, UpdateClusterSoftware = true, BatchRebootClusterNodes = true,
  BatchReplaceClusterNodes = true, BatchDeleteClusterNodes = true }
local real_call = aws.call
aws.call = function(service, operation, params, opts)
  if WATCH[operation] then C.sent[#C.sent + 1] = { operation = operation, params = json.decode(json.encode(params)) } end
  return real_call(service, operation, params, opts)
end

-- start(eks, hp) -> S, or nil and why: the sandbox process and the clusters
-- (S.env, S.info = what the setup printed, S.dir)
function C.start(eks, hp)
  if H.sh("python3 -c 'import boto3'") ~= 0 then return nil, "boto3 is not installed for python3" end
  local S = { dir = H.tmpdir(), eks = eks, hp = hp }
  local env, pid = H.sandbox_process(S.dir, "--virtual-clock")
  S.env = env or {}
  if pid then t.cleanup(function() os.execute("kill " .. pid .. " 2>/dev/null") end) end
  t.ok(S.env.AWS_ENDPOINT_URL, "the sandbox started")
  function S.py(args)
    local rc, out, err = H.with_env(S.env, S.dir, "python3 tests/tools/" .. args)
    if rc ~= 0 then error("python3 tests/tools/" .. args:match("^%S+") .. " failed: " .. tostring(err), 0) end
    return json.decode(out:match("([^\n]+)\n*$") or "null")
  end
  -- read() -> boto3's DescribeCluster: {status, groups = {name = group}};
  -- update(request) -> boto3's UpdateCluster: {ok} or {error, message}
  function S.read() return S.py("hyperpod_groups.py " .. hp) end
  function S.update(req) return S.py("hyperpod_groups.py " .. hp .. " " .. H.quote(json.encode(req))) end
  -- audit() -> the sandbox's audit log (its mutations), as a list
  function S.audit()
    local _, out = H.sh("curl -s " .. S.env.AWS_ENDPOINT_URL .. "/_sandbox/audit")
    return json.decode(out) or {}
  end
  S.info = S.py("hyperpod_capacity.py " .. eks .. " " .. hp)
  t.eq(S.info.status, "InService")
  -- this process's tools reach the sandbox process the standard way
  sys.setenv("AWS_PROFILE")
  sys.setenv("AWS_SESSION_TOKEN")
  for svc in pairs(aws.SERVICES) do sys.setenv("AWS_ENDPOINT_URL_" .. svc:upper()) end
  for k, v in pairs(S.env) do sys.setenv(k, v) end
  core.virtual(true)
  require("hypd.tool.loader").load()
  t.ok(dispatch.call("cluster_switch", { cluster = eks }, C.OPER), "the EKS cluster is the active one")
  return S
end

-- here() -> S: the sandbox in this process (H.sandbox_here: one virtual
-- clock, so every state a transition passes through stays until a tool
-- waits), the tools loaded; S.audit() reads its audit log from the store;
-- S.build(eks, hp) makes the same clusters as start(), with hypd's AWS client
function C.here()
  C.in_process = true
  local srv, OPTS = H.sandbox_here()
  local store, task = require "hypd.store", require "hypd.task"
  local function call(service, operation, params) return aws.call(service, operation, params or {}, OPTS) end
  local S = { srv = srv, call = call }
  function S.audit()
    local out = {}
    for _, e in ipairs(store.events(0, 1000000) or {}) do
      if e.kind == "sandbox.audit" and not e.data.refused then out[#out + 1] = e.data end
    end
    return out
  end
  require("hypd.tool.loader").load()
  function S.build(eks, hp)
    S.eks, S.hp = eks, hp
    local trust = json.encode { Version = "2012-10-17", Statement = { { Effect = "Allow",
      Principal = { Service = { "eks.amazonaws.com", "sagemaker.amazonaws.com" } }, Action = "sts:AssumeRole" } } }
    local role = call("iam", "CreateRole", { RoleName = eks .. "-hp", AssumeRolePolicyDocument = trust }).Role.Arn
    local cl = H.eks_cluster(call, eks, 44)
    local subnets = cl.resourcesVpcConfig.subnetIds
    local sg = call("ec2", "CreateSecurityGroup", { GroupName = eks, Description = "hyperpod",
      VpcId = cl.resourcesVpcConfig.vpcId }).GroupId
    call("s3", "CreateBucket", { Bucket = eks .. "-lcc", CreateBucketConfiguration = { LocationConstraint = "us-west-2" } })
    call("s3", "PutObject", { Bucket = eks .. "-lcc", Key = "lcc/on_create.sh", Body = "#!/bin/bash\n" })
    local lcc = { SourceS3Uri = "s3://" .. eks .. "-lcc/lcc/", OnCreate = "on_create.sh" }
    call("sagemaker", "CreateCluster", { ClusterName = hp, Orchestrator = { Eks = { ClusterArn = cl.arn } },
      VpcConfig = { SecurityGroupIds = { sg }, Subnets = { subnets[1] } }, NodeRecovery = "Automatic",
      NodeProvisioningMode = "Continuous", InstanceGroups = {
        { InstanceGroupName = "gpu", InstanceType = "ml.g6e.24xlarge", InstanceCount = 2, MinInstanceCount = 1,
          ExecutionRole = role, LifeCycleConfig = lcc, ThreadsPerCore = 2,
          OnStartDeepHealthChecks = { "InstanceStress", "InstanceConnectivity" },
          NetworkInterface = { InterfaceType = "efa-only" }, CapacityRequirements = { Spot = json.object() },
          InstanceStorageConfigs = { { EbsVolumeConfig = { VolumeSizeInGB = 500 } } },
          OverrideVpcConfig = { SecurityGroupIds = { sg }, Subnets = { subnets[2] } } },
        { InstanceGroupName = "cpu", InstanceType = "ml.m5.xlarge", InstanceCount = 1, ExecutionRole = role,
          LifeCycleConfig = lcc, ThreadsPerCore = 2, OnStartDeepHealthChecks = { "InstanceStress" } } } })
    while call("sagemaker", "DescribeCluster", { ClusterName = hp }).ClusterStatus == "Creating" do task.sleep(30) end
    S.info = { subnets = subnets, security_group = sg, role = role,
      status = call("sagemaker", "DescribeCluster", { ClusterName = hp }).ClusterStatus }
    t.eq(S.info.status, "InService")
    t.ok(dispatch.call("cluster_switch", { cluster = eks }, C.OPER), "the EKS cluster is the active one")
    -- InService comes first; the nodes join Kubernetes a moment later
    local joined = 0
    for _ = 1, 60 do
      joined = 0
      for _, n in ipairs((dispatch.call("hyperpod_list_nodes", {}, C.OPER) or {}).nodes or {}) do
        if n.kubernetes and n.kubernetes.ready then joined = joined + 1 end
      end
      if joined == 3 then break end
      task.sleep(5)
    end
    t.eq(joined, 3, "the three nodes are Ready in Kubernetes")
  end
  return S
end

-- resync(): this process's virtual clock back at the wall clock. It jumps
-- ahead at every wait of a tool's poll while the sandbox process's jumps on
-- its own; the sandbox takes a signature dated near its clock or the wall
-- clock (up to 5 minutes ahead), so each test starts at the wall clock
function C.resync()
  if C.in_process then return end
  core.virtual(false)
  core.virtual(true)
end

-- run(name, params [, caller]) -> the view of the finished operation
function C.run(name, params, caller)
  local acc, err = dispatch.call(name, params, caller or C.OPER)
  if not acc then error(name .. " refused: " .. json.encode(err), 0) end
  t.ok(acc.operation_id, name .. " answers with an operation")
  return op.wait(acc.operation_id)
end

-- last(operation) -> the params of the last such request hypd sent
function C.last(operation)
  for i = #C.sent, 1, -1 do
    if C.sent[i].operation == operation then return C.sent[i].params end
  end
end

return C
