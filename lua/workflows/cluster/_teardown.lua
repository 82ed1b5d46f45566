-- cluster/_teardown: taking away what hypd made for a cluster tag, in
-- reverse order, with the kit's ctx:absent: only what carries the tag
-- hypd:cluster-tag=<tag> is deleted, everything else is kept and reported.
--   ec2_sweep(ctx, tag)       the network: endpoints, NAT gateways, Elastic
--                             IPs, route tables, internet gateways, subnets,
--                             security groups, then the VPC
--   iam_sweep(ctx, tag)       the roles and customer policies with the tag,
--                             and the cluster's IAM OIDC provider
--   eks_cluster(ctx, name, tag)   the EKS cluster (its add-ons, access
--                             entries and pod identity associations go with it)
--   buckets(ctx, tag, force)  the S3 buckets with the tag (kept when they
--                             hold data, unless force)
-- and the pieces they are made of, one resource each (endpoint,
-- route_table, subnet, secondary_cidrs, foreign, role, bucket), for
-- hyperpod_delete.
local M = {}

M.TAG = "hypd:cluster-tag"

local function tagged(tag) return { { Name = "tag:" .. M.TAG, Values = { tag } } } end

local function tag_of(tags, key)
  for _, t in ipairs(tags or {}) do if t.Key == (key or M.TAG) then return t.Value end end
end

-- named(r, id) -> "hypd-demo-vpc (vpc-123)" when the resource has a Name tag
local function named(r, id)
  local n = tag_of(r.Tags, "Name")
  return n and (n .. " (" .. id .. ")") or id
end

-- the dependencies AWS drains by itself (ENIs of a deleted NAT gateway or
-- cluster): tried again for a while
local function draining(err)
  if err.code == "DependencyViolation" or err.code == "InvalidNetworkInterface.InUse" then
    return "waiting for its dependencies to drain"
  end
end

local function each(ctx, op_name, list_key, params, fn)
  local out = ctx:call("ec2", op_name, params)
  for _, r in ipairs(out[list_key] or {}) do fn(r) end
end

