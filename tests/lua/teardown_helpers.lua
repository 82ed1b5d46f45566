-- Helpers of the teardown tests (teardown_plan_test.lua,
-- teardown_workloads_test.lua): a cluster built by the stage tools, a
-- plan's entries keyed by type and id, the deletions the sandbox's audit
-- log recorded, and everything that still carries a cluster tag. Loaded
-- with dofile after H.sandbox_here():
--   local TD = dofile("tests/lua/teardown_helpers.lua")
local t = require "hypd.tap"
local aws = require "hypd.aws"
local json = require "hypd.json"
local op = require "hypd.tool.operations"
local store = require "hypd.store"
local dispatch = require "hypd.tool.dispatch"

local Hp = dofile("tests/lua/hyperpod_helpers.lua")
local E = Hp.E
local TD = {}
local TAG_KEY = "hypd:cluster-tag"

local function run(name, params)
  local acc, err = dispatch.call(name, params, E.WHO)
  t.ok(acc, name .. " is accepted: " .. json.encode(err))
  local v = op.wait(acc.operation_id)
  t.eq(v.status, "succeeded", name .. ": " .. json.encode(v.error))
  return v
end
TD.run = run

-- build(tag, {fsx = bool, features = bool}) -> the EKS cluster's name: EKS,
-- dependencies, HyperPod (one ml.m5.xlarge), S3 storage, FSx storage and
-- the managed training and inference operators (their roles, add-ons and
-- the inference operator's TLS bucket) when asked
function TD.build(tag, o)
  o = o or {}
  local eks = Hp.stage1(tag)
  run("cluster_configure_dependencies", { cluster = eks })
  run("hyperpod_create", { cluster = eks, instance_type = "ml.m5.xlarge", instance_count = 1,
    availability_zone = "us-west-2a" })
  run("storage_create_s3", { cluster = eks })
  if o.fsx then run("storage_create_fsx", { cluster = eks }) end
  if o.features then
    run("hyperpod_update_advanced_features", { cluster = eks, training_operator = true, inference_operator = true })
  end
  return eks
end

-- key(entry) -> "type id" (the name when it has no id)
function TD.key(e) return e.type .. " " .. tostring(e.id or e.name) end

function TD.entry(p, typ, name)
  for _, e in ipairs(p.plan or {}) do
    if e.type == typ and (e.name == name or e.id == name) then return e end
  end
end

-- names(text, id) -> true when text names id as a word of its own (not
-- hypd-demo inside hypd-demo-vpc)
function TD.names(text, id)
  text = tostring(text)
  local from = 1
  while true do
    local a, b = text:find(id, from, true)
    if not a then return false end
    local before, after = text:sub(a - 1, a - 1), text:sub(b + 1, b + 1)
    if not before:match("[%w%-]") and not after:match("[%w%-]") then return true end
    from = b + 1
  end
end

-- the AWS deletions of the audit log, as the plan's types
local DELETES = {
  ["ec2 DeleteVpcEndpoints"] = "ec2:vpc-endpoint", ["ec2 DeleteNatGateway"] = "ec2:nat-gateway",
  ["ec2 ReleaseAddress"] = "ec2:elastic-ip", ["ec2 DeleteRouteTable"] = "ec2:route-table",
  ["ec2 DeleteInternetGateway"] = "ec2:internet-gateway", ["ec2 DeleteSubnet"] = "ec2:subnet",
  ["ec2 DeleteSecurityGroup"] = "ec2:security-group", ["ec2 DeleteVpc"] = "ec2:vpc",
  ["ec2 DisassociateVpcCidrBlock"] = "ec2:vpc-cidr-block", ["eks DeleteCluster"] = "eks:cluster",
  ["eks DeleteNodegroup"] = "eks:nodegroup", ["sagemaker DeleteCluster"] = "sagemaker:cluster",
  ["s3 DeleteBucket"] = "s3:bucket", ["iam DeleteRole"] = "iam:role", ["iam DeletePolicy"] = "iam:policy",
  ["iam DeleteOpenIDConnectProvider"] = "iam:oidc-provider", ["fsx DeleteFileSystem"] = "fsx:file-system",
  ["elasticloadbalancing DeleteLoadBalancer"] = "elb:load-balancer",
}
TD.AUDITED = {}
for _, typ in pairs(DELETES) do TD.AUDITED[typ] = true end

-- compare(plan, mark) -> planned but not sent, sent but not planned: the
-- plan's AWS deletes against the audit log's since mark (an entry matches
-- a deletion of its type whose target is its id or its name)
function TD.compare(p, m)
  local sent = {}
  for _, e in ipairs(store.events(m, 1000000) or {}) do
    if e.kind == "sandbox.audit" and not e.data.refused then
      local typ = DELETES[e.data.service .. " " .. e.data.operation]
      if typ then sent[#sent + 1] = { type = typ, target = e.data.target } end
    end
  end
  local missing = {}
  for _, e in ipairs(p.plan or {}) do
    if e.action == "delete" and TD.AUDITED[e.type] then
      local hit
      for i, s in ipairs(sent) do
        if not hit and s.type == e.type and (s.target == e.id or s.target == e.name) then hit = i end
      end
      if hit then table.remove(sent, hit) else missing[#missing + 1] = TD.key(e) end
    end
  end
  local extra = {}
  for _, s in ipairs(sent) do extra[#extra + 1] = s.type .. " " .. tostring(s.target) end
  table.sort(missing)
  table.sort(extra)
  return missing, extra
end

local function has_tag(tags, tag)
  for _, x in ipairs(tags or {}) do if x.Key == TAG_KEY and x.Value == tag then return true end end
  if type(tags) == "table" and tags[TAG_KEY] == tag then return true end
end

-- tagged(tag) -> {"type id", ...}: what still carries the tag, asked
-- through the AWS APIs (EC2, EKS, SageMaker, FSx, S3, IAM)
function TD.tagged(tag)
  local out = {}
  local function add(typ, id) out[#out + 1] = typ .. " " .. id end
  local by = E.by_tag(tag)
  local c = E.call
  for _, v in ipairs(c("ec2", "DescribeVpcs", { Filters = by }).Vpcs or {}) do add("ec2:vpc", v.VpcId) end
  for _, s in ipairs(c("ec2", "DescribeSubnets", { Filters = by }).Subnets or {}) do add("ec2:subnet", s.SubnetId) end
  for _, g in ipairs(c("ec2", "DescribeSecurityGroups", { Filters = by }).SecurityGroups or {}) do
    add("ec2:security-group", g.GroupId)
  end
  for _, r in ipairs(c("ec2", "DescribeRouteTables", { Filters = by }).RouteTables or {}) do
    add("ec2:route-table", r.RouteTableId)
  end
  for _, g in ipairs(c("ec2", "DescribeInternetGateways", { Filters = by }).InternetGateways or {}) do
    add("ec2:internet-gateway", g.InternetGatewayId)
  end
  for _, n in ipairs(c("ec2", "DescribeNatGateways", { Filter = by }).NatGateways or {}) do
    if n.State ~= "deleted" then add("ec2:nat-gateway", n.NatGatewayId) end
  end
  for _, a in ipairs(c("ec2", "DescribeAddresses", { Filters = by }).Addresses or {}) do
    add("ec2:elastic-ip", a.AllocationId)
  end
  for _, e in ipairs(c("ec2", "DescribeVpcEndpoints", { Filters = by }).VpcEndpoints or {}) do
    if e.State ~= "deleted" then add("ec2:vpc-endpoint", e.VpcEndpointId) end
  end
  for _, n in ipairs(aws.all("eks", "ListClusters", {}, E.OPTS)) do
    local d = aws.try("eks", "DescribeCluster", { name = n }, E.OPTS)
    if d and has_tag(d.cluster.tags, tag) then add("eks:cluster", n) end
  end
  for _, s in ipairs(c("sagemaker", "ListClusters", {}).ClusterSummaries or {}) do
    local tags = aws.try("sagemaker", "ListTags", { ResourceArn = s.ClusterArn }, E.OPTS)
    if tags and has_tag(tags.Tags, tag) then add("sagemaker:cluster", s.ClusterArn) end
  end
  for _, fs in ipairs(c("fsx", "DescribeFileSystems", {}).FileSystems or {}) do
    if has_tag(fs.Tags, tag) and fs.Lifecycle ~= "DELETED" then add("fsx:file-system", fs.FileSystemId) end
  end
  for _, b in ipairs(c("s3", "ListBuckets", {}).Buckets or {}) do
    local tg = aws.try("s3", "GetBucketTagging", { Bucket = b.Name }, E.OPTS)
    if tg and has_tag(tg.TagSet, tag) then add("s3:bucket", b.Name) end
  end
  for _, r in ipairs(aws.all("iam", "ListRoles", {}, E.OPTS)) do
    local g = aws.try("iam", "GetRole", { RoleName = r.RoleName }, E.OPTS)
    if g and has_tag(g.Role.Tags, tag) then add("iam:role", r.RoleName) end
  end
  for _, p in ipairs(aws.all("iam", "ListPolicies", { Scope = "Local" }, E.OPTS)) do
    local g = aws.try("iam", "GetPolicy", { PolicyArn = p.Arn }, E.OPTS)
    if g and has_tag(g.Policy.Tags, tag) then add("iam:policy", p.Arn) end
  end
  table.sort(out)
  return out
end

return TD
