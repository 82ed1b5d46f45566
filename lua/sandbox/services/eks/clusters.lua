-- EKS clusters: CreateCluster, DescribeCluster, ListClusters, DeleteCluster,
-- UpdateClusterConfig, DescribeUpdate and ListUpdates (of a cluster, an
-- add-on or a node group). Records: "cluster" (id name) and "update" (id "<cluster>/<updateId>").
local D = require "sandbox.services.eks.deps"
local json = require "hypd.json"

local M = { operations = {}, transitions = {} }
local ops, tr = M.operations, M.transitions

M.VERSIONS = { "1.28", "1.29", "1.30", "1.31", "1.32", "1.33", "1.34" }
M.DEFAULT_VERSION = "1.34"
local PLATFORM = { ["1.28"] = "eks.45", ["1.29"] = "eks.38", ["1.30"] = "eks.31", ["1.31"] = "eks.27",
  ["1.32"] = "eks.18", ["1.33"] = "eks.10", ["1.34"] = "eks.4" }
local MODES = { CONFIG_MAP = 1, API_AND_CONFIG_MAP = 2, API = 3 }
local LOG_TYPES = { "api", "audit", "authenticator", "controllerManager", "scheduler" }

function M.not_found(ctx, name)
  ctx.error("ResourceNotFoundException", "No cluster found for name: " .. tostring(name) .. ".", 404)
end

-- get(ctx, name) -> the cluster record or ResourceNotFoundException
function M.get(ctx, name)
  local c = ctx.state:get("cluster", name)
  if not c then M.not_found(ctx, name) end
  return c
end

-- principal_arn(ctx) -> the IAM ARN EKS maps the caller to (an assumed-role
-- session maps to its role)
function M.principal_arn(ctx)
  local arn = ctx.principal and ctx.principal.arn or ""
  local acct, role = arn:match("^arn:aws:sts::(%d+):assumed%-role/([^/]+)/")
  if acct then return string.format("arn:aws:iam::%s:role/%s", acct, role) end
  return arn
end

local function bad(ctx, msg) ctx.error("InvalidParameterException", msg) end

local function view(c)
  local out = D.copy(c)
  out.deleting_at = nil
  return out
end

