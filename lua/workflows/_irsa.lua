-- _irsa: IAM roles for service accounts on an EKS cluster, for the tools
-- of every area that make one (cluster_configure_dependencies' S3 CSI
-- driver and load balancer controller roles, training_setup_mlflow's):
-- the cluster as IAM sees it (its OIDC issuer, account and partition), its
-- IAM OIDC provider's ARN, and a role's trust of one service account.
local errors = hypd.errors
local Names = require "_names"

local M = {}

M.AUDIENCE = "sts.amazonaws.com"

-- the cluster ---------------------------------------------------------------

-- cluster(ctx, p) -> info: the EKS cluster a call works on (p.cluster, in
-- the region hypd recorded for it unless p.region, else the active one): {name, region, arn, version, issuer, status, tag,
-- account, partition, created, planned}. A plan for a cluster that does not
-- exist yet (cluster_create's) gets planned values; otherwise NOT_FOUND.
function M.cluster(ctx, p)
  local known = not p.region and p.cluster and hypd.clusters.get(p.cluster) -- a recorded cluster, where it is
  local target = ctx:cluster { cluster = p.cluster, region = p.region or (known and known.region) }
  local name, region, rec = target.name, target.region, target.record
  ctx.region = region
  local out, err = ctx:try("eks", "DescribeCluster", { name = name })
  if not out then
    if err.code ~= "ResourceNotFoundException" then error(err, 0) end
    if not ctx.plan then
      errors.refuse("cluster", "exists", string.format("no EKS cluster named %s in %s", name, region),
        { code = "NOT_FOUND", field_message = "cluster: no such EKS cluster" })
    end
    local id = hypd.kit.planned_id("eks:cluster", Names.eks(name))
    return { name = name, region = region, arn = id, issuer = hypd.kit.planned_id("eks:oidc-issuer", name),
      planned = true,
      tag = rec.tag or name:match("^hypd%-(.+)$"), created = true, account = "<account>", partition = "aws" }
  end
  local c = out.cluster
  local part, acct = tostring(c.arn):match("^arn:([^:]+):eks:[^:]+:(%d+):")
  return { name = c.name, region = region, arn = c.arn, version = c.version, status = c.status,
    issuer = ((c.identity or {}).oidc or {}).issuer, tag = (c.tags or {})[Names.TAG] or rec.tag,
    account = acct, partition = part or "aws", created = rec.created == true, describe = c,
    vpc_id = (c.resourcesVpcConfig or {}).vpcId }
end

-- issuer_path(info) -> "oidc.eks.us-west-2.amazonaws.com/id/ABC" (the issuer without https://)
function M.issuer_path(info) return (tostring(info.issuer):gsub("^https://", ""):gsub("/$", "")) end

function M.provider_arn(info)
  if info.planned then return hypd.kit.planned_id("iam:oidc-provider", info.name) end
  return string.format("arn:%s:iam::%s:oidc-provider/%s", info.partition, info.account, M.issuer_path(info))
end

-- trust(info, ns, sa) -> an IRSA role's trust: exactly service account
-- ns/sa, through the cluster's provider
function M.trust(info, ns, sa)
  local host = M.issuer_path(info)
  return { Version = "2012-10-17", Statement = { { Effect = "Allow",
    Principal = { Federated = M.provider_arn(info) }, Action = "sts:AssumeRoleWithWebIdentity",
    Condition = { StringEquals = {
      [host .. ":sub"] = "system:serviceaccount:" .. ns .. ":" .. sa,
      [host .. ":aud"] = M.AUDIENCE } } } } }
end

return M
