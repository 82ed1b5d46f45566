-- cluster_get_dependency_status: every stage 3 item of a cluster as it is
-- now (read from AWS and the Kubernetes API, never remembered), with the
-- cluster_configure_dependencies operation that works on it.
local P = require "_params"
local R = require "_running"
local W = require "_wait"
local irsa = require "_irsa"
local status = require "cluster._deps_status"

return tool {
  name = "cluster_get_dependency_status",
  summary = "Each dependency of the active (or named) cluster: present, missing, drifted, failed or pending",
  description = "Reads the actual state of every item cluster_configure_dependencies manages for the active " ..
    "cluster (or the one named): the IAM OIDC provider, the S3 CSI driver's IAM role (and its service account's " ..
    "role annotation), each EKS add-on (version, status, health), and each Kubernetes component object by object " ..
    "(readiness of its DaemonSets and Deployments). Each item's state is present, missing, drifted (with what " ..
    "differs: field, what it holds, what hypd would set), failed (with the reason, from AWS or from the last " ..
    "operation) or pending (an add-on EKS is creating, updating or deleting); what hypd did not make is marked " ..
    "owner other. configured is true when every item is present. It also shows the latest " ..
    "cluster_configure_dependencies operation for the cluster (or operation_id's); with wait_seconds it first " ..
    "waits until that operation's phase or status changes.",
  kind = "read",
  aws = { "eks:DescribeCluster", "eks:DescribeAddonVersions", "eks:DescribeAddon", "iam:GetOpenIDConnectProvider",
    "iam:GetRole", "iam:GetRolePolicy" },
  k8s = { "get", "list" },
  params = P.form({},
    { "kuberay", "load_balancer_controller", "operation_id", "cluster", "region", "wait_seconds" },
    {
    cluster = P.with(P.cluster, { description = "EKS cluster name (default: the active cluster)" }),
    region = P.region,
    operation_id = P.with(P.operation_id, { description = "a cluster_configure_dependencies operation (default: " ..
      "the latest one for the cluster)" }),
    kuberay = { type = "boolean", description = "include the KubeRay operator (default: whether the latest " ..
      "operation asked for it)" },
    load_balancer_controller = { type = "boolean", description = "include the AWS Load Balancer Controller " ..
      "(default: whether the latest operation asked for it)" },
    wait_seconds = P.wait_seconds,
  }),
  run = function(ctx, p)
    local info = irsa.cluster(ctx, p)
    -- the view now; with wait_seconds, settled once nothing runs on the
    -- cluster's dependencies and no item is on its way (workflows _wait)
    local target = "deps/" .. info.region .. "/" .. info.name
    local out, waited = W.follow(p.wait_seconds, {
      quick = function() return R.fingerprint(target) end,
      read = function()
        local v = status.view(ctx, info, p)
        local at_work = R.on(target)
        if at_work then
          v.operation = v.operation or {}
          if v.operation.operation_id == at_work.operation_id then
            v.operation.running_child = at_work.running_child
          else
            v.operation.top = at_work
          end
        end
        return v
      end,
      settled = function(v)
        if v.operation and (v.operation.status == "running" or v.operation.top) then return false end
        return (v.counts.pending or 0) == 0
      end,
      signature = function(v)
        local parts = { R.signature(v.operation and v.operation.status == "running" and v.operation or nil),
          R.signature(v.operation and v.operation.top) }
        for _, it in ipairs(v.items) do parts[#parts + 1] = tostring(it.item) .. "=" .. tostring(it.state) end
        return table.concat(parts, " ")
      end })
    out.waited = waited
    return out
  end,
}
