-- diagnose_training_job against the in-process sandbox under the virtual
-- clock: an EKS cluster with a HyperPod group of two ml.g5.12xlarge nodes
-- (4 GPUs each) and the training operator. A running job is healthy; each
-- workload fault of sandbox.faults_workloads (training_logs: an NCCL
-- timeout with a hang, EFA / XID / NCCL WARN lines, CUDA errors, a slowdown; pod_crash:
-- OOM kills that use up the restart budget, a batch Job in a crash loop),
-- a job asking more GPUs than are free, and a node marked for reboot each
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
local EKS, HP = "diag-t", "diag-t-hp"
local conn

local function diagnose(job, extra)
  local args = { job = job, cluster = EKS }
  for k, v in pairs(extra or {}) do args[k] = v end
  return D.run("diagnose_training_job", args, ADMIN)
end
local find, quotes, codes = D.find, D.quotes, D.codes

-- job(name, replicas, gpus [, extra]) creates a HyperPodPyTorchJob of
-- `steps` steps (default: long enough to stay Running)
local function job(name, replicas, gpus, o)
  o = o or {}
  assert(conn:create { apiVersion = "sagemaker.amazonaws.com/v1", kind = "HyperPodPyTorchJob",
    metadata = { name = name, namespace = "default", annotations = { ["sandbox.hypd.io/steps"] = tostring(o.steps or 100000) } },
    spec = { nprocPerNode = tostring(gpus), runPolicy = { jobMaxRetryCount = o.retries or 0, cleanPodPolicy = "None" },
      replicaSpecs = { { name = "pods", replicas = replicas, template = { spec = {
        nodeSelector = { ["node.kubernetes.io/instance-type"] = "ml.g5.12xlarge" },
        containers = { { name = "pytorch", image = "763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.5",
          command = { "torchrun", "--nproc_per_node=" .. gpus, "train.py" },
          resources = { limits = { ["nvidia.com/gpu"] = gpus }, requests = { ["nvidia.com/gpu"] = gpus } } } } } } } } } })
end

local function phase(name)
  -- the newest True condition, as the operator's status reads
  local j = conn:get("sagemaker.amazonaws.com/v1", "HyperPodPyTorchJob", name, { namespace = "default" })
  local best, at
  for _, c in ipairs(((j or {}).status or {}).conditions or {}) do
    local when = c.lastTransitionTime or ""
    if c.status == "True" and (not at or when >= at) then best, at = c.type, when end
  end
  return best
end

local function gone(name)
  conn:delete("sagemaker.amazonaws.com/v1", "HyperPodPyTorchJob", name, { namespace = "default" })
  for _, p in ipairs(conn:list("v1", "Pod", { namespace = "default", labels = { HPJob = name } }) or {}) do
    conn:delete("v1", "Pod", p.metadata.name, { namespace = "default" })
  end
  FH.wait(function() return #(conn:list("v1", "Pod", { namespace = "default", labels = { HPJob = name } }) or {}) == 0 end,
    600, 1)
end

t.test("a cluster: EKS, a HyperPod group of two ml.g5.12xlarge nodes and the training operator", function()
  conn = FH.gpu_cluster(call, EKS, HP, 91, 2)
  TH.training_operator(conn)
  t.ok(true)
end)

