-- inference_set_autoscaling: a KEDA ScaledObject (keda.sh/v1alpha1) that
-- scales an inference Deployment between min_replicas and max_replicas on a
-- Prometheus query, as the reference's kedaManager does (Prometheus at
-- prometheus-server.monitoring; the scale target is the worker Deployment).
-- The default query is the queue depth of the deployment's engine: vLLM
-- vllm:num_requests_waiting, SGLang sglang:num_queue_reqs, the SGLang
-- router sgl_router_job_queue_depth, summed over its pods.
--
-- Before any write it refuses min_replicas > max_replicas (naming both), a
-- deployment that is missing, a cluster without KEDA (no ScaledObject CRD:
-- the HyperPod inference operator's add-on runs it), a managed or JumpStart
-- deployment (the operator owns its Deployment), a deployment another
-- ScaledObject already scales, and an engine it cannot derive a query for.
local P = require "_params"
local K = require "_k8s_objects"
local S = require "inference._serving"
local cap = require "_capacity"
local hp = require "_hyperpod"

local API = "keda.sh/v1alpha1"
local CRD = "scaledobjects.keda.sh"
local ENABLE = "hyperpod_update_advanced_features inference_operator=true"


-- engine(dep) -> "vllm" | "sglang" | "router" | nil, from what its containers run
local function engine(dep)
  if ((dep.metadata or {}).labels or {})["hypd.io/inference-kind"] == "router" then return "router" end
  for _, c in ipairs(((dep.spec.template or {}).spec or {}).containers or {}) do
    local cmd = {}
    for _, l in ipairs { c.command or {}, c.args or {} } do for _, w in ipairs(l) do cmd[#cmd + 1] = tostring(w) end end
    local s = " " .. table.concat(cmd, " ") .. " "
    local image = tostring(c.image or ""):lower():gsub("[:@].*$", "")
    if s:find("sglang_router.launch_router", 1, true) then return "router" end
    if s:find("sglang.launch_server", 1, true) then return "sglang" end
    if s:find("vllm serve", 1, true) or s:find("vllm.entrypoints", 1, true) or image:find("vllm", 1, true) then
      return "vllm"
    end
  end
end

local METRIC = { vllm = "vllm:num_requests_waiting", sglang = "sglang:num_queue_reqs",
  router = "sgl_router_job_queue_depth" }

local function check(ctx)
  local p, st = ctx.params, ctx.state
  local conn, e = hp.k8s(ctx, p)
  if not K.get(conn, "apiextensions.k8s.io/v1", "CustomResourceDefinition", CRD) then
    hypd.errors.refuse("name", "keda", string.format("KEDA is not installed on cluster %s (no %s CRD), so nothing would " ..
      "act on a ScaledObject: enable the HyperPod inference operator, whose add-on runs KEDA, with %s cluster=%s, " ..
      "then call again", e.name, CRD, ENABLE, e.name), { code = "CONFLICT",
        field_message = "KEDA is not installed: " .. ENABLE .. " cluster=" .. e.name, fix = ENABLE .. " cluster=" .. e.name })
  end
  local dep = S.deployment(conn, p.namespace, p.name)
  if not dep then
    hypd.errors.refuse("name", "exists", string.format("name: no deployment %s/%s to scale (inference_list lists them)",
      p.namespace, p.name), { field_message = "name: no such deployment" })
  end
  -- the inference operator owns a managed or JumpStart deployment's
  -- Deployment and sets its replicas from the custom resource: a second
  -- scaler would fight it (managed: the resource's own autoScalingSpec)
  for _, r in ipairs((dep.metadata or {}).ownerReferences or {}) do
    if r.kind == "InferenceEndpointConfig" or r.kind == "JumpStartModel" then
      local how = r.kind == "InferenceEndpointConfig" and string.format("call inference_deploy_managed name=%s " ..
        "again with min_replicas, max_replicas and prometheus_query (its autoScalingSpec)", r.name) or
        string.format("set its replicas with inference_scale name=%s", r.name)
      hypd.errors.refuse("name", "operator_managed", string.format("name: deployment %s/%s belongs to %s %s: the HyperPod " ..
        "inference operator sets its replicas, so a KEDA ScaledObject on it would fight the operator; %s",
        p.namespace, dep.metadata.name, r.kind, r.name, how), { field_message = "name: " .. r.kind .. " " .. r.name ..
        " owns this Deployment" })
    end
  end
  st.target = dep.metadata.name
  local so = p.scaled_object_name or (st.target .. "-scaler")
  st.so = so
  for _, o in ipairs(conn:list(API, "ScaledObject", { namespace = p.namespace }) or {}) do
    local ref = (o.spec or {}).scaleTargetRef or {}
    if ref.name == st.target and (ref.kind or "Deployment") == "Deployment" and o.metadata.name ~= so then
      hypd.errors.refuse("scaled_object_name", "one_per_target", string.format("deployment %s is already scaled by " ..
        "ScaledObject %s (KEDA lets one ScaledObject manage a workload): change that one (scaled_object_name=%s) " ..
        "or delete it first",
        st.target, o.metadata.name, o.metadata.name),
        { code = "CONFLICT", field_message = "scaled_object_name: " .. o.metadata.name .. " already scales it" })
    end
  end
  local labels = (dep.metadata or {}).labels or {}
  st.inference = labels["hypd.io/inference"] or st.target
  st.kind = labels["hypd.io/inference-kind"] or "container"
  st.engine = engine(dep)
  if p.query then
    st.query = p.query
  else
    if not st.engine then
      hypd.errors.refuse("query", "required",
        string.format("query: deployment %s runs neither vLLM, SGLang nor the SGLang router, so there is no " ..
        "default queue-depth query; give query (a PromQL expression)", st.target),
        { field_message = "query: no default for this deployment's engine" })
    end
    st.query = string.format('sum(%s{namespace="%s",pod=~"%s-.*"})', METRIC[st.engine], p.namespace, st.target)
  end
end

local function object(p, st)
  local function num(v) return math.type(v) == "integer" and tostring(v) or string.format("%g", v) end
  return { apiVersion = API, kind = "ScaledObject",
    metadata = { name = st.so, namespace = p.namespace,
      labels = { ["hypd.io/inference"] = st.inference, ["hypd.io/inference-kind"] = st.kind } },
    spec = { scaleTargetRef = { apiVersion = "apps/v1", kind = "Deployment", name = st.target },
      minReplicaCount = p.min_replicas, maxReplicaCount = p.max_replicas, pollingInterval = p.polling_interval,
      cooldownPeriod = p.cooldown_period,
      triggers = { { type = "prometheus", metricType = p.metric_type, metadata = { serverAddress = p.server_address,
        query = st.query, threshold = num(p.threshold), activationThreshold = num(p.activation_threshold) } } } } }
end

local function apply(ctx)
  local p, st = ctx.params, ctx.state
  local conn = ctx:k8s(st.eks)
  local o = object(p, st)
  -- the family of the deployment it scales (_ownership): a ScaledObject of
  -- that name another tool or anyone else made is refused, not taken over
  local family = st.kind == "router" and "inference-router" or "inference-container"
  local obj, action = K.ensure(ctx, conn, o, { family = family, field = "scaled_object_name" })
  st.applied = { kind = o.kind, name = o.metadata.name, namespace = p.namespace, action = action, uid = obj and obj.uid }
  st.spec = o.spec
end

local function result(ctx)
  local p, st = ctx.params, ctx.state
  if ctx.plan then return end
  st.result = { cluster = st.eks, region = st.region, scaled_object = st.so, namespace = p.namespace,
    target = st.target, engine = st.engine, query = st.query, min_replicas = p.min_replicas,
    max_replicas = p.max_replicas, threshold = p.threshold, server_address = p.server_address,
    object = st.applied, spec = st.spec,
    note = "KEDA reads the query from " .. p.server_address .. " every " .. p.polling_interval .. " s; the " ..
      "Prometheus server must scrape the pods' /metrics" }
end

return tool {
  name = "inference_set_autoscaling",
  summary = "Autoscale an inference deployment with a KEDA ScaledObject on a Prometheus query",
  description = "Creates or updates a KEDA ScaledObject (keda.sh/v1alpha1, default name <name>-scaler) that " ..
    "scales the Deployment name between min_replicas and max_replicas on a Prometheus query (trigger type " ..
    "prometheus, at server_address, default the prometheus-server in monitoring), with threshold (per replica " ..
    "for metric_type AverageValue) and activation_threshold, polling_interval and cooldown_period. The default " ..
    "query is the deployment's queue depth: vllm:num_requests_waiting for vLLM, sglang:num_queue_reqs for SGLang " ..
    "(served with --enable-metrics), sgl_router_job_queue_depth for the SGLang router, summed over its pods. " ..
    "Refuses before writing anything when min_replicas > max_replicas, the deployment is missing, KEDA is not " ..
    "installed (it comes with the HyperPod inference operator: " .. ENABLE .. "), another ScaledObject " ..
    "already scales it, or the deployment is managed or JumpStart (the operator owns its Deployment: give " ..
    "inference_deploy_managed min_replicas, max_replicas and prometheus_query instead). plan=true shows the object.",
  kind = "mutating",
  aws = { "eks:DescribeCluster" },
  k8s = { "get", "list", "apply" },
  status_tool = "inference_get",
  params = P.form({ "name", "min_replicas", "max_replicas", "threshold" },
    { "query", "metric_type", "activation_threshold", "polling_interval", "cooldown_period", "server_address",
      "scaled_object_name", "namespace", "cluster", "region" },
    {
    name = P.with(S.NAME, { required = true, description = "the Deployment to scale (an inference deployment)" }),
    namespace = S.NS,
    scaled_object_name = P.with(S.NAME, { description = "the ScaledObject's name (default <name>-scaler)" }),
    min_replicas = { type = "integer", minimum = 0, maximum = 1000, default = 1, decision = true,
      description = "the fewest replicas (0 lets KEDA scale to zero while the query is under activation_threshold)" },
    max_replicas = { type = "integer", minimum = 1, maximum = 1000, required = true, decision = true,
      description = "the most replicas (each needs its GPUs free in the cluster)" },
    query = { type = "string", min_length = 1, max_length = 4000,
      description = "the PromQL query (default: the engine's queue depth over the deployment's pods)" },
    threshold = { type = "number", minimum = 0.001, maximum = 1000000, default = 5, decision = true,
      description = "the query's target value (per replica for AverageValue)" },
    activation_threshold = { type = "number", minimum = 0, maximum = 1000000, default = 0,
      description = "the value above which KEDA activates the deployment from zero" },
    metric_type = { type = "string", enum = { "AverageValue", "Value" }, default = "AverageValue",
      description = "AverageValue: threshold per replica; Value: threshold for the whole query" },
    server_address = { type = "string", default = "http://prometheus-server.monitoring.svc.cluster.local:80",
      pattern = "^https?://[A-Za-z0-9.-]+(:[0-9]+)?(/.*)?$", max_length = 512, pattern_help = "an http(s) URL",
      description = "the Prometheus server KEDA queries" },
    polling_interval = { type = "integer", minimum = 1, maximum = 3600, default = 30,
      description = "seconds between KEDA's checks of the query" },
    cooldown_period = { type = "integer", minimum = 0, maximum = 86400, default = 300,
      description = "seconds after the last active check before scaling to min_replicas 0 (KEDA's default 300)" },
    cluster = P.cluster, region = P.region,
  }, { name = "Endpoint" }),
  validate = function(p)
    if p.min_replicas > p.max_replicas then
      local msg = string.format("min_replicas (%d) must not exceed max_replicas (%d)", p.min_replicas, p.max_replicas)
      hypd.errors.refuse_all({ { field = "min_replicas", rule = "le_max", message = msg },
        { field = "max_replicas", rule = "ge_min", message = msg } }, msg)
    end
  end,
  target = function(p)
    return (cap.target(p, tostring(p.namespace or "default") .. "/" .. tostring(p.name) .. "/autoscaling")
      :gsub("^hyperpod/", "inference/"))
  end,
  steps = {
    { name = "check", run = check, on_call = true }, -- refused on the call (hypd.tool.operations): reads only
    { name = "apply", run = apply },
    { name = "result", run = result },
  },
}
