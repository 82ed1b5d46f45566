-- inference_deploy_router: the SGLang router (sglang_router.launch_router)
-- in front of SGLang worker deployments, as the reference deploys it: a
-- Deployment `sglang-router` (image lmsysorg/sglang) that discovers the
-- workers' pods by label (--service-discovery --selector, so replicas added
-- by scaling join by themselves), a ServiceAccount with a ClusterRole and
-- ClusterRoleBinding to watch pods, and a Service `sglang-router-service`
-- (port named http). Policies: cache_aware (a prefix cache tree per worker,
-- balanced by load), round_robin, random, power_of_two.
--
-- Before any write it refuses workers that are missing, that do not run
-- SGLang (python -m sglang.launch_server), or that share no label selecting
-- only their pods (the router takes one selector).
local P = require "_params"
local K = require "hyperpod._feat_k8s"
local S = require "inference._serving"
local cap = require "hyperpod._capacity"
local hp = require "hyperpod._hp"

local KNAME = P.with(S.NAME, { max_length = 50 })

local function refuse(field, rule, msg) S.refuse({ { field = field, rule = rule, message = msg } }, msg) end

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

-- selector(conn, ns, deps) -> the labels every worker pod has and no other deployment's pods do
local function selector(conn, ns, deps, names)
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
  for _, k in ipairs { "app.kubernetes.io/managed-by", "hypd.io/operation", "hypd.io/inference-kind" } do
    if #deps > 1 then common[k] = nil end
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
  if not next(common) or #others > 0 then
    refuse("workers", "selector", string.format("workers: the pods of %s share no label that selects only them%s; " ..
      "the router discovers workers by one label selector: give the worker deployments a common label (e.g. " ..
      "model=<name>) or route one deployment", table.concat(names, ", "),
      #others > 0 and (" (it would also select " .. table.concat(others, ", ") .. ")") or ""))
  end
  return common
end

local function check(ctx)
  local p, st = ctx.params, ctx.state
  local conn = hp.k8s(ctx, p)
  local deps, port = {}, nil
  for i, w in ipairs(p.workers) do
    local d = S.deployment(conn, p.namespace, w)
    if not d then
      refuse("workers[" .. (i - 1) .. "]", "exists", string.format("workers: no deployment %s/%s (inference_list " ..
        "lists them)", p.namespace, w))
    end
    local wp = sglang_port(d)
    if not wp then
      refuse("workers[" .. (i - 1) .. "]", "sglang", string.format("workers: deployment %s does not run SGLang " ..
        "(python -m sglang.launch_server); the SGLang router routes to SGLang workers", w))
    end
    if port and wp ~= port then
      refuse("workers", "port", string.format("workers: the workers listen on different ports (%d and %d); the " ..
        "router reaches every discovered pod on one port", port, wp))
    end
    port = wp
    deps[#deps + 1] = d
  end
  local sel = selector(conn, p.namespace, deps, p.workers)
  local keys = {}
  for k in pairs(sel) do keys[#keys + 1] = k end
  table.sort(keys)
  local pairs_ = {}
  for i, k in ipairs(keys) do pairs_[i] = k .. "=" .. sel[k] end
  st.selector, st.worker_port = pairs_, port
end

-- objects(p, st) -> the router's objects, in the order they are applied
local function objects(p, st)
  local ns, name = p.namespace, p.name
  local role = "hypd-" .. ns .. "-" .. name .. "-discovery"
  local labels = { app = name, ["hypd.io/inference"] = name, ["hypd.io/inference-kind"] = "router" }
  local cmd = { "python3", "-m", "sglang_router.launch_router", "--host", "0.0.0.0", "--port", tostring(p.port),
    "--policy", p.policy, "--service-discovery", "--selector" }
  for _, kv in ipairs(st.selector) do cmd[#cmd + 1] = kv end
  for _, x in ipairs { "--service-discovery-port", tostring(st.worker_port), "--service-discovery-namespace", ns,
    "--prometheus-host", "0.0.0.0", "--prometheus-port", "29000" } do cmd[#cmd + 1] = x end
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
  st.objects = S.ensure_all(ctx, conn, objects(p, st))
end

local function wait(ctx)
  local p, st = ctx.params, ctx.state
  if ctx.plan then return end
  local conn = ctx:k8s(st.eks)
  st.ready = ctx:poll { what = "router " .. p.namespace .. "/" .. p.name .. " to be ready", every = 2,
    timeout = 10 * 60, check = function()
      local d = K.get(conn, "apps/v1", "Deployment", p.name, p.namespace)
      local n = d and tonumber((d.status or {}).readyReplicas) or 0
      return n >= p.replicas, n .. "/" .. p.replicas .. " ready", n
    end }
end

local function result(ctx)
  local p, st = ctx.params, ctx.state
  if ctx.plan then return end
  st.result = { cluster = st.eks, region = st.region, name = p.name, namespace = p.namespace,
    service = p.service_name or (p.name .. "-service"), port = p.port, policy = p.policy, workers = p.workers,
    selector = st.selector, worker_port = st.worker_port, ready_replicas = st.ready, objects = st.objects,
    next = "inference_call_model name=" .. p.name .. " namespace=" .. p.namespace .. " prompt=<prompt>" }
end

return tool {
  name = "inference_deploy_router",
  summary = "Deploy the SGLang router (cache-aware routing) in front of SGLang worker deployments",
  description = "Deploys the SGLang router (python -m sglang_router.launch_router, image lmsysorg/sglang) in front " ..
    "of the SGLang worker deployments named in workers: a Deployment (default name sglang-router) that finds " ..
    "the workers' pods by label (service discovery, so replicas added later join), a ServiceAccount with a " ..
    "ClusterRole/ClusterRoleBinding to watch pods, and a Service <name>-service (port named http, ClusterIP or " ..
    "LoadBalancer). policy: cache_aware (default: requests sharing a prefix go to the worker that has it cached, " ..
    "balanced by load), round_robin, random, power_of_two. Refuses before creating anything when a worker is " ..
    "missing, does not run SGLang, or the workers share no label that selects only their pods. plan=true lists " ..
    "the objects. Then inference_call_model name=<name> sends a request through the router; inference_get " ..
    "name=<name> shows it.",
  kind = "mutating",
  aws = { "eks:DescribeCluster" },
  k8s = { "get", "list", "apply" },
  status_tool = "inference_get",
  params = {
    workers = { type = "array", required = true, decision = true, items = KNAME,
      description = "the SGLang worker deployments to route to (one label selector must select just their pods)" },
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
  },
  check = function(p)
    if #p.workers == 0 then refuse("workers", "min_items", "workers: name at least one SGLang worker deployment") end
    local seen = {}
    for i, w in ipairs(p.workers) do
      if seen[w] then refuse("workers[" .. (i - 1) .. "]", "unique", "workers: " .. w .. " is named twice") end
      seen[w] = true
    end
  end,
  target = function(p)
    return (cap.target(p, tostring(p.namespace or "default") .. "/" .. tostring(p.name or "sglang-router"))
      :gsub("^hyperpod/", "inference/"))
  end,
  steps = {
    { name = "check", run = check, on_call = true }, -- refused on the call (hypd.op): reads only
    { name = "apply", run = apply },
    { name = "wait", run = wait },
    { name = "result", run = result },
  },
}