t.test("a running job with no fault is healthy, having looked at its status, pods, nodes, logs and events", function()
  job("good", 2, 1)
  FH.wait(function() return phase("good") == "Running" end, 600, 1)
  task.sleep(30)
  local r, err = diagnose("good")
  t.ok(r, err and err.message)
  t.eq(r and r.healthy, true, r and r.summary)
  t.eq(codes(r), {})
  local looked = {}
  for _, c in ipairs(r and r.checked or {}) do looked[#looked + 1] = c.what end
  t.eq(looked, { "job status", "pods", "nodes", "logs", "events" })
  t.like(r and r.summary, "^healthy")
end)

t.test("a node of the job HyperPod marks Unschedulable: NODE_UNHEALTHY with reboot and replace calls", function()
  local pod = conn:get("v1", "Pod", "good-pod-0", { namespace = "default" })
  local node = pod.spec.nodeName
  local function label(v)
    assert(conn:patch("v1", "Node", node, { metadata = { labels = { ["sagemaker.amazonaws.com/node-health-status"] = v } } }))
  end
  label("Unschedulable")
  local r = diagnose("good")
  local f = find(r, "NODE_UNHEALTHY")
  t.eq(f and f.severity, "critical")
  t.eq(f and f.subject, "node " .. node)
  t.like(quotes(f), "node%-health%-status | Unschedulable$")
  local calls = {}
  for _, s in ipairs(f and f.next or {}) do calls[#calls + 1] = s.action .. " " .. s.call end
  t.like(table.concat(calls, "\n"), "reboot hyperpod_node_reboot cluster=" .. D.esc(EKS) .. " nodes:='%[\"" ..
    D.esc(node) .. "\"%]'")
  t.like(table.concat(calls, "\n"), "replace hyperpod_node_replace")
  t.eq(r and r.healthy, false)
  label("Schedulable")
  gone("good")
end)

t.test("training_logs: an NCCL watchdog timeout and a hang give NCCL_TIMEOUT and TRAINING_STALLED", function()
  local line = "[rank1]:[E1202 10:00:00.000000 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective " ..
    "operation timeout: WorkNCCL(SeqNum=42, OpType=ALLREDUCE, NumelIn=1048576, Timeout(ms)=600000) ran for 600012 " ..
    "milliseconds before timing out."
  assert(faults.configure { training_logs = { { namespace = "default", pod_prefix = "hang-pod-", after_lines = 6,
    lines = { line }, stall = true } } })
  job("hang", 2, 1)
  FH.wait(function() return phase("hang") == "Running" end, 600, 1)
  task.sleep(400)
  local r = diagnose("hang")
  t.eq(r and r.healthy, false)
  local f = find(r, "NCCL_TIMEOUT")
  t.eq(f and f.severity, "critical")
  t.like(quotes(f), "Pod/hang%-pod%-%d log | .*Watchdog caught collective operation timeout")
  t.ok(f and f.evidence[1].at, "the line's time is quoted")
  local s = find(r, "TRAINING_STALLED")
  t.eq(s and s.severity, "critical")
  t.like(quotes(s), "log %(last step line%) | %[rank %d%] step %d+/100000 loss=")
  t.like(s and s.summary, "no training step for %d+ s while the pods run")
  t.eq(s and s.next[1].tool, "job_get_logs", "inspect first")
  gone("hang")
  faults.configure {}
end)

t.test("training_logs: EFA provider errors, an XID and NCCL WARN lines give EFA_ERROR, GPU_XID, NCCL_WARN", function()
  assert(faults.configure { training_logs = { { pod_prefix = "efa-pod-1", after_lines = 4, lines = {
    "efa-pod-1:123:456 [0] NCCL WARN NET/OFI Unable to register memory (type = 2) for device 0. RC: -22, Error: " ..
      "Invalid argument",
    "efa-pod-1:123:456 [0] NCCL WARN Failed to connect to peer, falling back to sockets",
    "[  120.456789] NVRM: Xid (PCI:0000:53:00): 79, pid=2345, name=python, GPU has fallen off the bus." } } } })
  job("efa", 2, 1)
  FH.wait(function() return phase("efa") == "Running" end, 600, 1)
  task.sleep(20)
  local r = diagnose("efa")
  local node = conn:get("v1", "Pod", "efa-pod-1", { namespace = "default" }).spec.nodeName
  local e = find(r, "EFA_ERROR")
  t.eq(e and e.severity, "critical")
  t.like(quotes(e), "Pod/efa%-pod%-1 log | .*NET/OFI Unable to register memory")
  local x = find(r, "GPU_XID")
  t.eq(x and x.severity, "critical")
  t.like(quotes(x), "NVRM: Xid %(PCI:0000:53:00%): 79")
  local actions = {}
  for _, st in ipairs(x and x.next or {}) do actions[#actions + 1] = st.action .. ":" .. st.tool end
  t.like(table.concat(actions, " "), "^inspect:job_get_logs inspect:training_get_job .*reboot:hyperpod_node_reboot " ..
    "replace:hyperpod_node_replace$", "escalation order inspect, reboot, replace")
  t.eq(x and x.next[#x.next].args.nodes, { node }, "the node of the pod that printed it")
  local w = find(r, "NCCL_WARN")
  t.eq(w and w.severity, "warning")
  t.like(quotes(w), "NCCL WARN Failed to connect to peer")
  t.eq(find(r, "TRAINING_STALLED"), nil, "the steps go on")
  gone("efa")
  faults.configure {}
end)

t.test("training_logs with slow: the throughput falls to a fifth, TRAINING_SLOW quoting the step lines", function()
  assert(faults.configure { training_logs = { { pod_prefix = "slow-pod-0", after_lines = 20, slow = 0.2,
    lines = { "slow-pod-0:77:88 [0] NCCL INFO NET/Socket : Using [0]eth0:10.1.0.5<0>" } } } })
  job("slow", 2, 1)
  FH.wait(function() return phase("slow") == "Running" end, 600, 1)
  task.sleep(60)
  local r = diagnose("slow")
  local f = find(r, "TRAINING_SLOW")
  t.eq(f and f.severity, "warning")
  t.like(f and f.summary, "^the throughput fell from 1[78]%d%.%d to 3%d%.%d$", "180 samples/s per GPU, then a fifth")
  t.like(quotes(f), "log %(first slow step%) | %[rank 0%] step %d+/100000 loss=%S+ throughput=3%d%.%d samples/s")
  t.eq(find(r, "TRAINING_STALLED"), nil, "it still steps")
  gone("slow")
  faults.configure {}
  -- with no fault the same job keeps its pace
  job("pace", 2, 1)
  FH.wait(function() return phase("pace") == "Running" end, 600, 1)
  task.sleep(60)
  t.eq(find(diagnose("pace"), "TRAINING_SLOW"), nil, "no slowdown without the fault")
  gone("pace")
end)

t.test("training_logs: CUDA errors and CUDA out of memory give CUDA_ERROR and CUDA_OOM", function()
  assert(faults.configure { training_logs = { { pod_prefix = "cuda-pod-0", after_lines = 4, lines = {
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 22.06 GiB" } } } })
  job("cuda", 1, 1)
  FH.wait(function() return phase("cuda") == "Running" end, 600, 1)
  task.sleep(10)
  local r = diagnose("cuda")
  t.like(quotes(find(r, "CUDA_ERROR")), "Pod/cuda%-pod%-0 log | RuntimeError: CUDA error: an illegal memory access")
  t.like(quotes(find(r, "CUDA_OOM")), "CUDA out of memory%. Tried to allocate 2%.00 GiB")
  t.eq((find(r, "CUDA_OOM") or {}).severity, "critical")
  gone("cuda")
  faults.configure {}
end)

t.test("pod_crash OOMKilled on a job with one retry: JOB_FAILED and POD_OOMKILLED with exit code 137", function()
  assert(faults.configure { pod_crash = { { namespace = "default", pod_prefix = "oom-pod-", reason = "OOMKilled" } } })
  job("oom", 1, 1, { retries = 1 })
  FH.wait(function() return phase("oom") == "Failed" end, 600, 1)
  local r = diagnose("oom")
  local f = find(r, "JOB_FAILED")
  t.eq(f and f.severity, "critical")
  t.like(quotes(f), "HyperPodPyTorchJob/oom condition Failed | JobFailed: .*the 1 retries allowed are used up")
  local o = find(r, "POD_OOMKILLED")
  t.eq(o and o.severity, "critical")
  t.like(quotes(o), "Pod/oom%-pod%-0 container pytorch state.terminated | OOMKilled, exitCode 137")
  t.eq(r and r.findings[1].severity, "critical", "worst first")
  gone("oom")
  faults.configure {}
end)

t.test("pod_crash on a batch Job (restartPolicy OnFailure): POD_CRASHLOOP with the back-off and exit code", function()
  assert(faults.configure { pod_crash = { { pod_prefix = "prep-", reason = "CrashLoopBackOff", exit_code = 2 } } })
  assert(conn:create { apiVersion = "batch/v1", kind = "Job", metadata = { name = "prep", namespace = "default" },
    spec = { backoffLimit = 4, template = { spec = { restartPolicy = "OnFailure",
      containers = { { name = "main", image = "python:3.12", command = { "python", "prep.py" } } } } } } })
  task.sleep(60)
  local r = diagnose("prep")
  local f = find(r, "POD_CRASHLOOP")
  t.eq(f and f.severity, "critical")
  t.like(quotes(f), "Pod/prep%-%w+ container main state | CrashLoopBackOff %(restartCount %d+%); last exit: " ..
    "Error, exitCode 2")
  t.eq(f and f.next[1].call, "job_get_logs cluster=" .. EKS .. " kind=job name=prep namespace=default region=" ..
    "us-west-2 tail:=200")
  local pod = conn:list("v1", "Pod", { namespace = "default", labels = { ["job-name"] = "prep" } })[1]
  local ev = conn:list("v1", "Event", { namespace = "default" })
  local backoff
  for _, e in ipairs(ev) do
    if e.reason == "BackOff" and e.involvedObject.name == pod.metadata.name then backoff = e end
  end
  t.like(backoff and backoff.message, "^Back%-off restarting failed container main in pod " .. D.esc(pod.metadata.name) ..
    "_default%(", "the kubelet's BackOff event")
  conn:delete("batch/v1", "Job", "prep", { namespace = "default", propagation = "Background" })
  conn:delete("v1", "Pod", pod.metadata.name, { namespace = "default" })
  faults.configure {}
end)

t.test("more GPUs asked than are free: POD_PENDING_GPU with the scheduler's words and a scale call", function()
  job("big", 3, 4)
  -- two of the three fit (the scheduler may first have to see the last job's pods go)
  FH.wait(function()
    local n = 0
    for _, p in ipairs(conn:list("v1", "Pod", { namespace = "default", labels = { HPJob = "big" } }) or {}) do
      if p.status.phase == "Running" then n = n + 1 end
    end
    return n == 2
  end, 900, 5)
  local r = diagnose("big")
  local f = find(r, "POD_PENDING_GPU")
  t.eq(f and f.severity, "critical")
  t.like(quotes(f), "Pod/big%-pod%-%d condition PodScheduled | Unschedulable: 0/%d+ nodes are available: .*" ..
    "Insufficient nvidia%.com/gpu")
  local fix
  for _, s in ipairs(f and f.next or {}) do if s.action == "fix" then fix = s end end
  t.eq(fix and fix.tool, "hyperpod_scale_instance_group")
  t.eq(fix and { fix.args.instance_group, fix.args.instance_count }, { "gpu", 3 }, "one more node for the pending pod")
  gone("big")
end)

t.test("a pod asking more GPUs than any node of its type has: POD_PENDING_GPU quoting the nodes' GPUs, no scale call",
  function()
    job("huge", 1, 8)
    task.sleep(30)
    local r = diagnose("huge")
    local f = find(r, "POD_PENDING_GPU")
    t.like(quotes(f), "status%.allocatable nvidia%.com/gpu | 4 %(the most of group gpu's nodes%); a pod asks 8")
    for _, s in ipairs(f and f.next or {}) do t.ok(s.action ~= "fix", "no fix: more nodes would not help") end
    gone("huge")
  end)

t.test("the workload faults are refused when malformed, naming the rule and the field", function()
  local ok, err = faults.configure { pod_crash = { { pod_prefix = "x-", reason = "Segfault" } } }
  t.eq(ok, nil)
  t.like(err and err.message, "^faults%.pod_crash%[1%]: reason: CrashLoopBackOff or OOMKilled")
  ok, err = faults.configure { training_logs = { { pod_prefix = "x-" } } }
  t.like(err and err.message, "^faults%.training_logs%[1%]: lines: a list of log lines")
  t.eq(ok, nil)
  ok, err = faults.configure { image_pull = { { namespace = "default" } } }
  t.like(err and err.message, "^faults%.image_pull%[1%]: image_prefix")
  t.eq(ok, nil)
  t.eq(faults.configure {}, true)
end)

t.test("a job that does not exist is NOT_FOUND naming job; bad input names the field", function()
  local _, r, err
  r, err = dispatch.call("diagnose_training_job", { job = "nope", cluster = EKS }, ADMIN)
  t.eq(r, nil)
  t.eq(err and err.code, "NOT_FOUND")
  t.eq(H.field_rules(err), { "job:exists" })
  _, err = dispatch.call("diagnose_training_job", { job = "Bad_Name", cluster = EKS }, ADMIN)
  t.eq(H.field_rules(err), { "job:pattern" })
  _, err = dispatch.call("diagnose_training_job", { cluster = EKS }, ADMIN)
  t.eq(H.field_rules(err), { "job:required" })
end)

