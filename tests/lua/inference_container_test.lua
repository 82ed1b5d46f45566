-- The self-managed inference tools (inference_deploy_container,
-- inference_assign_pool_pod, inference_release_pool_pod, inference_scale,
-- inference_list, inference_get, inference_delete) against the in-process
-- sandbox under the virtual clock: an EKS cluster with a HyperPod group of
-- three ml.g5.12xlarge nodes (4 GPUs each). Bad input is refused at the
-- call naming field and rule; a plan sends nothing; the port comes from
-- --port and the GPUs are never inferred from tensor-parallel flags; a pod
-- asking for more GPUs than any node has stays Pending and inference_get
-- gives the scheduler's event; a model pool of three warm workers gives two
-- to a model whose Service selects exactly those two, gives one back, and
-- refuses to scale below its assigned workers; list, get and delete follow.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
require("hypd.tool.loader").load()
local _, OPTS = H.sandbox_here()
local FH = dofile("tests/lua/features_helpers.lua")
local call = FH.aws(OPTS)
local dispatch = require "hypd.tool.dispatch"
local json, op, task = require "hypd.json", require "hypd.tool.operations", require "hypd.task"
local ADMIN = { name = "inference-tester", scope = "admin", front = "test" }
local EKS, HP = "infer-a", "infer-a-hp"
local field_rules = H.field_rules

local conn

-- run(name, args) -> result | nil, err, record: a tool called and, when it
-- makes an operation, waited for
local function run(name, args)
  args.cluster = args.cluster or EKS
  local acc, err = dispatch.call(name, args, ADMIN)
  if not acc then return nil, err end
  if args.plan or not acc.operation_id then return acc end
  local v = op.wait(acc.operation_id)
  if v.status ~= "succeeded" then return nil, v.error, v end
  return v.result, nil, v
end

local function get(name, extra)
  local args = { name = name, cluster = EKS }
  for k, v in pairs(extra or {}) do args[k] = v end
  return assert(dispatch.call("inference_get", args, ADMIN))
end

