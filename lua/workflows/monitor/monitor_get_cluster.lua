-- monitor_get_cluster: what is happening across a cluster, from a
-- watch-backed cache of its Kubernetes objects (hypd.k8s.cache: one
-- paginated list per kind, then watches; the first call builds it, every
-- later call and the /ws topic monitor:<cluster> read it). The answer's
-- shape is the Monitoring page's contract (docs/architecture.md, "Monitoring
-- at scale"): cluster, region, cache, nodes, instance_groups, gpus, pending,
-- pods, services, deployments, inference_endpoints, jumpstart_models,
-- pytorch_jobs, ray_jobs, operations, events, history, utilisation (or
-- utilisation_absent), absent_kinds, errors, waited.
local P = require "_params"
local R = require "_running"
local W = require "_wait"
local K = require "monitor._kinds"
local V = require "monitor._view"

local BUILD_WAIT = 120 -- seconds the first call waits for the cache's lists
local DCGM_EVERY = 15 -- seconds a DCGM reading is reused
local DCGM_PARALLEL = 8 -- exporter pods read at once

local dcgm_seen = {} -- cluster -> {t, utilisation}
-- the view of a cache version, per cluster and filter: a call that finds the
-- cache as the last one left it answers without going over 60,000 records
local built = {}

local function view(c, p, cluster, region)
  local key = table.concat({ cluster, tostring(region), tostring(p.namespace), tostring(p.instance_group) }, "|")
  local v = c.version()
  local m = built[key]
  if not m or m.version ~= v then
    if not m and next(built) and #key > 0 then
      local n = 0
      for _ in pairs(built) do n = n + 1 end
      if n >= 64 then built = {} end -- filters seen long ago go
    end
    m = { version = v, out = V.build(c, p) }
    built[key] = m
  end
  local out = {}
  for k, x in pairs(m.out) do out[k] = x end -- the per-call fields go on a copy
  return out
end

