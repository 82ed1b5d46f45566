-- sandbox.k8s.admit: what the API server fills in or refuses when an
-- object of some kinds is created, after the name and namespace checks and
-- the uid (which a Job's selector names) are set. create(cl, r, obj) ->
-- nil | Status (the create is refused).
local json = require "hypd.json"

local M = {}

local function invalid(r, name, field, why, reason)
  return { kind = "Status", apiVersion = "v1", metadata = json.object(), status = "Failure", code = 422,
    -- the kind qualified by its group (a core kind by none: `Service "x" is invalid`)
    reason = "Invalid", message = string.format("%s %q is invalid: %s: %s", r.group ~= "" and r.kind .. "." .. r.group
      or r.kind, name, field, why),
    details = { name = name, group = r.group ~= "" and r.group or nil, kind = r.kind,
      causes = { { reason = reason or "FieldValueInvalid", message = why, field = field } } } }
end

local by_kind = {}

-- batch/v1 CronJob: SetDefaults_CronJob
by_kind["batch/CronJob"] = function(_, _, obj)
  local spec = obj.spec or json.object()
  obj.spec = spec
  if spec.concurrencyPolicy == nil or spec.concurrencyPolicy == "" then spec.concurrencyPolicy = "Allow" end
  if spec.suspend == nil then spec.suspend = false end
  if spec.successfulJobsHistoryLimit == nil then spec.successfulJobsHistoryLimit = 3 end
  if spec.failedJobsHistoryLimit == nil then spec.failedJobsHistoryLimit = 1 end
end

-- apps/v1 Deployment: SetDefaults_Deployment (replicas, the RollingUpdate
-- strategy at 25%/25%, revisionHistoryLimit, progressDeadlineSeconds)
by_kind["apps/Deployment"] = function(_, _, obj)
  local spec = obj.spec or json.object()
  obj.spec = spec
  if spec.replicas == nil then spec.replicas = 1 end
  spec.strategy = spec.strategy or { type = "RollingUpdate" }
  spec.strategy.type = spec.strategy.type or "RollingUpdate"
  if spec.strategy.type == "RollingUpdate" then
    local ru = spec.strategy.rollingUpdate or {}
    spec.strategy.rollingUpdate = ru
    if ru.maxSurge == nil then ru.maxSurge = "25%" end
    if ru.maxUnavailable == nil then ru.maxUnavailable = "25%" end
  end
  if spec.revisionHistoryLimit == nil then spec.revisionHistoryLimit = 10 end
  if spec.progressDeadlineSeconds == nil then spec.progressDeadlineSeconds = 600 end
end

-- apps/v1 StatefulSet and DaemonSet: SetDefaults_StatefulSet and
-- SetDefaults_DaemonSet (a RollingUpdate updateStrategy, which kubectl
-- rollout status needs, and revisionHistoryLimit 10)
by_kind["apps/StatefulSet"] = function(_, _, obj)
  local spec = obj.spec or json.object()
  obj.spec = spec
  if spec.replicas == nil then spec.replicas = 1 end
  spec.podManagementPolicy = spec.podManagementPolicy or "OrderedReady"
  spec.updateStrategy = spec.updateStrategy or { type = "RollingUpdate" }
  spec.updateStrategy.type = spec.updateStrategy.type or "RollingUpdate"
  if spec.updateStrategy.type == "RollingUpdate" then
    spec.updateStrategy.rollingUpdate = spec.updateStrategy.rollingUpdate or { partition = 0 }
    if spec.updateStrategy.rollingUpdate.partition == nil then spec.updateStrategy.rollingUpdate.partition = 0 end
  end
  if spec.revisionHistoryLimit == nil then spec.revisionHistoryLimit = 10 end
  spec.persistentVolumeClaimRetentionPolicy = spec.persistentVolumeClaimRetentionPolicy or
    { whenDeleted = "Retain", whenScaled = "Retain" }
end

by_kind["apps/DaemonSet"] = function(_, _, obj)
  local spec = obj.spec or json.object()
  obj.spec = spec
  spec.updateStrategy = spec.updateStrategy or { type = "RollingUpdate" }
  spec.updateStrategy.type = spec.updateStrategy.type or "RollingUpdate"
  if spec.updateStrategy.type == "RollingUpdate" then
    local ru = spec.updateStrategy.rollingUpdate or {}
    spec.updateStrategy.rollingUpdate = ru
    if ru.maxUnavailable == nil then ru.maxUnavailable = 1 end
    if ru.maxSurge == nil then ru.maxSurge = 0 end
  end
  if spec.revisionHistoryLimit == nil then spec.revisionHistoryLimit = 10 end
end

-- v1 Pod: a container's resource requests default to its limits
-- (SetDefaults_Pod), so kubectl describe pod shows both
by_kind["/Pod"] = function(_, _, obj)
  for _, list in ipairs { (obj.spec or {}).containers or {}, (obj.spec or {}).initContainers or {} } do
    for _, c in ipairs(list) do
      local lim = type(c.resources) == "table" and c.resources.limits
      if type(lim) == "table" and next(lim) then
        c.resources.requests = c.resources.requests or json.object()
        for k, v in pairs(lim) do
          if c.resources.requests[k] == nil then c.resources.requests[k] = v end
        end
      end
    end
  end
end

-- v1 Namespace: the API server labels every namespace with its name
-- (kubernetes.io/metadata.name), on create and on every update
local function ns_label(obj)
  obj.metadata.labels = obj.metadata.labels or json.object()
  obj.metadata.labels["kubernetes.io/metadata.name"] = obj.metadata.name
end
by_kind["/Namespace"] = function(_, _, obj) ns_label(obj) end

-- v1 Secret: the type defaults to Opaque (SetDefaults_Secret)
by_kind["/Secret"] = function(_, _, obj)
  if obj.type == nil or obj.type == "" then obj.type = "Opaque" end
end

-- batch/v1 Job: unless spec.manualSelector, the selector is generated from
-- the uid and the pod template gets the labels it selects (the Job
-- strategy's PrepareForCreate and generateSelector)
-- SetDefaults_Job, which also runs when the object is read back: both
-- completions and parallelism 1 when neither is set, backoffLimit 6, and
-- a Job without labels takes its pod template's (the selected ones)
local function job_defaults(obj)
  local spec = obj.spec
  if spec.completions == nil and spec.parallelism == nil then spec.completions = 1 end
  if spec.parallelism == nil then spec.parallelism = 1 end
  if spec.backoffLimit == nil then spec.backoffLimit = 6 end
  if spec.completionMode == nil then spec.completionMode = "NonIndexed" end
  if spec.suspend == nil then spec.suspend = false end
  local labels = ((spec.template or {}).metadata or {}).labels
  if labels and next(labels) and next(obj.metadata.labels or {}) == nil then
    local l = json.object()
    for k, v in pairs(labels) do l[k] = v end
    obj.metadata.labels = l
  end
end

by_kind["batch/Job"] = function(_, r, obj)
  local spec = obj.spec or json.object()
  obj.spec = spec
  if spec.manualSelector == true then
    job_defaults(obj)
    return nil
  end
  local uid, name = obj.metadata.uid, obj.metadata.name
  if spec.selector ~= nil then
    return invalid(r, name, "spec.selector", "Invalid value: " .. json.encode(spec.selector) ..
      ": `selector` will be auto-generated")
  end
  spec.selector = { matchLabels = { ["batch.kubernetes.io/controller-uid"] = uid } }
  local t = spec.template or json.object()
  spec.template = t
  t.metadata = t.metadata or json.object()
  local l = t.metadata.labels or json.object()
  t.metadata.labels = l
  l["batch.kubernetes.io/controller-uid"], l["batch.kubernetes.io/job-name"] = uid, name
  l["controller-uid"], l["job-name"] = uid, name
  job_defaults(obj)
  return nil
end

-- storage.k8s.io/v1 StorageClass: SetDefaults_StorageClass
by_kind["storage.k8s.io/StorageClass"] = function(_, _, obj)
  if obj.reclaimPolicy == nil or obj.reclaimPolicy == "" then obj.reclaimPolicy = "Delete" end
  if obj.volumeBindingMode == nil or obj.volumeBindingMode == "" then obj.volumeBindingMode = "Immediate" end
end

-- storage.k8s.io/v1 CSIDriver: SetDefaults_CSIDriver
by_kind["storage.k8s.io/CSIDriver"] = function(_, _, obj)
  local spec = obj.spec or json.object()
  obj.spec = spec
  for k, v in pairs { attachRequired = true, podInfoOnMount = false, storageCapacity = false,
    requiresRepublish = false, seLinuxMount = false, fsGroupPolicy = "ReadWriteOnceWithFSType" } do
    if spec[k] == nil then spec[k] = v end
  end
  if spec.volumeLifecycleModes == nil then spec.volumeLifecycleModes = { "Persistent" } end
end

-- the service CIDR EKS gives a cluster (IPv4) and the first IP, the
-- `kubernetes` Service's; kube-dns is 10.100.0.10 there
M.SERVICE_CIDR, M.KUBERNETES_IP = "10.100.0.0/16", "10.100.0.1"
local function ip_of(n) return string.format("10.100.%d.%d", n >> 8, n & 255) end
local function offset(ip)
  local a, b = tostring(ip):match("^10%.100%.(%d+)%.(%d+)$")
  a, b = tonumber(a), tonumber(b)
  if not a or a > 255 or b > 255 then return nil end
  local n = (a << 8) | b
  if n == 0 or n == 0xffff then return nil end
  return n
end

local function used_ips(cl, r)
  local used = {}
  for _, s in ipairs(cl:list(r)) do
    local ip = (s.spec or {}).clusterIP
    if ip and ip ~= "None" then used[ip] = s end
  end
  return used
end

-- v1 Service: the defaults the API server sets, a ClusterIP from the
-- service CIDR (or the one asked for, checked) and NodePorts for NodePort
-- and LoadBalancer Services
by_kind["/Service"] = function(cl, r, obj)
  local spec = obj.spec or json.object()
  obj.spec = spec
  local name = obj.metadata.name
  spec.type = spec.type or "ClusterIP"
  spec.sessionAffinity = spec.sessionAffinity or "None"
  for _, p in ipairs(spec.ports or {}) do
    p.protocol = p.protocol or "TCP"
    if spec.type ~= "ExternalName" then p.targetPort = p.targetPort or p.port end
  end
  if spec.type == "ExternalName" then return nil end
  spec.internalTrafficPolicy = spec.internalTrafficPolicy or "Cluster"
  spec.ipFamilies = spec.ipFamilies or { "IPv4" }
  spec.ipFamilyPolicy = spec.ipFamilyPolicy or "SingleStack"
  local want = spec.clusterIP or (spec.clusterIPs or {})[1]
  if want == "None" then
    spec.clusterIP, spec.clusterIPs = "None", { "None" }
  else
    local used = used_ips(cl, r)
    if want and want ~= "" then
      local why
      if not offset(want) then
        why = string.format("Invalid value: []string{%q}: failed to allocate IP %s: the provided IP (%s) is not " ..
          "in the valid range. The range of valid IPs is %s", want, want, want, M.SERVICE_CIDR)
      elseif used[want] then
        why = string.format("Invalid value: []string{%q}: failed to allocate IP %s: provided IP is already " ..
          "allocated", want, want)
      end
      if why then return invalid(r, name, "spec.clusterIPs", why) end
    else
      -- a stable first choice from the name, then the next free one
      local h = 0
      for c in (obj.metadata.namespace .. "/" .. name):gmatch(".") do h = (h * 31 + c:byte()) % 65521 end
      local n = 16 + h % (0xffff - 17)
      while used[ip_of(n)] do n = n % (0xfffe) + 1 end
      want = ip_of(n)
    end
    spec.clusterIP, spec.clusterIPs = want, { want }
  end
  if spec.type == "NodePort" or spec.type == "LoadBalancer" then
    spec.externalTrafficPolicy = spec.externalTrafficPolicy or "Cluster"
    local taken = {}
    for _, s in ipairs(cl:list(r)) do
      for _, p in ipairs((s.spec or {}).ports or {}) do if p.nodePort then taken[p.nodePort] = true end end
    end
    local n = 30000
    for _, p in ipairs(spec.ports or {}) do
      if not p.nodePort then
        while taken[n] do n = n + 1 end
        p.nodePort, taken[n] = n, true
      end
    end
  end
  return nil
end

-- update(cl, r, old, new): what an update may not take away: a Service
-- keeps its ClusterIP and NodePorts when the new one omits them, a
-- Namespace its kubernetes.io/metadata.name label
function M.update(_, r, old, new)
  if r.group == "" and r.kind == "Namespace" and new.metadata then return ns_label(new) end
  -- the apps kinds' defaults hold on every write, as the API server decodes
  -- each body with them (an update whose spec leaves out updateStrategy gets it)
  if r.group == "apps" and by_kind["apps/" .. r.kind] then return by_kind["apps/" .. r.kind](nil, r, new) end
  if r.group ~= "" or r.kind ~= "Service" or not old.spec or not new.spec then return end
  new.spec.clusterIP = new.spec.clusterIP or old.spec.clusterIP
  new.spec.clusterIPs = new.spec.clusterIPs or old.spec.clusterIPs
  local ports = {}
  for _, p in ipairs(old.spec.ports or {}) do ports[(p.name or "") .. "/" .. tostring(p.port)] = p.nodePort end
  for _, p in ipairs(new.spec.ports or {}) do
    p.nodePort = p.nodePort or ports[(p.name or "") .. "/" .. tostring(p.port)]
  end
end

function M.create(cl, r, obj)
  local f = by_kind[r.group .. "/" .. r.kind]
  if f then return f(cl, r, obj) end
  return nil
end

M.invalid = invalid
return M
