-- The sandbox process of tests/bench/monitor_bench.lua (here, not in
-- tests/bench/, which make bench runs whole): an EKS cluster "bench-mon" whose
-- Kubernetes API holds 2,000 nodes in four instance groups and 60,000
-- pods, each a training pod as the API server returns it (containers with
-- env, resources, volume mounts; volumes; status with conditions and
-- containerStatuses: about 3.5 KB of JSON), 1,000 of them Pending on GPUs.
-- Prints "MONITOR-SANDBOX {env}" (the AWS environment that reaches it) and
-- serves until killed.
--   MONITOR_NODES, MONITOR_PODS: other sizes
local t = require "hypd.tap"
local aws = require "hypd.aws"
local core = require "hypd.core"
local json = require "hypd.json"
local sandbox = require "sandbox"
local skube = require "sandbox.k8s"
local store = require "hypd.store"
local task = require "hypd.task"
local H = dofile("tests/lua/helpers.lua")

local NODES = tonumber(os.getenv("MONITOR_NODES") or "") or 2000
local PODS = tonumber(os.getenv("MONITOR_PODS") or "") or 60000
local PENDING = math.floor(PODS / 60)
local GROUPS = { { "train-p5", "ml.p5.48xlarge" }, { "train-p4d", "ml.p4d.24xlarge" },
  { "infer-g6e", "ml.g6e.48xlarge" }, { "cpu", "ml.m5.8xlarge" } }
local T0 = "2026-12-01T08:00:00Z"

