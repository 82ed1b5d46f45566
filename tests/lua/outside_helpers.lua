-- Helpers of the tests on clusters made outside hypd (cluster_import_test,
-- cluster_dependencies_test): loading them starts the in-process sandbox
-- (H.sandbox_here, the virtual clock; O.srv) and the tool registry; O.eks
-- and O.hyperpod make EKS and HyperPod clusters by direct calls to it, as a
-- person with the AWS SDK would make them.
--   local O = dofile("tests/lua/outside_helpers.lua")
local H = dofile("tests/lua/helpers.lua")
local json = require "hypd.json"
local task = require "hypd.task"

local O = {}
O.srv, O.OPTS = H.sandbox_here()
require("hypd.tool.loader").load()
O.PRINCIPAL = "arn:aws:iam::123456789012:user/sandbox" -- the sandbox's keys: hypd's own principal
O.ADMIN = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
O.VIEW = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy"

function O.call(service, operation, params)
  return require("hypd.aws").call(service, operation, params or {}, O.OPTS)
end
local call = O.call

local TRUST = json.encode { Version = "2012-10-17", Statement = { { Effect = "Allow",
  Principal = { Service = { "eks.amazonaws.com", "sagemaker.amazonaws.com" } }, Action = "sts:AssumeRole" } } }

-- eks(name, octet [, o]) -> the DescribeCluster of a new EKS cluster in a
-- 10.<octet>.0.0/16 VPC with a security group (H.eks_cluster; role_arn,
-- subnets and sg added). o.mode: its authenticationMode (API); o.bootstrap:
-- the creator's admin entry (true); o.wait = false: answer at once, while it
-- is CREATING
function O.eks(name, octet, o)
  o = o or {}
  return H.eks_cluster(call, name, octet, { mode = o.mode, bootstrap = o.bootstrap,
    wait = o.wait, security_group = true, trust = TRUST })
end

-- hyperpod(name, c) -> the ClusterArn of a HyperPod cluster orchestrated by
-- EKS cluster c (O.eks's answer), with one group of two g5 nodes, InService
function O.hyperpod(name, c)
  local bucket = name .. "-lcc"
  call("s3", "CreateBucket", { Bucket = bucket, CreateBucketConfiguration = { LocationConstraint = "us-west-2" } })
  call("s3", "PutObject", { Bucket = bucket, Key = "lcc/on_create.sh", Body = "#!/bin/bash\n" })
  local arn = call("sagemaker", "CreateCluster", { ClusterName = name, Orchestrator = { Eks = { ClusterArn = c.arn } },
    InstanceGroups = { { InstanceGroupName = "workers", InstanceType = "ml.g5.12xlarge", InstanceCount = 2,
      ExecutionRole = c.role_arn, ThreadsPerCore = 1,
      LifeCycleConfig = { SourceS3Uri = "s3://" .. bucket .. "/lcc/", OnCreate = "on_create.sh" } } },
    VpcConfig = { Subnets = { c.subnets[1] }, SecurityGroupIds = { c.sg } }, NodeRecovery = "Automatic" }).ClusterArn
  while call("sagemaker", "DescribeCluster", { ClusterName = name }).ClusterStatus ~= "InService" do task.sleep(30) end
  return arn
end

return O
