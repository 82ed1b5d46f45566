-- hyperpod_delete: the HyperPod cluster of an EKS cluster and everything
-- hyperpod_create (hyperpod/_create, hyperpod/_subnet) and
-- hyperpod_add_instance_group made for it, taken away in the reverse order
-- of their making with the kit's ctx:absent (the pieces are
-- _teardown_pieces'): the HyperPod cluster hypd-<tag>-hp (waited for until
-- gone), the S3 gateway endpoint hypd-<tag>-s3, the compute subnets'
-- route tables hp-compute-*-rt, the compute subnets hp-compute-*, a
-- secondary VPC CIDR no subnet uses any more, the lifecycle bucket (its
-- scripts, then the bucket) and the execution role hypd-<tag>-hyperpod-exec
-- (its policies first). Only what carries hypd:cluster-tag=<tag> is
-- deleted; the rest is kept and reported (ctx.state.kept).
local Names = require "_names"
local P = require "_params"
local hp = require "_hyperpod"
local create = require "hyperpod._create"
local lifecycle = require "_lifecycle"
local net = require "_network"
local td = require "_teardown_pieces"
local KC = require "_kept_cost"
local S = require "_storage"
local json = hypd.json

local DELETE_LIMIT = 60 * 60 -- HyperPod takes some minutes to delete its instances

-- pace(waited) -> seconds to the next check: rare while a deletion cannot be
-- done (its instances shutting down), close once it is due
local function pace(waited) return waited < 4 * 60 and 60 or 20 end

local function tagged(tag, vpc_id)
  local f = { { Name = "tag:" .. Names.TAG, Values = { tag } } }
  if vpc_id then f[2] = { Name = "vpc-id", Values = { vpc_id } } end
  return f
end

