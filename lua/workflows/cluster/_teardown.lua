-- cluster/_teardown: taking away what hypd made for a cluster tag, in
-- reverse order, with the kit's ctx:absent: only what carries the tag
-- hypd:cluster-tag=<tag> is deleted, everything else is kept and reported.
--   ec2_sweep(ctx, tag)       the network: endpoints, NAT gateways, Elastic
--                             IPs, route tables, internet gateways, subnets,
--                             security groups, then the VPC
--   iam_sweep(ctx, tag)       the roles and customer policies with the tag,
--                             and the cluster's IAM OIDC provider
--   node_groups(ctx, name, tag)   the EKS node groups with the tag
--   eks_cluster(ctx, name, tag)   the EKS cluster (its add-ons, access
--                             entries and pod identity associations go with it)
--   buckets(ctx, tag, force)  the S3 buckets with the tag (kept when they
--                             hold data, unless force)
--   file_systems(ctx, tag, force)  the FSx file systems with the tag (kept
--                             unless force)
--   security_groups(ctx, tag) the groups with the tag, in an order AWS
--                             accepts (_teardown_holders)
--   foreign(ctx, vpc_id, tag)  the subnets and groups in a VPC that are
--                             not hypd's, reported as kept
-- made of the pieces in _teardown_pieces, one resource each.
local Names = require "_names"
local FS = require "_fsx_file_system"
local pieces = require "_teardown_pieces"
local tag_of, named, draining, absent = pieces.tag_of, pieces.named, pieces.draining, pieces.absent

local M = {}


local function tagged(tag) return { { Name = "tag:" .. Names.TAG, Values = { tag } } } end

local function each(ctx, op_name, list_key, params, fn)
  local out = ctx:call("ec2", op_name, params)
  for _, r in ipairs(out[list_key] or {}) do fn(r) end
end

-- eks_made(sg, tag) -> true for the cluster security group EKS made for
-- hypd's EKS cluster of the tag (aws:eks:cluster-name): EKS deletes it
-- once the cluster is gone, so it never keeps the VPC (its deletion waits)
local function eks_made(sg, tag)
  for _, t in ipairs(sg.Tags or {}) do
    if t.Key == "aws:eks:cluster-name" then return t.Value == Names.eks(tag) end
  end
  return false
end

