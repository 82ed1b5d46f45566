-- diagnose_inference against the in-process sandbox under the virtual
-- clock: an EKS cluster with a HyperPod group of two ml.g5.12xlarge nodes
-- (4 GPUs each) and the inference operator's CRDs. A serving container
-- deployment is healthy; each workload fault of sandbox.faults_workloads
-- (image_pull, pod_crash as a crash loop and as OOM kills, readiness_fail),
-- a deployment asking more GPUs than are free, a LoadBalancer Service no
-- controller provisions, a router whose worker is not ready, and a JumpStartModel the hub does not have each
-- give their finding with its code, severity and quoted evidence; every
-- suggested call validates against the registry, and no AWS or Kubernetes
-- write happens while a diagnostic runs.
local t = require "hypd.tap"
local TH = dofile("tests/lua/training_helpers.lua")
local call = TH.start()
local H, FH = TH.H, TH.FH
local dispatch = require "hypd.tool.dispatch"
local faults = require "sandbox.faults"
local task = require "hypd.task"
local D = dofile("tests/lua/diagnose_helpers.lua")
local ADMIN = { name = "diagnose-tester", scope = "admin", front = "test" }
local EKS, HP = "diag-i", "diag-i-hp"
local IMAGE = "registry.example.com/team/model-server:1.0"
local conn

local function diagnose(name)
  return D.run("diagnose_inference", { name = name, cluster = EKS }, ADMIN)
end
local find, quotes, codes = D.find, D.quotes, D.codes

-- deploy(name, o): a Deployment and its Service labelled as
-- inference_deploy_container labels them (o: replicas, gpus, image, external)
local function deploy(name, o)
  o = o or {}
  local labels = { ["app.kubernetes.io/managed-by"] = "hypd", ["hypd.io/inference"] = name,
    ["hypd.io/inference-kind"] = "container", app = name }
  local g = o.gpus or 1
  assert(conn:create { apiVersion = "apps/v1", kind = "Deployment",
    metadata = { name = name, namespace = "default", labels = labels },
    spec = { replicas = o.replicas or 1, selector = { matchLabels = { app = name } },
      template = { metadata = { labels = labels }, spec = {
        nodeSelector = { ["node.kubernetes.io/instance-type"] = "ml.g5.12xlarge" },
        containers = { { name = "server", image = o.image or IMAGE, ports = { { name = "http", containerPort = 8000 } },
          readinessProbe = { httpGet = { path = "/health", port = "http" }, periodSeconds = 10 },
          resources = { limits = { ["nvidia.com/gpu"] = g }, requests = { ["nvidia.com/gpu"] = g } } } } } } } })
  assert(conn:create { apiVersion = "v1", kind = "Service", metadata = { name = name, namespace = "default",
    labels = labels, annotations = o.external and
      { ["service.beta.kubernetes.io/aws-load-balancer-type"] = "external" } or nil },
    spec = { type = o.external and "LoadBalancer" or "ClusterIP", selector = { app = name },
      ports = { { name = "http", port = 8000, targetPort = "http" } } } })
end

local function gone(name)
  conn:delete("apps/v1", "Deployment", name, { namespace = "default" })
  conn:delete("v1", "Service", name, { namespace = "default" })
  FH.wait(function()
    return #(conn:list("v1", "Pod", { namespace = "default", labels = { app = name } }) or {}) == 0
  end, 600, 1)
end

local function available(name)
  local d = conn:get("apps/v1", "Deployment", name, { namespace = "default" })
  return d and (d.status or {}).availableReplicas or 0
end

t.test("a cluster: EKS, a HyperPod group of two ml.g5.12xlarge nodes and the inference operator's CRDs", function()
  conn = FH.gpu_cluster(call, EKS, HP, 92, 2)
  local resources = require "sandbox.k8s.resources"
  for _, row in ipairs(resources.CRDS) do
    if row[1] == "inference.sagemaker.aws.amazon.com" then assert(conn:create(resources.crd(row))) end
  end
  t.ok(true)
end)

