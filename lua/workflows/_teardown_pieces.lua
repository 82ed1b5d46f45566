-- _teardown_pieces: taking away one resource hypd made for a cluster tag,
-- with the kit's ctx:absent: only what carries the tag hypd:cluster-tag=<tag>
-- is deleted, everything else is kept and reported. The teardowns of every
-- area use them: cluster_delete's sweeps (cluster/_teardown), hyperpod_delete
-- (its compute subnet, route table, endpoint, execution role and lifecycle
-- bucket), storage_delete (going: what its caller's plan deletes).
--   endpoint, route_table, subnet, fsx_in, in_use, secondary_cidrs, role,
--   bucket: one resource each; AWS_ROLE, AWS_BUCKET the actions they call
--   listed, going: what this teardown (or its caller's plan) already has
--   absent(ctx, spec): ctx:absent, for a resource not listed yet
--   tag_of(tags [, key]), named(r, id), draining(err): the tag of an EC2/IAM
--   tag list, a resource's name for a report, the retry while AWS drains
local TAG = require("_network").TAG_KEY

local M = {}

function M.tag_of(tags, key)
  for _, t in ipairs(tags or {}) do if t.Key == (key or TAG) then return t.Value end end
end

-- M.named(r, id) -> "hypd-demo-vpc (vpc-123)" when the resource has a Name tag
function M.named(r, id)
  local n = M.tag_of(r.Tags, "Name")
  return n and (n .. " (" .. id .. ")") or id
end

-- the dependencies AWS drains by itself (ENIs of a deleted NAT gateway or
-- cluster): tried again for a while
function M.draining(err)
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

-- M.absent(ctx, spec): ctx:absent, for a resource not listed yet
function M.absent(ctx, spec)
  local find = spec.find
  spec.find = function()
    local o = find()
    if o and M.listed(ctx, spec.type, type(spec.id) == "string" and o[spec.id] or spec.name) then return nil end
    return o
  end
  return ctx:absent(spec)
end

-- the pieces, one resource each (hyperpod_delete takes the compute
-- subnet's; cluster/_teardown's sweep takes them all): r is the resource
-- as Describe answered it

function M.endpoint(ctx, e)
  if e.State == "deleted" then return "absent" end
  return M.absent(ctx, { type = "ec2:vpc-endpoint", label = "VPC endpoint", name = M.named(e, e.VpcEndpointId),
    id = "VpcEndpointId",
    find = function()
      local r = ctx:call("ec2", "DescribeVpcEndpoints", { VpcEndpointIds = { e.VpcEndpointId } }).VpcEndpoints
      return r and r[1] and r[1].State ~= "deleted" and r[1] or nil
    end,
    delete = function() ctx:call("ec2", "DeleteVpcEndpoints", { VpcEndpointIds = { e.VpcEndpointId } }) end })
end

function M.route_table(ctx, rt)
  return M.absent(ctx, { type = "ec2:route-table", label = "route table", name = M.named(rt, rt.RouteTableId),
    id = "RouteTableId", retry = M.draining,
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
  return M.absent(ctx, { type = "ec2:subnet", label = "subnet", name = M.named(sn, sn.SubnetId), id = "SubnetId",
    retry = M.draining, retry_for = 15 * 60, retry_every = 15, keep = keep,
    find = function()
      local r = ctx:try("ec2", "DescribeSubnets", { SubnetIds = { sn.SubnetId } })
      return r and r.Subnets and r.Subnets[1]
    end,
    delete = function()
      local ok, err = pcall(ctx.call, ctx, "ec2", "DeleteSubnet", { SubnetId = sn.SubnetId })
      if ok then return end
      local H = require "_teardown_holders"
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
      M.absent(ctx, { type = "ec2:vpc-cidr-block", label = "VPC CIDR block", name = a.CidrBlock .. " of " .. vpc.VpcId,
        id = "AssociationId", retry = M.draining, retry_for = 10 * 60, retry_every = 15,
        keep = function()
          if M.tag_of(vpc.Tags) ~= tag then
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

-- role(ctx, name, tag [, field]): the IAM role, its attached and inline
-- policies and instance profiles first; a role without the tag is kept
-- (or, with field, a CONFLICT naming it)
function M.role(ctx, name, tag, field)
  return M.absent(ctx, { type = "iam:role", label = "IAM role", name = name, id = "RoleName", field = field,
    find = function()
      local g = ctx:try("iam", "GetRole", { RoleName = name })
      return g and g.Role
    end,
    owned = function(r) return M.tag_of(r.Tags) == tag, "it does not carry " .. TAG .. "=" .. tag end,
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

-- bucket(ctx, o): the S3 bucket o.name (hypd's when it carries the tag
-- o.tag), emptied (every version) and deleted. o.ours: the keys hypd put
-- there (the lifecycle scripts); any other object is data, and a bucket that
-- holds data is kept and reported unless o.force. o.field: a bucket the
-- caller named that is not hypd's is a CONFLICT.
function M.bucket(ctx, o)
  local s3 = require "_s3"
  local region
  return M.absent(ctx, { type = "s3:bucket", label = "S3 bucket", name = o.name, id = "Name", field = o.field,
    gone = { "NoSuchBucket" },
    find = function()
      local h = s3.head(ctx, o.name)
      if h then
        region = h.Region
        h.Tags = s3.tags(ctx, o.name, h.Region)
      end
      return h
    end,
    owned = function(b) return b.Tags[TAG] == o.tag, "it does not carry " .. TAG .. "=" .. o.tag end,
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

return M
