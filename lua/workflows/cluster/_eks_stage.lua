-- cluster/_eks_stage: stage 1 of provisioning, the staged steps of
-- cluster_create_eks. For one cluster tag in one region:
--
--   network       VPC, subnets, gateways, routes, security group (eks_network)
--   iam           role hypd-<tag>-eks-cluster-role with AmazonEKSClusterPolicy
--   cluster       EKS cluster hypd-<tag> (authentication mode API) in the
--                 private subnets
--   access        the caller as cluster admin (an access entry with
--                 AmazonEKSClusterAdminPolicy)
--   wait_active   polls until the cluster is ACTIVE; sets ctx.state.result
--
-- AWS APIs directly, no CloudFormation. Each step reads before it writes
-- and is idempotent: a re-run creates nothing, and a run whose state was
-- lost finds everything again by name and tag (hypd:cluster-tag=<tag>).
-- The module is data for the tool (cluster_create_eks): params, target,
-- steps, and status, the live view for cluster_get_creation_status.
local errors = hypd.errors
local json = hypd.json
local net = require "cluster._eks_network"
local P = require "_params"

local M = {}

M.VERSIONS = { "1.28", "1.29", "1.30", "1.31", "1.32", "1.33", "1.34" }
M.ACTIVE_POLL, M.ACTIVE_LIMIT = 30, 45 * 60    -- seconds between EKS checks; give up after
M.ROLE_RETRIES, M.ROLE_RETRY_WAIT = 6, 10      -- CreateCluster before a new role is visible to EKS

M.params = {
  cluster_tag = P.with(P.cluster_tag, { required = true, decision = true, fixed = true,
    description = "Short lowercase name of this cluster (3 to 32 characters: a-z, 0-9, '-'). It names every " ..
      "resource: EKS cluster hypd-<tag>, VPC hypd-<tag>-vpc, subnets hypd-<tag>-public-<az> and " ..
      "hypd-<tag>-private-<az>, NAT gateway hypd-<tag>-nat, security group hypd-<tag>-cluster, IAM role " ..
      "hypd-<tag>-eks-cluster-role; all are tagged hypd:cluster-tag=<tag>. Ask the person; never invent it." }),
  region = P.region,
  kubernetes_version = { type = "string", enum = M.VERSIONS, default = "1.34",
    description = "Kubernetes version of the EKS control plane (HyperPod supports 1.28 to 1.34)." },
  vpc_cidr = { type = "string", default = "10.192.0.0/16",
    pattern = "^((25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)\\.){3}(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)/(1[6-9]|2[0-4])$",
    pattern_help = "an IPv4 CIDR from /16 to /24, like 10.192.0.0/16",
    description = "IPv4 CIDR of the new VPC, /16 to /24. Four subnets of a sixteenth each are carved from it " ..
      "(a /16 gives /20s); the rest stays free for HyperPod compute subnets." },
}

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

local function partition(arn) return tostring(arn):match("^arn:([^:]+):") or "aws" end

-- admin_principal(caller_arn) -> the IAM ARN an access entry names for the
-- caller: an assumed-role session (arn:aws:sts::123:assumed-role/R/s) stands
-- for its role (arn:aws:iam::123:role/R); users and roles stand for themselves
function M.admin_principal(arn)
  local part, acct, role = tostring(arn):match("^arn:([^:]+):sts::(%d+):assumed%-role/([^/]+)/")
  if part then return string.format("arn:%s:iam::%s:role/%s", part, acct, role) end
  return arn
end

-- describe_cluster(ctx_or_try, name) -> the cluster or nil when there is none
local function describe_cluster(ctx, name)
  local out, err = ctx:try("eks", "DescribeCluster", { name = name })
  if out then return out.cluster end
  if err.code == "ResourceNotFoundException" then return nil end
  error(err, 0)
end