t.test("a deployment whose replica serves is healthy, having looked at it, its pods, Service, nodes, events", function()
  deploy("good")
  FH.wait(function() return available("good") == 1 end, 600, 1)
  local r, err = diagnose("good")
  t.ok(r, err and err.message)
  t.eq(r and r.healthy, true, r and r.summary)
  t.eq(codes(r), {})
  local looked = {}
  for _, c in ipairs(r and r.checked or {}) do looked[#looked + 1] = c.what end
  t.eq(looked, { "deployment", "pods", "service good", "nodes", "events" })
  gone("good")
end)

t.test("image_pull: IMAGE_PULL_FAILED with the kubelet's message, no replica, no ready endpoint", function()
  assert(faults.configure { image_pull = { { namespace = "default", image_prefix = "registry.example.com/team/missing" } } })
  deploy("pull", { image = "registry.example.com/team/missing-server:2.0" })
  task.sleep(60)
  local r = diagnose("pull")
  local f = find(r, "IMAGE_PULL_FAILED")
  t.eq(f and f.severity, "critical")
  t.like(quotes(f), "Pod/pull%-[%w%-]+ container server state.waiting | ImagePullBackOff: Back%-off pulling image " ..
    "\"registry%.example%.com/team/missing%-server:2%.0\"")
  t.eq(f and f.next[1].call, "inference_get cluster=" .. EKS .. " name=pull namespace=default region=us-west-2")
  t.eq((find(r, "DEPLOYMENT_UNAVAILABLE") or {}).severity, "critical")
  t.like(quotes(find(r, "NO_READY_ENDPOINTS")), "Endpoints/pull subsets | 0 ready addresses")
  local failed
  for _, e in ipairs(conn:list("v1", "Event", { namespace = "default" })) do
    if e.reason == "Failed" and tostring(e.message):find("^Failed to pull image") then failed = e.message end
  end
  t.like(failed, "rpc error: code = NotFound desc = failed to pull and unpack image", "the kubelet's Failed event")
  gone("pull")
  faults.configure {}
end)

t.test("pod_crash: POD_CRASHLOOP with the exit code, and POD_OOMKILLED for an OOMKilled container", function()
  assert(faults.configure { pod_crash = { { pod_prefix = "crash-", reason = "CrashLoopBackOff", exit_code = 3 },
    { pod_prefix = "oom-", reason = "OOMKilled" } } })
  deploy("crash")
  deploy("oom")
  task.sleep(60)
  local r = diagnose("crash")
  local f = find(r, "POD_CRASHLOOP")
  t.eq(f and f.severity, "critical")
  t.like(quotes(f), "Pod/crash%-[%w%-]+ container server state | CrashLoopBackOff %(restartCount %d+%); last exit: " ..
    "Error, exitCode 3")
  r = diagnose("oom")
  f = find(r, "POD_OOMKILLED")
  t.eq(f and f.severity, "critical")
  t.like(quotes(f), "last exit: OOMKilled, exitCode 137")
  local pod = conn:list("v1", "Pod", { namespace = "default", labels = { app = "oom" } })[1]
  t.eq(pod and pod.status.phase, "Running", "the kubelet keeps restarting it: the pod stays Running")
  t.eq(pod and pod.status.containerStatuses[1].state.waiting.reason, "CrashLoopBackOff")
  gone("oom")
  faults.configure {}
  -- the fault gone, the kubelet's next restart keeps the container up: healthy, its restarts counted
  FH.wait(function() return available("crash") == 1 end, 900, 5)
  r = diagnose("crash")
  t.eq(r and r.healthy, true, r and r.summary)
  pod = conn:list("v1", "Pod", { namespace = "default", labels = { app = "crash" } })[1]
  t.ok(pod and pod.status.containerStatuses[1].restartCount >= 1, "restartCount kept")
  gone("crash")
end)

t.test("readiness_fail: READINESS_PROBE_FAILING with the Unhealthy events, the pods not Ready, no ready endpoint",
  function()
    assert(faults.configure { readiness_fail = { { namespace = "default", pod_prefix = "unready-" } } })
    deploy("unready")
    task.sleep(60)
    local r = diagnose("unready")
    local f = find(r, "READINESS_PROBE_FAILING")
    t.eq(f and f.severity, "critical")
    t.like(quotes(f), "Event Pod/unready%-[%w%-]+ reason Unhealthy | Readiness probe failed: HTTP probe failed with " ..
      "statuscode: 503 %(x%d+%)")
    t.eq((find(r, "POD_NOT_READY") or {}).severity, "critical")
    t.like(quotes(find(r, "NO_READY_ENDPOINTS")), "0 ready addresses, 1 not ready %(unready%-")
    gone("unready")
    faults.configure {}
  end)

t.test("more GPUs asked than are free: POD_PENDING_GPU with the scheduler's words, scale-down and scale-up calls",
  function()
    deploy("greedy", { replicas = 3, gpus = 4 })
    FH.wait(function() return available("greedy") == 2 end, 900, 5) -- two of the three fit
    local r = diagnose("greedy")
    local f = find(r, "POD_PENDING_GPU")
    t.eq(f and f.severity, "critical")
    t.like(quotes(f), "condition PodScheduled | Unschedulable: 0/%d+ nodes are available: .*Insufficient nvidia%.com/gpu")
    local fixes = {}
    for _, s in ipairs(f and f.next or {}) do if s.action == "fix" then fixes[#fixes + 1] = s.call end end
    t.eq(fixes, { "inference_scale cluster=" .. EKS .. " name=greedy namespace=default region=us-west-2 replicas:=2",
      "hyperpod_scale_instance_group cluster=" .. EKS .. " instance_count:=3 instance_group=gpu region=us-west-2" })
    t.like(quotes(find(r, "DEPLOYMENT_DEGRADED")), "availableReplicas 2 of replicas 3")
    gone("greedy")
  end)

t.test("a LoadBalancer Service no controller provisions: LOAD_BALANCER_PENDING", function()
  deploy("ext", { external = true })
  FH.wait(function() return available("ext") == 1 end, 600, 1)
  task.sleep(30)
  local r = diagnose("ext")
  local f = find(r, "LOAD_BALANCER_PENDING")
  t.eq(f and f.severity, "warning")
  t.like(quotes(f), "Service/ext status.loadBalancer | no ingress address")
  t.eq(r and r.healthy, false)
  gone("ext")
end)

t.test("a router whose only worker is not ready: ROUTER_NO_WORKERS quoting its --worker-urls", function()
  assert(faults.configure { readiness_fail = { { pod_prefix = "wk-" } } })
  deploy("wk")
  local labels = { ["app.kubernetes.io/managed-by"] = "hypd", ["hypd.io/inference"] = "rt",
    ["hypd.io/inference-kind"] = "router", app = "rt" }
  assert(conn:create { apiVersion = "apps/v1", kind = "Deployment", metadata = { name = "rt", namespace = "default",
    labels = labels }, spec = { replicas = 1, selector = { matchLabels = { app = "rt" } },
      template = { metadata = { labels = labels }, spec = { containers = { { name = "router", image = IMAGE,
        command = { "python3", "-m", "sglang_router.launch_router", "--port", "30000", "--worker-urls",
          "http://wk.default.svc.cluster.local:8000" }, ports = { { name = "http", containerPort = 30000 } } } } } } } })
  assert(conn:create { apiVersion = "v1", kind = "Service", metadata = { name = "rt", namespace = "default",
    labels = labels }, spec = { selector = { app = "rt" }, ports = { { name = "http", port = 30000, targetPort = "http" } } } })
  FH.wait(function() return available("rt") == 1 end, 600, 1)
  task.sleep(20)
  local r = diagnose("rt")
  local f = find(r, "ROUTER_NO_WORKERS")
  t.eq(f and f.severity, "critical")
  t.like(quotes(f), "args | .*%-%-worker%-urls http://wk%.default%.svc%.cluster%.local:8000")
  t.like(quotes(f), "the worker Services wk | 0 ready of 1")
  t.eq(find(r, "NO_READY_ENDPOINTS"), nil, "the router's own Service has its ready pod")
  gone("rt")
  gone("wk")
  faults.configure {}
end)

t.test("a JumpStartModel the hub does not have: ENDPOINT_FAILED with the operator's condition", function()
  assert(conn:create { apiVersion = "inference.sagemaker.aws.amazon.com/v1", kind = "JumpStartModel",
    metadata = { name = "nomodel", namespace = "default" },
    spec = { model = { modelId = "no-such-model" }, server = { instanceType = "ml.g5.12xlarge" } } })
  task.sleep(10)
  local r = diagnose("nomodel")
  local f = find(r, "ENDPOINT_FAILED")
  t.eq(f and f.severity, "critical")
  t.like(quotes(f), "JumpStartModel/nomodel status.state | DeploymentFailed")
  t.like(quotes(f), "JumpStartModel/nomodel condition DeploymentFailed | ModelNotFound: ")
  t.eq((find(r, "DEPLOYMENT_MISSING") or {}).severity, "critical")
end)

t.test("an endpoint that does not exist is NOT_FOUND naming name; bad input names the field", function()
  local _, r, err
  r, err = dispatch.call("diagnose_inference", { name = "nope", cluster = EKS }, ADMIN)
  t.eq(r, nil)
  t.eq(err and err.code, "NOT_FOUND")
  t.eq(H.field_rules(err), { "name:exists" })
  _, err = dispatch.call("diagnose_inference", { name = "9bad", cluster = EKS }, ADMIN)
  t.eq(H.field_rules(err), { "name:pattern" })
end)