-- exporter_pods(conn, svc) -> the ready pods behind the exporter's Service
-- and their metrics port, from its Endpoints
local function exporter_pods(conn, svc)
  local ep = conn:get("v1", "Endpoints", svc.name, { namespace = svc.namespace })
  local pods = {}
  for _, sub in ipairs(ep and ep.subsets or {}) do
    local port = sub.ports and sub.ports[1] and sub.ports[1].port
    for _, a in ipairs(sub.addresses or {}) do
      if a.targetRef and a.targetRef.kind == "Pod" then pods[#pods + 1] = { name = a.targetRef.name, port = port } end
    end
  end
  return pods
end

-- utilisation(c, cluster) -> the DCGM exporter's GPU utilisation, or nil
-- and why it is absent. The exporter runs one pod per GPU node and each
-- reports its own node's GPUs, so every ready pod behind its Service is
-- read (through the API server's pod proxy, DCGM_PARALLEL at a time), not
-- the Service, which would answer for one node picked at random
local function utilisation(c, cluster)
  local svc = V.dcgm(c)
  if not svc then return nil, "no DCGM exporter in the cluster (no Service labelled app.kubernetes.io/name=dcgm-exporter)" end
  local seen = dcgm_seen[cluster]
  if seen and hypd.now() - seen.t < DCGM_EVERY then return seen.u, seen.why end
  local conn = c.conn()
  local pods = exporter_pods(conn, svc)
  local where = "the DCGM exporter " .. svc.namespace .. "/" .. svc.name
  local u, why
  if #pods == 0 then
    why = where .. " has no ready pod"
  else
    local gpus, failed, next_pod = hypd.json.array(), {}, 1
    local function worker()
      while next_pod <= #pods do
        local pod = pods[next_pod]
        next_pod = next_pod + 1
        local resp, err = conn:proxy("Pod", pod.name, "/metrics", { namespace = svc.namespace, port = pod.port,
          timeout = 5 })
        if resp and resp.status == 200 then
          for _, g in ipairs(V.utilisation(resp.body)) do gpus[#gpus + 1] = g end
        else
          failed[#failed + 1] = pod.name .. ": " .. (resp and ("HTTP " .. resp.status) or tostring(err and err.message or err))
        end
      end
    end
    local tasks = {}
    for k = 1, math.min(DCGM_PARALLEL, #pods) do tasks[k] = hypd.spawn(worker) end
    for _, tk in ipairs(tasks) do tk.wait() end
    V.sort_gpus(gpus)
    u = { source = "dcgm", service = svc.namespace .. "/" .. svc.name, exporters = #pods, gpus = gpus,
      failed = #failed > 0 and failed or nil }
    if #gpus == 0 then u, why = nil, where .. " answered no GPU: " .. table.concat(failed, "; ") end
  end
  dcgm_seen[cluster] = { t = hypd.now(), u = u, why = why }
  return u, why
end

local function signature(out)
  local keep = {}
  for k, v in pairs(out) do if k ~= "cache" and k ~= "history" and k ~= "waited" then keep[k] = v end end
  return hypd.json.encode(keep)
end

return tool {
  name = "monitor_get_cluster",
  summary = "Cluster monitoring: node health, GPUs per group, pending GPU demand, workloads, warnings",
  description = "What is happening across the cluster, from a watch-backed cache (the first call builds it; later " ..
    "calls answer at once): nodes by health with failed and degraded first, GPUs and EFA per instance group and " ..
    "node, pending GPU demand with the scheduler's reason, pods by phase, Services, Deployments, inference " ..
    "endpoints, training and Ray jobs, running hypd operations, recent Warning events and an hour of GPU " ..
    "allocation. Call it first to see the state of a cluster; diagnose_* tools explain a problem it shows.",
  kind = "read",
  aws = { "eks:DescribeCluster" },
  k8s = { "get", "list", "watch", "proxy" },
  params = P.form({},
    { "instance_group", "namespace", "cluster", "region", "wait_seconds" },
    {
    cluster = P.cluster, region = P.region,
    namespace = { type = "string", pattern = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length = 63,
      description = "only this namespace's pods, pending pods, workloads and events (nodes and GPUs stay whole)" },
    instance_group = P.with(P.instance_group, { description = "only this instance group's nodes, GPUs and pending demand" }),
    wait_seconds = P.wait_seconds,
  }),
  run = function(ctx, p)
    local target = ctx:cluster(p)
    local c = hypd.k8s.cache { cluster = target.name, region = target.region, kinds = K.KINDS, sample = V.sample }
    local cold = c.info().state == "cold"
    local ok, err = c.ready(BUILD_WAIT)
    if not ok then error(err, 0) end
    local name = target.name
    local function on_cluster(t) return t:find(name, 1, true) ~= nil end
    local function read()
      c.touch()
      local out = view(c, p, name, target.region)
      out.cluster, out.region = name, target.region
      local info = c.info()
      info.state = cold and "cold" or "warm"
      cold = false
      out.cache = info
      local absent = hypd.json.array()
      for _, k in ipairs(K.KINDS) do
        local st = c.kind_state(k.name)
        if st.state == "absent" then absent[#absent + 1] = k.kind
        elseif st.state == "error" then
          out.errors = out.errors or hypd.json.array()
          out.errors[#out.errors + 1] = { kind = k.kind, message = st.err }
        end
      end
      out.absent_kinds = #absent > 0 and absent or nil
      local ops = hypd.json.array()
      for _, s in ipairs(R.all(on_cluster)) do
        ops[#ops + 1] = { id = s.operation_id, tool = s.tool, phase = s.phase, started = s.created_at, target = s.target }
      end
      out.operations = ops
      local hist = hypd.json.array()
      for i, s in ipairs(c.history()) do
        hist[i] = { t = s.t, gpus_allocatable = s.gpus_allocatable, gpus_requested = s.gpus_requested }
      end
      out.history = hist
      local u, why = utilisation(c, name)
      out.utilisation, out.utilisation_absent = u, why
      return out
    end
    -- settled: nothing passing (no operation, no pending pod, no node being
    -- rebooted or replaced); else wait_seconds answers at the first change
    -- of the cache (its version, looked at every _wait QUICK) or of an operation
    local out, waited = W.follow(p.wait_seconds, { read = read,
      settled = function(o)
        if #o.operations > 0 or o.pending.pods > 0 or o.pods.by_phase.Pending > 0 then return false end
        for _, n in ipairs(o.nodes.items) do
          if W.moving(n.health_label) or tostring(n.health_label):match("^UnschedulablePending") then return false end
        end
        return true
      end,
      signature = signature,
      quick = function() return tostring(c.version()) .. " " .. R.fingerprint(on_cluster) end })
    out.waited = waited
    return out
  end,
}
