-- inference_assign_pool_pod: warm workers of a model pool given to a model:
-- each pod relabelled business=<model> (the reference's assign-pod), and a
-- Service <model> selecting business=<model>, so the model is served by
-- exactly its pods. count is the total the model should have from the
-- pool, so a repeated call assigns no more.
local P = require "_params"
local I = require "_inference"
local C = require "inference._container"
local K = require "_k8s_objects"
local PL = require "inference._pool"
local LBC = require "inference._lbc"


local function run(ctx)
  local p, st = ctx.params, ctx.state
  local e, conn, d = PL.pool(ctx, p, "pool")
  local live = PL.live(d)
  local byname, mine, free = {}, {}, {}
  for _, pod in ipairs(live) do
    byname[pod.metadata.name] = pod
    local b = PL.business(pod)
    if b == p.model then mine[#mine + 1] = pod elseif b == I.UNASSIGNED then free[#free + 1] = pod end
  end
  local chosen = {}
  if p.pods then
    for i, name in ipairs(p.pods) do
      local pod = byname[name]
      local f = "pods[" .. (i - 1) .. "]"
      if not pod then
        hypd.errors.refuse(f, "exists", string.format("no running pod %s in pool %s/%s", name, p.namespace, p.pool),
          { prefix = "field" })
      end
      local b = PL.business(pod)
      if b ~= I.UNASSIGNED and b ~= p.model then
        hypd.errors.refuse(f, "unassigned", string.format("pod %s is assigned to model %s; release it first " ..
          "with inference_release_pool_pod", name, b), { code = "CONFLICT", prefix = "field" })
      end
      chosen[#chosen + 1] = pod
    end
  else
    local need = p.count - #mine
    for _, pod in ipairs(mine) do chosen[#chosen + 1] = pod end
    if need > #free then
      hypd.errors.refuse("count", "available", string.format("model %s should have %d pods of pool %s but has " ..
        "%d and only %d are unassigned; scale the pool with inference_scale or lower count", p.model, p.count,
        p.pool, #mine, #free), { code = "CONFLICT", prefix = "field" })
    end
    PL.order(free)
    for i = 1, math.max(0, need) do chosen[#chosen + 1] = free[i] end
    if need < 0 then
      st.note = string.format("model %s already has %d pods of pool %s, more than count %d: none assigned; " ..
        "inference_release_pool_pod model=%s count=%d gives the extra back", p.model, #mine, p.pool, p.count,
        p.model, -need)
    end
  end
  -- the Service first exists only as hypd's model Service of this pool
  local svc = K.get(conn, "v1", "Service", p.model, p.namespace)
  if svc then
    local l = svc.metadata.labels or {}
    if l[I.MANAGED_BY] ~= "hypd" or l[I.NAME] ~= p.pool or l[I.MODEL] ~= p.model then
      hypd.errors.refuse("model", "service", string.format("Service %s/%s exists and is not the model Service " ..
        "of pool %s (it is %s); choose another model name", p.namespace, p.model, p.pool,
        l[I.MANAGED_BY] ~= "hypd" and "not hypd's" or ("of " .. tostring(l[I.NAME]))), { code = "CONFLICT", prefix = "field" })
    end
  end
  st.pods = {}
  for _, pod in ipairs(chosen) do
    st.pods[#st.pods + 1] = { name = pod.metadata.name, node = pod.spec.nodeName,
      action = PL.relabel(ctx, conn, pod, p.model) }
  end
  local port = I.port(d)
  local s = C.service(p.model, p.namespace, { [I.BUSINESS] = p.model }, port, p.service, p.scheme,
    I.labels(p.pool, "pool", { [I.MODEL] = p.model }))
  local _, action = K.ensure(ctx, conn, s, { field = "model", family = "inference-container" }) -- a pool: _ownership
  local warning = p.service == "external" and LBC.warning(ctx, conn, e.name, e.region) or nil
  local warnings
  if warning then
    ctx:progress(warning)
    warnings = hypd.json.array()
    warnings[1] = warning
  end
  if ctx.plan then return end
  st.result = { cluster = e.name, region = e.region, pool = p.pool, namespace = p.namespace, model = p.model,
    pods = st.pods, service = { name = p.model, type = s.spec.type, port = port, selector = s.spec.selector,
      action = action },
    note = st.note, warnings = warnings, next = "inference_get name=" .. p.pool .. " namespace=" .. p.namespace }
end

return tool {
  name = "inference_assign_pool_pod",
  summary = "Give warm workers of a model pool to a model: relabel them and make the model's Service",
  description = "Relabels unassigned pods of the model pool <pool> (inference_deploy_container service=pool) " ..
    "business=<model> and makes sure a Service <model> (ClusterIP, or an NLB with service=external) selects " ..
    "business=<model> on the pool's port (named http), so the model is served by exactly its pods. Give either " ..
    "pods (names, from inference_get) or count: the number of the pool's pods the model should have in all " ..
    "(those it has count; a repeated call assigns no more; ready pods are chosen first). Refuses, naming the " ..
    "field, when the pool has too few unassigned pods or a named pod belongs to another model. Assigned pods " ..
    "get a high controller.kubernetes.io/pod-deletion-cost so scaling the pool down removes unassigned ones " ..
    "first. inference_release_pool_pod gives them back.",
  kind = "mutating",
  aws = { "eks:DescribeCluster", "eks:ListPodIdentityAssociations" },
  k8s = { "get", "list", "patch", "apply" },
  status_tool = "inference_get",
  params = P.form({ "pool", "model", "count" },
    { "pods", "service", "scheme", "namespace", "cluster", "region" },
    {
    pool = P.with(I.NAME_PARAM, { description = "the model pool's name" }),
    model = P.with(I.NAME_PARAM, { decision = true, description = "the model the pods serve: the label value " ..
      "business=<model> and the name of its Service" }),
    count = { type = "integer", minimum = 1, maximum = 100, decision = true,
      description = "how many of the pool's pods the model should have in all" },
    pods = { type = "array", items = { type = "string", pattern = I.DNS, max_length = 253,
      pattern_help = "a pod name" }, description = "assign exactly these pods (instead of count)" },
    service = { type = "string", enum = { "clusterip", "external" }, default = "clusterip",
      description = "the model's Service: ClusterIP, or a LoadBalancer (NLB)" },
    scheme = { type = "string", enum = { "internal", "internet-facing" }, default = "internal",
      description = "the NLB's scheme for service=external" },
    namespace = I.NS_PARAM, cluster = P.cluster, region = P.region,
  }),
  validate = function(p)
    if (p.count == nil) == (p.pods == nil) or (p.pods and #p.pods == 0) then
      local msg = "count: give count or pods (one of them)"
      hypd.errors.refuse("count", "one_of", msg)
    end
  end,
  target = function(p) return I.target(p, tostring(p.namespace) .. "/" .. tostring(p.pool)) end,
  steps = { { name = "assign", run = run } },
}
