-- monitor._kinds: what the monitoring cache keeps of each kind. For each:
-- keep, the json.decode projection its lists and watches decode (nothing
-- else of an object becomes a Lua value), and reduce(obj) -> the small
-- record the cache holds (or nil: not kept). 60,000 pods stay a few tens
-- of megabytes this way.
local M = {}

M.GPU = "nvidia.com/gpu"
M.EFA = "vpc.amazonaws.com/efa"
M.HEALTH = "sagemaker.amazonaws.com/node-health-status"
M.DEEP = "sagemaker.amazonaws.com/deep-health-check-status"
M.GROUP = "sagemaker.amazonaws.com/instance-group-name"
M.TYPE = "node.kubernetes.io/instance-type"
M.DCGM = "dcgm-exporter" -- app.kubernetes.io/name of the DCGM exporter

local META = { name = true, namespace = true, resourceVersion = true, labels = true, creationTimestamp = true }
local META_SHORT = { name = true, namespace = true, resourceVersion = true, creationTimestamp = true }

-- qty(v) -> a count from a Kubernetes quantity of a countable resource
local function qty(v)
  if v == nil then return 0 end
  local n = tonumber(v)
  if n then return n end
  local num, suffix = tostring(v):match("^([%d%.]+)(%a*)$")
  local mult = { k = 1e3, M = 1e6, G = 1e9, Ki = 1024, Mi = 1048576, m = 0.001 }
  return num and (tonumber(num) or 0) * (mult[suffix] or 1) or 0
end
M.qty = qty

local function cond_list(conds, bad)
  local out = {}
  for _, c in ipairs(conds or {}) do
    if not bad or bad(c) then
      out[#out + 1] = { type = c.type, status = c.status, reason = c.reason, message = c.message,
        last = c.lastTransitionTime }
    end
  end
  return out
end

-- a node condition that says something is wrong: Ready not True, any
-- pressure or unavailability True
local function bad_condition(c)
  if c.type == "Ready" then return c.status ~= "True" end
  return c.status == "True"
end
M.bad_condition = bad_condition

-- a pod's projection is as small as it can be (each kept table costs
-- a Lua allocation, and a list decodes 60,000 pods): of a container only
-- its GPU and EFA requests (the API server fills an extended resource's
-- request in from its limit, so requests say it), of a condition what the
-- pending list shows
local CONTAINER = { resources = { requests = { [M.GPU] = true, [M.EFA] = true } } }
local CONDITION = { type = true, status = true, reason = true, message = true, lastTransitionTime = true }

-- a container's request of resource
local function request(c, resource)
  local r = c.resources or {}
  return qty((r.requests or {})[resource])
end

local function pod_request(spec, resource)
  local sum, init = 0, 0
  for _, c in ipairs(spec.containers or {}) do sum = sum + request(c, resource) end
  for _, c in ipairs(spec.initContainers or {}) do init = math.max(init, request(c, resource)) end
  return math.max(sum, init)
end

local function newest_true(conds)
  local best
  for _, c in ipairs(conds or {}) do if c.status == "True" then best = c end end
  return best
end

