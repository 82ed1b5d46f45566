-- sandbox.k8s.controllers.addons: EKS add-ons show up in the cluster as
-- what they install: their Deployments and DaemonSets (in the add-on's
-- namespace, created when missing) and, for the HyperPod training and
-- inference operators, their CRDs; a CSI driver's add-on registers its
-- CSIDriver (storage.k8s.io, cluster-scoped). The objects carry the labels EKS puts
-- on them (app.kubernetes.io/managed-by: EKS, eks.amazonaws.com/component)
-- and the annotation sandbox.hypd.io/addon naming the add-on; an add-on
-- that is deleted (or never became ACTIVE) has none. A new add-on version
-- changes the images, which rolls the Deployments. Each workload runs as
-- its add-on's service account, which the add-on creates; when the add-on
-- has an IAM role for it (serviceAccountRoleArn), the account carries it as
-- EKS puts it there: the annotation eks.amazonaws.com/role-arn (IRSA).
--
-- The EKS side tells us when an add-on changes (sync, called from
-- services/eks/addons.lua); the handler compares the add-on records of the
-- cluster with the objects it owns.
local CATALOG = require("sandbox.services.eks.addons").CATALOG
local ctl_ = require "sandbox.k8s.controllers._ctl"
local metrics = require "sandbox.k8s.metrics"
local resources = require "sandbox.k8s.resources"
local state = require "sandbox.state"

local M = {}
M.ANN = "sandbox.hypd.io/addon"
M.ROLE_ANN = "eks.amazonaws.com/role-arn"

-- add-on statuses under which its objects exist
local PRESENT = { ACTIVE = true, UPDATING = true, DEGRADED = true, DELETING = true }
-- metrics-server's statuses under which metrics.k8s.io is served (its
-- APIService is removed as the add-on is deleted)
local METRICS = { ACTIVE = true, UPDATING = true, DEGRADED = true }

