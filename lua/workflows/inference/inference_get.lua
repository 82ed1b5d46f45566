-- inference_get: an inference deployment of any kind as it is now: replicas
-- ready of desired, its pods (node, phase, readiness, pool assignment, why
-- one is Pending), the Service and its port (a pool: each model's Service
-- and the pods behind it), recent events (the scheduler's FailedScheduling
-- among them) and the last log lines of each pod; with wait_seconds, first
-- waits for any of that to change.
local P = require "_params"
local I = require "_inference"
local R = require "_running"
local W = require "_wait"

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
  params = P.form({ "name" },
    { "events", "tail_lines", "namespace", "cluster", "region", "wait_seconds" },
    { name = I.NAME_PARAM, namespace = I.NS_PARAM, cluster = P.cluster, region = P.region,
    wait_seconds = P.wait_seconds,
    tail_lines = { type = "integer", default = 10, minimum = 0, maximum = 1000,
      description = "the last log lines shown per pod" },
    events = { type = "integer", default = 20, minimum = 0, maximum = 200, description = "the newest events shown" } },
    { name = "Endpoint" }),
  run = function(ctx, p)
    local e = require("_hyperpod").eks(ctx, p)
    local target = I.target({ cluster = e.name, region = e.region }, p.namespace .. "/" .. p.name)
    local opts = { tail = p.tail_lines, events = p.events }
    local first, conn, d = true, nil, nil
    -- read() -> the deployment as it is now, with the operation at work on
    -- it; before a deploy made anything, the operation alone
    local function read()
      local op = R.on(target)
      local v
      if first then
        first = false
        local ok, e2, c2, d2 = pcall(I.get, ctx, { name = p.name, namespace = p.namespace, cluster = p.cluster,
          region = p.region, models = true })
        if not ok then
          if not (op and type(e2) == "table" and e2.code == "NOT_FOUND") then error(e2, 0) end
          conn = ctx:k8s(e.name)
        else
          conn, d = c2, d2
        end
      end
      local now = d and I.find(conn, d.name, p.namespace) or (not d and I.find(conn, p.name, p.namespace))
      if now and d and d.model then now.model, now.service = d.model, d.service end
      if now then
        d = d or now
        v = I.view(conn, now, opts)
      elseif d then
        v = { name = p.name, namespace = p.namespace, kind = d.kind, gone = true }
      else
        v = { name = p.name, namespace = p.namespace, exists = false }
      end
      v.operation = op
      return v
    end
    local v, waited = W.follow(p.wait_seconds, { read = read,
      quick = function() return R.fingerprint(target) end,
      -- settled: no operation on it, every replica ready, no pod on its way
      settled = function(x)
        if x.operation then return false end
        if x.gone or x.exists == false then return true end
        if x.replicas and x.replicas.ready ~= x.replicas.desired then return false end
        for _, pod in ipairs(x.pods or {}) do
          if W.moving(pod.phase) or not pod.ready or W.moving(pod.container_state) then return false end
        end
        return true
      end,
      signature = function(x)
        return (x.gone and "gone" or x.exists == false and "absent" or I.signature(x)) .. " " .. R.signature(x.operation)
      end })
    if waited then
      v.waited = waited
      v.changed = waited.ended == "changed"
    end
    v.cluster, v.region = e.name, e.region
    return v
  end,
}