M.KINDS = {
  { name = "nodes", api_version = "v1", kind = "Node",
    keep = { metadata = META, spec = { taints = true, unschedulable = true },
      status = { capacity = true, allocatable = true, conditions = true } },
    reduce = function(o)
      local l, st, spec = o.metadata.labels or {}, o.status or {}, o.spec or {}
      local ready = "Unknown"
      for _, c in ipairs(st.conditions or {}) do if c.type == "Ready" then ready = c.status end end
      local taints = {}
      for _, t in ipairs(spec.taints or {}) do taints[#taints + 1] = { key = t.key, value = t.value, effect = t.effect } end
      local cap, alloc = st.capacity or {}, st.allocatable or {}
      return { name = o.metadata.name, group = l[M.GROUP], type = l[M.TYPE] or l["beta.kubernetes.io/instance-type"],
        health = l[M.HEALTH], deep = l[M.DEEP], ready = ready, unschedulable = spec.unschedulable == true,
        conditions = cond_list(st.conditions, bad_condition), taints = taints,
        gpu_cap = qty(cap[M.GPU]), gpu_alloc = qty(alloc[M.GPU]), efa_cap = qty(cap[M.EFA]), efa_alloc = qty(alloc[M.EFA]) }
    end },
  { name = "pods", api_version = "v1", kind = "Pod", split = true,
    keep = { metadata = { name = true, namespace = true, resourceVersion = true, creationTimestamp = true },
      spec = { nodeName = true, nodeSelector = { [M.GROUP] = true, [M.TYPE] = true }, containers = CONTAINER,
        initContainers = CONTAINER }, status = { phase = true, conditions = CONDITION } },
    reduce = function(o)
      local spec, st = o.spec or {}, o.status or {}
      local rec = { ns = o.metadata.namespace, name = o.metadata.name, node = spec.nodeName, phase = st.phase or "Unknown",
        gpus = pod_request(spec, M.GPU), efa = pod_request(spec, M.EFA) }
      if rec.phase == "Pending" and not rec.node then
        local sel = spec.nodeSelector or {}
        rec.want_group, rec.want_type = sel[M.GROUP], sel[M.TYPE]
        for _, c in ipairs(st.conditions or {}) do
          if c.type == "PodScheduled" and c.status ~= "True" then
            rec.reason, rec.message, rec.since = c.reason, c.message, c.lastTransitionTime
          end
        end
        rec.since = rec.since or o.metadata.creationTimestamp
      end
      return rec
    end },
  { name = "services", api_version = "v1", kind = "Service",
    keep = { metadata = META, spec = { type = true, clusterIP = true, ports = { name = true, port = true,
      protocol = true, targetPort = true } } },
    reduce = function(o)
      local spec = o.spec or {}
      local ports = {}
      for _, p in ipairs(spec.ports or {}) do
        ports[#ports + 1] = { name = p.name, port = p.port, protocol = p.protocol or "TCP" }
      end
      return { namespace = o.metadata.namespace, name = o.metadata.name, type = spec.type or "ClusterIP",
        cluster_ip = spec.clusterIP, ports = ports,
        dcgm = (o.metadata.labels or {})["app.kubernetes.io/name"] == M.DCGM or nil }
    end },
  { name = "deployments", api_version = "apps/v1", kind = "Deployment",
    keep = { metadata = META_SHORT, spec = { replicas = true },
      status = { replicas = true, readyReplicas = true, availableReplicas = true } },
    reduce = function(o)
      local st = o.status or {}
      return { namespace = o.metadata.namespace, name = o.metadata.name, replicas = (o.spec or {}).replicas or 1,
        ready = st.readyReplicas or 0, available = st.availableReplicas or 0 }
    end },
  { name = "events", api_version = "v1", kind = "Event", fields = "type=Warning",
    keep = { metadata = META_SHORT, type = true, reason = true, message = true, count = true, lastTimestamp = true,
      eventTime = true, firstTimestamp = true, involvedObject = { kind = true, name = true, namespace = true },
      series = { count = true, lastObservedTime = true } },
    reduce = function(o)
      if o.type ~= "Warning" then return nil end
      local io, series = o.involvedObject or {}, o.series or {}
      return { namespace = o.metadata.namespace, object = tostring(io.kind) .. "/" .. tostring(io.name),
        reason = o.reason, message = o.message, count = series.count or o.count or 1,
        last = series.lastObservedTime or o.lastTimestamp or (type(o.eventTime) == "string" and o.eventTime) or
          o.firstTimestamp or o.metadata.creationTimestamp }
    end },
  { name = "inference_endpoints", api_version = "inference.sagemaker.aws.amazon.com/v1",
    kind = "InferenceEndpointConfig",
    keep = { metadata = META_SHORT, spec = { modelName = true, replicas = true },
      status = { state = true, replicas = true } },
    reduce = function(o)
      local spec, st = o.spec or {}, o.status or {}
      return { namespace = o.metadata.namespace, name = o.metadata.name, model = spec.modelName,
        state = st.state or "DeploymentPending", replicas = spec.replicas or 1 }
    end },
  { name = "jumpstart_models", api_version = "inference.sagemaker.aws.amazon.com/v1", kind = "JumpStartModel",
    keep = { metadata = META_SHORT, spec = { model = { modelId = true } }, status = { state = true } },
    reduce = function(o)
      return { namespace = o.metadata.namespace, name = o.metadata.name,
        model_id = ((o.spec or {}).model or {}).modelId, state = (o.status or {}).state or "DeploymentPending" }
    end },
  { name = "pytorch_jobs", api_version = "sagemaker.amazonaws.com/v1", kind = "HyperPodPyTorchJob",
    keep = { metadata = META_SHORT, spec = { replicaSpecs = { replicas = true } },
      status = { conditions = true, restartCount = true } },
    reduce = function(o)
      local spec, st = o.spec or {}, o.status or {}
      local n = 0
      for _, r in ipairs(spec.replicaSpecs or {}) do n = n + (tonumber(r.replicas) or 1) end
      local c = newest_true(st.conditions)
      return { namespace = o.metadata.namespace, name = o.metadata.name, state = c and c.type or "Pending",
        replicas = n, restarts = st.restartCount or 0 }
    end },
  { name = "ray_jobs", api_version = "ray.io/v1", kind = "RayJob",
    keep = { metadata = META_SHORT, status = { jobDeploymentStatus = true, jobStatus = true } },
    reduce = function(o)
      local st = o.status or {}
      local ds = st.jobDeploymentStatus
      return { namespace = o.metadata.namespace, name = o.metadata.name,
        state = (ds ~= nil and ds ~= "") and ds or "New", job_status = st.jobStatus }
    end },
}

return M