local function node(i)
  local g = GROUPS[(i - 1) % #GROUPS + 1]
  local gpus = g[1] == "cpu" and "0" or "8"
  local id = string.format("i-0%016x", i)
  local ready = i % 97 ~= 0
  return { metadata = { name = "hyperpod-" .. id, labels = {
      ["sagemaker.amazonaws.com/instance-group-name"] = g[1], ["node.kubernetes.io/instance-type"] = g[2],
      ["sagemaker.amazonaws.com/node-health-status"] = ready and "Schedulable" or "Unschedulable",
      ["sagemaker.amazonaws.com/deep-health-check-status"] = "Passed",
      ["sagemaker.amazonaws.com/compute-type"] = "hyperpod", ["kubernetes.io/hostname"] = "hyperpod-" .. id,
      ["topology.kubernetes.io/zone"] = "us-west-2a", ["kubernetes.io/os"] = "linux" } },
    spec = { providerID = "aws:///usw2-az1/sagemaker/cluster/hyperpod-bench-" .. id,
      taints = not ready and { { key = "sagemaker.amazonaws.com/node-health-status", value = "Unschedulable",
        effect = "NoSchedule" } } or nil },
    status = { capacity = { cpu = "192", memory = "2097152Mi", pods = "110", ["nvidia.com/gpu"] = gpus,
        ["vpc.amazonaws.com/efa"] = gpus == "8" and "32" or "0" },
      allocatable = { cpu = "191450m", memory = "2050000Mi", pods = "110", ["nvidia.com/gpu"] = gpus,
        ["vpc.amazonaws.com/efa"] = gpus == "8" and "32" or "0" },
      conditions = { { type = "MemoryPressure", status = "False", reason = "KubeletHasSufficientMemory" },
        { type = "DiskPressure", status = "False", reason = "KubeletHasNoDiskPressure" },
        { type = "PIDPressure", status = "False", reason = "KubeletHasSufficientPID" },
        { type = "Ready", status = ready and "True" or "False", reason = ready and "KubeletReady" or "KubeletNotReady",
          message = ready and "kubelet is posting ready status" or "HyperPod health checks report the instance unhealthy",
          lastHeartbeatTime = T0, lastTransitionTime = T0 } },
      nodeInfo = { kubeletVersion = "v1.31.4-eks-aeac579", containerRuntimeVersion = "containerd://1.7.25",
        osImage = "Amazon Linux 2", architecture = "amd64" } } }
end

local function env(n)
  local out = {}
  for k, v in pairs { MASTER_ADDR = "job-worker-0", MASTER_PORT = "23456", WORLD_SIZE = "64", NPROC_PER_NODE = "8",
    NCCL_DEBUG = "INFO", NCCL_SOCKET_IFNAME = "^lo,docker", FI_PROVIDER = "efa", FI_EFA_USE_DEVICE_RDMA = "1",
    TORCH_NCCL_ASYNC_ERROR_HANDLING = "1", HF_HOME = "/fsx/hf", CHECKPOINT_DIR = "/fsx/checkpoints/job-" .. n,
    LOGLEVEL = "INFO", CUDA_DEVICE_MAX_CONNECTIONS = "1", PYTHONUNBUFFERED = "1" } do
    out[#out + 1] = { name = k, value = v }
  end
  table.sort(out, function(a, b) return a.name < b.name end)
  out[#out + 1] = { name = "POD_IP", valueFrom = { fieldRef = { fieldPath = "status.podIP" } } }
  return out
end

-- the parts of a pod that are the same for every pod of a job (or of the
-- cluster) are one table each, as in a real API server they are the same
-- template: the JSON is each pod's own, the sandbox's heap (1 GB, the host's
-- cap) holds 60,000 of them
local shared = {}
local function once(key, make)
  local v = shared[key]
  if v == nil then v = make(); shared[key] = v end
  return v
end

local function pod(i, nodes)
  local pending = i <= PENDING
  local job = math.floor((i - 1) / 32)
  local nd = not pending and nodes[(i - 1) % #nodes + 1] or nil
  local gpu = (pending or i % 30 == 0) and "8" or "0"
  local ns = "team-" .. (job % 20)
  local name = string.format("job-%05d-worker-%d", job, (i - 1) % 32)
  local started = "2026-12-01T08:0" .. (i % 10) .. ":00Z"
  local containers = once("containers/" .. job .. "/" .. gpu, function()
    local res = { requests = { cpu = "16", memory = "64Gi", ["nvidia.com/gpu"] = gpu,
      ["vpc.amazonaws.com/efa"] = gpu == "8" and "4" or "0" },
      limits = { memory = "64Gi", ["nvidia.com/gpu"] = gpu, ["vpc.amazonaws.com/efa"] = gpu == "8" and "4" or "0" } }
    return {
        { name = "pytorch", image = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:" ..
            "2.5.1-gpu-py311-cu124-ubuntu22.04-sagemaker",
          command = { "torchrun" }, args = { "--nnodes=8", "--nproc_per_node=8", "/fsx/code/train.py",
            "--model=meta-llama/Llama-3.1-8B", "--max_steps=100000", "--checkpoint_every=500" },
          env = env(job), resources = res, ports = { { containerPort = 23456, name = "master", protocol = "TCP" } },
          volumeMounts = { { name = "fsx", mountPath = "/fsx" }, { name = "shm", mountPath = "/dev/shm" },
            { name = "config", mountPath = "/etc/train", readOnly = true },
            { name = "kube-api-access", mountPath = "/var/run/secrets/kubernetes.io/serviceaccount", readOnly = true } },
          imagePullPolicy = "IfNotPresent", terminationMessagePath = "/dev/termination-log", terminationMessagePolicy = "File" },
        { name = "log-agent", image = "public.ecr.aws/aws-observability/aws-for-fluent-bit:2.32.2",
          env = { { name = "AWS_REGION", value = "us-west-2" }, { name = "LOG_GROUP", value = "/hypd/training/job-" .. job } },
          resources = { requests = { cpu = "100m", memory = "128Mi" }, limits = { memory = "256Mi" } },
          volumeMounts = { { name = "varlog", mountPath = "/var/log" } } } }
  end)
  local volumes = once("volumes/" .. job, function()
    return { { name = "fsx", persistentVolumeClaim = { claimName = "fsx-claim" } },
        { name = "shm", emptyDir = { medium = "Memory", sizeLimit = "64Gi" } },
        { name = "config", configMap = { name = "job-" .. job .. "-config" } },
        { name = "varlog", hostPath = { path = "/var/log", type = "" } },
        { name = "kube-api-access", projected = { defaultMode = 420, sources = { { serviceAccountToken = {
          expirationSeconds = 3607, path = "token" } } } } } }
  end)
  local owners = once("owners/" .. job, function()
    return { { apiVersion = "sagemaker.amazonaws.com/v1", kind = "HyperPodPyTorchJob", name = "job-" .. job,
        uid = "4f3c2b1a-0000-4000-8000-" .. string.format("%012d", job), controller = true, blockOwnerDeletion = true } }
  end)
  local annotations = once("annotations/" .. job, function()
    return { ["sagemaker.amazonaws.com/hyperpod-job"] = "job-" .. job, ["kubectl.kubernetes.io/default-container"] = "pytorch" }
  end)
  local tolerations = once("tolerations", function()
    return { { key = "nvidia.com/gpu", operator = "Exists", effect = "NoSchedule" },
        { key = "node.kubernetes.io/not-ready", operator = "Exists", effect = "NoExecute", tolerationSeconds = 300 } }
  end)
  local selector = once("selector", function() return { ["sagemaker.amazonaws.com/instance-group-name"] = "train-p5" } end)
  local p = { metadata = { name = name, namespace = ns, generateName = "job-" .. job .. "-",
      labels = { app = "job-" .. job, ["training.kubeflow.org/job-name"] = "job-" .. job,
        ["training.kubeflow.org/replica-type"] = "worker", ["training.kubeflow.org/replica-index"] = tostring((i - 1) % 32) },
      annotations = annotations, ownerReferences = owners },
    spec = { nodeName = nd and nd.metadata.name or nil, schedulerName = "none", restartPolicy = "Never",
      serviceAccountName = "default", terminationGracePeriodSeconds = 30, dnsPolicy = "ClusterFirst",
      nodeSelector = selector, containers = containers, volumes = volumes, tolerations = tolerations } }
  if pending then
    p.status = { phase = "Pending", qosClass = "Burstable", conditions = { { type = "PodScheduled", status = "False",
      reason = "Unschedulable", lastTransitionTime = started, message = "0/" .. NODES .. " nodes are available: " ..
      NODES .. " Insufficient nvidia.com/gpu. preemption: 0/" .. NODES .. " nodes are available." } } }
  else
    local cs = {}
    for k, c in ipairs { "pytorch", "log-agent" } do
      cs[k] = { name = c, ready = true, restartCount = 0, started = true, image = p.spec.containers[k].image,
        imageID = "sha256:" .. string.rep("ab", 32), containerID = "containerd://" .. string.format("%064x", i * 2 + k),
        state = once("state/" .. started, function() return { running = { startedAt = started } } end) }
    end
    p.status = { phase = "Running", hostIP = "10.1." .. (i % 250) .. ".7", podIP = "10.1." .. (i % 250) .. "." .. (i % 200 + 20),
      startTime = started, qosClass = "Burstable", containerStatuses = cs,
      conditions = once("conditions/" .. started, function()
        return { { type = "PodReadyToStartContainers", status = "True", lastTransitionTime = started },
          { type = "Initialized", status = "True", lastTransitionTime = started },
          { type = "Ready", status = "True", lastTransitionTime = started },
          { type = "ContainersReady", status = "True", lastTransitionTime = started },
          { type = "PodScheduled", status = "True", lastTransitionTime = started } }
      end) }
  end
  return p
end

local AKID, SECRET = os.getenv("AWS_ACCESS_KEY_ID"), os.getenv("AWS_SECRET_ACCESS_KEY")
local srv = assert(sandbox.start { listen = "127.0.0.1:0", credentials = { [AKID] = SECRET } })
local OPTS = { endpoint_url = "http://127.0.0.1:" .. srv.port, region = "us-west-2" }
local function call(service, op, params) return aws.call(service, op, params or {}, OPTS) end

t.test("a cluster of " .. NODES .. " nodes and " .. PODS .. " pods, then serve", function()
  core.virtual(true)
  H.eks_cluster(call, "bench-mon", 74)
  core.virtual(false)
  local cl = skube.cluster("us-west-2", "bench-mon")
  local nr, pr, nsr = cl.reg:find("", "v1", "nodes"), cl.reg:find("", "v1", "pods"), cl.reg:find("", "v1", "namespaces")
  -- the controllers are not told: these objects are a snapshot to list,
  -- not work for the simulated kubelet and scheduler
  local hooks = cl.hooks
  cl.hooks = {}
  local start = core.mono()
  for k = 0, 19 do assert(cl:create(nsr, { metadata = { name = "team-" .. k } })) end
  local nodes = {}
  store.transaction(function()
    for i = 1, NODES do
      nodes[i] = assert(cl:create(nr, node(i)))
    end
  end)
  local bytes = 0
  for b = 0, PODS - 1, 2000 do
    store.transaction(function()
      for i = b + 1, math.min(PODS, b + 2000) do
        local o = assert(cl:create(pr, pod(i, nodes)))
        if i == 1 or i == PODS then bytes = bytes + #cl:text(o) end
      end
    end)
    task.sleep(0.001) -- a real wait: the seeding is long, not a CPU loop
  end
  cl.hooks = hooks
  -- etcd keeps its keys in order; the sandbox sorts a resource at its first
  -- list and keeps it in order after: here, not inside the measured lists
  cl:sorted(nr)
  cl:sorted(pr)
  local e = sandbox.env(srv.port)
  e.AWS_ACCESS_KEY_ID, e.AWS_SECRET_ACCESS_KEY = AKID, SECRET
  collectgarbage()
  io.stdout:write(string.format("# seeded %d nodes and %d pods (a pod's JSON: %d bytes) in %.1f s; the sandbox's " ..
    "Lua heap: %.0f MB\n", NODES, PODS, bytes // 2, core.mono() - start, collectgarbage("count") / 1024))
  io.stdout:write("MONITOR-SANDBOX " .. json.encode(e) .. "\n")
  io.stdout:flush()
  task.forever()
end)
