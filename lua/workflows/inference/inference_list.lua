-- inference_list: every inference deployment hypd made, of every kind
-- (container, pool, managed, jumpstart, router: the label
-- hypd.io/inference-kind), with replicas ready of desired.
local P = require "_params"
local R = require "_running"
local I = require "_inference"
local hp = require "_hyperpod"

return tool {
  name = "inference_list",
  summary = "The inference deployments: name, kind, engine, image, port, replicas ready of desired",
  description = "Lists the inference deployments on the active (or named) cluster, in one namespace or all " ..
    "(namespace absent), found by the label hypd.io/inference-kind: self-managed containers and model pools " ..
    "(Deployments), managed InferenceEndpointConfigs, JumpStartModels and routers, each with its kind, engine, " ..
    "image, port and replicas ready of desired. inference_get gives one in detail.",
  kind = "read",
  aws = { "eks:DescribeCluster" },
  k8s = { "get", "list" },
  params = P.form({},
    { "kind", "namespace", "cluster", "region" },
    { cluster = P.cluster, region = P.region,
    namespace = { type = "string", pattern = I.DNS, max_length = 63, pattern_help = "a Kubernetes namespace name",
      description = "only this namespace (default: all)" },
    kind = { type = "string", enum = I.KINDS, description = "only this kind" } }),
  run = function(ctx, p)
    local e = hp.eks(ctx, p)
    local conn = ctx:k8s(e.name)
    local out = hypd.json.array()
    for _, d in ipairs(I.list(conn, p.namespace)) do
      if not p.kind or d.kind == p.kind then out[#out + 1] = I.summary(d) end
    end
    return { cluster = e.name, region = e.region, deployments = out,
      -- the operations at work on the cluster's inference deployments (a delete going on among them)
      operations = R.all("inference/" .. e.region .. "/" .. e.name) }
  end,
}
