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
--                             accepts (cluster/_teardown_holders)
-- and the pieces they are made of, one resource each (endpoint,
-- route_table, subnet, secondary_cidrs, foreign, role, bucket), for
-- hyperpod_delete.
local Names = require "_names"
local M = {}


local function tagged(tag) return { { Name = "tag:" .. Names.TAG, Values = { tag } } } end

local function tag_of(tags, key)
  for _, t in ipairs(tags or {}) do if t.Key == (key or Names.TAG) then return t.Value end end
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

-- listed(ctx, type, id) -> the entry this teardown already gave the
-- resource: one kept (a child's report merged into this one) or, in a
-- plan, one planned (a child's delete or keep). A teardown lists each
-- resource once with one action: hyperpod_delete's compute subnet is not
-- the network sweep's too, and a plan's kept lifecycle bucket is not also
-- its delete.
function M.listed(ctx, typ, id)
  if id == nil then return nil end
  for _, k in ipairs(ctx.state.kept or {}) do
    if k.type == typ and (k.id == id or k.name == id) then return k end
  end
  if ctx.plan then
    for _, e in ipairs(ctx.planned or {}) do
      if e.type == typ and (e.id == id or e.name == id) then return e end
    end
  end
end

-- going(ctx, id) -> true when this plan (or the plan of the teardown that
-- called this one, before the call) deletes the resource of that id: what
-- still exists while a plan is made but will not when the run gets there
function M.going(ctx, id)
  if not ctx.plan or id == nil then return false end
  for _, list in ipairs { ctx.planned or {}, ctx.caller and ctx.caller.plan_before or {} } do
    for _, e in ipairs(list) do
      if e.action == "delete" and e.id == id then return true end
    end
  end
  return false
end

-- absent(ctx, spec): ctx:absent, for a resource not listed yet
local function absent(ctx, spec)
  local find = spec.find
  spec.find = function()
    local o = find()
    if o and M.listed(ctx, spec.type, type(spec.id) == "string" and o[spec.id] or spec.name) then return nil end
    return o
  end
  return ctx:absent(spec)
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
  return absent(ctx, { type = "ec2:vpc-endpoint", label = "VPC endpoint", name = named(e, e.VpcEndpointId),
    id = "VpcEndpointId",
    find = function()
      local r = ctx:call("ec2", "DescribeVpcEndpoints", { VpcEndpointIds = { e.VpcEndpointId } }).VpcEndpoints
      return r and r[1] and r[1].State ~= "deleted" and r[1] or nil
    end,
    delete = function() ctx:call("ec2", "DeleteVpcEndpoints", { VpcEndpointIds = { e.VpcEndpointId } }) end })
end

function M.route_table(ctx, rt)
  return absent(ctx, { type = "ec2:route-table", label = "route table", name = named(rt, rt.RouteTableId),
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
    gone = { "InvalidRouteTableID.NotFound" } })
end

-- subnet(ctx, sn [, keep]): keep as for ctx:absent (a reason, or fn(subnet) -> reason)
function M.subnet(ctx, sn, keep)
  return absent(ctx, { type = "ec2:subnet", label = "subnet", name = named(sn, sn.SubnetId), id = "SubnetId",
    retry = draining, retry_for = 15 * 60, retry_every = 15, keep = keep,
    find = function()
      local r = ctx:try("ec2", "DescribeSubnets", { SubnetIds = { sn.SubnetId } })
      return r and r.Subnets and r.Subnets[1]
    end,
    delete = function()
      local ok, err = pcall(ctx.call, ctx, "ec2", "DeleteSubnet", { SubnetId = sn.SubnetId })
      if ok then return end
      local H = require "cluster._teardown_holders"
      error(H.explain(err, type(err) == "table" and err.code == "DependencyViolation" and
        H.subnet_held(ctx, sn.SubnetId)), 0)
    end,
    gone = { "InvalidSubnetID.NotFound" } })
end

-- fsx_in(ctx, vpc_id) -> {subnet id = "fs-1, fs-2"}: the FSx file systems
-- that live in the VPC's subnets (a kept one holds its subnet)
function M.fsx_in(ctx, vpc_id)
  local out = {}
  for _, fs in ipairs(hypd.aws.all("fsx", "DescribeFileSystems", {}, ctx:aws_opts())) do
    if fs.VpcId == vpc_id and fs.Lifecycle ~= "DELETED" and not M.going(ctx, fs.FileSystemId) then
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
      absent(ctx, { type = "ec2:subnet", label = "subnet", name = named(sn, sn.SubnetId), id = "SubnetId",
        find = function() return sn end, owned = function() return false, "it does not carry " .. Names.TAG .. "=" ..
          tag end, delete = function() end })
    end
  end
  for _, sg in ipairs(ctx:call("ec2", "DescribeSecurityGroups", { Filters = by_vpc }).SecurityGroups or {}) do
    if sg.GroupName ~= "default" and tag_of(sg.Tags) ~= tag then
      ids[#ids + 1] = sg.GroupId
      absent(ctx, { type = "ec2:security-group", label = "security group", name = sg.GroupName or sg.GroupId,
        id = "GroupId", find = function() return sg end,
        owned = function() return false, "it does not carry " .. Names.TAG .. "=" .. tag end, delete = function() end })
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
      absent(ctx, { type = "ec2:vpc-cidr-block", label = "VPC CIDR block", name = a.CidrBlock .. " of " .. vpc.VpcId,
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
        gone = { "InvalidVpcCidrBlockAssociationID.NotFound" } })
    end
  end
end

-- security_groups(ctx, tag): the groups with the tag, each after the
-- groups whose rules name it (AWS refuses a group another group's rule
-- names). One is kept while what the teardown keeps holds it (a kept FSx
-- file system's interfaces, a kept group's rule naming it); one that
-- something going away holds (an EKS cluster's or a load balancer's
-- interfaces draining) is tried again for a while; at the end the error
-- names what holds it.
function M.security_groups(ctx, tag)
  local holders = require "cluster._teardown_holders"
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
          local k = M.listed(ctx, "fsx:file-system", i.owner) or M.listed(ctx, "ec2:vpc-endpoint", i.owner)
          if k and k.action ~= "delete" and not seen[i.owner] then
            seen[i.owner] = true
            why[#why + 1] = i.what .. " (kept)"
          end
        end
        for _, r in ipairs(holders.referrers(vpc_groups[sg.VpcId] or {}, sg.GroupId)) do
          local k = M.listed(ctx, "ec2:security-group", r.GroupId)
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

function M.ec2_sweep(ctx, tag)
  each(ctx, "DescribeVpcEndpoints", "VpcEndpoints", { Filters = tagged(tag) }, function(e) M.endpoint(ctx, e) end)
  each(ctx, "DescribeNatGateways", "NatGateways", { Filter = tagged(tag) }, function(n)
    absent(ctx, { type = "ec2:nat-gateway", label = "NAT gateway", name = named(n, n.NatGatewayId), id = "NatGatewayId",
      every = 15, timeout = 20 * 60,
      find = function()
        local r = ctx:call("ec2", "DescribeNatGateways", { NatGatewayIds = { n.NatGatewayId } }).NatGateways
        return r and r[1] and r[1].State ~= "deleted" and r[1] or nil
      end,
      delete = function(cur)
        if cur.State ~= "deleting" then ctx:call("ec2", "DeleteNatGateway", { NatGatewayId = n.NatGatewayId }) end
      end })
  end)
  each(ctx, "DescribeAddresses", "Addresses", { Filters = tagged(tag) }, function(a)
    absent(ctx, { type = "ec2:elastic-ip", label = "Elastic IP", name = named(a, a.AllocationId), id = "AllocationId",
      retry = function(err) if err.code == "InvalidIPAddress.InUse" then return "still in use" end end,
      retry_for = 10 * 60, retry_every = 15,
      find = function()
        local r = ctx:try("ec2", "DescribeAddresses", { AllocationIds = { a.AllocationId } })
        return r and r.Addresses and r.Addresses[1]
      end,
      delete = function() ctx:call("ec2", "ReleaseAddress", { AllocationId = a.AllocationId }) end,
      gone = { "InvalidAllocationID.NotFound" } })
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
        return absent(ctx, { type = "ec2:route-table", label = "route table", name = named(rt, rt.RouteTableId),
          id = "RouteTableId", find = function() return rt end, delete = function() end,
          keep = "subnet " .. a.SubnetId .. " (kept) uses it" })
      end
    end
    M.route_table(ctx, rt)
  end)
  each(ctx, "DescribeInternetGateways", "InternetGateways", { Filters = tagged(tag) }, function(g)
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
  end)
  each(ctx, "DescribeSubnets", "Subnets", { Filters = tagged(tag) }, function(sn) M.subnet(ctx, sn, M.in_use(fsx)) end)
  M.security_groups(ctx, tag)
  for _, v in ipairs(vpcs) do
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
          if tag_of(sn.Tags) == tag and not M.going(ctx, sn.SubnetId) then left[#left + 1] = sn.SubnetId end
        end
        for _, sg in ipairs(ctx:call("ec2", "DescribeSecurityGroups", { Filters = by_vpc }).SecurityGroups or {}) do
          if sg.GroupName ~= "default" and tag_of(sg.Tags) == tag and not M.going(ctx, sg.GroupId) then
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
  return absent(ctx, { type = "iam:role", label = "IAM role", name = name, id = "RoleName", field = field,
    find = function()
      local g = ctx:try("iam", "GetRole", { RoleName = name })
      return g and g.Role
    end,
    owned = function(r) return tag_of(r.Tags) == tag, "it does not carry " .. Names.TAG .. "=" .. tag end,
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
    gone = { "NoSuchEntity" } })
end
M.AWS_ROLE = { "iam:GetRole", "iam:ListAttachedRolePolicies", "iam:DetachRolePolicy", "iam:ListRolePolicies",
  "iam:DeleteRolePolicy", "iam:ListInstanceProfilesForRole", "iam:RemoveRoleFromInstanceProfile", "iam:DeleteRole" }

function M.iam_sweep(ctx, tag, oidc_issuer)
  for _, role in ipairs(roles_of(ctx, tag)) do M.role(ctx, role.RoleName, tag) end
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

-- bucket(ctx, o): the S3 bucket o.name (hypd's when it carries the tag
-- o.tag), emptied (every version) and deleted. o.ours: the keys hypd put
-- there (the lifecycle scripts); any other object is data, and a bucket that
-- holds data is kept and reported unless o.force. o.field: a bucket the
-- caller named that is not hypd's is a CONFLICT.
function M.bucket(ctx, o)
  local s3 = require "storage._s3"
  local region
  return absent(ctx, { type = "s3:bucket", label = "S3 bucket", name = o.name, id = "Name", field = o.field,
    gone = { "NoSuchBucket" },
    find = function()
      local h = s3.head(ctx, o.name)
      if h then
        region = h.Region
        h.Tags = s3.tags(ctx, o.name, h.Region)
      end
      return h
    end,
    owned = function(b) return b.Tags[Names.TAG] == o.tag, "it does not carry " .. Names.TAG .. "=" .. o.tag end,
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
    end })
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
    if h and s3.tags(ctx, b.Name, h.Region)[Names.TAG] == tag then
      M.bucket(ctx, { name = b.Name, tag = tag, force = force })
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
  local F = require "storage._fsx"
  for _, fs in ipairs(hypd.aws.all("fsx", "DescribeFileSystems", {}, ctx:aws_opts())) do
    if tag_of(fs.Tags) == tag and fs.Lifecycle ~= "DELETED" then
      local id = fs.FileSystemId
      absent(ctx, { type = "fsx:file-system", label = "FSx file system", name = tag_of(fs.Tags, "Name") or id,
        id = "FileSystemId", gone = { "FileSystemNotFound" },
        keep = not force and "it may hold data (FSx cannot tell hypd what a Lustre file system holds); force = " ..
          "true deletes it with everything on it, without a final backup" or nil,
        find = function() return F.describe_fs(ctx, id) end,
        delete = function(x) F.delete_fs(ctx, x) end,
        every = F.DELETE_POLL, timeout = F.DELETE_LIMIT })
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