-- the cluster must be hypd's for this tag: a same-named cluster made by
-- someone else, or for another tag, is never adopted
local function check_owner(c, tag, region)
  local have = (c.tags or {})[net.TAG_KEY]
  if have ~= tag then
    errors.raise("CONFLICT", string.format("an EKS cluster named %s already exists in %s and is not hypd's " ..
      "cluster for tag '%s' (its %s tag is %s). Choose another cluster_tag, or delete or rename that cluster.",
      c.name, region, tag, net.TAG_KEY, have and ("'" .. have .. "'") or "missing"),
      { cluster = c.name, field = "cluster_tag" })
  end
end

-- steps ---------------------------------------------------------------------------

local function iam(ctx)
  local tag, st = ctx.params.cluster_tag, ctx.state
  local name = net.name(tag, "eks-cluster-role")
  local role
  local out, err = ctx:try("iam", "GetRole", { RoleName = name })
  if out then
    role = out.Role
  elseif err.code ~= "NoSuchEntity" then
    error(err, 0)
  else
    ctx:phase("creating IAM role " .. name)
    out, err = ctx:try("iam", "CreateRole", { RoleName = name, AssumeRolePolicyDocument = TRUST,
      Description = "hypd " .. tag .. ": the EKS control plane of cluster " .. net.name(tag),
      Tags = net.tag_list(tag, name) })
    if out then
      role = out.Role
      role.Tags = role.Tags or net.tag_list(tag, name) -- made just now, with them
    elseif err.code == "EntityAlreadyExists" then -- made meanwhile
      role = net.settled(ctx, "iam", "GetRole", { RoleName = name }).Role
    else
      error(err, 0)
    end
  end
  -- hypd's roles are tagged by CreateRole itself: an untagged one is someone else's
  local owner = net.tag_value(role.Tags, net.TAG_KEY)
  if owner ~= tag then
    errors.raise("CONFLICT", string.format("IAM role %s exists and is not hypd's role for tag '%s' (its %s tag " ..
      "is %s). Choose another cluster_tag, or delete that role.", name, tag, net.TAG_KEY,
      owner and ("'" .. owner .. "'") or "missing"), { role = name, field = "cluster_tag" })
  end
  st.cluster_role_name, st.cluster_role_arn = name, role.Arn
  ctx:save()
  local policy = "arn:" .. partition(role.Arn) .. ":iam::aws:policy/AmazonEKSClusterPolicy"
  local params = { RoleName = name }
  repeat
    local page = net.settled(ctx, "iam", "ListAttachedRolePolicies", params)
    for _, p in ipairs(page.AttachedPolicies or {}) do
      if p.PolicyArn == policy then return end
    end
    params.Marker = page.IsTruncated and page.Marker or nil
  until not params.Marker
  ctx:phase("attaching AmazonEKSClusterPolicy to " .. name)
  net.settled(ctx, "iam", "AttachRolePolicy", { RoleName = name, PolicyArn = policy })
end

