-- The sandbox's EKS managed node groups, EC2 DescribeRegions and EC2's
-- paging. In this process (hypd's own AWS and Kubernetes clients, virtual
-- clock): what CreateNodegroup and UpdateNodegroupConfig refuse, in EKS's
-- words; CREATING -> ACTIVE, UPDATING and DELETING in minutes of simulated
-- time; the instances joining Kubernetes as Nodes with EKS's labels, the
-- group's labels and taints and capacity from the instance type, more
-- Nodes when it scales up, fewer when down, cordoned and then gone when it
-- is deleted; capacity faults and unknown instance types as health issues;
-- every EC2 Describe* the model pages cut by MaxResults. Then a `hypd
-- sandbox` process judged by real clients: boto3's paginators, the aws
-- CLI's --max-items, and kubectl watching a node group's Nodes come and go.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
local srv = H.sandbox_here()
local E = dofile("tests/lua/eks_helpers.lua")
local aws, core, faults, json, k8s, task = require "hypd.aws", require "hypd.core", require "sandbox.faults",
  require "hypd.json", require "hypd.k8s", require "hypd.task"
local call = E.call

local EKS, OTHER = "sng-eks", "sng-other"
local c, role, subnets, other_subnet
local first = {} -- the names of the gpu group's first Nodes

local function esc(s) return (s:gsub("[%^%$%(%)%%%.%[%]%*%+%-%?]", "%%%0")) end

-- err(service, op, params, code [, message]) -> the error, checked
-- (check_constraints = false: what the sandbox refuses is under test, not the client)
local RAW = { check_constraints = false }
for k, v in pairs(E.OPTS) do RAW[k] = v end

local function err(service, op, params, code, message)
  local v, e = aws.try(service, op, params, RAW)
  t.fails(v, e, code, op)
  if message then t.eq(e and e.message, message, op) end
  return e
end

local function ng(name) return call("eks", "DescribeNodegroup", { clusterName = EKS, nodegroupName = name }).nodegroup end

local function create(name, extra)
  local p = { clusterName = EKS, nodegroupName = name, nodeRole = role, subnets = subnets }
  for k, v in pairs(extra or {}) do p[k] = v end
  return call("eks", "CreateNodegroup", p).nodegroup
end

-- until_status(name, from) -> the group and the simulated seconds it spent in status `from`
local function until_status(name, from)
  local t0 = core.now()
  local g = ng(name)
  while g.status == from do
    task.sleep(5)
    g = ng(name)
  end
  return g, core.now() - t0
end

local conn
local function nodes(group)
  conn = conn or k8s.connect { cluster = EKS, region = "us-west-2" }
  local sel = group and { ["eks.amazonaws.com/nodegroup"] = group } or "eks.amazonaws.com/nodegroup"
  local list = assert(conn:list("v1", "Node", { labels = sel }))
  table.sort(list, function(a, b) return a.metadata.name < b.metadata.name end)
  return list
end

local function ready(node)
  for _, cond in ipairs(node.status.conditions or {}) do
    if cond.type == "Ready" then return cond.status == "True" end
  end
  return false
end

local function trust(service)
  return json.encode { Version = "2012-10-17", Statement = { { Effect = "Allow", Principal = { Service = service },
    Action = "sts:AssumeRole" } } }
end

t.test("an ACTIVE EKS cluster with two subnets, a node role, and a subnet of another VPC", function()
  c = H.eks_cluster(call, EKS, 71)
  subnets = c.resourcesVpcConfig.subnetIds
  role = call("iam", "CreateRole", { RoleName = "sng-node", AssumeRolePolicyDocument = trust("ec2.amazonaws.com") })
    .Role.Arn
  local vpc = call("ec2", "CreateVpc", { CidrBlock = "10.72.0.0/16" }).Vpc.VpcId
  other_subnet = call("ec2", "CreateSubnet", { VpcId = vpc, CidrBlock = "10.72.1.0/24",
    AvailabilityZone = "us-west-2a" }).Subnet.SubnetId
  -- a second cluster, still CREATING
  call("eks", "CreateCluster", { name = OTHER, roleArn = c.roleArn, resourcesVpcConfig = { subnetIds = subnets },
    accessConfig = { authenticationMode = "API" } })
  t.eq(c.status, "ACTIVE")
  t.eq(call("eks", "ListNodegroups", { clusterName = EKS }).nodegroups, {}, "a new cluster has no node groups")
end)

