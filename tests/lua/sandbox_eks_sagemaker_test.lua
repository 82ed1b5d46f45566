-- The sandbox's EKS, SageMaker HyperPod and FSx for Lustre, driven by hypd's
-- own AWS client over loopback as a workflow would: prerequisites made with
-- real IAM, EC2 and S3 calls; an EKS cluster to ACTIVE under the virtual
-- clock; add-ons, access entries and pod identity; a HyperPod cluster to
-- InService with Running nodes, scaled, patched and faulted; batch node
-- operations (`Code` versus `ErrorCode`); training plans, MLflow and FSx.
local t = require "hypd.tap"
local aws = require "hypd.aws"
local core = require "hypd.core"
local faults = require "sandbox.faults"
local json = require "hypd.json"
local sandbox = require "sandbox"
local sys = require "hypd.sys"
local task = require "hypd.task"

local srv = assert(sandbox.start { listen = "127.0.0.1:0",
  credentials = { [os.getenv("AWS_ACCESS_KEY_ID")] = os.getenv("AWS_SECRET_ACCESS_KEY") } })
local port = srv.port
-- (check_constraints = false: what the sandbox refuses is under test, not the client)
local OPTS = { endpoint_url = "http://127.0.0.1:" .. port, region = "us-west-2", s3_path_style = true,
  check_constraints = false }
core.virtual(true)

local function call(service, op, params) return aws.call(service, op, params or {}, OPTS) end
local function try(service, op, params) return aws.try(service, op, params or {}, OPTS) end

local function refused(service, op, params, code, pattern, status)
  local out, err = try(service, op, params)
  t.fails(out, err, code, service .. " " .. op)
  if pattern then t.like(err.message, pattern) end
  if status then t.eq(err.status, status, op .. " answers HTTP " .. status) end
  return err
end

-- wait(check, limit) -> seconds waited: polls every 30 s until check() is true
local function wait(check, limit)
  local t0 = core.now()
  while not check() do
    if core.now() - t0 > (limit or 3600) then error("timed out waiting after " .. (core.now() - t0) .. " s", 2) end
    task.sleep(30)
  end
  return core.now() - t0
end

local TRUST = json.encode { Version = "2012-10-17", Statement = { { Effect = "Allow",
  Principal = { Service = { "eks.amazonaws.com", "sagemaker.amazonaws.com", "pods.eks.amazonaws.com" } },
  Action = { "sts:AssumeRole", "sts:TagSession" } } } }

local E = {} -- the prerequisites: roles, VPC, subnets, security group, bucket

local function eks_cluster(name, mode, extra)
  local p = { name = name, roleArn = E.eks_role, resourcesVpcConfig = { subnetIds = { E.sub_a, E.sub_b },
    securityGroupIds = { E.sg } }, accessConfig = mode and { authenticationMode = mode } or nil }
  for k, v in pairs(extra or {}) do p[k] = v end
  return call("eks", "CreateCluster", p).cluster
end

local function eks_status(name) return call("eks", "DescribeCluster", { name = name }).cluster.status end

t.test("prerequisites come from the sandbox's own IAM, EC2 and S3", function()
  E.eks_role = call("iam", "CreateRole", { RoleName = "eks-cluster-role", AssumeRolePolicyDocument = TRUST }).Role.Arn
  E.exec_role = call("iam", "CreateRole", { RoleName = "hp-exec", AssumeRolePolicyDocument = TRUST }).Role.Arn
  E.vpc = call("ec2", "CreateVpc", { CidrBlock = "10.90.0.0/16" }).Vpc.VpcId
  local function subnet(cidr, az)
    return call("ec2", "CreateSubnet", { VpcId = E.vpc, CidrBlock = cidr, AvailabilityZone = az }).Subnet.SubnetId
  end
  E.sub_a, E.sub_b = subnet("10.90.7.0/24", "us-west-2a"), subnet("10.90.8.0/24", "us-west-2b")
  E.sub_a2 = subnet("10.90.16.0/20", "us-west-2a")
  E.sg = call("ec2", "CreateSecurityGroup", { GroupName = "hp", Description = "hp", VpcId = E.vpc }).GroupId
  call("s3", "CreateBucket", { Bucket = "hypd-lcc", CreateBucketConfiguration = { LocationConstraint = "us-west-2" } })
  call("s3", "PutObject", { Bucket = "hypd-lcc", Key = "lcc/on_create.sh", Body = "#!/bin/bash\n" })
  t.like(E.sub_a, "^subnet%-")
end)

