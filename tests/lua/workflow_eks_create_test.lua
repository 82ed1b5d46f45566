-- cluster_create_eks (its steps in cluster/_eks_network and cluster/_eks_stage,
-- every resource a ctx:ensure and every wait a ctx:poll of hypd.tool.kit) run by
-- the real operation layer, hypd.tool.operations, through the tool registry, against the
-- in-process sandbox under the virtual clock: a full run to an ACTIVE
-- cluster with each resource made once and a phase persisted before each
-- mutation; steps run again on the saved state, and a new call on a fresh
-- state, that change nothing; a host stopped before every single mutation;
-- answers lost after the mutation was made (looked for again, in the same
-- run); a cancelled wait; foreign
-- resources that are CONFLICTs; AWS refusals, faults and a failed NAT
-- gateway, retried or reported; the subnet CIDR math. What the test reads
-- back (phases, progress notes, the step state) is what hypd.tool.operations persisted
-- in the store, so it fails when phases or state stop being persisted.
-- Plans are in plan_test.lua.
--
-- Ways in beyond the public calls, all through hypd.tool.operations's own paths or the
-- sandbox's: interrupt_at stops an operation as a stopping host does (its
-- task cancelled without a cancel request: the record stays running and
-- op.resume continues it); replay / lose_state edit the operation's record
-- and state in the store first, as a crash at the wrong moment leaves them,
-- before op.resume; swap replaces a sandbox operation for a while (an AWS
-- refusal, a lost answer).
local t = require "hypd.tap"
local core = require "hypd.core"
local faults = require "sandbox.faults"
local json = require "hypd.json"
local op = require "hypd.tool.operations"
local regex = require "hypd.regex"
local store = require "hypd.store"
local task = require "hypd.task"
local dispatch = require "hypd.tool.dispatch"
local tool = require "hypd.tool.registry"
local H = dofile("tests/lua/helpers.lua")
require("hypd.tool.loader").load()

local srv, OPTS = H.sandbox_here()
local E = dofile("tests/lua/eks_helpers.lua")
local eks, net, CALLER, ADMIN, WHO, READ, STEP, STEP_NO = E.eks, E.net, E.CALLER, E.ADMIN, E.WHO, E.READ, E.STEP,
  E.STEP_NO
local call, is_mutation, swap, start, state_of, phases_of, notes_of = E.call, E.is_mutation, E.swap, E.start,
  E.state_of, E.phases_of, E.notes_of
local interrupt_at, resume, replay, lose_state, mark, since, step_mark = E.interrupt_at, E.resume, E.replay,
  E.lose_state, E.mark, E.since, E.step_mark
local tags_of, by_tag, plain, has = E.tags_of, E.by_tag, E.plain, E.has

