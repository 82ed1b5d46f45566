-- Plan mode (a staged tool called with plan = true, hypd.tool.operations's M.plan and
-- hypd.tool.kit) on cluster_create_eks against the sandbox: on an empty account
-- it lists every resource the stage would make, later ones naming the
-- planned ids of earlier ones, and sends no mutation (nor even the reads
-- about things that do not exist yet); once the stage has run the plan is
-- empty; a drifted stage plans exactly what differs and the next call
-- changes exactly that; a stage stopped midway plans only the rest, with the
-- real ids of what exists; and `hypd call ... plan:=true` prints the plan.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
local srv = H.sandbox_here()
require("hypd.tool.loader").load()
local E = dofile("tests/lua/eks_helpers.lua")
local dispatch = require "hypd.tool.dispatch"
local aws, json, op, store, tool = require "hypd.aws", require "hypd.json", require "hypd.tool.operations", require "hypd.store",
  require "hypd.tool.registry"
local call, start, state_of, mark, since = E.call, E.start, E.state_of, E.mark, E.since
local CALLER = E.CALLER

-- plan(tag [, params]) -> the plan, and the AWS calls it sent ({"service Operation" = n})
local function plan(tag, params)
  local p = { cluster_tag = tag, plan = true }
  for k, v in pairs(params or {}) do p[k] = v end
  local sent, before = {}, aws.on_call
  aws.on_call = function(service, operation, ...)
    local k = service .. " " .. operation
    sent[k] = (sent[k] or 0) + 1
    if before then before(service, operation, ...) end
  end
  local out, err = dispatch.call("cluster_create_eks", p, E.WHO)
  aws.on_call = before
  t.ok(out, "the plan answers: " .. json.encode(err))
  return out, sent
end

local rows = E.rows -- {"action type name", ...}

