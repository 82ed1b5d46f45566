-- cluster_create_eks (its steps in hypd.workflows.eks_create) run by the
-- real operation layer, hypd.op, through the tool registry, against the
-- in-process sandbox under the virtual clock: a full run to an ACTIVE
-- cluster, steps run again on the saved state that create nothing, a host
-- stopped mid-run whose state was lost, a cancelled wait, name clashes, and
-- a phase persisted before every mutation. What the test reads back (phases,
-- progress notes, the step state) is what hypd.op persisted in the store, so
-- it fails when phases or state stop being persisted.
--
-- Two ways in beyond the public calls, both through hypd.op's own paths:
-- interrupt_at stops an operation as a stopping host does (its task
-- cancelled without a cancel request: the record stays running and
-- op.resume continues it), and replay / lose_state edit the operation's
-- record and state in the store first, as a crash at the wrong moment leaves
-- them, before op.resume.
local t = require "hypd.tap"
local aws = require "hypd.aws"
local core = require "hypd.core"
local faults = require "sandbox.faults"
local json = require "hypd.json"
local op = require "hypd.op"
local regex = require "hypd.regex"
local store = require "hypd.store"
local task = require "hypd.task"
local tool = require "hypd.tool"
local playbook = require "hypd.playbook"
local eks = playbook.load("cluster._eks_stage")
local net = playbook.load("cluster._eks_network")
local H = dofile("tests/lua/helpers.lua")
require("hypd.tools").load()

local srv, OPTS = H.sandbox_here()
local CALLER = "arn:aws:iam::123456789012:user/sandbox"
local ADMIN = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
local WHO = { name = "tester", scope = "operate", front = "test" }
local READ = { name = "reader", scope = "read", front = "test" }
local STEP = {} -- step names: the phase hypd.op records as each step starts
for _, s in ipairs(eks.steps) do STEP[s.name] = true end

local function call(service, operation, params) return aws.call(service, operation, params or {}, OPTS) end

local function is_mutation(service, operation) return not aws.model(service).operations[operation].readonly end

-- the sandbox's EKS answers CreateAccessEntry with an error while refusing
local eks_ops = require("sandbox.services.eks").operations
local create_access_entry = eks_ops.CreateAccessEntry
local function refuse_access_entries(on)
  eks_ops.CreateAccessEntry = on and function(ctx)
    ctx.error("InvalidRequestException", "the cluster is not ready for CreateAccessEntry", 400)
  end or create_access_entry
end

-- start(params) -> operation id: a cluster_create_eks call through the registry
local function start(params)
  local acc = assert(tool.call("cluster_create_eks", params, WHO))
  t.eq(acc.existing, nil, "a new operation for " .. params.cluster_tag)
  return acc.operation_id
end

-- the step state hypd.op persisted for operation id (cluster_get_creation_status reads the same key)
local function state_of(id) return store.get("op/" .. id .. "/state") or {} end

