-- inference_scale: the replicas of an inference deployment of any kind set:
-- a Deployment (container, pool, router) through its scale subresource, an
-- InferenceEndpointConfig or JumpStartModel through spec.replicas. A pool
-- is never scaled below its assigned workers.
local P = require "_params"
local I = require "_inference"
local K = require "_k8s_objects"
local PL = require "inference._pool"

local function run(ctx)
  local p, st = ctx.params, ctx.state
  local e, conn, d = I.get(ctx, p)
  local ok, why = K.owned(d.object)
  if not ok then
    hypd.errors.refuse("name", "owner", string.format("%s %s/%s is %s: hypd scales only its own deployments",
      d.object.kind, p.namespace, p.name, why), { code = "CONFLICT", field_message = "name: " .. why })
  end
  local desired = I.replicas(d)
  if d.kind == "pool" then PL.refuse_cut(d, p.replicas, p.name) end
  local o = d.object
  local cr = o.kind ~= "Deployment"
  local _, action = ctx:ensure { type = "k8s:" .. o.kind:lower() .. "/scale", label = o.kind, name = p.namespace ..
    "/" .. o.metadata.name, id = "uid",
    search = function()
      local x = K.get(conn, o.apiVersion, o.kind, o.metadata.name, p.namespace)
      if x then x.uid = x.metadata.uid end
      return x
    end,
    desired = { replicas = p.replicas },
    current = function(x) return { replicas = math.tointeger(((x.spec or {}).replicas)) or (cr and 1 or 1) } end,
    create = function()
      hypd.errors.raise("CONFLICT", o.kind .. " " .. p.namespace .. "/" .. o.metadata.name .. " went away meanwhile")
    end,
    update = function()
      if cr then
        assert(conn:patch(o.apiVersion, o.kind, o.metadata.name, { spec = { replicas = p.replicas } },
          { namespace = p.namespace }))
      else
        assert(conn:patch("apps/v1", "Deployment", o.metadata.name, { spec = { replicas = p.replicas } },
          { namespace = p.namespace, subresource = "scale" }))
      end
    end }
  if ctx.plan then return end
  st.result = { cluster = e.name, region = e.region, name = p.name, namespace = p.namespace, kind = d.kind,
    object = o.kind .. "/" .. o.metadata.name, from = desired, replicas = p.replicas, action = action,
    next = "inference_get name=" .. p.name .. " namespace=" .. p.namespace .. " wait_seconds=60" }
end

return tool {
  name = "inference_scale",
  summary = "Set the replicas of an inference deployment (any kind); a pool keeps its assigned workers",
  description = "Sets how many replicas the inference deployment <name> runs: a Deployment (container, pool, " ..
    "router) through its scale subresource, an InferenceEndpointConfig or JumpStartModel through spec.replicas " ..
    "(its operator then scales). Scaling a model pool down is refused when it would remove assigned workers " ..
    "(fewer unassigned pods than the reduction), naming how many are assigned and to which models; assigned " ..
    "pods carry a high pod-deletion-cost so the unassigned ones go first. Follow with inference_get.",
  kind = "mutating",
  aws = { "eks:DescribeCluster" },
  k8s = { "get", "list", "patch" },
  status_tool = "inference_get",
  params = P.form({ "name", "replicas" },
    { "namespace", "cluster", "region" },
    { name = I.NAME_PARAM, namespace = I.NS_PARAM, cluster = P.cluster, region = P.region,
    replicas = { type = "integer", required = true, decision = true, minimum = 0, maximum = 100,
      description = "how many replicas (pods) it should run" } }, { name = "Endpoint" }),
  target = function(p) return I.target(p, tostring(p.namespace) .. "/" .. tostring(p.name)) end,
  steps = { { name = "scale", run = run } },
}