-- SCRIPT(tag): what a first run on an empty account does, in order: each
-- phase the kit records and the mutation the sandbox audits under it (a
-- wait has none; NAT stands for the NAT gateway's id)
local function SCRIPT(tag)
  local rows = {}
  local function add(phase, ...) rows[#rows + 1] = { phase:gsub("%%T", tag), ... } end
  add("creating VPC hypd-%T-vpc", "ec2 CreateVpc")
  add("updating VPC hypd-%T-vpc", "ec2 ModifyVpcAttribute") -- DNS hostnames (DNS support is on by default)
  add("creating internet gateway hypd-%T-igw", "ec2 CreateInternetGateway")
  add("creating internet gateway attachment hypd-%T-igw to hypd-%T-vpc", "ec2 AttachInternetGateway")
  for _, s in ipairs { "public-us-west-2a", "public-us-west-2b", "private-us-west-2a", "private-us-west-2b" } do
    add("creating subnet hypd-%T-" .. s, "ec2 CreateSubnet")
    if s:find("^public") then add("updating subnet hypd-%T-" .. s, "ec2 ModifySubnetAttribute") end
  end
  add("creating Elastic IP hypd-%T-nat-eip", "ec2 AllocateAddress")
  add("creating NAT gateway hypd-%T-nat", "ec2 CreateNatGateway")
  local function routes(kind)
    add("creating route table hypd-%T-" .. kind .. "-rt", "ec2 CreateRouteTable")
    add("creating route 0.0.0.0/0 in hypd-%T-" .. kind .. "-rt", "ec2 CreateRoute")
    for _, az in ipairs { "a", "b" } do
      add("creating route table association hypd-%T-" .. kind .. "-rt with hypd-%T-" .. kind .. "-us-west-2" .. az,
        "ec2 AssociateRouteTable")
    end
  end
  routes("public")
  add("creating security group hypd-%T-cluster", "ec2 CreateSecurityGroup")
  add("creating security group rule all traffic within hypd-%T-cluster", "ec2 AuthorizeSecurityGroupIngress")
  add("creating IAM role hypd-%T-eks-cluster-role", "iam CreateRole")
  add("creating policy attachment AmazonEKSClusterPolicy on hypd-%T-eks-cluster-role", "iam AttachRolePolicy")
  add("creating EKS cluster hypd-%T", "eks CreateCluster")
  -- the NAT gateway's wait and the private routes while EKS creates
  add("waiting for NAT gateway NAT to be available")
  routes("private")
  add("waiting for EKS cluster hypd-%T to be ACTIVE")
  return rows
end

-- made(tag) -> what exists for tag, counted in the sandbox (not from the audit log)
local function made(tag)
  local f = by_tag(tag)
  local out = {
    vpcs = #call("ec2", "DescribeVpcs", { Filters = f }).Vpcs,
    igws = #call("ec2", "DescribeInternetGateways", { Filters = f }).InternetGateways,
    subnets = #call("ec2", "DescribeSubnets", { Filters = f }).Subnets,
    eips = #call("ec2", "DescribeAddresses", { Filters = f }).Addresses,
    route_tables = #call("ec2", "DescribeRouteTables", { Filters = f }).RouteTables,
    security_groups = #call("ec2", "DescribeSecurityGroups", { Filters = f }).SecurityGroups,
    nat = 0, routes = 0, associations = 0, rules = 0,
  }
  for _, n in ipairs(call("ec2", "DescribeNatGateways", { Filter = f }).NatGateways) do
    if n.State == "pending" or n.State == "available" then out.nat = out.nat + 1 end
  end
  for _, rt in ipairs(call("ec2", "DescribeRouteTables", { Filters = f }).RouteTables) do
    for _, r in ipairs(rt.Routes) do if r.DestinationCidrBlock == "0.0.0.0/0" then out.routes = out.routes + 1 end end
    out.associations = out.associations + #rt.Associations
  end
  for _, sg in ipairs(call("ec2", "DescribeSecurityGroups", { Filters = f }).SecurityGroups) do
    out.rules = out.rules + #sg.IpPermissions
  end
  local role = call("iam", "GetRole", { RoleName = "hypd-" .. tag .. "-eks-cluster-role" }).Role
  out.role = tags_of(role.Tags)["hypd:cluster-tag"]
  out.role_policies = #call("iam", "ListAttachedRolePolicies", { RoleName = role.RoleName }).AttachedPolicies
  out.cluster = call("eks", "DescribeCluster", { name = "hypd-" .. tag }).cluster.status
  return out
end
local MADE = { vpcs = 1, igws = 1, subnets = 4, eips = 1, nat = 1, route_tables = 2, routes = 2, associations = 4,
  security_groups = 1, rules = 1, role_policies = 1, cluster = "ACTIVE" }

-- once(counts): each mutation of a first run exactly once (SCRIPT's), no other
local function once(counts, msg)
  local want = {}
  for _, row in ipairs(SCRIPT("x")) do
    if row[2] then want[row[2]] = (want[row[2]] or 0) + 1 end
  end
  t.eq(counts, want, (msg or "mutations") .. ": " .. json.encode(counts))
end

local first -- the first full run (tag "alpha"): {id, mark, state}

t.test("the params take a cluster tag, a region, a Kubernetes version and a VPC CIDR; eleven named steps", function()
  local p = tool.get("cluster_create_eks").params
  t.eq({ p.cluster_tag.required, p.cluster_tag.decision, p.cluster_tag.fixed }, { true, true, true })
  t.eq(p.kubernetes_version.default, "1.34")
  t.eq(p.vpc_cidr.default, "10.192.0.0/16")
  t.eq(p.region.default, nil, "the runner fills the configured region")
  local function matches(name, v) return regex.compile(p[name].pattern):test(v) end
  for _, v in ipairs { "abc", "demo-1", "a" .. string.rep("b", 30) .. "c" } do t.ok(matches("cluster_tag", v), v) end
  for _, v in ipairs { "ab", "Demo", "1abc", "abc-", "a_b", "a" .. string.rep("b", 31) .. "c" } do
    t.ok(not matches("cluster_tag", v), v)
  end
  for _, v in ipairs { "us-west-2", "eu-central-1", "us-gov-west-1", "ap-southeast-3" } do t.ok(matches("region", v), v) end
  for _, v in ipairs { "us-west", "uswest2", "US-WEST-2" } do t.ok(not matches("region", v), v) end
  for _, v in ipairs { "10.192.0.0/16", "172.31.0.0/20", "192.168.1.0/24" } do t.ok(matches("vpc_cidr", v), v) end
  for _, v in ipairs { "10.192.0.0/8", "10.192.0.0/25", "10.256.0.0/16", "10.1.0/16", "10.192.0.0" } do
    t.ok(not matches("vpc_cidr", v), v)
  end
  t.eq(eks.target { cluster_tag = "demo", region = "us-west-2" }, "eks/us-west-2/demo")
  local def = tool.get("cluster_create_eks")
  local names = {}
  for i, s in ipairs(def.steps) do names[i] = s.name end
  t.eq(names, { "vpc", "internet_gateway", "subnets", "nat_gateway", "public_routes", "security_group",
    "iam", "cluster", "private_routes", "wait_active", "access" })
  t.eq(def.params.plan.type, "boolean", "every staged tool can plan")
end)

t.test("subnets are carved from the VPC CIDR deterministically, by slot", function()
  t.eq(net.next_free("10.192.0.0/16", {}), "10.192.0.0/20")
  t.eq(net.next_free("10.192.0.0/16", { "10.192.0.0/20", "10.192.16.0/20" }), "10.192.32.0/20")
  t.eq(net.next_free("10.192.0.0/16", { "10.192.0.0/24" }), "10.192.16.0/20", "a foreign subnet is skipped")
  t.eq(net.next_free("192.168.4.0/24", { "192.168.4.0/28" }), "192.168.4.16/28")
  t.eq(net.subnet_prefix(24), 28)
  local _, why = net.parse_cidr("10.192.1.0/16")
  t.like(why, "10%.192%.0%.0/16")
  local AZS = { "us-west-2a", "us-west-2b" }
  local function plan(vpc, existing)
    local out = {}
    for slot, w in pairs(net.subnet_blocks(vpc, existing, AZS, "demo")) do out[slot] = w.block .. " " .. w.az end
    return out
  end
  t.eq(plan("10.192.0.0/16", {}), { ["public-1"] = "10.192.0.0/20 us-west-2a", ["public-2"] = "10.192.16.0/20 us-west-2b",
    ["private-1"] = "10.192.32.0/20 us-west-2a", ["private-2"] = "10.192.48.0/20 us-west-2b" })
  t.eq(plan("192.168.4.0/24", {}), { ["public-1"] = "192.168.4.0/28 us-west-2a",
    ["public-2"] = "192.168.4.16/28 us-west-2b", ["private-1"] = "192.168.4.32/28 us-west-2a",
    ["private-2"] = "192.168.4.48/28 us-west-2b" })
  -- a foreign subnet keeps its block; hypd's own keep their slots, even in the other zone
  local foreign = { SubnetId = "subnet-0f", CidrBlock = "10.192.0.0/24", AvailabilityZone = "us-west-2a" }
  local mine = { SubnetId = "subnet-01", CidrBlock = "10.192.64.0/20", AvailabilityZone = "us-west-2a",
    Tags = { { Key = "hypd:cluster-tag", Value = "demo" }, { Key = "hypd:subnet", Value = "public-2" } } }
  local other = { SubnetId = "subnet-02", CidrBlock = "10.192.80.0/20", AvailabilityZone = "us-west-2b",
    Tags = { { Key = "hypd:cluster-tag", Value = "other" }, { Key = "hypd:subnet", Value = "public-1" } } }
  t.eq(plan("10.192.0.0/16", { foreign, mine, other }), { ["public-1"] = "10.192.16.0/20 us-west-2b",
    ["public-2"] = "10.192.64.0/20 us-west-2a", ["private-1"] = "10.192.32.0/20 us-west-2a",
    ["private-2"] = "10.192.48.0/20 us-west-2b" })
  -- a VPC with no room left is a CONFLICT naming vpc_cidr
  local full = {}
  for i = 0, 15 do full[#full + 1] = { SubnetId = "subnet-" .. i, CidrBlock = "192.168.4." .. (i * 16) .. "/28" } end
  local err = t.raises(function() net.subnet_blocks("192.168.4.0/24", full, AZS, "demo") end, "CONFLICT")
  t.eq(err.field, "vpc_cidr")
  t.eq(eks.admin_principal("arn:aws:sts::123456789012:assumed-role/Admin/jane"), "arn:aws:iam::123456789012:role/Admin")
  t.eq(eks.admin_principal(CALLER), CALLER)
end)

t.test("before anything exists the status says NOT_CREATED", function()
  local s = eks.status({ params = { cluster_tag = "alpha", region = "us-west-2" }, state = {} }, OPTS)
  t.eq(s.eks_status, "NOT_CREATED")
  t.eq(s.vpc_id, nil)
  t.eq(s.errors, nil)
end)

t.test("a full run makes an ACTIVE cluster hypd-alpha on a new VPC, role and access entry, each thing once", function()
  t.eq(require("hypd.clusters").active(), nil, "no active cluster yet")
  local started, m = core.now(), mark()
  local saved_before_cluster
  local off = op.subscribe(function(ev)
    if ev.kind == "operation.phase" and tostring(ev.phase):find("creating EKS cluster", 1, true) == 1 then
      saved_before_cluster = state_of(ev.operation_id)
    end
  end)
  local id = start { cluster_tag = "alpha" }
  local v = op.wait(id)
  off()
  t.eq(v.status, "succeeded", json.encode(v.error))
  local st = state_of(id)
  first = { id = id, mark = m, state = st }
  local r = v.result
  t.eq(r, st.result, "the record's result is the saved state's")
  local minutes = (core.now() - started) / 60
  t.ok(minutes >= 8 and minutes <= 16, "the stage took " .. minutes .. " simulated minutes")
  for _, s in ipairs(v.steps) do t.ok(s.status == "done" and s.seconds ~= nil, s.name .. " done with timings") end
  once(since(m))
  t.eq(made("alpha"), (function()
    local want = {}
    for k, x in pairs(MADE) do want[k] = x end
    want.role = "alpha"
    return want
  end)())
  -- the VPC
  local vpc = call("ec2", "DescribeVpcs", { Filters = by_tag("alpha") }).Vpcs
  t.eq({ vpc[1].VpcId, vpc[1].CidrBlock, tags_of(vpc[1].Tags).Name }, { st.vpc_id, "10.192.0.0/16", "hypd-alpha-vpc" })
  for _, a in ipairs { { "enableDnsSupport", "EnableDnsSupport" }, { "enableDnsHostnames", "EnableDnsHostnames" } } do
    t.eq(call("ec2", "DescribeVpcAttribute", { VpcId = st.vpc_id, Attribute = a[1] })[a[2]].Value, true, a[1])
  end
  -- subnets: public and private in two zones, in their slots, a sixteenth of the VPC each
  local slots = {}
  for _, s in ipairs(call("ec2", "DescribeSubnets", { Filters = by_tag("alpha") }).Subnets) do
    local tg = tags_of(s.Tags)
    local kind = tg["kubernetes.io/role/elb"] and "public" or tg["kubernetes.io/role/internal-elb"] and "private"
    t.eq(s.MapPublicIpOnLaunch, kind == "public", s.SubnetId .. " maps public IPs only when public")
    t.eq(tg.Name, "hypd-alpha-" .. kind .. "-" .. s.AvailabilityZone)
    slots[tg["hypd:subnet"]] = { s.SubnetId, s.CidrBlock, s.AvailabilityZone }
  end
  t.eq(slots, { ["public-1"] = { r.public_subnet_ids[1], "10.192.0.0/20", "us-west-2a" },
    ["public-2"] = { r.public_subnet_ids[2], "10.192.16.0/20", "us-west-2b" },
    ["private-1"] = { r.private_subnet_ids[1], "10.192.32.0/20", "us-west-2a" },
    ["private-2"] = { r.private_subnet_ids[2], "10.192.48.0/20", "us-west-2b" } })
  -- gateways and routes
  local igw = call("ec2", "DescribeInternetGateways", { Filters = by_tag("alpha") }).InternetGateways
  t.eq(igw[1].Attachments[1].VpcId, st.vpc_id)
  local nat = call("ec2", "DescribeNatGateways", { Filter = by_tag("alpha") }).NatGateways
  t.eq({ nat[1].NatGatewayId, nat[1].State, nat[1].SubnetId, tags_of(nat[1].Tags).Name },
    { st.nat_gateway_id, "available", r.public_subnet_ids[1], "hypd-alpha-nat" })
  local eip = call("ec2", "DescribeAddresses", { Filters = by_tag("alpha") }).Addresses
  t.eq({ eip[1].AllocationId, tags_of(eip[1].Tags).Name }, { nat[1].NatGatewayAddresses[1].AllocationId,
    "hypd-alpha-nat-eip" })
  for _, rt in ipairs(call("ec2", "DescribeRouteTables", { Filters = by_tag("alpha") }).RouteTables) do
    local kind = tags_of(rt.Tags).Name:match("^hypd%-alpha%-(%a+)%-rt$")
    local default, assoc = nil, {}
    for _, route in ipairs(rt.Routes) do if route.DestinationCidrBlock == "0.0.0.0/0" then default = route end end
    for _, a in ipairs(rt.Associations) do assoc[#assoc + 1] = a.SubnetId end
    table.sort(assoc)
    local want = { r[kind .. "_subnet_ids"][1], r[kind .. "_subnet_ids"][2] }
    table.sort(want)
    t.eq(assoc, want, kind .. " route table associations")
    t.eq(rt.RouteTableId, st[kind .. "_route_table_id"])
    if kind == "public" then
      t.eq(default.GatewayId, igw[1].InternetGatewayId)
    else
      t.eq(default.NatGatewayId, nat[1].NatGatewayId)
    end
    t.eq(default.State, "active")
  end
  -- the security group lets all traffic within itself
  local sg = call("ec2", "DescribeSecurityGroups", { GroupIds = { r.security_group_id } }).SecurityGroups[1]
  t.eq({ sg.GroupName, tags_of(sg.Tags)["hypd:cluster-tag"], tags_of(sg.Tags).Name },
    { "hypd-alpha-cluster", "alpha", "hypd-alpha-cluster" })
  t.eq({ sg.IpPermissions[1].IpProtocol, sg.IpPermissions[1].UserIdGroupPairs[1].GroupId }, { "-1", sg.GroupId })
  -- the role
  local role = call("iam", "GetRole", { RoleName = "hypd-alpha-eks-cluster-role" }).Role
  t.eq(role.Arn, r.cluster_role_arn)
  t.like(json.encode(role), "eks%.amazonaws%.com")
  local pols = call("iam", "ListAttachedRolePolicies", { RoleName = "hypd-alpha-eks-cluster-role" }).AttachedPolicies
  t.eq(pols[1].PolicyArn, "arn:aws:iam::aws:policy/AmazonEKSClusterPolicy")
  -- the cluster
  local c = call("eks", "DescribeCluster", { name = "hypd-alpha" }).cluster
  t.eq({ c.status, c.version, c.roleArn, c.accessConfig.authenticationMode }, { "ACTIVE", "1.34", role.Arn, "API" })
  t.eq(c.resourcesVpcConfig.subnetIds, r.private_subnet_ids)
  t.eq(c.resourcesVpcConfig.securityGroupIds, { r.security_group_id })
  t.eq({ c.resourcesVpcConfig.endpointPublicAccess, c.resourcesVpcConfig.endpointPrivateAccess }, { true, true })
  t.eq({ c.tags["hypd:cluster-tag"], c.tags.Name }, { "alpha", "hypd-alpha" })
  t.eq(c.clientRequestToken, "hypd-" .. id, "the create's token is the operation's")
  -- the caller is cluster admin
  local ap = call("eks", "ListAssociatedAccessPolicies", { clusterName = "hypd-alpha", principalArn = CALLER })
  t.eq({ ap.associatedAccessPolicies[1].policyArn, ap.associatedAccessPolicies[1].accessScope.type }, { ADMIN, "cluster" })
  t.eq({ st.admin_access, st.admin_principal_arn }, { "granted", CALLER })
  -- the result, and the first cluster is the active one
  t.eq({ r.cluster_name, r.cluster_arn, r.version, r.vpc_id, r.region, r.cluster_tag, r.security_group_id,
    r.cluster_role_arn, r.active },
    { "hypd-alpha", c.arn, "1.34", st.vpc_id, "us-west-2", "alpha", sg.GroupId, role.Arn, true })
  t.eq(r.endpoint, c.endpoint)
  t.like(r.endpoint, "^https://")
  t.eq(require("hypd.clusters").active().name, "hypd-alpha")
  -- state was saved along the way: the cluster step began with the network's and the role's
  t.ok(saved_before_cluster, "the cluster was created")
  t.eq({ saved_before_cluster.vpc_id, saved_before_cluster.nat_gateway_id, saved_before_cluster.cluster_role_arn,
    saved_before_cluster.security_group_id }, { st.vpc_id, st.nat_gateway_id, st.cluster_role_arn,
    st.security_group_id }, "the saved state when the cluster was created")
  t.eq(saved_before_cluster.private_subnet_ids, r.private_subnet_ids)
  local notes = notes_of(id)
  -- (between two checks of its pace, the last check's note again with the time so far: hypd.tool.kit's poll)
  t.like(notes[#notes], "^EKS cluster hypd%-alpha CREATING %(%d+m%d%ds[;%)]")
end)

t.test("each mutation has its phase persisted just before it, naming the resource", function()
  -- the operation's phase events and the sandbox's audit of each mutation,
  -- in the store's order: each mutation under the phase recorded last
  local rows, phase = {}, nil
  for _, e in ipairs(store.events(first.mark, 1000000) or {}) do
    if e.operation_id == first.id and e.kind == "operation.phase" and not STEP[e.data.phase] then
      phase = plain(e.data.phase, first.state.nat_gateway_id, "NAT")
      rows[#rows + 1] = { phase }
    elseif e.kind == "sandbox.audit" and is_mutation(e.data.service, e.data.operation) then
      t.ok(#rows > 0 and #rows[#rows] == 1, e.data.service .. " " .. e.data.operation .. " is alone under " ..
        tostring(phase))
      rows[#rows][2] = e.data.service .. " " .. e.data.operation
    elseif e.operation_id == first.id and e.kind == "operation.finished" then
      break
    end
  end
  t.eq(rows, SCRIPT("alpha"))
  t.eq(op.get(first.id).phase, "done")
end)

t.test("every step run again on the saved state finds each resource by its id and changes nothing", function()
  -- without their tags, the VPC, gateways, address and route tables can only be found by the ids the state keeps
  local st = first.state
  local ids = { st.vpc_id, st.internet_gateway_id, st.eip_allocation_id, st.nat_gateway_id,
    st.public_route_table_id, st.private_route_table_id }
  call("ec2", "DeleteTags", { Resources = ids, Tags = { { Key = "hypd:cluster-tag" } } })
  local m = mark()
  replay(first.id, 1)
  local v = resume(first.id)
  t.eq(v.status, "succeeded", json.encode(v.error))
  local counts, total = since(m)
  t.eq(total, 0, "mutations: " .. json.encode(counts))
  t.eq(phases_of(first.id, m), { "waiting for NAT gateway " .. st.nat_gateway_id .. " to be available",
    "waiting for EKS cluster hypd-alpha to be ACTIVE" })
  local again = state_of(first.id)
  for _, k in ipairs { "vpc_id", "internet_gateway_id", "eip_allocation_id", "nat_gateway_id", "public_route_table_id",
    "private_route_table_id", "security_group_id", "cluster_role_arn", "cluster_arn" } do
    t.eq(again[k], st[k], k)
  end
  t.eq(v.result.cluster_name, "hypd-alpha")
  call("ec2", "CreateTags", { Resources = ids, Tags = { { Key = "hypd:cluster-tag", Value = "alpha" } } })
end)

t.test("a new call on a fresh state finds everything of a finished run by tag and name", function()
  local m = mark()
  local id = start { cluster_tag = "alpha" }
  t.ok(id ~= first.id, "a new operation")
  local v = op.wait(id)
  t.eq(v.status, "succeeded")
  local counts, total = since(m)
  t.eq(total, 0, "mutations: " .. json.encode(counts))
  local st = state_of(id)
  for _, k in ipairs { "vpc_id", "internet_gateway_id", "eip_allocation_id", "nat_gateway_id", "public_route_table_id",
    "private_route_table_id", "security_group_id", "cluster_role_arn", "cluster_arn" } do
    t.eq(st[k], first.state[k], k)
  end
  t.eq(st.result.private_subnet_ids, first.state.result.private_subnet_ids)
  t.eq(v.result.active, true, "still the active cluster")
end)

t.test("the status shows the live view: ACTIVE, the NAT gateway available", function()
  local s = assert(dispatch.call("cluster_get_creation_status", { operation_id = first.id }, READ)).aws
  t.eq({ s.eks_status, s.nat_gateway_state, s.vpc_id, s.cluster_name, s.region, s.admin_access },
    { "ACTIVE", "available", first.state.vpc_id, "hypd-alpha", "us-west-2", "granted" })
  t.eq(s.errors, nil)
  -- from the params alone (a record whose state was lost)
  s = eks.status({ params = { cluster_tag = "alpha", region = "us-west-2" }, state = {} }, OPTS)
  t.eq({ s.eks_status, s.nat_gateway_state, s.vpc_id }, { "ACTIVE", "available", first.state.vpc_id })
  -- by tag: the latest operation for it
  s = assert(dispatch.call("cluster_get_creation_status", { cluster_tag = "alpha" }, READ)).aws
  t.eq(s.eks_status, "ACTIVE")
end)

t.test("an access entry removed by hand is made again with the admin policy", function()
  call("eks", "DeleteAccessEntry", { clusterName = "hypd-alpha", principalArn = CALLER })
  local m = mark()
  replay(first.id, STEP_NO.access)
  t.eq(resume(first.id).status, "succeeded")
  t.eq(since(m), { ["eks CreateAccessEntry"] = 1, ["eks AssociateAccessPolicy"] = 1 })
  t.eq(phases_of(first.id, m), { "creating access entry " .. CALLER .. " on hypd-alpha",
    "creating access policy association AmazonEKSClusterAdminPolicy for " .. CALLER .. " on hypd-alpha" })
  local ap = call("eks", "ListAssociatedAccessPolicies", { clusterName = "hypd-alpha", principalArn = CALLER })
  t.eq(ap.associatedAccessPolicies[1].policyArn, ADMIN)
end)

t.test("a host stopped before every single mutation and wait, then resumed, still makes each thing once", function()
  local m = mark()
  local script = SCRIPT("kilo")
  local id
  for i, row in ipairs(script) do
    local prefix = plain(row[1], " NAT to be available", "")
    interrupt_at("kilo", prefix)
    local v
    if i == 1 then
      id = start { cluster_tag = "kilo" }
      v = op.wait(id)
    else
      v = resume(id)
    end
    t.eq(v.status, "running", "stopped at " .. prefix)
    t.eq(v.phase, plain(row[1], "gateway NAT to", "gateway " .. tostring(state_of(id).nat_gateway_id) .. " to"),
      "the phase it stopped at is kept")
  end
  local v = resume(id)
  t.eq(v.status, "succeeded", json.encode(v.error))
  once(since(m), "after " .. #script .. " stops")
  local want = {}
  for k, x in pairs(MADE) do want[k] = x end
  want.role = "kilo"
  t.eq(made("kilo"), want)
end)

t.test("after host stops that lost the state, each resource is still created exactly once", function()
  local m = mark()
  -- the host stops while the NAT gateway comes up
  interrupt_at("bravo", "waiting for NAT gateway")
  local id = start { cluster_tag = "bravo" }
  t.eq(op.wait(id).status, "running", "the record stays running")
  local a = state_of(id)
  t.ok(a.nat_gateway_id, "the NAT gateway was made")
  -- the state is lost; the network and iam again, then the host stops as the cluster step begins
  lose_state(id)
  interrupt_at("bravo", "cluster")
  t.eq(resume(id).status, "running", "stopped again")
  t.ok(state_of(id).cluster_role_arn, "the role is recorded")
  t.eq(state_of(id).cluster_arn, nil, "no cluster yet")
  -- the state is lost once more; the operation runs to its end
  lose_state(id)
  local v = resume(id)
  t.eq(v.status, "succeeded", json.encode(v.error))
  once(since(m))
  t.eq(v.result.cluster_name, "hypd-bravo")
  t.eq(state_of(id).vpc_id, a.vpc_id)
  t.eq(state_of(id).nat_gateway_id, a.nat_gateway_id)
end)

t.test("answers lost after each kind of mutation was made: the operation looks again, finds it, and succeeds in " ..
    "one run; nothing is made twice", function()
  local lost = {}
  for _, name in ipairs { "CreateVpc", "ModifyVpcAttribute", "CreateInternetGateway", "AttachInternetGateway",
    "CreateSubnet", "ModifySubnetAttribute", "AllocateAddress", "CreateNatGateway", "CreateRouteTable", "CreateRoute",
    "AssociateRouteTable", "CreateSecurityGroup", "AuthorizeSecurityGroupIngress" } do
    swap("ec2", name, function(original, ctx, input)
      local out = original(ctx, input)
      if not lost[name] then
        lost[name] = true
        ctx.error("InternalFailure", "the answer to " .. name .. " was lost on the way (the test)", 500)
      end
      return out
    end)
  end
  for _, s in ipairs { { "iam", "CreateRole" }, { "iam", "AttachRolePolicy" }, { "eks", "CreateCluster" } } do
    swap(s[1], s[2], function(original, ctx, input)
      local out = original(ctx, input)
      if not lost[s[2]] then
        lost[s[2]] = true
        ctx.error(s[1] == "iam" and "ServiceFailure" or "ServerException", "the answer was lost (the test)", 500)
      end
      return out
    end)
  end
  local v = op.wait(start { cluster_tag = "lima" })
  E.restore_all()
  t.eq(v.status, "succeeded", json.encode(v.error))
  -- each lost answer was a 500 after the work: ensure looked again and took
  -- what was made (an update read again and found it done); the calls with
  -- an idempotency token (CreateNatGateway, CreateRouteTable, CreateCluster)
  -- the AWS client sent again itself, and got the same thing
  for _, name in ipairs { "CreateVpc", "ModifyVpcAttribute", "CreateInternetGateway", "AttachInternetGateway",
    "CreateSubnet", "ModifySubnetAttribute", "AllocateAddress", "CreateRoute", "AssociateRouteTable",
    "CreateSecurityGroup", "AuthorizeSecurityGroupIngress", "CreateRole", "AttachRolePolicy" } do
    t.ok(lost[name], name .. "'s answer was lost once")
  end
  t.eq({ lost.CreateNatGateway, lost.CreateRouteTable, lost.CreateCluster }, { true, true, true })
  local want = {}
  for k, x in pairs(MADE) do want[k] = x end
  want.role = "lima"
  t.eq(made("lima"), want)
end)

t.test("a cancel while waiting for ACTIVE keeps everything, and a later call completes", function()
  local id = start { cluster_tag = "charlie" }
  local function eks_notes()
    local n = 0
    for _, note in ipairs(notes_of(id)) do if note:find("^EKS cluster") then n = n + 1 end end
    return n
  end
  while eks_notes() < 3 and op.get(id).status == "running" do task.sleep(5) end
  local v = assert(dispatch.call("operation_cancel", { operation_id = id }, WHO))
  t.eq(v.status, "cancelled")
  t.eq(v.phase, "cancelled during waiting for EKS cluster hypd-charlie to be ACTIVE")
  t.eq(v.error.code, "CANCELLED")
  t.like(v.error.message, "cancelled")
  local st = state_of(id)
  t.eq(st.result, nil)
  t.ok(st.cluster_arn, "the state keeps the cluster")
  t.eq(call("eks", "DescribeCluster", { name = "hypd-charlie" }).cluster.status, "CREATING")
  local m = mark()
  -- a later call finds everything by tag and waits for ACTIVE
  local w = op.wait(start { cluster_tag = "charlie" })
  local _, total = since(m)
  t.eq(total, 0)
  t.eq(w.result.cluster_name, "hypd-charlie")
  t.eq(w.result.active, false, "hypd-alpha stays the active cluster")
  t.eq(call("eks", "DescribeCluster", { name = "hypd-charlie" }).cluster.status, "ACTIVE")
end)

t.test("an access entry EKS refuses fails the access step with AWS's error; the next call grants it", function()
  interrupt_at("india", "access")
  local id = start { cluster_tag = "india" }
  t.eq(op.wait(id).status, "running", "stopped as the access step began")
  t.eq(call("eks", "DescribeCluster", { name = "hypd-india" }).cluster.status, "ACTIVE", "access waits for ACTIVE")
  call("eks", "DeleteAccessEntry", { clusterName = "hypd-india", principalArn = CALLER })
  local restore = swap("eks", "CreateAccessEntry", function(_, ctx)
    ctx.error("InvalidRequestException", "the cluster is not ready for CreateAccessEntry", 400)
  end)
  local v = resume(id)
  restore()
  t.eq({ v.status, v.error.code, v.phase }, { "failed", "InvalidRequestException",
    "creating access entry " .. CALLER .. " on hypd-india" })
  t.eq({ v.steps[STEP_NO.access].name, v.steps[STEP_NO.access].status }, { "access", "failed" })
  t.like(v.steps[STEP_NO.access].error, "not ready")
  local m = mark()
  local again = op.wait(start { cluster_tag = "india" })
  t.eq(again.status, "succeeded", json.encode(again.error))
  t.eq(since(m), { ["eks CreateAccessEntry"] = 1, ["eks AssociateAccessPolicy"] = 1 })
  t.eq(state_of(again.operation_id).admin_access, "granted")
end)

t.test("CreateCluster is tried again while EKS does not see the new role, and fails with its error after six tries", function()
  local tries = 0
  local restore = swap("eks", "CreateCluster", function(original, ctx, input)
    tries = tries + 1
    if tries <= 2 then
      ctx.error("InvalidParameterException", "Role with arn: " .. tostring(input.roleArn) ..
        ", does not exist or is not assumable by EKS.")
    end
    return original(ctx, input)
  end)
  local id = start { cluster_tag = "juliet" }
  local v = op.wait(id)
  restore()
  t.eq(v.status, "succeeded", json.encode(v.error))
  t.eq(tries, 3)
  local seen = 0
  for _, n in ipairs(notes_of(id)) do
    if n:find("^EKS does not see role arn:aws:iam::123456789012:role/hypd%-juliet%-eks%-cluster%-role yet") then
      seen = seen + 1
    end
  end
  t.eq(seen, 2, "a progress note for each retry")
  -- never seen: the error of the last try
  tries = 0
  restore = swap("eks", "CreateCluster", function(_, ctx)
    tries = tries + 1
    ctx.error("InvalidParameterException", "Role with arn: x, does not exist or is not assumable by EKS.")
  end)
  v = op.wait(start { cluster_tag = "papa" })
  restore()
  t.eq({ v.status, v.error.code, tries }, { "failed", "InvalidParameterException", eks.ROLE_RETRIES })
  t.eq(v.steps[STEP_NO.cluster].status, "failed")
  t.raises(function() call("eks", "DescribeCluster", { name = "hypd-papa" }) end, "ResourceNotFoundException")
end)

t.test("a NAT gateway that goes away while pending fails the operation; the next call makes another", function()
  local id = start { cluster_tag = "mike" }
  while not tostring(op.get(id).phase):find("^waiting for NAT gateway") and op.get(id).status == "running" do
    task.sleep(1)
  end
  local nat = state_of(id).nat_gateway_id
  call("ec2", "DeleteNatGateway", { NatGatewayId = nat })
  local v = op.wait(id)
  t.eq({ v.status, v.error.code }, { "failed", "FAILED" })
  has(v.error.message, "NAT gateway " .. nat .. " is deleting; a new run creates another")
  t.eq(v.steps[STEP_NO.private_routes].status, "failed")
  task.sleep(120) -- deleted, its address free again
  local m = mark()
  local w = op.wait(start { cluster_tag = "mike" })
  t.eq(w.status, "succeeded", json.encode(w.error))
  local counts = since(m)
  t.eq({ counts["ec2 CreateNatGateway"], counts["ec2 AllocateAddress"], counts["ec2 CreateVpc"] }, { 1, nil, nil },
    "a new NAT gateway on the same address, nothing else made again")
  t.eq(counts["ec2 CreateRoute"], 1, "the private route, to the new gateway")
  local st = state_of(w.operation_id)
  t.ok(st.nat_gateway_id ~= nat, "another NAT gateway")
  local rt = call("ec2", "DescribeRouteTables", { RouteTableIds = { st.private_route_table_id } }).RouteTables[1]
  local default
  for _, r in ipairs(rt.Routes) do if r.DestinationCidrBlock == "0.0.0.0/0" then default = r end end
  t.eq({ default.NatGatewayId, default.State }, { st.nat_gateway_id, "active" })
end)

t.test("an EKS cluster hypd-<tag> that is not hypd's for the tag is a CONFLICT naming it", function()
  local sub = first.state.private_subnet_ids
  call("eks", "CreateCluster", { name = "hypd-delta", roleArn = first.state.cluster_role_arn,
    resourcesVpcConfig = { subnetIds = sub }, accessConfig = { authenticationMode = "API" } })
  call("eks", "CreateCluster", { name = "hypd-echo", roleArn = first.state.cluster_role_arn,
    resourcesVpcConfig = { subnetIds = sub }, tags = { ["hypd:cluster-tag"] = "other" } })
  local id = start { cluster_tag = "delta" }
  local v = op.wait(id)
  t.eq({ v.status, v.error.code }, { "failed", "CONFLICT" })
  t.like(v.error.message, "^EKS cluster hypd%-delta in us%-west%-2 exists but is not hypd's")
  t.like(v.error.message, "hypd:cluster%-tag tag is missing")
  t.like(v.error.message, "choose another cluster_tag")
  t.eq({ v.steps[STEP_NO.cluster].name, v.steps[STEP_NO.cluster].status }, { "cluster", "failed" })
  local _, total = since(step_mark(id, "cluster"))
  t.eq(total, 0, "the cluster step changed nothing")
  v = op.wait(start { cluster_tag = "echo" })
  t.eq({ v.status, v.error.code }, { "failed", "CONFLICT" })
  t.like(v.error.message, "hypd%-echo.*'other', not 'echo'")
  local s = assert(dispatch.call("cluster_get_creation_status", { operation_id = id }, READ)).aws
  t.eq(s.eks_owner, "not hypd's cluster for this tag")
end)

t.test("an IAM role of the same name without hypd's tag is a CONFLICT", function()
  call("iam", "CreateRole", { RoleName = "hypd-foxtrot-eks-cluster-role", AssumeRolePolicyDocument = json.encode {
    Version = "2012-10-17", Statement = { { Effect = "Allow", Principal = { Service = "eks.amazonaws.com" },
      Action = "sts:AssumeRole" } } } })
  local id = start { cluster_tag = "foxtrot" }
  local v = op.wait(id)
  t.eq({ v.status, v.error.code }, { "failed", "CONFLICT" })
  t.like(v.error.message, "^IAM role hypd%-foxtrot%-eks%-cluster%-role .*exists but is not hypd's .*missing")
  t.eq({ v.steps[STEP_NO.iam].name, v.steps[STEP_NO.iam].status }, { "iam", "failed" })
  local _, total = since(step_mark(id, "iam"))
  t.eq(total, 0, "the role was neither changed nor given a policy")
end)

t.test("two VPCs with the tag, or its internet gateway attached to another VPC, are CONFLICTs", function()
  local m = mark()
  for _ = 1, 2 do
    call("ec2", "CreateVpc", { CidrBlock = "10.70.0.0/16", TagSpecifications = { { ResourceType = "vpc",
      Tags = { { Key = "hypd:cluster-tag", Value = "november" } } } } })
  end
  local v = op.wait(start { cluster_tag = "november" })
  t.eq({ v.status, v.error.code, v.steps[STEP_NO.vpc].status }, { "failed", "CONFLICT", "failed" })
  t.like(v.error.message, "^2 VPCs carry the tag hypd:cluster%-tag=november %(vpc%-")
  -- a gateway tagged for the cluster but attached elsewhere is not taken over
  local other = call("ec2", "CreateVpc", { CidrBlock = "10.71.0.0/16" }).Vpc.VpcId
  local igw = call("ec2", "CreateInternetGateway", { TagSpecifications = { { ResourceType = "internet-gateway",
    Tags = { { Key = "hypd:cluster-tag", Value = "oscar" } } } } }).InternetGateway.InternetGatewayId
  call("ec2", "AttachInternetGateway", { InternetGatewayId = igw, VpcId = other })
  local id = start { cluster_tag = "oscar" }
  v = op.wait(id)
  t.eq({ v.status, v.error.code, v.steps[STEP_NO.internet_gateway].status }, { "failed", "CONFLICT", "failed" })
  t.like(v.error.message, "^internet gateway attachment hypd%-oscar%-igw to hypd%-oscar%-vpc")
  has(v.error.message, "it attaches " .. igw .. " to " .. other .. ", not to " .. state_of(id).vpc_id)
  has(v.error.message, "choose another cluster_tag")
  local _, total = since(step_mark(id, "internet_gateway"))
  t.eq(total, 0, "nothing attached or detached")
  local counts = since(m)
  t.eq(counts["ec2 CreateVpc"], 4, "the test's three VPCs and oscar's")
end)

t.test("a bad VPC CIDR is refused before anything is made", function()
  local m = mark()
  local v = op.wait(start { cluster_tag = "golf", vpc_cidr = "10.9.1.0/16" })
  t.eq({ v.status, v.error.code }, { "failed", "VALIDATION" })
  t.like(v.error.message, "10%.9%.0%.0/16")
  local _, total = since(m)
  t.eq(total, 0)
end)

t.test("a VPC of the tag is reused as it is: its own CIDR, a foreign subnet's block skipped; a /24 gets /28s", function()
  local vpc = call("ec2", "CreateVpc", { CidrBlock = "10.60.0.0/16", TagSpecifications = { { ResourceType = "vpc",
    Tags = { { Key = "hypd:cluster-tag", Value = "quebec" } } } } }).Vpc.VpcId
  call("ec2", "CreateSubnet", { VpcId = vpc, CidrBlock = "10.60.0.0/24", AvailabilityZone = "us-west-2a" })
  local m = mark()
  local id = start { cluster_tag = "quebec" }
  local v = op.wait(id)
  t.eq(v.status, "succeeded", json.encode(v.error))
  t.eq(v.result.vpc_id, vpc)
  t.eq(since(m)["ec2 CreateVpc"], nil)
  local notes = notes_of(id)
  t.eq(notes[1], "reusing VPC " .. vpc .. " with its CIDR 10.60.0.0/16 (not 10.192.0.0/16)")
  local blocks = {}
  for _, sid in ipairs { v.result.public_subnet_ids[1], v.result.public_subnet_ids[2], v.result.private_subnet_ids[1],
    v.result.private_subnet_ids[2] } do
    blocks[#blocks + 1] = call("ec2", "DescribeSubnets", { SubnetIds = { sid } }).Subnets[1].CidrBlock
  end
  t.eq(blocks, { "10.60.16.0/20", "10.60.32.0/20", "10.60.48.0/20", "10.60.64.0/20" })
  v = op.wait(start { cluster_tag = "romeo", vpc_cidr = "192.168.4.0/24" })
  t.eq(v.status, "succeeded", json.encode(v.error))
  blocks = {}
  for _, s in ipairs(call("ec2", "DescribeSubnets", { Filters = by_tag("romeo") }).Subnets) do
    blocks[tags_of(s.Tags)["hypd:subnet"]] = s.CidrBlock
  end
  t.eq(blocks, { ["public-1"] = "192.168.4.0/28", ["public-2"] = "192.168.4.16/28", ["private-1"] = "192.168.4.32/28",
    ["private-2"] = "192.168.4.48/28" })
end)

t.test("under throttling and server errors, calling again after each failed operation creates each thing once", function()
  -- the SDKs' 3 attempts (an operation's 8 would ride these faults out), so that some operations stop
  local aws = require "hypd.aws"
  local attempts = aws.OPERATION_ATTEMPTS
  aws.OPERATION_ATTEMPTS = 3
  t.cleanup(function() aws.OPERATION_ATTEMPTS = attempts end)
  assert(faults.configure { seed = 11, services = { ec2 = { throttle = 0.15, error5xx = 0.08, reset = 0.03 },
    iam = { throttle = 0.1, error5xx = 0.1 }, eks = { throttle = 0.1, error5xx = 0.1 }, sts = { error5xx = 0.2 } } })
  local m = mark()
  local v
  local failures = {}
  repeat
    v = op.wait(start { cluster_tag = "hotel" })
    if v.status ~= "succeeded" then failures[#failures + 1] = tostring(v.error and v.error.code) end
  until v.status == "succeeded" or #failures >= 40
  faults.configure { services = {} }
  t.eq(v.status, "succeeded", "an operation finished after " .. #failures .. " failed ones: " ..
    table.concat(failures, ", "))
  t.ok(#failures > 0, "the faults made some operations fail")
  once(since(m))
  t.eq(v.result.cluster_name, "hypd-hotel")
end)

t.cleanup(function()
  E.restore_all()
  faults.configure { services = {} }
  core.virtual(false)
  srv:stop()
end)