t.test("CreateNodegroup refuses what EKS refuses, in EKS's words", function()
  local base = { clusterName = EKS, nodegroupName = "bad", nodeRole = role, subnets = subnets }
  local function with(changes)
    local p = {}
    for k, v in pairs(base) do p[k] = v end
    for k, v in pairs(changes) do p[k] = v end
    return p
  end
  err("eks", "CreateNodegroup", with { clusterName = "sng-missing" }, "ResourceNotFoundException",
    "No cluster found for name: sng-missing.")
  err("eks", "CreateNodegroup", with { clusterName = OTHER }, "InvalidRequestException",
    "Cluster '" .. OTHER .. "' is not in ACTIVE status")
  err("eks", "CreateNodegroup", with { nodegroupName = "-bad" }, "InvalidParameterException")
  err("eks", "CreateNodegroup", with { nodeRole = "arn:aws:iam::123456789012:role/sng-missing" },
    "InvalidParameterException")
  err("eks", "CreateNodegroup", with { subnets = { "subnet-0123456789abcdef0" } }, "InvalidParameterException",
    "The subnet ID 'subnet-0123456789abcdef0' does not exist")
  local e = err("eks", "CreateNodegroup", with { subnets = { other_subnet } }, "InvalidParameterException")
  t.like(e.message, "is not in the VPC of cluster " .. esc(EKS))
  err("eks", "CreateNodegroup", with { scalingConfig = { minSize = 3, maxSize = 5, desiredSize = 2 } },
    "InvalidParameterException", "minSize can't be greater than desiredSize")
  err("eks", "CreateNodegroup", with { scalingConfig = { minSize = 1, maxSize = 2, desiredSize = 3 } },
    "InvalidParameterException", "desiredSize can't be greater than maxSize")
  err("eks", "CreateNodegroup", with { scalingConfig = { minSize = 0, maxSize = 0, desiredSize = 0 } },
    "InvalidParameterException", "maxSize can't be less than 1")
  err("eks", "CreateNodegroup", with { capacityType = "RESERVED" }, "InvalidParameterException")
  err("eks", "CreateNodegroup", with { taints = { { key = "a", effect = "NoSchedule" } } }, "InvalidParameterException")
  err("eks", "CreateNodegroup", with { labels = { ["eks.amazonaws.com/nodegroup"] = "x" } }, "InvalidParameterException")
  err("eks", "CreateNodegroup", with { version = "1.99" }, "InvalidParameterException")
  t.eq(call("eks", "ListNodegroups", { clusterName = EKS }).nodegroups, {}, "none was made")
end)

