-- The sandbox's EC2 service through hypd's own client (EC2 query protocol,
-- XML answers) under the virtual clock: zones and instance types, a
-- realistic HyperPod-style network (VPC, 2 public + 2 private subnets in 2
-- zones, internet gateway, elastic IP, NAT gateway, route tables, security
-- group, S3 gateway endpoint), the AWS errors for each resource, filters
-- and tags, and a teardown in dependency order.
local t = require "hypd.tap"
local aws = require "hypd.aws"
local core = require "hypd.core"
local sandbox = require "sandbox"
local task = require "hypd.task"

local srv = assert(sandbox.start { listen = "127.0.0.1:0",
  credentials = { [os.getenv("AWS_ACCESS_KEY_ID")] = os.getenv("AWS_SECRET_ACCESS_KEY") } })
local port = srv.port
-- (check_constraints = false: what the sandbox refuses is under test, not the client)
local OPTS = { endpoint_url = "http://127.0.0.1:" .. port, region = "us-west-2", check_constraints = false }

local function call(op, params, region)
  return aws.call("ec2", op, params or {}, region and { endpoint_url = OPTS.endpoint_url, region = region } or OPTS)
end

-- err(op, params, code, pattern) -> the error, after checking code and message
local function err(op, params, code, pattern)
  local v, e = aws.try("ec2", op, params, OPTS)
  t.fails(v, e, code, op)
  if pattern then t.like(e.message, pattern, op) end
  return e
end

-- esc(s) -> a Lua pattern matching s literally
local function esc(s) return (s:gsub("%p", "%%%0")) end

local function filter(name, ...) return { Name = name, Values = { ... } } end

local function ids(list, key)
  local out = {}
  for i, x in ipairs(list) do out[i] = x[key] end
  table.sort(out)
  return out
end

local function tags(name, rtype)
  return { { ResourceType = rtype, Tags = { { Key = "Name", Value = name }, { Key = "hypd:cluster-tag", Value = "ec2t" } } } }
end

-- polls like a workflow: describe, sleep 30 s of (virtual) time, until done
local function wait_for(what, fn, want)
  local deadline = core.now() + 3600
  local last
  repeat
    last = fn()
    if last == want then return last end
    task.sleep(30)
  until core.now() > deadline
  error(what .. " stayed " .. tostring(last), 0)
end

local function virtual(fn)
  return function()
    core.virtual(true)
    local ok, e = pcall(fn)
    core.virtual(false)
    if not ok then error(e, 0) end
  end
end

local net = {} -- the network the tests build, in order

t.test("availability zones have region-specific names and zone IDs", function()
  local azs = call("DescribeAvailabilityZones").AvailabilityZones
  t.eq(ids(azs, "ZoneName"), { "us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d" })
  t.eq(ids(azs, "ZoneId"), { "usw2-az1", "usw2-az2", "usw2-az3", "usw2-az4" })
  t.eq({ azs[1].State, azs[1].RegionName, azs[1].ZoneType }, { "available", "us-west-2", "availability-zone" })
  t.eq(#call("DescribeAvailabilityZones", {}, "us-east-1").AvailabilityZones, 6)
  t.eq(ids(call("DescribeAvailabilityZones", {}, "ap-northeast-1").AvailabilityZones, "ZoneName"),
    { "ap-northeast-1a", "ap-northeast-1c", "ap-northeast-1d" })
  t.eq(ids(call("DescribeAvailabilityZones", {}, "eu-central-1").AvailabilityZones, "ZoneId"),
    { "euc1-az1", "euc1-az2", "euc1-az3" })
  local one = call("DescribeAvailabilityZones", { Filters = { filter("zone-id", "usw2-az4") } }).AvailabilityZones
  t.eq(ids(one, "ZoneName"), { "us-west-2d" })
  t.eq(ids(call("DescribeAvailabilityZones", { ZoneNames = { "us-west-2b" } }).AvailabilityZones, "ZoneId"),
    { "usw2-az1" })
  t.eq(ids(call("DescribeAvailabilityZones", { ZoneIds = { "usw2-az3" } }).AvailabilityZones, "ZoneName"),
    { "us-west-2c" })
  t.eq(#call("DescribeAvailabilityZones", { Filters = { filter("region-name", "us-west-2"),
    filter("state", "available") } }).AvailabilityZones, 4)
  err("DescribeAvailabilityZones", { ZoneNames = { "us-west-2z" } }, "InvalidParameterValue", "us%-west%-2z")
  err("DescribeAvailabilityZones", { Filters = { filter("colour", "blue") } }, "InvalidParameterValue",
    "The filter 'colour' is invalid")
end)

