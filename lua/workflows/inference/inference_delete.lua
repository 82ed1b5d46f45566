-- inference_delete: an inference deployment hypd made, deleted with its
-- Services (and any other hypd-labelled object of it: a KEDA ScaledObject);
-- a pool with assigned workers needs force. Objects not labelled
-- app.kubernetes.io/managed-by=hypd are never deleted.
local P = require "_params"
local I = require "_inference"
local K = require "_k8s_objects"
local PL = require "inference._pool"
local hp = require "_hyperpod"
local O = require "_ownership"

-- the families whose deployments inference_delete removes (_ownership)
local FAMILIES = { "inference-container", "inference-managed", "inference-jumpstart", "inference-router" }

-- the kinds besides the top object that may carry hypd.io/inference=<name>
local EXTRA = { { "v1", "Service" }, { "keda.sh/v1alpha1", "ScaledObject" } }

local function run(ctx)
  local p, st = ctx.params, ctx.state
  local e = hp.eks(ctx, p)
  local conn = ctx:k8s(e.name)
  local d = I.find(conn, p.name, p.namespace)
  if not d then
    -- an object of that name that is no inference deployment of hypd's
    -- (kubectl's, another tool's) is refused, not answered "absent"
    for _, k in ipairs { { "apps/v1", "Deployment" }, { "v1", "Service" } } do
      local o = K.get(conn, k[1], k[2], p.name, p.namespace)
      if o then
        o.kind = o.kind or k[2]
        O.check(o, FAMILIES, { cluster = e.name, by = "inference_delete" })
      end
    end
    st.result = { cluster = e.name, name = p.name, namespace = p.namespace, action = "absent" }
    return
  end
  O.check(d.object, FAMILIES, { cluster = e.name, by = "inference_delete" })
  if d.kind == "pool" and not p.force then
    local _, assigned, models = PL.counts(d)
    if assigned > 0 then
      local msg = string.format("force: pool %s has %d assigned workers (%s); deleting it stops those models. " ..
        "Release them with inference_release_pool_pod, or pass force=true", p.name, assigned, PL.models_text(models))
      hypd.errors.refuse("force", "assigned", msg, { code = "CONFLICT" })
    end
  end
  st.deleted = {}
  for _, k in ipairs(EXTRA) do
    local items, err = conn:list(k[1], k[2], { namespace = p.namespace,
      labels = { [I.NAME] = p.name, [I.MANAGED_BY] = "hypd" } })
    if not items and not (type(err) == "table" and (err.code == "NotFound" or err.status == 404)) then error(err, 0) end
    for _, o in ipairs(items or {}) do
      local action = K.absent(ctx, conn, k[1], k[2], o.metadata.name, p.namespace)
      st.deleted[#st.deleted + 1] = { kind = k[2], name = o.metadata.name, action = action }
    end
  end
  local o = d.object
  local action = K.absent(ctx, conn, o.apiVersion, o.kind, o.metadata.name, p.namespace)
  st.deleted[#st.deleted + 1] = { kind = o.kind, name = o.metadata.name, action = action }
  if ctx.plan then return end
  st.result = { cluster = e.name, region = e.region, name = p.name, namespace = p.namespace, kind = d.kind,
    action = action, deleted = st.deleted }
end

return tool {
  name = "inference_delete",
  summary = "Delete an inference deployment hypd made, with its Services (a pool with assigned workers needs force)",
  description = "Deletes the inference deployment <name> (any kind: its Deployment, InferenceEndpointConfig or " ..
    "JumpStartModel; the pods go with it) and every Service or ScaledObject labelled hypd.io/inference=<name> " ..
    "and app.kubernetes.io/managed-by=hypd (a pool's model Services among them), and waits until they are " ..
    "gone. Only objects hypd made are deleted; another owner's is refused. A model pool with assigned workers " ..
    "is refused unless force=true. Models under /s3 stay. One already gone answers action absent.",
  kind = "destructive",
  aws = { "eks:DescribeCluster" },
  k8s = { "get", "list", "delete" },
  status_tool = "inference_list",
  params = P.form({ "name" },
    { "force", "namespace", "cluster", "region" },
    { name = I.NAME_PARAM, namespace = I.NS_PARAM, cluster = P.cluster, region = P.region,
    force = { type = "boolean", default = false,
      description = "delete a model pool even while some of its workers serve models" } },
    { name = "Endpoint", force = "Delete a pool that serves models" }),
  target = function(p) return I.target(p, tostring(p.namespace) .. "/" .. tostring(p.name)) end,
  steps = { { name = "delete", run = run } },
}