-- endpoints(svc) -> the sorted pod names the Service's Endpoints list as ready
local function endpoints(svc)
  local ep = conn:get("v1", "Endpoints", svc, { namespace = "default" })
  local out = {}
  for _, s in ipairs((ep or {}).subsets or {}) do
    for _, a in ipairs(s.addresses or {}) do out[#out + 1] = a.targetRef.name end
  end
  table.sort(out)
  return out
end

-- settle(fn): lets the controllers run (virtual time) until fn() is true
local function settle(fn)
  for _ = 1, 30 do
    if fn() then return true end
    task.sleep(1)
  end
  return fn()
end

t.test("a cluster: EKS and a HyperPod group of three ml.g5.12xlarge nodes, and the s3-claim", function()
  conn = FH.gpu_cluster(call, EKS, HP, 83, 3)
  assert(conn:create { apiVersion = "v1", kind = "PersistentVolumeClaim",
    metadata = { name = "s3-claim", namespace = "default" },
    spec = { accessModes = { "ReadWriteMany" }, storageClassName = "", resources = { requests = { storage = "1200Gi" } } } })
  t.ok(true, "three GPU nodes and the claim")
end)

local SGLANG = { "python3", "-m", "sglang.launch_server", "--model-path", "/s3/models/qwen", "--host", "0.0.0.0" }
local TOKEN = "hf_" .. string.rep("aB3", 12) -- shaped like a Hugging Face token
local BASE = { name = "qwen-vllm", engine = "vllm", instance_type = "ml.g5.12xlarge", gpus = 1 }
local function args(extra)
  local a = {}
  for k, v in pairs(BASE) do a[k] = v end
  for k, v in pairs(extra or {}) do a[k] = v end
  if a.gpus == json.null then a.gpus = nil end
  return a
end

t.test("bad input is refused at the call, naming field and rule, and nothing is created", function()
  local m = FH.mark()
  local cases = {
    { args { gpus = json.null }, { "gpus:required" } },
    { args { gpus = "1" }, { "gpus:type" } },
    { args { gpus = -1 }, { "gpus:minimum" } },
    { args { gpus = 1.5 }, { "gpus:type" } },
    { args { image = "not an image!" }, { "image:pattern" } },
    { args { name = "Bad_Name" }, { "name:pattern" } },
    { args { engine = "tgi" }, { "engine:enum" } },
    { args { service = "nodeport" }, { "service:enum" } },
    { args { instance_type = "g5.12xlarge" }, { "instance_type:pattern" } },
    { args { port = 8000, args = { "--port", "9000" } }, { "port:matches_command" } },
    { args { args = { "--port", "http" } }, { "command:port" } },
    { args { engine = "custom", image = "ghcr.io/acme/server:1" }, { "port:required" } },
    { args { engine = "custom" }, { "image:required" } },
    { args { port = 70000 }, { "port:maximum" } },
    { args { env = { ["BAD NAME"] = "x" } }, { "env:name" } },
    { args { engine = "sglang" }, { "command:required" } },
    { args { env = { HF_TOKEN = "x" } }, { "env.HF_TOKEN:secret" } },
    { args { env = { MODEL_AUTH = TOKEN } }, { "env.MODEL_AUTH:secret" } },
    { args { args = { "--model", "m", "--hf-token", TOKEN } }, { "args[3]:secret" } },
    { args { args = { "--api-key=" .. TOKEN } }, { "args[0]:secret" } },
    { args { secret_env = { HF_TOKEN = "no-key" } }, { "secret_env.HF_TOKEN:pattern" } },
  }
  for i, c in ipairs(cases) do
    local acc, err = dispatch.call("inference_deploy_container", c[1], ADMIN)
    t.eq(acc, nil, "case " .. i .. ": no operation")
    t.eq(field_rules(err), c[2], "case " .. i .. ": " .. tostring(err and err.message))
    t.eq(json.encode(err or {}):find(TOKEN, 1, true), nil, "case " .. i .. ": the token is never echoed")
  end
  local _, err = dispatch.call("inference_assign_pool_pod", { pool = "p", model = "m", cluster = EKS }, ADMIN)
  t.eq(field_rules(err), { "count:one_of" }, "assign needs count or pods")
  _, err = dispatch.call("inference_release_pool_pod", { cluster = EKS }, ADMIN)
  t.eq(field_rules(err), { "pods:one_of" }, "release needs pods or model")
  _, err = dispatch.call("inference_scale", { name = "x", replicas = -1, cluster = EKS }, ADMIN)
  t.eq(field_rules(err), { "replicas:minimum" })
  t.eq(#FH.k8s_writes(m), 0, "no Kubernetes write")
end)

t.test("plan mode lists the Deployment and the Service it would create and sends nothing", function()
  local m = FH.mark()
  local r, err = run("inference_deploy_container", args { plan = true, args = { "--port=8200" } })
  t.ok(r, err and err.message)
  local rows = {}
  for _, e in ipairs(r and r.plan or {}) do rows[#rows + 1] = e.action .. " " .. e.type .. " " .. e.name end
  t.eq(rows, { "create k8s:deployment default/qwen-vllm", "create k8s:service default/qwen-vllm" })
  local other = assert(run("inference_deploy_container", args { plan = true, namespace = "serving",
    env = { HF_HUB_OFFLINE = "1" }, secret_env = { HF_TOKEN = "hf-token/token" } }))
  t.eq(other.plan[2].fields.spec.template.spec.containers[1].env, { { name = "HF_HUB_OFFLINE", value = "1" },
    { name = "HF_TOKEN", valueFrom = { secretKeyRef = { name = "hf-token", key = "token" } } } },
    "secret_env becomes a secretKeyRef")
  t.eq(other.plan[1].action .. " " .. other.plan[1].type .. " " .. other.plan[1].name, "create k8s:namespace serving",
    "a namespace not there yet is made first")
  local dep = r and r.plan[1].fields
  local c = dep and dep.spec.template.spec.containers[1]
  t.eq(c and c.ports[1].containerPort, 8200, "the port from --port=8200")
  t.eq(r and r.plan[2].fields.spec.ports[1].port, 8200)
  -- a shell command line in one element counts word by word
  r = assert(run("inference_deploy_container", { name = "sh-line", engine = "custom", image = "ghcr.io/acme/srv:1",
    instance_type = "ml.g5.12xlarge", gpus = 2, plan = true,
    command = { "/bin/sh", "-c", "python -m server --tp 4 --port 9001" } }))
  c = r.plan[1].fields.spec.template.spec.containers[1]
  t.eq({ c.ports[1].containerPort, c.resources.limits["nvidia.com/gpu"] }, { 9001, "2" })
  t.eq(#FH.k8s_writes(m), 0)
  t.eq(#(conn:list("apps/v1", "Deployment", { namespace = "default" }) or {}), 0)
end)

t.test("vLLM: the port is read from --port, gpus is never inferred from --tensor-parallel-size", function()
  local r, err = run("inference_deploy_container", args { args = { "--model", "/s3/models/qwen", "--port", "8100",
    "--tensor-parallel-size", "4" } })
  t.ok(r, err and err.message)
  if not r then return end
  t.eq({ r.kind, r.port, r.port_from, r.gpus, r.phase }, { "container", 8100, "command", 1, "Ready" })
  t.like(json.encode(r.warnings), "tensor parallelism 4 but each pod requests 1 GPU")
  local dep = assert(conn:get("apps/v1", "Deployment", "qwen-vllm", { namespace = "default" }))
  local spec = dep.spec.template.spec
  local c = spec.containers[1]
  t.eq(c.resources.requests["nvidia.com/gpu"], "1", "1 GPU requested, not 4")
  t.eq(c.resources.limits["nvidia.com/gpu"], "1")
  t.eq({ c.image, c.ports[1].containerPort, c.ports[1].name }, { "vllm/vllm-openai:latest", 8100, "http" })
  t.eq(c.readinessProbe.httpGet, { path = "/health", port = "http" })
  t.eq(c.securityContext.capabilities.add, { "IPC_LOCK" })
  t.eq(c.volumeMounts[1], { name = "s3", mountPath = "/s3", readOnly = true })
  t.eq(spec.volumes[2].emptyDir, { medium = "Memory" })
  t.eq(spec.tolerations[1], { key = "nvidia.com/gpu", operator = "Exists", effect = "NoSchedule" })
  local na = spec.affinity.nodeAffinity
  t.eq(na.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[1].matchExpressions[1].values,
    { "ml.g5.12xlarge" })
  local w = {}
  for _, pref in ipairs(na.preferredDuringSchedulingIgnoredDuringExecution) do w[#w + 1] = pref.weight end
  t.eq(w, { 100, 90, 80 })
  local l = dep.metadata.labels
  t.eq({ l["app.kubernetes.io/managed-by"], l["hypd.io/inference"], l["hypd.io/inference-kind"] },
    { "hypd", "qwen-vllm", "container" })
  local tl = dep.spec.template.metadata.labels
  t.eq({ tl["hypd.io/inference"], tl["hypd.io/inference-kind"] }, { "qwen-vllm", "container" })
  local svc = assert(conn:get("v1", "Service", "qwen-vllm", { namespace = "default" }))
  t.eq({ svc.spec.type, svc.spec.ports[1].name, svc.spec.ports[1].port }, { "ClusterIP", "http", 8100 })
  local g = get("qwen-vllm")
  t.eq({ g.kind, g.replicas.desired, g.replicas.ready, g.port }, { "container", 1, 1, 8100 })
  t.eq(g.service and g.service.name, "qwen-vllm")
  t.eq(g.service and #g.service.endpoints, 1, "the Service's Endpoints list the pod")
  t.like(g.pods[1].node or "", "^hyperpod%-")
  t.ok(g.pods[1].logs and #g.pods[1].logs > 0, "log lines")
  local again = assert(run("inference_deploy_container", args { args = { "--model", "/s3/models/qwen", "--port",
    "8100", "--tensor-parallel-size", "4" } }))
  t.eq({ again.objects[1].action, again.objects[2].action }, { "unchanged", "unchanged" }, "a rerun changes nothing")
end)

local REASON = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are available: " ..
  "3 No preemption victims found for incoming pod."

t.test("more GPUs than any node offers: deployed, stays Pending, and inference_get gives the scheduler's reason",
  function()
    local r, err = run("inference_deploy_container", { name = "huge", engine = "sglang", command = SGLANG,
      instance_type = "ml.g5.12xlarge", gpus = 8, service = "external", cluster = EKS })
    t.ok(r, err and err.message)
    if not r then return end
    t.eq(r.phase, "Pending")
    t.eq(r.pending_reason, REASON)
    t.like(json.encode(r.warnings), "8 GPUs per pod is more than any ml.g5.12xlarge node offers %(4%)")
    t.like(json.encode(r.warnings), "no AWS Load Balancer Controller runs on EKS cluster", "external needs the LBC")
    t.like(json.encode(r.warnings), "cluster_configure_dependencies cluster=[%w-]+ region=us%-west%-2 " ..
      "load_balancer_controller=true", "and the command that installs it")
    local svc = assert(conn:get("v1", "Service", "huge", { namespace = "default" }))
    t.eq(svc.spec.type, "LoadBalancer")
    t.eq(svc.metadata.annotations["service.beta.kubernetes.io/aws-load-balancer-type"], "external")
    t.eq(svc.metadata.annotations["service.beta.kubernetes.io/aws-load-balancer-scheme"], "internal")
    local g = get("huge")
    t.eq({ g.replicas.desired, g.replicas.ready, g.port }, { 1, 0, 30000 })
    t.eq(g.pods[1].phase, "Pending")
    t.eq(g.pods[1].node, nil)
    t.eq(g.pending_reason, REASON)
    local found
    for _, e in ipairs(g.events) do
      if e.reason == "FailedScheduling" then found = e end
    end
    t.eq(found and found.message, REASON, "the scheduler's FailedScheduling event")
    t.eq(found and found.type, "Warning")
    -- an instance type the cluster does not have: the same, for the selector
    r, err = run("inference_deploy_container", { name = "elsewhere", engine = "vllm",
      instance_type = "ml.p5.48xlarge", gpus = 8, cluster = EKS })
    t.ok(r, err and err.message)
    t.eq(r and r.phase, "Pending")
    t.like(r and json.encode(r.warnings) or "", "no node of instance type ml%.p5%.48xlarge is in the cluster now")
    t.eq(r and r.pending_reason, "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector. " ..
      "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")
    t.eq(assert(run("inference_delete", { name = "elsewhere" })).action, "deleted")
    -- SGLang without --host listens on 127.0.0.1 only: said before it is deployed
    r = assert(run("inference_deploy_container", { name = "local-only", engine = "sglang", replicas = 0,
      command = { "python3", "-m", "sglang.launch_server", "--model-path", "/s3/models/qwen" },
      instance_type = "ml.g5.12xlarge", gpus = 1, cluster = EKS }))
    t.like(json.encode(r.warnings), "names no %-%-host: SGLang then listens on 127%.0%.0%.1 only")
    t.eq(assert(run("inference_delete", { name = "local-only" })).action, "deleted")
  end)

local pool_pods

t.test("a model pool: three warm workers, two assigned to a model, its Service selects exactly those two",
  function()
    local r, err = run("inference_deploy_container", { name = "warm", engine = "sglang", command = SGLANG,
      instance_type = "ml.g5.12xlarge", gpus = 1, replicas = 3, service = "pool", cluster = EKS })
    t.ok(r, err and err.message)
    if not r then return end
    t.eq({ r.kind, r.phase, r.service }, { "pool", "Ready", nil })
    t.eq(conn:get("v1", "Service", "warm", { namespace = "default" }), nil, "no Service for a pool")
    local g = get("warm")
    t.eq({ g.kind, g.replicas.desired, g.replicas.ready, g.unassigned }, { "pool", 3, 3, 3 })
    for _, p in ipairs(g.pods) do t.eq(p.assigned, "unassigned", p.name) end
    local pods = conn:list("v1", "Pod", { namespace = "default", labels = { ["hypd.io/inference"] = "warm" } })
    t.eq(pods[1].metadata.labels["deployment-type"], "model-pool")
    local m = FH.mark()
    local plan = assert(run("inference_assign_pool_pod", { pool = "warm", model = "qwen", count = 2, plan = true }))
    local rows = {}
    for _, e in ipairs(plan.plan) do rows[#rows + 1] = e.action .. " " .. e.type end
    t.eq(rows, { "change k8s:pod", "change k8s:pod", "create k8s:service" }, "a plan: two relabels, one Service")
    t.eq(plan.plan[1].changes, { business = { from = "unassigned", to = "qwen" } })
    t.eq(#FH.k8s_writes(m), 0, "the plan sent nothing")
    local a
    a, err = run("inference_assign_pool_pod", { pool = "warm", model = "qwen", count = 2 })
    t.ok(a, err and err.message)
    if not a then return end
    t.eq(#a.pods, 2)
    t.eq({ a.service.name, a.service.port, a.service.selector }, { "qwen", 30000, { business = "qwen" } })
    local names = { a.pods[1].name, a.pods[2].name }
    table.sort(names)
    pool_pods = names
    t.ok(settle(function() return #endpoints("qwen") == 2 end), "the Endpoints follow")
    t.eq(endpoints("qwen"), names, "the Service selects exactly the two assigned pods")
    local svc = assert(conn:get("v1", "Service", "qwen", { namespace = "default" }))
    t.eq({ svc.metadata.labels["hypd.io/inference"], svc.metadata.labels["hypd.io/inference-kind"],
      svc.metadata.labels["hypd.io/model"] }, { "warm", "pool", "qwen" })
    local again = assert(run("inference_assign_pool_pod", { pool = "warm", model = "qwen", count = 2 }))
    t.eq({ again.pods[1].action, again.pods[2].action, again.service.action }, { "unchanged", "unchanged",
      "unchanged" }, "count is the total: a repeat assigns no more")
    local _, e2 = run("inference_assign_pool_pod", { pool = "warm", model = "llama", count = 2 })
    t.eq(field_rules(e2), { "count:available" }, "only one unassigned pod is left")
    _, e2 = run("inference_assign_pool_pod", { pool = "qwen-vllm", model = "x", count = 1 })
    t.eq(field_rules(e2), { "pool:pool" }, "a container deployment is not a pool")
    g = get("warm")
    t.eq(g.unassigned, 1)
    t.eq(g.models[1].name, "qwen")
    t.eq(g.models[1].endpoints, names)
    g = get("qwen")
    t.eq({ g.name, g.kind, g.model, g.service.name, g.service.port }, { "warm", "pool", "qwen", "qwen", 30000 },
      "a model's name finds its pool and its Service")
    t.eq(g.service.endpoints, names)
  end)

t.test("release one: the Service keeps the other; scaling down refuses to remove assigned workers", function()
  if not pool_pods then return t.skip("no pool") end
  local r, err = run("inference_release_pool_pod", { pods = { pool_pods[1] } })
  t.ok(r, err and err.message)
  t.eq(r and r.pods[1].action, "changed")
  t.eq(r and r.models[1].pods_left, 1)
  t.ok(settle(function() return #endpoints("qwen") == 1 end))
  t.eq(endpoints("qwen"), { pool_pods[2] }, "only the pod still assigned")
  local pod = assert(conn:get("v1", "Pod", pool_pods[1], { namespace = "default" }))
  t.eq(pod.metadata.labels.business, "unassigned")
  -- 3 workers, 1 assigned: down to 0 would remove the assigned one
  local m = FH.mark()
  local _, e = run("inference_scale", { name = "warm", replicas = 0 })
  t.eq(field_rules(e), { "replicas:assigned" })
  t.like(e and e.message, "would remove 3 workers but only 2 are unassigned: 1 are assigned %(qwen: 1%)")
  t.eq(#FH.k8s_writes(m), 0, "nothing changed")
  -- down to 2 removes an unassigned one (the assigned pod costs more to delete)
  local s
  s, e = run("inference_scale", { name = "warm", replicas = 2 })
  t.ok(s, e and e.message)
  t.eq(s and { s.from, s.replicas, s.action }, { 3, 2, "changed" })
  t.ok(settle(function()
    return #conn:list("v1", "Pod", { namespace = "default", labels = { ["hypd.io/inference"] = "warm" } }) == 2
  end), "two workers left")
  t.ok(conn:get("v1", "Pod", pool_pods[2], { namespace = "default" }), "the assigned worker stays")
  t.eq(endpoints("qwen"), { pool_pods[2] })
  -- up to 3 again; inference_get wait_seconds answers on the change
  s = assert(run("inference_scale", { name = "warm", replicas = 3 }))
  t.eq({ s.from, s.replicas }, { 2, 3 })
  local g = get("warm", { wait_seconds = 60 })
  t.eq(g.changed, true, "wait_seconds answered on a change")
  for _ = 1, 5 do
    if g.replicas.ready == 3 then break end
    g = get("warm", { wait_seconds = 60 })
  end
  t.eq({ g.replicas.desired, g.replicas.ready, g.unassigned }, { 3, 3, 2 })
  local _, de = run("inference_delete", { name = "warm" })
  t.eq(field_rules(de), { "force:assigned" }, "a pool with assigned workers needs force")
  _, de = run("inference_deploy_container", { name = "warm", engine = "sglang", command = SGLANG,
    instance_type = "ml.g5.12xlarge", gpus = 1, replicas = 0, service = "pool" })
  t.eq(field_rules(de), { "replicas:assigned" }, "a redeploy with fewer workers is held to the same rule")
  -- the newest worker assigned: a scale-down takes the unassigned one, not the newest (pod-deletion-cost)
  local newest
  for _, w in ipairs(conn:list("v1", "Pod", { namespace = "default", labels = { ["hypd.io/inference"] = "warm" } })) do
    if not newest or w.metadata.creationTimestamp > newest.metadata.creationTimestamp then newest = w end
  end
  local a = assert(run("inference_assign_pool_pod", { pool = "warm", model = "fresh", pods = { newest.metadata.name } }))
  t.eq(a.pods[1].action, "changed")
  s = assert(run("inference_scale", { name = "warm", replicas = 2 }))
  t.eq({ s.from, s.replicas }, { 3, 2 })
  t.ok(settle(function()
    return #conn:list("v1", "Pod", { namespace = "default", labels = { ["hypd.io/inference"] = "warm" } }) == 2
  end), "two workers left")
  t.ok(conn:get("v1", "Pod", newest.metadata.name, { namespace = "default" }), "the newest, assigned, stays")
  t.ok(conn:get("v1", "Pod", pool_pods[2], { namespace = "default" }), "and the other assigned one")
  r, err = run("inference_release_pool_pod", { model = "fresh" })
  t.eq(r and r.models[1].service_action, "deleted", err and err.message)
  r, err = run("inference_release_pool_pod", { model = "qwen" })
  t.ok(r, err and err.message)
  t.eq(r and r.models[1].service_action, "deleted", "no pods left: the model's Service goes")
  t.eq(conn:get("v1", "Service", "qwen", { namespace = "default" }), nil)
end)

t.test("inference_list lists every kind; inference_delete deletes hypd's objects only, with their Services",
  function()
    local l = assert(dispatch.call("inference_list", { cluster = EKS }, ADMIN))
    local rows = {}
    for _, d in ipairs(l.deployments) do rows[#rows + 1] = d.name .. ":" .. d.kind end
    t.eq(rows, { "huge:container", "qwen-vllm:container", "warm:pool" })
    l = assert(dispatch.call("inference_list", { cluster = EKS, kind = "pool" }, ADMIN))
    t.eq(#l.deployments, 1)
    t.eq({ l.deployments[1].engine, l.deployments[1].port, l.deployments[1].replicas }, { "sglang", 30000, 2 })
    assert(conn:create { apiVersion = "apps/v1", kind = "Deployment",
      metadata = { name = "theirs", namespace = "default", labels = { ["hypd.io/inference-kind"] = "container" } },
      spec = { selector = { matchLabels = { app = "theirs" } }, template = {
        metadata = { labels = { app = "theirs" } }, spec = { containers = { { name = "c", image = "nginx" } } } } } })
    assert(conn:patch("apps/v1", "Deployment", "theirs", { metadata = { labels = {
      ["app.kubernetes.io/managed-by"] = "someone" } } }, { namespace = "default" }))
    local _, e = run("inference_delete", { name = "theirs" })
    t.like(e and e.message, "was not made by hypd %(app.kubernetes.io/managed%-by=someone%): inference_delete does " ..
      "not change or delete it")
    t.ok(conn:get("apps/v1", "Deployment", "theirs", { namespace = "default" }), "not deleted")
    local r, err = run("inference_delete", { name = "qwen-vllm" })
    t.ok(r, err and err.message)
    t.eq(r and r.action, "deleted")
    t.eq(conn:get("apps/v1", "Deployment", "qwen-vllm", { namespace = "default" }), nil)
    t.eq(conn:get("v1", "Service", "qwen-vllm", { namespace = "default" }), nil, "its Service went too")
    r = assert(run("inference_delete", { name = "warm" }))
    t.eq(r.action, "deleted", "a pool with no assigned workers needs no force")
    r = assert(run("inference_delete", { name = "huge" }))
    t.eq(r.action, "deleted")
    r = assert(run("inference_delete", { name = "huge" }))
    t.eq(r.action, "absent")
    local _, ge = dispatch.call("inference_get", { name = "huge", cluster = EKS }, ADMIN)
    t.eq(field_rules(ge), { "name:exists" })
    l = assert(dispatch.call("inference_list", { cluster = EKS }, ADMIN))
    t.eq(#l.deployments, 0)
  end)

t.test("a managed InferenceEndpointConfig (its controller's Deployment and Service) is listed, got, scaled, deleted",
  function()
    local resources = require "sandbox.k8s.resources"
    for _, row in ipairs(resources.CRDS) do
      if row[4] == "InferenceEndpointConfig" then assert(conn:create(resources.crd(row))) end
    end
    local L = { ["hypd.io/inference"] = "llm", ["hypd.io/inference-kind"] = "managed" }
    local cr
    for _ = 1, 10 do -- the CRD is served a moment after it is created
      cr = conn:create { apiVersion = "inference.sagemaker.aws.amazon.com/v1", kind = "InferenceEndpointConfig",
        metadata = { name = "llm", namespace = "default", labels = L },
        spec = { modelName = "llm", replicas = 1, instanceType = "ml.g5.12xlarge",
          modelSourceConfig = { modelSourceType = "s3", s3Storage = { bucketName = "models", region = "us-west-2" } },
          worker = { image = "vllm/vllm-openai:latest", modelInvocationPort = { containerPort = 8080 },
            modelVolumeMount = { name = "model-weights", mountPath = "/opt/ml/model" },
            resources = { limits = { ["nvidia.com/gpu"] = 1 } } } } }
      if cr then break end
      task.sleep(1)
    end
    assert(cr, "the InferenceEndpointConfig")
    -- a CR its schema accepts is realized by the operator: a Deployment and a Service of its name, owned by it
    settle(function() return #endpoints("llm") == 1 end)
    local l = assert(dispatch.call("inference_list", { cluster = EKS }, ADMIN))
    local rows = {}
    for _, d in ipairs(l.deployments) do rows[#rows + 1] = d.name .. ":" .. d.kind .. ":" .. d.object end
    t.eq(rows, { "llm:managed:InferenceEndpointConfig/llm" }, "listed once, by its CR")
    local g = get("llm")
    t.eq({ g.kind, g.object, g.deployment, g.port }, { "managed", "InferenceEndpointConfig/llm", "llm", 8080 })
    t.eq({ g.replicas.desired, g.replicas.ready }, { 1, 1 })
    t.eq(g.service and g.service.name, "llm", "the Service that selects its pods")
    t.eq(g.service and #g.service.endpoints, 1)
    local r, err = run("inference_scale", { name = "llm", replicas = 2 })
    t.ok(r, err and err.message)
    local live = assert(conn:get("inference.sagemaker.aws.amazon.com/v1", "InferenceEndpointConfig", "llm",
      { namespace = "default" }))
    t.eq(live.spec.replicas, 2, "spec.replicas of the CR (its operator scales the Deployment)")
    r, err = run("inference_delete", { name = "llm" })
    t.ok(r, err and err.message)
    t.eq(conn:get("inference.sagemaker.aws.amazon.com/v1", "InferenceEndpointConfig", "llm", { namespace = "default" }),
      nil)
  end)