function ops.CreateCluster(ctx, input)
  local name = input.name
  if type(name) ~= "string" or not name:match("^[%w][%w_%-]*$") or #name > 100 then
    bad(ctx, "The cluster name must start with an alphanumeric character, contain only alphanumeric characters, " ..
      "hyphens and underscores, and be at most 100 characters.")
  end
  local existing = ctx.state:get("cluster", name)
  if existing and input.clientRequestToken and existing.clientRequestToken == input.clientRequestToken then
    return { cluster = view(existing) } -- a retry of the same request
  end
  if existing then
    ctx.error("ResourceInUseException", "Cluster already exists with name: " .. name, 409)
  end
  local version = input.version or M.DEFAULT_VERSION
  if not PLATFORM[version] then
    bad(ctx, "unsupported Kubernetes version " .. tostring(version))
  end
  local role = D.role(ctx, input.roleArn)
  if not role or not require("sandbox.policy_trust").service(ctx, role, "eks.amazonaws.com",
      ctx:arn("cluster/" .. name)) then
    bad(ctx, "Role with arn: " .. tostring(input.roleArn) .. ", does not exist or is not assumable by EKS.")
  end
  local vpc_in = input.resourcesVpcConfig or {}
  local subnets = vpc_in.subnetIds or {}
  local azs, nazs, vpc = {}, 0, nil
  for _, id in ipairs(subnets) do
    local s = D.subnet(ctx, id)
    if not s then bad(ctx, "The subnet ID '" .. tostring(id) .. "' does not exist") end
    if vpc and s.vpc ~= vpc then bad(ctx, "Subnets must belong to the same VPC.") end
    vpc = s.vpc
    if s.az and not azs[s.az] then azs[s.az], nazs = true, nazs + 1 end
  end
  if nazs < 2 then bad(ctx, "Subnets specified must be in at least two different AZs") end
  for _, id in ipairs(vpc_in.securityGroupIds or {}) do
    if not D.security_group(ctx, id) then
      bad(ctx, "The security group '" .. tostring(id) .. "' does not exist")
    end
  end
  local access = input.accessConfig or {}
  local mode = access.authenticationMode or "CONFIG_MAP"
  if not MODES[mode] then
    bad(ctx, "Unsupported authentication mode: " .. tostring(mode) .. ". Valid values: API, API_AND_CONFIG_MAP, CONFIG_MAP")
  end
  local bootstrap = access.bootstrapClusterCreatorAdminPermissions ~= false
  local kn = input.kubernetesNetworkConfig or {}
  local enabled = json.array()
  for _, setup in ipairs((input.logging or {}).clusterLogging or {}) do
    if setup.enabled then
      for _, t in ipairs(setup.types or {}) do enabled[#enabled + 1] = t end
    end
  end
  local disabled = json.array()
  for _, t in ipairs(LOG_TYPES) do
    local on = false
    for _, e in ipairs(enabled) do on = on or e == t end
    if not on then disabled[#disabled + 1] = t end
  end
  local logging = json.array()
  if #enabled > 0 then logging[#logging + 1] = { types = enabled, enabled = true } end
  if #disabled > 0 then logging[#logging + 1] = { types = disabled, enabled = false } end
  local c = {
    name = name, arn = ctx:arn("cluster/" .. name), createdAt = ctx.now(), version = version,
    roleArn = input.roleArn,
    resourcesVpcConfig = {
      subnetIds = D.list(subnets),
      securityGroupIds = D.list(vpc_in.securityGroupIds or {}),
      clusterSecurityGroupId = require("sandbox.services.ec2.security_groups").eks_cluster_group(ctx, vpc, name,
        ctx.now()), vpcId = vpc,
      endpointPublicAccess = vpc_in.endpointPublicAccess ~= false,
      endpointPrivateAccess = vpc_in.endpointPrivateAccess == true,
      publicAccessCidrs = D.list(vpc_in.publicAccessCidrs or { "0.0.0.0/0" }),
    },
    kubernetesNetworkConfig = { serviceIpv4Cidr = kn.serviceIpv4Cidr or "172.20.0.0/16",
      ipFamily = kn.ipFamily or "ipv4", elasticLoadBalancing = { enabled = false } },
    logging = { clusterLogging = logging },
    identity = { oidc = { issuer = string.format("https://oidc.eks.%s.amazonaws.com/id/%s", ctx.region,
      ctx.hex(32):upper()) } },
    status = "CREATING",
    certificateAuthority = json.object(), -- the endpoint and the CA come when it is ACTIVE
    clientRequestToken = input.clientRequestToken,
    platformVersion = PLATFORM[version],
    tags = input.tags or json.object(),
    id = D.uuid(ctx),
    health = { issues = json.array() },
    accessConfig = { bootstrapClusterCreatorAdminPermissions = bootstrap, authenticationMode = mode },
    upgradePolicy = { supportType = (input.upgradePolicy or {}).supportType or "EXTENDED" },
    deletionProtection = input.deletionProtection == true,
  }
  ctx.state:put("cluster", name, c)
  if bootstrap and mode ~= "CONFIG_MAP" then
    require("sandbox.services.eks.access").bootstrap(ctx, c, M.principal_arn(ctx))
  end
  ctx:later(D.between(480, 720), "cluster_active", { name = name })
  ctx.target = name
  return { cluster = view(c) }
end

function tr.cluster_active(ctx, args)
  local c = ctx.state:get("cluster", args.name)
  local issue = c and c.status == "CREATING" and require("sandbox.faults_nodes").eks(c.name)
  if issue then -- an eks_failure fault (sandbox.faults_nodes): the creation fails with its health issue
    c.status, c.health = "FAILED", { issues = { { code = issue.code, message = issue.message,
      resourceIds = json.array() } } }
    ctx.state:put("cluster", c.name, c)
    return
  end
  if c and c.status == "CREATING" then
    -- its Kubernetes API starts serving (sandbox.k8s)
    c.endpoint, c.certificateAuthority.data = require("sandbox.k8s").serve(ctx.region, c)
    c.status = "ACTIVE"
    ctx.state:put("cluster", c.name, c)
  end
end

function ops.DescribeCluster(ctx, input)
  return { cluster = view(M.get(ctx, input.name)) }
end

function ops.ListClusters(ctx, input)
  local names = json.array()
  for _, c in ipairs(ctx.state:list("cluster")) do names[#names + 1] = c.name end
  local page, nxt = D.page(ctx, names, input.maxResults, input.nextToken, 100, "InvalidParameterException")
  return { clusters = page, nextToken = nxt }
end

function ops.DeleteCluster(ctx, input)
  local c = M.get(ctx, input.name)
  if c.deletionProtection then
    ctx.error("InvalidRequestException", "Cluster " .. c.name .. " has deletion protection enabled.")
  end
  if c.status == "CREATING" or c.status == "UPDATING" then
    ctx.error("ResourceInUseException", "Cluster " .. c.name .. " is currently " .. c.status ..
      " and cannot be deleted.", 409)
  end
  if require("sandbox.services.eks.nodegroups").any(ctx, c.name) then
    ctx.error("ResourceInUseException", "Cluster has nodegroups attached", 409)
  end
  if c.status ~= "DELETING" then
    c.status = "DELETING"
    ctx.state:put("cluster", c.name, c)
    ctx:later(D.between(180, 420), "cluster_deleted", { name = c.name })
  end
  ctx.target = c.name
  return { cluster = view(c) }
end

-- everything that belongs to a cluster goes with it
function tr.cluster_deleted(ctx, args)
  local name = args.name
  for _, kind in ipairs { "addon", "access_entry", "pod_identity", "update" } do
    for _, r in ipairs(ctx.state:list(kind)) do
      if r.clusterName == name then ctx.state:delete(kind, r.key) end
    end
  end
  require("sandbox.services.eks.nodegroups").forget(ctx, name)
  local c = ctx.state:get("cluster", name)
  if c then require("sandbox.services.ec2.managed_enis").released(ctx, c) end -- its interfaces linger
  ctx.state:delete("cluster", name)
  require("sandbox.k8s").stop(ctx.region, name, true)
end

-- a deleted cluster's network interfaces are released (ec2.managed_enis)
function tr.enis_released(ctx, args)
  require("sandbox.services.ec2.managed_enis").forget(ctx, args.key)
end

-- new_update(ctx, cluster, type, params [, addon]) -> the stored update
function M.new_update(ctx, cluster, utype, params, addon, token)
  local u = { id = D.uuid(ctx), status = "InProgress", type = utype, params = params,
    createdAt = ctx.now(), errors = json.array(), clusterName = cluster, addonName = addon, token = token }
  u.key = cluster .. "/" .. u.id
  ctx.state:put("update", u.key, u)
  return u
end

-- retried(ctx, cluster, token [, addon]) -> the update an earlier request
-- with this client token started, or nil
function M.retried(ctx, cluster, token, addon)
  if not token then return nil end
  for _, u in ipairs(ctx.state:list("update")) do
    if u.clusterName == cluster and u.token == token and u.addonName == addon then return u end
  end
end

function M.update_view(u)
  return { id = u.id, status = u.status, type = u.type, params = u.params, createdAt = u.createdAt,
    errors = u.errors }
end

function ops.UpdateClusterConfig(ctx, input)
  local c = M.get(ctx, input.name)
  ctx.target = c.name
  local again = M.retried(ctx, c.name, input.clientRequestToken)
  if again then return { update = M.update_view(again) } end
  if c.status ~= "ACTIVE" then
    ctx.error("ResourceInUseException", "Cluster " .. c.name .. " is in " .. c.status ..
      " state; an update requires ACTIVE.", 409)
  end
  local params, utype, change = json.array(), nil, {}
  local mode = input.accessConfig and input.accessConfig.authenticationMode
  if mode then
    local from = c.accessConfig.authenticationMode
    if not MODES[mode] then bad(ctx, "Unsupported authentication mode: " .. tostring(mode)) end
    if mode == from then bad(ctx, "No changes needed") end
    if MODES[mode] < MODES[from] then
      bad(ctx, "Unsupported authentication mode update from " .. from .. " to " .. mode)
    end
    utype, change.mode = "AccessConfigUpdate", mode
    params[#params + 1] = { type = "AuthenticationMode", value = mode }
  elseif input.logging then
    utype, change.logging = "LoggingUpdate", input.logging
    params[#params + 1] = { type = "ClusterLogging", value = json.encode(input.logging) }
  elseif input.resourcesVpcConfig then
    local v = input.resourcesVpcConfig
    utype, change.vpc = "EndpointAccessUpdate", v
    if v.endpointPublicAccess ~= nil then
      params[#params + 1] = { type = "EndpointPublicAccess", value = tostring(v.endpointPublicAccess) }
    end
    if v.endpointPrivateAccess ~= nil then
      params[#params + 1] = { type = "EndpointPrivateAccess", value = tostring(v.endpointPrivateAccess) }
    end
  elseif input.deletionProtection ~= nil then
    utype, change.protect = "DeletionProtectionUpdate", input.deletionProtection
    params[#params + 1] = { type = "DeletionProtection", value = tostring(input.deletionProtection) }
  else
    bad(ctx, "No changes needed")
  end
  local u = M.new_update(ctx, c.name, utype, params, nil, input.clientRequestToken)
  c.status = "UPDATING"
  ctx.state:put("cluster", c.name, c)
  ctx:later(D.between(60, 180), "cluster_updated", { name = c.name, key = u.key, change = change })
  return { update = M.update_view(u) }
end

function tr.cluster_updated(ctx, args)
  local c = ctx.state:get("cluster", args.name)
  local u = ctx.state:get("update", args.key)
  if not c then return end
  local ch = args.change or {}
  if ch.mode then c.accessConfig.authenticationMode = ch.mode end
  if ch.logging then c.logging = ch.logging end
  if ch.vpc then
    if ch.vpc.endpointPublicAccess ~= nil then c.resourcesVpcConfig.endpointPublicAccess = ch.vpc.endpointPublicAccess end
    if ch.vpc.endpointPrivateAccess ~= nil then c.resourcesVpcConfig.endpointPrivateAccess = ch.vpc.endpointPrivateAccess end
  end
  if ch.protect ~= nil then c.deletionProtection = ch.protect end
  if c.status == "UPDATING" then c.status = "ACTIVE" end
  ctx.state:put("cluster", c.name, c)
  if u then
    u.status = "Successful"
    ctx.state:put("update", u.key, u)
  end
end

function ops.DescribeUpdate(ctx, input)
  M.get(ctx, input.name)
  local u = ctx.state:get("update", input.name .. "/" .. tostring(input.updateId))
  if not u or (input.addonName and u.addonName ~= input.addonName) or u.nodegroupName ~= input.nodegroupName then
    ctx.error("ResourceNotFoundException", "No update found for ID: " .. tostring(input.updateId) .. ".", 404)
  end
  return { update = M.update_view(u) }
end

-- ListUpdates: the ids of the updates of a cluster, or of one of its node
-- groups or add-ons when named, oldest first, paged as EKS pages
function ops.ListUpdates(ctx, input)
  M.get(ctx, input.name)
  if input.nodegroupName then
    D.child(ctx, "nodegroup", input.name, input.nodegroupName,
      "No node group found for name: " .. tostring(input.nodegroupName) .. ".")
  end
  if input.addonName then
    D.child(ctx, "addon", input.name, input.addonName,
      "No addon: " .. tostring(input.addonName) .. " found in cluster: " .. tostring(input.name))
  end
  local mine = {}
  for _, u in ipairs(ctx.state:list("update")) do
    if u.clusterName == input.name and u.nodegroupName == input.nodegroupName and u.addonName == input.addonName then
      mine[#mine + 1] = u
    end
  end
  table.sort(mine, function(a, b)
    if a.createdAt ~= b.createdAt then return a.createdAt < b.createdAt end
    return a.id < b.id
  end)
  local ids = {}
  for i, u in ipairs(mine) do ids[i] = u.id end
  local page, nxt = D.page(ctx, ids, input.maxResults, input.nextToken, 100, "InvalidParameterException")
  return { updateIds = page, nextToken = nxt }
end

return M
