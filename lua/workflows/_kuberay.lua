-- _kuberay: the KubeRay operator as Kubernetes objects kept in the Lua tree
-- (what the kuberay-operator Helm chart 1.6.1 installs), for every tool
-- that installs it (hyperpod_update_advanced_features kuberay_operator;
-- cluster_configure_dependencies may use the same objects):
--   local R = require "_kuberay"
--   R.objects() -> the namespaced objects and the cluster-wide RBAC, in the
--     order they are applied (the namespace first)
--   R.crds() -> the Ray CRDs (RayCluster, RayJob, RayService); applied when
--     missing, never deleted (they hold people's Ray objects, as Helm keeps
--     a chart's CRDs)
--   R.NAMESPACE, R.DEPLOYMENT: where the operator runs
local M = {}

M.VERSION = "v1.6.1"
M.NAMESPACE = "kuberay-system"
M.DEPLOYMENT = "kuberay-operator"
M.IMAGE = "quay.io/kuberay/operator:" .. M.VERSION

local LABELS = [[
    app.kubernetes.io/name: kuberay-operator
    app.kubernetes.io/instance: kuberay-operator
    app.kubernetes.io/version: "1.6.1"]]

-- the metadata of the namespaced objects named kuberay-operator
local OPERATOR = [[
metadata:
  name: kuberay-operator
  namespace: kuberay-system
  labels:
@LABELS@]]

local MANIFESTS = [[
apiVersion: v1
kind: Namespace
metadata:
  name: kuberay-system
  labels:
    kubernetes.io/metadata.name: kuberay-system
---
apiVersion: v1
kind: ServiceAccount
@OPERATOR@
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: kuberay-operator
  labels:
@LABELS@
rules:
- apiGroups: ["ray.io"]
  resources: ["rayclusters", "rayjobs", "rayservices"]
  verbs: ["create", "delete", "get", "list", "patch", "update", "watch"]
- apiGroups: ["ray.io"]
  resources: ["rayclusters/status", "rayjobs/status", "rayservices/status", "rayclusters/finalizers",
              "rayjobs/finalizers", "rayservices/finalizers"]
  verbs: ["get", "patch", "update"]
- apiGroups: [""]
  resources: ["pods", "services", "endpoints", "serviceaccounts", "configmaps", "events", "pods/status",
              "pods/proxy", "services/proxy"]
  verbs: ["create", "delete", "get", "list", "patch", "update", "watch"]
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["create", "delete", "get", "list", "patch", "update", "watch"]
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: ["roles", "rolebindings"]
  verbs: ["create", "delete", "get", "list", "update", "watch"]
- apiGroups: ["networking.k8s.io"]
  resources: ["ingresses", "ingressclasses"]
  verbs: ["create", "delete", "get", "list", "patch", "update", "watch"]
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["create", "get", "list", "update"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: kuberay-operator-leader-election
  namespace: kuberay-system
  labels:
@LABELS@
rules:
- apiGroups: ["", "coordination.k8s.io"]
  resources: ["configmaps", "leases"]
  verbs: ["create", "delete", "get", "list", "patch", "update", "watch"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
---
apiVersion: v1
kind: Service
@OPERATOR@
spec:
  type: ClusterIP
  selector:
    app.kubernetes.io/name: kuberay-operator
    app.kubernetes.io/instance: kuberay-operator
  ports:
  - name: monitoring-port
    port: 8080
    targetPort: 8080
    protocol: TCP
---
apiVersion: apps/v1
kind: Deployment
@OPERATOR@
spec:
  replicas: 1
  strategy:
    type: Recreate
  selector:
    matchLabels:
      app.kubernetes.io/name: kuberay-operator
      app.kubernetes.io/instance: kuberay-operator
  template:
    metadata:
      labels:
        app.kubernetes.io/name: kuberay-operator
        app.kubernetes.io/instance: kuberay-operator
        app.kubernetes.io/component: kuberay-operator
    spec:
      serviceAccountName: kuberay-operator
      securityContext:
        runAsNonRoot: true
      containers:
      - name: kuberay-operator
        image: @IMAGE@
        imagePullPolicy: IfNotPresent
        command: ["/manager"]
        args: ["--feature-gates=RayClusterStatusConditions=true", "--enable-leader-election=true"]
        ports:
        - name: http
          containerPort: 8080
          protocol: TCP
        livenessProbe:
          httpGet:
            path: /metrics
            port: http
          initialDelaySeconds: 10
          periodSeconds: 5
        readinessProbe:
          httpGet:
            path: /metrics
            port: http
          initialDelaySeconds: 10
          periodSeconds: 5
        resources:
          limits:
            cpu: 100m
            memory: 512Mi
          requests:
            cpu: 100m
            memory: 512Mi
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
]]

local CRDS = { { "rayclusters", "RayCluster" }, { "rayjobs", "RayJob" }, { "rayservices", "RayService" } }

-- the chart's printer columns and categories (kubebuilder markers of
-- ray-operator/apis/ray/v1/*_types.go), so kubectl get prints what KubeRay's do
local function col(name, typ, path) return { name = name, type = typ, jsonPath = path } end
local COLUMNS = {
  RayCluster = { col("desired workers", "integer", ".status.desiredWorkerReplicas"),
    col("available workers", "integer", ".status.availableWorkerReplicas"), col("cpus", "string", ".status.desiredCPU"),
    col("memory", "string", ".status.desiredMemory"), col("gpus", "string", ".status.desiredGPU"),
    col("status", "string", ".status.state"), col("age", "date", ".metadata.creationTimestamp") },
  RayJob = { col("job status", "string", ".status.jobStatus"),
    col("deployment status", "string", ".status.jobDeploymentStatus"),
    col("ray cluster name", "string", ".status.rayClusterName"), col("start time", "string", ".status.startTime"),
    col("end time", "string", ".status.endTime"), col("age", "date", ".metadata.creationTimestamp") },
  RayService = { col("service status", "string", ".status.serviceStatus"),
    col("num serve endpoints", "string", ".status.numServeEndpoints") },
}

-- binding(kind, name, namespace) -> the (Cluster)RoleBinding of the
-- operator's service account to the role of that name
local function binding(kind, name, ns)
  return { apiVersion = "rbac.authorization.k8s.io/v1", kind = kind .. "Binding",
    metadata = { name = name, namespace = ns, labels = { ["app.kubernetes.io/name"] = "kuberay-operator",
      ["app.kubernetes.io/instance"] = "kuberay-operator", ["app.kubernetes.io/version"] = "1.6.1" } },
    roleRef = { apiGroup = "rbac.authorization.k8s.io", kind = kind, name = name },
    subjects = { { kind = "ServiceAccount", name = "kuberay-operator", namespace = M.NAMESPACE } } }
end

function M.objects()
  local text = MANIFESTS:gsub("@OPERATOR@", function() return OPERATOR end):gsub("@LABELS@", function() return LABELS end)
    :gsub("@IMAGE@", function() return M.IMAGE end)
  local out = {}
  for _, o in ipairs(hypd.yaml.decode_all(text)) do
    out[#out + 1] = o
    -- each role followed by its binding
    if o.kind == "ClusterRole" then out[#out + 1] = binding("ClusterRole", o.metadata.name) end
    if o.kind == "Role" then out[#out + 1] = binding("Role", o.metadata.name, M.NAMESPACE) end
  end
  return out
end

function M.crds()
  local out = {}
  for i, c in ipairs(CRDS) do
    local plural, kind = c[1], c[2]
    out[i] = { apiVersion = "apiextensions.k8s.io/v1", kind = "CustomResourceDefinition",
      metadata = { name = plural .. ".ray.io" },
      spec = { group = "ray.io", scope = "Namespaced",
        names = { plural = plural, singular = kind:lower(), kind = kind, listKind = kind .. "List",
          categories = kind ~= "RayService" and { "all" } or nil },
        versions = { { name = "v1", served = true, storage = true, subresources = { status = hypd.json.object() },
          additionalPrinterColumns = COLUMNS[kind],
          schema = { openAPIV3Schema = { type = "object", ["x-kubernetes-preserve-unknown-fields"] = true } } } } } }
  end
  return out
end

return M
