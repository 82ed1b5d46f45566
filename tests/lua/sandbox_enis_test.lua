-- The sandbox's deletion dependencies (issue 19: the teardown met a
-- DependencyViolation the sandbox had never shown): an EKS cluster's
-- control-plane network interfaces hold its subnets and security group
-- while it exists and for a while after it is gone (EKS releases them after
-- the cluster); a HyperPod cluster's hold its subnets and groups; any
-- interface in a subnet (an FSx file system's, an endpoint's) holds the
-- subnet; a LoadBalancer Service's load balancer has interfaces in the
-- cluster's subnets, gone with the Service, left behind (holding the VPC)
-- when the EKS cluster goes first. DescribeNetworkInterfaces lists them, as
-- AWS does. EKS's cluster security group (eks-cluster-sg-<name>-<digits>)
-- is an EC2 group on those interfaces, deleted by EKS with them.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
local _, OPTS = H.sandbox_here()
local aws = require "hypd.aws"
local task = require "hypd.task"
local core = require "hypd.core"

local function call(s, o, p) return aws.call(s, o, p or {}, OPTS) end
local function try(s, o, p) return aws.try(s, o, p or {}, OPTS) end
local C = {}

t.test("an EKS cluster's interfaces are listed, with its security group, in its subnets", function()
  C.c = H.eks_cluster(call, "eni-a", 61, { security_group = true })
  local r = call("ec2", "DescribeNetworkInterfaces", { Filters = { { Name = "group-id", Values = { C.c.sg } } } })
  t.eq(#r.NetworkInterfaces, 2, "two interfaces use the cluster's group")
  t.eq(r.NetworkInterfaces[1].Description, "Amazon EKS eni-a")
  t.eq(r.NetworkInterfaces[1].SubnetId, C.c.subnets[1])
end)

t.test("EKS makes the cluster security group: named, tagged, all traffic from itself, on its interfaces", function()
  local d = call("eks", "DescribeCluster", { name = "eni-a" }).cluster.resourcesVpcConfig
  C.csg = d.clusterSecurityGroupId
  local g = call("ec2", "DescribeSecurityGroups", { GroupIds = { C.csg } }).SecurityGroups[1]
  t.like(g.GroupName, "^eks%-cluster%-sg%-eni%-a%-%d%d%d%d%d%d%d%d%d%d$", "EKS's name")
  t.eq(g.VpcId, d.vpcId, "in the cluster's VPC")
  t.like(g.Description, "^EKS created security group", "EKS's description")
  local tags = {}
  for _, x in ipairs(g.Tags) do tags[x.Key] = x.Value end
  t.eq(tags["aws:eks:cluster-name"], "eni-a")
  t.eq(tags["kubernetes.io/cluster/eni-a"], "owned")
  t.eq(tags.Name, g.GroupName)
  local self = g.IpPermissions[1]
  t.eq(#g.IpPermissions, 1, "one inbound rule")
  t.eq(self.IpProtocol, "-1", "all traffic")
  t.eq(self.UserIdGroupPairs[1].GroupId, C.csg, "from itself")
  t.eq(g.IpPermissionsEgress[1].IpRanges[1].CidrIp, "0.0.0.0/0", "out anywhere")
  local r = call("ec2", "DescribeNetworkInterfaces", { Filters = { { Name = "group-id", Values = { C.csg } } } })
  t.eq(#r.NetworkInterfaces, 2, "the control-plane interfaces hold it")
  local _, e = try("ec2", "DeleteSecurityGroup", { GroupId = C.csg })
  t.eq(e and e.code, "DependencyViolation", "so it cannot be deleted while they do")
end)

t.test("while the cluster exists its group and subnets cannot be deleted", function()
  local _, e = try("ec2", "DeleteSecurityGroup", { GroupId = C.c.sg })
  t.eq(e and e.code, "DependencyViolation", "the group")
  _, e = try("ec2", "DeleteSubnet", { SubnetId = C.c.subnets[1] })
  t.eq(e and e.code, "DependencyViolation", "the subnet")
end)

t.test("after the cluster is gone its interfaces linger a while, then go", function()
  call("eks", "DeleteCluster", { name = "eni-a" })
  while try("eks", "DescribeCluster", { name = "eni-a" }) do task.sleep(30) end
  local gone_at = core.now()
  local _, e = try("ec2", "DeleteSecurityGroup", { GroupId = C.c.sg })
  t.eq(e and e.code, "DependencyViolation", "the group is still held the moment the cluster is gone")
  local ok
  for _ = 1, 40 do
    ok = try("ec2", "DeleteSecurityGroup", { GroupId = C.c.sg })
    if ok then break end
    task.sleep(15)
  end
  t.ok(ok, "then it can be deleted")
  t.ok(core.now() - gone_at >= 60, "a while later: " .. (core.now() - gone_at) .. " s")
  t.ok(try("ec2", "DeleteSubnet", { SubnetId = C.c.subnets[1] }), "and the subnets")
  local _, gone = try("ec2", "DescribeSecurityGroups", { GroupIds = { C.csg } })
  t.eq(gone and gone.code, "InvalidGroup.NotFound", "EKS deleted the cluster security group with its interfaces")
end)

t.test("an interface endpoint's interfaces hold their subnet", function()
  local vpc = call("ec2", "CreateVpc", { CidrBlock = "10.62.0.0/16" }).Vpc.VpcId
  local sn = call("ec2", "CreateSubnet", { VpcId = vpc, CidrBlock = "10.62.1.0/24",
    AvailabilityZone = "us-west-2a" }).Subnet.SubnetId
  local ep, err = try("ec2", "CreateVpcEndpoint", { VpcId = vpc, VpcEndpointType = "Interface",
    ServiceName = "com.amazonaws.us-west-2.sts", SubnetIds = { sn } })
  if not ep then return t.skip("the sandbox makes no interface endpoint for sts: " .. tostring(err and err.message)) end
  local _, e = try("ec2", "DeleteSubnet", { SubnetId = sn })
  t.eq(e and e.code, "DependencyViolation", "the endpoint's interface holds the subnet")
  call("ec2", "DeleteVpcEndpoints", { VpcEndpointIds = { ep.VpcEndpoint.VpcEndpointId } })
  t.ok(try("ec2", "DeleteSubnet", { SubnetId = sn }), "once the endpoint is gone, the subnet goes")
end)

t.test("a LoadBalancer Service's load balancer: its interfaces go with the Service, or stay after the cluster", function()
  local c = H.eks_cluster(call, "eni-lb", 63, { security_group = true })
  local conn = require("hypd.k8s").connect { cluster = "eni-lb", region = OPTS.region }
  local function elb()
    local r = call("ec2", "DescribeNetworkInterfaces", { Filters = { { Name = "subnet-id", Values = { c.subnets[1] } } } })
    for _, i in ipairs(r.NetworkInterfaces) do if i.Description:match("^ELB ") then return i end end
  end
  local function service(name)
    assert(conn:create { apiVersion = "v1", kind = "Service", metadata = { name = name, namespace = "default" },
      spec = { type = "LoadBalancer", selector = { app = name }, ports = { { port = 80, targetPort = 8000 } } } })
    for _ = 1, 60 do
      if elb() then return true end
      task.sleep(1)
    end
  end
  t.ok(service("web"), "the load balancer's interface is listed, with the cluster's group")
  t.eq(elb().Groups[1].GroupId, c.sg)
  assert(conn:delete("v1", "Service", "web", { namespace = "default" }))
  for _ = 1, 60 do
    if not elb() then break end
    task.sleep(1)
  end
  t.eq(elb(), nil, "deleting the Service removes it")
  t.ok(service("orphan"), "another one")
  call("eks", "DeleteCluster", { name = "eni-lb" })
  while try("eks", "DescribeCluster", { name = "eni-lb" }) do task.sleep(30) end
  task.sleep(require("sandbox.services.ec2.managed_enis").RELEASE + 30) -- EKS's own interfaces are released
  local _, e = try("ec2", "DeleteSubnet", { SubnetId = c.subnets[1] })
  t.eq(e and e.code, "DependencyViolation", "the load balancer left behind still holds the subnet")
  t.like(elb().Description, "^ELB a", "it is listed")
end)
