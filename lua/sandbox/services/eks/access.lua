-- EKS access entries, access policies and pod identity associations.
-- Records: "access_entry" (id "<cluster>/<principalArn>", with its
-- associated policies inside) and "pod_identity" (id "<cluster>/<a-id>").
local C = require "sandbox.services.eks.clusters"
local D = require "sandbox.services.eks.deps"
local json = require "hypd.json"

local M = { operations = {}, transitions = {} }
local ops = M.operations

local POLICIES = { "AmazonEKSAdminPolicy", "AmazonEKSAdminViewPolicy", "AmazonEKSAutoNodePolicy",
  "AmazonEKSBlockStorageClusterPolicy", "AmazonEKSClusterAdminPolicy", "AmazonEKSComputeClusterPolicy",
  "AmazonEKSEditPolicy", "AmazonEKSHybridPolicy", "AmazonEKSLoadBalancingClusterPolicy",
  "AmazonEKSNetworkingClusterPolicy", "AmazonEKSViewPolicy", "AmazonSagemakerHyperpodClusterPolicy",
  "AmazonSagemakerHyperpodControllerPolicy", "AmazonSagemakerHyperpodSystemNamespacePolicy" }
local POLICY_ARN = "arn:aws:eks::aws:cluster-access-policy/"
local TYPES = { STANDARD = true, EC2_LINUX = true, EC2_WINDOWS = true, FARGATE_LINUX = true, EC2 = true,
  HYBRID_LINUX = true, HYPERPOD_LINUX = true }

local function key(cluster, id) return cluster .. "/" .. id end

-- the cluster, which must accept access entries
local function api_cluster(ctx, name)
  local c = C.get(ctx, name)
  if c.accessConfig.authenticationMode == "CONFIG_MAP" then
    ctx.error("InvalidRequestException", "The cluster's authentication mode must be set to one of " ..
      "[API, API_AND_CONFIG_MAP] to perform this operation.")
  end
  return c
end

local function entry_view(e)
  return { clusterName = e.clusterName, principalArn = e.principalArn, kubernetesGroups = e.kubernetesGroups,
    accessEntryArn = e.accessEntryArn, createdAt = e.createdAt, modifiedAt = e.modifiedAt, tags = e.tags,
    username = e.username, type = e.type }
end

local function new_entry(ctx, c, principal, etype, groups, username, tags)
  local acct, kind, name = principal:match("^arn:aws:iam::(%d+):(%a+)/.-([^/]+)$")
  if not kind or (kind ~= "role" and kind ~= "user") then
    ctx.error("InvalidParameterException", "The specified principalArn is invalid: invalid principal")
  end
  if kind == "role" and not D.role(ctx, principal) then
    ctx.error("InvalidParameterException", "The specified principalArn could not be found. You can view your " ..
      "available IAM principals in the IAM console.")
  end
  if username == nil then
    if etype == "STANDARD" then
      username = kind == "role" and string.format("arn:aws:sts::%s:assumed-role/%s/{{SessionName}}", acct, name)
        or principal
    elseif etype == "HYPERPOD_LINUX" then
      username = "system:node:hyperpod-{{SessionName}}"
    else
      username = "system:node:{{EC2PrivateDNSName}}"
    end
  end
  local now = ctx.now()
  local e = {
    key = key(c.name, principal), clusterName = c.name, principalArn = principal,
    kubernetesGroups = D.list(groups), username = username, type = etype, tags = tags or json.object(),
    accessEntryArn = ctx:arn(string.format("access-entry/%s/%s/%s/%s/%s", c.name, kind, acct, name, D.uuid(ctx))),
    createdAt = now, modifiedAt = now, policies = json.object(),
  }
  ctx.state:put("access_entry", e.key, e)
  return e
end

-- bootstrap(ctx, cluster, principal): the creator's admin entry
function M.bootstrap(ctx, c, principal)
  if not principal:match("^arn:aws:iam::") then return end
  local ok, e = pcall(new_entry, ctx, c, principal, "STANDARD", {}, nil, nil)
  if not ok then return end
  local arn = POLICY_ARN .. "AmazonEKSClusterAdminPolicy"
  e.policies[arn] = { policyArn = arn, accessScope = { type = "cluster", namespaces = json.array() },
    associatedAt = e.createdAt, modifiedAt = e.createdAt }
  ctx.state:put("access_entry", e.key, e)
end

local function get_entry(ctx, cluster, principal)
  local c = api_cluster(ctx, cluster)
  local e = ctx.state:get("access_entry", key(c.name, tostring(principal)))
  if not e then
    ctx.error("ResourceNotFoundException", "The specified access entry resource can't be found.", 404)
  end
  return e