local function cluster(ctx)
  local p, st = ctx.params, ctx.state
  local name = net.name(p.cluster_tag)
  local c = describe_cluster(ctx, name)
  if not c then
    local req = {
      name = name, version = p.kubernetes_version, roleArn = st.cluster_role_arn,
      resourcesVpcConfig = { subnetIds = st.private_subnet_ids, securityGroupIds = { st.security_group_id },
        endpointPublicAccess = true, endpointPrivateAccess = true },
      accessConfig = { authenticationMode = "API", bootstrapClusterCreatorAdminPermissions = true },
      tags = { [net.TAG_KEY] = p.cluster_tag, Name = name },
      clientRequestToken = ("hypd-" .. ctx.op_id):sub(1, 64), -- a retried create is the same create
    }
    if not (req.roleArn and req.resourcesVpcConfig.subnetIds and st.security_group_id) then
      errors.raise("STATE", "the cluster step needs the network and iam steps' results (role, subnets, group)")
    end
    ctx:phase("creating EKS cluster " .. name .. " (Kubernetes " .. p.kubernetes_version .. ")")
    for attempt = 1, M.ROLE_RETRIES do
      local out, err = ctx:try("eks", "CreateCluster", req)
      if out then
        c = out.cluster
        break
      end
      if err.code == "ResourceInUseException" then -- made meanwhile, by us or someone else
        c = describe_cluster(ctx, name)
        if not c then error(err, 0) end
        break
      end
      -- IAM is eventually consistent: EKS may not see a new role for some seconds
      local role_unseen = err.code == "InvalidParameterException" and tostring(err.message):find("[Rr]ole")
      if not role_unseen or attempt == M.ROLE_RETRIES then error(err, 0) end
      ctx:progress("EKS does not see role " .. st.cluster_role_arn .. " yet; retrying")
      ctx:sleep(M.ROLE_RETRY_WAIT)
    end
  end
  check_owner(c, p.cluster_tag, ctx.region)
  if c.status == "DELETING" then
    errors.raise("CONFLICT", "EKS cluster " .. name .. " is being deleted; wait until it is gone, then call again",
      { cluster = name })
  end
  if c.version and c.version ~= p.kubernetes_version then
    ctx:progress("EKS cluster " .. name .. " exists with Kubernetes " .. c.version .. "; kept as it is")
  end
  st.cluster_name, st.cluster_arn = c.name, c.arn
  st.cluster_created_at = st.cluster_created_at or hypd.now()
  ctx:save()
end

-- grant_admin(ctx) -> true when the caller has an access entry with the
-- cluster-admin policy (made if missing), "skipped" when the caller is no
-- IAM user or role. Raises on AWS errors.
local function grant_admin(ctx)
  local st = ctx.state
  local name = st.cluster_name
  local caller = ctx:call("sts", "GetCallerIdentity", {}).Arn
  local principal = M.admin_principal(caller)
  st.admin_principal_arn = principal
  if not principal:match("^arn:[^:]+:iam::%d+:role/") and not principal:match("^arn:[^:]+:iam::%d+:user/") then
    ctx:progress("the caller " .. caller .. " is no IAM user or role; no access entry made for it")
    return "skipped"
  end
  local _, err = ctx:try("eks", "DescribeAccessEntry", { clusterName = name, principalArn = principal })
  if err and err.code ~= "ResourceNotFoundException" then error(err, 0) end
  if err then
    ctx:phase("creating access entry for " .. principal)
    local _, cerr = ctx:try("eks", "CreateAccessEntry", { clusterName = name, principalArn = principal,
      type = "STANDARD", tags = { [net.TAG_KEY] = ctx.params.cluster_tag } })
    if cerr and cerr.code ~= "ResourceInUseException" then error(cerr, 0) end -- in use: there already
  end
  local policy = "arn:" .. partition(st.cluster_arn) .. ":eks::aws:cluster-access-policy/" .. ADMIN_POLICY
  local pols = ctx:call("eks", "ListAssociatedAccessPolicies", { clusterName = name, principalArn = principal })
  for _, a in ipairs(pols.associatedAccessPolicies or {}) do
    if a.policyArn == policy and a.accessScope and a.accessScope.type == "cluster" then return true end
  end
  ctx:phase("associating " .. ADMIN_POLICY .. " with " .. principal)
  ctx:call("eks", "AssociateAccessPolicy", { clusterName = name, principalArn = principal, policyArn = policy,
    accessScope = { type = "cluster" } })
  return true
end

local function access(ctx)
  local st = ctx.state
  local ok, r = pcall(grant_admin, ctx)
  if ok then
    st.admin_access = r == "skipped" and "skipped" or "granted"
  else
    -- EKS may refuse access entries before the cluster is ACTIVE: then
    -- wait_active grants it once the cluster is up (and raises if it fails)
    local c = describe_cluster(ctx, st.cluster_name)
    if not c or c.status == "ACTIVE" then error(r, 0) end
    st.admin_access = "pending"
    ctx:progress("cluster admin access waits for ACTIVE (" .. tostring(type(r) == "table" and r.message or r) .. ")")
  end
  ctx:save()
