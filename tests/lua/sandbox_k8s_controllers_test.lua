-- The simulated cluster's controllers, driven through the object store and
-- the sandbox's services called in-process (no HTTP), under the virtual
-- clock: HyperPod nodes join as Nodes, the scheduler places GPU pods or
-- explains why not, kubelets run them and print, Deployments, Jobs and
-- DaemonSets do their work, EKS add-ons appear as their workloads and CRDs,
-- HyperPodPyTorchJobs train, and a failing node restarts the job while
-- HyperPod replaces the node.
local t = require "hypd.tap"
local api = require "sandbox.k8s.api"
local aws = require "sandbox.k8s.controllers._aws"
local controllers = require "sandbox.k8s.controllers"
local core = require "hypd.core"
local json = require "hypd.json"
local nodes = require "sandbox.k8s.controllers.nodes"
local objects = require "sandbox.k8s.objects"
local state = require "sandbox.state"
local task = require "hypd.task"

core.virtual(true)

local REGION = "us-west-2"
local SUFFIX = tostring(os.time()) .. string.format("%04d", math.random(0, 9999))
local EKS, HP = "ctl-eks-" .. SUFFIX, "ctl-hp-" .. SUFFIX
local EKS_ARN = "arn:aws:eks:us-west-2:123456789012:cluster/" .. EKS
local ROLE = "arn:aws:iam::123456789012:role/ctl-exec-" .. SUFFIX
local SUBNET = "subnet-0c" .. SUFFIX

local cl = objects.cluster(REGION, EKS)
local R = {
  ns = cl.reg:find("", "v1", "namespaces"), pods = cl.reg:find("", "v1", "pods"),
  nodes = cl.reg:find("", "v1", "nodes"), events = cl.reg:find("", "v1", "events"),
  deploy = cl.reg:find("apps", "v1", "deployments"), rs = cl.reg:find("apps", "v1", "replicasets"),
  ds = cl.reg:find("apps", "v1", "daemonsets"), jobs = cl.reg:find("batch", "v1", "jobs"),
  crds = cl.reg:find("apiextensions.k8s.io", "v1", "customresourcedefinitions"),
}
local admin = { name = "admin", can = function() return true end }

-- wait(check, limit) -> simulated seconds waited; polls every second
local function wait(check, limit, what)
  local t0 = core.now()
  while not check() do
    if core.now() - t0 > (limit or 60) then error("timed out waiting for " .. (what or "a condition"), 2) end
    task.sleep(1)
  end
  return core.now() - t0
end

local function call(service, op, input)
  local out, err = aws.call(REGION, service, op, input)
  if not out then error(service .. " " .. op .. ": " .. tostring(err.code) .. ": " .. tostring(err.message), 2) end
  return out
end

local function pod(name) return cl:get(R.pods, "default", name) end

local function log_of(ns, name, container)
  local resp = api.handle(cl, { method = "GET", path = "/api/v1/namespaces/" .. ns .. "/pods/" .. name .. "/log",
    query = container and "container=" .. container or "", headers = {} }, admin)
  return resp.status, resp.body
end