local function note(ctx, action, type, name)
  if action == "deleted" or action == "delete" then
    local st = ctx.state
    st.deleted = st.deleted or json.array()
    for _, d in ipairs(st.deleted) do if d.type == type and d.name == name then return end end
    st.deleted[#st.deleted + 1] = { type = type, name = name }
    if ctx.save then ctx:save() end -- a step resumed after a stop still reports it
  end
end

local function check(ctx)
  local p, st = ctx.params, ctx.state
  local e = hp.eks(ctx, p)
  st.eks_name, st.region = e.name, e.region
  local d, err = ctx:try("eks", "DescribeCluster", { name = e.name })
  if not d and err.code ~= "ResourceNotFoundException" then error(err, 0) end
  local c = d and d.cluster or {}
  st.tag = S.tag_of(e.name, e.record, c.tags)
  st.eks_arn = c.arn or e.record.arn
  st.vpc_id = (c.resourcesVpcConfig or {}).vpcId or e.record.vpc_id
  st.hyperpod_name = (e.record.hyperpod or {}).name or Names.hyperpod(st.tag).cluster
  if st.eks_arn and not create.describe(ctx, st.hyperpod_name) then
    local other = hp.find(ctx, st.eks_arn) -- a HyperPod cluster of another name on this EKS cluster
    if other then st.hyperpod_name = other.ClusterName end
  end
  st.account = st.account or ctx:call("sts", "GetCallerIdentity", {}).Account
end

local function cluster(ctx)
  local st = ctx.state
  local name = st.hyperpod_name
  local action = ctx:absent { type = "sagemaker:cluster", label = "HyperPod cluster", name = name, id = "ClusterArn",
    every = pace, timeout = DELETE_LIMIT, gone = { "ResourceNotFound" },
    find = function()
      local c = create.describe(ctx, name)
      if not c then return nil end
      local tags, err = ctx:try("sagemaker", "ListTags", { ResourceArn = c.ClusterArn })
      if not tags then
        -- gone between the two calls (SageMaker says so with ValidationException)
        if err.code == "ValidationException" or err.code == "ResourceNotFound" then return nil end
        error(err, 0)
      end
      c.Tags = tags.Tags
      return c
    end,
    owned = function(c)
      return net.tag_value(c.Tags, Names.TAG) == st.tag, "it does not carry " .. Names.TAG .. "=" .. st.tag
    end,
    delete = function(c)
      if c.ClusterStatus ~= "Deleting" then ctx:call("sagemaker", "DeleteCluster", { ClusterName = name }) end
    end }
  note(ctx, action, "sagemaker:cluster", name)
  if action == "kept" then
    -- someone else's cluster on this EKS cluster: the subnets it uses stay
    local c = create.describe(ctx, name) or {}
    local used = {}
    for _, s in ipairs((c.VpcConfig or {}).Subnets or {}) do used[s] = true end
    for _, g in ipairs(c.InstanceGroups or {}) do
      for _, s in ipairs(((g.OverrideVpcConfig or {}).Subnets) or {}) do used[s] = true end
    end
    st.used_subnets = used
  end
end

local function network(ctx)
  local st = ctx.state
  local tag = st.tag
  local compute, names = {}, {}
  for _, sn in ipairs(ctx:call("ec2", "DescribeSubnets", { Filters = tagged(tag, st.vpc_id) }).Subnets or {}) do
    local n = net.tag_value(sn.Tags, "Name") or ""
    if n:find("^hp%-compute%-") then
      compute[#compute + 1] = sn
      names[n .. "-rt"] = sn.SubnetId
      st.vpc_id = st.vpc_id or sn.VpcId
    end
  end
  table.sort(compute, function(a, b) return a.SubnetId < b.SubnetId end)
  local fsx = st.vpc_id and td.fsx_in(ctx, st.vpc_id) or {}
  local used = st.used_subnets or {}
  local function keep(s)
    if used[s.SubnetId] then return "HyperPod cluster " .. st.hyperpod_name .. " (kept) uses it" end
    return td.in_use(fsx)(s)
  end
  -- the S3 gateway endpoint (made last by hyperpod/_subnet, taken first)
  local endpoint = Names.eks(tag, "s3")
  for _, e in ipairs(ctx:call("ec2", "DescribeVpcEndpoints", { Filters = tagged(tag, st.vpc_id) }).VpcEndpoints or {}) do
    if net.tag_value(e.Tags, "Name") == endpoint and #compute > 0 then
      local held = false
      for _, sn in ipairs(compute) do held = held or keep(sn) ~= nil end
      if held then
        ctx:absent { type = "ec2:vpc-endpoint", label = "VPC endpoint", name = endpoint, id = "VpcEndpointId",
          find = function() return e end, delete = function() end, keep = "a compute subnet that is kept uses it" }
      else
        note(ctx, td.endpoint(ctx, e), "ec2:vpc-endpoint", endpoint)
      end
    end
  end
  -- the route tables hp-compute-*-rt, then the subnets
  for _, rt in ipairs(ctx:call("ec2", "DescribeRouteTables", { Filters = tagged(tag, st.vpc_id) }).RouteTables or {}) do
    local n = net.tag_value(rt.Tags, "Name")
    local sid = n and names[n]
    if sid then
      local why
      for _, sn in ipairs(compute) do
        if sn.SubnetId == sid then why = keep(sn) end
      end
      if why then
        ctx:absent { type = "ec2:route-table", label = "route table", name = n, id = "RouteTableId",
          find = function() return rt end, delete = function() end, keep = "its subnet is kept: " .. why }
      else
        note(ctx, td.route_table(ctx, rt), "ec2:route-table", n)
      end
    end
  end
  for _, sn in ipairs(compute) do
    note(ctx, td.subnet(ctx, sn, keep), "ec2:subnet", net.tag_value(sn.Tags, "Name"))
  end
  -- a secondary CIDR hyperpod/_subnet associated when the VPC was full
  if st.vpc_id then
    local v = (ctx:call("ec2", "DescribeVpcs", { VpcIds = { st.vpc_id } }).Vpcs or {})[1]
    if v then td.secondary_cidrs(ctx, v, tag) end
  end
end

local function lifecycle_bucket(ctx)
  local st = ctx.state
  local name = Names.lifecycle_bucket(st.tag, st.account, st.region)
  local ours = {}
  for _, s in ipairs(lifecycle.SCRIPTS) do ours[lifecycle.PREFIX .. s.key] = true end
  note(ctx, td.bucket(ctx, { name = name, tag = st.tag, force = ctx.params.force, ours = ours }), "s3:bucket", name)
end

local function role(ctx)
  local st = ctx.state
  local name = Names.hyperpod(st.tag).execution_role
  note(ctx, td.role(ctx, name, st.tag), "iam:role", name)
end

local function forget(ctx)
  local st = ctx.state
  if ctx.plan then return end
  local rec = hypd.clusters.get(st.eks_name, st.region)
  if rec and rec.hyperpod then
    local kept_cluster = false
    for _, k in ipairs(st.kept or {}) do kept_cluster = kept_cluster or k.type == "sagemaker:cluster" end
    if not kept_cluster then hypd.clusters.record { name = st.eks_name, region = st.region, hyperpod = false } end
  end
  st.result = { eks_cluster = st.eks_name, region = st.region, cluster_tag = st.tag,
    hyperpod_cluster = st.hyperpod_name, deleted = st.deleted or json.array(), kept = st.kept or json.array() }
  -- what stays costs this much an hour and a month (or why that is not known)
  st.result.kept_cost, st.result.kept_cost_error = KC.of(st.result.kept, st.region)
end

local AWS = { "pricing:GetProducts",
  "eks:DescribeCluster", "sts:GetCallerIdentity", "sagemaker:DescribeCluster", "sagemaker:ListClusters",
  "sagemaker:ListTags", "sagemaker:DeleteCluster", "ec2:DescribeSubnets", "ec2:DescribeVpcEndpoints",
  "ec2:DescribeRouteTables", "ec2:DescribeVpcs", "ec2:DeleteVpcEndpoints", "ec2:DisassociateRouteTable",
  "ec2:DeleteRouteTable", "ec2:DeleteSubnet", "ec2:DisassociateVpcCidrBlock", "fsx:DescribeFileSystems" }
table.move(td.AWS_BUCKET, 1, #td.AWS_BUCKET, #AWS + 1, AWS)
table.move(td.AWS_ROLE, 1, #td.AWS_ROLE, #AWS + 1, AWS)

return tool {
  name = "hyperpod_delete",
  summary = "Delete the HyperPod cluster of the active (or named) EKS cluster and what hypd made for it",
  description = "Deletes the HyperPod cluster of an EKS cluster (the active one unless cluster is given) and what " ..
    "hypd made for it (compute subnets, S3 endpoint, lifecycle bucket, execution role); every instance's " ..
    "local and root volumes are lost. Only what carries hypd's tag is deleted; the rest is reported in " ..
    "kept. The EKS cluster and storage stay (cluster_delete removes everything). Follow it with " ..
    "operation_get (wait_seconds); plan = true lists what it would delete and keep.",
  kind = "destructive",
  status_tool = "operation_get",
  aws = AWS,
  params = P.form({ "force" },
    { "cluster", "region" },
    {
    cluster = P.cluster,
    region = P.region,
    force = { type = "boolean", default = false, decision = true,
      description = "also delete the lifecycle bucket when it holds objects hypd did not upload: they are lost" },
  }, { force = "Delete the lifecycle bucket with files hypd did not upload" }),
  target = function(p) return "hyperpod-delete/" .. create.target(p):gsub("^hyperpod/", "") end,
  steps = {
    { name = "check", run = check },
    { name = "cluster", run = cluster },
    { name = "network", run = network },
    { name = "lifecycle", run = lifecycle_bucket },
    { name = "role", run = role },
    { name = "forget", run = forget },
  },
}
