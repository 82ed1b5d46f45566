-- hyperpod/_feat_kuberay: the KubeRay operator as a managed feature: the
-- objects of _kuberay (namespace kuberay-system, service account, RBAC,
-- Service, Deployment kuberay-operator), applied when missing or
-- different, then the Deployment available; the Ray CRDs applied when
-- missing. Disabling deletes hypd's objects in reverse (the namespace
-- last); the CRDs stay, with whatever Ray objects people made. A KubeRay
-- that Helm (or anyone else) installed is reported as on and left alone.
local F = require "hyperpod._feat"
local K = require "_k8s_objects"
local R = require "_kuberay"

local M = { name = "kuberay_operator" }

local function ns_of(o) return o.metadata.namespace end

local function available(d)
  local st = (d or {}).status or {}
  return (st.availableReplicas or 0) >= 1
end

function M.read(ctx, env)
  local conn = ctx:k8s(env.eks)
  local parts = {}
  local d = K.get(conn, "apps/v1", "Deployment", R.DEPLOYMENT, R.NAMESPACE)
  local foreign = d and not K.owned(d)
  for _, o in ipairs(R.objects()) do
    local live = K.get(conn, o.apiVersion, o.kind, o.metadata.name, ns_of(o))
    local p = F.part(parts, { part = o.kind .. " " .. (ns_of(o) and (ns_of(o) .. "/") or "") .. o.metadata.name,
      present = live ~= nil, ok = true, owned = live and K.owned(live) or nil })
    if o.kind == "Deployment" and live then
      p.ok = available(live)
      p.pending = not p.ok or nil
      p.status = available(live) and "Available" or "Progressing"
    end
    if foreign then p.optional = true end
  end
  for _, c in ipairs(R.crds()) do
    F.part(parts, { part = "CRD " .. c.metadata.name, present = K.get(conn, c.apiVersion, c.kind, c.metadata.name) ~= nil,
      ok = true, prerequisite = true })
  end
  if foreign then
    return { enabled = true, status = "enabled", parts = parts, missing = hypd.json.array(), source = "kubernetes",
      note = "the KubeRay operator runs in " .. R.NAMESPACE .. " but is " .. select(2, K.owned(d)) ..
        "; hypd leaves it alone" }
  end
  return F.state(parts)
end

function M.matches(state, want) return state.enabled == want.enabled end

function M.enable(ctx, env)
  local conn = ctx:k8s(env.eks)
  local d = K.get(conn, "apps/v1", "Deployment", R.DEPLOYMENT, R.NAMESPACE)
  if d and not K.owned(d) then
    ctx:progress("the KubeRay operator in " .. R.NAMESPACE .. " is " .. select(2, K.owned(d)) .. "; left as it is")
    return
  end
  for _, c in ipairs(R.crds()) do K.ensure(ctx, conn, c, { shared = true, field = M.name }) end
  for _, o in ipairs(R.objects()) do K.ensure(ctx, conn, o, { field = M.name }) end
  if ctx.plan then return end
  ctx:poll { what = "Deployment " .. R.NAMESPACE .. "/" .. R.DEPLOYMENT .. " to be available", every = 5,
    timeout = 10 * 60, check = function()
      local live = K.get(conn, "apps/v1", "Deployment", R.DEPLOYMENT, R.NAMESPACE)
      local st = (live or {}).status or {}
      return available(live), string.format("%d of %d replicas available", st.availableReplicas or 0,
        (live and live.spec and live.spec.replicas) or 1)
    end }
end

function M.disable(ctx, env)
  local conn = ctx:k8s(env.eks)
  local objs = R.objects()
  for i = #objs, 1, -1 do
    local o = objs[i]
    K.absent(ctx, conn, o.apiVersion, o.kind, o.metadata.name, ns_of(o))
  end
end

return M