local function events(name, reason)
  local out = {}
  for _, e in ipairs(cl:list(R.events)) do
    if e.involvedObject.name == name and (not reason or e.reason == reason) then out[#out + 1] = e end
  end
  return out
end

local function hp_nodes()
  local out = {}
  for _, n in ipairs(cl:list(R.nodes)) do
    if (n.metadata.labels or {})["sagemaker.amazonaws.com/compute-type"] == "hyperpod" then out[#out + 1] = n end
  end
  return out
end

local function ready(node)
  for _, c in ipairs(node.status.conditions) do
    if c.type == "Ready" then return c.status == "True" end
  end
  return false
end

local function gpu_pod(name, gpus, extra)
  local p = { metadata = { name = name, namespace = "default" }, spec = { containers = { { name = "main",
    image = "busybox:1.36", command = { "sh", "-c", "echo hello from " .. name .. "; sleep 3600" },
    resources = { limits = { ["nvidia.com/gpu"] = tostring(gpus) } } } } } }
  for k, v in pairs(extra or {}) do p.spec[k] = v end
  return assert(cl:create(R.pods, p))
end

t.test("the controllers start once per cluster store", function()
  for _, n in ipairs { "default", "kube-system" } do assert(cl:create(R.ns, { metadata = { name = n } })) end
  state.view("global", "iam"):put("role", "ctl-exec-" .. SUFFIX, { RoleName = "ctl-exec-" .. SUFFIX, Arn = ROLE,
    AssumeRolePolicyDocument = '{"Statement":[{"Effect":"Allow","Principal":{"Service":"sagemaker.amazonaws.com"},' ..
      '"Action":"sts:AssumeRole"}]}' })
  state.view(REGION, "ec2"):put("subnet", SUBNET, { SubnetId = SUBNET, VpcId = "vpc-0ctl", AvailabilityZone = "us-west-2a",
    AvailabilityZoneId = "usw2-az1", CidrBlock = "10.1.0.0/16" })
  local eks = { name = EKS, arn = EKS_ARN, version = "1.34", status = "ACTIVE",
    accessConfig = { authenticationMode = "API" }, resourcesVpcConfig = { vpcId = "vpc-0ctl" } }
  state.view(REGION, "eks"):put("cluster", EKS, eks)
  local hooks = #cl.hooks
  local ctl = controllers.start(cl, REGION, eks)
  t.eq(controllers.start(cl, REGION, eks), ctl, "a second start returns the same controllers")
  t.eq(#cl.hooks, hooks + 1, "one hook")
  t.eq(controllers.find(REGION, EKS), ctl)
end)

t.test("HyperPod nodes join as Node objects with HyperPod's labels and GPU capacity", function()
  call("sagemaker", "CreateCluster", { ClusterName = HP, NodeRecovery = "Automatic",
    InstanceGroups = { { InstanceGroupName = "gpu", InstanceType = "ml.g5.12xlarge", InstanceCount = 2,
      ExecutionRole = ROLE, KubernetesConfig = { Labels = { team = "ml" } } } },
    Orchestrator = { Eks = { ClusterArn = EKS_ARN } }, VpcConfig = { Subnets = { SUBNET }, SecurityGroupIds = {} } })
  t.eq(#hp_nodes(), 0, "no Node while instances are Pending")
  wait(function() return #hp_nodes() == 2 end, 1200, "two Nodes")
  local sm = state.view(REGION, "sagemaker")
  for _, node in ipairs(hp_nodes()) do
    local id = node.metadata.name:match("^hyperpod%-(i%-%x+)$")
    t.ok(id, "named hyperpod-<instance id>: " .. node.metadata.name)
    local rec = sm:get("node", id)
    t.eq(rec.Status, "Running")
    local l = node.metadata.labels
    t.eq(l["sagemaker.amazonaws.com/compute-type"], "hyperpod")
    t.eq(l["sagemaker.amazonaws.com/instance-group-name"], "gpu")
    t.eq(l["sagemaker.amazonaws.com/node-health-status"], "Schedulable")
    t.eq(l["sagemaker.amazonaws.com/deep-health-check-status"], "Passed")
    t.eq(l["sagemaker.amazonaws.com/cluster-name"], HP)
    t.eq(l["node.kubernetes.io/instance-type"], "ml.g5.12xlarge")
    t.eq(l["beta.kubernetes.io/instance-type"], "ml.g5.12xlarge")
    t.eq(l["topology.kubernetes.io/zone"], "us-west-2a")
    t.eq(l["topology.kubernetes.io/region"], REGION)
    t.eq(l["kubernetes.io/hostname"], node.metadata.name)
    t.eq(l.team, "ml", "the instance group's Kubernetes labels")
    local st = node.status
    t.eq({ st.capacity["nvidia.com/gpu"], st.allocatable["nvidia.com/gpu"] }, { "4", "4" })
    t.eq(st.capacity["vpc.amazonaws.com/efa"], "1")
    t.eq(st.capacity.cpu, "48")
    t.like(st.allocatable.cpu, "^47%d%d%dm$")
    t.like(st.allocatable.memory, "^%d+Ki$")
    t.eq(st.capacity.pods, "110")
    t.ok(ready(node), "Ready")
    t.like(st.nodeInfo.kubeletVersion, "^v1%.34%.1%-eks%-%x+$")
    t.eq(st.addresses[1], { type = "InternalIP", address = rec.ip })
    t.like(rec.ip, "^10%.1%.")
    t.like(node.spec.providerID, "^aws:///usw2%-az1/sagemaker/cluster/hyperpod%-%w+%-" .. id:gsub("%-", "%%-") .. "$")
  end
end)

t.test("a pod asking for more GPUs than any node has stays Pending and says why", function()
  gpu_pod("too-big", 8)
  task.sleep(5)
  local p = pod("too-big")
  t.eq(p.status.phase, "Pending")
  t.eq(p.spec.nodeName, nil)
  local c = p.status.conditions[1]
  t.eq({ c.type, c.status, c.reason }, { "PodScheduled", "False", "Unschedulable" })
  t.eq(c.message, "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. preemption: 0/2 nodes are available: " ..
    "2 No preemption victims found for incoming pod.")
  local ev = events("too-big", "FailedScheduling")
  t.eq(#ev, 1, "one event for one reason")
  t.eq({ ev[1].type, ev[1].message, ev[1].source.component }, { "Warning", c.message, "default-scheduler" })
  t.eq(ev[1].involvedObject.uid, p.metadata.uid)
  cl:delete(R.pods, "default", "too-big")
end)

t.test("a pod that fits is bound, runs after a moment and prints through the log endpoint", function()
  gpu_pod("fits", 1)
  task.sleep(0.5)
  local p = pod("fits")
  t.like(p.spec.nodeName, "^hyperpod%-i%-")
  t.eq(p.status.phase, "Pending", "not started yet")
  t.eq(events("fits", "Scheduled")[1].message, "Successfully assigned default/fits to " .. p.spec.nodeName)
  t.eq((log_of("default", "fits")), 400, "no log before the container starts")
  task.sleep(3)
  p = pod("fits")
  t.eq(p.status.phase, "Running")
  local node = cl:get(R.nodes, nil, p.spec.nodeName)
  t.eq(p.status.hostIP, node.status.addresses[1].address)
  t.like(p.status.podIP, "^10%.")
  local cs = p.status.containerStatuses[1]
  t.eq({ cs.name, cs.ready, cs.started, cs.restartCount, cs.image }, { "main", true, true, 0, "busybox:1.36" })
  t.like(cs.containerID, "^containerd://%x+$")
  t.like(cs.imageID, "^docker%.io/library/busybox@sha256:%x+$")
  t.ok(cs.state.running.startedAt, "running since")
  local conds = {}
  for _, c in ipairs(p.status.conditions) do conds[c.type] = c.status end
  t.eq({ conds.Ready, conds.ContainersReady, conds.Initialized, conds.PodScheduled }, { "True", "True", "True", "True" })
  local st, body = log_of("default", "fits")
  t.eq(st, 200)
  t.eq(body, "hello from fits\n")
  cl:delete(R.pods, "default", "fits")
  task.sleep(0.1)
  t.eq(cl.logs["default/fits/main"], nil, "a deleted pod's output goes")
end)

t.test("a Deployment of 3 replicas becomes ready, rolls to a new template, and goes with its pods", function()
  local function deploy(image)
    return { apiVersion = "apps/v1", kind = "Deployment", metadata = { name = "web", namespace = "default" },
      spec = { replicas = 3, selector = { matchLabels = { app = "web" } }, template = { metadata = { labels = { app = "web" } },
        spec = { containers = { { name = "nginx", image = image } } } } } }
  end
  assert(cl:create(R.deploy, deploy("nginx:1.27")))
  wait(function() return ((cl:get(R.deploy, "default", "web").status or {}).readyReplicas or 0) == 3 end, 30,
    "3 ready replicas")
  local d = cl:get(R.deploy, "default", "web")
  t.eq({ d.status.replicas, d.status.availableReplicas, d.status.updatedReplicas, d.status.observedGeneration },
    { 3, 3, 3, 1 })
  local conds = {}
  for _, c in ipairs(d.status.conditions) do conds[c.type] = c end
  t.eq({ conds.Available.status, conds.Available.reason }, { "True", "MinimumReplicasAvailable" })
  t.eq(conds.Progressing.reason, "NewReplicaSetAvailable")
  local rss = cl:list(R.rs, "default")
  t.eq(#rss, 1)
  local rs = rss[1]
  local hash = rs.metadata.labels["pod-template-hash"]
  t.eq(rs.metadata.name, "web-" .. hash)
  t.like(hash, "^[bcdfghjklmnpqrstvwxz2456789]+$")
  t.eq(#hash, 10)
  t.eq({ rs.metadata.ownerReferences[1].kind, rs.metadata.ownerReferences[1].controller }, { "Deployment", true })
  t.eq(rs.status.readyReplicas, 3)
  local pods = {}
  for _, p in ipairs(cl:list(R.pods, "default")) do
    if (p.metadata.labels or {}).app == "web" then pods[#pods + 1] = p end
  end
  t.eq(#pods, 3)
  for _, p in ipairs(pods) do
    t.like(p.metadata.name, "^web%-" .. hash .. "%-%w%w%w%w%w$")
    t.eq(p.status.phase, "Running")
    t.eq(p.metadata.labels["pod-template-hash"], hash)
  end
  local c = json.decode(json.encode(d)) -- a client's copy
  c.spec.template.spec.containers[1].image = "nginx:1.28"
  assert(cl:update(R.deploy, c))
  wait(function()
    local s = cl:get(R.deploy, "default", "web").status
    return s.observedGeneration == 2 and s.updatedReplicas == 3 and s.readyReplicas == 3 and s.replicas == 3
  end, 30, "the rollout")
  rss = cl:list(R.rs, "default")
  t.eq(#rss, 2, "the old ReplicaSet stays, scaled to 0")
  local scaled = {}
  for _, x in ipairs(rss) do scaled[#scaled + 1] = x.spec.replicas end
  table.sort(scaled)
  t.eq(scaled, { 0, 3 })
  cl:delete(R.deploy, "default", "web")
  t.eq(#cl:list(R.rs, "default"), 0, "ReplicaSets are collected")
  for _, p in ipairs(cl:list(R.pods, "default")) do t.ok((p.metadata.labels or {}).app ~= "web", "no web pod left") end
end)

t.test("a Job runs its pod to completion; a failing one stops at its backoff limit", function()
  assert(cl:create(R.jobs, { metadata = { name = "hello", namespace = "default" }, spec = { template = { spec = {
    restartPolicy = "Never", containers = { { name = "c", image = "busybox", command = { "echo", "done" } } } } } } }))
  wait(function() return ((cl:get(R.jobs, "default", "hello").status or {}).succeeded or 0) == 1 end, 30, "success")
  local j = cl:get(R.jobs, "default", "hello")
  local types = {}
  for _, c in ipairs(j.status.conditions) do types[#types + 1] = c.type .. "=" .. c.status end
  t.eq(types, { "SuccessCriteriaMet=True", "Complete=True" })
  t.ok(j.status.completionTime and j.status.startTime, "start and completion times")
  t.eq(j.status.active, nil)
  local p
  for _, x in ipairs(cl:list(R.pods, "default")) do
    if (x.metadata.labels or {})["job-name"] == "hello" then p = x end
  end
  t.eq(p.status.phase, "Succeeded")
  local term = p.status.containerStatuses[1].state.terminated
  t.eq({ term.exitCode, term.reason }, { 0, "Completed" })
  t.eq(select(2, log_of("default", p.metadata.name)), "done\n")
  assert(cl:create(R.jobs, { metadata = { name = "broken", namespace = "default" }, spec = { backoffLimit = 1,
    template = { metadata = { annotations = { ["sandbox.hypd.io/exit-code"] = "3",
      ["sandbox.hypd.io/run-seconds"] = "1" } }, spec = { restartPolicy = "Never",
      containers = { { name = "c", image = "busybox" } } } } } }))
  wait(function() return ((cl:get(R.jobs, "default", "broken").status or {}).failed or 0) == 2 end, 30, "two failures")
  task.sleep(0.1)
  local b = cl:get(R.jobs, "default", "broken")
  local last = b.status.conditions[#b.status.conditions]
  t.eq({ last.type, last.status, last.reason }, { "Failed", "True", "BackoffLimitExceeded" })
  cl:delete(R.jobs, "default", "hello")
  cl:delete(R.jobs, "default", "broken")
end)

local function addon(name)
  call("eks", "CreateAddon", { clusterName = EKS, addonName = name })
  wait(function()
    return call("eks", "DescribeAddon", { clusterName = EKS, addonName = name }).addon.status ~= "CREATING"
  end, 300, name .. " to leave CREATING")
  task.sleep(0.1)
  return call("eks", "DescribeAddon", { clusterName = EKS, addonName = name }).addon
end

t.test("ACTIVE add-ons show their workloads; the training operator installs the HyperPodPyTorchJob CRD", function()
  t.eq(addon("coredns").status, "ACTIVE")
  local d = cl:get(R.deploy, "kube-system", "coredns")
  t.ok(d, "Deployment coredns in kube-system")
  t.eq(d.metadata.labels["app.kubernetes.io/managed-by"], "EKS")
  t.eq(d.metadata.labels["eks.amazonaws.com/component"], "coredns")
  t.like(d.spec.template.spec.containers[1].image, "/eks/coredns:v1%.12%.4%-eksbuild%.1$")
  wait(function() return (cl:get(R.deploy, "kube-system", "coredns").status.readyReplicas or 0) == 2 end, 30,
    "coredns ready")
  t.eq(addon("vpc-cni").status, "ACTIVE")
  wait(function() return ((cl:get(R.ds, "kube-system", "aws-node") or {}).status or {}).numberReady == 2 end, 30,
    "aws-node on both nodes")
  local ds = cl:get(R.ds, "kube-system", "aws-node")
  t.eq({ ds.status.desiredNumberScheduled, ds.status.currentNumberScheduled }, { 2, 2 })
  t.eq(cl.reg:find("sagemaker.amazonaws.com", "v1", "hyperpodpytorchjobs"), nil, "no training CRD yet")
  t.eq(addon("cert-manager").status, "ACTIVE")
  t.ok(cl:get(R.ns, nil, "cert-manager"), "the cert-manager namespace")
  for _, n in ipairs { "cert-manager", "cert-manager-cainjector", "cert-manager-webhook" } do
    t.ok(cl:get(R.deploy, "cert-manager", n), n)
  end
  t.eq(addon("eks-pod-identity-agent").status, "ACTIVE")
  t.eq(addon("amazon-sagemaker-hyperpod-training-operator").status, "ACTIVE")
  t.ok(cl:get(R.crds, nil, "hyperpodpytorchjobs.sagemaker.amazonaws.com"), "the CRD")
  t.ok(cl.reg:find("sagemaker.amazonaws.com", "v1", "hyperpodpytorchjobs"), "served")
  local op = cl:get(R.deploy, "aws-hyperpod", "hp-training-operator-hp-training-controller-manager")
  t.ok(op, "the operator's Deployment in aws-hyperpod")
  t.eq(op.spec.template.metadata.labels["hp-training-control-plane"], "hp-training-controller-manager")
  call("eks", "DeleteAddon", { clusterName = EKS, addonName = "coredns" })
  wait(function() return cl:get(R.deploy, "kube-system", "coredns") == nil end, 200, "coredns to go")
  for _, p in ipairs(cl:list(R.pods, "kube-system")) do
    t.ok(not p.metadata.name:find("^coredns"), "its pods go too")
  end
end)

local function hpjob(name, steps, extra)
  local r = cl.reg:find("sagemaker.amazonaws.com", "v1", "hyperpodpytorchjobs")
  local job = { metadata = { name = name, namespace = "default", annotations = { ["sandbox.hypd.io/steps"] = tostring(steps) } },
    spec = { nprocPerNode = "4", replicaSpecs = { { name = "pods", replicas = 2, template = { spec = {
      nodeSelector = { ["node.kubernetes.io/instance-type"] = "ml.g5.12xlarge" },
      containers = { { name = "pytorch", image = "123456789012.dkr.ecr.us-west-2.amazonaws.com/train:latest",
        command = { "hyperpodrun", "--nnodes=2", "--nproc-per-node=4", "train.py" },
        resources = { limits = { ["nvidia.com/gpu"] = "4", ["vpc.amazonaws.com/efa"] = "1" } } } } } } } } } }
  for k, v in pairs(extra or {}) do job.spec[k] = v end
  return assert(cl:create(r, job)), r
end

local function last_true(job)
  local conds = (job.status or {}).conditions or {}
  for i = #conds, 1, -1 do
    if conds[i].status == "True" then return conds[i].type end
  end
end

t.test("a HyperPodPyTorchJob of 2 replicas runs, prints its training steps and completes", function()
  local _, r = hpjob("train", 5)
  wait(function() return last_true(cl:get(r, "default", "train")) == "Running" end, 30, "Running")
  local j = cl:get(r, "default", "train")
  t.eq(#j.status.jobPods, 2)
  t.eq(j.status.restartCount, 0)
  local p0, p1 = pod("train-pod-0"), pod("train-pod-1")
  t.eq({ p0.metadata.labels.HPJob, p0.metadata.ownerReferences[1].kind }, { "train", "HyperPodPyTorchJob" })
  t.ok(p0.spec.nodeName ~= p1.spec.nodeName, "one pod per node (4 GPUs each)")
  wait(function() return last_true(cl:get(r, "default", "train")) == "Completed" end, 30, "Completed")
  j = cl:get(r, "default", "train")
  t.ok(j.status.startTime and j.status.completionTime, "times")
  t.eq(pod("train-pod-0").status.phase, "Succeeded")
  local st, body = log_of("default", "train-pod-1", "pytorch")
  t.eq(st, 200)
  t.like(body, "%[rank 1%] Experiment configuration")
  t.like(body, "\n%[rank 1%] step 1/5 loss=%d%.%d%d%d%d throughput=%d+%.%d samples/s\n")
  t.like(body, "\n%[rank 1%] step 5/5 loss=")
  local _, b0 = log_of("default", "train-pod-0")
  t.like(b0, "%[rank 0%] Training completed: 5 steps")
  local n = 0
  for _ in b0:gmatch("step %d+/5") do n = n + 1 end
  t.eq(n, 5)
  cl:delete(r, "default", "train")
  t.eq(pod("train-pod-0"), nil, "its pods go with it")
end)

t.test("a person labelling a node UnschedulablePendingReboot makes HyperPod reboot it", function()
  local node = hp_nodes()[1]
  local id = node.metadata.annotations["sandbox.hypd.io/instance-id"]
  local c = json.decode(json.encode(node))
  c.metadata.labels["sagemaker.amazonaws.com/node-health-status"] = "UnschedulablePendingReboot"
  assert(cl:update(R.nodes, c))
  task.sleep(0.1)
  t.eq(state.view(REGION, "sagemaker"):get("node", id).Message, "Rebooting")
  node = cl:get(R.nodes, nil, node.metadata.name)
  t.eq(node.metadata.labels["sagemaker.amazonaws.com/node-health-status"], "UnschedulablePendingReboot")
  t.ok(not ready(node), "not Ready while rebooting")
  wait(function() return ready(cl:get(R.nodes, nil, node.metadata.name)) end, 400, "the reboot")
  node = cl:get(R.nodes, nil, node.metadata.name)
  t.eq(node.metadata.labels["sagemaker.amazonaws.com/node-health-status"], "Schedulable")
  t.eq(node.spec.taints, nil)
end)

t.test("the controllers settle: with nothing happening, nothing is written", function()
  assert(cl:create(R.deploy, { metadata = { name = "idle", namespace = "default" }, spec = { replicas = 2,
    selector = { matchLabels = { app = "idle" } }, template = { metadata = { labels = { app = "idle" } },
      spec = { containers = { { name = "c", image = "nginx" } } } } } }))
  wait(function() return (cl:get(R.deploy, "default", "idle").status or {}).readyReplicas == 2 end, 30, "ready")
  task.sleep(1)
  local rv = cl.rv
  task.sleep(60)
  t.eq(cl.rv, rv, "no commit in a quiet minute")
  cl:delete(R.deploy, "default", "idle")
end)

t.test("a node failing under a job restarts the job; automatic recovery brings a replacement node", function()
  local _, r = hpjob("resilient", 100000, { runPolicy = { jobMaxRetryCount = 1, cleanPodPolicy = "None" } })
  wait(function() return last_true(cl:get(r, "default", "resilient")) == "Running" end, 30, "Running")
  local victim = pod("resilient-pod-0").spec.nodeName
  local id = victim:match("^hyperpod%-(.+)$")
  assert(nodes.fail(REGION, HP, id))
  t.fails(nodes.fail(REGION, HP, "i-0nothere"), select(2, nodes.fail(REGION, HP, "i-0nothere")), "NOT_FOUND")
  task.sleep(0.5)
  local node = cl:get(R.nodes, nil, victim)
  t.eq(node.metadata.labels["sagemaker.amazonaws.com/node-health-status"], "UnschedulablePendingReplacement")
  local taint = node.spec.taints[1]
  t.eq({ taint.key, taint.effect }, { "sagemaker.amazonaws.com/node-health-status", "NoSchedule" })
  local j = cl:get(r, "default", "resilient")
  t.eq(j.status.restartCount, 1)
  t.eq(last_true(j), "Restarting")
  t.eq(j.status.latestFaultyPodInstanceList.faultyInstanceIdList, { id })
  local p0, p1 = pod("resilient-pod-0"), pod("resilient-pod-1")
  t.ok(p0 and p1, "the pods are back")
  t.eq({ p0.status.phase, p1.status.phase }, { "Pending", "Pending" }, "one node for two 4-GPU pods")
  wait(function() return cl:get(R.nodes, nil, victim) == nil end, 1000, "the failed node to be replaced")
  wait(function()
    local ns = hp_nodes()
    return #ns == 2 and ready(ns[1]) and ready(ns[2])
  end, 30, "a replacement node")
  wait(function() return last_true(cl:get(r, "default", "resilient")) == "Running" end, 30, "Running again")
  t.eq(cl:get(r, "default", "resilient").status.restartCount, 1)
  task.sleep(1.5)
  local _, body = log_of("default", "resilient-pod-0")
  t.like(body, "step 1/100000")
  -- a second fault exhausts the one retry
  assert(nodes.fail(REGION, HP, pod("resilient-pod-1").spec.nodeName:match("^hyperpod%-(.+)$")))
  wait(function() return last_true(cl:get(r, "default", "resilient")) == "Failed" end, 30, "Failed")
  t.like(cl:get(r, "default", "resilient").status.conditions[#cl:get(r, "default", "resilient").status.conditions]
    .message, "retries allowed are used up")
  cl:delete(r, "default", "resilient")
end)

t.test("a node_failures fault from the fault file fails a node some time after it joined", function()
  local faults = require "sandbox.faults"
  assert(faults.configure { node_failures = { { cluster = HP, instance_group = "extra", after = 120 } } })
  call("sagemaker", "UpdateCluster", { ClusterName = HP, InstanceGroups = { { InstanceGroupName = "extra",
    InstanceType = "ml.g5.12xlarge", InstanceCount = 1, ExecutionRole = ROLE } } })
  local function mine()
    for _, n in ipairs(hp_nodes()) do
      if n.metadata.labels["sagemaker.amazonaws.com/instance-group-name"] == "extra" then return n end
    end
  end
  wait(function() return mine() ~= nil end, 900, "the node to join")
  local joined = core.now()
  t.eq(mine().metadata.labels["sagemaker.amazonaws.com/node-health-status"], "Schedulable")
  wait(function()
    local n = mine()
    return n and n.metadata.labels["sagemaker.amazonaws.com/node-health-status"] == "UnschedulablePendingReplacement"
  end, 300, "the injected failure")
  t.ok(core.now() - joined >= 120, "failed " .. (core.now() - joined) .. " s after joining")
  local id = mine().metadata.name:match("^hyperpod%-(.+)$")
  t.eq(state.view(REGION, "sagemaker"):get("node", id).Status, "Failure")
  assert(faults.configure {})
end)
