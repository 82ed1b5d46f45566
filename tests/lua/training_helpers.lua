-- tests/lua/training_helpers.lua: what the training tests share: an EKS
-- cluster with a HyperPod cluster whose groups have joined Kubernetes, and
-- the training operator's CRD.
local H = dofile("tests/lua/helpers.lua")
local FH = dofile("tests/lua/features_helpers.lua")
local json = require "hypd.json"

local TH = {}

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
