-- sandbox.k8s.controllers: what makes a simulated EKS cluster act like one.
-- start(cl, region, eks_cluster_record) is called once per served cluster
-- (sandbox.k8s M.controllers): it installs one store hook that tells every
-- controller about each change, and the cluster's one daemon task that
-- reconciles (controllers/_ctl.lua). Calling it again does nothing.
--
-- The controllers, in M.MODULES' order (each a file of this directory):
--
--   nodes          HyperPod instances as Node objects; node failures
--   nodegroups     EKS managed node group instances as Node objects
--   scheduler      Pending pods to nodes (GPU, EFA, selectors, taints)
--   kubelet        bound pods run, print, finish, fail with their node
--   deployments    Deployments and ReplicaSets
--   statefulsets   StatefulSets (ordinal pods)
--   endpoints      Endpoints and EndpointSlices of Services
--   jobs           batch/v1 Jobs
--   cronjobs       batch/v1 CronJobs: Jobs on a schedule
--   disruption     PodDisruptionBudgets' status
--   quotas         ResourceQuotas' usage
--   daemonsets     DaemonSets
--   hyperpod_jobs  HyperPodPyTorchJob (training operator)
--   rayjobs        RayCluster and RayJob (KubeRay operator)
--   addons         EKS add-ons as their workloads and CRDs
--   volumes        PersistentVolumeClaims bound to PersistentVolumes
--   karpenter      HyperPod's managed Karpenter: NodePools scale groups
--   inference      InferenceEndpointConfig and JumpStartModel (inference operator)
--   loadbalancers  LoadBalancer Services' addresses (cloud provider, AWS Load Balancer Controller)
--   keda           KEDA ScaledObjects (prometheus triggers) while KEDA runs
--   leases         each node's Lease in kube-node-lease, as its kubelet keeps it
--   csinodes       each node's CSINode: the CSI drivers the add-ons register
--   certmanager    cert-manager's Issuers and Certificates (self-signed) while cert-manager runs
--
-- and what they share: _ctl (the Ctl and its reconcile loop), _aws (the
-- simulated AWS account, in-process), _node (a machine's Node), _probes
-- (readiness probes), _revisions (ControllerRevisions).
local ctl_ = require "sandbox.k8s.controllers._ctl"
local log = require "hypd.log"

local M = {}

M.MODULES = { "nodes", "nodegroups", "scheduler", "kubelet", "deployments", "statefulsets", "endpoints", "jobs",
  "cronjobs", "disruption", "quotas", "daemonsets", "hyperpod_jobs", "rayjobs", "addons", "volumes", "karpenter",
  "inference", "loadbalancers", "keda", "leases", "csinodes", "certmanager" }

local mods = {}
for i, name in ipairs(M.MODULES) do mods[i] = require("sandbox.k8s.controllers." .. name) end

-- start(cl, region, eks_cluster_record) -> the cluster's Ctl
function M.start(cl, region, c)
  if cl.controllers then return cl.controllers end
  local ctl = ctl_.new(cl, region, c)
  cl.controllers = ctl
  cl:hook(function(etype, r, obj)
    for i, m in ipairs(mods) do
      if m.watch then
        local ok, err = pcall(m.watch, ctl, etype, r, obj)
        if not ok then log.error("sandbox", "k8s controller %s: hook failed: %s", M.MODULES[i], tostring(err)) end
      end
    end
  end)
  for _, m in ipairs(mods) do
    if m.start then m.start(ctl) end
  end
  ctl:start()
  return ctl
end

-- find(region, eks_cluster_name) -> the live Ctl of a cluster, or nil
M.find = ctl_.find

return M
