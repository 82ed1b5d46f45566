-- _training_jobs: what the training job tools share (and the logs of jobs
-- read): the kinds a recipe
-- makes (HyperPodPyTorchJob, RayJob) and the operator each needs, the
-- checks training_submit makes before creating anything (the operator is
-- on; some instance group can ever hold the request), and a job's view
-- (phase, replicas, restarts of the budget, pods and nodes, events, logs).
local cap = require "_capacity"

local M = {}

M.MANAGED_BY = "app.kubernetes.io/managed-by"
M.GROUP_LABEL = cap.GROUP_LABEL
M.TYPE_LABEL = "node.kubernetes.io/instance-type"

-- the job kinds: API version, the CRD that serves it, and the call that
-- enables its operator
M.KINDS = {
  HyperPodPyTorchJob = { api = "sagemaker.amazonaws.com/v1", crd = "hyperpodpytorchjobs.sagemaker.amazonaws.com",
    operator = "the HyperPod training operator (EKS add-on amazon-sagemaker-hyperpod-training-operator)",
    fix = "hyperpod_update_advanced_features training_operator=true" },
  RayJob = { api = "ray.io/v1", crd = "rayjobs.ray.io", operator = "KubeRay (the ray.io CRDs)",
    fix = "cluster_configure_dependencies kuberay=true" },
}
M.ORDER = { "HyperPodPyTorchJob", "RayJob" }

local function missing(err)
  return type(err) == "table" and (err.code == "NotFound" or err.status == 404)
end

-- served(conn, kind) -> true when the kind's CRD is on the cluster
function M.served(conn, kind)
  local k = M.KINDS[kind]
  local o, err = conn:get("apiextensions.k8s.io/v1", "CustomResourceDefinition", k.crd)
  if o then return true end
  if missing(err) then return false end
  error(err, 0)
end

-- operator_missing(conn, kind) -> nil | why: the kind's CRD is served but
-- no operator runs to reconcile it (RayJob: no available Deployment running
-- a kuberay/operator image, in any namespace)
function M.operator_missing(conn, kind)
  if kind ~= "RayJob" then return nil end
  for _, d in ipairs(conn:list("apps/v1", "Deployment", { all_namespaces = true }) or {}) do
    for _, c in ipairs((((d.spec or {}).template or {}).spec or {}).containers or {}) do
      if tostring(c.image or ""):find("kuberay/operator", 1, true) and
        (tonumber((d.status or {}).availableReplicas) or 0) > 0 then return nil end
    end
  end
  return "the ray.io CRDs are there but no KubeRay operator Deployment is available"
end