-- EMPTY(tag): what a plan on an empty account lists, in order
local function EMPTY(tag)
  local n = "hypd-" .. tag
  local list = { "ec2:vpc " .. n .. "-vpc", "ec2:internet-gateway " .. n .. "-igw",
    "ec2:internet-gateway-attachment " .. n .. "-igw to " .. n .. "-vpc" }
  for _, s in ipairs { "public-us-west-2a", "public-us-west-2b", "private-us-west-2a", "private-us-west-2b" } do
    list[#list + 1] = "ec2:subnet " .. n .. "-" .. s
  end
  list[#list + 1] = "ec2:elastic-ip " .. n .. "-nat-eip"
  list[#list + 1] = "ec2:nat-gateway " .. n .. "-nat"
  local function routes(kind)
    list[#list + 1] = "ec2:route-table " .. n .. "-" .. kind .. "-rt"
    list[#list + 1] = "ec2:route 0.0.0.0/0 in " .. n .. "-" .. kind .. "-rt"
    for _, az in ipairs { "a", "b" } do
      list[#list + 1] = "ec2:route-table-association " .. n .. "-" .. kind .. "-rt with " .. n .. "-" .. kind ..
        "-us-west-2" .. az
    end
  end
  routes("public")
  list[#list + 1] = "ec2:security-group " .. n .. "-cluster"
  list[#list + 1] = "ec2:security-group-rule all traffic within " .. n .. "-cluster"
  list[#list + 1] = "iam:role " .. n .. "-eks-cluster-role"
  list[#list + 1] = "iam:role-policy-attachment AmazonEKSClusterPolicy on " .. n .. "-eks-cluster-role"
  list[#list + 1] = "eks:cluster " .. n
  routes("private") -- after the cluster: the NAT gateway's wait overlaps EKS's
  -- no access entry: EKS makes the creator's (and its cluster-admin policy) with the cluster
  for i, x in ipairs(list) do list[i] = "create " .. x end
  return list
end

-- planned ids: every "planned:..." string in fields or changes
local function planned_in(v, out)
  out = out or {}
  if type(v) == "string" and v:find("^planned:") then out[#out + 1] = v end
  if type(v) == "table" then for _, x in pairs(v) do planned_in(x, out) end end
  return out
end

local function by_name(p)
  local out = {}
  for _, e in ipairs(p.plan) do out[e.name] = e end
  return out
end

t.test("on an empty account the plan lists every resource of the stage, each later one naming earlier planned ids", function()
  local m, ops_before = mark(), #op.list { tool = "cluster_create_eks" }
  local p, sent = plan("demo")
  t.eq({ p.tool, p.target, p.create, p.change, p.delete }, { "cluster_create_eks", "eks/us-west-2/demo", 22, 0, 0 })
  t.eq(rows(p), EMPTY("demo"))
  -- nothing was changed, nor recorded: no mutation (nor refusal) in the sandbox's audit log, no operation
  local counts, total = since(m)
  t.eq(total, 0, "the sandbox's audit log: " .. json.encode(counts))
  local refused, reads = 0, 0
  for _, e in ipairs(store.events(m, 1000000) or {}) do
    if e.kind == "audit" and e.data.aws and e.data.class == "read" and not e.data.refused then
      reads = reads + 1 -- every signed request is audited, reads too
    elseif e.kind == "sandbox.audit" or e.kind == "audit" then
      refused = refused + 1
    end
  end
  t.eq(refused, 0, "no audit event but the reads sent")
  -- 7 reads of the account, and the prices of its EKS cluster and NAT gateway (pricing:GetProducts)
  t.eq(reads, 9, "each read sent is audited once")
  t.eq(#op.list { tool = "cluster_create_eks" }, ops_before, "no operation recorded")
  -- only reads were sent, and none about a planned thing (the VPC's subnets, routes, groups; the new role's policies)
  for k in pairs(sent) do t.eq(aws.class(k:match("^(%S+) (%S+)$")), "read", k) end
  t.eq(sent, { ["ec2 DescribeAvailabilityZones"] = 1, ["ec2 DescribeVpcs"] = 1, ["ec2 DescribeInternetGateways"] = 1,
    ["ec2 DescribeAddresses"] = 1, ["iam GetRole"] = 1, ["eks DescribeCluster"] = 1, ["sts GetCallerIdentity"] = 1,
    ["pricing GetProducts"] = 2 })
  -- every planned id an entry names is the id of an earlier entry
  local ids = {}
  for i, e in ipairs(p.plan) do
    t.eq(e.id, "planned:" .. e.type .. ":" .. e.name, "entry " .. i .. "'s planned id")
    for _, id in ipairs(planned_in({ e.fields, e.changes })) do
      t.ok(ids[id], e.name .. " names " .. id .. ", planned before it")
    end
    ids[e.id] = true
  end
  local n = by_name(p)
  local function id(name) return n[name].id end
  t.eq(n["hypd-demo-vpc"].fields, { CidrBlock = "10.192.0.0/16", EnableDnsSupport = true, EnableDnsHostnames = true,
    ["tag:hypd:cluster-tag"] = "demo", ["tag:Name"] = "hypd-demo-vpc" })
  t.eq(n["hypd-demo-private-us-west-2b"].fields, { VpcId = id("hypd-demo-vpc"), CidrBlock = "10.192.48.0/20",
    AvailabilityZone = "us-west-2b", ["tag:hypd:subnet"] = "private-2", ["tag:hypd:cluster-tag"] = "demo",
    ["tag:Name"] = "hypd-demo-private-us-west-2b", ["tag:kubernetes.io/role/internal-elb"] = "1" })
  t.eq(n["hypd-demo-public-us-west-2a"].fields.MapPublicIpOnLaunch, true)
  t.eq({ n["hypd-demo-nat"].fields.SubnetId, n["hypd-demo-nat"].fields.AllocationId },
    { id("hypd-demo-public-us-west-2a"), id("hypd-demo-nat-eip") })
  t.eq(n["0.0.0.0/0 in hypd-demo-public-rt"].fields.GatewayId, id("hypd-demo-igw"))
  t.eq(n["0.0.0.0/0 in hypd-demo-private-rt"].fields.NatGatewayId, id("hypd-demo-nat"))
  local c = n["hypd-demo"].fields
  t.eq({ c.version, c.roleArn, c.subnetIds, c.securityGroupIds, c.authenticationMode }, { "1.34",
    id("hypd-demo-eks-cluster-role"), { id("hypd-demo-private-us-west-2a"), id("hypd-demo-private-us-west-2b") },
    { id("hypd-demo-cluster") }, "API" })
  -- the same plan again: a plan keeps nothing
  t.eq(rows(plan("demo")), EMPTY("demo"))
  -- the parameters shape it: a /24 VPC gets /28 subnets, another version
  p = plan("demo", { vpc_cidr = "192.168.4.0/24", kubernetes_version = "1.31" })
  n = by_name(p)
  t.eq({ n["hypd-demo-public-us-west-2b"].fields.CidrBlock, n["hypd-demo"].fields.version },
    { "192.168.4.16/28", "1.31" })
end)

t.test("a plan is refused what a plan cannot do: a bad parameter is the same VALIDATION error as the call's", function()
  local m = mark()
  local out, err = dispatch.call("cluster_create_eks", { cluster_tag = "demo", vpc_cidr = "10.9.1.0/16", plan = true },
    E.WHO)
  t.eq({ out, err and err.code }, { nil, "VALIDATION" })
  t.like(err.message, "10%.9%.0%.0/16")
  local _, total = since(m)
  t.eq(total, 0)
end)

local done -- the operation of the stage that ran (tag "sierra")

t.test("after the stage has run, the plan is empty: everything unchanged", function()
  local v = op.wait(start { cluster_tag = "sierra" })
  t.eq(v.status, "succeeded", json.encode(v.error))
  done = v
  local m = mark()
  local p, sent = plan("sierra")
  t.eq({ p.create, p.change, p.delete, #p.plan }, { 0, 0, 0, 0 })
  t.eq(json.encode(p.plan), "[]", "an empty JSON list")
  local _, total = since(m)
  t.eq(total, 0)
  for k in pairs(sent) do t.eq(aws.class(k:match("^(%S+) (%S+)$")), "read", k) end
end)

t.test("a drifted stage: the plan lists exactly what differs, and the next call changes exactly that", function()
  local st, r = state_of(done.operation_id), done.result
  call("ec2", "ModifyVpcAttribute", { VpcId = st.vpc_id, EnableDnsHostnames = { Value = false } })
  call("ec2", "ModifySubnetAttribute", { SubnetId = r.public_subnet_ids[2], MapPublicIpOnLaunch = { Value = false } })
  call("ec2", "DeleteTags", { Resources = { r.private_subnet_ids[1] }, Tags = { { Key = "kubernetes.io/role/internal-elb" } } })
  call("ec2", "ReplaceRoute", { RouteTableId = st.private_route_table_id, DestinationCidrBlock = "0.0.0.0/0",
    GatewayId = st.internet_gateway_id })
  local rt = call("ec2", "DescribeRouteTables", { RouteTableIds = { st.public_route_table_id } }).RouteTables[1]
  for _, a in ipairs(rt.Associations) do
    if a.SubnetId == r.public_subnet_ids[2] then
      call("ec2", "DisassociateRouteTable", { AssociationId = a.RouteTableAssociationId })
    end
  end
  call("ec2", "RevokeSecurityGroupIngress", { GroupId = st.security_group_id, IpPermissions = { { IpProtocol = "-1",
    UserIdGroupPairs = { { GroupId = st.security_group_id } } } } })
  call("iam", "DetachRolePolicy", { RoleName = "hypd-sierra-eks-cluster-role",
    PolicyArn = "arn:aws:iam::aws:policy/AmazonEKSClusterPolicy" })
  call("eks", "DeleteAccessEntry", { clusterName = "hypd-sierra", principalArn = CALLER })
  local m = mark()
  local p = plan("sierra")
  t.eq(rows(p), { "change ec2:vpc hypd-sierra-vpc", "change ec2:subnet hypd-sierra-public-us-west-2b",
    "change ec2:subnet hypd-sierra-private-us-west-2a",
    "create ec2:route-table-association hypd-sierra-public-rt with hypd-sierra-public-us-west-2b",
    "create ec2:security-group-rule all traffic within hypd-sierra-cluster",
    "create iam:role-policy-attachment AmazonEKSClusterPolicy on hypd-sierra-eks-cluster-role",
    "change ec2:route 0.0.0.0/0 in hypd-sierra-private-rt",
    "create eks:access-entry " .. CALLER .. " on hypd-sierra",
    "create eks:access-policy-association AmazonEKSClusterAdminPolicy for " .. CALLER .. " on hypd-sierra" })
  t.eq({ p.create, p.change }, { 5, 4 })
  local n = by_name(p)
  t.eq(n["hypd-sierra-vpc"].changes, { EnableDnsHostnames = { from = false, to = true } })
  t.eq(n["hypd-sierra-vpc"].id, st.vpc_id)
  t.eq(n["hypd-sierra-public-us-west-2b"].changes, { MapPublicIpOnLaunch = { from = false, to = true } })
  t.eq(n["hypd-sierra-private-us-west-2a"].changes, { ["tag:kubernetes.io/role/internal-elb"] = { to = "1" } })
  t.eq(n["0.0.0.0/0 in hypd-sierra-private-rt"].changes, { NatGatewayId = { to = st.nat_gateway_id } })
  t.eq(n["all traffic within hypd-sierra-cluster"].fields.GroupId, st.security_group_id, "the real id")
  local _, total = since(m)
  t.eq(total, 0, "planning changed nothing")
  -- the next call repairs exactly what the plan listed
  local v = op.wait(start { cluster_tag = "sierra" })
  t.eq(v.status, "succeeded", json.encode(v.error))
  t.eq(since(m), { ["ec2 ModifyVpcAttribute"] = 1, ["ec2 ModifySubnetAttribute"] = 1, ["ec2 CreateTags"] = 1,
    ["ec2 AssociateRouteTable"] = 1, ["ec2 AuthorizeSecurityGroupIngress"] = 1, ["ec2 ReplaceRoute"] = 1,
    ["iam AttachRolePolicy"] = 1, ["eks CreateAccessEntry"] = 1, ["eks AssociateAccessPolicy"] = 1 })
  t.eq(E.phases_of(v.operation_id), { "updating VPC hypd-sierra-vpc", "updating subnet hypd-sierra-public-us-west-2b",
    "updating subnet hypd-sierra-private-us-west-2a",
    "creating route table association hypd-sierra-public-rt with hypd-sierra-public-us-west-2b",
    "creating security group rule all traffic within hypd-sierra-cluster",
    "creating policy attachment AmazonEKSClusterPolicy on hypd-sierra-eks-cluster-role",
    "waiting for NAT gateway " .. st.nat_gateway_id .. " to be available",
    "updating route 0.0.0.0/0 in hypd-sierra-private-rt",
    "waiting for EKS cluster hypd-sierra to be ACTIVE",
    "creating access entry " .. CALLER .. " on hypd-sierra",
    "creating access policy association AmazonEKSClusterAdminPolicy for " .. CALLER .. " on hypd-sierra" })
  t.eq(#plan("sierra").plan, 0, "nothing differs any more")
end)

t.test("a stage stopped midway plans only what is missing, naming the real ids of what exists", function()
  E.interrupt_at("tango", "nat_gateway")
  local id = start { cluster_tag = "tango" }
  t.eq(op.wait(id).status, "running", "stopped as the nat_gateway step began")
  local st = state_of(id)
  local p = plan("tango")
  local want = {}
  for _, row in ipairs(EMPTY("tango")) do
    if not row:find("vpc", 1, true) and not row:find(" ec2:subnet ", 1, true) and
        not row:find("internet-gateway", 1, true) then
      want[#want + 1] = row
    end
  end
  t.eq(rows(p), want)
  t.eq(p.create, 22 - 7)
  local n = by_name(p)
  t.eq(n["hypd-tango-nat"].fields.SubnetId, st.public_subnet_ids[1])
  t.eq(n["hypd-tango-public-rt"].fields.VpcId, st.vpc_id)
  t.eq(n["0.0.0.0/0 in hypd-tango-public-rt"].fields.GatewayId, st.internet_gateway_id)
  t.eq(n["hypd-tango"].fields.subnetIds, st.private_subnet_ids)
  t.eq(n["hypd-tango"].fields.securityGroupIds, { "planned:ec2:security-group:hypd-tango-cluster" })
  t.eq(E.resume(id).status, "succeeded")
  t.eq(#plan("tango").plan, 0)
end)

t.test("a staged tool whose step calls cluster_create_eks plans it into its own plan", function()
  local hypd = require("hypd.playbook_api").build("plan_test")
  tool.define { name = "job_plan_demo", summary = "Calls cluster_create_eks from a step",
    description = "A staged tool of the test: its one step calls cluster_create_eks.", kind = "mutating",
    status_tool = "operation_get", params = { cluster_tag = { type = "string", required = true } },
    target = function(p) return "stack/" .. p.cluster_tag end,
    steps = { { name = "eks", run = function(ctx)
      hypd.tools.call("cluster_create_eks", { cluster_tag = ctx.params.cluster_tag })
    end } } }
  local m = mark()
  local p = assert(dispatch.call("job_plan_demo", { cluster_tag = "victor", plan = true }, E.WHO))
  t.eq({ p.tool, p.create, p.change }, { "job_plan_demo", 22, 0 })
  t.eq(rows(p), EMPTY("victor"))
  local _, total = since(m)
  t.eq(total, 0)
  t.eq(#op.list { tool = "cluster_create_eks", target = "eks/us-west-2/victor" }, 0, "no child operation")
  tool.remove("job_plan_demo")
end)

t.test("hypd call cluster_create_eks cluster_tag=<tag> plan:=true prints the plan; after the stage, an empty one", function()
  local dir = H.tmpdir()
  local env, pid = H.sandbox_process(dir, "--virtual-clock")
  t.ok(env, "a sandbox process")
  local function hypd(args)
    local rc, out, err = H.with_env(env, dir, "HYPD_CLOCK=virtual " .. H.hypd .. " call cluster_create_eks " .. args)
    return rc, out, err
  end
  local function audit()
    local _, out = H.sh("curl -s " .. env.AWS_ENDPOINT_URL .. "/_sandbox/audit")
    return json.decode(out) or {}
  end
  local rc, out, err = hypd("cluster_tag=uniform plan:=true")
  t.eq(rc, 0, err)
  local p = json.decode(out) or {}
  t.eq({ p.tool, p.create, p.change, p.delete }, { "cluster_create_eks", 22, 0, 0 })
  t.eq(rows(p), EMPTY("uniform"))
  t.eq(#audit(), 0, "the sandbox's audit log is empty: nothing was changed")
  rc, out, err = hypd("cluster_tag=uniform --wait")
  t.eq(rc, 0, err)
  t.like(out, '"status": "succeeded"')
  local made = #audit()
  t.eq(made, 25, "the stage's mutations")
  rc, out, err = hypd("cluster_tag=uniform plan:=true")
  t.eq(rc, 0, err)
  p = json.decode(out) or {}
  t.eq({ p.create, p.change, p.delete, #(p.plan or { 0 }) }, { 0, 0, 0, 0 })
  t.eq(#audit(), made, "the plan changed nothing")
  if pid then os.execute("kill " .. tostring(pid) .. " 2>/dev/null") end
  os.execute("rm -rf " .. H.quote(dir))
end)

t.cleanup(function()
  E.restore_all()
  require("hypd.core").virtual(false)
  srv:stop()
end)
