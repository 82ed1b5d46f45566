-- cluster_create_eks's staged steps (hypd.workflows.eks_create) against the
-- in-process sandbox under the virtual clock, driven by a minimal step
-- context that keeps the registry's contract: a full run to an ACTIVE
-- cluster, re-runs that create nothing, a crash that lost the state, a
-- cancelled wait, a name clash, and phases recorded before every mutation.
local t = require "hypd.tap"
local aws = require "hypd.aws"
local core = require "hypd.core"
local errors = require "hypd.errors"
local faults = require "sandbox.faults"
local json = require "hypd.json"
local regex = require "hypd.regex"
local sandbox = require "sandbox"
local store = require "hypd.store"
local task = require "hypd.task"
local eks = require "hypd.workflows.eks_create"
local net = require "hypd.workflows.eks_network"

local srv = assert(sandbox.start { listen = "127.0.0.1:0",
  credentials = { [os.getenv("AWS_ACCESS_KEY_ID")] = os.getenv("AWS_SECRET_ACCESS_KEY") } })
local OPTS = { endpoint_url = "http://127.0.0.1:" .. srv.port, region = "us-west-2" }
local CALLER = "arn:aws:iam::123456789012:user/sandbox"
local ADMIN = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
core.virtual(true)

local function call(service, op, params) return aws.call(service, op, params or {}, OPTS) end

local function is_mutation(service, op) return not aws.model(service).operations[op].readonly end