-- foreign(ctx, vpc_id, tag) -> ids: the subnets and security groups (but
-- the default group and EKS's cluster group) in the VPC that do not carry
-- the tag, each reported as kept (not hypd's); a VPC that holds them is
-- kept too
function M.foreign(ctx, vpc_id, tag)
  local ids = {}
  local by_vpc = { { Name = "vpc-id", Values = { vpc_id } } }
  for _, sn in ipairs(ctx:call("ec2", "DescribeSubnets", { Filters = by_vpc }).Subnets or {}) do
    if tag_of(sn.Tags) ~= tag then
      ids[#ids + 1] = sn.SubnetId
      absent(ctx, { type = "ec2:subnet", label = "subnet", name = named(sn, sn.SubnetId), id = "SubnetId",
        find = function() return sn end, owned = function() return false, "it does not carry " .. Names.TAG .. "=" ..
          tag end, delete = function() end })
    end
  end
  for _, sg in ipairs(ctx:call("ec2", "DescribeSecurityGroups", { Filters = by_vpc }).SecurityGroups or {}) do
    if sg.GroupName ~= "default" and tag_of(sg.Tags) ~= tag and not eks_made(sg, tag) then
      ids[#ids + 1] = sg.GroupId
      absent(ctx, { type = "ec2:security-group", label = "security group", name = sg.GroupName or sg.GroupId,
        id = "GroupId", find = function() return sg end,
        owned = function() return false, "it does not carry " .. Names.TAG .. "=" .. tag end, delete = function() end })
    end
  end
  return ids
end

-- security_groups(ctx, tag): the groups with the tag, each after the
-- groups whose rules name it (AWS refuses a group another group's rule
-- names). One is kept while what the teardown keeps holds it (a kept FSx
-- file system's interfaces, a kept group's rule naming it); one that
-- something going away holds (an EKS cluster's or a load balancer's
-- interfaces draining) is tried again for a while; at the end the error
-- names what holds it.
function M.security_groups(ctx, tag)
  local holders = require "_teardown_holders"
  local list = ctx:call("ec2", "DescribeSecurityGroups", { Filters = tagged(tag) }).SecurityGroups or {}
  local vpc_groups = {}
  for _, sg in ipairs(list) do
    if not vpc_groups[sg.VpcId] then
      vpc_groups[sg.VpcId] = ctx:call("ec2", "DescribeSecurityGroups", { Filters = { { Name = "vpc-id",
        Values = { sg.VpcId } } } }).SecurityGroups or {}
    end
  end
  for _, sg in ipairs(holders.order(list)) do
    absent(ctx, { type = "ec2:security-group", label = "security group", name = sg.GroupName or sg.GroupId,
      id = "GroupId", retry = draining, retry_for = 15 * 60, retry_every = 15,
      find = function()
        local r = ctx:try("ec2", "DescribeSecurityGroups", { GroupIds = { sg.GroupId } })
        return r and r.SecurityGroups and r.SecurityGroups[1]
      end,
      keep = function(cur)
        if cur.GroupName == "default" then return "the default group goes with its VPC" end
        local why, seen = {}, {}
        for _, i in ipairs(holders.interfaces(ctx, sg.GroupId)) do
          local k = pieces.listed(ctx, "fsx:file-system", i.owner) or pieces.listed(ctx, "ec2:vpc-endpoint", i.owner)
          if k and k.action ~= "delete" and not seen[i.owner] then
            seen[i.owner] = true
            why[#why + 1] = i.what .. " (kept)"
          end
        end
        for _, r in ipairs(holders.referrers(vpc_groups[sg.VpcId] or {}, sg.GroupId)) do
          local k = pieces.listed(ctx, "ec2:security-group", r.GroupId)
          if tag_of(r.Tags) ~= tag or (k and k.action ~= "delete") then
            why[#why + 1] = "a rule of security group " .. tostring(r.GroupName) .. " (" .. r.GroupId ..
              (tag_of(r.Tags) ~= tag and ", not hypd's" or ", kept") .. ") names it"
          end
        end
        if #why > 0 then return "it is held by what stays: " .. table.concat(why, "; ") end
      end,
      delete = function()
        local ok, err = pcall(ctx.call, ctx, "ec2", "DeleteSecurityGroup", { GroupId = sg.GroupId })
        if ok then return end
        error(holders.explain(err, type(err) == "table" and err.code == "DependencyViolation" and
          holders.held(ctx, sg.GroupId)), 0)
      end,
      gone = { "InvalidGroup.NotFound" } })
  end
end

-- the network's resources, one kind each (ec2_sweep below takes them in order)

local function nat_gateway(ctx, n)
  absent(ctx, { type = "ec2:nat-gateway", label = "NAT gateway", name = named(n, n.NatGatewayId), id = "NatGatewayId",
    every = 15, timeout = 20 * 60,
    find = function()
      local r = ctx:call("ec2", "DescribeNatGateways", { NatGatewayIds = { n.NatGatewayId } }).NatGateways
      return r and r[1] and r[1].State ~= "deleted" and r[1] or nil
    end,
    delete = function(cur)
      if cur.State ~= "deleting" then ctx:call("ec2", "DeleteNatGateway", { NatGatewayId = n.NatGatewayId }) end
    end })
end

local function elastic_ip(ctx, a)
  absent(ctx, { type = "ec2:elastic-ip", label = "Elastic IP", name = named(a, a.AllocationId), id = "AllocationId",
    retry = function(err) if err.code == "InvalidIPAddress.InUse" then return "still in use" end end,
    retry_for = 10 * 60, retry_every = 15,
    find = function()
      local r = ctx:try("ec2", "DescribeAddresses", { AllocationIds = { a.AllocationId } })
      return r and r.Addresses and r.Addresses[1]
    end,
    delete = function() ctx:call("ec2", "ReleaseAddress", { AllocationId = a.AllocationId }) end,
    gone = { "InvalidAllocationID.NotFound" } })
end

-- kept_by_fsx(ctx, tag, vpcs) -> fsx, held: the FSx file systems in the
-- VPCs' subnets (pieces.fsx_in), and the tagged subnets they keep
local function kept_by_fsx(ctx, tag, vpcs)
  local fsx = {}
  for _, v in ipairs(vpcs) do
    for s, fs in pairs(pieces.fsx_in(ctx, v.VpcId)) do fsx[s] = fs end
  end
  local held = {}
  for _, sn in ipairs(ctx:call("ec2", "DescribeSubnets", { Filters = tagged(tag) }).Subnets or {}) do
    if fsx[sn.SubnetId] then held[sn.SubnetId] = true end
  end
  return fsx, held
end

-- route_table(ctx, rt, held): deleted, unless a subnet that is kept uses it
local function route_table(ctx, rt, held)
  for _, a in ipairs(rt.Associations or {}) do
    if a.SubnetId and held[a.SubnetId] then
      return absent(ctx, { type = "ec2:route-table", label = "route table", name = named(rt, rt.RouteTableId),
        id = "RouteTableId", find = function() return rt end, delete = function() end,
        keep = "subnet " .. a.SubnetId .. " (kept) uses it" })
    end
  end
  pieces.route_table(ctx, rt)
end

local function internet_gateway(ctx, g)
  absent(ctx, { type = "ec2:internet-gateway", label = "internet gateway", name = named(g, g.InternetGatewayId),
    id = "InternetGatewayId", retry = draining, retry_for = 10 * 60, retry_every = 15,
    find = function()
      local r = ctx:try("ec2", "DescribeInternetGateways", { InternetGatewayIds = { g.InternetGatewayId } })
      return r and r.InternetGateways and r.InternetGateways[1]
    end,
    delete = function(cur)
      for _, a in ipairs(cur.Attachments or {}) do
        ctx:call("ec2", "DetachInternetGateway", { InternetGatewayId = g.InternetGatewayId, VpcId = a.VpcId })
      end
      ctx:call("ec2", "DeleteInternetGateway", { InternetGatewayId = g.InternetGatewayId })
    end,
    gone = { "InvalidInternetGatewayID.NotFound" } })
end

-- vpc(ctx, v, tag): the VPC, kept while it holds what is not hypd's
-- (M.foreign) or what this teardown keeps
local function vpc(ctx, v, tag)
  local foreign = M.foreign(ctx, v.VpcId, tag)
  absent(ctx, { type = "ec2:vpc", label = "VPC", name = named(v, v.VpcId), id = "VpcId",
    retry = draining, retry_for = 15 * 60, retry_every = 15,
    find = function()
      local r = ctx:try("ec2", "DescribeVpcs", { VpcIds = { v.VpcId } })
      return r and r.Vpcs and r.Vpcs[1]
    end,
    keep = function()
      local left = {}
      for _, id in ipairs(foreign) do left[#left + 1] = id end
      -- what is still there and stays: kept above (a plan also still
      -- sees what it deletes: those do not hold the VPC)
      local by_vpc = { { Name = "vpc-id", Values = { v.VpcId } } }
      for _, sn in ipairs(ctx:call("ec2", "DescribeSubnets", { Filters = by_vpc }).Subnets or {}) do
        if tag_of(sn.Tags) == tag and not pieces.going(ctx, sn.SubnetId) then left[#left + 1] = sn.SubnetId end
      end
      for _, sg in ipairs(ctx:call("ec2", "DescribeSecurityGroups", { Filters = by_vpc }).SecurityGroups or {}) do
        if sg.GroupName ~= "default" and tag_of(sg.Tags) == tag and not pieces.going(ctx, sg.GroupId) then
          left[#left + 1] = sg.GroupId
        end
      end
      if #left > 0 then
        return "it holds resources that are kept (" .. table.concat(left, ", ") .. ")"
      end
    end,
    delete = function() ctx:call("ec2", "DeleteVpc", { VpcId = v.VpcId }) end,
    gone = { "InvalidVpcID.NotFound" } })
end

function M.ec2_sweep(ctx, tag)
  each(ctx, "DescribeVpcEndpoints", "VpcEndpoints", { Filters = tagged(tag) }, function(e) pieces.endpoint(ctx, e) end)
  each(ctx, "DescribeNatGateways", "NatGateways", { Filter = tagged(tag) }, function(n) nat_gateway(ctx, n) end)
  each(ctx, "DescribeAddresses", "Addresses", { Filters = tagged(tag) }, function(a) elastic_ip(ctx, a) end)
  local vpcs = ctx:call("ec2", "DescribeVpcs", { Filters = tagged(tag) }).Vpcs or {}
  local fsx, held = kept_by_fsx(ctx, tag, vpcs)
  each(ctx, "DescribeRouteTables", "RouteTables", { Filters = tagged(tag) }, function(rt) route_table(ctx, rt, held) end)
  each(ctx, "DescribeInternetGateways", "InternetGateways", { Filters = tagged(tag) }, function(g) internet_gateway(ctx, g) end)
  each(ctx, "DescribeSubnets", "Subnets", { Filters = tagged(tag) }, function(sn) pieces.subnet(ctx, sn, pieces.in_use(fsx)) end)
  M.security_groups(ctx, tag)
  for _, v in ipairs(vpcs) do vpc(ctx, v, tag) end
end

-- roles_of(ctx, tag) -> the IAM roles that carry the tag
local function roles_of(ctx, tag)
  local out = {}
  for _, r in ipairs(hypd.aws.all("iam", "ListRoles", {}, ctx:aws_opts())) do
    local g = ctx:try("iam", "GetRole", { RoleName = r.RoleName })
    if g and tag_of(g.Role.Tags) == tag then out[#out + 1] = g.Role end
  end
  return out
end

function M.iam_sweep(ctx, tag, oidc_issuer)
  for _, role in ipairs(roles_of(ctx, tag)) do pieces.role(ctx, role.RoleName, tag) end
  for _, p in ipairs(hypd.aws.all("iam", "ListPolicies", { Scope = "Local" }, ctx:aws_opts())) do
    local g = ctx:try("iam", "GetPolicy", { PolicyArn = p.Arn })
    if g and tag_of(g.Policy.Tags) == tag then
      absent(ctx, { type = "iam:policy", label = "IAM policy", name = p.PolicyName, id = "Arn",
        find = function()
          local now = ctx:try("iam", "GetPolicy", { PolicyArn = p.Arn })
          return now and now.Policy
        end,
        delete = function()
          for _, v in ipairs(hypd.aws.all("iam", "ListPolicyVersions", { PolicyArn = p.Arn }, ctx:aws_opts())) do
            if not v.IsDefaultVersion then
              ctx:call("iam", "DeletePolicyVersion", { PolicyArn = p.Arn, VersionId = v.VersionId })
            end
          end
          ctx:call("iam", "DeletePolicy", { PolicyArn = p.Arn })
        end,
        gone = { "NoSuchEntity" } })
    end
  end
  if oidc_issuer then
    local host = oidc_issuer:gsub("^https://", "")
    for _, pr in ipairs(ctx:call("iam", "ListOpenIDConnectProviders", {}).OpenIDConnectProviderList or {}) do
      if pr.Arn:sub(-#host) == host then
        absent(ctx, { type = "iam:oidc-provider", label = "IAM OIDC provider", name = host, id = "Arn",
          find = function()
            local g = ctx:try("iam", "GetOpenIDConnectProvider", { OpenIDConnectProviderArn = pr.Arn })
            return g and { Arn = pr.Arn, Tags = g.Tags }
          end,
          owned = function(o)
            return tag_of(o.Tags) == tag, "it does not carry " .. Names.TAG .. "=" .. tag
          end,
          delete = function() ctx:call("iam", "DeleteOpenIDConnectProvider", { OpenIDConnectProviderArn = pr.Arn }) end,
          gone = { "NoSuchEntity" } })
      end
    end
  end
end

-- buckets(ctx, tag, force): every S3 bucket of the account that carries the
-- tag (what storage_delete and hyperpod_delete left, a managed feature's
-- TLS bucket), deleted unless it holds data (kept and reported unless force)
function M.buckets(ctx, tag, force)
  local s3 = require "_s3"
  for _, b in ipairs(ctx:call("s3", "ListBuckets", {}).Buckets or {}) do
    local h = s3.head(ctx, b.Name)
    if h and s3.tags(ctx, b.Name, h.Region)[Names.TAG] == tag then
      pieces.bucket(ctx, { name = b.Name, tag = tag, force = force })
    end
  end
end

-- file_systems(ctx, tag, force): the FSx file systems with the tag that no
-- storage_delete took (the EKS cluster whose claims named them is gone: a
-- teardown that kept one and is run again with force), kept unless force
-- (FSx cannot tell what a Lustre file system holds), else deleted and
-- waited for: its network interfaces hold its subnet and security groups
-- until it is gone
function M.file_systems(ctx, tag, force)
  for _, fs in ipairs(hypd.aws.all("fsx", "DescribeFileSystems", {}, ctx:aws_opts())) do
    if tag_of(fs.Tags) == tag and fs.Lifecycle ~= "DELETED" then
      local id = fs.FileSystemId
      absent(ctx, { type = "fsx:file-system", label = "FSx file system", name = tag_of(fs.Tags, "Name") or id,
        id = "FileSystemId", gone = { "FileSystemNotFound" },
        keep = not force and "it may hold data (FSx cannot tell hypd what a Lustre file system holds); force = " ..
          "true deletes it with everything on it, without a final backup" or nil,
        find = function() return FS.describe(ctx, id) end,
        delete = function(x) FS.delete(ctx, x) end,
        every = FS.DELETE_POLL, timeout = FS.DELETE_LIMIT })
    end
  end
end

-- node_groups(ctx, name, tag): the EKS managed node groups with the tag,
-- deleted and waited for (EKS refuses to delete a cluster that has node
-- groups; cluster_delete refused the ones without the tag before anything)
function M.node_groups(ctx, name, tag)
  if not ctx:try("eks", "DescribeCluster", { name = name }) then return end
  for _, g in ipairs(hypd.aws.all("eks", "ListNodegroups", { clusterName = name }, ctx:aws_opts())) do
    absent(ctx, { type = "eks:nodegroup", label = "EKS node group", name = name .. "/" .. g, id = "nodegroupArn",
      every = 15, timeout = 30 * 60, gone = { "ResourceNotFoundException" },
      retry = function(err) if err.code == "ResourceInUseException" then return "it is changing" end end,
      retry_for = 20 * 60, retry_every = 15,
      find = function()
        local d = ctx:try("eks", "DescribeNodegroup", { clusterName = name, nodegroupName = g })
        return d and d.nodegroup
      end,
      owned = function(n) return (n.tags or {})[Names.TAG] == tag, "its " .. Names.TAG .. " tag is not " .. tag end,
      delete = function(n)
        if n.status ~= "DELETING" then ctx:call("eks", "DeleteNodegroup", { clusterName = name, nodegroupName = g }) end
      end })
  end
end

function M.eks_cluster(ctx, name, tag)
  return absent(ctx, { type = "eks:cluster", label = "EKS cluster", name = name, id = "name",
    every = 30, timeout = 30 * 60,
    find = function()
      local r, err = ctx:try("eks", "DescribeCluster", { name = name })
      if r then return r.cluster end
      if err.code ~= "ResourceNotFoundException" then error(err, 0) end
    end,
    owned = function(c)
      local have = (c.tags or {})[Names.TAG]
      return have == tag, "its " .. Names.TAG .. " tag is " .. tostring(have)
    end,
    delete = function(c)
      if c.status ~= "DELETING" then ctx:call("eks", "DeleteCluster", { name = name }) end
    end,
    gone = { "ResourceNotFoundException" } })
end

return M