t.test("instance type offerings place the big GPUs in two zones and the rest everywhere", function()
  local function zones_of(name, lt)
    local offers = call("DescribeInstanceTypeOfferings", { LocationType = lt,
      Filters = { filter("instance-type", name) } }).InstanceTypeOfferings
    return ids(offers, "Location")
  end
  t.eq(#zones_of("p5.48xlarge", "availability-zone"), 2)
  t.eq(#zones_of("p5.48xlarge", "availability-zone-id"), 2)
  t.eq(zones_of("p5.48xlarge", "availability-zone"), zones_of("p5.48xlarge", "availability-zone"), "deterministic")
  t.eq(#zones_of("ml.p5.48xlarge", "availability-zone"), 0, "EC2 names drop the ml. prefix")
  t.eq(zones_of("g5.xlarge", "availability-zone"), { "us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d" })
  t.eq(zones_of("g5.xlarge"), { "us-west-2" }, "LocationType defaults to region")
  local p5s = call("DescribeInstanceTypeOfferings", { LocationType = "availability-zone",
    Filters = { filter("instance-type", "p5*"), filter("location", "us-west-2a", "us-west-2b", "us-west-2c",
      "us-west-2d") } }).InstanceTypeOfferings
  t.ok(#p5s >= 6, "p5, p5e and p5en in two zones each")
  t.eq(p5s[1].LocationType, "availability-zone")
end)

t.test("instance types describe vCPUs, memory, GPUs, EFA and Neuron devices", function()
  local list = call("DescribeInstanceTypes", { InstanceTypes = { "p5.48xlarge", "trn1.32xlarge", "m5.xlarge" } })
    .InstanceTypes
  local by = {}
  for _, i in ipairs(list) do by[i.InstanceType] = i end
  local p5 = by["p5.48xlarge"]
  t.eq({ p5.VCpuInfo.DefaultVCpus, p5.MemoryInfo.SizeInMiB }, { 192, 2097152 })
  t.eq({ p5.GpuInfo.Gpus[1].Name, p5.GpuInfo.Gpus[1].Manufacturer, p5.GpuInfo.Gpus[1].Count,
    p5.GpuInfo.Gpus[1].MemoryInfo.SizeInMiB, p5.GpuInfo.TotalGpuMemoryInMiB }, { "H100", "NVIDIA", 8, 81920, 655360 })
  t.eq({ p5.NetworkInfo.EfaSupported, p5.NetworkInfo.EfaInfo.MaximumEfaInterfaces, p5.NetworkInfo.MaximumNetworkCards },
    { true, 32, 32 })
  local trn = by["trn1.32xlarge"]
  t.eq({ trn.NeuronInfo.NeuronDevices[1].Name, trn.NeuronInfo.NeuronDevices[1].Count }, { "Trainium", 16 })
  t.eq(trn.GpuInfo, nil)
  t.eq({ by["m5.xlarge"].NetworkInfo.EfaSupported, by["m5.xlarge"].GpuInfo }, { false, nil })
  local efa = call("DescribeInstanceTypes", { Filters = { filter("network-info.efa-supported", "true"),
    filter("instance-type", "g5.*") } }).InstanceTypes
  t.ok(#efa > 0, "some g5 sizes have EFA")
  for _, i in ipairs(efa) do t.eq(i.NetworkInfo.EfaSupported, true, i.InstanceType) end
  err("DescribeInstanceTypes", { InstanceTypes = { "p9.huge" } }, "InvalidInstanceType", "p9%.huge")
end)

t.test("a VPC is created with tags, a default security group and a main route table", function()
  local vpc = call("CreateVpc", { CidrBlock = "10.90.0.0/16", TagSpecifications = tags("ec2t-vpc", "vpc") }).Vpc
  net.vpc = vpc.VpcId
  t.like(vpc.VpcId, "^vpc%-0%x+$")
  t.eq({ vpc.CidrBlock, vpc.IsDefault, vpc.InstanceTenancy }, { "10.90.0.0/16", false, "default" })
  t.eq(vpc.CidrBlockAssociationSet[1].CidrBlockState.State, "associated")
  local described = call("DescribeVpcs", { VpcIds = { net.vpc } }).Vpcs[1]
  t.eq(described.State, "available")
  t.eq(#described.Tags, 2)
  local sgs = call("DescribeSecurityGroups", { Filters = { filter("vpc-id", net.vpc) } }).SecurityGroups
  t.eq(ids(sgs, "GroupName"), { "default" })
  net.default_sg = sgs[1].GroupId
  t.eq(sgs[1].IpPermissionsEgress[1].IpRanges[1].CidrIp, "0.0.0.0/0")
  t.eq(sgs[1].IpPermissions[1].UserIdGroupPairs[1].GroupId, net.default_sg, "members reach each other")
  local main = call("DescribeRouteTables", { Filters = { filter("vpc-id", net.vpc),
    filter("association.main", "true") } }).RouteTables
  t.eq(#main, 1)
  net.main_rtb = main[1].RouteTableId
  t.eq({ main[1].Routes[1].DestinationCidrBlock, main[1].Routes[1].GatewayId, main[1].Routes[1].State },
    { "10.90.0.0/16", "local", "active" })
end)

t.test("VPC CIDRs outside /16../28 or malformed are refused", function()
  err("CreateVpc", { CidrBlock = "10.0.0.0/8" }, "InvalidVpc.Range", "The CIDR '10%.0%.0%.0/8' is invalid%.")
  err("CreateVpc", { CidrBlock = "10.0.0.0/29" }, "InvalidVpc.Range")
  err("CreateVpc", { CidrBlock = "10.0.0/16" }, "InvalidParameterValue", "not a valid CIDR block")
  err("CreateVpc", { CidrBlock = "10.300.0.0/16" }, "InvalidParameterValue")
  err("CreateVpc", {}, "MissingParameter")
end)

t.test("DescribeVpcs filters by id, cidr, tag, tag-key, state and is-default", function()
  local other = call("CreateVpc", { CidrBlock = "172.31.0.0/16" }).Vpc.VpcId
  local function find(...) return ids(call("DescribeVpcs", { Filters = { ... } }).Vpcs, "VpcId") end
  t.eq(find(filter("tag:Name", "ec2t-vpc")), { net.vpc })
  t.eq(find(filter("tag:Name", "ec2t-*")), { net.vpc }, "wildcards")
  t.eq(find(filter("tag-key", "hypd:cluster-tag")), { net.vpc })
  t.eq(find(filter("cidr", "172.31.0.0/16")), { other })
  t.eq(find(filter("cidr-block-association.cidr-block", "10.90.0.0/16")), { net.vpc })
  t.eq(find(filter("vpc-id", net.vpc, other), filter("state", "available"), filter("is-default", "false")),
    ids({ { id = net.vpc }, { id = other } }, "id"))
  t.eq(find(filter("is-default", "true")), {})
  call("DeleteVpc", { VpcId = other })
  err("DescribeVpcs", { VpcIds = { other } }, "InvalidVpcID.NotFound")
end)

t.test("VPC DNS attributes are modified one at a time and described", function()
  t.eq(call("DescribeVpcAttribute", { VpcId = net.vpc, Attribute = "enableDnsSupport" }).EnableDnsSupport.Value, true)
  t.eq(call("DescribeVpcAttribute", { VpcId = net.vpc, Attribute = "enableDnsHostnames" }).EnableDnsHostnames.Value,
    false)
  call("ModifyVpcAttribute", { VpcId = net.vpc, EnableDnsHostnames = { Value = true } })
  t.eq(call("DescribeVpcAttribute", { VpcId = net.vpc, Attribute = "enableDnsHostnames" }).EnableDnsHostnames.Value,
    true)
  err("ModifyVpcAttribute", { VpcId = net.vpc, EnableDnsHostnames = { Value = true }, EnableDnsSupport = { Value = true } },
    "InvalidParameterCombination")
  err("DescribeVpcAttribute", { VpcId = net.vpc, Attribute = "colour" }, "InvalidParameterValue")
end)

t.test("two public and two private subnets are created in two zones", function()
  local spec = {
    { "public-a", "10.90.10.0/24", { AvailabilityZone = "us-west-2a" } },
    { "public-b", "10.90.11.0/24", { AvailabilityZoneId = "usw2-az1" } },
    { "private-a", "10.90.7.0/24", { AvailabilityZone = "us-west-2a" } },
    { "private-b", "10.90.8.0/24", { AvailabilityZoneId = "usw2-az1" } },
  }
  net.subnets = {}
  for _, s in ipairs(spec) do
    local params = { VpcId = net.vpc, CidrBlock = s[2], TagSpecifications = tags("ec2t-" .. s[1], "subnet") }
    for k, v in pairs(s[3]) do params[k] = v end
    local sub = call("CreateSubnet", params).Subnet
    net.subnets[s[1]] = sub.SubnetId
    t.eq({ sub.VpcId, sub.CidrBlock, sub.State, sub.AvailableIpAddressCount, sub.MapPublicIpOnLaunch },
      { net.vpc, s[2], "available", 251, false }, s[1])
  end
  local b = call("DescribeSubnets", { SubnetIds = { net.subnets["public-b"] } }).Subnets[1]
  t.eq({ b.AvailabilityZone, b.AvailabilityZoneId }, { "us-west-2b", "usw2-az1" })
  t.like(b.SubnetArn, "^arn:aws:ec2:us%-west%-2:%d+:subnet/subnet%-")
  local big = call("CreateSubnet", { VpcId = net.vpc, CidrBlock = "10.90.16.0/20", AvailabilityZone = "us-west-2c" })
  t.eq(big.Subnet.AvailableIpAddressCount, 4091, "2^(32-20) - 5")
  call("DeleteSubnet", { SubnetId = big.Subnet.SubnetId })
end)

t.test("subnet CIDRs outside the VPC or overlapping another subnet are refused", function()
  err("CreateSubnet", { VpcId = net.vpc, CidrBlock = "10.91.0.0/24" }, "InvalidSubnet.Range",
    "The CIDR '10%.91%.0%.0/24' is invalid%.")
  err("CreateSubnet", { VpcId = net.vpc, CidrBlock = "10.90.0.0/29" }, "InvalidSubnet.Range")
  err("CreateSubnet", { VpcId = net.vpc, CidrBlock = "10.90.10.128/25" }, "InvalidSubnet.Conflict",
    "The CIDR '10%.90%.10%.128/25' conflicts with another subnet")
  err("CreateSubnet", { VpcId = net.vpc, CidrBlock = "10.90.0.0/20" }, "InvalidSubnet.Conflict")
  err("CreateSubnet", { VpcId = net.vpc, CidrBlock = "10.90.12.0/24", AvailabilityZone = "us-west-2z" },
    "InvalidParameterValue", "us%-west%-2a, us%-west%-2b")
  err("CreateSubnet", { VpcId = net.vpc, CidrBlock = "not-a-cidr" }, "InvalidParameterValue")
  err("CreateSubnet", { VpcId = "vpc-0000000000000000a", CidrBlock = "10.0.0.0/24" }, "InvalidVpcID.NotFound")
end)

t.test("a secondary CIDR block holds a compute subnet and adds a local route to every table", function()
  local vpc = call("CreateVpc", { CidrBlock = "10.60.0.0/16" }).Vpc.VpcId
  local a = call("AssociateVpcCidrBlock", { VpcId = vpc, CidrBlock = "10.61.0.0/16" })
  t.eq({ a.VpcId, a.CidrBlockAssociation.CidrBlock }, { vpc, "10.61.0.0/16" })
  err("AssociateVpcCidrBlock", { VpcId = vpc, CidrBlock = "10.61.128.0/17" }, "InvalidVpc.Range")
  err("AssociateVpcCidrBlock", { VpcId = vpc, CidrBlock = "10.0.0.0/12" }, "InvalidVpc.Range")
  t.eq(ids(call("DescribeVpcs", { Filters = { filter("cidr-block-association.cidr-block", "10.61.0.0/16") } }).Vpcs,
    "VpcId"), { vpc })
  local compute = call("CreateSubnet", { VpcId = vpc, CidrBlock = "10.61.0.0/20", AvailabilityZoneId = "usw2-az4" })
    .Subnet
  t.eq({ compute.AvailabilityZone, compute.AvailableIpAddressCount }, { "us-west-2d", 4091 })
  local rtb = call("CreateRouteTable", { VpcId = vpc }).RouteTable
  t.eq(#rtb.Routes, 2, "a new table has both local routes")
  local main = call("DescribeRouteTables", { Filters = { filter("vpc-id", vpc), filter("association.main", "true") } })
    .RouteTables[1]
  t.eq(#main.Routes, 2, "the main table got the new local route")
  err("DisassociateVpcCidrBlock", { AssociationId = a.CidrBlockAssociation.AssociationId }, "DependencyViolation")
  call("DeleteSubnet", { SubnetId = compute.SubnetId })
  call("DisassociateVpcCidrBlock", { AssociationId = a.CidrBlockAssociation.AssociationId })
  t.eq(#call("DescribeRouteTables", { RouteTableIds = { rtb.RouteTableId } }).RouteTables[1].Routes, 1)
  local primary = call("DescribeVpcs", { VpcIds = { vpc } }).Vpcs[1].CidrBlockAssociationSet[1].AssociationId
  err("DisassociateVpcCidrBlock", { AssociationId = primary }, "OperationNotPermitted")
  err("DisassociateVpcCidrBlock", { AssociationId = "vpc-cidr-assoc-0000000000000000a" },
    "InvalidVpcCidrBlockAssociationID.NotFound")
  err("DeleteVpc", { VpcId = vpc }, "DependencyViolation", "has dependencies")
  call("DeleteRouteTable", { RouteTableId = rtb.RouteTableId })
  call("DeleteVpc", { VpcId = vpc })
end)

t.test("DescribeSubnets filters by vpc, zone, zone id, cidr, state and tags", function()
  local function find(...) return ids(call("DescribeSubnets", { Filters = { ... } }).Subnets, "SubnetId") end
  local all = find(filter("vpc-id", net.vpc))
  t.eq(#all, 4)
  t.eq(find(filter("vpc-id", net.vpc), filter("availability-zone", "us-west-2a")),
    ids({ { id = net.subnets["public-a"] }, { id = net.subnets["private-a"] } }, "id"))
  t.eq(#find(filter("availability-zone-id", "usw2-az1")), 2)
  t.eq(find(filter("cidr-block", "10.90.7.0/24")), { net.subnets["private-a"] })
  t.eq(find(filter("tag:Name", "ec2t-public-*"), filter("state", "available")),
    ids({ { id = net.subnets["public-a"] }, { id = net.subnets["public-b"] } }, "id"))
  t.eq(#find(filter("tag-key", "hypd:cluster-tag")), 4)
  t.eq(find(filter("subnet-id", net.subnets["private-b"])), { net.subnets["private-b"] })
end)

t.test("MapPublicIpOnLaunch is switched on for the public subnets", function()
  for _, name in ipairs { "public-a", "public-b" } do
    call("ModifySubnetAttribute", { SubnetId = net.subnets[name], MapPublicIpOnLaunch = { Value = true } })
  end
  local public = call("DescribeSubnets", { Filters = { filter("map-public-ip-on-launch", "true") } }).Subnets
  t.eq(#public, 2)
  for _, s in ipairs(public) do t.eq(s.MapPublicIpOnLaunch, true) end
end)

t.test("an internet gateway attaches once and refuses a second attachment", function()
  local igw = call("CreateInternetGateway", { TagSpecifications = tags("ec2t-igw", "internet-gateway") })
    .InternetGateway
  net.igw = igw.InternetGatewayId
  t.like(net.igw, "^igw%-")
  t.eq(#igw.Attachments, 0)
  call("AttachInternetGateway", { InternetGatewayId = net.igw, VpcId = net.vpc })
  local other = call("CreateVpc", { CidrBlock = "10.50.0.0/16" }).Vpc.VpcId
  err("AttachInternetGateway", { InternetGatewayId = net.igw, VpcId = other }, "Resource.AlreadyAssociated",
    esc(net.igw))
  local second = call("CreateInternetGateway").InternetGateway.InternetGatewayId
  err("AttachInternetGateway", { InternetGatewayId = second, VpcId = net.vpc }, "Resource.AlreadyAssociated")
  err("DetachInternetGateway", { InternetGatewayId = second, VpcId = net.vpc }, "Gateway.NotAttached")
  call("DeleteInternetGateway", { InternetGatewayId = second })
  call("DeleteVpc", { VpcId = other })
  local found = call("DescribeInternetGateways", { Filters = { filter("attachment.vpc-id", net.vpc) } })
    .InternetGateways
  t.eq(ids(found, "InternetGatewayId"), { net.igw })
  t.eq({ found[1].Attachments[1].VpcId, found[1].Attachments[1].State }, { net.vpc, "available" })
  t.eq(#call("DescribeInternetGateways", { Filters = { filter("tag:Name", "ec2t-igw") } }).InternetGateways, 1)
  t.eq(#call("DescribeInternetGateways", { InternetGatewayIds = { net.igw } }).InternetGateways, 1)
end)

t.test("an elastic IP comes from the 203.0.113.0/24 test range", function()
  local a = call("AllocateAddress", { Domain = "vpc", TagSpecifications = tags("ec2t-eip", "elastic-ip") })
  net.eip = a.AllocationId
  t.like(a.AllocationId, "^eipalloc%-")
  t.like(a.PublicIp, "^203%.0%.113%.%d+$")
  t.eq(a.Domain, "vpc")
  local d = call("DescribeAddresses", { AllocationIds = { net.eip } }).Addresses[1]
  t.eq({ d.PublicIp, d.Domain, d.AssociationId }, { a.PublicIp, "vpc", nil })
  t.eq(#call("DescribeAddresses", { PublicIps = { a.PublicIp } }).Addresses, 1)
  t.eq(#call("DescribeAddresses", { Filters = { filter("tag:Name", "ec2t-eip") } }).Addresses, 1)
  local spare = call("AllocateAddress", {})
  t.ok(spare.PublicIp ~= a.PublicIp, "each address is distinct")
  call("ReleaseAddress", { AllocationId = spare.AllocationId })
  err("DescribeAddresses", { AllocationIds = { spare.AllocationId } }, "InvalidAllocationID.NotFound")
end)

t.test("a NAT gateway is pending, then available under the virtual clock; its client token is idempotent",
  virtual(function()
    local before = core.now()
    local out = call("CreateNatGateway", { SubnetId = net.subnets["public-a"], AllocationId = net.eip,
      ClientToken = "ec2t-nat-1", TagSpecifications = tags("ec2t-nat", "natgateway") })
    local nat = out.NatGateway
    net.nat = nat.NatGatewayId
    t.like(net.nat, "^nat%-")
    t.eq({ nat.State, nat.SubnetId, nat.VpcId, nat.ConnectivityType }, { "pending", net.subnets["public-a"], net.vpc,
      "public" })
    t.eq(nat.NatGatewayAddresses[1].AllocationId, net.eip)
    local again = call("CreateNatGateway", { SubnetId = net.subnets["public-a"], AllocationId = net.eip,
      ClientToken = "ec2t-nat-1" }).NatGateway
    t.eq(again.NatGatewayId, net.nat, "same token, same gateway")
    err("CreateNatGateway", { SubnetId = net.subnets["public-b"], AllocationId = net.eip, ClientToken = "ec2t-nat-1" },
      "IdempotentParameterMismatch")
    err("CreateNatGateway", { SubnetId = net.subnets["public-b"], AllocationId = net.eip }, "Resource.AlreadyAssociated")
    wait_for("the NAT gateway", function()
      return call("DescribeNatGateways", { NatGatewayIds = { net.nat } }).NatGateways[1].State
    end, "available")
    local waited = core.now() - before
    t.ok(waited >= 100 and waited <= 200, "about two minutes of simulated time, got " .. waited)
    local byf = call("DescribeNatGateways", { Filter = { filter("vpc-id", net.vpc), filter("state", "available") } })
    t.eq(ids(byf.NatGateways, "NatGatewayId"), { net.nat })
    t.eq(byf.NatGateways[1].NatGatewayAddresses[1].PublicIp, call("DescribeAddresses",
      { AllocationIds = { net.eip } }).Addresses[1].PublicIp)
    local addr = call("DescribeAddresses", { AllocationIds = { net.eip } }).Addresses[1]
    t.like(addr.AssociationId, "^eipassoc%-")
    t.eq(call("DescribeSubnets", { SubnetIds = { net.subnets["public-a"] } }).Subnets[1].AvailableIpAddressCount, 250,
      "the NAT gateway's interface takes an address")
    local enis = call("DescribeNetworkInterfaces", { Filters = { filter("subnet-id", net.subnets["public-a"]) } })
      .NetworkInterfaces
    t.eq(#enis, 1)
    t.eq({ enis[1].InterfaceType, enis[1].NetworkInterfaceId, enis[1].VpcId, enis[1].PrivateIpAddress },
      { "nat_gateway", addr.NetworkInterfaceId, net.vpc, addr.PrivateIpAddress })
  end))

t.test("route tables send public subnets to the internet gateway and private ones to the NAT gateway", function()
  net.public_rtb = call("CreateRouteTable", { VpcId = net.vpc, TagSpecifications = tags("ec2t-public-rt",
    "route-table") }).RouteTable.RouteTableId
  net.private_rtb = call("CreateRouteTable", { VpcId = net.vpc, TagSpecifications = tags("ec2t-private-rt",
    "route-table") }).RouteTable.RouteTableId
  t.eq(call("CreateRoute", { RouteTableId = net.public_rtb, DestinationCidrBlock = "0.0.0.0/0",
    GatewayId = net.igw }).Return, true)
  call("CreateRoute", { RouteTableId = net.private_rtb, DestinationCidrBlock = "0.0.0.0/0", NatGatewayId = net.nat })
  net.assoc = {}
  for _, pair in ipairs { { "public-a", net.public_rtb }, { "public-b", net.public_rtb },
    { "private-a", net.private_rtb }, { "private-b", net.private_rtb } } do
    local a = call("AssociateRouteTable", { RouteTableId = pair[2], SubnetId = net.subnets[pair[1]] })
    t.like(a.AssociationId, "^rtbassoc%-")
    t.eq(a.AssociationState.State, "associated")
    net.assoc[pair[1]] = a.AssociationId
  end
  local pub = call("DescribeRouteTables", { Filters = { filter("association.subnet-id", net.subnets["public-b"]) } })
    .RouteTables
  t.eq(ids(pub, "RouteTableId"), { net.public_rtb })
  t.eq(#pub[1].Routes, 2)
  t.eq({ pub[1].Routes[1].GatewayId, pub[1].Routes[2].GatewayId, pub[1].Routes[2].State }, { "local", net.igw,
    "active" })
  local priv = call("DescribeRouteTables", { RouteTableIds = { net.private_rtb } }).RouteTables[1]
  t.eq({ priv.Routes[2].DestinationCidrBlock, priv.Routes[2].NatGatewayId }, { "0.0.0.0/0", net.nat })
  t.eq(#priv.Associations, 2)
  t.eq(#call("DescribeRouteTables", { Filters = { filter("vpc-id", net.vpc) } }).RouteTables, 3)
  t.eq(ids(call("DescribeRouteTables", { Filters = { filter("tag:Name", "ec2t-private-rt") } }).RouteTables,
    "RouteTableId"), { net.private_rtb })
  t.eq(ids(call("DescribeRouteTables", { Filters = { filter("route-table-id", net.public_rtb) } }).RouteTables,
    "RouteTableId"), { net.public_rtb })
end)

t.test("route errors: an existing route, a missing route, the local route and a foreign gateway", function()
  err("CreateRoute", { RouteTableId = net.public_rtb, DestinationCidrBlock = "0.0.0.0/0", GatewayId = net.igw },
    "RouteAlreadyExists", "0%.0%.0%.0/0 already exists")
  err("DeleteRoute", { RouteTableId = net.public_rtb, DestinationCidrBlock = "192.168.0.0/16" }, "InvalidRoute.NotFound")
  err("DeleteRoute", { RouteTableId = net.public_rtb, DestinationCidrBlock = "10.90.0.0/16" }, "InvalidParameterValue",
    "local route")
  err("ReplaceRoute", { RouteTableId = net.public_rtb, DestinationCidrBlock = "192.168.0.0/16", GatewayId = net.igw },
    "InvalidParameterValue", "Use CreateRoute instead")
  err("CreateRoute", { RouteTableId = net.public_rtb, DestinationCidrBlock = "192.168.0.0/16",
    NatGatewayId = "nat-0000000000000000a" }, "InvalidNatGatewayID.NotFound")
  local loose = call("CreateInternetGateway").InternetGateway.InternetGatewayId
  err("CreateRoute", { RouteTableId = net.public_rtb, DestinationCidrBlock = "192.168.0.0/16", GatewayId = loose },
    "InvalidParameterValue", "different networks")
  call("DeleteInternetGateway", { InternetGatewayId = loose })
  err("CreateRoute", { RouteTableId = net.public_rtb, DestinationCidrBlock = "192.168.0.0/16" }, "MissingParameter")
  -- replace and delete a route that exists
  call("CreateRoute", { RouteTableId = net.private_rtb, DestinationCidrBlock = "192.168.0.0/16", GatewayId = net.igw })
  call("ReplaceRoute", { RouteTableId = net.private_rtb, DestinationCidrBlock = "192.168.0.0/16",
    NatGatewayId = net.nat })
  local rt = call("DescribeRouteTables", { RouteTableIds = { net.private_rtb } }).RouteTables[1]
  t.eq({ rt.Routes[3].NatGatewayId, rt.Routes[3].GatewayId }, { net.nat, nil })
  call("DeleteRoute", { RouteTableId = net.private_rtb, DestinationCidrBlock = "192.168.0.0/16" })
  t.eq(#call("DescribeRouteTables", { RouteTableIds = { net.private_rtb } }).RouteTables[1].Routes, 2)
  err("AssociateRouteTable", { RouteTableId = net.private_rtb, SubnetId = net.subnets["public-a"] },
    "Resource.AlreadyAssociated")
  err("DisassociateRouteTable", { AssociationId = "rtbassoc-0000000000000000a" }, "InvalidAssociationID.NotFound")
end)

t.test("a security group takes ingress and egress rules and refuses duplicates", function()
  local out = call("CreateSecurityGroup", { GroupName = "ec2t-nodes", Description = "HyperPod nodes", VpcId = net.vpc,
    TagSpecifications = tags("ec2t-nodes", "security-group") })
  net.sg = out.GroupId
  t.like(net.sg, "^sg%-")
  err("CreateSecurityGroup", { GroupName = "ec2t-nodes", Description = "again", VpcId = net.vpc },
    "InvalidGroup.Duplicate", esc("The security group 'ec2t-nodes' already exists for VPC '" .. net.vpc .. "'"))
  err("CreateSecurityGroup", { GroupName = "sg-like", Description = "x", VpcId = net.vpc }, "InvalidParameterValue")
  local rules = call("AuthorizeSecurityGroupIngress", { GroupId = net.sg, IpPermissions = {
    { IpProtocol = "-1", UserIdGroupPairs = { { GroupId = net.sg, Description = "node to node (EFA)" } } },
    { IpProtocol = "tcp", FromPort = 443, ToPort = 443, IpRanges = { { CidrIp = "10.90.0.0/16" } } },
  } })
  t.eq(rules.Return, true)
  t.eq(#rules.SecurityGroupRules, 2)
  t.like(rules.SecurityGroupRules[1].SecurityGroupRuleId, "^sgr%-")
  call("AuthorizeSecurityGroupEgress", { GroupId = net.sg, IpPermissions = {
    { IpProtocol = "-1", UserIdGroupPairs = { { GroupId = net.sg } } } } })
  err("AuthorizeSecurityGroupIngress", { GroupId = net.sg, IpPermissions = {
    { IpProtocol = "tcp", FromPort = 443, ToPort = 443, IpRanges = { { CidrIp = "10.90.0.0/16" } } } } },
    "InvalidPermission.Duplicate", "already exists")
  err("AuthorizeSecurityGroupIngress", { GroupId = net.sg, IpPermissions = {
    { IpProtocol = "tcp", FromPort = 500, ToPort = 100, IpRanges = { { CidrIp = "10.0.0.0/8" } } } } },
    "InvalidParameterValue")
  err("AuthorizeSecurityGroupIngress", { GroupId = net.sg, IpPermissions = {
    { IpProtocol = "tcp", FromPort = 22, ToPort = 22, UserIdGroupPairs = { { GroupId = "sg-0000000000000000a" } } } } },
    "InvalidGroup.NotFound")
  local g = call("DescribeSecurityGroups", { GroupIds = { net.sg } }).SecurityGroups[1]
  t.eq({ g.GroupName, g.Description, g.VpcId }, { "ec2t-nodes", "HyperPod nodes", net.vpc })
  t.eq(#g.IpPermissions, 2)
  t.eq(#g.IpPermissionsEgress, 1, "all-traffic egress holds both peers")
  t.eq(#g.IpPermissionsEgress[1].IpRanges + #g.IpPermissionsEgress[1].UserIdGroupPairs, 2)
  t.eq(ids(call("DescribeSecurityGroups", { Filters = { filter("group-name", "ec2t-nodes") } }).SecurityGroups,
    "GroupId"), { net.sg })
  t.eq(ids(call("DescribeSecurityGroups", { Filters = { filter("tag:Name", "ec2t-nodes"), filter("vpc-id", net.vpc) } })
    .SecurityGroups, "GroupId"), { net.sg })
  t.eq(#call("DescribeSecurityGroups", { Filters = { filter("vpc-id", net.vpc) } }).SecurityGroups, 2)
end)

t.test("rules are revoked by permission or by rule id and listed by DescribeSecurityGroupRules", function()
  call("AuthorizeSecurityGroupIngress", { GroupId = net.sg, IpProtocol = "tcp", FromPort = 22, ToPort = 22,
    CidrIp = "203.0.113.0/24" })
  local listed = call("DescribeSecurityGroupRules", { Filters = { filter("group-id", net.sg) } }).SecurityGroupRules
  t.eq(#listed, 5, "default egress, self egress, self ingress, 443 and 22")
  local ssh
  for _, r in ipairs(listed) do if r.FromPort == 22 then ssh = r end end
  t.eq({ ssh.IsEgress, ssh.IpProtocol, ssh.CidrIpv4 }, { false, "tcp", "203.0.113.0/24" })
  local rev = call("RevokeSecurityGroupIngress", { GroupId = net.sg, SecurityGroupRuleIds = { ssh.SecurityGroupRuleId } })
  t.eq(rev.Return, true)
  err("RevokeSecurityGroupIngress", { GroupId = net.sg, IpPermissions = {
    { IpProtocol = "tcp", FromPort = 22, ToPort = 22, IpRanges = { { CidrIp = "203.0.113.0/24" } } } } },
    "InvalidPermission.NotFound")
  call("RevokeSecurityGroupEgress", { GroupId = net.sg, IpPermissions = {
    { IpProtocol = "-1", IpRanges = { { CidrIp = "0.0.0.0/0" } } } } })
  local g = call("DescribeSecurityGroups", { GroupIds = { net.sg } }).SecurityGroups[1]
  t.eq(#g.IpPermissionsEgress[1].IpRanges, 0)
  t.eq(g.IpPermissionsEgress[1].UserIdGroupPairs[1].GroupId, net.sg)
  err("DescribeSecurityGroupRules", { SecurityGroupRuleIds = { "sgr-0000000000000000a" } },
    "InvalidSecurityGroupRuleId.NotFound")
end)

t.test("an S3 gateway endpoint adds a prefix-list route to the private route table", function()
  local e = call("CreateVpcEndpoint", { VpcId = net.vpc, ServiceName = "com.amazonaws.us-west-2.s3",
    VpcEndpointType = "Gateway", RouteTableIds = { net.private_rtb },
    TagSpecifications = tags("ec2t-s3", "vpc-endpoint") }).VpcEndpoint
  net.vpce = e.VpcEndpointId
  t.like(net.vpce, "^vpce%-")
  t.eq({ e.State, e.VpcEndpointType, e.ServiceName }, { "available", "Gateway", "com.amazonaws.us-west-2.s3" })
  t.eq(e.RouteTableIds, { net.private_rtb })
  local rt = call("DescribeRouteTables", { RouteTableIds = { net.private_rtb } }).RouteTables[1]
  local pl
  for _, r in ipairs(rt.Routes) do if r.DestinationPrefixListId then pl = r end end
  t.eq({ pl.DestinationPrefixListId, pl.GatewayId }, { "pl-68a54001", net.vpce })
  call("ModifyVpcEndpoint", { VpcEndpointId = net.vpce, AddRouteTableIds = { net.public_rtb } })
  t.eq(call("DescribeVpcEndpoints", { VpcEndpointIds = { net.vpce } }).VpcEndpoints[1].RouteTableIds,
    { net.private_rtb, net.public_rtb })
  call("ModifyVpcEndpoint", { VpcEndpointId = net.vpce, RemoveRouteTableIds = { net.public_rtb } })
  t.eq(#call("DescribeRouteTables", { RouteTableIds = { net.public_rtb } }).RouteTables[1].Routes, 2)
  err("CreateVpcEndpoint", { VpcId = net.vpc, ServiceName = "com.amazonaws.us-west-2.s3",
    RouteTableIds = { net.private_rtb } }, "RouteAlreadyExists")
  err("CreateVpcEndpoint", { VpcId = net.vpc, ServiceName = "com.amazonaws.us-west-2.nothing",
    RouteTableIds = { net.private_rtb } }, "InvalidServiceName")
  t.eq(ids(call("DescribeVpcEndpoints", { Filters = { filter("vpc-id", net.vpc),
    filter("service-name", "com.amazonaws.us-west-2.s3") } }).VpcEndpoints, "VpcEndpointId"), { net.vpce })
  local del = call("DeleteVpcEndpoints", { VpcEndpointIds = { "vpce-0000000000000000a" } })
  t.eq(del.Unsuccessful[1].ResourceId, "vpce-0000000000000000a")
end)

t.test("an interface endpoint is pending, then available, and holds its security group", virtual(function()
  local e = call("CreateVpcEndpoint", { VpcId = net.vpc, VpcEndpointType = "Interface",
    ServiceName = "com.amazonaws.us-west-2.sts", SubnetIds = { net.subnets["private-a"], net.subnets["private-b"] },
    SecurityGroupIds = { net.sg } }).VpcEndpoint
  t.eq({ e.State, #e.SubnetIds, #e.NetworkInterfaceIds, e.Groups[1].GroupId }, { "pending", 2, 2, net.sg })
  t.like(e.DnsEntries[1].DnsName, "sts%.us%-west%-2%.vpce%.amazonaws%.com$")
  wait_for("the interface endpoint", function()
    return call("DescribeVpcEndpoints", { VpcEndpointIds = { e.VpcEndpointId } }).VpcEndpoints[1].State
  end, "available")
  t.eq(#call("DescribeVpcEndpoints", { Filters = { filter("vpc-endpoint-type", "Interface") } }).VpcEndpoints, 1)
  err("DeleteSecurityGroup", { GroupId = net.sg }, "DependencyViolation")
  t.eq(#call("DeleteVpcEndpoints", { VpcEndpointIds = { e.VpcEndpointId } }).Unsuccessful, 0)
  err("DescribeVpcEndpoints", { VpcEndpointIds = { e.VpcEndpointId } }, "InvalidVpcEndpointId.NotFound")
end))

t.test("tags are created, described with filters and deleted", function()
  call("CreateTags", { Resources = { net.vpc, net.subnets["private-a"], net.sg }, Tags = {
    { Key = "team", Value = "ml" }, { Key = "Name", Value = "renamed" } } })
  t.eq(call("DescribeVpcs", { VpcIds = { net.vpc } }).Vpcs[1].Tags[1].Value, "renamed", "tags overwrite")
  local described = call("DescribeTags", { Filters = { filter("key", "team") } }).Tags
  t.eq(#described, 3)
  local types = {}
  for _, d in ipairs(described) do types[#types + 1] = d.ResourceType end
  table.sort(types)
  t.eq(types, { "security-group", "subnet", "vpc" })
  t.eq(#call("DescribeTags", { Filters = { filter("resource-id", net.vpc) } }).Tags, 3)
  t.eq(#call("DescribeTags", { Filters = { filter("resource-type", "natgateway") } }).Tags, 2)
  t.eq(#call("DescribeTags", { Filters = { filter("value", "ml"), filter("resource-type", "vpc") } }).Tags, 1)
  call("DeleteTags", { Resources = { net.vpc, net.subnets["private-a"], net.sg }, Tags = { { Key = "team" } } })
  t.eq(#call("DescribeTags", { Filters = { filter("key", "team") } }).Tags, 0)
  call("DeleteTags", { Resources = { net.sg }, Tags = { { Key = "Name", Value = "not-this" } } })
  t.eq(#call("DescribeTags", { Filters = { filter("resource-id", net.sg), filter("key", "Name") } }).Tags, 1,
    "a value that does not match keeps the tag")
  err("CreateTags", { Resources = { "vpc-0000000000000000a" }, Tags = { { Key = "a", Value = "b" } } },
    "InvalidVpcID.NotFound")
  err("CreateTags", { Resources = { net.vpc }, Tags = { { Key = "aws:reserved", Value = "b" } } },
    "InvalidParameterValue")
  err("CreateVpc", { CidrBlock = "10.0.0.0/16", TagSpecifications = tags("x", "subnet") }, "InvalidParameterValue")
end)

t.test("every NotFound error names the resource as AWS does", function()
  local Z = "0000000000000000a"
  err("DescribeVpcs", { VpcIds = { "vpc-" .. Z } }, "InvalidVpcID.NotFound", "The vpc ID 'vpc%-" .. Z ..
    "' does not exist")
  err("DescribeSubnets", { SubnetIds = { "subnet-" .. Z } }, "InvalidSubnetID.NotFound",
    "The subnet ID 'subnet%-" .. Z .. "' does not exist")
  err("DescribeSecurityGroups", { GroupIds = { "sg-" .. Z } }, "InvalidGroup.NotFound", "sg%-" .. Z)
  err("DescribeInternetGateways", { InternetGatewayIds = { "igw-" .. Z } }, "InvalidInternetGatewayID.NotFound",
    "igw%-" .. Z)
  err("DescribeRouteTables", { RouteTableIds = { "rtb-" .. Z } }, "InvalidRouteTableID.NotFound", "rtb%-" .. Z)
  err("DescribeAddresses", { AllocationIds = { "eipalloc-" .. Z } }, "InvalidAllocationID.NotFound", "eipalloc%-" .. Z)
  err("DescribeNatGateways", { NatGatewayIds = { "nat-" .. Z } }, "NatGatewayNotFound", "nat%-" .. Z)
  err("DeleteNatGateway", { NatGatewayId = "nat-" .. Z }, "NatGatewayNotFound")
  err("DescribeVpcEndpoints", { VpcEndpointIds = { "vpce-" .. Z } }, "InvalidVpcEndpointId.NotFound", "vpce%-" .. Z)
  err("DeleteVpc", { VpcId = "vpc-" .. Z }, "InvalidVpcID.NotFound")
  err("DeleteSubnet", { SubnetId = "subnet-" .. Z }, "InvalidSubnetID.NotFound")
  err("AttachInternetGateway", { InternetGatewayId = "igw-" .. Z, VpcId = net.vpc }, "InvalidInternetGatewayID.NotFound")
  err("ReleaseAddress", { AllocationId = "eipalloc-" .. Z }, "InvalidAllocationID.NotFound")
  err("CreateNatGateway", { SubnetId = net.subnets["public-b"], AllocationId = "eipalloc-" .. Z },
    "InvalidAllocationID.NotFound")
  err("DeleteSecurityGroup", { GroupId = "sg-" .. Z }, "InvalidGroup.NotFound")
  err("DeleteRouteTable", { RouteTableId = "rtb-" .. Z }, "InvalidRouteTableID.NotFound")
  err("DescribeVpcs", { VpcIds = { "not-a-vpc" } }, "InvalidVpcID.Malformed")
end)

t.test("DryRun answers DryRunOperation and changes nothing", function()
  local before = #call("DescribeVpcs").Vpcs
  local e = err("CreateVpc", { CidrBlock = "10.1.0.0/16", DryRun = true }, "DryRunOperation",
    "Request would have succeeded, but DryRun flag is set%.")
  t.eq(e.status, 412)
  t.eq(#call("DescribeVpcs").Vpcs, before)
  err("DeleteVpc", { VpcId = net.vpc, DryRun = true }, "DryRunOperation")
  err("DescribeSubnets", { DryRun = true }, "DryRunOperation")
  err("CreateSecurityGroup", { GroupName = "dry", Description = "dry", VpcId = net.vpc, DryRun = true },
    "DryRunOperation")
end)

t.test("dependencies block deletes until the network is torn down in order", virtual(function()
  local has_deps = "has dependencies and cannot be deleted"
  err("DeleteVpc", { VpcId = net.vpc }, "DependencyViolation", esc("The vpc '" .. net.vpc .. "' " .. has_deps))
  err("DeleteSubnet", { SubnetId = net.subnets["public-a"] }, "DependencyViolation", has_deps)
  err("ReleaseAddress", { AllocationId = net.eip }, "InvalidIPAddress.InUse")
  err("DeleteInternetGateway", { InternetGatewayId = net.igw }, "DependencyViolation", has_deps)
  err("DetachInternetGateway", { InternetGatewayId = net.igw, VpcId = net.vpc }, "DependencyViolation",
    "mapped public address")
  err("DeleteRouteTable", { RouteTableId = net.private_rtb }, "DependencyViolation", has_deps)
  err("DeleteSecurityGroup", { GroupId = net.default_sg }, "CannotDelete", "cannot be deleted by a user")
  local client = call("CreateSecurityGroup", { GroupName = "ec2t-client", Description = "client", VpcId = net.vpc })
    .GroupId
  call("AuthorizeSecurityGroupIngress", { GroupId = net.sg, IpPermissions = {
    { IpProtocol = "tcp", FromPort = 8080, ToPort = 8080, UserIdGroupPairs = { { GroupId = client } } } } })
  err("DeleteSecurityGroup", { GroupId = client }, "DependencyViolation", "has a dependent object")
  call("RevokeSecurityGroupIngress", { GroupId = net.sg, IpPermissions = {
    { IpProtocol = "tcp", FromPort = 8080, ToPort = 8080, UserIdGroupPairs = { { GroupId = client } } } } })
  t.eq(call("DeleteSecurityGroup", { GroupId = client }).Return, true)

  -- teardown: endpoint, NAT gateway, address, route tables, gateway, groups, subnets, VPC
  t.eq(#call("DeleteVpcEndpoints", { VpcEndpointIds = { net.vpce } }).Unsuccessful, 0)
  t.eq(#call("DescribeRouteTables", { RouteTableIds = { net.private_rtb } }).RouteTables[1].Routes, 2,
    "the prefix-list route goes with the endpoint")
  t.eq(call("DeleteNatGateway", { NatGatewayId = net.nat }).NatGatewayId, net.nat)
  t.eq(call("DescribeNatGateways", { NatGatewayIds = { net.nat } }).NatGateways[1].State, "deleting")
  wait_for("the NAT gateway", function()
    return call("DescribeNatGateways", { NatGatewayIds = { net.nat } }).NatGateways[1].State
  end, "deleted")
  local rt = call("DescribeRouteTables", { RouteTableIds = { net.private_rtb } }).RouteTables[1]
  t.eq(rt.Routes[2].State, "blackhole", "a route to a deleted NAT gateway is a blackhole")
  t.eq(#call("DescribeRouteTables", { Filters = { filter("route.state", "blackhole") } }).RouteTables, 1)
  t.eq(call("DescribeAddresses", { AllocationIds = { net.eip } }).Addresses[1].AssociationId, nil)
  t.eq(#call("DescribeNetworkInterfaces", { Filters = { filter("vpc-id", net.vpc) } }).NetworkInterfaces, 0,
    "the NAT gateway's interface is gone")
  call("ReleaseAddress", { AllocationId = net.eip })
  for name, assoc in pairs(net.assoc) do
    call("DisassociateRouteTable", { AssociationId = assoc })
    t.eq(#call("DescribeRouteTables", { Filters = { filter("association.subnet-id", net.subnets[name]) } })
      .RouteTables, 0, name)
  end
  err("DisassociateRouteTable", { AssociationId = call("DescribeRouteTables", { RouteTableIds = { net.main_rtb } })
    .RouteTables[1].Associations[1].RouteTableAssociationId }, "InvalidParameterValue", "main route table")
  call("DeleteRouteTable", { RouteTableId = net.public_rtb })
  call("DeleteRouteTable", { RouteTableId = net.private_rtb })
  call("DetachInternetGateway", { InternetGatewayId = net.igw, VpcId = net.vpc })
  call("DeleteInternetGateway", { InternetGatewayId = net.igw })
  err("DeleteVpc", { VpcId = net.vpc }, "DependencyViolation")
  call("DeleteSecurityGroup", { GroupId = net.sg })
  for _, id in pairs(net.subnets) do call("DeleteSubnet", { SubnetId = id }) end
  call("DeleteVpc", { VpcId = net.vpc })
  err("DescribeVpcs", { VpcIds = { net.vpc } }, "InvalidVpcID.NotFound")
  t.eq(#call("DescribeSecurityGroups", { Filters = { filter("vpc-id", net.vpc) } }).SecurityGroups, 0,
    "the default group goes with the VPC")
  t.eq(#call("DescribeRouteTables", { Filters = { filter("vpc-id", net.vpc) } }).RouteTables, 0,
    "the main route table goes with the VPC")
  t.eq(#call("DescribeSubnets", { Filters = { filter("vpc-id", net.vpc) } }).Subnets, 0)
end))

t.test("the audit log names the resource each mutation touched", function()
  local http = require "hypd.http"
  local json = require "hypd.json"
  local events = json.decode(http.request { url = OPTS.endpoint_url .. "/_sandbox/audit" }.body)
  local seen = {}
  for _, e in ipairs(events) do
    if e.service == "ec2" then seen[e.operation .. " " .. e.target] = true end
  end
  t.ok(seen["CreateVpc " .. net.vpc], "CreateVpc names the new VPC")
  t.ok(seen["CreateInternetGateway " .. net.igw], "CreateInternetGateway names the gateway")
  t.ok(seen["CreateNatGateway " .. net.nat], "CreateNatGateway names the gateway")
  t.ok(seen["CreateRoute " .. net.public_rtb], "CreateRoute names the route table")
  t.ok(seen["DeleteVpc " .. net.vpc], "DeleteVpc names the VPC")
  t.ok(not seen["DescribeVpcs "], "reads are not audited")
end)

t.cleanup(function()
  srv:stop()
end)