-- placements(obj) -> { {replicas, selector} } the pod sets a job object asks for
function M.placements(o)
  local out = {}
  local function add(n, tpl)
    out[#out + 1] = { replicas = tonumber(n) or 1, selector = ((tpl or {}).spec or {}).nodeSelector or {} }
  end
  if o.kind == "RayJob" then
    local rc = (o.spec or {}).rayClusterSpec or {}
    add(1, (rc.headGroupSpec or {}).template)
    for _, g in ipairs(rc.workerGroupSpecs or {}) do add(g.replicas, g.template) end
  else
    for _, r in ipairs((o.spec or {}).replicaSpecs or {}) do add(r.replicas, r.template) end
  end
  return out
end

-- fit(describe, obj): refuses (naming params.instance_type, params.instance_group
-- or params.replicas) when no instance group of the HyperPod cluster can ever
-- hold the job's pods: the group or type is not in the cluster, or the pods
-- placed on it outnumber its instances (TargetCount: what it is scaled to)
function M.fit(d, o)
  local groups = d.InstanceGroups or {}
  local names = {}
  for _, g in ipairs(groups) do
    names[#names + 1] = g.InstanceGroupName .. " (" .. tostring(g.InstanceType) .. " x" ..
      tostring(g.TargetCount or g.CurrentCount or 0) .. ")"
  end
  local have = #names > 0 and table.concat(names, ", ") or "none"
  for _, pl in ipairs(M.placements(o)) do
    local gname, itype = pl.selector[M.GROUP_LABEL], pl.selector[M.TYPE_LABEL]
    local n, field, what = 0, nil, nil
    if gname then
      field, what = "params.instance_group", "instance group " .. gname
      local found
      for _, g in ipairs(groups) do
        if g.InstanceGroupName == gname then found = g; n = g.TargetCount or g.CurrentCount or 0 end
      end
      if not found then
        hypd.errors.refuse(field, "exists", string.format("instance_group: HyperPod cluster %s has no instance group %s " ..
          "(groups: %s); add it with hyperpod_add_instance_group or pick one of these", d.ClusterName, gname, have))
      end
    elseif itype then
      field, what = "params.instance_type", "instance type " .. itype
      local found
      for _, g in ipairs(groups) do
        if g.InstanceType == itype then found = true; n = n + (g.TargetCount or g.CurrentCount or 0) end
      end
      if not found then
        hypd.errors.refuse(field, "exists", string.format("instance_type: HyperPod cluster %s has no instance group of %s " ..
          "(groups: %s); add one with hyperpod_add_instance_group or pick a type it has", d.ClusterName, itype, have))
      end
    end
    if field and pl.replicas > n then
      hypd.errors.refuse("params.replicas", "fits", string.format("replicas: %d pods on %s can never run: it has %d " ..
        "instance(s) (groups: %s); lower replicas or scale the group with hyperpod_scale_instance_group",
        pl.replicas, what, n, have))
    end
  end
end

-- elastic_check(describe, obj): refuses, before anything is created, what
-- HyperPod does not allow the job on this cluster (the rules and their
-- sources: recipes/_common.lua M.ELASTIC): elastic training on spot
-- capacity (a group the pods may land on has CapacityRequirements.Spot) or
-- with managed tiered checkpointing (TieredStorageConfig Mode Enable);
-- checkpointless training with managed tiered checkpointing
function M.elastic_check(d, o)
  if o.kind ~= "HyperPodPyTorchJob" then return end
  local spec = o.spec or {}
  local tiered = ((d.TieredStorageConfig or {}).Mode == "Enable")
  local checkpointless = ((o.metadata or {}).labels or {})["hypd.io/checkpointless"] == "true"
  if checkpointless and tiered then
    hypd.errors.refuse("params.checkpointless", "tiered_checkpointing", string.format("checkpointless: HyperPod " ..
      "cluster %s has managed tiered checkpointing on (TieredStorageConfig), which AWS documents as incompatible with " ..
      "checkpointless training; drop checkpointless or turn tiered checkpointing off " ..
      "(hyperpod_disable_advanced_features tiered_checkpointing=true)", d.ClusterName))
  end
  if not spec.elasticPolicy then return end
  if tiered then
    hypd.errors.refuse("params.elastic", "tiered_checkpointing", string.format("elastic: HyperPod cluster %s has " ..
      "managed tiered checkpointing on (TieredStorageConfig Mode Enable); hypd does not offer elastic training with it: drop " ..
      "elastic or turn tiered checkpointing off", d.ClusterName))
  end
  for _, pl in ipairs(M.placements(o)) do
    local gname, itype = pl.selector[M.GROUP_LABEL], pl.selector[M.TYPE_LABEL]
    for _, g in ipairs(d.InstanceGroups or {}) do
      local hit = (gname and g.InstanceGroupName == gname) or (not gname and itype and g.InstanceType == itype)
      if hit and cap.capacity_type(g) == "spot" then
        hypd.errors.refuse("params.elastic", "spot", string.format("elastic: instance group %s (%s) runs on spot capacity; " ..
          "elastic training is not offered on spot (a reclaim takes nodes before the job can scale down " ..
          "gracefully): drop elastic, or place the job on an on-demand group with instance_group",
          g.InstanceGroupName, tostring(g.InstanceType)))
      end
    end
  end
end

-- phase(job) -> the newest True condition's type (Created, Running,
-- Restarting, Completed, Failed), "Pending" when there is none
function M.phase(job)
  local st = job.status or {}
  local best, at
  for _, c in ipairs(st.conditions or {}) do
    if c.status == "True" then
      local t = c.lastTransitionTime or ""
      if not at or t >= at then best, at = c.type, t end
    end
  end
  if job.kind == "RayJob" then
    local s = st.jobDeploymentStatus or st.jobStatus
    if s == "Complete" or st.jobStatus == "SUCCEEDED" then return "Completed" end
    if s == "Failed" or st.jobStatus == "FAILED" then return "Failed" end
    if st.jobStatus == "RUNNING" then return "Running" end
    return s or "Pending"
  end
  return best or "Pending"
end

M.DONE = { Completed = true, Failed = true }

-- budget(job) -> the restart budget (runPolicy.jobMaxRetryCount)
function M.budget(job)
  local rp = (job.spec or {}).runPolicy or {}
  return tonumber(rp.jobMaxRetryCount) or (job.kind == "RayJob" and tonumber((job.spec or {}).backoffLimit)) or 0
end

function M.replicas(job)
  local n = 0
  for _, pl in ipairs(M.placements(job)) do n = n + pl.replicas end
  return n
end

-- restarts(job) -> restarts used: restartCount; a RayJob's failed attempts
-- beyond the first (each retry is a new Ray cluster)
function M.restarts(job)
  local st = job.status or {}
  if job.kind == "RayJob" then
    local f = tonumber(st.failed) or 0
    local done = st.jobDeploymentStatus == "Failed"
    return math.max(0, done and f - 1 or f)
  end
  return tonumber(st.restartCount) or 0
end

-- summary(job) -> the short view training_list_jobs gives
function M.summary(job)
  local md = job.metadata
  return { name = md.name, namespace = md.namespace, kind = job.kind, recipe = (md.labels or {})["hypd.io/recipe"],
    phase = M.phase(job), replicas = M.replicas(job), restarts = M.restarts(job),
    max_retries = M.budget(job), created = md.creationTimestamp }
end

-- find(conn, name, ns) -> the job object (either kind) | nil
function M.find(conn, name, ns)
  for _, kind in ipairs(M.ORDER) do
    local k = M.KINDS[kind]
    local o, err = conn:get(k.api, kind, name, { namespace = ns })
    if o then return o end
    if not missing(err) then error(err, 0) end
  end
end

-- pods(conn, job) -> the job's pods
function M.pods(conn, job)
  local ns, name = job.metadata.namespace, job.metadata.name
  local sel = job.kind == "RayJob" and { ["ray.io/cluster"] = ((job.status or {}).rayClusterName or name) }
    or { HPJob = name }
  local items = conn:list("v1", "Pod", { namespace = ns, labels = sel }) or {}
  if job.kind == "RayJob" then
    -- the submitter Job's pod: the entrypoint's output (it stays after the cluster goes)
    for _, p in ipairs(conn:list("v1", "Pod", { namespace = ns, labels = { ["ray.io/originated-from-crd"] = "RayJob",
      ["ray.io/originated-from-cr-name"] = name } }) or {}) do
      items[#items + 1] = p
    end
  end
  if #items == 0 then
    -- any pod the job owns (its label may differ on a real operator)
    for _, p in ipairs(conn:list("v1", "Pod", { namespace = ns }) or {}) do
      for _, r in ipairs(p.metadata.ownerReferences or {}) do
        if r.uid == job.metadata.uid then items[#items + 1] = p end
      end
    end
  end
  return items
end

return M