t.test("an EKS cluster goes CREATING to ACTIVE in 8 to 12 minutes with endpoint, OIDC issuer and CA", function()
  local c = eks_cluster("eks-cluster-demo", "API_AND_CONFIG_MAP")
  eks_cluster("eks-cm-only", nil)
  t.eq(c.status, "CREATING")
  t.eq(c.version, "1.34", "the newest supported version is the default")
  t.eq(c.endpoint, nil, "no endpoint before ACTIVE")
  t.like(c.identity.oidc.issuer, "^https://oidc%.eks%.us%-west%-2%.amazonaws%.com/id/%x+$")
  t.like(c.arn, "^arn:aws:eks:us%-west%-2:123456789012:cluster/eks%-cluster%-demo$")
  t.like(c.platformVersion, "^eks%.%d+$")
  t.eq(c.resourcesVpcConfig.vpcId, E.vpc)
  local waited = wait(function() return eks_status("eks-cluster-demo") == "ACTIVE" end)
  t.ok(waited >= 480 and waited <= 750, "took " .. waited .. " s")
  c = call("eks", "DescribeCluster", { name = "eks-cluster-demo" }).cluster
  t.like(c.endpoint, "^https://127%.0%.0%.1:%d+$", "its Kubernetes API serves on loopback")
  t.like(sys.b64decode(c.certificateAuthority.data), "BEGIN CERTIFICATE")
  wait(function() return eks_status("eks-cm-only") == "ACTIVE" end)
end)

t.test("the cluster creator gets an access entry with the cluster-admin policy", function()
  local entries = call("eks", "ListAccessEntries", { clusterName = "eks-cluster-demo" }).accessEntries
  t.eq(entries, { "arn:aws:iam::123456789012:user/sandbox" })
  local pol = call("eks", "ListAssociatedAccessPolicies", { clusterName = "eks-cluster-demo",
    principalArn = entries[1] }).associatedAccessPolicies
  t.eq(pol[1].policyArn, "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy")
  t.eq(pol[1].accessScope.type, "cluster")
end)

t.test("CreateCluster refuses a duplicate, a missing role, an unknown subnet and a single AZ", function()
  refused("eks", "CreateCluster", { name = "eks-cluster-demo", roleArn = E.eks_role,
    resourcesVpcConfig = { subnetIds = { E.sub_a, E.sub_b } } }, "ResourceInUseException", "already exists", 409)
  refused("eks", "CreateCluster", { name = "x1", roleArn = "arn:aws:iam::123456789012:role/nope",
    resourcesVpcConfig = { subnetIds = { E.sub_a, E.sub_b } } }, "InvalidParameterException", "nope")
  refused("eks", "CreateCluster", { name = "x2", roleArn = E.eks_role,
    resourcesVpcConfig = { subnetIds = { E.sub_a, "subnet-0000000000000000a" } } }, "InvalidParameterException",
    "subnet%-0000000000000000a")
  refused("eks", "CreateCluster", { name = "x3", roleArn = E.eks_role,
    resourcesVpcConfig = { subnetIds = { E.sub_a, E.sub_a2 } } }, "InvalidParameterException",
    "^Subnets specified must be in at least two different AZs$", 400)
end)

t.test("a retried CreateCluster with the same clientRequestToken answers the same cluster", function()
  local p = { name = "eks-retry", roleArn = E.eks_role, clientRequestToken = "tok-1",
    resourcesVpcConfig = { subnetIds = { E.sub_a, E.sub_b } }, accessConfig = { authenticationMode = "API" } }
  local first = call("eks", "CreateCluster", p).cluster
  local again = call("eks", "CreateCluster", p).cluster
  t.eq(again.arn, first.arn)
  t.eq(again.endpoint, first.endpoint)
  p.clientRequestToken = "tok-2"
  refused("eks", "CreateCluster", p, "ResourceInUseException", nil, 409)
  refused("eks", "DeleteCluster", { name = "eks-retry" }, "ResourceInUseException", "CREATING", 409)
  wait(function() return eks_status("eks-retry") == "ACTIVE" end)
  t.eq(call("eks", "DeleteCluster", { name = "eks-retry" }).cluster.status, "DELETING")
  wait(function() return try("eks", "DescribeCluster", { name = "eks-retry" }) == nil end)
end)

