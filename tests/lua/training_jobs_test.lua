-- The training job tools (training_submit, training_get_job,
-- training_list_jobs, training_delete_job) against the in-process sandbox
-- under the virtual clock: an EKS cluster with a HyperPod cluster of two
-- ml.g5.12xlarge nodes; submit refuses before creating anything while the
-- HyperPodPyTorchJob CRD (the training operator) is absent and when no
-- instance group can hold the request; a plan lists the job with nothing
-- sent; pytorch-torchrun then runs to Completed and training_get_job shows
-- its pods, nodes, events and log lines; list and delete follow.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
require("hypd.tool.loader").load()
local _, OPTS = H.sandbox_here()
local FH = dofile("tests/lua/features_helpers.lua")
local call = FH.aws(OPTS)
local dispatch = require "hypd.tool.dispatch"
local json, op = require "hypd.json", require "hypd.tool.operations"
local ADMIN = { name = "training-tester", scope = "admin", front = "test" }
local EKS, HP = "train-a", "train-a-hp"

local function params(extra)
  local a = json.object()
  a.job_name, a.instance_type, a.script, a.replicas = "demo", "ml.g5.12xlarge", "scripts/train.py", 2
  for k, v in pairs(extra or {}) do a[k] = v end
  return a
end

local function submit(extra, more)
  local args = { recipe = "pytorch-torchrun", params = params(extra), cluster = EKS }
  for k, v in pairs(more or {}) do args[k] = v end
  local acc, err = dispatch.call("training_submit", args, ADMIN)
  if not acc then return nil, err end
  if args.plan then return acc end
  local v = op.wait(acc.operation_id)
  if v.status ~= "succeeded" then return nil, v.error, v end
  return v.result, nil, v
end

local conn
local function jobs()
  return conn:list("sagemaker.amazonaws.com/v1", "HyperPodPyTorchJob", { namespace = "default" }) or {}
end

local field_rules = H.field_rules

t.test("a cluster: EKS and a HyperPod cluster with a group of three ml.g5.12xlarge nodes", function()
  conn = FH.gpu_cluster(call, EKS, HP, 81, 3)
  t.ok(true, "three GPU nodes in Kubernetes")
end)