t.test("a node group goes CREATING to ACTIVE in minutes; its nodes join Kubernetes with EKS's labels", function()
  local g = create("gpu", { instanceTypes = { "g5.2xlarge" }, scalingConfig = { minSize = 1, maxSize = 4, desiredSize = 2 },
    labels = { team = "ml" }, taints = { { key = "nvidia.com/gpu", value = "true", effect = "NO_SCHEDULE" } },
    tags = { owner = "test" } })
  t.eq(g.status, "CREATING")
  t.like(g.nodegroupArn, "^arn:aws:eks:us%-west%-2:123456789012:nodegroup/" .. esc(EKS) .. "/gpu/%x+%-")
  t.eq({ g.amiType, g.capacityType, g.diskSize, g.version }, { "AL2023_x86_64_NVIDIA", "ON_DEMAND", 20, c.version })
  t.like(g.releaseVersion, "^" .. esc(c.version) .. "%.%d+%-%d+$")
  t.like(g.resources.autoScalingGroups[1].name, "^eks%-gpu%-")
  t.eq(#nodes("gpu"), 0, "no Node while CREATING")
  local waited
  g, waited = until_status("gpu", "CREATING")
  t.eq(g.status, "ACTIVE")
  t.ok(waited >= 150 and waited <= 305, "CREATING for 2.5 to 5 simulated minutes: " .. waited)
  task.sleep(1)
  local list = nodes("gpu")
  t.eq(#list, 2, "two Nodes")
  local zones = {}
  for _, n in ipairs(list) do
    local l = n.metadata.labels
    t.like(n.metadata.name, "^ip%-10%-71%-%d+%-%d+%.us%-west%-2%.compute%.internal$")
    t.eq({ l["eks.amazonaws.com/nodegroup"], l["eks.amazonaws.com/capacityType"], l["node.kubernetes.io/instance-type"],
      l["beta.kubernetes.io/instance-type"], l["kubernetes.io/hostname"], l["topology.kubernetes.io/region"],
      l["kubernetes.io/os"], l["kubernetes.io/arch"], l.team },
      { "gpu", "ON_DEMAND", "g5.2xlarge", "g5.2xlarge", n.metadata.name, "us-west-2", "linux", "amd64", "ml" })
    t.like(l["eks.amazonaws.com/nodegroup-image"], "^ami%-%x+$")
    t.like(l["topology.k8s.aws/zone-id"], "^usw2%-az%d$")
    zones[l["topology.kubernetes.io/zone"]] = true
    t.like(n.spec.providerID, "^aws:///us%-west%-2[ab]/i%-%x+$")
    t.eq(n.spec.taints, { { key = "nvidia.com/gpu", value = "true", effect = "NoSchedule" } })
    t.eq({ n.status.capacity.cpu, n.status.capacity["nvidia.com/gpu"], n.status.capacity.memory },
      { "8", "1", "33030144Ki" }, "capacity from the g5.2xlarge data (32 GiB less 512 MiB)")
    t.ok(ready(n), "Ready")
    t.like(n.status.nodeInfo.osImage, "^Amazon Linux 2023")
  end
  t.ok(zones["us-west-2a"] and zones["us-west-2b"], "spread over both subnets' zones")
  for _, n in ipairs(list) do first[n.metadata.name] = true end
end)

t.test("DescribeNodegroup, ListNodegroups (paged), duplicates and retried creates", function()
  create("small", { instanceTypes = { "t3.large" } })
  local g = ng("small")
  t.eq({ g.scalingConfig, g.instanceTypes, g.amiType }, { { minSize = 1, maxSize = 2, desiredSize = 2 }, { "t3.large" },
    "AL2023_x86_64_STANDARD" }, "EKS's defaults")
  local p1 = call("eks", "ListNodegroups", { clusterName = EKS, maxResults = 1 })
  t.eq(p1.nodegroups, { "gpu" })
  t.ok(p1.nextToken, "a next page")
  t.eq(call("eks", "ListNodegroups", { clusterName = EKS, maxResults = 1, nextToken = p1.nextToken }).nodegroups,
    { "small" })
  err("eks", "CreateNodegroup", { clusterName = EKS, nodegroupName = "small", nodeRole = role, subnets = subnets },
    "ResourceInUseException", "NodeGroup already exists with name small and cluster name " .. EKS)
  local a = create("tok", { clientRequestToken = "same-token" })
  local b = create("tok", { clientRequestToken = "same-token" })
  t.eq(a.nodegroupArn, b.nodegroupArn, "the same token is the same create")
  err("eks", "DescribeNodegroup", { clusterName = EKS, nodegroupName = "missing" }, "ResourceNotFoundException",
    "No node group found for name: missing.")
  local tags = call("eks", "ListTagsForResource", { resourceArn = ng("gpu").nodegroupArn }).tags
  t.eq(tags, { owner = "test" }, "tags by the node group's ARN")
end)

t.test("UpdateNodegroupConfig refuses a busy group and sizes that do not fit, in EKS's words", function()
  err("eks", "UpdateNodegroupConfig", { clusterName = EKS, nodegroupName = "tok", scalingConfig = { desiredSize = 1 } },
    "ResourceInUseException", "Nodegroup cannot be updated as it is currently not in Active State")
  err("eks", "UpdateNodegroupConfig", { clusterName = EKS, nodegroupName = "gpu", scalingConfig = { minSize = 3 } },
    "InvalidParameterException", "Minimum capacity 3 can't be greater than desired size 2")
  err("eks", "UpdateNodegroupConfig", { clusterName = EKS, nodegroupName = "gpu", scalingConfig = { desiredSize = 5 } },
    "InvalidParameterException", "desiredSize can't be greater than maxSize")
  err("eks", "UpdateNodegroupConfig", { clusterName = EKS, nodegroupName = "gpu" }, "InvalidParameterException",
    "No changes needed")
  t.eq(ng("gpu").status, "ACTIVE", "nothing changed")
end)

t.test("scaling up: the new size reads back at once, UPDATING, then more Nodes; labels and taints follow", function()
  local before = {}
  for _, n in ipairs(nodes("gpu")) do before[n.metadata.name] = true end
  local u = call("eks", "UpdateNodegroupConfig", { clusterName = EKS, nodegroupName = "gpu",
    scalingConfig = { desiredSize = 4 }, labels = { addOrUpdateLabels = { tier = "a" }, removeLabels = { "team" } },
    taints = { removeTaints = { { key = "nvidia.com/gpu", value = "true", effect = "NO_SCHEDULE" } } } }).update
  t.eq({ u.status, u.type }, { "InProgress", "ConfigUpdate" })
  t.eq(u.params[1], { type = "DesiredSize", value = "4" })
  local g = ng("gpu")
  t.eq({ g.status, g.scalingConfig.desiredSize }, { "UPDATING", 4 }, "the configuration reads back at once")
  local waited
  g, waited = until_status("gpu", "UPDATING")
  t.eq(g.status, "ACTIVE")
  t.ok(waited >= 55 and waited <= 155, "UPDATING for 1 to 2.5 simulated minutes: " .. waited)
  t.eq(call("eks", "DescribeUpdate", { name = EKS, updateId = u.id, nodegroupName = "gpu" }).update.status,
    "Successful")
  err("eks", "DescribeUpdate", { name = EKS, updateId = u.id }, "ResourceNotFoundException")
  t.eq(g.labels, { tier = "a" })
  t.eq(g.taints, {})
  task.sleep(1)
  local list = nodes("gpu")
  t.eq(#list, 4, "four Nodes")
  local kept = 0
  for _, n in ipairs(list) do
    if before[n.metadata.name] then kept = kept + 1 end
    t.eq({ n.metadata.labels.tier, n.metadata.labels.team, n.spec.taints }, { "a", nil, nil }, n.metadata.name)
  end
  t.eq(kept, 2, "the first two Nodes stayed")
end)

t.test("scaling down removes the newest Nodes", function()
  call("eks", "UpdateNodegroupConfig", { clusterName = EKS, nodegroupName = "gpu", scalingConfig = { desiredSize = 1 } })
  until_status("gpu", "UPDATING")
  task.sleep(1)
  local list = nodes("gpu")
  t.eq(#list, 1, "one Node left")
  t.ok(first[list[1].metadata.name], "one of the first two, not one added later: " .. list[1].metadata.name)
end)

t.test("a capacity fault: a creation ends CREATE_FAILED, a scale-up DEGRADED, as EKS reports them", function()
  assert(faults.configure { insufficient_capacity = { { instance_type = "p5.48xlarge" }, { instance_type = "g5.2xlarge" } } })
  t.cleanup(function() faults.configure {} end)
  create("p5", { instanceTypes = { "p5.48xlarge" }, scalingConfig = { minSize = 0, maxSize = 2, desiredSize = 1 } })
  local g = until_status("p5", "CREATING")
  t.eq(g.status, "CREATE_FAILED")
  t.eq(g.health.issues[1].code, "AsgInstanceLaunchFailures")
  t.like(g.health.issues[1].message, "^Could not launch On%-Demand Instances%. InsufficientInstanceCapacity")
  local u = call("eks", "UpdateNodegroupConfig", { clusterName = EKS, nodegroupName = "gpu",
    scalingConfig = { desiredSize = 2 } }).update
  g = until_status("gpu", "UPDATING")
  t.eq(g.status, "DEGRADED")
  local d = call("eks", "DescribeUpdate", { name = EKS, updateId = u.id, nodegroupName = "gpu" }).update
  t.eq({ d.status, d.errors[1].errorCode }, { "Failed", "AsgInstanceLaunchFailures" })
  t.eq(#nodes("gpu"), 1, "no new Node")
  faults.configure {}
end)

t.test("an instance type EC2 does not have fails the creation (Ec2InstanceTypeDoesNotExist); ml. types are not EC2's",
  function()
  create("typo", { instanceTypes = { "ml.g5.xlarge" } })
  local g = until_status("typo", "CREATING")
  t.eq(g.status, "CREATE_FAILED")
  t.eq(g.health.issues[1].code, "Ec2InstanceTypeDoesNotExist")
  t.eq(g.health.issues[1].message, "The following supplied instance types do not exist: [ml.g5.xlarge]")
end)

t.test("deleting: DELETING with the Nodes cordoned, then the group and its Nodes are gone", function()
  until_status("small", "CREATING")
  t.eq(#nodes("small"), 2)
  err("eks", "DeleteNodegroup", { clusterName = EKS, nodegroupName = "missing" }, "ResourceNotFoundException")
  local g = call("eks", "DeleteNodegroup", { clusterName = EKS, nodegroupName = "small" }).nodegroup
  t.eq(g.status, "DELETING")
  t.eq(call("eks", "DeleteNodegroup", { clusterName = EKS, nodegroupName = "small" }).nodegroup.status, "DELETING",
    "a second delete answers the same")
  task.sleep(1)
  for _, n in ipairs(nodes("small")) do
    t.eq(n.spec.unschedulable, true, "cordoned")
    t.eq(n.spec.taints, { { key = "node.kubernetes.io/unschedulable", effect = "NoSchedule" } })
  end
  local t0 = core.now()
  local _, e
  repeat
    task.sleep(10)
    _, e = aws.try("eks", "DescribeNodegroup", { clusterName = EKS, nodegroupName = "small" }, E.OPTS)
  until e
  t.eq(e.code, "ResourceNotFoundException")
  local took = core.now() - t0
  t.ok(took >= 170 and took <= 430, "DELETING for 3 to 7 simulated minutes: " .. took)
  task.sleep(1)
  t.eq(#nodes("small"), 0, "its Nodes are gone")
end)

t.test("DeleteCluster is refused while node groups remain, then deletes the cluster", function()
  err("eks", "DeleteCluster", { name = EKS }, "ResourceInUseException", "Cluster has nodegroups attached")
  for _, name in ipairs(call("eks", "ListNodegroups", { clusterName = EKS }).nodegroups) do
    local g = ng(name)
    if g.status == "CREATING" or g.status == "UPDATING" then until_status(name, g.status) end
    call("eks", "DeleteNodegroup", { clusterName = EKS, nodegroupName = name })
  end
  while #call("eks", "ListNodegroups", { clusterName = EKS }).nodegroups > 0 do task.sleep(30) end
  t.eq(call("eks", "DeleteCluster", { name = EKS }).cluster.status, "DELETING")
end)

t.test("DescribeRegions: the default regions, AllRegions adds the opt-in ones, names and filters", function()
  local names = {}
  for _, r in ipairs(call("ec2", "DescribeRegions", {}).Regions) do names[r.RegionName] = r end
  t.ok(names["us-west-2"] and names["eu-west-1"] and not names["af-south-1"], "enabled regions only")
  t.eq(names["us-west-2"], { RegionName = "us-west-2", Endpoint = "ec2.us-west-2.amazonaws.com",
    OptInStatus = "opt-in-not-required" })
  local all = call("ec2", "DescribeRegions", { AllRegions = true }).Regions
  t.ok(#all > 30, #all .. " regions")
  local f = call("ec2", "DescribeRegions", { AllRegions = true,
    Filters = { { Name = "opt-in-status", Values = { "not-opted-in" } } } }).Regions
  for _, r in ipairs(f) do t.eq(r.OptInStatus, "not-opted-in") end
  t.eq(#call("ec2", "DescribeRegions", { RegionNames = { "us-east-1", "eu-west-1" } }).Regions, 2)
  err("ec2", "DescribeRegions", { RegionNames = { "us--east-1" } }, "InvalidParameterValue", "Invalid region: [us--east-1]")
end)

-- the EC2 operations the sandbox serves whose model pages them
local function paged_ops()
  local model = require "hypd.aws.models.ec2"
  local out = {}
  for name in pairs(require("sandbox.services.ec2").operations) do
    local o = model.operations[name]
    if o and o.paginator then out[#out + 1] = name end
  end
  table.sort(out)
  return out
end

t.test("every EC2 Describe* the model pages honours MaxResults, its range and NextToken", function()
  local vpc = call("ec2", "CreateVpc", { CidrBlock = "10.80.0.0/16" }).Vpc.VpcId
  for i = 1, 7 do call("ec2", "CreateSubnet", { VpcId = vpc, CidrBlock = "10.80." .. i .. ".0/24" }) end
  local ops = paged_ops()
  t.ok(#ops >= 12, "paged operations: " .. table.concat(ops, ", "))
  local paging = require "sandbox.services.ec2.paging"
  for _, name in ipairs(ops) do
    local lim = paging.LIMITS[name] or paging.DEFAULT
    local key = require("hypd.aws.models.ec2").operations[name].paginator.result_key
    local params = name == "DescribeSecurityGroupRules" and {} or {}
    local whole = call("ec2", name, params)[key] or {}
    -- below the range
    if lim[1] > 1 then err("ec2", name, { MaxResults = lim[1] - 1 }, "InvalidParameterValue") end
    if not lim.clamp then err("ec2", name, { MaxResults = lim[2] + 1 }, "InvalidParameterValue") end
    err("ec2", name, { NextToken = "bm90IGEgdG9rZW4=" }, "InvalidParameterValue")
    -- page by the smallest size, following NextToken
    local got, pages, token = {}, 0, nil
    repeat
      local r = call("ec2", name, { MaxResults = lim[1], NextToken = token })
      pages = pages + 1
      t.ok(#(r[key] or {}) <= lim[1], name .. " page size")
      for _, x in ipairs(r[key] or {}) do got[#got + 1] = x end
      token = r.NextToken
    until not token or pages > 500
    t.eq(#got, #whole, name .. ": the pages hold every item")
    if #whole > lim[1] then t.ok(pages >= 2, name .. ": several pages") end
  end
  local r = call("ec2", "DescribeSubnets", { MaxResults = 5, Filters = { { Name = "vpc-id", Values = { vpc } } } })
  t.eq(#r.Subnets, 5)
  t.ok(r.NextToken, "filters apply before the page is cut")
  err("ec2", "DescribeSubnets", { MaxResults = 5, NextToken = call("ec2", "DescribeVpcs", { MaxResults = 5 }).NextToken
    or "x" }, "InvalidParameterValue")
  err("ec2", "DescribeNetworkInterfaces", { MaxResults = 5, NetworkInterfaceIds = { "eni-0123456789abcdef0" } },
    "InvalidParameterCombination", "The parameter networkInterfaceIdSet cannot be used with the parameter maxResults")
  t.eq(#call("ec2", "DescribeVpcEndpoints", { MaxResults = 5000 }).VpcEndpoints >= 0, true,
    "DescribeVpcEndpoints caps MaxResults instead of refusing it")
end)

-- a `hypd sandbox` process, judged by boto3, the aws CLI and kubectl ----------

local dir = H.tmpdir()
local kc = H.kubectl_harness(dir)
local env, pid
local networked = false -- the boto3 test made the seven subnets the CLI test pages
local have_python = H.sh("python3 -c 'import boto3' 2>/dev/null") == 0
local have_cli = H.sh("command -v aws >/dev/null") == 0
local have_kubectl = H.sh("command -v kubectl >/dev/null") == 0

-- start(): the process, once (the in-process sandbox stops first)
local function start()
  if env or pid then return end
  srv:stop()
  env, pid = H.sandbox_process(dir, "--virtual-clock")
  t.cleanup(function() if pid then os.execute("kill " .. pid .. " 2>/dev/null") end end)
  t.ok(env and env.AWS_ENDPOINT_URL, "the sandbox process started and printed its environment")
  kc.env = env or {}
end

local SCRIPT = [[
import json, sys, time
import boto3
ec2, eks, iam = (boto3.client(s) for s in ("ec2", "eks", "iam"))
cmd = sys.argv[1]
def wait(fn, done, what):
    for _ in range(3000):
        v = fn()
        if done(v):
            return v
        time.sleep(0.01)
    raise SystemExit("timed out waiting for " + what)
if cmd == "network":
    vpcs = [ec2.create_vpc(CidrBlock="10.%d.0.0/16" % (90 + i))["Vpc"]["VpcId"] for i in range(6)]
    for i in range(7):
        ec2.create_subnet(VpcId=vpcs[0], CidrBlock="10.90.%d.0/24" % i,
                          AvailabilityZone="us-west-2" + "ab"[i % 2])
    for i in range(6):
        ec2.create_security_group(GroupName="pg-%d" % i, Description="paging", VpcId=vpcs[0])
        ec2.create_route_table(VpcId=vpcs[0])
    print(json.dumps(vpcs))
elif cmd == "paginate":
    out = {}
    for method, key in (("describe_subnets", "Subnets"), ("describe_vpcs", "Vpcs"),
                        ("describe_route_tables", "RouteTables"), ("describe_security_groups", "SecurityGroups"),
                        ("describe_instance_types", "InstanceTypes"), ("describe_internet_gateways", "InternetGateways")):
        pages = list(ec2.get_paginator(method).paginate(PaginationConfig={"PageSize": 5}))
        whole = getattr(ec2, method)()[key]
        out[method] = {"pages": [len(p[key]) for p in pages], "whole": len(whole),
                       "last_token": "NextToken" in pages[-1]}
    print(json.dumps(out))
elif cmd == "cluster":
    trust = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": [
        "eks.amazonaws.com", "ec2.amazonaws.com"]}, "Action": "sts:AssumeRole"}]})
    role = iam.create_role(RoleName="kng-role", AssumeRolePolicyDocument=trust)["Role"]["Arn"]
    vpc = ec2.create_vpc(CidrBlock="10.99.0.0/16")["Vpc"]["VpcId"]
    subnets = [ec2.create_subnet(VpcId=vpc, CidrBlock="10.99.%d.0/24" % i, AvailabilityZone=z)["Subnet"]["SubnetId"]
               for i, z in enumerate(("us-west-2a", "us-west-2b"))]
    eks.create_cluster(name="kng", roleArn=role, resourcesVpcConfig={"subnetIds": subnets},
                       accessConfig={"authenticationMode": "API"})
    eks.get_waiter("cluster_active").wait(name="kng", WaiterConfig={"Delay": 0.05, "MaxAttempts": 600})
    eks.create_nodegroup(clusterName="kng", nodegroupName="workers", nodeRole=role, subnets=subnets,
                         instanceTypes=["m5.xlarge"], capacityType="SPOT",
                         scalingConfig={"minSize": 0, "maxSize": 5, "desiredSize": 3}, labels={"pool": "workers"})
    eks.get_waiter("nodegroup_active").wait(clusterName="kng", nodegroupName="workers",
                                            WaiterConfig={"Delay": 0.05, "MaxAttempts": 600})
elif cmd == "scale":
    u = eks.update_nodegroup_config(clusterName="kng", nodegroupName="workers",
                                    scalingConfig={"desiredSize": int(sys.argv[2])})["update"]
    wait(lambda: eks.describe_update(name="kng", updateId=u["id"], nodegroupName="workers")["update"]["status"],
         lambda s: s != "InProgress", "the update")
    wait(lambda: eks.describe_nodegroup(clusterName="kng", nodegroupName="workers")["nodegroup"]["status"],
         lambda s: s == "ACTIVE", "ACTIVE")
elif cmd == "delete":
    eks.delete_nodegroup(clusterName="kng", nodegroupName="workers")
    eks.get_waiter("nodegroup_deleted").wait(clusterName="kng", nodegroupName="workers",
                                             WaiterConfig={"Delay": 0.05, "MaxAttempts": 600})
]]
H.write(dir .. "/ng.py", SCRIPT)

local function py(args)
  local rc, out, e = H.with_env(env, dir, "python3 " .. H.quote(dir .. "/ng.py") .. " " .. args)
  t.eq(rc, 0, "ng.py " .. args .. ": " .. tostring(e))
  return out
end

t.test("boto3's paginators with MaxResults=5 see several pages of subnets, VPCs, route tables, groups, types", function()
  start()
  if not env or not have_python then return t.skip("no sandbox process or no boto3") end
  py("network")
  networked = true
  local r = json.decode(py("paginate"))
  for method, p in pairs(r) do
    local sum = 0
    for _, n in ipairs(p.pages) do
      sum = sum + n
      t.ok(n <= 5, method .. ": a page holds at most 5")
    end
    t.eq(sum, p.whole, method .. ": the pages hold every item")
    if p.whole > 5 then t.ok(#p.pages >= 2, method .. ": several pages (" .. #p.pages .. ")") end
    t.eq(p.last_token, false, method .. ": no NextToken on the last page")
  end
  t.ok(#r.describe_subnets.pages >= 2 and #r.describe_vpcs.pages >= 2 and #r.describe_route_tables.pages >= 2 and
    #r.describe_security_groups.pages >= 2, "the four network listings page")
end)

t.test("the aws CLI pages describe-subnets with --max-items and --starting-token", function()
  start()
  if not env or not have_cli or not networked then
    return t.skip("needs the sandbox process, the aws CLI and the subnets boto3 made")
  end
  local rc, out, e = H.with_env(env, dir, "aws ec2 describe-subnets --page-size 5 --max-items 3 --output json")
  t.eq(rc, 0, e)
  local head = json.decode(out)
  t.eq(#head.Subnets, 3)
  t.ok(head.NextToken, "a token for the rest")
  rc, out, e = H.with_env(env, dir, "aws ec2 describe-subnets --page-size 5 --starting-token " ..
    H.quote(head.NextToken) .. " --output json")
  t.eq(rc, 0, e)
  t.eq(#json.decode(out).Subnets, 4, "the other four")
  rc, out = H.with_env(env, dir, "aws ec2 describe-regions --query 'Regions[].RegionName' --output text")
  t.eq(rc, 0)
  t.like(out, "us%-west%-2")
end)

t.test("kubectl sees a node group's Nodes join with EKS's labels, follow its scaling, and leave when it is deleted",
  function()
  start()
  if not env or not have_python or not have_kubectl then return t.skip("needs a sandbox process, boto3 and kubectl") end
  py("cluster")
  local rc, _, e = kc.sh(H.hypd .. " kubeconfig --cluster kng --write " .. H.quote(kc.kc))
  t.eq(rc, 0, e)
  local function count()
    local r, out, er = kc.kubectl("get nodes -l eks.amazonaws.com/nodegroup=workers -o json")
    t.eq(r, 0, er)
    return json.decode(out).items
  end
  local items = count()
  t.eq(#items, 3, "three Nodes")
  local l = items[1].metadata.labels
  t.eq({ l["eks.amazonaws.com/capacityType"], l["node.kubernetes.io/instance-type"], l.pool },
    { "SPOT", "m5.xlarge", "workers" })
  t.like(l["topology.kubernetes.io/zone"], "^us%-west%-2[ab]$")
  local out
  rc, out = kc.kubectl("get nodes -l eks.amazonaws.com/nodegroup=workers --no-headers")
  t.eq(rc, 0)
  local n = 0
  for line in out:gmatch("[^\n]+") do
    t.like(line, "^ip%-10%-99%-%d+%-%d+%.us%-west%-2%.compute%.internal%s+Ready%s")
    n = n + 1
  end
  t.eq(n, 3, "kubectl get nodes shows three Ready")
  -- the Nodes follow the group as its controller reconciles, a moment after
  -- the update reads Successful: looked for again for up to 10 s
  local function settled(want)
    local got
    for _ = 1, 100 do
      got = #count()
      if got == want then break end
      task.sleep(0.1) -- (a wait the engine sees: os.execute's would count as one run of the test's task)
    end
    return got
  end
  py("scale 5")
  t.eq(settled(5), 5, "five after scaling up")
  py("scale 1")
  t.eq(settled(1), 1, "one after scaling down")
  py("delete")
  t.eq(#count(), 0, "none once deleted")
end)