t.test("DescribeCluster of an unknown name answers 404 with EKS's message; ListClusters pages", function()
  refused("eks", "DescribeCluster", { name = "ghost" }, "ResourceNotFoundException",
    "^No cluster found for name: ghost%.$", 404)
  local p1 = call("eks", "ListClusters", { maxResults = 1 })
  t.eq(#p1.clusters, 1)
  t.ok(p1.nextToken, "a first page has a next token")
  local p2 = call("eks", "ListClusters", { maxResults = 1, nextToken = p1.nextToken })
  t.eq(p2.clusters, { "eks-cm-only" })
  t.eq(p2.nextToken, nil)
end)

t.test("a CONFIG_MAP cluster refuses access entries until its mode moves forward", function()
  t.eq(call("eks", "DescribeCluster", { name = "eks-cm-only" }).cluster.accessConfig.authenticationMode, "CONFIG_MAP")
  wait(function() return eks_status("eks-cm-only") == "ACTIVE" end)
  refused("eks", "CreateAccessEntry", { clusterName = "eks-cm-only", principalArn = E.exec_role },
    "InvalidRequestException", "authentication mode")
  local u = call("eks", "UpdateClusterConfig", { name = "eks-cm-only",
    accessConfig = { authenticationMode = "API_AND_CONFIG_MAP" } }).update
  t.eq({ u.status, u.type }, { "InProgress", "AccessConfigUpdate" })
  t.eq(eks_status("eks-cm-only"), "UPDATING")
  wait(function()
    return call("eks", "DescribeUpdate", { name = "eks-cm-only", updateId = u.id }).update.status == "Successful"
  end)
  t.eq(eks_status("eks-cm-only"), "ACTIVE")
  refused("eks", "UpdateClusterConfig", { name = "eks-cm-only", accessConfig = { authenticationMode = "CONFIG_MAP" } },
    "InvalidParameterException", "Unsupported authentication mode update")
end)

t.test("add-ons: unknown names and duplicates are refused; a known one is ACTIVE in 1 to 3 minutes", function()
  local c = eks_cluster("eks-young", "API")
  refused("eks", "CreateAddon", { clusterName = c.name, addonName = "vpc-cni" }, "InvalidRequestException", "ACTIVE")
  refused("eks", "CreateAddon", { clusterName = "eks-cluster-demo", addonName = "not-an-addon" },
    "InvalidParameterException", "not%-an%-addon")
  local a = call("eks", "CreateAddon", { clusterName = "eks-cluster-demo", addonName = "cert-manager",
    configurationValues = '{"replicaCount":1}' }).addon
  t.eq(a.status, "CREATING")
  t.eq(a.addonVersion, "v1.18.2-eksbuild.2")
  refused("eks", "CreateAddon", { clusterName = "eks-cluster-demo", addonName = "cert-manager" },
    "ResourceInUseException", nil, 409)
  local waited = wait(function()
    return call("eks", "DescribeAddon", { clusterName = "eks-cluster-demo", addonName = "cert-manager" })
      .addon.status == "ACTIVE"
  end)
  t.ok(waited >= 60 and waited <= 210, "took " .. waited .. " s")
  refused("eks", "DescribeAddon", { clusterName = "eks-cluster-demo", addonName = "vpc-cni" },
    "ResourceNotFoundException", "^No addon: vpc%-cni found in cluster: eks%-cluster%-demo$", 404)
  wait(function() return eks_status(c.name) == "ACTIVE" end)
end)

t.test("the training operator without the pod identity agent comes up CREATE_FAILED with a health issue", function()
  call("eks", "CreateAddon", { clusterName = "eks-cluster-demo",
    addonName = "amazon-sagemaker-hyperpod-training-operator" })
  local a
  wait(function()
    a = call("eks", "DescribeAddon", { clusterName = "eks-cluster-demo",
      addonName = "amazon-sagemaker-hyperpod-training-operator" }).addon
    return a.status ~= "CREATING"
  end)
  t.eq(a.status, "CREATE_FAILED")
  t.like(a.health.issues[1].message, "eks%-pod%-identity%-agent")
  call("eks", "DeleteAddon", { clusterName = "eks-cluster-demo", addonName = "amazon-sagemaker-hyperpod-training-operator" })
  wait(function()
    return #call("eks", "ListAddons", { clusterName = "eks-cluster-demo" }).addons == 1
  end)
  t.eq(call("eks", "ListAddons", { clusterName = "eks-cluster-demo" }).addons, { "cert-manager" })
end)

t.test("UpdateAddon goes UPDATING to ACTIVE with a tracked update", function()
  local u = call("eks", "UpdateAddon", { clusterName = "eks-cluster-demo", addonName = "cert-manager",
    addonVersion = "v1.17.2-eksbuild.1" }).update
  t.eq({ u.type, u.status }, { "AddonUpdate", "InProgress" })
  t.eq(call("eks", "DescribeAddon", { clusterName = "eks-cluster-demo", addonName = "cert-manager" }).addon.status,
    "UPDATING")
  wait(function()
    return call("eks", "DescribeUpdate", { name = "eks-cluster-demo", updateId = u.id,
      addonName = "cert-manager" }).update.status == "Successful"
  end)
  local a = call("eks", "DescribeAddon", { clusterName = "eks-cluster-demo", addonName = "cert-manager" }).addon
  t.eq({ a.status, a.addonVersion }, { "ACTIVE", "v1.17.2-eksbuild.1" })
end)

t.test("DescribeAddonVersions filters by add-on and Kubernetes version and marks one default", function()
  local out = call("eks", "DescribeAddonVersions", { addonName = "kube-proxy", kubernetesVersion = "1.31" }).addons
  t.eq(#out, 1)
  t.eq(out[1].addonName, "kube-proxy")
  t.eq(#out[1].addonVersions, 1)
  t.like(out[1].addonVersions[1].addonVersion, "^v1%.31%.%d+%-eksbuild%.%d+$")
  t.eq(out[1].addonVersions[1].compatibilities[1], { clusterVersion = "1.31", platformVersions = { "*" },
    defaultVersion = true })
  local all = call("eks", "DescribeAddonVersions", { kubernetesVersion = "1.34" }).addons
  local names = {}
  for _, a in ipairs(all) do names[a.addonName] = true end
  for _, n in ipairs { "vpc-cni", "coredns", "kube-proxy", "eks-pod-identity-agent", "cert-manager", "metrics-server",
    "aws-mountpoint-s3-csi-driver", "aws-fsx-csi-driver", "amazon-sagemaker-hyperpod-training-operator",
    "amazon-sagemaker-hyperpod-inference", "amazon-sagemaker-hyperpod-observability" } do
    t.ok(names[n], n .. " is offered")
  end
end)

t.test("access entries: create, refuse a duplicate, scope a policy to namespaces, disassociate, delete", function()
  local C = "eks-cluster-demo"
  local e = call("eks", "CreateAccessEntry", { clusterName = C, principalArn = E.exec_role }).accessEntry
  t.eq(e.type, "STANDARD")
  t.eq(e.username, "arn:aws:sts::123456789012:assumed-role/hp-exec/{{SessionName}}")
  refused("eks", "CreateAccessEntry", { clusterName = C, principalArn = E.exec_role }, "ResourceInUseException", nil, 409)
  local edit = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSEditPolicy"
  refused("eks", "AssociateAccessPolicy", { clusterName = C, principalArn = E.exec_role, policyArn = edit,
    accessScope = { type = "namespace" } }, "InvalidParameterException", "namespace")
  local p = call("eks", "AssociateAccessPolicy", { clusterName = C, principalArn = E.exec_role, policyArn = edit,
    accessScope = { type = "namespace", namespaces = { "team-a" } } }).associatedAccessPolicy
  t.eq(p.accessScope, { type = "namespace", namespaces = { "team-a" } })
  t.eq(call("eks", "ListAccessEntries", { clusterName = C, associatedPolicyArn = edit }).accessEntries, { E.exec_role })
  call("eks", "DisassociateAccessPolicy", { clusterName = C, principalArn = E.exec_role, policyArn = edit })
  t.eq(#call("eks", "ListAssociatedAccessPolicies", { clusterName = C, principalArn = E.exec_role })
    .associatedAccessPolicies, 0)
  call("eks", "DeleteAccessEntry", { clusterName = C, principalArn = E.exec_role })
  refused("eks", "DescribeAccessEntry", { clusterName = C, principalArn = E.exec_role }, "ResourceNotFoundException",
    nil, 404)
  local pols = call("eks", "ListAccessPolicies", {}).accessPolicies
  t.ok(#pols >= 5, "the access policies are listed")
end)

t.test("pod identity associations get a-ids, refuse a duplicate and can be deleted", function()
  local C = "eks-cluster-demo"
  local a = call("eks", "CreatePodIdentityAssociation", { clusterName = C, namespace = "aws-hyperpod",
    serviceAccount = "hp-training-operator-controller-manager", roleArn = E.exec_role }).association
  t.like(a.associationId, "^a%-%w+$")
  t.like(a.associationArn, "^arn:aws:eks:us%-west%-2:123456789012:podidentityassociation/eks%-cluster%-demo/a%-")
  refused("eks", "CreatePodIdentityAssociation", { clusterName = C, namespace = "aws-hyperpod",
    serviceAccount = "hp-training-operator-controller-manager", roleArn = E.exec_role }, "ResourceInUseException")
  local list = call("eks", "ListPodIdentityAssociations", { clusterName = C, namespace = "aws-hyperpod" }).associations
  t.eq(#list, 1)
  t.eq(call("eks", "DescribePodIdentityAssociation", { clusterName = C, associationId = a.associationId })
    .association.roleArn, E.exec_role)
  call("eks", "DeletePodIdentityAssociation", { clusterName = C, associationId = a.associationId })
  refused("eks", "DescribePodIdentityAssociation", { clusterName = C, associationId = a.associationId },
    "ResourceNotFoundException", nil, 404)
end)

-- HyperPod -----------------------------------------------------------------

local function group(name, itype, count, extra)
  local g = { InstanceGroupName = name, InstanceType = itype, InstanceCount = count, ExecutionRole = E.exec_role,
    LifeCycleConfig = { SourceS3Uri = "s3://hypd-lcc/lcc/", OnCreate = "on_create.sh" }, ThreadsPerCore = 1 }
  for k, v in pairs(extra or {}) do g[k] = v end
  return g
end

local function hp_params(name, groups, eks, extra)
  local p = { ClusterName = name, InstanceGroups = groups,
    Orchestrator = { Eks = { ClusterArn = "arn:aws:eks:us-west-2:123456789012:cluster/" .. (eks or "eks-cluster-demo") } },
    VpcConfig = { SecurityGroupIds = { E.sg }, Subnets = { E.sub_a } } }
  for k, v in pairs(extra or {}) do p[k] = v end
  return p
end

local function hp(name) return call("sagemaker", "DescribeCluster", { ClusterName = name }) end
local function nodes(name) return call("sagemaker", "ListClusterNodes", { ClusterName = name }).ClusterNodeSummaries end

t.test("HyperPod CreateCluster validates the EKS cluster, roles, lifecycle scripts, types and subnets", function()
  local V = "ValidationException"
  local workers = { group("workers", "ml.g5.8xlarge", 2) }
  local cm = eks_cluster("eks-cm-2", "CONFIG_MAP")
  refused("sagemaker", "CreateCluster", hp_params("hp-x", workers, "eks-cm-2"), V, "CREATING")
  refused("sagemaker", "CreateCluster", hp_params("hp-x", workers, "nope"), V, "does not exist")
  refused("sagemaker", "CreateCluster", hp_params("hp-x", { group("w", "ml.g5.8xlarge", 1,
    { ExecutionRole = "arn:aws:iam::123456789012:role/missing" }) }), V, "execution role")
  refused("sagemaker", "CreateCluster", hp_params("hp-x", { group("w", "ml.g5.8xlarge", 1,
    { LifeCycleConfig = { SourceS3Uri = "s3://hypd-lcc/empty/", OnCreate = "on_create.sh" } }) }), V, "No objects")
  refused("sagemaker", "CreateCluster", hp_params("hp-x", { group("w", "ml.nope.large", 1) }), V, "instanceType")
  refused("sagemaker", "CreateCluster", hp_params("hp-x", { group("w", "ml.g5.8xlarge", 1,
    { NetworkInterface = { InterfaceType = "efa-only" } }) }), V, "efa%-only")
  refused("sagemaker", "CreateCluster", hp_params("hp-x", workers, nil,
    { VpcConfig = { SecurityGroupIds = { E.sg }, Subnets = { "subnet-0000000000000000b" } } }), V, "Subnet")
  wait(function() return eks_status(cm.name) == "ACTIVE" end)
  refused("sagemaker", "CreateCluster", hp_params("hp-x", workers, "eks-cm-2"), V, "authentication mode")
end)

t.test("a HyperPod cluster goes Creating to InService with every node Running", function()
  local out = call("sagemaker", "CreateCluster", hp_params("hp-cluster-demo", { group("demo-ig", "ml.g5.8xlarge", 2),
    group("cpu", "ml.m5.xlarge", 1, { OverrideVpcConfig = { SecurityGroupIds = { E.sg }, Subnets = { E.sub_b } } }) }))
  t.like(out.ClusterArn, "^arn:aws:sagemaker:us%-west%-2:123456789012:cluster/%w+$")
  refused("sagemaker", "CreateCluster", hp_params("hp-cluster-demo", { group("g", "ml.g5.8xlarge", 1) }),
    "ResourceInUse")
  local d = hp("hp-cluster-demo")
  t.eq(d.ClusterStatus, "Creating")
  t.eq(d.NodeRecovery, "Automatic")
  t.eq({ d.InstanceGroups[1].CurrentCount, d.InstanceGroups[1].TargetCount }, { 0, 2 })
  t.eq(nodes("hp-cluster-demo")[1].InstanceStatus.Status, "Pending")
  local waited = wait(function() return hp("hp-cluster-demo").ClusterStatus == "InService" end)
  t.ok(waited >= 300, "took several minutes (" .. waited .. " s)")
  d = hp("hp-cluster-demo")
  t.eq({ d.InstanceGroups[1].Status, d.InstanceGroups[1].CurrentCount }, { "InService", 2 })
  local list = nodes("hp-cluster-demo")
  t.eq(#list, 3)
  for _, n in ipairs(list) do
    t.eq(n.InstanceStatus.Status, "Running")
    t.like(n.InstanceId, "^i%-%x+$")
  end
end)

t.test("DescribeClusterNode places a node in its subnet's zone with a private IP and DNS name", function()
  local id
  for _, n in ipairs(nodes("hp-cluster-demo")) do
    if n.InstanceGroupName == "cpu" then id = n.InstanceId end
  end
  local d = call("sagemaker", "DescribeClusterNode", { ClusterName = "hp-cluster-demo", NodeId = id }).NodeDetails
  t.eq(d.Placement, { AvailabilityZone = "us-west-2b", AvailabilityZoneId = "usw2-az1" })
  t.like(d.PrivatePrimaryIp, "^10%.90%.8%.%d+$")
  t.eq(d.PrivateDnsHostname, "ip-" .. d.PrivatePrimaryIp:gsub("%.", "-") .. ".us-west-2.compute.internal")
  t.eq(d.CapacityType, "OnDemand")
  refused("sagemaker", "DescribeClusterNode", { ClusterName = "hp-cluster-demo", NodeId = "i-00000000" }, "ResourceNotFound")
end)

t.test("UpdateCluster scales a group up and down, adds one and refuses changing an instance type", function()
  refused("sagemaker", "UpdateCluster", { ClusterName = "hp-cluster-demo",
    InstanceGroups = { group("demo-ig", "ml.g5.12xlarge", 2) } }, "ValidationException", "InstanceType")
  refused("sagemaker", "UpdateCluster", { ClusterName = "hp-cluster-demo",
    InstanceGroups = { group("demo-ig", "ml.g5.8xlarge", 2, { CapacityRequirements = { Spot = json.object() } }) } },
    "ValidationException", "CapacityRequirements")
  call("sagemaker", "UpdateCluster", { ClusterName = "hp-cluster-demo",
    InstanceGroups = { group("demo-ig", "ml.g5.8xlarge", 4), group("extra", "ml.c5.xlarge", 1) } })
  t.eq(hp("hp-cluster-demo").ClusterStatus, "Updating")
  wait(function() return hp("hp-cluster-demo").ClusterStatus == "InService" end)
  local d = hp("hp-cluster-demo")
  t.eq({ d.InstanceGroups[1].CurrentCount, d.InstanceGroups[1].TargetCount }, { 4, 4 })
  t.eq(d.InstanceGroups[3].InstanceGroupName, "extra")
  call("sagemaker", "UpdateCluster", { ClusterName = d.ClusterArn,
    InstanceGroups = { group("demo-ig", "ml.g5.8xlarge", 1) }, InstanceGroupsToDelete = { "extra" },
    NodeRecovery = "None" })
  wait(function() return hp("hp-cluster-demo").ClusterStatus == "InService" end)
  d = hp("hp-cluster-demo")
  t.eq(#d.InstanceGroups, 2)
  t.eq(d.InstanceGroups[1].CurrentCount, 1)
  t.eq(d.NodeRecovery, "None")
  t.eq(#nodes("hp-cluster-demo"), 2)
end)

t.test("UpdateCluster sets tiered storage and refuses autoscaling without a cluster role or continuous provisioning",
  function()
  local C = "hp-cluster-demo"
  refused("sagemaker", "UpdateCluster", { ClusterName = C, AutoScaling = { Mode = "Enable", AutoScalerType = "Karpenter" } },
    "ValidationException", "ClusterRole")
  refused("sagemaker", "UpdateCluster", { ClusterName = C, ClusterRole = E.exec_role,
    AutoScaling = { Mode = "Enable" } }, "ValidationException", "Continuous")
  refused("sagemaker", "UpdateCluster", { ClusterName = C, TieredStorageConfig = { Mode = "Enable",
    InstanceMemoryAllocationPercentage = 5 } }, "ValidationException", "InstanceMemoryAllocationPercentage")
  call("sagemaker", "UpdateCluster", { ClusterName = C, TieredStorageConfig = { Mode = "Enable",
    InstanceMemoryAllocationPercentage = 30 } })
  refused("sagemaker", "UpdateCluster", { ClusterName = C, NodeRecovery = "None" }, "ValidationException", "Updating")
  wait(function() return hp(C).ClusterStatus == "InService" end)
  t.eq(hp(C).TieredStorageConfig, { Mode = "Enable", InstanceMemoryAllocationPercentage = 30 })
end)

t.test("batch delete reports failures with Code; reboot and replace report them with ErrorCode", function()
  local list = nodes("hp-cluster-demo")
  local a, b = list[1].InstanceId, list[2].InstanceId
  local r = call("sagemaker", "BatchRebootClusterNodes", { ClusterName = "hp-cluster-demo",
    NodeIds = { a, "i-0123456789abcdef0" } })
  t.eq(r.Successful, { a })
  t.eq(r.Failed[1].ErrorCode, "InstanceIdNotFound")
  t.eq(r.Failed[1].Code, nil)
  r = call("sagemaker", "BatchReplaceClusterNodes", { ClusterName = "hp-cluster-demo", NodeIds = { a } })
  t.eq(r.Failed[1].ErrorCode, "InstanceIdInUse")
  wait(function()
    for _, n in ipairs(nodes("hp-cluster-demo")) do
      if n.InstanceStatus.Status ~= "Running" then return false end
    end
    return true
  end)
  r = call("sagemaker", "BatchReplaceClusterNodes", { ClusterName = "hp-cluster-demo", NodeIds = { a } })
  t.eq(r.Successful, { a })
  r = call("sagemaker", "BatchDeleteClusterNodes", { ClusterName = "hp-cluster-demo", NodeIds = { b, "i-0123456789abcdef0" } })
  t.eq(r.Successful, { b })
  t.eq(r.Failed[1].Code, "NodeIdNotFound")
  t.eq(r.Failed[1].ErrorCode, nil)
  wait(function()
    local l = nodes("hp-cluster-demo")
    return #l == 1 and l[1].InstanceStatus.Status == "Running"
  end)
  t.ok(nodes("hp-cluster-demo")[1].InstanceId ~= a, "the replaced node has a new instance id")
end)

t.test("UpdateClusterSoftware goes SystemUpdating then InService with the new image", function()
  call("sagemaker", "UpdateClusterSoftware", { ClusterName = "hp-cluster-demo" })
  t.eq(hp("hp-cluster-demo").ClusterStatus, "SystemUpdating")
  wait(function() return hp("hp-cluster-demo").ClusterStatus == "InService" end)
  local g = hp("hp-cluster-demo").InstanceGroups[1]
  t.eq(g.SoftwareUpdateStatus, "Succeeded")
  t.ok(nodes("hp-cluster-demo")[1].LastSoftwareUpdateTime, "nodes record the update")
end)

t.test("training plans carry their reserved zone and bind a group to it", function()
  local list = call("sagemaker", "ListTrainingPlans", { Filters = { { Name = "Status", Value = "Active" } } })
    .TrainingPlanSummaries
  t.eq(#list, 1)
  local p = call("sagemaker", "DescribeTrainingPlan", { TrainingPlanName = list[1].TrainingPlanName })
  -- reserved where EC2 offers ml.p5.48xlarge (us-west-2b and us-west-2c in the sandbox)
  t.eq(p.ReservedCapacitySummaries[1].AvailabilityZone, "us-west-2b")
  t.eq(p.AvailableInstanceCount, 2)
  refused("sagemaker", "DescribeTrainingPlan", { TrainingPlanName = "nope" }, "ResourceNotFound")
  refused("sagemaker", "UpdateCluster", { ClusterName = "hp-cluster-demo", InstanceGroups = {
    group("p5", "ml.p5.48xlarge", 1, { TrainingPlanArn = p.TrainingPlanArn,
      OverrideVpcConfig = { SecurityGroupIds = { E.sg }, Subnets = { E.sub_a } } }) } },
    "ValidationException", "us%-west%-2b")
end)

t.test("an insufficient_capacity fault fails the cluster with an InsufficientCapacity message", function()
  assert(faults.configure { insufficient_capacity = { { instance_type = "ml.p5.48xlarge", zone = "usw2-az2" } } })
  local eks = eks_cluster("eks-two", "API")
  wait(function() return eks_status(eks.name) == "ACTIVE" end)
  call("sagemaker", "CreateCluster", hp_params("hp-nocap", { group("p5", "ml.p5.48xlarge", 2) }, "eks-two"))
  wait(function() return hp("hp-nocap").ClusterStatus ~= "Creating" end)
  local d = hp("hp-nocap")
  t.eq(d.ClusterStatus, "Failed")
  t.like(d.FailureMessage, "InsufficientCapacity")
  t.like(d.FailureMessage, "ml%.p5%.48xlarge")
  t.eq(d.InstanceGroups[1].Status, "Failed")
  assert(faults.configure {})
end)

t.test("a failing_nodes fault leaves a node in Failure with a message", function()
  assert(faults.configure { failing_nodes = { { cluster = "hp-cluster-demo", instance_group = "demo-ig", count = 1 } } })
  call("sagemaker", "UpdateCluster", { ClusterName = "hp-cluster-demo",
    InstanceGroups = { group("demo-ig", "ml.g5.8xlarge", 2) } })
  wait(function() return hp("hp-cluster-demo").ClusterStatus == "InService" end)
  assert(faults.configure {})
  local failed
  for _, n in ipairs(nodes("hp-cluster-demo")) do
    if n.InstanceStatus.Status == "Failure" then failed = n end
  end
  t.ok(failed, "one node is in Failure")
  t.like(failed.InstanceStatus.Message, "health")
  t.eq(hp("hp-cluster-demo").InstanceGroups[1].Status, "Degraded")
end)

t.test("automatic node recovery replaces a failed node with a new instance", function()
  local failed
  for _, n in ipairs(nodes("hp-cluster-demo")) do
    if n.InstanceStatus.Status == "Failure" then failed = n.InstanceId end
  end
  call("sagemaker", "UpdateCluster", { ClusterName = "hp-cluster-demo", NodeRecovery = "Automatic" })
  wait(function() return hp("hp-cluster-demo").InstanceGroups[1].Status == "InService" end)
  local ids = {}
  for _, n in ipairs(nodes("hp-cluster-demo")) do
    if n.InstanceGroupName == "demo-ig" then
      ids[#ids + 1] = n.InstanceId
      t.eq(n.InstanceStatus.Status, "Running")
    end
  end
  t.eq(#ids, 2)
  for _, id in ipairs(ids) do t.ok(id ~= failed, "the failed node is gone") end
  t.eq(hp("hp-cluster-demo").NodeRecovery, "Automatic")
end)

t.test("ListClusters filters by name and sorts by name", function()
  local out = call("sagemaker", "ListClusters", { NameContains = "hp-", SortBy = "NAME", SortOrder = "Ascending" })
  local names = {}
  for _, s in ipairs(out.ClusterSummaries) do names[#names + 1] = s.ClusterName end
  t.eq(names, { "hp-cluster-demo", "hp-nocap" })
  local page = call("sagemaker", "ListClusters", { MaxResults = 1 })
  t.eq(#page.ClusterSummaries, 1)
  t.ok(page.NextToken, "a next token")
end)

t.test("an MLflow tracking server goes Creating to Created, is listed, then deleted", function()
  refused("sagemaker", "CreateMlflowTrackingServer", { TrackingServerName = "mlf", ArtifactStoreUri = "s3://missing-b",
    RoleArn = E.exec_role }, "ValidationException", "bucket")
  local arn = call("sagemaker", "CreateMlflowTrackingServer", { TrackingServerName = "mlf",
    ArtifactStoreUri = "s3://hypd-lcc/mlflow", RoleArn = E.exec_role, TrackingServerSize = "Small" }).TrackingServerArn
  t.like(arn, ":mlflow%-tracking%-server/mlf$")
  t.eq(call("sagemaker", "DescribeMlflowTrackingServer", { TrackingServerName = "mlf" }).TrackingServerStatus, "Creating")
  wait(function()
    return call("sagemaker", "DescribeMlflowTrackingServer", { TrackingServerName = "mlf" }).TrackingServerStatus
      == "Created"
  end)
  t.eq(#call("sagemaker", "ListMlflowTrackingServers", {}).TrackingServerSummaries, 1)
  call("sagemaker", "DeleteMlflowTrackingServer", { TrackingServerName = "mlf" })
  wait(function()
    return try("sagemaker", "DescribeMlflowTrackingServer", { TrackingServerName = "mlf" }) == nil
  end)
end)

t.test("FSx for Lustre checks capacity and subnets, becomes AVAILABLE and is deleted", function()
  local base = { FileSystemType = "LUSTRE", SubnetIds = { E.sub_a }, SecurityGroupIds = { E.sg },
    LustreConfiguration = { DeploymentType = "PERSISTENT_2", PerUnitStorageThroughput = 250 } }
  local function with(cap, extra)
    local p = { StorageCapacity = cap }
    for k, v in pairs(base) do p[k] = v end
    for k, v in pairs(extra or {}) do p[k] = v end
    return p
  end
  refused("fsx", "CreateFileSystem", with(1000), "BadRequest", "1200, 2400, or a multiple of 2400")
  refused("fsx", "CreateFileSystem", with(3600), "BadRequest")
  refused("fsx", "CreateFileSystem", with(1200, { LustreConfiguration = { DeploymentType = "PERSISTENT_2",
    PerUnitStorageThroughput = 100 } }), "InvalidPerUnitStorageThroughput")
  refused("fsx", "CreateFileSystem", with(1200, { SubnetIds = { "subnet-0000000000000000c" } }), "InvalidNetworkSettings")
  refused("fsx", "CreateFileSystem", with(1200), "InvalidNetworkSettings", "port 988")
  -- Lustre traffic within the group, as FSx requires of its groups
  call("ec2", "AuthorizeSecurityGroupIngress", { GroupId = E.sg, IpPermissions = { { IpProtocol = "tcp",
    FromPort = 988, ToPort = 988, UserIdGroupPairs = { { GroupId = E.sg } } } } })
  local fs = call("fsx", "CreateFileSystem", with(4800)).FileSystem
  t.eq(fs.Lifecycle, "CREATING")
  t.like(fs.FileSystemId, "^fs%-%x+$")
  t.eq(fs.DNSName, fs.FileSystemId .. ".fsx.us-west-2.amazonaws.com")
  t.like(fs.LustreConfiguration.MountName, "^%l+$")
  t.eq(fs.VpcId, E.vpc)
  wait(function()
    return call("fsx", "DescribeFileSystems", { FileSystemIds = { fs.FileSystemId } }).FileSystems[1].Lifecycle
      == "AVAILABLE"
  end)
  refused("fsx", "DescribeFileSystems", { FileSystemIds = { "fs-0123456789abcdef0" } }, "FileSystemNotFound")
  local mount = fs.LustreConfiguration.MountName
  refused("sagemaker", "UpdateCluster", { ClusterName = "hp-cluster-demo", InstanceGroups = { group("fsx-ig",
    "ml.c5.xlarge", 1, { InstanceStorageConfigs = { { FsxLustreConfig = {
      DnsName = "fs-0badc0ffee0000000.fsx.us-west-2.amazonaws.com", MountName = mount } } } }) } },
    "ValidationException", "FsxLustreConfig")
  call("sagemaker", "UpdateCluster", { ClusterName = "hp-cluster-demo", InstanceGroups = { group("fsx-ig",
    "ml.c5.xlarge", 1, { InstanceStorageConfigs = { { FsxLustreConfig = { DnsName = fs.DNSName, MountName = mount,
    MountPath = "/fsx" } } } }) } })
  wait(function() return hp("hp-cluster-demo").ClusterStatus == "InService" end)
  t.eq(hp("hp-cluster-demo").InstanceGroups[3].InstanceStorageConfigs[1].FsxLustreConfig.MountPath, "/fsx")
  t.eq(call("fsx", "DeleteFileSystem", { FileSystemId = fs.FileSystemId }).Lifecycle, "DELETING")
  wait(function() return #call("fsx", "DescribeFileSystems", {}).FileSystems == 0 end)
end)

t.test("deleting clusters: HyperPod goes Deleting then away; EKS goes DELETING then away with its add-ons", function()
  call("sagemaker", "DeleteCluster", { ClusterName = "hp-cluster-demo" })
  t.eq(hp("hp-cluster-demo").ClusterStatus, "Deleting")
  wait(function() return try("sagemaker", "DescribeCluster", { ClusterName = "hp-cluster-demo" }) == nil end)
  refused("sagemaker", "DescribeCluster", { ClusterName = "hp-cluster-demo" }, "ResourceNotFound")
  t.eq(call("eks", "DeleteCluster", { name = "eks-cluster-demo" }).cluster.status, "DELETING")
  wait(function() return try("eks", "DescribeCluster", { name = "eks-cluster-demo" }) == nil end)
  refused("eks", "ListAddons", { clusterName = "eks-cluster-demo" }, "ResourceNotFoundException", nil, 404)
end)

t.test("the audit log names each mutation's target", function()
  local http = require "hypd.http"
  local r = http.request { url = OPTS.endpoint_url .. "/_sandbox/audit" }
  local seen = {}
  for _, e in ipairs(json.decode(r.body)) do seen[e.service .. " " .. e.operation .. " " .. e.target] = true end
  t.ok(seen["eks CreateCluster eks-cluster-demo"], "EKS CreateCluster")
  t.ok(seen["sagemaker CreateCluster hp-cluster-demo"], "SageMaker CreateCluster")
  t.ok(seen["eks CreateAddon eks-cluster-demo/cert-manager"], "CreateAddon")
end)

t.cleanup(function()
  core.virtual(false)
  srv:stop()
end)