t.test("without the training operator submit refuses before creating anything, naming the call that enables it",
  function()
    local m = FH.mark()
    local _, err = submit()
    t.eq(err and err.code, "CONFLICT")
    t.like(err and err.message, "needs the HyperPod training operator")
    t.like(err and err.message, "hyperpod_update_advanced_features training_operator=true")
    local _, total = FH.since(m)
    t.eq(total, 0, "no AWS mutation")
    t.eq(#FH.k8s_writes(m), 0, "no Kubernetes write")
    local verl = json.object()
    verl.job_name, verl.instance_type, verl.model = "rl", "ml.g5.12xlarge", "models/qwen"
    verl.train_files, verl.val_files = "datasets/gsm8k/train.parquet", "datasets/gsm8k/test.parquet"
    local before = #op.list {}
    local acc, verr = dispatch.call("training_submit", { recipe = "verl", params = verl, cluster = EKS }, ADMIN)
    t.eq(acc, nil, "refused on the call")
    t.eq(#op.list {}, before, "no operation recorded")
    t.eq(verr and verr.code, "CONFLICT")
    t.like(verr and verr.message, "a RayJob needs KubeRay .*cluster_configure_dependencies kuberay=true")
  end)

t.test("with the operator, submit refuses when no instance group can ever fit: type, group, replicas", function()
  local resources = require "sandbox.k8s.resources"
  for _, row in ipairs(resources.CRDS) do
    if row[1] == "sagemaker.amazonaws.com" then assert(conn:create(resources.crd(row))) end
  end
  local m = FH.mark()
  local _, err = submit { instance_type = "ml.p5.48xlarge" }
  t.eq(field_rules(err), { "params.instance_type:exists" })
  t.like(err.message, "has no instance group of ml%.p5%.48xlarge %(groups: gpu %(ml%.g5%.12xlarge x3%)%)")
  _, err = submit { instance_group = "gpu-b" }
  t.eq(field_rules(err), { "params.instance_group:exists" })
  _, err = submit { replicas = 4 }
  t.eq(field_rules(err), { "params.replicas:fits" })
  t.like(err.message, "4 pods on instance type ml%.g5%.12xlarge can never run: it has 3 instance")
  _, err = submit { instance_group = "gpu", replicas = 4 }
  t.eq(field_rules(err), { "params.replicas:fits" }, "by group as well")
  local acc
  acc, err = dispatch.call("training_submit", { recipe = "pytorch-torchrun", params = params { gpus_per_node = 0 },
    cluster = EKS }, ADMIN)
  t.eq(acc, nil, "bad recipe input is refused at the call: no operation")
  t.eq(field_rules(err), { "params.gpus_per_node:minimum" }, "bad recipe input is named as params.<field>")
  t.eq(#FH.k8s_writes(m), 0, "no Kubernetes write")
  t.eq(#jobs(), 0, "no job")
end)

t.test("plan mode lists the HyperPodPyTorchJob it would create and sends nothing", function()
  local m = FH.mark()
  local r, err = submit(nil, { plan = true })
  t.ok(r, err and err.message)
  local rows = {}
  for _, e in ipairs(r and r.plan or {}) do rows[#rows + 1] = e.action .. " " .. e.type .. " " .. e.name end
  t.eq(rows, { "create k8s:hyperpodpytorchjob default/demo" })
  t.eq(#FH.k8s_writes(m), 0)
  t.eq(#jobs(), 0)
end)

t.test("submit applies pytorch-torchrun and waits until it runs; training_get_job follows it to Completed", function()
  local r, err = submit()
  t.ok(r, err and err.message)
  if not r then return end
  t.eq({ r.kind, r.name, r.namespace }, { "HyperPodPyTorchJob", "demo", "default" })
  t.ok(r.phase == "Running" or r.phase == "Completed", "phase " .. tostring(r.phase))
  t.eq(r.objects[1].action, "created")
  local live = jobs()[1]
  t.eq(live.metadata.labels["app.kubernetes.io/managed-by"], "hypd")
  local managers = {}
  for _, f in ipairs(live.metadata.managedFields or {}) do managers[#managers + 1] = f.manager end
  t.like(table.concat(managers, ","), "hypd", "server-side apply by field manager hypd")
  local g = assert(dispatch.call("training_get_job", { name = "demo", cluster = EKS }, ADMIN))
  t.eq({ g.replicas, g.max_retries, g.restarts }, { 2, 5, 0 })
  if g.phase == "Running" then
    t.eq(#g.pods, 2, "two pods")
    local nodes = {}
    for _, p in ipairs(g.pods) do
      t.ok(p.node, p.name .. " has a node")
      nodes[p.node or "?"] = true
      t.ok(p.logs and #p.logs > 0, p.name .. " has log lines")
    end
    local n = 0
    for _ in pairs(nodes) do n = n + 1 end
    t.eq(n, 2, "one pod on each GPU node")
    t.like(json.encode(g.pods[1].logs), "Experiment configuration")
  else
    t.ok(false, "submit answered once the job ran; it is " .. tostring(g.phase))
  end
  local done = g
  for _ = 1, 10 do
    if done.phase == "Completed" or done.phase == "Failed" then break end
    done = assert(dispatch.call("training_get_job", { name = "demo", cluster = EKS, wait_seconds = 60 }, ADMIN))
  end
  t.eq(done.phase, "Completed")
  local reasons = {}
  for _, e in ipairs(done.events) do reasons[#reasons + 1] = e.reason end
  t.like(table.concat(reasons, ","), "JobSucceeded", "the job's events")
  local again, aerr = submit()
  t.ok(again, aerr and aerr.message)
  t.eq(again and again.objects[1].action, "unchanged", "a re-submit of the same objects changes nothing")
end)

t.test("training_list_jobs lists hypd's jobs; training_delete_job deletes only hypd's", function()
  local l = assert(dispatch.call("training_list_jobs", { cluster = EKS }, ADMIN))
  t.eq(#l.jobs, 1)
  t.eq({ l.jobs[1].name, l.jobs[1].recipe, l.jobs[1].phase }, { "demo", "pytorch-torchrun", "Completed" })
  t.eq(l.not_served, { "RayJob" })
  assert(conn:create { apiVersion = "sagemaker.amazonaws.com/v1", kind = "HyperPodPyTorchJob",
    metadata = { name = "theirs", namespace = "default", labels = { ["app.kubernetes.io/managed-by"] = "someone" } },
    spec = { replicaSpecs = json.array() } })
  -- hypd's client labels what it creates; another manager's job has its own label
  assert(conn:patch("sagemaker.amazonaws.com/v1", "HyperPodPyTorchJob", "theirs",
    { metadata = { labels = { ["app.kubernetes.io/managed-by"] = "someone" } } }, { namespace = "default" }))
  t.eq(#assert(dispatch.call("training_list_jobs", { cluster = EKS }, ADMIN)).jobs, 1, "not hypd's: not listed")
  local acc, err = dispatch.call("training_delete_job", { name = "theirs", cluster = EKS }, ADMIN)
  local v = acc and op.wait(acc.operation_id)
  t.eq(v and v.status, "failed", err and err.message)
  t.like(v and v.error and v.error.message, "was not made by hypd %(app.kubernetes.io/managed%-by=someone%): " ..
    "training_delete_job does not change or delete it")
  t.eq(#jobs(), 2, "nothing deleted")
  acc = assert(dispatch.call("training_delete_job", { name = "demo", cluster = EKS }, ADMIN))
  v = op.wait(acc.operation_id)
  t.eq(v.status, "succeeded", v.error and v.error.message)
  t.eq(#jobs(), 1, "demo is gone")
  t.eq(#assert(dispatch.call("training_list_jobs", { cluster = EKS }, ADMIN)).jobs, 0)
end)

local nodes = require "sandbox.k8s.controllers.nodes"

local function follow(name, until_fn)
  local g
  for _ = 1, 20 do
    g = assert(dispatch.call("training_get_job", { name = name, cluster = EKS, wait_seconds = 60 }, ADMIN))
    if until_fn(g) then return g end
  end
  return g
end

t.test("a node failing mid-run restarts the job within its budget, and training_get_job shows the restart",
  function()
    local r, err = submit { job_name = "resilient" }
    t.ok(r, err and err.message)
    if not r then return end
    local g = assert(dispatch.call("training_get_job", { name = "resilient", cluster = EKS }, ADMIN))
    local victim = g.pods[1].node
    assert(nodes.fail("us-west-2", HP, victim:match("^hyperpod%-(.+)$")))
    g = follow("resilient", function(x) return x.restarts > 0 end)
    t.eq({ g.restarts, g.max_retries, g.restarts_left }, { 1, 5, 4 })
    t.eq(g.faulty and g.faulty.faultyPodList, { "resilient-pod-0" }, "the pod at fault")
    local reasons = {}
    for _, e in ipairs(g.events) do reasons[#reasons + 1] = e.reason end
    t.like(table.concat(reasons, ","), "JobRestarting")
    g = follow("resilient", function(x) return x.phase == "Completed" or x.phase == "Failed" end)
    t.eq(g.phase, "Completed", "it finishes on the healthy nodes")
  end)

t.test("past its budget the job fails and training_get_job says so", function()
  local r, err = submit { job_name = "fragile", max_retries = 0 }
  t.ok(r, err and err.message)
  if not r then return end
  local g = assert(dispatch.call("training_get_job", { name = "fragile", cluster = EKS }, ADMIN))
  assert(nodes.fail("us-west-2", HP, g.pods[2].node:match("^hyperpod%-(.+)$")))
  g = follow("fragile", function(x) return x.phase == "Failed" or x.phase == "Completed" end)
  t.eq({ g.phase, g.restarts, g.max_retries, g.restarts_left }, { "Failed", 0, 0, 0 })
  local last = g.conditions[#g.conditions]
  t.like(last and last.message, "the 0 retries allowed are used up")
end)
