-- inference_deploy_router: the SGLang router (sglang_router.launch_router)
-- in front of SGLang worker deployments, as the reference deploys it: a
-- Deployment `sglang-router` (image lmsysorg/sglang) that discovers the
-- workers' pods by label (--service-discovery --selector, so replicas added
-- by scaling join by themselves), a ServiceAccount with a ClusterRole and
-- ClusterRoleBinding to watch pods, and a Service `sglang-router-service`
-- (port named http). Policies: cache_aware (a prefix cache tree per worker,
-- balanced by load), round_robin, random, power_of_two.
--
-- Workers are found by the names given: when their pods share a label
-- that selects only them (one deployment always does), the router
-- discovers the pods by it; otherwise (two inference_deploy_container
-- deployments: each pod carries only its own hypd.io/inference=<name>, and
-- hypd does not relabel another tool's deployment) it is given each
-- worker's Service by name (--worker-urls http://<service>.<ns>.svc...:<port>),
-- whose replicas that Service balances.
--
-- Before any write it refuses workers that are missing, that do not run
-- SGLang (python -m sglang.launch_server), or (sharing no such label) that
-- have no Service selecting their pods; and objects of its names that
-- another tool or anyone else made (hypd.io/family, _ownership).
local Names = require "_names"
local P = require "_params"
local K = require "_k8s_objects"
local S = require "inference._serving"
local cap = require "_capacity"
local hp = require "_hyperpod"

local KNAME = P.with(S.NAME, { max_length = 50 })

local function words(c)
  local out = {}
  for _, list in ipairs { c.command or {}, c.args or {} } do
    for _, w in ipairs(list) do for x in tostring(w):gmatch("%S+") do out[#out + 1] = x end end
  end
  return out
end

-- sglang_port(dep) -> the port the deployment's SGLang server listens on | nil (not SGLang)
local function sglang_port(dep)
  for _, c in ipairs(((dep.spec.template or {}).spec or {}).containers or {}) do
    local ws = words(c)
    local cmd = table.concat(ws, " ")
    if cmd:find("sglang.launch_server", 1, true) then
      for i, w in ipairs(ws) do
        if w == "--port" then return tonumber(ws[i + 1]) or 30000 end
        local v = w:match("^%-%-port=(%d+)$")
        if v then return tonumber(v) end
      end
      return 30000
    end
  end
end

local FAMILY = "inference-router"

-- selector(conn, ns, deps) -> the labels every worker pod has and no other
-- deployment's pods do, or nil, why when there are none
local function selector(conn, ns, deps)
  local common
  for _, d in ipairs(deps) do
    local l = #deps == 1 and d.spec.selector.matchLabels or (d.spec.template.metadata or {}).labels or {}
    if not common then
      common = {}
      for k, v in pairs(l) do common[k] = v end
    else
      for k, v in pairs(common) do if l[k] ~= v then common[k] = nil end end
    end
  end
  -- hypd's own labels say who made a pod, not which worker it is: a
  -- selector of them (hypd.io/engine=sglang, hypd.io/family=...) would
  -- also take in any later deployment of that kind, not only those named
  if #deps > 1 then
    for k in pairs(common) do
      if k == "app.kubernetes.io/managed-by" or k:find("^hypd%.io/") then common[k] = nil end
    end
  end
  local mine = {}
  for _, d in ipairs(deps) do mine[d.metadata.name] = true end
  local others = {}
  if next(common) then
    for _, d in ipairs(conn:list("apps/v1", "Deployment", { namespace = ns }) or {}) do
      local l = (d.spec.template.metadata or {}).labels or {}
      local hit = true
      for k, v in pairs(common) do hit = hit and l[k] == v end
      if hit and not mine[d.metadata.name] then others[#others + 1] = d.metadata.name end
    end
  end
  if not next(common) then return nil, "share no label" end
  if #others > 0 then return nil, "share only labels that also select " .. table.concat(others, ", ") end
  return common
end

-- worker_urls(conn, ns, deps, names, port) -> the URL of each worker's
-- Service (by DNS name, on its port that reaches the SGLang server);
-- refuses a worker no Service selects
local function worker_urls(conn, ns, deps, names, why)
  local out = {}
  for i, d in ipairs(deps) do
    local svc, sport = S.service(conn, ns, d, names[i])
    if not svc then
      hypd.errors.refuse("workers[" .. (i - 1) .. "]", "service", string.format("workers: the pods of %s %s, so the router " ..
        "reaches each worker through its Service, and no Service selects the pods of %s (inference_deploy_container " ..
        "makes one unless service=pool); give it one, or a label common to every worker's pods", table.concat(names,
        ", "), why, names[i]))
    end
    out[i] = string.format("http://%s.%s.svc.cluster.local:%d", svc.metadata.name, ns, sport)
  end
  return out
end

local objects -- (below) the router's objects

local function check(ctx)
  local p, st = ctx.params, ctx.state
  local conn = hp.k8s(ctx, p)
  local deps, port = {}, nil
  for i, w in ipairs(p.workers) do
    local d = S.deployment(conn, p.namespace, w)
    if not d then
      hypd.errors.refuse("workers[" .. (i - 1) .. "]", "exists", string.format("workers: no deployment %s/%s (inference_list " ..
        "lists them)", p.namespace, w))
    end
    local wp = sglang_port(d)
    if not wp then
      hypd.errors.refuse("workers[" .. (i - 1) .. "]", "sglang", string.format("workers: deployment %s does not run SGLang " ..
        "(python -m sglang.launch_server); the SGLang router routes to SGLang workers", w))
    end
    if port and wp ~= port then
      hypd.errors.refuse("workers", "port", string.format("workers: the workers listen on different ports (%d and %d); the " ..
        "router reaches every discovered pod on one port", port, wp))
    end
    port = wp
    deps[#deps + 1] = d
  end
  local sel, why = selector(conn, p.namespace, deps)
  st.selector, st.worker_urls = nil, nil
  if sel then
    local keys = {}
    for k in pairs(sel) do keys[#keys + 1] = k end
    table.sort(keys)
    local pairs_ = {}
    for i, k in ipairs(keys) do pairs_[i] = k .. "=" .. sel[k] end
    st.selector = pairs_
  else
    st.worker_urls = worker_urls(conn, p.namespace, deps, p.workers, why)
  end
  st.worker_port = port
  K.claim(conn, objects(p, st), FAMILY, { cluster = st.eks })
end

-- objects(p, st) -> the router's objects, in the order they are applied
function objects(p, st)
  local ns, name = p.namespace, p.name
  local role = Names.discovery_role(ns, name)
  local labels = { app = name, ["hypd.io/inference"] = name, ["hypd.io/inference-kind"] = "router" }
  local cmd = { "python3", "-m", "sglang_router.launch_router", "--host", "0.0.0.0", "--port", tostring(p.port),
    "--policy", p.policy }
  if st.selector then
    cmd[#cmd + 1], cmd[#cmd + 2] = "--service-discovery", "--selector"
    for _, kv in ipairs(st.selector) do cmd[#cmd + 1] = kv end
    for _, x in ipairs { "--service-discovery-port", tostring(st.worker_port), "--service-discovery-namespace", ns }
      do cmd[#cmd + 1] = x end
  else
    cmd[#cmd + 1] = "--worker-urls"
    for _, u in ipairs(st.worker_urls) do cmd[#cmd + 1] = u end
  end
  for _, x in ipairs { "--prometheus-host", "0.0.0.0", "--prometheus-port", "29000" } do cmd[#cmd + 1] = x end
  local svc_spec = { type = p.service_type, selector = { app = name, ["hypd.io/inference"] = name },
    ports = { { name = "http", port = p.port, targetPort = "http", protocol = "TCP" },
      { name = "metrics", port = 29000, targetPort = "metrics", protocol = "TCP" } } }
  return {
    { apiVersion = "v1", kind = "ServiceAccount", metadata = { name = name, namespace = ns, labels = labels } },
    { apiVersion = "rbac.authorization.k8s.io/v1", kind = "ClusterRole", metadata = { name = role, labels = labels },
      rules = { { apiGroups = { "" }, resources = { "pods" }, verbs = { "get", "list", "watch" } } } },
    { apiVersion = "rbac.authorization.k8s.io/v1", kind = "ClusterRoleBinding",
      metadata = { name = role, labels = labels },
      roleRef = { apiGroup = "rbac.authorization.k8s.io", kind = "ClusterRole", name = role },
      subjects = { { kind = "ServiceAccount", name = name, namespace = ns } } },
    { apiVersion = "apps/v1", kind = "Deployment", metadata = { name = name, namespace = ns, labels = labels },
      spec = { replicas = p.replicas, selector = { matchLabels = { app = name, ["hypd.io/inference"] = name } },
        template = { metadata = { labels = labels }, spec = { serviceAccountName = name, containers = { {
          name = "router", image = p.image, command = cmd,
          ports = { { name = "http", containerPort = p.port }, { name = "metrics", containerPort = 29000 } },
          resources = { requests = { cpu = "1", memory = "2Gi" }, limits = { memory = "4Gi" } },
          readinessProbe = { httpGet = { path = "/health", port = "http" }, periodSeconds = 10 } } } } } } },
    { apiVersion = "v1", kind = "Service", metadata = { name = p.service_name or (name .. "-service"), namespace = ns,
      labels = labels }, spec = svc_spec },
  }
end

local function apply(ctx)
  local p, st = ctx.params, ctx.state
  local conn = ctx:k8s(st.eks)
  st.objects = S.ensure_all(ctx, conn, objects(p, st), { family = FAMILY, field = "name" })
end

local function wait(ctx)
  local p, st = ctx.params, ctx.state
  if ctx.plan then return end
  local conn = ctx:k8s(st.eks)
  st.ready = ctx:poll { what = "router " .. p.namespace .. "/" .. p.name .. " to be ready", every = 2,
    timeout = 10 * 60, check = function()
      local d = K.get(conn, "apps/v1", "Deployment", p.name, p.namespace)
      local n = d and tonumber((d.status or {}).readyReplicas) or 0
      local why -- a condition the Deployment reports as False (ReplicaFailure, ProgressDeadlineExceeded)
      for _, c in ipairs(((d or {}).status or {}).conditions or {}) do
        if c.status == "False" and c.message then why = why or (tostring(c.reason or c.type) .. ": " .. c.message) end
      end
      return n >= p.replicas, n .. "/" .. p.replicas .. " ready" .. (why and ("; " .. why) or ""), n
    end }
end

local function result(ctx)
  local p, st = ctx.params, ctx.state
  if ctx.plan then return end
  st.result = { cluster = st.eks, region = st.region, name = p.name, namespace = p.namespace,
    service = p.service_name or (p.name .. "-service"), port = p.port, policy = p.policy, workers = p.workers,
    selector = st.selector, worker_urls = st.worker_urls, worker_port = st.worker_port, ready_replicas = st.ready,
    objects = st.objects,
    next = "inference_call_model name=" .. p.name .. " namespace=" .. p.namespace .. " prompt=<prompt>" }
end

return tool {
  name = "inference_deploy_router",
  summary = "Deploy the SGLang router (cache-aware routing) in front of SGLang worker deployments",
  description = "Deploys the SGLang router (python -m sglang_router.launch_router, image lmsysorg/sglang) in front " ..
    "of the SGLang worker deployments named in workers: a Deployment (default name sglang-router) that finds " ..
    "the workers' pods by a label they all share and no other pods have (service discovery, so replicas added " ..
    "later join) or, when they share none (two inference_deploy_container deployments), reaches each worker " ..
    "through its Service by name (--worker-urls); a ServiceAccount with a " ..
    "ClusterRole/ClusterRoleBinding to watch pods, and a Service <name>-service (port named http, ClusterIP or " ..
    "LoadBalancer). policy: cache_aware (default: requests sharing a prefix go to the worker that has it cached, " ..
    "balanced by load), round_robin, random, power_of_two. Refuses before creating anything when a worker is " ..
    "missing, does not run SGLang, or shares no such label and has no Service. plan=true lists " ..
    "the objects. Then inference_call_model name=<name> sends a request through the router; inference_get " ..
    "name=<name> shows it.",
  kind = "mutating",
  aws = { "eks:DescribeCluster" },
  k8s = { "get", "list", "apply" },
  status_tool = "inference_get",
  params = P.form({ "service_type", "workers" },
    { "name", "image", "policy", "port", "replicas", "service_name", "namespace", "cluster", "region" },
    {
    workers = { type = "array", required = true, decision = true, items = KNAME,
      description = "the SGLang worker deployments to route to, by name" },
    name = P.with(KNAME, { default = "sglang-router", description = "the router Deployment's name" }),
    service_name = P.with(S.NAME, { description = "the router Service's name (default <name>-service)" }),
    namespace = P.with(S.NS, { description = "the workers' and the router's namespace" }),
    policy = { type = "string", enum = { "cache_aware", "round_robin", "random", "power_of_two" },
      default = "cache_aware", description = "how the router picks a worker" },
    image = { type = "string", default = "lmsysorg/sglang:latest", pattern = "^[a-zA-Z0-9][a-zA-Z0-9._/:@-]*$",
      max_length = 512, pattern_help = "a container image reference like registry/name:tag",
      description = "the router's image (it has sglang_router)" },
    port = { type = "integer", default = 30000, minimum = 1, maximum = 65535, description = "the router's port" },
    replicas = { type = "integer", default = 1, minimum = 1, maximum = 10, description = "router replicas" },
    service_type = { type = "string", enum = { "ClusterIP", "LoadBalancer" }, default = "ClusterIP",
      decision = true, description = "ClusterIP (inside the cluster) or LoadBalancer (an external load balancer)" },
    cluster = P.cluster, region = P.region,
  }, { name = "Router name" }),
  validate = function(p)
    if #p.workers == 0 then hypd.errors.refuse("workers", "min_items", "workers: name at least one SGLang worker deployment") end
    local seen = {}
    for i, w in ipairs(p.workers) do
      if seen[w] then hypd.errors.refuse("workers[" .. (i - 1) .. "]", "unique", "workers: " .. w .. " is named twice") end
      seen[w] = true
    end
  end,
  target = function(p)
    return (cap.target(p, tostring(p.namespace or "default") .. "/" .. tostring(p.name or "sglang-router"))
      :gsub("^hyperpod/", "inference/"))
  end,
  steps = {
    { name = "check", run = check, on_call = true }, -- refused on the call (hypd.tool.operations): reads only
    { name = "apply", run = apply },
    { name = "wait", run = wait },
    { name = "result", run = result },
  },
}
