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

function M.ec2_sweep(ctx, tag)
  each(ctx, "DescribeVpcEndpoints", "VpcEndpoints", { Filters = tagged(tag) }, function(e)
    if e.State ~= "deleted" then
      ctx:absent { type = "ec2:vpc-endpoint", label = "VPC endpoint", name = named(e, e.VpcEndpointId), id = "VpcEndpointId",
        find = function()
          local r = ctx:call("ec2", "DescribeVpcEndpoints", { VpcEndpointIds = { e.VpcEndpointId } }).VpcEndpoints
          return r and r[1] and r[1].State ~= "deleted" and r[1] or nil
        end,
        delete = function() ctx:call("ec2", "DeleteVpcEndpoints", { VpcEndpointIds = { e.VpcEndpointId } }) end }
    end
  end)
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
  each(ctx, "DescribeRouteTables", "RouteTables", { Filters = tagged(tag) }, function(rt)
    ctx:absent { type = "ec2:route-table", label = "route table", name = named(rt, rt.RouteTableId),
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
  each(ctx, "DescribeSubnets", "Subnets", { Filters = tagged(tag) }, function(sn)
    ctx:absent { type = "ec2:subnet", label = "subnet", name = named(sn, sn.SubnetId), id = "SubnetId",
      retry = draining, retry_for = 15 * 60, retry_every = 15,
      find = function()
        local r = ctx:try("ec2", "DescribeSubnets", { SubnetIds = { sn.SubnetId } })
        return r and r.Subnets and r.Subnets[1]
      end,
      delete = function() ctx:call("ec2", "DeleteSubnet", { SubnetId = sn.SubnetId }) end,
      gone = { "InvalidSubnetID.NotFound" } }
  end)
  each(ctx, "DescribeSecurityGroups", "SecurityGroups", { Filters = tagged(tag) }, function(sg)
    ctx:absent { type = "ec2:security-group", label = "security group", name = sg.GroupName or sg.GroupId,
      id = "GroupId", retry = draining, retry_for = 15 * 60, retry_every = 15,
      find = function()
        local r = ctx:try("ec2", "DescribeSecurityGroups", { GroupIds = { sg.GroupId } })
        return r and r.SecurityGroups and r.SecurityGroups[1]
      end,
      keep = function(cur) if cur.GroupName == "default" then return "the default group goes with its VPC" end end,
      delete = function() ctx:call("ec2", "DeleteSecurityGroup", { GroupId = sg.GroupId }) end,
      gone = { "InvalidGroup.NotFound" } }
  end)
  each(ctx, "DescribeVpcs", "Vpcs", { Filters = tagged(tag) }, function(v)
    ctx:absent { type = "ec2:vpc", label = "VPC", name = named(v, v.VpcId), id = "VpcId",
      retry = draining, retry_for = 15 * 60, retry_every = 15,
      find = function()
        local r = ctx:try("ec2", "DescribeVpcs", { VpcIds = { v.VpcId } })
        return r and r.Vpcs and r.Vpcs[1]
      end,
      keep = function()
        local foreign = {}
        for _, sn in ipairs(ctx:call("ec2", "DescribeSubnets", { Filters = { { Name = "vpc-id",
            Values = { v.VpcId } } } }).Subnets or {}) do
          if tag_of(sn.Tags) ~= tag then foreign[#foreign + 1] = sn.SubnetId end
        end
        if #foreign > 0 then
          return "it holds subnets hypd did not make (" .. table.concat(foreign, ", ") .. ")"
        end
      end,
      delete = function() ctx:call("ec2", "DeleteVpc", { VpcId = v.VpcId }) end,
      gone = { "InvalidVpcID.NotFound" } }
  end)
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
  for _, role in ipairs(roles_of(ctx, tag)) do
    ctx:absent { type = "iam:role", label = "IAM role", name = role.RoleName, id = "RoleName",
      find = function()
        local g = ctx:try("iam", "GetRole", { RoleName = role.RoleName })
        return g and g.Role
      end,
      delete = function()
        for _, p in ipairs(hypd.aws.all("iam", "ListAttachedRolePolicies", { RoleName = role.RoleName },
            ctx:aws_opts())) do
          ctx:call("iam", "DetachRolePolicy", { RoleName = role.RoleName, PolicyArn = p.PolicyArn })
        end
        for _, n in ipairs(hypd.aws.all("iam", "ListRolePolicies", { RoleName = role.RoleName }, ctx:aws_opts())) do
          ctx:call("iam", "DeleteRolePolicy", { RoleName = role.RoleName, PolicyName = n })
        end
        for _, ip in ipairs(hypd.aws.all("iam", "ListInstanceProfilesForRole", { RoleName = role.RoleName },
            ctx:aws_opts())) do
          ctx:call("iam", "RemoveRoleFromInstanceProfile", { RoleName = role.RoleName,
            InstanceProfileName = ip.InstanceProfileName })
        end
        ctx:call("iam", "DeleteRole", { RoleName = role.RoleName })
      end,
      gone = { "NoSuchEntity" } }
  end
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