-- what each add-on runs: { kind, name, image = ECR repository, replicas,
-- host = hostNetwork, app = k8s-app label, labels = extra pod labels, ns,
-- sa = its service account (default: its name) }; crds names plurals of
-- resources.CRDS; csi = the CSIDriver a CSI driver's add-on registers
-- ({ name, spec as its chart sets it }: the API server's defaults fill the rest)
M.MANIFESTS = {
  ["vpc-cni"] = { { "DaemonSet", "aws-node", image = "amazon-k8s-cni", host = true, app = "aws-node" } },
  coredns = { { "Deployment", "coredns", replicas = 2, image = "eks/coredns", app = "kube-dns" } },
  ["kube-proxy"] = { { "DaemonSet", "kube-proxy", image = "eks/kube-proxy", host = true, app = "kube-proxy" } },
  ["eks-pod-identity-agent"] = { { "DaemonSet", "eks-pod-identity-agent", image = "eks/eks-pod-identity-agent",
    host = true } },
  ["metrics-server"] = { { "Deployment", "metrics-server", replicas = 2, image = "eks/metrics-server",
    app = "metrics-server" } },
  ["cert-manager"] = { { "Deployment", "cert-manager", image = "cert-manager/cert-manager-controller" },
    { "Deployment", "cert-manager-cainjector", image = "cert-manager/cert-manager-cainjector" },
    { "Deployment", "cert-manager-webhook", image = "cert-manager/cert-manager-webhook" },
    crds = { "certificates", "issuers" } },
  ["aws-mountpoint-s3-csi-driver"] = {
    { "Deployment", "s3-csi-controller", image = "mountpoint-s3-csi-driver", sa = "s3-csi-driver-sa" },
    { "DaemonSet", "s3-csi-node", image = "mountpoint-s3-csi-driver", host = true, sa = "s3-csi-driver-sa" },
    csi = { "s3.csi.aws.com", { attachRequired = false, podInfoOnMount = true } } },
  ["aws-fsx-csi-driver"] = { { "Deployment", "fsx-csi-controller", replicas = 2, image = "aws-fsx-csi-driver" },
    { "DaemonSet", "fsx-csi-node", image = "aws-fsx-csi-driver" },
    csi = { "fsx.csi.aws.com", { attachRequired = false } } },
  ["amazon-sagemaker-hyperpod-training-operator"] = {
    { "Deployment", "hp-training-operator-hp-training-controller-manager", image = "hyperpod-training-operator",
      labels = { ["hp-training-control-plane"] = "hp-training-controller-manager" } },
    crds = { "hyperpodpytorchjobs" } },
  ["amazon-sagemaker-hyperpod-inference"] = {
    { "Deployment", "hyperpod-inference-operator-controller-manager", image = "hyperpod-inference-operator" },
    crds = { "inferenceendpointconfigs", "jumpstartmodels" } },
  ["amazon-sagemaker-hyperpod-observability"] = {
    { "Deployment", "hyperpod-observability-operator", image = "hyperpod-observability-operator" },
    { "DaemonSet", "hyperpod-observability-operator-otel-collector", image = "hyperpod-otel-collector" } },
  ["amazon-sagemaker-hyperpod-taskgovernance"] = {
    { "Deployment", "kueue-controller-manager", image = "hyperpod-kueue" } },
}

-- sync(region [, eks_cluster_name]): the add-ons' objects follow the EKS
-- add-on records (soon, in the cluster's controller task); never raises
function M.sync(region, name)
  for _, ctl in ipairs(ctl_.each(region)) do
    if not name or ctl.cl.name == name then ctl:enqueue("addons") end
  end
end

local function workload(ctl, a, item, ns)
  local kind, name = item[1], item[2]
  local sel = item.app and { ["k8s-app"] = item.app } or { ["app.kubernetes.io/name"] = name }
  local labels = ctl_.copy(sel)
  labels["app.kubernetes.io/managed-by"] = "EKS"
  labels["eks.amazonaws.com/component"] = name
  local pod_labels = ctl_.copy(sel)
  pod_labels["eks.amazonaws.com/component"] = name
  for k, v in pairs(item.labels or {}) do pod_labels[k] = v end
  local image = string.format("602401143452.dkr.ecr.%s.amazonaws.com/%s:%s", ctl.region, item.image, a.addonVersion)
  local pod = {
    serviceAccountName = item.sa or name, priorityClassName = "system-cluster-critical", hostNetwork = item.host,
    tolerations = kind == "DaemonSet" and { { operator = "Exists" } }
      or { { key = "CriticalAddonsOnly", operator = "Exists" } },
    containers = { { name = name, image = image,
      resources = { requests = { cpu = "100m", memory = "128Mi" } } } },
  }
  local spec = { selector = { matchLabels = sel }, template = { metadata = { labels = pod_labels }, spec = pod } }
  if kind == "Deployment" then spec.replicas = item.replicas or 1 end
  return { apiVersion = "apps/v1", kind = kind,
    metadata = { name = name, namespace = ns, labels = labels, annotations = { [M.ANN] = a.addonName } },
    spec = spec }
end

local function crd(a, plural)
  for _, row in ipairs(resources.CRDS) do
    if row[3] == plural then
      local obj = resources.crd(row)
      obj.metadata.labels = { ["app.kubernetes.io/managed-by"] = "EKS", ["eks.amazonaws.com/component"] = a.addonName }
      obj.metadata.annotations = { [M.ANN] = a.addonName }
      return obj
    end
  end
end

-- csidriver(a, csi) -> the CSIDriver of add-on a, with SetDefaults_CSIDriver's defaults
local function csidriver(a, csi)
  local spec = { attachRequired = true, podInfoOnMount = false, storageCapacity = false, requiresRepublish = false,
    seLinuxMount = false, fsGroupPolicy = "ReadWriteOnceWithFSType", volumeLifecycleModes = { "Persistent" } }
  for k, v in pairs(csi[2]) do spec[k] = v end
  return { apiVersion = "storage.k8s.io/v1", kind = "CSIDriver", metadata = { name = csi[1],
    labels = { ["app.kubernetes.io/managed-by"] = "EKS", ["eks.amazonaws.com/component"] = a.addonName },
    annotations = { [M.ANN] = a.addonName } }, spec = spec }
end

-- account(a, item, ns) -> the ServiceAccount a workload of add-on a runs as
local function account(a, item, ns)
  local ann = { [M.ANN] = a.addonName }
  if a.serviceAccountRoleArn and a.serviceAccountRoleArn ~= "" then ann[M.ROLE_ANN] = a.serviceAccountRoleArn end
  return { apiVersion = "v1", kind = "ServiceAccount", metadata = { name = item.sa or item[2], namespace = ns,
    labels = { ["app.kubernetes.io/managed-by"] = "EKS" }, annotations = ann } }
end

local function ours(obj) return obj.metadata.annotations ~= nil and obj.metadata.annotations[M.ANN] ~= nil end

local function id(r, obj) return r.resource .. "/" .. (obj.metadata.namespace or "") .. "/" .. obj.metadata.name end

ctl_.handlers.addons = function(ctl)
  local cl = ctl.cl
  local nsr = ctl:r("", "v1", "namespaces")
  local dr, dsr = ctl:r("apps", "v1", "deployments"), ctl:r("apps", "v1", "daemonsets")
  local crdr = ctl:r("apiextensions.k8s.io", "v1", "customresourcedefinitions")
  local sar = ctl:r("", "v1", "serviceaccounts")
  local csir = ctl:r("storage.k8s.io", "v1", "csidrivers")
  local want, keys, spaces = {}, {}, {}
  local list = state.view(ctl.region, "eks"):list("addon")
  table.sort(list, function(x, y) return x.addonName < y.addonName end)
  local serves_metrics = false
  for _, a in ipairs(list) do
    if a.clusterName == cl.name and a.addonName == "metrics-server" and METRICS[a.status] then serves_metrics = true end
    local man = M.MANIFESTS[a.addonName]
    if a.clusterName == cl.name and PRESENT[a.status] and man then
      local home = (a.namespaceConfig or {}).namespace or (CATALOG[a.addonName] or {}).ns or "kube-system"
      for _, plural in ipairs(man.crds or {}) do
        local obj = crd(a, plural)
        if obj then want[#want + 1] = { crdr, obj } end
      end
      if man.csi then want[#want + 1] = { csir, csidriver(a, man.csi) } end
      for _, item in ipairs(man) do
        local ns = item.ns or home
        spaces[ns] = spaces[ns] or a.addonName
        want[#want + 1] = { sar, account(a, item, ns) }
        want[#want + 1] = { item[1] == "Deployment" and dr or dsr, workload(ctl, a, item, ns) }
      end
    end
  end
  metrics.set(cl, serves_metrics)
  for ns, addon in pairs(spaces) do
    if not cl:get(nsr, nil, ns) then
      cl:create(nsr, { metadata = { name = ns, labels = { ["app.kubernetes.io/managed-by"] = "EKS",
        ["kubernetes.io/metadata.name"] = ns }, annotations = { [M.ANN] = addon } } })
    end
  end
  for _, w in ipairs(want) do
    local r, obj = w[1], w[2]
    keys[id(r, obj)] = true
    local old = cl:get(r, obj.metadata.namespace, obj.metadata.name)
    if not old then
      cl:create(r, obj, { manager = "eks" })
    elseif ours(old) and r == sar then
      local c = ctl_.copy(old)
      c.metadata.annotations = obj.metadata.annotations
      cl:update(r, c, { manager = "eks" })
    elseif ours(old) and r ~= crdr then
      local c = ctl_.copy(old)
      c.spec = obj.spec
      for k, v in pairs(obj.metadata.labels) do c.metadata.labels = c.metadata.labels or {}; c.metadata.labels[k] = v end
      c.metadata.annotations[M.ANN] = obj.metadata.annotations[M.ANN]
      cl:update(r, c, { manager = "eks" })
    end
  end
  for _, r in ipairs { dr, dsr, crdr, sar, csir } do
    for _, o in ipairs(cl:list(r)) do
      if ours(o) and not keys[id(r, o)] then cl:delete(r, o.metadata.namespace, o.metadata.name) end
    end
  end
  for _, o in ipairs(cl:list(nsr)) do
    if ours(o) and not spaces[o.metadata.name] then cl:delete(nsr, nil, o.metadata.name) end
  end
end

function M.start(ctl) ctl:enqueue("addons") end

return M
