-- sandbox.k8s.bootstrap_rbac: the ClusterRoles and ClusterRoleBindings an
-- API server makes at start (labelled kubernetes.io/bootstrapping:
-- rbac-defaults), as `kubectl get clusterroles` lists them on EKS: the
-- user-facing roles (cluster-admin, and admin, edit and view, aggregated
-- from the system:aggregate-to-* roles by their labels) and the system:
-- roles people bind to or read. The sandbox authorises by EKS access
-- policies (sandbox.k8s.auth), so these are what a user reads and copies,
-- never what decides a request.
--   seed(cl): creates those missing
local M = {}

local READ = { "get", "list", "watch" }
local WRITE = { "create", "delete", "deletecollection", "patch", "update" }
local ALL = { "create", "delete", "deletecollection", "get", "list", "patch", "update", "watch" }
local EVENTS = { { "", "events.k8s.io" }, { "events" }, { "create", "patch", "update" } }

-- a rule is { apiGroups, resources, verbs } or { urls = {...}, verbs }
local ROLES = {
  { "cluster-admin", { { "*" }, { "*" }, { "*" } }, { urls = { "*" }, { "*" } } },
  { "admin", aggregate = "admin" },
  { "edit", aggregate = "edit", to = "admin" },
  { "view", aggregate = "view", to = "edit" },
  { "system:aggregate-to-admin", to = "admin",
    { { "authorization.k8s.io" }, { "localsubjectaccessreviews" }, { "create" } },
    { { "rbac.authorization.k8s.io" }, { "rolebindings", "roles" }, ALL } },
  { "system:aggregate-to-edit", to = "edit",
    { { "" }, { "pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "secrets", "services/proxy" }, READ },
    { { "" }, { "serviceaccounts" }, { "impersonate" } },
    { { "" }, { "pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy" }, WRITE },
    { { "" }, { "pods/eviction" }, { "create" } },
    { { "" }, { "configmaps", "events", "persistentvolumeclaims", "replicationcontrollers", "replicationcontrollers/scale",
      "secrets", "serviceaccounts", "services", "services/proxy" }, WRITE },
    { { "" }, { "serviceaccounts/token" }, { "create" } },
    { { "apps" }, { "daemonsets", "deployments", "deployments/rollback", "deployments/scale", "replicasets",
      "replicasets/scale", "statefulsets", "statefulsets/scale" }, WRITE },
    { { "autoscaling" }, { "horizontalpodautoscalers" }, WRITE },
    { { "batch" }, { "cronjobs", "jobs" }, WRITE },
    { { "policy" }, { "poddisruptionbudgets" }, WRITE },
    { { "networking.k8s.io" }, { "ingresses", "networkpolicies" }, WRITE },
    { { "coordination.k8s.io" }, { "leases" }, ALL } },
  { "system:aggregate-to-view", to = "view",
    { { "" }, { "configmaps", "endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status", "pods",
      "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts", "services", "services/status" }, READ },
    { { "" }, { "bindings", "events", "limitranges", "namespaces/status", "pods/log", "pods/status",
      "replicationcontrollers/status", "resourcequotas", "resourcequotas/status" }, READ },
    { { "" }, { "namespaces" }, READ },
    { { "discovery.k8s.io" }, { "endpointslices" }, READ },
    { { "apps" }, { "controllerrevisions", "daemonsets", "daemonsets/status", "deployments", "deployments/scale",
      "deployments/status", "replicasets", "replicasets/scale", "replicasets/status", "statefulsets",
      "statefulsets/scale", "statefulsets/status" }, READ },
    { { "autoscaling" }, { "horizontalpodautoscalers", "horizontalpodautoscalers/status" }, READ },
    { { "batch" }, { "cronjobs", "cronjobs/status", "jobs", "jobs/status" }, READ },
    { { "policy" }, { "poddisruptionbudgets", "poddisruptionbudgets/status" }, READ },
    { { "networking.k8s.io" }, { "ingresses", "ingresses/status", "networkpolicies" }, READ } },
  { "system:auth-delegator", { { "authentication.k8s.io" }, { "tokenreviews" }, { "create" } },
    { { "authorization.k8s.io" }, { "subjectaccessreviews" }, { "create" } } },
  { "system:basic-user",
    { { "authorization.k8s.io" }, { "selfsubjectaccessreviews", "selfsubjectrulesreviews" }, { "create" } },
    { { "authentication.k8s.io" }, { "selfsubjectreviews" }, { "create" } } },
  { "system:discovery", { urls = { "/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*",
    "/readyz", "/version", "/version/" }, { "get" } } },
  { "system:public-info-viewer", { urls = { "/healthz", "/livez", "/readyz", "/version", "/version/" }, { "get" } } },
  { "system:monitoring", { urls = { "/healthz", "/healthz/*", "/livez", "/livez/*", "/metrics", "/metrics/slis",
    "/readyz", "/readyz/*" }, { "get" } } },
  { "system:service-account-issuer-discovery",
    { urls = { "/.well-known/openid-configuration", "/openid/v1/jwks" }, { "get" } } },
  { "system:kube-dns", { { "" }, { "endpoints", "services" }, { "list", "watch" } } },
  { "system:kube-aggregator", { { "" }, { "endpoints", "services" }, READ } },
  { "system:node-bootstrapper", { { "certificates.k8s.io" }, { "certificatesigningrequests" },
    { "create", "get", "list", "watch" } } },
  { "system:node-proxier", { { "" }, { "endpoints", "services" }, { "list", "watch" } }, { { "" }, { "nodes" }, READ },
    EVENTS, { { "discovery.k8s.io" }, { "endpointslices" }, { "list", "watch" } } },
  { "system:kubelet-api-admin", { { "" }, { "nodes" }, READ }, { { "" }, { "nodes" }, { "proxy" } },
    { { "" }, { "nodes/log", "nodes/metrics", "nodes/proxy", "nodes/stats" }, { "*" } } },
  { "system:volume-scheduler", { { "" }, { "persistentvolumes" }, { "get", "list", "patch", "update", "watch" } },
    { { "storage.k8s.io" }, { "storageclasses" }, READ },
    { { "" }, { "persistentvolumeclaims" }, { "get", "list", "patch", "update", "watch" } } },
  { "system:persistent-volume-provisioner",
    { { "" }, { "persistentvolumes" }, { "create", "delete", "get", "list", "watch" } },
    { { "" }, { "persistentvolumeclaims" }, { "get", "list", "update", "watch" } },
    { { "storage.k8s.io" }, { "storageclasses" }, READ }, { { "" }, { "events" }, { "watch" } }, EVENTS },
}

-- { name, role, subjects: {kind, name [, namespace]} }
local BINDINGS = {
  { "cluster-admin", "cluster-admin", { { "Group", "system:masters" } } },
  { "system:basic-user", "system:basic-user", { { "Group", "system:authenticated" } } },
  { "system:discovery", "system:discovery", { { "Group", "system:authenticated" } } },
  { "system:public-info-viewer", "system:public-info-viewer",
    { { "Group", "system:authenticated" }, { "Group", "system:unauthenticated" } } },
  { "system:monitoring", "system:monitoring", { { "Group", "system:monitoring" } } },
  { "system:service-account-issuer-discovery", "system:service-account-issuer-discovery",
    { { "Group", "system:serviceaccounts" } } },
  { "system:node-proxier", "system:node-proxier", { { "User", "system:kube-proxy" } } },
  { "system:kube-dns", "system:kube-dns", { { "ServiceAccount", "kube-dns", "kube-system" } } },
  { "system:volume-scheduler", "system:volume-scheduler", { { "User", "system:kube-scheduler" } } },
}

local function meta(name, labels)
  labels["kubernetes.io/bootstrapping"] = "rbac-defaults"
  return { name = name, labels = labels, annotations = { ["rbac.authorization.kubernetes.io/autoupdate"] = "true" } }
end

local function rule(r)
  if r.urls then return { nonResourceURLs = r.urls, verbs = r[1] } end
  return { apiGroups = r[1], resources = r[2], verbs = r[3] }
end

-- rules_of(row): its own rules, or for an aggregated role those of every
-- role labelled into it (view into edit into admin)
local function rules_of(row)
  local out = {}
  if row.aggregate then
    for _, other in ipairs(ROLES) do
      if other.to == row.aggregate then
        for _, r in ipairs(rules_of(other)) do out[#out + 1] = r end
      end
    end
    return out
  end
  for i, r in ipairs(row) do if i > 1 then out[#out + 1] = rule(r) end end
  return out
end

local function create(cl, r, obj)
  local ok, status = cl:create(r, obj)
  if not ok then error("bootstrap " .. obj.kind .. " " .. obj.metadata.name .. ": " .. status.message, 0) end
end

function M.seed(cl)
  local cr = cl.reg:find("rbac.authorization.k8s.io", "v1", "clusterroles")
  local crb = cl.reg:find("rbac.authorization.k8s.io", "v1", "clusterrolebindings")
  for _, row in ipairs(ROLES) do
    if not cl:get(cr, nil, row[1]) then
      local labels = {}
      if row.to then labels["rbac.authorization.k8s.io/aggregate-to-" .. row.to] = "true" end
      create(cl, cr, { apiVersion = "rbac.authorization.k8s.io/v1", kind = "ClusterRole", metadata = meta(row[1], labels),
        aggregationRule = row.aggregate and { clusterRoleSelectors = { { matchLabels = {
          ["rbac.authorization.k8s.io/aggregate-to-" .. row.aggregate] = "true" } } } } or nil,
        rules = rules_of(row) })
    end
  end
  for _, b in ipairs(BINDINGS) do
    if not cl:get(crb, nil, b[1]) then
      local subjects = {}
      for i, s in ipairs(b[3]) do
        subjects[i] = { kind = s[1], name = s[2], namespace = s[3],
          apiGroup = s[1] ~= "ServiceAccount" and "rbac.authorization.k8s.io" or nil }
      end
      create(cl, crb, { apiVersion = "rbac.authorization.k8s.io/v1", kind = "ClusterRoleBinding",
        metadata = meta(b[1], {}), roleRef = { apiGroup = "rbac.authorization.k8s.io", kind = "ClusterRole", name = b[2] },
        subjects = subjects })
    end
  end
end

return M
