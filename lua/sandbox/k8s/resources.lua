-- sandbox.k8s.resources: the API resources a simulated EKS cluster serves.
-- The built-in kinds are listed here; custom resources come from
-- CustomResourceDefinition objects (the CRDs of the HyperPod add-ons are
-- installed with every cluster, as the add-ons would install them).
--
-- A resource: { group, version, resource (plural), singular, kind,
-- namespaced, short = {...}, verbs = "all" | "read", status (has a status
-- subresource), log (pods), scale (a scale subresource, autoscaling/v1
-- Scale of spec.replicas), token (service accounts' token subresource,
-- a TokenRequest), categories (discovery's, e.g. "all" for what
-- `kubectl get all` lists), columns (for kubectl's Table) }
local M = {}

local ALL = { "create", "delete", "deletecollection", "get", "list", "patch", "update", "watch" }
local READ = { "get", "list", "watch" }

local BUILTIN = {
  { "", "v1", "namespaces", "Namespace", false, { "ns" }, status = true },
  { "", "v1", "nodes", "Node", false, { "no" }, status = true },
  { "", "v1", "pods", "Pod", true, { "po" }, status = true, log = true, all = true },
  { "", "v1", "services", "Service", true, { "svc" }, status = true, all = true },
  { "", "v1", "endpoints", "Endpoints", true, { "ep" } },
  { "discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", true, {}, status = false },
  { "", "v1", "configmaps", "ConfigMap", true, { "cm" } },
  { "", "v1", "secrets", "Secret", true, {} },
  { "", "v1", "serviceaccounts", "ServiceAccount", true, { "sa" }, token = true },
  { "", "v1", "events", "Event", true, { "ev" } },
  { "coordination.k8s.io", "v1", "leases", "Lease", true, {}, status = false },
  { "", "v1", "resourcequotas", "ResourceQuota", true, { "quota" }, status = true },
  { "", "v1", "limitranges", "LimitRange", true, { "limits" } },
  { "scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", false, { "pc" }, status = false },
  { "policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", true, { "pdb" }, status = true },
  { "networking.k8s.io", "v1", "ingresses", "Ingress", true, { "ing" }, status = true },
  { "networking.k8s.io", "v1", "ingressclasses", "IngressClass", false, {}, status = false },
  -- both versions of one stored object, v2 preferred; no conversion between them (kubectl 1.32 autoscale uses v1)
  { "autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", true, { "hpa" }, status = true },
  { "autoscaling", "v1", "horizontalpodautoscalers", "HorizontalPodAutoscaler", true, { "hpa" }, status = true },
  { "", "v1", "persistentvolumes", "PersistentVolume", false, { "pv" }, status = true },
  { "", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", true, { "pvc" }, status = true },
  -- storage.k8s.io: EKS's gp2 StorageClass (sandbox.k8s seed), the CSI add-ons' CSIDrivers
  -- (controllers.addons) and each node's CSINode (controllers.csinodes)
  { "storage.k8s.io", "v1", "storageclasses", "StorageClass", false, { "sc" }, status = false },
  { "storage.k8s.io", "v1", "csidrivers", "CSIDriver", false, {}, status = false },
  { "storage.k8s.io", "v1", "csinodes", "CSINode", false, {}, status = false },
  { "storage.k8s.io", "v1", "volumeattachments", "VolumeAttachment", false, {}, status = true },
  { "storage.k8s.io", "v1", "csistoragecapacities", "CSIStorageCapacity", true, {}, status = false },
  { "apps", "v1", "deployments", "Deployment", true, { "deploy" }, status = true, scale = true, all = true },
  { "apps", "v1", "replicasets", "ReplicaSet", true, { "rs" }, status = true, scale = true, all = true },
  { "apps", "v1", "statefulsets", "StatefulSet", true, { "sts" }, status = true, scale = true, all = true },
  { "apps", "v1", "daemonsets", "DaemonSet", true, { "ds" }, status = true, all = true },
  { "apps", "v1", "controllerrevisions", "ControllerRevision", true, {}, status = false },
  { "batch", "v1", "jobs", "Job", true, {}, status = true, all = true },
  { "batch", "v1", "cronjobs", "CronJob", true, { "cj" }, status = true, all = true },
  { "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", false,
    { "crd", "crds" }, status = true },
  -- RBAC: what manifests (device plugins, agents, operators) bring; kept
  -- and served, not enforced (access entries decide who may do what)
  { "rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", false, {}, status = false },
  { "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", false, {}, status = false },
  { "rbac.authorization.k8s.io", "v1", "roles", "Role", true, {}, status = false },
  { "rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", true, {}, status = false },
  -- reviews: created and answered, never stored (sandbox.k8s.api)
  { "authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview", false, {}, status = false,
    review = true },
  { "authentication.k8s.io", "v1", "selfsubjectreviews", "SelfSubjectReview", false, {}, status = false,
    review = true },
  { "authorization.k8s.io", "v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview", false, {}, status = false,
    review = true },
}

-- the CRDs hypd uses: `always` ones come with every cluster; the others
-- arrive with the EKS add-on that owns them (training and inference
-- operators; cert-manager's with the cert-manager add-on), with managed Karpenter (HyperPod's AutoScaling turned on:
-- sandbox.k8s.controllers.karpenter) or with what a client applies (the
-- KubeRay operator's ray.io CRDs: a new EKS cluster has none)
M.CRDS = {
  { "sagemaker.amazonaws.com", "v1", "hyperpodpytorchjobs", "HyperPodPyTorchJob", true, { "hyperpodpytorchjob", "hpj" },
    columns = { { "STATE", ".status.conditions[-1].type" }, { "AGE", ".metadata.creationTimestamp" } },
    schema = "HyperPodPyTorchJob" },
  { "inference.sagemaker.aws.amazon.com", "v1", "inferenceendpointconfigs", "InferenceEndpointConfig", true, { "iec" },
    columns = { { "STATE", ".status.state" }, { "AGE", ".metadata.creationTimestamp" } },
    schema = "InferenceEndpointConfig" },
  { "inference.sagemaker.aws.amazon.com", "v1", "jumpstartmodels", "JumpStartModel", true, { "jsm" },
    columns = { { "STATE", ".status.state" }, { "AGE", ".metadata.creationTimestamp" } }, schema = "JumpStartModel" },
  { "ray.io", "v1", "rayjobs", "RayJob", true, {} },
  { "ray.io", "v1", "rayclusters", "RayCluster", true, {} },
  { "keda.sh", "v1alpha1", "scaledobjects", "ScaledObject", true, { "so" }, always = true, schema = "ScaledObject" },
  { "karpenter.sh", "v1", "nodepools", "NodePool", false, {}, schema = "NodePool" },
  { "karpenter.sagemaker.amazonaws.com", "v1", "hyperpodnodeclasses", "HyperpodNodeClass", false, {},
    schema = "HyperpodNodeClass" },
  { "cert-manager.io", "v1", "certificates", "Certificate", true, { "cert", "certs" },
    columns = { { "READY", ".status.conditions[-1].status" }, { "SECRET", ".spec.secretName" },
      { "AGE", ".metadata.creationTimestamp" } }, schema = "Certificate" },
  { "cert-manager.io", "v1", "issuers", "Issuer", true, {},
    columns = { { "READY", ".status.conditions[-1].status" }, { "AGE", ".metadata.creationTimestamp" } },
    schema = "Issuer" },
}

local function make(row, verbs)
  if row.review then verbs = { "create" } end
  return {
    group = row[1], version = row[2], resource = row[3], kind = row[4], namespaced = row[5],
    short = row[6] or {}, singular = row[4]:lower(), verbs = verbs, status = row.status ~= false,
    log = row.log, scale = row.scale, review = row.review, token = row.token, columns = row.columns,
    categories = row.all and { "all" } or nil,
  }
end

function M.gv(r) return r.group == "" and r.version or r.group .. "/" .. r.version end

-- the registry of one cluster: r = reg:find(group, version, resource)
local Registry = {}
Registry.__index = Registry

function M.registry()
  local reg = setmetatable({ list = {}, by = {} }, Registry)
  for _, row in ipairs(BUILTIN) do reg:add(make(row, ALL)) end
  return reg
end

function Registry:add(r)
  local key = r.group .. "/" .. r.version .. "/" .. r.resource
  if not self.by[key] then self.list[#self.list + 1] = r end
  self.by[key] = r
  return r
end

function Registry:remove(group, version, resource)
  local key = group .. "/" .. version .. "/" .. resource
  local r = self.by[key]
  if not r then return end
  self.by[key] = nil
  for i, x in ipairs(self.list) do
    if x == r then table.remove(self.list, i) break end
  end
end

function Registry:find(group, version, resource)
  return self.by[group .. "/" .. version .. "/" .. resource]
end

function Registry:by_kind(api_version, kind)
  for _, r in ipairs(self.list) do
    if M.gv(r) == api_version and r.kind == kind then return r end
  end
end

-- groups() -> { {name, versions = {...}} } in a stable order, core first
function Registry:groups()
  local out, seen = {}, {}
  for _, r in ipairs(self.list) do
    local g = seen[r.group]
    if not g then
      g = { name = r.group, versions = {}, vseen = {} }
      seen[r.group] = g
      out[#out + 1] = g
    end
    if not g.vseen[r.version] then
      g.vseen[r.version] = true
      g.versions[#g.versions + 1] = r.version
    end
  end
  return out
end

-- resource(crd_object) -> the resources a CustomResourceDefinition serves
function M.from_crd(crd)
  local spec = crd.spec or {}
  local names = spec.names or {}
  local out = {}
  for _, v in ipairs(spec.versions or {}) do
    if v.served ~= false then
      local cols
      for _, c in ipairs(v.additionalPrinterColumns or {}) do
        cols = cols or {}
        cols[#cols + 1] = { c.name:upper(), c.jsonPath }
      end
      local subs = v.subresources or {}
      out[#out + 1] = {
        group = spec.group, version = v.name, resource = names.plural, kind = names.kind,
        singular = names.singular or (names.kind or ""):lower(), namespaced = spec.scope ~= "Cluster",
        short = names.shortNames or {}, verbs = ALL, status = subs.status ~= nil, columns = cols,
        categories = type(names.categories) == "table" and #names.categories > 0 and names.categories or nil,
        schema = v.schema and v.schema.openAPIV3Schema, crd = crd.metadata.name,
      }
    end
  end
  return out
end

-- crd(row) -> a CustomResourceDefinition object for one of M.CRDS
function M.crd(row)
  local group, version, plural, kind, namespaced, short = row[1], row[2], row[3], row[4], row[5], row[6]
  local cols = {}
  for _, c in ipairs(row.columns or {}) do
    cols[#cols + 1] = { name = c[1]:sub(1, 1) .. c[1]:sub(2):lower(), type = "string", jsonPath = c[2] }
  end
  return {
    apiVersion = "apiextensions.k8s.io/v1", kind = "CustomResourceDefinition",
    metadata = { name = plural .. "." .. group },
    spec = {
      group = group, scope = namespaced and "Namespaced" or "Cluster",
      names = { plural = plural, singular = kind:lower(), kind = kind, listKind = kind .. "List",
        shortNames = short },
      versions = { { name = version, served = true, storage = true,
        subresources = { status = {} },
        additionalPrinterColumns = #cols > 0 and cols or nil,
        -- the schema of sandbox.k8s.crd_schemas when the row names one, else anything goes
        schema = { openAPIV3Schema = row.schema and require("sandbox.k8s.crd_schemas")[row.schema]
          or { type = "object", ["x-kubernetes-preserve-unknown-fields"] = true } } } },
    },
  }
end

M.ALL_VERBS, M.READ_VERBS = ALL, READ
return M
