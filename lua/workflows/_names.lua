-- _names: the one home of the names and the ownership tag hypd gives what
-- it makes for a cluster tag, and of its client request tokens.
--   local Names = require "_names"
--   Names.TAG                         the tag key on everything hypd makes
--   Names.EKS_TAG                     the EKS cluster a resource was made for
--   Names.eks(tag [, suffix])         hypd-<tag>, hypd-<tag>-<suffix> (VPC, subnets, ...)
--   Names.hyperpod(tag)               the HyperPod cluster, its execution role, its lifecycle prefix
--   Names.lifecycle_bucket(tag, account, region)   its lifecycle scripts' bucket
--   Names.fsx(tag, claim)             an FSx claim's file system, security group, CSI role
--   Names.bucket(tag, account, region [, kind])   hypd's S3 bucket (kind "data", "mlflow")
--   Names.mlflow(tag)                 the MLflow tracking server, its role, its pods' role
--   Names.addon_role(tag, what [, keep])          an EKS add-on's IRSA role
--   Names.discovery_role(ns, name)    an inference router's discovery role
--   Names.token(op_id [, what [, max]])           a client request token
-- Only workflows use these (lua/hypd knows no resource names and no tag), so
-- the module sits with the shared workflow helpers, below every area. A
-- name's length rule lives with the name.
local hash = require "_hash"

local M = {}

M.TAG = "hypd:cluster-tag"
M.EKS_TAG = "hypd:eks-cluster" -- the EKS cluster a resource was made for (add-on roles, the MLflow server)
M.PREFIX = "hypd-"

-- cut(s, n) -> s, at most n characters, without a trailing '-'
local function cut(s, n)
  if #s <= n then return s end
  return (s:sub(1, n):gsub("%-+$", ""))
end

-- eks(tag [, suffix]) -> "hypd-<tag>" (the EKS cluster) or "hypd-<tag>-<suffix>"
-- (its VPC, subnets, security groups, NAT gateway, node role, ...)
function M.eks(tag, suffix)
  return M.PREFIX .. tag .. (suffix and ("-" .. suffix) or "")
end

-- hyperpod(tag) -> {cluster, execution_role, lifecycle_prefix}
function M.hyperpod(tag)
  return { cluster = M.eks(tag, "hp"), execution_role = M.eks(tag, "hyperpod-exec"),
    lifecycle_prefix = M.eks(tag, "lifecycle") }
end

-- fsx(tag, claim) -> {file_system, security_group, role}
function M.fsx(tag, claim)
  return { file_system = M.eks(tag, claim), security_group = M.eks(tag, claim .. "-lustre"),
    role = M.eks(tag, "fsx-csi-driver") }
end

-- lifecycle_bucket(tag, account, region) -> the bucket of a HyperPod
-- cluster's lifecycle scripts (global: the account and region make it
-- unique; at most 56 characters)
function M.lifecycle_bucket(tag, account, region)
  return M.hyperpod(tag).lifecycle_prefix .. "-" .. hypd.digest("sha256", account .. "/" .. region):sub(1, 8)
end

M.BUCKET_MAX = 63

-- bucket(tag, account, region [, kind]) -> hypd's bucket for a cluster tag:
-- hypd-<tag>-<kind>-<account>-<region> (kind "data", or what else it holds:
-- "mlflow"); past S3's 63 characters the tag is cut and a hash of it added
function M.bucket(tag, account, region, kind)
  local tail = "-" .. (kind or "data") .. "-" .. account .. "-" .. region
  local name = M.PREFIX .. tag .. tail
  if #name <= M.BUCKET_MAX then return name end
  local h = hash.fnv1a(tag, 6)
  local room = M.BUCKET_MAX - #M.PREFIX - #tail - #h - 1
  return M.PREFIX .. cut(tag, room) .. "-" .. h .. tail
end

-- mlflow(tag) -> {server, role, pods_role}: the tracking server, the role it
-- assumes, the role of the jobs' pods (IRSA)
function M.mlflow(tag)
  return { server = M.PREFIX .. cut(tag, 240) .. "-mlflow", role = M.PREFIX .. cut(tag, 52) .. "-mlflow",
    pods_role = M.PREFIX .. cut(tag, 47) .. "-mlflow-pods" }
end

-- addon_role(tag, what, keep) -> hypd-<tag>-<what>, at most 64 characters
-- (past that, its first keep characters and -<what>)
function M.addon_role(tag, what, keep)
  local n = M.eks(tag, what)
  if #n > 64 then n = n:sub(1, keep) .. "-" .. what end
  return n
end

-- discovery_role(ns, name) -> the Kubernetes Role an inference router reads its workers with
function M.discovery_role(ns, name)
  return M.PREFIX .. ns .. "-" .. name .. "-discovery"
end

-- token(id [, what [, max]]) -> hypd-<id>[-<what>], at most max characters
-- (default 64): a client request token, so that a retried create is the same
-- create. id: the operation's id
function M.token(id, what, max)
  return (M.PREFIX .. tostring(id) .. (what and ("-" .. what) or "")):sub(1, max or 64)
end

return M