-- new_ctx(params [, state, op_id]) -> a step context as hypd.op makes one, over
-- the real AWS client. It records phases, progress notes and every call in
-- ctx.log ({"phase", text} / {"call", service, op}); ctx.cancel_when(ctx) -> true
-- cancels the operation; ctx.crash_at = "phase prefix" raises CRASH there;
-- ctx.refuse = {Operation = true} answers those calls with an AWS error.
local function new_ctx(params, state, op_id)
  local p = {}
  for k, v in pairs(params) do p[k] = v end
  for k, spec in pairs(eks.params) do
    if p[k] == nil then p[k] = spec.default end
  end
  local ctx = { params = p, op_id = op_id or "op-00000000000000a1", state = state or {}, region = "us-west-2",
    phases = {}, notes = {}, log = {}, saves = 0, cancelled = false }
  function ctx:phase(text)
    if self.crash_at and text:find(self.crash_at, 1, true) == 1 then error(errors.new("CRASH", text), 0) end
    self.phases[#self.phases + 1] = text
    self.log[#self.log + 1] = { "phase", text }
    self.saves = self.saves + 1
  end
  function ctx:progress(text) self.notes[#self.notes + 1] = text end
  function ctx:save() self.saves = self.saves + 1 end
  function ctx:try(service, op, args)
    self.log[#self.log + 1] = { "call", service, op }
    if self.refuse and self.refuse[op] then
      return nil, errors.new("InvalidRequestException", "the cluster is not ready for " .. op, { status = 400 })
    end
    return aws.try(service, op, args or {}, OPTS)
  end
  function ctx:call(service, op, args)
    local out, err = self:try(service, op, args)
    if out == nil then error(err, 0) end
    return out
  end
  function ctx:check_cancel()
    if self.cancelled or (self.cancel_when and self:cancel_when()) then
      self.cancelled = true
      errors.raise("CANCELLED", "operation " .. self.op_id .. " was cancelled")
    end
  end
  function ctx:sleep(s)
    self:check_cancel()
    task.sleep(s)
    self:check_cancel()
  end
  return ctx
end

-- run(ctx [, from, to]): runs steps from..to as the registry does
local function run(ctx, from, to)
  for i = from or 1, to or #eks.steps do
    local out = eks.steps[i].run(ctx)
    if type(out) == "table" then for k, v in pairs(out) do ctx.state[k] = v end end
  end
  return ctx
end

-- the sandbox's audit log: mark() -> position; since(mark) -> {"service Operation" = n}
local function mark()
  local evs = store.events(0, 1000000) or {}
  return #evs > 0 and evs[#evs].seq or 0
end
local function since(m)
  local counts, total = {}, 0
  for _, e in ipairs(store.events(m, 1000000) or {}) do
    if e.kind == "sandbox.audit" then
      local k = e.data.service .. " " .. e.data.operation
      counts[k], total = (counts[k] or 0) + 1, total + 1
    end
  end
  return counts, total
end

local function tags_of(list)
  local out = {}
  for _, x in ipairs(list or {}) do out[x.Key] = x.Value end
  return out
end

local function by_tag(tag) return { { Name = "tag:hypd:cluster-tag", Values = { tag } } } end

local first -- the context of the first full run (tag "alpha")

t.test("the params take a cluster tag, a region, a Kubernetes version and a VPC CIDR", function()
  local p = eks.params
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
  t.eq(#eks.steps, 5)
  local names = {}
  for i, s in ipairs(eks.steps) do names[i] = s.name end
  t.eq(names, { "network", "iam", "cluster", "access", "wait_active" })
end)

t.test("subnets are carved from the VPC CIDR deterministically", function()
  t.eq(net.next_free("10.192.0.0/16", {}), "10.192.0.0/20")
  t.eq(net.next_free("10.192.0.0/16", { "10.192.0.0/20", "10.192.16.0/20" }), "10.192.32.0/20")
  t.eq(net.next_free("10.192.0.0/16", { "10.192.0.0/24" }), "10.192.16.0/20", "a foreign subnet is skipped")
  t.eq(net.next_free("192.168.4.0/24", { "192.168.4.0/28" }), "192.168.4.16/28")
  t.eq(net.subnet_prefix(24), 28)
  local _, why = net.parse_cidr("10.192.1.0/16")
  t.like(why, "10%.192%.0%.0/16")
  t.eq(eks.admin_principal("arn:aws:sts::123456789012:assumed-role/Admin/jane"), "arn:aws:iam::123456789012:role/Admin")
  t.eq(eks.admin_principal(CALLER), CALLER)
  t.eq(net.elapsed(250), "4m10s")
end)

t.test("before anything exists the status says NOT_CREATED", function()
  local s = eks.status({ params = { cluster_tag = "alpha", region = "us-west-2" }, state = {} }, OPTS)
  t.eq(s.eks_status, "NOT_CREATED")
  t.eq(s.vpc_id, nil)
  t.eq(s.errors, nil)
end)

t.test("a full run makes an ACTIVE cluster hypd-alpha on a new VPC, role and access entry", function()
  local started = core.now()
  local ctx = run(new_ctx { cluster_tag = "alpha" })
  first = ctx
  local st, r = ctx.state, ctx.state.result
  local minutes = (core.now() - started) / 60
  t.ok(minutes >= 8 and minutes <= 16, "the stage took " .. minutes .. " simulated minutes")
  -- the VPC
  local vpc = call("ec2", "DescribeVpcs", { Filters = by_tag("alpha") }).Vpcs
  t.eq(#vpc, 1)
  t.eq({ vpc[1].VpcId, vpc[1].CidrBlock, tags_of(vpc[1].Tags).Name }, { st.vpc_id, "10.192.0.0/16", "hypd-alpha-vpc" })
  for _, a in ipairs { { "enableDnsSupport", "EnableDnsSupport" }, { "enableDnsHostnames", "EnableDnsHostnames" } } do
    t.eq(call("ec2", "DescribeVpcAttribute", { VpcId = st.vpc_id, Attribute = a[1] })[a[2]].Value, true, a[1])
  end
  -- subnets: public and private in two zones
  local subs = call("ec2", "DescribeSubnets", { Filters = by_tag("alpha") }).Subnets
  t.eq(#subs, 4)
  local kinds = {}
  for _, s in ipairs(subs) do
    local tg = tags_of(s.Tags)
    local kind = tg["kubernetes.io/role/elb"] and "public" or tg["kubernetes.io/role/internal-elb"] and "private"
    kinds[kind] = (kinds[kind] or 0) + 1
    t.eq(s.MapPublicIpOnLaunch, kind == "public", s.SubnetId .. " maps public IPs only when public")
    t.like(tg.Name, "^hypd%-alpha%-" .. kind .. "%-us%-west%-2[ab]$")
    t.like(s.CidrBlock, "^10%.192%.%d+%.0/20$")
  end
  t.eq(kinds, { public = 2, private = 2 })
  local function az_of(id)
    return call("ec2", "DescribeSubnets", { SubnetIds = { id } }).Subnets[1].AvailabilityZone
  end
  t.eq({ az_of(r.public_subnet_ids[1]), az_of(r.public_subnet_ids[2]) }, { "us-west-2a", "us-west-2b" })
  t.eq({ az_of(r.private_subnet_ids[1]), az_of(r.private_subnet_ids[2]) }, { "us-west-2a", "us-west-2b" })
  -- gateways and routes
  local igw = call("ec2", "DescribeInternetGateways", { Filters = by_tag("alpha") }).InternetGateways
  t.eq(#igw, 1)
  t.eq(igw[1].Attachments[1].VpcId, st.vpc_id)
  local nat = call("ec2", "DescribeNatGateways", { Filter = by_tag("alpha") }).NatGateways
  t.eq(#nat, 1)
  t.eq({ nat[1].State, nat[1].SubnetId, tags_of(nat[1].Tags).Name }, { "available", r.public_subnet_ids[1], "hypd-alpha-nat" })
  local eip = call("ec2", "DescribeAddresses", { Filters = by_tag("alpha") }).Addresses
  t.eq(#eip, 1)
  t.eq(eip[1].AllocationId, nat[1].NatGatewayAddresses[1].AllocationId)
  local rts = call("ec2", "DescribeRouteTables", { Filters = by_tag("alpha") }).RouteTables
  t.eq(#rts, 2)
  for _, rt in ipairs(rts) do
    local name = tags_of(rt.Tags).Name
    local default, assoc = nil, {}
    for _, route in ipairs(rt.Routes) do if route.DestinationCidrBlock == "0.0.0.0/0" then default = route end end
    for _, a in ipairs(rt.Associations) do assoc[#assoc + 1] = a.SubnetId end
    table.sort(assoc)
    if name == "hypd-alpha-public-rt" then
      t.eq(default.GatewayId, igw[1].InternetGatewayId)
      local want = { r.public_subnet_ids[1], r.public_subnet_ids[2] }
      table.sort(want)
      t.eq(assoc, want)
    else
      t.eq(name, "hypd-alpha-private-rt")
      t.eq(default.NatGatewayId, nat[1].NatGatewayId)
      local want = { r.private_subnet_ids[1], r.private_subnet_ids[2] }
      table.sort(want)
      t.eq(assoc, want)
    end
    t.eq(default.State, "active")
  end
  -- the security group lets all traffic within itself
  local sg = call("ec2", "DescribeSecurityGroups", { GroupIds = { r.security_group_id } }).SecurityGroups[1]
  t.eq({ sg.GroupName, tags_of(sg.Tags)["hypd:cluster-tag"] }, { "hypd-alpha-cluster", "alpha" })
  local self_rule = false
  for _, p in ipairs(sg.IpPermissions) do
    for _, pair in ipairs(p.UserIdGroupPairs or {}) do
      self_rule = self_rule or (p.IpProtocol == "-1" and pair.GroupId == sg.GroupId)
    end
  end
  t.ok(self_rule, "a self-referencing all-traffic rule")
  -- the role
  local role = call("iam", "GetRole", { RoleName = "hypd-alpha-eks-cluster-role" }).Role
  t.eq(role.Arn, r.cluster_role_arn)
  t.eq(tags_of(role.Tags)["hypd:cluster-tag"], "alpha")
  t.like(json.encode(role), "eks%.amazonaws%.com")
  local pols = call("iam", "ListAttachedRolePolicies", { RoleName = "hypd-alpha-eks-cluster-role" }).AttachedPolicies
  t.eq(pols[1].PolicyArn, "arn:aws:iam::aws:policy/AmazonEKSClusterPolicy")
  -- the cluster
  local c = call("eks", "DescribeCluster", { name = "hypd-alpha" }).cluster
  t.eq({ c.status, c.version, c.roleArn, c.accessConfig.authenticationMode }, { "ACTIVE", "1.34", role.Arn, "API" })
  t.eq(c.resourcesVpcConfig.subnetIds, r.private_subnet_ids)
  t.eq(c.resourcesVpcConfig.securityGroupIds, { r.security_group_id })
  t.eq({ c.resourcesVpcConfig.endpointPublicAccess, c.resourcesVpcConfig.endpointPrivateAccess }, { true, true })
  t.eq(c.tags["hypd:cluster-tag"], "alpha")
  -- the caller is cluster admin
  local ap = call("eks", "ListAssociatedAccessPolicies", { clusterName = "hypd-alpha", principalArn = CALLER })
  t.eq({ ap.associatedAccessPolicies[1].policyArn, ap.associatedAccessPolicies[1].accessScope.type }, { ADMIN, "cluster" })
  t.eq(st.admin_access, "granted")
  -- the result
  t.eq({ r.cluster_name, r.cluster_arn, r.version, r.vpc_id, r.region, r.cluster_tag },
    { "hypd-alpha", c.arn, "1.34", st.vpc_id, "us-west-2", "alpha" })
  t.like(r.endpoint, "^https://")
  t.eq(#r.public_subnet_ids, 2)
  t.ok(ctx.saves > 10, "state was saved along the way")
  t.like(ctx.notes[#ctx.notes], "^EKS cluster hypd%-alpha CREATING %(%d+m%d%ds%)$")
end)

t.test("phases are recorded before every mutation and name what happens", function()
  local ctx = first
  local function index(prefix)
    for i, p in ipairs(ctx.phases) do
      if p:find(prefix, 1, true) == 1 then return i end
    end
    error("no phase starts with '" .. prefix .. "' in " .. json.encode(ctx.phases), 0)
  end
  local order = { "creating VPC", "creating internet gateway", "creating subnet", "allocating Elastic IP",
    "creating NAT gateway", "waiting for NAT gateway", "creating IAM role", "attaching AmazonEKSClusterPolicy",
    "creating EKS cluster", "waiting for EKS cluster ACTIVE" }
  for i = 2, #order do
    t.ok(index(order[i - 1]) < index(order[i]), order[i - 1] .. " comes before " .. order[i])
  end
  -- no two mutations without a phase between them
  local phased, n = false, 0
  for _, e in ipairs(ctx.log) do
    if e[1] == "phase" then
      phased = true
    elseif is_mutation(e[2], e[3]) then
      t.ok(phased, e[2] .. " " .. e[3] .. " (mutation " .. (n + 1) .. ") has a phase before it")
      phased, n = false, n + 1
    end
  end
  t.ok(n >= 20, "the run made at least 20 mutations, made " .. n)
end)

t.test("running every step again with the same state creates and changes nothing", function()
  local m = mark()
  local ctx = run(new_ctx({ cluster_tag = "alpha" }, first.state))
  local counts, total = since(m)
  t.eq(total, 0, "mutations: " .. json.encode(counts))
  t.eq(ctx.phases, { "waiting for EKS cluster ACTIVE" })
  t.eq(ctx.state.result.cluster_name, "hypd-alpha")
end)

t.test("a fresh state finds everything of a finished run by tag", function()
  local m = mark()
  local ctx = run(new_ctx({ cluster_tag = "alpha" }, {}, "op-00000000000000b2"))
  local counts, total = since(m)
  t.eq(total, 0, "mutations: " .. json.encode(counts))
  t.eq(ctx.state.vpc_id, first.state.vpc_id)
  t.eq(ctx.state.result.private_subnet_ids, first.state.result.private_subnet_ids)
  t.eq(ctx.state.nat_gateway_id, first.state.nat_gateway_id)
end)

t.test("the status shows the live view: ACTIVE, the NAT gateway available", function()
  local s = eks.status({ params = { cluster_tag = "alpha" }, state = first.state }, OPTS)
  t.eq({ s.eks_status, s.nat_gateway_state, s.vpc_id, s.cluster_name, s.region },
    { "ACTIVE", "available", first.state.vpc_id, "hypd-alpha", "us-west-2" })
  t.eq(s.errors, nil)
  -- from the params alone (a record whose state was lost)
  s = eks.status({ params = { cluster_tag = "alpha", region = "us-west-2" }, state = {} }, OPTS)
  t.eq({ s.eks_status, s.nat_gateway_state, s.vpc_id }, { "ACTIVE", "available", first.state.vpc_id })
  -- from a step context
  s = eks.status(new_ctx({ cluster_tag = "alpha" }, first.state))
  t.eq(s.eks_status, "ACTIVE")
end)

t.test("an access entry removed by hand is made again with the admin policy", function()
  call("eks", "DeleteAccessEntry", { clusterName = "hypd-alpha", principalArn = CALLER })
  local m = mark()
  local ctx = run(new_ctx({ cluster_tag = "alpha" }, first.state), 4, 4)
  local counts = since(m)
  t.eq(counts, { ["eks CreateAccessEntry"] = 1, ["eks AssociateAccessPolicy"] = 1 })
  t.like(ctx.phases[1], "^creating access entry for arn:aws:iam::123456789012:user/sandbox$")
  local ap = call("eks", "ListAssociatedAccessPolicies", { clusterName = "hypd-alpha", principalArn = CALLER })
  t.eq(ap.associatedAccessPolicies[1].policyArn, ADMIN)
end)

t.test("after crashes that lost the state, each resource is still created exactly once", function()
  local m = mark()
  -- crash while the NAT gateway comes up, with its id never saved
  local a = new_ctx { cluster_tag = "bravo" }
  a.crash_at = "waiting for NAT gateway"
  t.raises(function() run(a, 1, 1) end, "CRASH")
  t.ok(a.state.nat_gateway_id, "the NAT gateway was made")
  -- a fresh state: network and iam again, then the state is thrown away once more
  local b = run(new_ctx({ cluster_tag = "bravo" }, {}), 1, 2)
  t.ok(b.state.cluster_role_arn, "the role is recorded")
  local c = run(new_ctx({ cluster_tag = "bravo" }, {}))
  local counts = since(m)
  for _, op in ipairs { "ec2 CreateVpc", "ec2 CreateInternetGateway", "ec2 AttachInternetGateway",
    "ec2 AllocateAddress", "ec2 CreateNatGateway", "ec2 CreateSecurityGroup", "iam CreateRole",
    "iam AttachRolePolicy", "eks CreateCluster" } do
    t.eq(counts[op], 1, op)
  end
  t.eq(counts["ec2 CreateSubnet"], 4)
  t.eq(counts["ec2 CreateRouteTable"], 2)
  t.eq(counts["ec2 AssociateRouteTable"], 4)
  t.eq(counts["ec2 CreateRoute"], 2)
  t.eq(counts["eks CreateAccessEntry"], nil, "the creator's entry comes with the cluster")
  t.eq(#call("ec2", "DescribeVpcs", { Filters = by_tag("bravo") }).Vpcs, 1)
  t.eq(#call("ec2", "DescribeNatGateways", { Filter = by_tag("bravo") }).NatGateways, 1)
  t.eq(c.state.result.cluster_name, "hypd-bravo")
  t.eq(c.state.vpc_id, a.state.vpc_id)
  t.eq(call("eks", "DescribeCluster", { name = "hypd-bravo" }).cluster.status, "ACTIVE")
end)

t.test("a cancel while waiting for ACTIVE keeps everything, and a later run completes", function()
  local ctx = run(new_ctx({ cluster_tag = "charlie" }, nil, "op-00000000000000c3"), 1, 4)
  ctx.cancel_when = function(c) return #c.notes >= 3 and c.notes[#c.notes]:find("^EKS cluster") ~= nil end
  local err = t.raises(function() run(ctx, 5, 5) end, "CANCELLED")
  t.like(err.message, "cancelled")
  t.eq(ctx.state.result, nil)
  t.ok(ctx.state.cluster_arn, "the state keeps the cluster")
  t.eq(call("eks", "DescribeCluster", { name = "hypd-charlie" }).cluster.status, "CREATING")
  local m = mark()
  -- the operation resumes at the step that was running, with the state as saved
  local again = run(new_ctx({ cluster_tag = "charlie" }, ctx.state, "op-00000000000000c3"), 5, 5)
  local _, total = since(m)
  t.eq(total, 0)
  t.eq(again.state.result.cluster_name, "hypd-charlie")
  t.eq(call("eks", "DescribeCluster", { name = "hypd-charlie" }).cluster.status, "ACTIVE")
end)

t.test("access refused while the cluster is CREATING is granted once it is ACTIVE", function()
  local ctx = run(new_ctx({ cluster_tag = "india" }, nil, "op-00000000000000i9"), 1, 3)
  call("eks", "DeleteAccessEntry", { clusterName = "hypd-india", principalArn = CALLER })
  ctx.refuse = { CreateAccessEntry = true }
  run(ctx, 4, 4)
  t.eq(ctx.state.admin_access, "pending")
  t.like(ctx.notes[#ctx.notes], "waits for ACTIVE")
  local later = run(new_ctx({ cluster_tag = "india" }, ctx.state, "op-00000000000000i9"), 5, 5)
  t.eq(later.state.admin_access, "granted")
  local ap = call("eks", "ListAssociatedAccessPolicies", { clusterName = "hypd-india", principalArn = CALLER })
  t.eq(ap.associatedAccessPolicies[1].policyArn, ADMIN)
  t.like(later.phases[#later.phases], "^associating AmazonEKSClusterAdminPolicy")
  -- refused once ACTIVE, the step fails rather than deferring
  call("eks", "DeleteAccessEntry", { clusterName = "hypd-india", principalArn = CALLER })
  local again = new_ctx({ cluster_tag = "india" }, later.state)
  again.refuse = { CreateAccessEntry = true }
  t.raises(function() run(again, 4, 4) end, "InvalidRequestException")
end)

t.test("an EKS cluster hypd-<tag> that is not hypd's for the tag is a CONFLICT naming it", function()
  local sub = first.state.private_subnet_ids
  call("eks", "CreateCluster", { name = "hypd-delta", roleArn = first.state.cluster_role_arn,
    resourcesVpcConfig = { subnetIds = sub }, accessConfig = { authenticationMode = "API" } })
  call("eks", "CreateCluster", { name = "hypd-echo", roleArn = first.state.cluster_role_arn,
    resourcesVpcConfig = { subnetIds = sub }, tags = { ["hypd:cluster-tag"] = "other" } })
  local ctx = new_ctx { cluster_tag = "delta" }
  local m = mark()
  local err = t.raises(function() run(ctx, 3, 3) end, "CONFLICT")
  t.like(err.message, "hypd%-delta")
  t.like(err.message, "missing")
  t.eq(err.cluster, "hypd-delta")
  err = t.raises(function() run(new_ctx { cluster_tag = "echo" }, 3, 3) end, "CONFLICT")
  t.like(err.message, "hypd%-echo.*'other'")
  local _, total = since(m)
  t.eq(total, 0, "nothing was changed")
  local s = eks.status({ params = { cluster_tag = "delta", region = "us-west-2" }, state = {} }, OPTS)
  t.eq(s.eks_owner, "not hypd's cluster for this tag")
end)

t.test("an IAM role of the same name without hypd's tag is a CONFLICT", function()
  call("iam", "CreateRole", { RoleName = "hypd-foxtrot-eks-cluster-role", AssumeRolePolicyDocument = json.encode {
    Version = "2012-10-17", Statement = { { Effect = "Allow", Principal = { Service = "eks.amazonaws.com" },
      Action = "sts:AssumeRole" } } } })
  local err = t.raises(function() run(new_ctx { cluster_tag = "foxtrot" }, 2, 2) end, "CONFLICT")
  t.like(err.message, "hypd%-foxtrot%-eks%-cluster%-role")
end)

t.test("a bad VPC CIDR is refused before anything is made", function()
  local m = mark()
  local err = t.raises(function() run(new_ctx { cluster_tag = "golf", vpc_cidr = "10.9.1.0/16" }, 1, 1) end,
    "VALIDATION")
  t.like(err.message, "10%.9%.0%.0/16")
  local _, total = since(m)
  t.eq(total, 0)
end)

t.test("under throttling and server errors, an operation resumed at its failed step creates each thing once", function()
  assert(faults.configure { seed = 11, services = { ec2 = { throttle = 0.15, error5xx = 0.08, reset = 0.03 },
    iam = { throttle = 0.1, error5xx = 0.1 }, eks = { throttle = 0.1, error5xx = 0.1 }, sts = { error5xx = 0.2 } } })
  local m = mark()
  local state, step, failures = {}, 1, {}
  while step <= #eks.steps and #failures < 40 do
    local ctx = new_ctx({ cluster_tag = "hotel" }, state, "op-00000000000000h8")
    local ok, err = pcall(eks.steps[step].run, ctx)
    if ok then step = step + 1 else failures[#failures + 1] = tostring(err.code) end
  end
  faults.configure { services = {} }
  t.eq(step, #eks.steps + 1, "the operation finished after " .. #failures .. " failed attempts")
  t.ok(#failures > 0, "the faults made some attempts fail")
  local counts = since(m)
  for _, op in ipairs { "ec2 CreateVpc", "ec2 CreateInternetGateway", "ec2 AllocateAddress", "ec2 CreateNatGateway",
    "ec2 CreateSecurityGroup", "iam CreateRole", "eks CreateCluster" } do
    t.eq(counts[op], 1, op)
  end
  t.eq(counts["ec2 CreateSubnet"], 4)
  t.eq(counts["ec2 CreateRouteTable"], 2)
  t.eq(state.result.cluster_name, "hypd-hotel")
end)

t.cleanup(function()
  core.virtual(false)
  srv:stop()
end)
