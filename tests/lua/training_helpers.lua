-- tests/lua/training_helpers.lua: what the training tests share: an EKS
-- cluster with a HyperPod cluster whose groups have joined Kubernetes, and
-- the training operator's CRD.
local H = dofile("tests/lua/helpers.lua")
local FH = dofile("tests/lua/features_helpers.lua")
local json = require "hypd.json"

local TH = { H = H, FH = FH }

-- start() -> call: the in-process sandbox (virtual clock) with the tools
-- loaded, and the test's own AWS call against it
function TH.start()
  require("hypd.tool.loader").load()
  local _, opts = H.sandbox_here()
  return FH.aws(opts)
end

-- obj(t) -> t as a JSON object (a tool's object parameter)
function TH.obj(x)
  local o = json.object()
  for k, v in pairs(x or {}) do o[k] = v end
  return o
end

-- run(name, args, who) -> the finished operation's result | nil, err: a
-- staged tool called and waited for (a plan's answer as it is)
function TH.run(name, args, who)
  local acc, err = require("hypd.tool.dispatch").call(name, args, who)
  if not acc then return nil, err end
  if args.plan then return acc end
  local v = require("hypd.tool.operations").wait(acc.operation_id)
  if v.status ~= "succeeded" then return nil, v.error end
  return v.result
end

-- follow(args, who, done) -> training_get_job's answer once done(answer)
-- (default: Completed or Failed), asked with wait_seconds 60 up to 30 times
function TH.follow(args, who, done)
  done = done or function(g) return g.phase == "Completed" or g.phase == "Failed" end
  local a = { wait_seconds = 60 }
  for k, v in pairs(args) do a[k] = v end
  local g
  for _ = 1, 30 do
    g = assert(require("hypd.tool.dispatch").call("training_get_job", a, who))
    if done(g) then return g end
  end
  return g
end

-- cluster(call, eks, hp, octet [, groups [, extra]]) -> the Kubernetes
-- connection; groups default to one "gpu" group of three ml.g5.12xlarge;
-- extra: more CreateCluster fields (TieredStorageConfig, ...)
function TH.cluster(call, eks_name, hp, octet, groups, extra)
  local eks = H.eks_cluster(call, eks_name, octet)
  local trust = json.encode { Version = "2012-10-17", Statement = { { Effect = "Allow",
    Principal = { Service = "sagemaker.amazonaws.com" }, Action = "sts:AssumeRole" } } }
  local role = call("iam", "CreateRole", { RoleName = eks_name .. "-exec", AssumeRolePolicyDocument = trust }).Role.Arn
  local sg = call("ec2", "CreateSecurityGroup", { GroupName = eks_name .. "-hp", Description = "hyperpod",
    VpcId = eks.resourcesVpcConfig.vpcId }).GroupId
  groups = groups or { { InstanceGroupName = "gpu", InstanceType = "ml.g5.12xlarge", InstanceCount = 3 } }
  local want = 0
  for _, g in ipairs(groups) do g.ExecutionRole = role; want = want + g.InstanceCount end
  local req = { ClusterName = hp, NodeRecovery = "None", InstanceGroups = groups,
    Orchestrator = { Eks = { ClusterArn = eks.arn } },
    VpcConfig = { Subnets = { eks.resourcesVpcConfig.subnetIds[1] }, SecurityGroupIds = { sg } } }
  for k, v in pairs(extra or {}) do req[k] = v end
  call("sagemaker", "CreateCluster", req)
  FH.wait(function() return call("sagemaker", "DescribeCluster", { ClusterName = hp }).ClusterStatus == "InService" end)
  local conn = require("hypd.k8s").connect { cluster = eks_name }
  FH.wait(function()
    local n = 0
    for _, node in ipairs(conn:list("v1", "Node") or {}) do
      if (node.metadata.labels or {})["sagemaker.amazonaws.com/compute-type"] == "hyperpod" then n = n + 1 end
    end
    return n >= want
  end)
  return conn, eks
end

-- training_operator(conn): the HyperPodPyTorchJob CRD, as the operator's add-on brings it
function TH.training_operator(conn)
  local resources = require "sandbox.k8s.resources"
  for _, row in ipairs(resources.CRDS) do
    if row[1] == "sagemaker.amazonaws.com" then assert(conn:create(resources.crd(row))) end
  end
end

return TH
