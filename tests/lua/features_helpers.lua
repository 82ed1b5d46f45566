-- Helpers of the managed-feature tests (features_test.lua and the
-- tests against a sandbox process); loaded with dofile after the sandbox is
-- reachable: local FH = dofile("tests/lua/features_helpers.lua")
--   FH.cluster(call, name, octet [, opts]) -> {eks, hp, role, subnets, sg}:
--     an ACTIVE EKS cluster with its IAM OIDC provider and the Mountpoint S3
--     CSI driver (what cluster_configure_dependencies leaves), and an
--     InService HyperPod cluster with continuous provisioning, a GPU group
--     at zero and a CPU group of one
--   FH.gpu_cluster(call, name, octet, itype, count) -> conn: EKS and a
--     HyperPod cluster of one GPU group whose nodes have joined
local json = require "hypd.json"
local task = require "hypd.task"

local FH = {}

FH.THUMBPRINT = "9e99a48a9960b14926bb7f3b02e22da2b0ab7280"

-- aws(opts) -> call(service, operation, params): the test's own AWS calls
function FH.aws(opts)
  return function(service, operation, params) return require("hypd.aws").call(service, operation, params or {}, opts) end
end

function FH.wait(check, limit, every)
  local t0 = require("hypd.core").now()
  while not check() do
    if require("hypd.core").now() - t0 > (limit or 3600) then error("timed out", 2) end
    task.sleep(every or 10)
  end
end

function FH.cluster(call, name, octet, opts)
  opts = opts or {}
  local H = dofile("tests/lua/helpers.lua")
  local eks = H.eks_cluster(call, name, octet)
  call("iam", "CreateOpenIDConnectProvider", { Url = eks.identity.oidc.issuer,
    ClientIDList = { "sts.amazonaws.com" }, ThumbprintList = { FH.THUMBPRINT } })
  if not opts.no_s3_csi then
    call("eks", "CreateAddon", { clusterName = name, addonName = "aws-mountpoint-s3-csi-driver" })
    FH.wait(function()
      return call("eks", "DescribeAddon", { clusterName = name, addonName = "aws-mountpoint-s3-csi-driver" })
        .addon.status == "ACTIVE"
    end)
  end
  local trust = json.encode { Version = "2012-10-17", Statement = { { Effect = "Allow",
    Principal = { Service = "sagemaker.amazonaws.com" }, Action = "sts:AssumeRole" } } }
  local role = call("iam", "CreateRole", { RoleName = name .. "-exec", AssumeRolePolicyDocument = trust }).Role.Arn
  local subnets = eks.resourcesVpcConfig.subnetIds
  local sg = call("ec2", "CreateSecurityGroup", { GroupName = name .. "-hp", Description = "hyperpod",
    VpcId = eks.resourcesVpcConfig.vpcId }).GroupId
  local hp = opts.hyperpod or (name .. "-hp")
  call("sagemaker", "CreateCluster", { ClusterName = hp, NodeRecovery = "None", NodeProvisioningMode = "Continuous",
    InstanceGroups = {
      { InstanceGroupName = "gpu", InstanceType = "ml.g5.12xlarge", InstanceCount = 0, ExecutionRole = role },
      { InstanceGroupName = "cpu", InstanceType = "ml.m5.2xlarge", InstanceCount = 1, ExecutionRole = role } },
    Orchestrator = { Eks = { ClusterArn = eks.arn } }, VpcConfig = { Subnets = { subnets[1] }, SecurityGroupIds = { sg } } })
  FH.wait(function() return call("sagemaker", "DescribeCluster", { ClusterName = hp }).ClusterStatus == "InService" end)
  return { eks = eks, hp = hp, role = role, subnets = subnets, sg = sg }
end

-- gpu_cluster(call, name, hp, octet, count) -> conn: an ACTIVE EKS cluster
-- and an InService HyperPod cluster hp with one group "gpu" of count
-- ml.g5.12xlarge (4 GPUs each), once its nodes are Nodes; conn is
-- hypd.k8s on the EKS cluster (the training and inference tests)
function FH.gpu_cluster(call, name, hp, octet, count)
  local H = dofile("tests/lua/helpers.lua")
  local eks = H.eks_cluster(call, name, octet)
  local trust = json.encode { Version = "2012-10-17", Statement = { { Effect = "Allow",
    Principal = { Service = "sagemaker.amazonaws.com" }, Action = "sts:AssumeRole" } } }
  local role = call("iam", "CreateRole", { RoleName = name .. "-exec", AssumeRolePolicyDocument = trust }).Role.Arn
  local sg = call("ec2", "CreateSecurityGroup", { GroupName = name .. "-hp", Description = "hyperpod",
    VpcId = eks.resourcesVpcConfig.vpcId }).GroupId
  call("sagemaker", "CreateCluster", { ClusterName = hp, NodeRecovery = "None",
    InstanceGroups = { { InstanceGroupName = "gpu", InstanceType = "ml.g5.12xlarge", InstanceCount = count,
      ExecutionRole = role } },
    Orchestrator = { Eks = { ClusterArn = eks.arn } },
    VpcConfig = { Subnets = { eks.resourcesVpcConfig.subnetIds[1] }, SecurityGroupIds = { sg } } })
  FH.wait(function() return call("sagemaker", "DescribeCluster", { ClusterName = hp }).ClusterStatus == "InService" end)
  local conn = require("hypd.k8s").connect { cluster = name }
  FH.wait(function()
    local n = 0
    for _, node in ipairs(conn:list("v1", "Node") or {}) do
      if (node.metadata.labels or {})["node.kubernetes.io/instance-type"] == "ml.g5.12xlarge" then n = n + 1 end
    end
    return n == count
  end)
  return conn
end

-- the sandbox audit log in this process: mark() -> position; since(m) ->
-- {"service Operation" = n}, total (eks_helpers' own)
local E = dofile("tests/lua/eks_helpers.lua")
FH.mark, FH.since = E.mark, E.since
local store = require "hypd.store"

-- hypd's own audit of Kubernetes writes since m
function FH.k8s_writes(m)
  local out = {}
  for _, e in ipairs(store.events(m, 1000000) or {}) do
    if e.kind == "audit" and e.data.k8s and e.data.class ~= "read" and not e.data.refused then
      out[#out + 1] = e.data.k8s
    end
  end
  return out
end

return FH
