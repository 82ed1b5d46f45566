-- inference/_pool: what the model pool tools share (inference_assign_pool_pod,
-- inference_release_pool_pod, inference_scale): a pool's live pods, the
-- relabelling of one pod as a kit resource (so a plan shows it and a rerun
-- changes nothing), and a pool's assignment counts.
--   pool(ctx, p, field) -> e, conn, d: the pool p.pool (VALIDATION naming
--     field when it is another kind; CONFLICT when it is not hypd's)
--   live(d) -> its pods that are not finished or terminating
--   relabel(ctx, conn, pod, business) -> action: business=<model> (with a
--     high pod-deletion-cost, so a scale-down removes unassigned workers
--     first) or business=unassigned (the cost removed)
--   counts(d) -> unassigned, assigned, {model -> n}
--   refuse_cut(d, replicas, name): no scale-down that removes assigned workers
local I = require "_inference"
local K = require "_k8s_objects"

local M = {}

M.ASSIGNED_COST = "1000"

function M.pool(ctx, p, field)
  local e, conn, d = I.get(ctx, { name = p.pool, namespace = p.namespace, cluster = p.cluster, region = p.region })
  if d.kind ~= "pool" then
    local msg = string.format("%s: %s/%s is a %s deployment, not a model pool (inference_deploy_container " ..
      "service=pool makes one)", field, p.namespace, p.pool, d.kind)
    hypd.errors.refuse(field, "pool", msg)
  end
  local ok, why = K.owned(d.object)
  if not ok then
    hypd.errors.refuse(field, "owner", string.format("Deployment %s/%s is %s: hypd changes only its own pools",
      p.namespace, p.pool, why), { code = "CONFLICT", field_message = field .. ": " .. why })
  end
  return e, conn, d
end

local function finished(pod)
  local ph = (pod.status or {}).phase
  return ph == "Succeeded" or ph == "Failed" or pod.metadata.deletionTimestamp ~= nil
end

function M.live(d)
  local out = {}
  for _, pod in ipairs(d.pods or {}) do
    if not finished(pod) then out[#out + 1] = pod end
  end
  return out
end

function M.business(pod) return ((pod.metadata or {}).labels or {})[I.BUSINESS] end

function M.relabel(ctx, conn, pod, business)
  local ns, name = pod.metadata.namespace, pod.metadata.name
  local cost = business ~= I.UNASSIGNED and M.ASSIGNED_COST or hypd.json.null
  local _, action = ctx:ensure { type = "k8s:pod", label = "Pod", name = ns .. "/" .. name, id = "uid",
    owned = K.owned, field = "pods",
    search = function()
      local o = K.get(conn, "v1", "Pod", name, ns)
      if o then o.uid = o.metadata.uid end
      return o
    end,
    desired = { business = business },
    current = function(o) return { business = M.business(o) } end,
    create = function()
      hypd.errors.raise("CONFLICT", "pod " .. ns .. "/" .. name .. " went away meanwhile (its ReplicaSet " ..
        "replaces it with an unassigned one): try again")
    end,
    update = function()
      local o = assert(conn:patch("v1", "Pod", name, { metadata = { labels = { [I.BUSINESS] = business },
        annotations = { [I.DELETION_COST] = cost } } }, { namespace = ns }))
      o.uid = o.metadata.uid
      return o
    end }
  return action
end

function M.counts(d)
  local unassigned, assigned, models = 0, 0, {}
  for _, pod in ipairs(M.live(d)) do
    local b = M.business(pod)
    if b == I.UNASSIGNED or b == nil then
      unassigned = unassigned + 1
    else
      assigned = assigned + 1
      models[b] = (models[b] or 0) + 1
    end
  end
  return unassigned, assigned, models
end

-- refuse_cut(d, replicas, name): a CONFLICT naming replicas when scaling
-- pool d to replicas would remove assigned workers (fewer unassigned pods
-- than the reduction)
function M.refuse_cut(d, replicas, name)
  local desired = I.replicas(d)
  if replicas >= desired then return end
  local unassigned, assigned, models = M.counts(d)
  local cut = desired - replicas
  if cut <= unassigned then return end
  local msg = string.format("replicas: scaling pool %s from %d to %d would remove %d workers but only %d " ..
    "are unassigned: %d are assigned (%s). Release them first with inference_release_pool_pod, or scale to " ..
    "at least %d", name, desired, replicas, cut, unassigned, assigned, M.models_text(models), desired - unassigned)
  hypd.errors.refuse("replicas", "assigned", msg, { code = "CONFLICT", assigned = assigned, unassigned = unassigned })
end

-- models_text(models) -> "a: 2, b: 1"
function M.models_text(models)
  local keys = {}
  for k in pairs(models) do keys[#keys + 1] = k end
  table.sort(keys)
  for i, k in ipairs(keys) do keys[i] = k .. ": " .. models[k] end
  return table.concat(keys, ", ")
end

-- order(pods) -> the pods ready ones first, then running, then by name
function M.order(pods)
  table.sort(pods, function(a, b)
    local ra, rb = I.ready(a) and 1 or 0, I.ready(b) and 1 or 0
    if ra ~= rb then return ra > rb end
    local na, nb = a.spec.nodeName and 1 or 0, b.spec.nodeName and 1 or 0
    if na ~= nb then return na > nb end
    return a.metadata.name < b.metadata.name
  end)
  return pods
end

return M