-- the events hypd.op persisted for operation id after seq m: phases (without
-- the step names it records as each step starts) and progress notes
local function phases_of(id, m)
  local out = {}
  for _, e in ipairs(store.events(m or 0, 1000000) or {}) do
    if e.operation_id == id and e.kind == "operation.phase" and not STEP[e.data.phase] then
      out[#out + 1] = e.data.phase
    end
  end
  return out
end
local function notes_of(id)
  local out = {}
  for _, e in ipairs(store.events(0, 1000000) or {}) do
    if e.operation_id == id and e.kind == "operation.progress" then out[#out + 1] = e.data.message end
  end
  return out
end

-- interrupt_at(tag, prefix): the next phase of tag's operation that starts
-- with prefix stops the operation as a stopping host does (SIGTERM): its task
-- is cancelled at its next wait, with no cancel request, so the record stays
-- running with its state as saved and op.resume() continues it
local function interrupt_at(tag, prefix)
  local off
  off = op.subscribe(function(ev)
    if ev.kind == "operation.phase" and ev.target == "eks/us-west-2/" .. tag and
        tostring(ev.phase):find(prefix, 1, true) == 1 then
      off()
      local victim = op.active()[ev.operation_id]
      task.spawn(function() victim:cancel("the host is stopping (the test interrupts it)") end)
    end
  end)
end

-- resume(id) -> view: op.resume() continues the running record id, to its end
local function resume(id)
  t.eq(op.get(id).status, "running", id .. " is left running")
  t.eq(op.resume(), 1, "one operation resumed")
  return op.wait(id)
end

-- replay(id, from): as a host that stopped after saving the state of steps
-- from.. but before recording them done leaves the record: those steps
-- pending, the record running, the state as saved
local function replay(id, from)
  local steps = op.get(id).steps
  for i = from, #steps do steps[i] = { name = steps[i].name, status = "pending" } end
  assert(store.op_update(id, { status = "running", phase = "queued", steps = steps, result = json.null }))
end

-- lose_state(id): the record as if just created, its saved state gone
local function lose_state(id)
  local steps = op.get(id).steps
  for i = 1, #steps do steps[i] = { name = steps[i].name, status = "pending" } end
  assert(store.op_update(id, { steps = steps }))
  store.delete("op/" .. id .. "/state")
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

-- step_mark(id, name) -> the position of the phase hypd.op recorded as step name of id began
local function step_mark(id, name)
  for _, e in ipairs(store.events(0, 1000000) or {}) do
    if e.operation_id == id and e.kind == "operation.phase" and e.data.phase == name then return e.seq end
  end
  error("operation " .. id .. " never began step " .. name, 0)
end

local function tags_of(list)
  local out = {}
  for _, x in ipairs(list or {}) do out[x.Key] = x.Value end
  return out
end

local function by_tag(tag) return { { Name = "tag:hypd:cluster-tag", Values = { tag } } } end

local first -- the first full run (tag "alpha"): {id, mark, state, state_at_cluster}

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
  local function az_of(sid)
    return call("ec2", "DescribeSubnets", { SubnetIds = { sid } }).Subnets[1].AvailabilityZone
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
  -- state was saved along the way: the cluster step began with the network's and the role's
  t.ok(saved_before_cluster, "the cluster was created")
  t.eq({ saved_before_cluster.vpc_id, saved_before_cluster.nat_gateway_id, saved_before_cluster.cluster_role_arn },
    { st.vpc_id, st.nat_gateway_id, st.cluster_role_arn }, "the saved state when the cluster was created")
  t.eq(saved_before_cluster.private_subnet_ids, r.private_subnet_ids)
  local notes = notes_of(id)
  t.like(notes[#notes], "^EKS cluster hypd%-alpha CREATING %(%d+m%d%ds%)$")
end)

t.test("phases are persisted before every mutation and name what happens", function()
  local phases = phases_of(first.id)
  local function index(prefix)
    for i, p in ipairs(phases) do
      if p:find(prefix, 1, true) == 1 then return i end
    end
    error("no phase starts with '" .. prefix .. "' in " .. json.encode(phases), 0)
  end
  local order = { "creating VPC", "creating internet gateway", "creating subnet", "allocating Elastic IP",
    "creating NAT gateway", "waiting for NAT gateway", "creating IAM role", "attaching AmazonEKSClusterPolicy",
    "creating EKS cluster", "waiting for EKS cluster ACTIVE" }
  for i = 2, #order do
    t.ok(index(order[i - 1]) < index(order[i]), order[i - 1] .. " comes before " .. order[i])
  end
  -- no two mutations without a phase between them: the operation's phase
  -- events and the sandbox's audit of each mutation, in the store's order
  local phased, n = false, 0
  for _, e in ipairs(store.events(first.mark, 1000000) or {}) do
    if e.operation_id == first.id and e.kind == "operation.phase" and not STEP[e.data.phase] then
      phased = true
    elseif e.kind == "sandbox.audit" and is_mutation(e.data.service, e.data.operation) then
      t.ok(phased, e.data.service .. " " .. e.data.operation .. " (mutation " .. (n + 1) .. ") has a phase before it")
      phased, n = false, n + 1
    elseif e.operation_id == first.id and e.kind == "operation.finished" then
      break
    end
  end
  t.ok(n >= 20, "the run made at least 20 mutations, made " .. n)
  t.eq(op.get(first.id).phase, "done")
end)

t.test("running every step again with the saved state creates and changes nothing", function()
  local m = mark()
  replay(first.id, 1)
  local v = resume(first.id)
  t.eq(v.status, "succeeded")
  local counts, total = since(m)
  t.eq(total, 0, "mutations: " .. json.encode(counts))
  t.eq(phases_of(first.id, m), { "waiting for EKS cluster ACTIVE" })
  t.eq(v.result.cluster_name, "hypd-alpha")
end)

t.test("a fresh state finds everything of a finished run by tag", function()
  local m = mark()
  local id = start { cluster_tag = "alpha" }
  t.ok(id ~= first.id, "a new operation")
  t.eq(op.wait(id).status, "succeeded")
  local counts, total = since(m)
  t.eq(total, 0, "mutations: " .. json.encode(counts))
  local st = state_of(id)
  t.eq(st.vpc_id, first.state.vpc_id)
  t.eq(st.result.private_subnet_ids, first.state.result.private_subnet_ids)
  t.eq(st.nat_gateway_id, first.state.nat_gateway_id)
end)

t.test("the status shows the live view: ACTIVE, the NAT gateway available", function()
  local s = assert(tool.call("cluster_get_creation_status", { operation_id = first.id }, READ)).aws
  t.eq({ s.eks_status, s.nat_gateway_state, s.vpc_id, s.cluster_name, s.region },
    { "ACTIVE", "available", first.state.vpc_id, "hypd-alpha", "us-west-2" })
  t.eq(s.errors, nil)
  -- from the params alone (a record whose state was lost)
  s = eks.status({ params = { cluster_tag = "alpha", region = "us-west-2" }, state = {} }, OPTS)
  t.eq({ s.eks_status, s.nat_gateway_state, s.vpc_id }, { "ACTIVE", "available", first.state.vpc_id })
  -- by tag: the latest operation for it
  s = assert(tool.call("cluster_get_creation_status", { cluster_tag = "alpha" }, READ)).aws
  t.eq(s.eks_status, "ACTIVE")
end)

t.test("an access entry removed by hand is made again with the admin policy", function()
  call("eks", "DeleteAccessEntry", { clusterName = "hypd-alpha", principalArn = CALLER })
  local m = mark()
  replay(first.id, 4) -- access and wait_active again, on the saved state
  t.eq(resume(first.id).status, "succeeded")
  local counts = since(m)
  t.eq(counts, { ["eks CreateAccessEntry"] = 1, ["eks AssociateAccessPolicy"] = 1 })
  t.like(phases_of(first.id, m)[1], "^creating access entry for arn:aws:iam::123456789012:user/sandbox$")
  local ap = call("eks", "ListAssociatedAccessPolicies", { clusterName = "hypd-alpha", principalArn = CALLER })
  t.eq(ap.associatedAccessPolicies[1].policyArn, ADMIN)
end)

t.test("after host stops that lost the state, each resource is still created exactly once", function()
  local m = mark()
  -- the host stops while the NAT gateway comes up
  interrupt_at("bravo", "waiting for NAT gateway")
  local id = start { cluster_tag = "bravo" }
  t.eq(op.wait(id).status, "running", "the record stays running")
  local a = state_of(id)
  t.ok(a.nat_gateway_id, "the NAT gateway was made")
  -- the state is lost; network and iam again, then the host stops as the cluster step begins
  lose_state(id)
  interrupt_at("bravo", "cluster")
  t.eq(resume(id).status, "running", "stopped again")
  t.ok(state_of(id).cluster_role_arn, "the role is recorded")
  t.eq(state_of(id).cluster_arn, nil, "no cluster yet")
  -- the state is lost once more; the operation runs to its end
  lose_state(id)
  local v = resume(id)
  t.eq(v.status, "succeeded", json.encode(v.error))
  local counts = since(m)
  for _, k in ipairs { "ec2 CreateVpc", "ec2 CreateInternetGateway", "ec2 AttachInternetGateway",
    "ec2 AllocateAddress", "ec2 CreateNatGateway", "ec2 CreateSecurityGroup", "iam CreateRole",
    "iam AttachRolePolicy", "eks CreateCluster" } do
    t.eq(counts[k], 1, k)
  end
  t.eq(counts["ec2 CreateSubnet"], 4)
  t.eq(counts["ec2 CreateRouteTable"], 2)
  t.eq(counts["ec2 AssociateRouteTable"], 4)
  t.eq(counts["ec2 CreateRoute"], 2)
  t.eq(counts["eks CreateAccessEntry"], nil, "the creator's entry comes with the cluster")
  t.eq(#call("ec2", "DescribeVpcs", { Filters = by_tag("bravo") }).Vpcs, 1)
  t.eq(#call("ec2", "DescribeNatGateways", { Filter = by_tag("bravo") }).NatGateways, 1)
  t.eq(v.result.cluster_name, "hypd-bravo")
  t.eq(state_of(id).vpc_id, a.vpc_id)
  t.eq(call("eks", "DescribeCluster", { name = "hypd-bravo" }).cluster.status, "ACTIVE")
end)

t.test("a cancel while waiting for ACTIVE keeps everything, and a later call completes", function()
  local id = start { cluster_tag = "charlie" }
  local function eks_notes()
    local n = 0
    for _, note in ipairs(notes_of(id)) do if note:find("^EKS cluster") then n = n + 1 end end
    return n
  end
  while eks_notes() < 3 and op.get(id).status == "running" do task.sleep(5) end
  local v = assert(tool.call("operation_cancel", { operation_id = id }, WHO))
  t.eq(v.status, "cancelled")
  t.eq(v.phase, "cancelled during waiting for EKS cluster ACTIVE")
  t.eq(v.error.code, "CANCELLED")
  t.like(v.error.message, "cancelled")
  local st = state_of(id)
  t.eq(st.result, nil)
  t.ok(st.cluster_arn, "the state keeps the cluster")
  t.eq(call("eks", "DescribeCluster", { name = "hypd-charlie" }).cluster.status, "CREATING")
  local m = mark()
  -- a later call finds everything by tag and waits for ACTIVE
  local again = start { cluster_tag = "charlie" }
  local w = op.wait(again)
  local _, total = since(m)
  t.eq(total, 0)
  t.eq(w.result.cluster_name, "hypd-charlie")
  t.eq(call("eks", "DescribeCluster", { name = "hypd-charlie" }).cluster.status, "ACTIVE")
end)

t.test("access refused while the cluster is CREATING is granted once it is ACTIVE", function()
  interrupt_at("india", "access")
  local id = start { cluster_tag = "india" }
  t.eq(op.wait(id).status, "running", "stopped as the access step began")
  call("eks", "DeleteAccessEntry", { clusterName = "hypd-india", principalArn = CALLER })
  refuse_access_entries(true)
  interrupt_at("india", "wait_active")
  t.eq(resume(id).status, "running", "stopped as the wait_active step began")
  refuse_access_entries(false)
  t.eq(state_of(id).admin_access, "pending")
  local notes = notes_of(id)
  t.like(notes[#notes], "waits for ACTIVE")
  local v = resume(id)
  t.eq(v.status, "succeeded", json.encode(v.error))
  t.eq(state_of(id).admin_access, "granted")
  local ap = call("eks", "ListAssociatedAccessPolicies", { clusterName = "hypd-india", principalArn = CALLER })
  t.eq(ap.associatedAccessPolicies[1].policyArn, ADMIN)
  local phases = phases_of(id)
  t.like(phases[#phases], "^associating AmazonEKSClusterAdminPolicy")
  -- refused once ACTIVE, the step fails rather than deferring
  call("eks", "DeleteAccessEntry", { clusterName = "hypd-india", principalArn = CALLER })
  refuse_access_entries(true)
  local again = op.wait(start { cluster_tag = "india" })
  refuse_access_entries(false)
  t.eq({ again.status, again.error.code }, { "failed", "InvalidRequestException" })
  t.eq({ again.steps[4].name, again.steps[4].status }, { "access", "failed" })
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
  t.like(v.error.message, "hypd%-delta")
  t.like(v.error.message, "missing")
  t.eq({ v.steps[3].name, v.steps[3].status }, { "cluster", "failed" })
  local _, total = since(step_mark(id, "cluster"))
  t.eq(total, 0, "the cluster step changed nothing")
  v = op.wait(start { cluster_tag = "echo" })
  t.eq({ v.status, v.error.code }, { "failed", "CONFLICT" })
  t.like(v.error.message, "hypd%-echo.*'other'")
  local s = assert(tool.call("cluster_get_creation_status", { operation_id = id }, READ)).aws
  t.eq(s.eks_owner, "not hypd's cluster for this tag")
end)

t.test("an IAM role of the same name without hypd's tag is a CONFLICT", function()
  call("iam", "CreateRole", { RoleName = "hypd-foxtrot-eks-cluster-role", AssumeRolePolicyDocument = json.encode {
    Version = "2012-10-17", Statement = { { Effect = "Allow", Principal = { Service = "eks.amazonaws.com" },
      Action = "sts:AssumeRole" } } } })
  local v = op.wait(start { cluster_tag = "foxtrot" })
  t.eq({ v.status, v.error.code }, { "failed", "CONFLICT" })
  t.like(v.error.message, "hypd%-foxtrot%-eks%-cluster%-role")
  t.eq({ v.steps[2].name, v.steps[2].status }, { "iam", "failed" })
end)

t.test("a bad VPC CIDR is refused before anything is made", function()
  local m = mark()
  local v = op.wait(start { cluster_tag = "golf", vpc_cidr = "10.9.1.0/16" })
  t.eq({ v.status, v.error.code }, { "failed", "VALIDATION" })
  t.like(v.error.message, "10%.9%.0%.0/16")
  local _, total = since(m)
  t.eq(total, 0)
end)

t.test("under throttling and server errors, calling again after each failed operation creates each thing once", function()
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
  local counts = since(m)
  for _, k in ipairs { "ec2 CreateVpc", "ec2 CreateInternetGateway", "ec2 AllocateAddress", "ec2 CreateNatGateway",
    "ec2 CreateSecurityGroup", "iam CreateRole", "eks CreateCluster" } do
    t.eq(counts[k], 1, k)
  end
  t.eq(counts["ec2 CreateSubnet"], 4)
  t.eq(counts["ec2 CreateRouteTable"], 2)
  t.eq(v.result.cluster_name, "hypd-hotel")
end)

t.cleanup(function()
  refuse_access_entries(false)
  faults.configure { services = {} }
  core.virtual(false)
  srv:stop()
end)
