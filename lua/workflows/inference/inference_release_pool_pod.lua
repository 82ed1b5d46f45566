-- inference_release_pool_pod: assigned workers of a model pool given back:
-- each pod relabelled business=unassigned (warm again, for another model);
-- a model left with no pods loses its Service.
local P = require "_params"
local I = require "_inference"
local K = require "_k8s_objects"
local PL = require "inference._pool"
local hp = require "_hyperpod"


local function run(ctx)
  local p, st = ctx.params, ctx.state
  local e = hp.eks(ctx, p)
  local conn = ctx:k8s(e.name)
  local sel = { [I.POOL_TYPE] = "model-pool", [I.MANAGED_BY] = "hypd" }
  if p.pool then sel[I.NAME] = p.pool end
  if p.model and not p.pods then sel[I.BUSINESS] = p.model end
  local pods = {}
  for _, pod in ipairs(conn:list("v1", "Pod", { namespace = p.namespace, labels = sel }) or {}) do
    if not pod.metadata.deletionTimestamp then pods[#pods + 1] = pod end
  end
  local chosen = {}
  if p.pods then
    local byname = {}
    for _, pod in ipairs(pods) do byname[pod.metadata.name] = pod end
    for i, name in ipairs(p.pods) do
      local pod, f = byname[name], "pods[" .. (i - 1) .. "]"
      if not pod then
        hypd.errors.refuse(f, "exists", string.format("no model pool pod %s in namespace %s%s", name,
          p.namespace, p.pool and (" of pool " .. p.pool) or ""), { prefix = "field" })
      end
      if p.model and PL.business(pod) ~= p.model and PL.business(pod) ~= I.UNASSIGNED then
        hypd.errors.refuse(f, "model", string.format("pod %s serves model %s, not %s", name, PL.business(pod), p.model),
          { code = "CONFLICT", prefix = "field" })
      end
      chosen[#chosen + 1] = pod
    end
  else
    if #pods == 0 then
      hypd.errors.refuse("model", "exists", string.format("no pool pod serves model %s in namespace %s",
        p.model, p.namespace), { prefix = "field" })
    end
    -- not ready ones first, then the last by name
    PL.order(pods)
    local n = math.min(p.count or #pods, #pods)
    for i = #pods, #pods - n + 1, -1 do chosen[#chosen + 1] = pods[i] end
  end
  st.pods, st.models = {}, {}
  local models = {}
  for _, pod in ipairs(chosen) do
    local b = PL.business(pod)
    if b and b ~= I.UNASSIGNED then models[b] = true end
    st.pods[#st.pods + 1] = { name = pod.metadata.name, from = b, action = PL.relabel(ctx, conn, pod, I.UNASSIGNED) }
  end
  -- a model with no pods left loses its Service (hypd's model Service only)
  local names = {}
  for m in pairs(models) do names[#names + 1] = m end
  table.sort(names)
  for _, m in ipairs(names) do
    local left = 0
    local released = {}
    for _, r in ipairs(st.pods) do released[r.name] = true end
    for _, pod in ipairs(conn:list("v1", "Pod", { namespace = p.namespace, labels = { [I.BUSINESS] = m } }) or {}) do
      if not released[pod.metadata.name] and not pod.metadata.deletionTimestamp then left = left + 1 end
    end
    local svc = K.get(conn, "v1", "Service", m, p.namespace)
    local action = "kept"
    if left == 0 and svc and (svc.metadata.labels or {})[I.MODEL] == m then
      action = K.absent(ctx, conn, "v1", "Service", m, p.namespace)
    end
    st.models[#st.models + 1] = { model = m, pods_left = left, service = svc and m or nil, service_action = action }
  end
  if ctx.plan then return end
  st.result = { cluster = e.name, region = e.region, namespace = p.namespace, pods = st.pods, models = st.models }
end

return tool {
  name = "inference_release_pool_pod",
  summary = "Give assigned workers of a model pool back: relabel them unassigned; a model left with none loses its Service",
  description = "Relabels model pool pods business=unassigned, so they are warm workers again: either the named " ..
    "pods, or count pods of model (all of them when count is absent; not ready ones first). When a model has " ..
    "no pods left its Service <model> (the one inference_assign_pool_pod made) is deleted. pool limits the " ..
    "search to one pool. Destructive: the model stops being served by those pods.",
  kind = "destructive",
  aws = { "eks:DescribeCluster" },
  k8s = { "get", "list", "patch", "delete" },
  status_tool = "inference_get",
  params = P.form({},
    { "count", "model", "pods", "pool", "namespace", "cluster", "region" },
    {
    pods = { type = "array", items = { type = "string", pattern = I.DNS, max_length = 253,
      pattern_help = "a pod name" }, description = "release exactly these pods" },
    model = P.with(I.NAME_PARAM, { required = false, description = "release pods of this model" }),
    count = { type = "integer", minimum = 1, maximum = 100,
      description = "with model: how many of its pods to release (default: all)" },
    pool = P.with(I.NAME_PARAM, { required = false, description = "only pods of this pool" }),
    namespace = I.NS_PARAM, cluster = P.cluster, region = P.region,
  }),
  validate = function(p)
    if not p.pods and not p.model then
      local msg = "pods: give pods, or model (with count)"
      hypd.errors.refuse("pods", "one_of", msg)
    end
    if p.count and p.pods then
      local msg = "count: goes with model, not with pods"
      hypd.errors.refuse("count", "one_of", msg)
    end
  end,
  target = function(p) return I.target(p, tostring(p.namespace) .. "/" .. tostring(p.pool or p.model or "pods")) end,
  steps = { { name = "release", run = run } },
}
