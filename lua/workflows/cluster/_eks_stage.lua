-- cluster/_eks_stage: stage 1 of provisioning, what the cluster's steps
-- of cluster_create_eks call (the network's: cluster/_eks_network). For
-- one cluster tag in one region:
--
--   iam           role hypd-<tag>-eks-cluster-role (owned: its
--                 hypd:cluster-tag tag) with AmazonEKSClusterPolicy attached
--   cluster       EKS cluster hypd-<tag> (authentication mode API) in the
--                 private subnets; CreateCluster's clientRequestToken comes
--                 from the operation id, and it is tried again while EKS
--                 does not see the new role yet
--   wait_active   polls until the cluster is ACTIVE; sets ctx.state.result
--   access        the caller as cluster admin (an access entry with
--                 AmazonEKSClusterAdminPolicy); the first cluster becomes
--                 the active one
--
-- AWS APIs directly, no CloudFormation. Every resource is declared with
-- ctx:ensure (hypd.tool.kit) and every wait is a ctx:poll: a re-run creates
-- nothing, a run whose state was lost finds everything again by name and
-- tag (hypd:cluster-tag=<tag>), and plan = true lists what would be made.
-- The module is data and functions for the tool (cluster_create_eks):
-- versions, target, the steps' runs, and status, the live view for
-- cluster_get_creation_status.
local Names = require "_names"
local errors = hypd.errors
local json = hypd.json
local network = require "_network"
local roles = require "_iam"

local M = {}

M.VERSIONS = { "1.28", "1.29", "1.30", "1.31", "1.32", "1.33", "1.34" }
M.ACTIVE_POLL, M.ACTIVE_LIMIT = 30, 45 * 60    -- seconds between EKS checks; give up after
M.ROLE_RETRIES, M.ROLE_RETRY_WAIT = 6, 10      -- CreateCluster before a new role is visible to EKS


function M.target(p)
  local region = p.region
  if not region then
    local ok, r = pcall(hypd.aws.region, {})
    region = ok and r or "default"
  end
  return "eks/" .. region .. "/" .. p.cluster_tag
end

local TRUST = json.encode { Version = "2012-10-17", Statement = { { Effect = "Allow",
  Principal = { Service = "eks.amazonaws.com" }, Action = { "sts:AssumeRole", "sts:TagSession" } } } }
local ADMIN_POLICY = "AmazonEKSClusterAdminPolicy"

local partition = roles.partition

-- admin_principal(caller_arn) -> the IAM ARN an access entry names for the
-- caller: an assumed-role session (arn:aws:sts::123:assumed-role/R/s) stands
-- for its role (arn:aws:iam::123:role/R); users and roles stand for themselves
function M.admin_principal(arn)
  local part, acct, role = tostring(arn):match("^arn:([^:]+):sts::(%d+):assumed%-role/([^/]+)/")
  if part then return string.format("arn:%s:iam::%s:role/%s", part, acct, role) end
  return arn
end

-- get(ctx, absent, service, operation, params) -> the result, or nil when
-- AWS answers the error code absent (there is no such thing)
local get = roles.get

-- describe_cluster(ctx, name) -> the cluster or nil when there is none
local function describe_cluster(ctx, name)
  return (get(ctx, "ResourceNotFoundException", "eks", "DescribeCluster", { name = name }) or {}).cluster
end

local function health(c)
  local out = json.array()
  for _, i in ipairs((c.health or {}).issues or {}) do
    out[#out + 1] = (i.code and (i.code .. ": ") or "") .. tostring(i.message)
  end
  return out
end

-- steps ---------------------------------------------------------------------------

function M.iam(ctx)
  local tag, st = ctx.params.cluster_tag, ctx.state
  local name = Names.eks(tag, "eks-cluster-role")
  local role = roles.role(ctx, { name = name, tag = tag, key = "cluster_role_arn", trust = TRUST,
    description = "hypd " .. tag .. ": the EKS control plane of cluster " .. Names.eks(tag) })
  st.cluster_role_name = name
  roles.attach(ctx, role, "arn:" .. partition(role.Arn) .. ":iam::aws:policy/AmazonEKSClusterPolicy",
    "AmazonEKSClusterPolicy")
end

function M.cluster(ctx)
  local p, st = ctx.params, ctx.state
  local tag = p.cluster_tag
  local name = Names.eks(tag)
  local req = {
    name = name, version = p.kubernetes_version, roleArn = st.cluster_role_arn,
    resourcesVpcConfig = { subnetIds = st.private_subnet_ids, securityGroupIds = { st.security_group_id },
      endpointPublicAccess = true, endpointPrivateAccess = true },
    accessConfig = { authenticationMode = "API", bootstrapClusterCreatorAdminPermissions = true },
    tags = { [Names.TAG] = tag, Name = name },
    clientRequestToken = Names.token(ctx.op_id), -- a retried create is the same create
  }
  if not (req.roleArn and st.private_subnet_ids and st.security_group_id) then
    errors.raise("STATE", "the cluster step needs the earlier steps' results (role, subnets, group)")
  end
  local c = ctx:ensure { type = "eks:cluster", label = "EKS cluster", name = name, key = "cluster_arn", id = "arn",
    field = "cluster_tag", exists = "ResourceInUseException", -- made meanwhile, by us or someone else
    owned = network.owned_by(tag, function(x) return x.tags end),
    search = function() return describe_cluster(ctx, name) end,
    fields = { version = req.version, roleArn = req.roleArn, subnetIds = req.resourcesVpcConfig.subnetIds,
      securityGroupIds = req.resourcesVpcConfig.securityGroupIds, authenticationMode = "API" },
    placeholder = function(id) return { name = name, arn = id, version = req.version } end,
    -- IAM is eventually consistent: EKS may not see a new role for some seconds
    retry = function(err)
      if err.code == "InvalidParameterException" and tostring(err.message):find("[Rr]ole") then
        return "EKS does not see role " .. tostring(req.roleArn) .. " yet"
      end
    end,
    retry_every = M.ROLE_RETRY_WAIT, retry_for = (M.ROLE_RETRIES - 1) * M.ROLE_RETRY_WAIT,
    create = function() return ctx:call("eks", "CreateCluster", req).cluster end }
  if c.status == "DELETING" then
    errors.raise("CONFLICT", "EKS cluster " .. name .. " is being deleted; wait until it is gone, then call again",
      { cluster = name })
  end
  if c.version and c.version ~= p.kubernetes_version then
    ctx:progress("EKS cluster " .. name .. " exists with Kubernetes " .. c.version .. "; kept as it is")
  end
  st.cluster_name, st.cluster_arn = c.name, c.arn
  st.cluster_created_at = st.cluster_created_at or hypd.now()
end

function M.wait_active(ctx)
  local st = ctx.state
  local name = st.cluster_name
  local c = ctx:poll { what = "EKS cluster " .. name .. " to be ACTIVE", every = M.ACTIVE_POLL,
    timeout = M.ACTIVE_LIMIT, since = st.cluster_created_at,
    check = function()
      local c = describe_cluster(ctx, name)
      if not c then
        errors.raise("NOT_FOUND", "EKS cluster " .. name .. " is gone; call cluster_create_eks again",
          { cluster = name })
      end
      if c.status == "FAILED" then
        local issues = health(c)
        errors.raise("FAILED", "EKS cluster " .. name .. " failed to create" ..
          (#issues > 0 and (": " .. table.concat(issues, "; ")) or " (no health issues reported)") ..
          ". Delete it, then call cluster_create_eks again.", { cluster = name, issues = issues })
      end
      if c.status == "DELETING" then
        errors.raise("CONFLICT", "EKS cluster " .. name .. " is being deleted", { cluster = name })
      end
      local issues = health(c) -- what EKS reports while it works on it, shown with the wait
      return c.status == "ACTIVE", "EKS cluster " .. name .. " " .. tostring(c.status) ..
        (#issues > 0 and (": " .. table.concat(issues, "; ")) or ""), c
    end }
  if not c then return end -- a plan does not wait
  st.result = {
    cluster_name = c.name, cluster_arn = c.arn, endpoint = c.endpoint, version = c.version,
    vpc_id = st.vpc_id, private_subnet_ids = st.private_subnet_ids, public_subnet_ids = st.public_subnet_ids,
    security_group_id = st.security_group_id, cluster_role_arn = st.cluster_role_arn,
    region = st.region or ctx.region, cluster_tag = ctx.params.cluster_tag,
  }
end

-- access: the caller as cluster admin (an access entry with the
-- cluster-admin policy), once the cluster is ACTIVE (EKS refuses access
-- entries before); "skipped" when the caller is no IAM user or role. Then
-- the first cluster becomes the active one.
function M.access(ctx)
  local st = ctx.state
  local name, cluster_arn = st.cluster_name, st.cluster_arn
  local caller = ctx:call("sts", "GetCallerIdentity", {}).Arn
  local principal = M.admin_principal(caller)
  st.admin_principal_arn = principal
  if not principal:match("^arn:[^:]+:iam::%d+:role/") and not principal:match("^arn:[^:]+:iam::%d+:user/") then
    ctx:progress("the caller " .. caller .. " is no IAM user or role; no access entry made for it")
    st.admin_access = "skipped"
  elseif ctx.plan and hypd.kit.is_planned(cluster_arn) then
    -- a cluster this plan creates: EKS makes the caller's admin entry and
    -- its AmazonEKSClusterAdminPolicy with it (the cluster step asks for
    -- bootstrapClusterCreatorAdminPermissions, and the caller creates it),
    -- so the run sends neither, and a true plan lists neither
    st.admin_access = "granted"
  else
    local who = { clusterName = name, principalArn = principal }
    local entry = ctx:ensure { type = "eks:access-entry", label = "access entry", name = principal .. " on " .. name,
      needs = cluster_arn, id = "accessEntryArn", exists = "ResourceInUseException",
      fields = { clusterName = name, principalArn = principal, type = "STANDARD" },
      search = function()
        return (get(ctx, "ResourceNotFoundException", "eks", "DescribeAccessEntry", who) or {}).accessEntry
      end,
      create = function()
        return ctx:call("eks", "CreateAccessEntry", { clusterName = name, principalArn = principal,
          type = "STANDARD", tags = { [Names.TAG] = ctx.params.cluster_tag } }).accessEntry
      end }
    local policy = "arn:" .. partition(cluster_arn) .. ":eks::aws:cluster-access-policy/" .. ADMIN_POLICY
    local scope = { type = "cluster" }
    ctx:ensure { type = "eks:access-policy-association", label = "access policy association",
      name = ADMIN_POLICY .. " for " .. principal .. " on " .. name, needs = { cluster_arn, entry.accessEntryArn },
      id = "policyArn",
      fields = { clusterName = name, principalArn = principal, policyArn = policy, accessScope = scope },
      search = function()
        for _, a in ipairs(ctx:call("eks", "ListAssociatedAccessPolicies", who).associatedAccessPolicies or {}) do
          if a.policyArn == policy and (a.accessScope or {}).type == "cluster" then return a end
        end
      end,
      create = function()
        ctx:call("eks", "AssociateAccessPolicy", { clusterName = name, principalArn = principal, policyArn = policy,
          accessScope = scope })
        return { policyArn = policy, accessScope = scope }
      end }
    st.admin_access = "granted"
  end
  if ctx.plan then return end
  -- the first cluster becomes the active one, so tools that default to
  -- the active cluster answer for it at once (cluster_switch changes it)
  local r = st.result
  -- what hypd knows of the cluster, for the stages after this one
  hypd.clusters.record { name = r.cluster_name, region = r.region, arn = r.cluster_arn, tag = r.cluster_tag,
    vpc_id = r.vpc_id, private_subnet_ids = r.private_subnet_ids, public_subnet_ids = r.public_subnet_ids,
    security_group_id = r.security_group_id, created = true }
  if st.made_active == nil then
    st.made_active = hypd.clusters.active() == nil
    if st.made_active then hypd.clusters.set_active { name = r.cluster_name, region = r.region, arn = r.cluster_arn } end
  end
  r.active = st.made_active or (hypd.clusters.active() or {}).name == r.cluster_name
end

-- status(record [, opts]) -> the live AWS view of a creation, for
-- cluster_get_creation_status. record: the operation record (record.state,
-- record.params) or a step ctx; opts: AWS call options (endpoint_url,
-- profile); the region is the operation's. Never raises for AWS errors:
-- they are listed in .errors.
function M.status(rec, opts)
  local st, p = rec.state or {}, rec.params or {}
  local o = {}
  for k, v in pairs(opts or {}) do o[k] = v end
  o.region = st.region or p.region or rec.region or o.region
  local function try(service, operation, params)
    if not opts and type(rec.try) == "function" then return rec:try(service, operation, params) end
    return hypd.aws.try(service, operation, params, o)
  end
  local tag = p.cluster_tag or st.cluster_tag
  local out = { cluster_tag = tag, region = o.region, cluster_name = st.cluster_name or (tag and Names.eks(tag)),
    vpc_id = st.vpc_id, public_subnet_ids = st.public_subnet_ids, private_subnet_ids = st.private_subnet_ids,
    security_group_id = st.security_group_id, cluster_role_arn = st.cluster_role_arn,
    nat_gateway_id = st.nat_gateway_id, admin_access = st.admin_access }
  local problems = {}
  local function note(err) problems[#problems + 1] = tostring(err.code) .. ": " .. tostring(err.message) end
  if tag then
    local r, err = try("eks", "DescribeCluster", { name = out.cluster_name })
    if r then
      local c = r.cluster
      out.eks_status, out.version, out.endpoint, out.cluster_arn = c.status, c.version, c.endpoint, c.arn
      out.health_issues = health(c)
      if (c.tags or {})[Names.TAG] ~= tag then out.eks_owner = "not hypd's cluster for this tag" end
    elseif err.code == "ResourceNotFoundException" then
      out.eks_status = "NOT_CREATED"
    else
      out.eks_status = "UNKNOWN"
      note(err)
    end
    local tagf = { Name = "tag:" .. Names.TAG, Values = { tag } }
    if not out.vpc_id then
      local v, verr = try("ec2", "DescribeVpcs", { Filters = { tagf } })
      if v then out.vpc_id = v.Vpcs and v.Vpcs[1] and v.Vpcs[1].VpcId else note(verr) end
    end
    local nat, nerr
    if out.nat_gateway_id then
      nat, nerr = try("ec2", "DescribeNatGateways", { NatGatewayIds = { out.nat_gateway_id } })
    elseif out.vpc_id then
      nat, nerr = try("ec2", "DescribeNatGateways", { Filter = { tagf, { Name = "vpc-id", Values = { out.vpc_id } } } })
    end
    if nat then
      local best
      for _, n in ipairs(nat.NatGateways or {}) do
        if not best or n.State == "available" then best = n end
      end
      out.nat_gateway_id = best and best.NatGatewayId or out.nat_gateway_id
      out.nat_gateway_state = best and best.State or "NOT_CREATED"
    elseif nerr then
      note(nerr)
    else
      out.nat_gateway_state = "NOT_CREATED"
    end
  end
  if #problems > 0 then out.errors = problems end
  return out
end

return M
