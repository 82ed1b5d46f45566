-- inference_get: an inference deployment of any kind as it is now: replicas
-- ready of desired, its pods (node, phase, readiness, pool assignment, why
-- one is Pending), the Service and its port (a pool: each model's Service
-- and the pods behind it), recent events (the scheduler's FailedScheduling
-- among them) and the last log lines of each pod; with wait_seconds, first
-- waits for any of that to change.
local P = require "_params"
local I = require "inference._inference"

return tool {
  name = "inference_get",
  summary = "An inference deployment now: replicas ready/desired, pods, Service and port, events, last log lines",
  description = "Reads the inference deployment <name> (any kind: container, pool, managed, jumpstart, router) " ..
    "of the active (or named) cluster (a model name of a pool gives the pool, with that model's Service): " ..
    "replicas ready of desired, each pod with its node, phase, readiness " ..
    "and (pool) assignment (business label: unassigned or the model), pending_reason with the scheduler's " ..
    "message when a pod cannot be placed (e.g. '0/3 nodes are available: 3 Insufficient nvidia.com/gpu. ...'), " ..
    "the Service to call and its port with the pods behind it (a pool: models, one Service per model), the " ..
    "newest events of the object, its ReplicaSets and pods, and the last tail_lines log lines per pod. With " ..
    "wait_seconds it first waits up to that long for a change (readiness, phases, assignment), so an agent " ..
    "follows inference_deploy_container with a few calls.",
  kind = "read",
  aws = { "eks:DescribeCluster" },
  k8s = { "get", "list", "logs" },
  params = { name = I.NAME_PARAM, namespace = I.NS_PARAM, cluster = P.cluster, region = P.region,
    wait_seconds = P.wait_seconds,
    tail_lines = { type = "integer", default = 10, minimum = 0, maximum = 1000,
      description = "the last log lines shown per pod" },
    events = { type = "integer", default = 20, minimum = 0, maximum = 200, description = "the newest events shown" } },
  run = function(ctx, p)
    local e, conn, d = I.get(ctx, { name = p.name, namespace = p.namespace, cluster = p.cluster, region = p.region,
      models = true })
    local opts = { tail = p.tail_lines, events = p.events }
    local v = I.view(conn, d, opts)
    if p.wait_seconds > 0 then
      local before, deadline = I.signature(v), hypd.now() + p.wait_seconds
      local first = true
      ctx:poll { what = "the inference deployment to change", every = math.min(5, p.wait_seconds),
        timeout = p.wait_seconds + 5, phase = false,
        check = function()
          if first then first = false; return false end
          local now = I.find(conn, d.name, p.namespace)
          if not now then return true end
          return I.signature(I.view(conn, now, { tail = 0, events = 0 })) ~= before or hypd.now() >= deadline
        end }
      local now = I.find(conn, d.name, p.namespace)
      if now and d.model then now.model, now.service = d.model, d.service end
      if not now then
        v = { name = p.name, namespace = p.namespace, kind = d.kind, gone = true }
      else
        v = I.view(conn, now, opts)
      end
      v.changed = v.gone or I.signature(v) ~= before
    end
    v.cluster, v.region = e.name, e.region
    return v
  end,
}