end

local function health(c)
  local out = json.array()
  for _, i in ipairs((c.health or {}).issues or {}) do
    out[#out + 1] = (i.code and (i.code .. ": ") or "") .. tostring(i.message)
  end
  return out
end

local function wait_active(ctx)
  local p, st = ctx.params, ctx.state
  local name = st.cluster_name or net.name(p.cluster_tag)
  ctx:phase("waiting for EKS cluster ACTIVE")
  local since = st.cluster_created_at or hypd.now()
  local c
  while true do
    c = describe_cluster(ctx, name)
    if not c then
      errors.raise("NOT_FOUND", "EKS cluster " .. name .. " is gone; call cluster_create_eks again",
        { cluster = name })
    end
    if c.status == "ACTIVE" then break end
    if c.status == "FAILED" then
      local issues = health(c)
      errors.raise("FAILED", "EKS cluster " .. name .. " failed to create" ..
        (#issues > 0 and (": " .. table.concat(issues, "; ")) or " (no health issues reported)") ..
        ". Delete it, then call cluster_create_eks again.", { cluster = name, issues = issues })
    end
    if c.status == "DELETING" then
      errors.raise("CONFLICT", "EKS cluster " .. name .. " is being deleted", { cluster = name })
    end
    local waited = hypd.now() - since
    if waited > M.ACTIVE_LIMIT then
      errors.raise("TIMEOUT", "EKS cluster " .. name .. " still " .. tostring(c.status) .. " after " ..
        net.elapsed(waited), { cluster = name })
    end
    ctx:progress("EKS cluster " .. name .. " " .. tostring(c.status) .. " (" .. net.elapsed(waited) .. ")")
    ctx:sleep(M.ACTIVE_POLL)
  end
  if st.admin_access ~= "granted" and st.admin_access ~= "skipped" then
    st.cluster_arn = st.cluster_arn or c.arn
    st.admin_access = grant_admin(ctx) == "skipped" and "skipped" or "granted"
  end
  st.result = {
    cluster_name = c.name, cluster_arn = c.arn, endpoint = c.endpoint, version = c.version,
    vpc_id = st.vpc_id, private_subnet_ids = st.private_subnet_ids, public_subnet_ids = st.public_subnet_ids,
    security_group_id = st.security_group_id, cluster_role_arn = st.cluster_role_arn,
    region = st.region or ctx.region, cluster_tag = p.cluster_tag,
  }
  -- the first cluster becomes the active one, so tools that default to
  -- the active cluster answer for it at once (cluster_switch changes it)
  if st.made_active == nil then
    st.made_active = hypd.clusters.active() == nil
    if st.made_active then hypd.clusters.set_active { name = c.name, region = st.result.region, arn = c.arn } end
  end
  st.result.active = st.made_active or (hypd.clusters.active() or {}).name == c.name
  ctx:save()
end

M.steps = {
  { name = "network", run = net.run },
  { name = "iam", run = iam },
  { name = "cluster", run = cluster },
  { name = "access", run = access },
  { name = "wait_active", run = wait_active },
}

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
  local out = { cluster_tag = tag, region = o.region, cluster_name = st.cluster_name or (tag and net.name(tag)),
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
      if (c.tags or {})[net.TAG_KEY] ~= tag then out.eks_owner = "not hypd's cluster for this tag" end
    elseif err.code == "ResourceNotFoundException" then
      out.eks_status = "NOT_CREATED"
    else
      out.eks_status = "UNKNOWN"
      note(err)
    end
    local tagf = { Name = "tag:" .. net.TAG_KEY, Values = { tag } }
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