-- the pieces, one resource each (hyperpod_delete takes the compute
-- subnet's; the sweep below takes them all): r is the resource as Describe
-- answered it

function M.endpoint(ctx, e)
  if e.State == "deleted" then return "absent" end
  return ctx:absent { type = "ec2:vpc-endpoint", label = "VPC endpoint", name = named(e, e.VpcEndpointId),
    id = "VpcEndpointId",
    find = function()
      local r = ctx:call("ec2", "DescribeVpcEndpoints", { VpcEndpointIds = { e.VpcEndpointId } }).VpcEndpoints
      return r and r[1] and r[1].State ~= "deleted" and r[1] or nil
    end,
    delete = function() ctx:call("ec2", "DeleteVpcEndpoints", { VpcEndpointIds = { e.VpcEndpointId } }) end }
end

function M.route_table(ctx, rt)
  return ctx:absent { type = "ec2:route-table", label = "route table", name = named(rt, rt.RouteTableId),
    id = "RouteTableId", retry = draining,
    find = function()
      local r = ctx:try("ec2", "DescribeRouteTables", { RouteTableIds = { rt.RouteTableId } })
      return r and r.RouteTables and r.RouteTables[1]
    end,
    keep = function(cur)
      for _, a in ipairs(cur.Associations or {}) do
        if a.Main then return "the main route table goes with its VPC" end
      end
    end,
    delete = function(cur)
      for _, a in ipairs(cur.Associations or {}) do
        if not a.Main and a.RouteTableAssociationId then
          ctx:call("ec2", "DisassociateRouteTable", { AssociationId = a.RouteTableAssociationId })
        end
      end
      ctx:call("ec2", "DeleteRouteTable", { RouteTableId = rt.RouteTableId })
    end,
    gone = { "InvalidRouteTableID.NotFound" } }
end

-- subnet(ctx, sn [, keep]): keep as for ctx:absent (a reason, or fn(subnet) -> reason)
function M.subnet(ctx, sn, keep)
  return ctx:absent { type = "ec2:subnet", label = "subnet", name = named(sn, sn.SubnetId), id = "SubnetId",
    retry = draining, retry_for = 15 * 60, retry_every = 15, keep = keep,
    find = function()
      local r = ctx:try("ec2", "DescribeSubnets", { SubnetIds = { sn.SubnetId } })
      return r and r.Subnets and r.Subnets[1]
    end,
    delete = function() ctx:call("ec2", "DeleteSubnet", { SubnetId = sn.SubnetId }) end,
    gone = { "InvalidSubnetID.NotFound" } }
end

-- fsx_in(ctx, vpc_id) -> {subnet id = "fs-1, fs-2"}: the FSx file systems
-- that live in the VPC's subnets (a kept one holds its subnet)
function M.fsx_in(ctx, vpc_id)
  local out = {}
  for _, fs in ipairs(hypd.aws.all("fsx", "DescribeFileSystems", {}, ctx:aws_opts())) do
    if fs.VpcId == vpc_id and fs.Lifecycle ~= "DELETED" then
      for _, s in ipairs(fs.SubnetIds or {}) do
        out[s] = out[s] and (out[s] .. ", " .. fs.FileSystemId) or fs.FileSystemId
      end
    end
  end
  return out
end

-- in_use(fsx) -> keep fn: a subnet an FSx file system still lives in is kept
function M.in_use(fsx)
  return function(s)
    if fsx[s.SubnetId] then return "FSx file system " .. fsx[s.SubnetId] .. " (kept) lives in it" end
  end
end

-- foreign(ctx, vpc_id, tag) -> ids: the subnets and security groups (but
-- the default group) in the VPC that do not carry the tag, each reported
-- as kept (not hypd's); a VPC that holds them is kept too
function M.foreign(ctx, vpc_id, tag)
  local ids = {}
  local by_vpc = { { Name = "vpc-id", Values = { vpc_id } } }
  for _, sn in ipairs(ctx:call("ec2", "DescribeSubnets", { Filters = by_vpc }).Subnets or {}) do
    if tag_of(sn.Tags) ~= tag then
      ids[#ids + 1] = sn.SubnetId
      ctx:absent { type = "ec2:subnet", label = "subnet", name = named(sn, sn.SubnetId), id = "SubnetId",
        find = function() return sn end, owned = function() return false, "it does not carry " .. M.TAG .. "=" ..
          tag end, delete = function() end }
    end
  end
  for _, sg in ipairs(ctx:call("ec2", "DescribeSecurityGroups", { Filters = by_vpc }).SecurityGroups or {}) do
    if sg.GroupName ~= "default" and tag_of(sg.Tags) ~= tag then
      ids[#ids + 1] = sg.GroupId
      ctx:absent { type = "ec2:security-group", label = "security group", name = sg.GroupName or sg.GroupId,
        id = "GroupId", find = function() return sg end,
        owned = function() return false, "it does not carry " .. M.TAG .. "=" .. tag end, delete = function() end }
    end
  end
  return ids
end

-- secondary_cidrs(ctx, vpc, tag): the VPC's secondary IPv4 CIDRs (hyperpod/
-- _subnet associates one when the VPC has no free /20) that no subnet
-- uses, disassociated when the VPC is hypd's for the tag; in a VPC hypd did
-- not make, hypd cannot tell who added one: kept and reported
function M.secondary_cidrs(ctx, vpc, tag)
  local sets = vpc.CidrBlockAssociationSet or {}
  for i = 2, #sets do
    local a = sets[i]
    local state = (a.CidrBlockState or {}).State
    if state == "associated" or state == "associating" then
      ctx:absent { type = "ec2:vpc-cidr-block", label = "VPC CIDR block", name = a.CidrBlock .. " of " .. vpc.VpcId,
        id = "AssociationId", retry = draining, retry_for = 10 * 60, retry_every = 15,
        keep = function()
          if tag_of(vpc.Tags) ~= tag then
            return "the VPC is not hypd's for " .. tag .. ": hypd cannot tell who associated this CIDR"
          end
          local users = {}
          for _, sn in ipairs(ctx:call("ec2", "DescribeSubnets", { Filters = { { Name = "vpc-id",
              Values = { vpc.VpcId } } } }).Subnets or {}) do
            if hypd.cidr.contains(a.CidrBlock, sn.CidrBlock) then users[#users + 1] = sn.SubnetId end
          end
          if #users > 0 then return "subnets use it (" .. table.concat(users, ", ") .. ")" end
        end,
        find = function()
          local v = (ctx:call("ec2", "DescribeVpcs", { VpcIds = { vpc.VpcId } }).Vpcs or {})[1] or {}
          for _, x in ipairs(v.CidrBlockAssociationSet or {}) do
            local s = (x.CidrBlockState or {}).State
            if x.AssociationId == a.AssociationId and (s == "associated" or s == "associating") then return x end
          end
        end,
        delete = function() ctx:call("ec2", "DisassociateVpcCidrBlock", { AssociationId = a.AssociationId }) end,
        gone = { "InvalidVpcCidrBlockAssociationID.NotFound" } }
    end
  end
end

function M.ec2_sweep(ctx, tag)
  each(ctx, "DescribeVpcEndpoints", "VpcEndpoints", { Filters = tagged(tag) }, function(e) M.endpoint(ctx, e) end)
  each(ctx, "DescribeNatGateways", "NatGateways", { Filter = tagged(tag) }, function(n)
    ctx:absent { type = "ec2:nat-gateway", label = "NAT gateway", name = named(n, n.NatGatewayId), id = "NatGatewayId",
      every = 15, timeout = 20 * 60,
      find = function()
        local r = ctx:call("ec2", "DescribeNatGateways", { NatGatewayIds = { n.NatGatewayId } }).NatGateways
        return r and r[1] and r[1].State ~= "deleted" and r[1] or nil
      end,
      delete = function(cur)
        if cur.State ~= "deleting" then ctx:call("ec2", "DeleteNatGateway", { NatGatewayId = n.NatGatewayId }) end
      end }
  end)
  each(ctx, "DescribeAddresses", "Addresses", { Filters = tagged(tag) }, function(a)
    ctx:absent { type = "ec2:elastic-ip", label = "Elastic IP", name = named(a, a.AllocationId), id = "AllocationId",
      retry = function(err) if err.code == "InvalidIPAddress.InUse" then return "still in use" end end,
      retry_for = 10 * 60, retry_every = 15,
      find = function()
        local r = ctx:try("ec2", "DescribeAddresses", { AllocationIds = { a.AllocationId } })
        return r and r.Addresses and r.Addresses[1]
      end,
      delete = function() ctx:call("ec2", "ReleaseAddress", { AllocationId = a.AllocationId }) end,
      gone = { "InvalidAllocationID.NotFound" } }
  end)
  local vpcs = ctx:call("ec2", "DescribeVpcs", { Filters = tagged(tag) }).Vpcs or {}
  local fsx = {}
  for _, v in ipairs(vpcs) do
    for s, fs in pairs(M.fsx_in(ctx, v.VpcId)) do fsx[s] = fs end
  end
  local held = {} -- the route tables of the subnets kept
  for _, sn in ipairs(ctx:call("ec2", "DescribeSubnets", { Filters = tagged(tag) }).Subnets or {}) do
    if fsx[sn.SubnetId] then held[sn.SubnetId] = true end
  end
  each(ctx, "DescribeRouteTables", "RouteTables", { Filters = tagged(tag) }, function(rt)
    for _, a in ipairs(rt.Associations or {}) do
      if a.SubnetId and held[a.SubnetId] then
        return ctx:absent { type = "ec2:route-table", label = "route table", name = named(rt, rt.RouteTableId),
          id = "RouteTableId", find = function() return rt end, delete = function() end,
          keep = "subnet " .. a.SubnetId .. " (kept) uses it" }
      end
    end
    M.route_table(ctx, rt)
  end)
  each(ctx, "DescribeInternetGateways", "InternetGateways", { Filters = tagged(tag) }, function(g)
    ctx:absent { type = "ec2:internet-gateway", label = "internet gateway", name = named(g, g.InternetGatewayId),
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
      gone = { "InvalidInternetGatewayID.NotFound" } }
  end)
  each(ctx, "DescribeSubnets", "Subnets", { Filters = tagged(tag) }, function(sn) M.subnet(ctx, sn, M.in_use(fsx)) end)
  each(ctx, "DescribeSecurityGroups", "SecurityGroups", { Filters = tagged(tag) }, function(sg)
    ctx:absent { type = "ec2:security-group", label = "security group", name = sg.GroupName or sg.GroupId,
      id = "GroupId", retry = draining, retry_for = 15 * 60, retry_every = 15,
      find = function()
        local r = ctx:try("ec2", "DescribeSecurityGroups", { GroupIds = { sg.GroupId } })
        return r and r.SecurityGroups and r.SecurityGroups[1]
      end,
      keep = function(cur)
        if cur.GroupName == "default" then return "the default group goes with its VPC" end
        local used = ctx:call("ec2", "DescribeNetworkInterfaces", { Filters = { { Name = "group-id",
          Values = { sg.GroupId } } } }).NetworkInterfaces or {}
        if #used > 0 then
          return "network interfaces of resources kept use it (" .. tostring(used[1].Description or
            used[1].NetworkInterfaceId) .. (#used > 1 and (" and " .. (#used - 1) .. " more") or "") .. ")"
        end
      end,
      delete = function() ctx:call("ec2", "DeleteSecurityGroup", { GroupId = sg.GroupId }) end,
      gone = { "InvalidGroup.NotFound" } }
  end)
  for _, v in ipairs(vpcs) do
    local foreign = M.foreign(ctx, v.VpcId, tag)
    ctx:absent { type = "ec2:vpc", label = "VPC", name = named(v, v.VpcId), id = "VpcId",
      retry = draining, retry_for = 15 * 60, retry_every = 15,
      find = function()
        local r = ctx:try("ec2", "DescribeVpcs", { VpcIds = { v.VpcId } })
        return r and r.Vpcs and r.Vpcs[1]
      end,
      keep = function()
        local left = {}
        for _, id in ipairs(foreign) do left[#left + 1] = id end
        for _, sn in ipairs(ctx:call("ec2", "DescribeSubnets", { Filters = { { Name = "vpc-id",
            Values = { v.VpcId } } } }).Subnets or {}) do
          if tag_of(sn.Tags) == tag then left[#left + 1] = sn.SubnetId end -- a subnet kept above
        end
        if #left > 0 then
          return "it holds resources that are kept (" .. table.concat(left, ", ") .. ")"
        end
      end,
      delete = function() ctx:call("ec2", "DeleteVpc", { VpcId = v.VpcId }) end,
      gone = { "InvalidVpcID.NotFound" } }
  end
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

-- role(ctx, name, tag [, field]): the IAM role, its attached and inline
-- policies and instance profiles first; a role without the tag is kept
-- (or, with field, a CONFLICT naming it)
function M.role(ctx, name, tag, field)
  return ctx:absent { type = "iam:role", label = "IAM role", name = name, id = "RoleName", field = field,
    find = function()
      local g = ctx:try("iam", "GetRole", { RoleName = name })
      return g and g.Role
    end,
    owned = function(r) return tag_of(r.Tags) == tag, "it does not carry " .. M.TAG .. "=" .. tag end,
    delete = function()
      for _, p in ipairs(hypd.aws.all("iam", "ListAttachedRolePolicies", { RoleName = name }, ctx:aws_opts())) do
        ctx:call("iam", "DetachRolePolicy", { RoleName = name, PolicyArn = p.PolicyArn })
      end
      for _, n in ipairs(hypd.aws.all("iam", "ListRolePolicies", { RoleName = name }, ctx:aws_opts())) do
        ctx:call("iam", "DeleteRolePolicy", { RoleName = name, PolicyName = n })
      end
      for _, ip in ipairs(hypd.aws.all("iam", "ListInstanceProfilesForRole", { RoleName = name }, ctx:aws_opts())) do
        ctx:call("iam", "RemoveRoleFromInstanceProfile", { RoleName = name, InstanceProfileName = ip.InstanceProfileName })
      end
      ctx:call("iam", "DeleteRole", { RoleName = name })
    end,
    gone = { "NoSuchEntity" } }
end
M.AWS_ROLE = { "iam:GetRole", "iam:ListAttachedRolePolicies", "iam:DetachRolePolicy", "iam:ListRolePolicies",
  "iam:DeleteRolePolicy", "iam:ListInstanceProfilesForRole", "iam:RemoveRoleFromInstanceProfile", "iam:DeleteRole" }

function M.iam_sweep(ctx, tag, oidc_issuer)
  for _, role in ipairs(roles_of(ctx, tag)) do M.role(ctx, role.RoleName, tag) end
  for _, p in ipairs(hypd.aws.all("iam", "ListPolicies", { Scope = "Local" }, ctx:aws_opts())) do
    local g = ctx:try("iam", "GetPolicy", { PolicyArn = p.Arn })
    if g and tag_of(g.Policy.Tags) == tag then
      ctx:absent { type = "iam:policy", label = "IAM policy", name = p.PolicyName, id = "Arn",
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
        gone = { "NoSuchEntity" } }
    end
  end
  if oidc_issuer then
    local host = oidc_issuer:gsub("^https://", "")
    for _, pr in ipairs(ctx:call("iam", "ListOpenIDConnectProviders", {}).OpenIDConnectProviderList or {}) do
      if pr.Arn:sub(-#host) == host then
        ctx:absent { type = "iam:oidc-provider", label = "IAM OIDC provider", name = host, id = "Arn",
          find = function()
            local g = ctx:try("iam", "GetOpenIDConnectProvider", { OpenIDConnectProviderArn = pr.Arn })
            return g and { Arn = pr.Arn, Tags = g.Tags }
          end,
          owned = function(o)
            return tag_of(o.Tags) == tag, "it does not carry " .. M.TAG .. "=" .. tag
          end,
          delete = function() ctx:call("iam", "DeleteOpenIDConnectProvider", { OpenIDConnectProviderArn = pr.Arn }) end,
          gone = { "NoSuchEntity" } }
      end
    end
  end
end

-- bucket(ctx, o): the S3 bucket o.name (hypd's when it carries the tag
-- o.tag), emptied (every version) and deleted. o.ours: the keys hypd put
-- there (the lifecycle scripts); any other object is data, and a bucket that
-- holds data is kept and reported unless o.force. o.field: a bucket the
-- caller named that is not hypd's is a CONFLICT.
function M.bucket(ctx, o)
  local s3 = require "storage._s3"
  local region
  return ctx:absent { type = "s3:bucket", label = "S3 bucket", name = o.name, id = "Name", field = o.field,
    gone = { "NoSuchBucket" },
    find = function()
      local h = s3.head(ctx, o.name)
      if h then
        region = h.Region
        h.Tags = s3.tags(ctx, o.name, h.Region)
      end
      return h
    end,
    owned = function(b) return b.Tags[M.TAG] == o.tag, "it does not carry " .. M.TAG .. "=" .. o.tag end,
    keep = function()
      if o.force then return nil end
      local r = ctx:call("s3", "ListObjectVersions", { Bucket = o.name, MaxKeys = 1000 })
      local data = {}
      for _, v in ipairs(r.Versions or {}) do
        if not (o.ours and o.ours[v.Key]) then data[#data + 1] = v.Key end
      end
      if #data > 0 or r.IsTruncated then
        return string.format("holds data (%s%d object version%s%s, e.g. %s); force = true empties it and deletes it",
          r.IsTruncated and "more than " or "", #data, #data == 1 and "" or "s",
          o.ours and " hypd did not upload" or "", tostring(data[1]))
      end
    end,
    delete = function(b)
      local n = s3.empty(ctx, o.name, region or b.Region)
      if n > 0 then ctx:progress(string.format("S3 bucket %s: %d object versions deleted", o.name, n)) end
      s3.delete_bucket(ctx, o.name, region or b.Region)
    end }
end
M.AWS_BUCKET = { "s3:HeadBucket", "s3:GetBucketTagging", "s3:ListObjectVersions",
  "s3:DeleteObjects", "s3:DeleteBucket" }

-- buckets(ctx, tag, force): every S3 bucket of the account that carries the
-- tag (what storage_delete and hyperpod_delete left, a managed feature's
-- TLS bucket), deleted unless it holds data (kept and reported unless force)
function M.buckets(ctx, tag, force)
  local s3 = require "storage._s3"
  for _, b in ipairs(ctx:call("s3", "ListBuckets", {}).Buckets or {}) do
    local h = s3.head(ctx, b.Name)
    if h and s3.tags(ctx, b.Name, h.Region)[M.TAG] == tag then
      M.bucket(ctx, { name = b.Name, tag = tag, force = force })
    end
  end
end

function M.eks_cluster(ctx, name, tag)
  return ctx:absent { type = "eks:cluster", label = "EKS cluster", name = name, id = "name",
    every = 30, timeout = 30 * 60,
    find = function()
      local r, err = ctx:try("eks", "DescribeCluster", { name = name })
      if r then return r.cluster end
      if err.code ~= "ResourceNotFoundException" then error(err, 0) end
    end,
    owned = function(c)
      local have = (c.tags or {})[M.TAG]
      return have == tag, "its " .. M.TAG .. " tag is " .. tostring(have)
    end,
    delete = function(c)
      if c.status ~= "DELETING" then ctx:call("eks", "DeleteCluster", { name = name }) end
    end,
    gone = { "ResourceNotFoundException" } }
end

return M