end

function ops.CreateAccessEntry(ctx, input)
  local c = api_cluster(ctx, input.clusterName)
  local principal = input.principalArn
  ctx.target = c.name .. "/" .. tostring(principal)
  if type(principal) ~= "string" then
    ctx.error("InvalidParameterException", "principalArn is required")
  end
  local etype = input.type or "STANDARD"
  if not TYPES[etype] then
    ctx.error("InvalidParameterException", "The type " .. tostring(etype) .. " is not supported")
  end
  if etype ~= "STANDARD" and ((input.kubernetesGroups and #input.kubernetesGroups > 0) or input.username) then
    ctx.error("InvalidParameterException", "kubernetesGroups and username can only be specified for " ..
      "access entries of type STANDARD.")
  end
  local existing = ctx.state:get("access_entry", key(c.name, principal))
  if existing and input.clientRequestToken and existing.token == input.clientRequestToken then
    return { accessEntry = entry_view(existing) } -- a retry of the same request
  end
  if existing then
    ctx.error("ResourceInUseException", "The specified access entry resource is already in use on this cluster.", 409)
  end
  local e = new_entry(ctx, c, principal, etype, input.kubernetesGroups, input.username, input.tags)
  e.token = input.clientRequestToken
  ctx.state:put("access_entry", e.key, e)
  return { accessEntry = entry_view(e) }
end

function ops.DescribeAccessEntry(ctx, input)
  return { accessEntry = entry_view(get_entry(ctx, input.clusterName, input.principalArn)) }
end

function ops.ListAccessEntries(ctx, input)
  local c = api_cluster(ctx, input.clusterName)
  local out = json.array()
  for _, e in ipairs(ctx.state:list("access_entry")) do
    if e.clusterName == c.name and (not input.associatedPolicyArn or e.policies[input.associatedPolicyArn]) then
      out[#out + 1] = e.principalArn
    end
  end
  local page, nxt = D.page(ctx, out, input.maxResults, input.nextToken, 100, "InvalidParameterException")
  return { accessEntries = page, nextToken = nxt }
end

function ops.DeleteAccessEntry(ctx, input)
  local e = get_entry(ctx, input.clusterName, input.principalArn)
  ctx.target = e.key
  ctx.state:delete("access_entry", e.key)
  return {}
end

function ops.AssociateAccessPolicy(ctx, input)
  local e = get_entry(ctx, input.clusterName, input.principalArn)
  ctx.target = e.key
  local arn = input.policyArn
  local known = false
  for _, p in ipairs(POLICIES) do known = known or arn == POLICY_ARN .. p end
  if not known then
    ctx.error("InvalidParameterException", "The specified policyArn is invalid: " .. tostring(arn))
  end
  local scope = input.accessScope or {}
  if scope.type ~= "cluster" and scope.type ~= "namespace" then
    ctx.error("InvalidParameterException", "accessScope.type must be one of [cluster, namespace]")
  end
  local nss = D.list(scope.namespaces)
  if scope.type == "namespace" and #nss == 0 then
    ctx.error("InvalidParameterException", "At least one namespace is required for an access scope of type namespace.")
  elseif scope.type == "cluster" and #nss > 0 then
    ctx.error("InvalidParameterException", "Namespaces can't be specified for an access scope of type cluster.")
  end
  if e.type ~= "STANDARD" then
    ctx.error("InvalidRequestException", "Access policies can only be associated with access entries of type STANDARD.")
  end
  local now = ctx.now()
  local old = e.policies[arn]
  local p = { policyArn = arn, accessScope = { type = scope.type, namespaces = nss },
    associatedAt = old and old.associatedAt or now, modifiedAt = now }
  e.policies[arn] = p
  ctx.state:put("access_entry", e.key, e)
  return { clusterName = e.clusterName, principalArn = e.principalArn, associatedAccessPolicy = p }
end

function ops.ListAssociatedAccessPolicies(ctx, input)
  local e = get_entry(ctx, input.clusterName, input.principalArn)
  local arns = {}
  for arn in pairs(e.policies) do arns[#arns + 1] = arn end
  table.sort(arns)
  local all = json.array()
  for i, arn in ipairs(arns) do all[i] = e.policies[arn] end
  local page, nxt = D.page(ctx, all, input.maxResults, input.nextToken, 100, "InvalidParameterException")
  return { clusterName = e.clusterName, principalArn = e.principalArn, associatedAccessPolicies = page,
    nextToken = nxt }
end

function ops.DisassociateAccessPolicy(ctx, input)
  local e = get_entry(ctx, input.clusterName, input.principalArn)
  ctx.target = e.key
  if not e.policies[input.policyArn] then
    ctx.error("ResourceNotFoundException", "The specified access policy association can't be found.", 404)
  end
  e.policies[input.policyArn] = nil
  ctx.state:put("access_entry", e.key, e)
  return {}
end

function ops.ListAccessPolicies(ctx, input)
  local all = json.array()
  for i, p in ipairs(POLICIES) do all[i] = { name = p, arn = POLICY_ARN .. p } end
  local page, nxt = D.page(ctx, all, input.maxResults, input.nextToken, 100, "InvalidParameterException")
  return { accessPolicies = page, nextToken = nxt }
end

-- pod identity associations -------------------------------------------------

local function pia_view(p)
  local out = D.copy(p)
  out.key, out.token = nil, nil
  return out
end

-- associate(ctx, cluster, namespace, sa, role [, owner]) -> the new association
function M.associate(ctx, c, ns, sa, role, owner, tags)
  if type(ns) ~= "string" or type(sa) ~= "string" or type(role) ~= "string" then
    ctx.error("InvalidParameterException", "namespace, serviceAccount and roleArn are required")
  end
  if not D.role(ctx, role) then
    ctx.error("InvalidParameterException", "Role " .. role .. " does not exist.")
  end
  for _, p in ipairs(ctx.state:list("pod_identity")) do
    if p.clusterName == c.name and p.namespace == ns and p.serviceAccount == sa then
      ctx.error("ResourceInUseException", "Association already exists: " .. p.associationId, 409)
    end
  end
  local id = "a-" .. ctx.hex(17)
  local now = ctx.now()
  local p = { key = key(c.name, id), clusterName = c.name, namespace = ns, serviceAccount = sa, roleArn = role,
    associationArn = ctx:arn("podidentityassociation/" .. c.name .. "/" .. id), associationId = id,
    tags = tags or json.object(), createdAt = now, modifiedAt = now, ownerArn = owner, disableSessionTags = false }
  ctx.state:put("pod_identity", p.key, p)
  return p
end

function ops.CreatePodIdentityAssociation(ctx, input)
  local c = C.get(ctx, input.clusterName)
  for _, old in ipairs(input.clientRequestToken and ctx.state:list("pod_identity") or {}) do
    if old.clusterName == c.name and old.token == input.clientRequestToken then
      return { association = pia_view(old) } -- a retry of the same request
    end
  end
  local p = M.associate(ctx, c, input.namespace, input.serviceAccount, input.roleArn, nil, input.tags)
  p.token = input.clientRequestToken
  if input.targetRoleArn then p.targetRoleArn = input.targetRoleArn end
  if input.disableSessionTags ~= nil then p.disableSessionTags = input.disableSessionTags end
  if input.policy then p.policy = input.policy end
  ctx.state:put("pod_identity", p.key, p)
  ctx.target = p.key
  return { association = pia_view(p) }
end

local function get_pia(ctx, cluster, id)
  C.get(ctx, cluster)
  local p = ctx.state:get("pod_identity", key(cluster, tostring(id)))
  if not p then
    ctx.error("ResourceNotFoundException", "No pod identity association found for id: " .. tostring(id) .. ".", 404)
  end
  return p
end

function ops.DescribePodIdentityAssociation(ctx, input)
  return { association = pia_view(get_pia(ctx, input.clusterName, input.associationId)) }
end

function ops.ListPodIdentityAssociations(ctx, input)
  C.get(ctx, input.clusterName)
  local out = json.array()
  for _, p in ipairs(ctx.state:list("pod_identity")) do
    if p.clusterName == input.clusterName and (not input.namespace or p.namespace == input.namespace)
      and (not input.serviceAccount or p.serviceAccount == input.serviceAccount) then
      out[#out + 1] = { clusterName = p.clusterName, namespace = p.namespace, serviceAccount = p.serviceAccount,
        associationArn = p.associationArn, associationId = p.associationId, ownerArn = p.ownerArn }
    end
  end
  local page, nxt = D.page(ctx, out, input.maxResults, input.nextToken, 100, "InvalidParameterException")
  return { associations = page, nextToken = nxt }
end

function ops.DeletePodIdentityAssociation(ctx, input)
  local p = get_pia(ctx, input.clusterName, input.associationId)
  ctx.target = p.key
  if p.ownerArn then
    ctx.error("InvalidRequestException", "Association " .. p.associationId .. " is owned by " .. p.ownerArn ..
      " and can only be removed through it.")
  end
  ctx.state:delete("pod_identity", p.key)
  return { association = pia_view(p) }
end

return M
