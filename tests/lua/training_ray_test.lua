-- RayJobs in the sandbox, as KubeRay runs them, and every shipped recipe
-- submitted to completion with logs: an EKS cluster with a HyperPod group
-- of three ml.g5.12xlarge nodes, KubeRay installed with
-- cluster_configure_dependencies kuberay=true; the verl recipe's RayJob
-- makes a RayCluster (head and GPU workers), a submitter Job that runs the
-- entrypoint, goes Initializing -> Running -> Complete (jobStatus PENDING ->
-- RUNNING -> SUCCEEDED), its cluster goes after ttlSecondsAfterFinished, and
-- training_get_job shows the entrypoint's output; a failing entrypoint is
-- retried with a new cluster up to backoffLimit, then Failed; llama-factory
-- and ms-swift run to Completed with log lines.
local t = require "hypd.tap"
local TH = dofile("tests/lua/training_helpers.lua")
local call = TH.start()
local FH = TH.FH
local dispatch = require "hypd.tool.dispatch"
local json, op = require "hypd.json", require "hypd.tool.operations"
local ADMIN = { name = "ray-tester", scope = "admin", front = "test" }
local EKS, HP = "ray-a", "ray-a-hp"

local conn

local function verl(extra)
  local a = json.object()
  a.job_name, a.instance_type, a.model, a.replicas = "rl", "ml.g5.12xlarge", "models/qwen", 2
  a.train_files, a.val_files = "datasets/gsm8k/train.parquet", "datasets/gsm8k/test.parquet"
  for k, v in pairs(extra or {}) do a[k] = v end
  return a
end

local function submit(recipe, params)
  return TH.run("training_submit", { recipe = recipe, params = params, cluster = EKS }, ADMIN)
end

local function follow(name, until_fn)
  return TH.follow({ name = name, cluster = EKS, tail_lines = 200 }, ADMIN, until_fn)
end

local function pat(s) return (s:gsub("%p", "%%%0")) end

local function done(g) return g.phase == "Completed" or g.phase == "Failed" end

local function all_logs(g, role)
  local out = {}
  for _, p in ipairs(g.pods or {}) do
    if not role or p.role == role then
      for _, l in ipairs(p.logs or {}) do out[#out + 1] = l end
    end
  end
  return table.concat(out, "\n")
end

t.test("a cluster: EKS, HyperPod nodes, and KubeRay from cluster_configure_dependencies kuberay=true", function()
  conn = TH.cluster(call, EKS, HP, 83)
  -- the ray.io CRDs alone (no operator): submit refuses, naming the call that installs KubeRay
  local resources = require "sandbox.k8s.resources"
  for _, row in ipairs(resources.CRDS) do
    if row[1] == "ray.io" then assert(conn:create(resources.crd(row))) end
  end
  local _, err = submit("verl", verl())
  t.eq(err and err.code, "CONFLICT")
  t.like(err and err.message, "a RayJob needs KubeRay .* not running %(the ray%.io CRDs are there but no KubeRay " ..
    "operator Deployment is available%).*cluster_configure_dependencies kuberay=true")
  for _, row in ipairs(resources.CRDS) do
    if row[1] == "ray.io" then
      conn:delete("apiextensions.k8s.io/v1", "CustomResourceDefinition", row[3] .. ".ray.io")
    end
  end
  local acc = assert(dispatch.call("cluster_configure_dependencies", { cluster = EKS, kuberay = true }, ADMIN))
  local v = op.wait(acc.operation_id)
  t.eq(v.status, "succeeded", v.error and v.error.message)
  t.ok(conn:get("apiextensions.k8s.io/v1", "CustomResourceDefinition", "rayjobs.ray.io"), "the RayJob CRD")
  FH.wait(function()
    for _, p in ipairs(conn:list("v1", "Pod", { all_namespaces = true }) or {}) do
      if p.spec.containers[1].image:find("kuberay/operator", 1, true) and (p.status or {}).phase == "Running" then
        return true
      end
    end
  end)
  t.ok(true, "the KubeRay operator runs")
end)

local rc_name
t.test("verl's RayJob runs as KubeRay runs it: a RayCluster, a submitter Job, Initializing -> Running -> Complete",
  function()
    local r, err = submit("verl", verl())
    t.ok(r, err and err.message)
    if not r then return end
    t.eq({ r.kind, r.name }, { "RayJob", "rl" })
    t.ok(r.phase == "Running" or r.phase == "Completed", "submit answers once it runs: " .. tostring(r.phase))
    local job = assert(conn:get("ray.io/v1", "RayJob", "rl", { namespace = "default" }))
    local st = job.status
    rc_name = st.rayClusterName
    t.like(rc_name, "^rl%-%w%w%w%w%w$", "the cluster is named after the job")
    t.like(st.jobId, "^rl%-%w%w%w%w%w$")
    t.eq(st.dashboardURL, "rl-head-svc.default.svc.cluster.local:8265")
    local rc = assert(conn:get("ray.io/v1", "RayCluster", rc_name, { namespace = "default" }))
    t.eq(rc.metadata.ownerReferences[1].kind, "RayJob")
    t.eq({ rc.status.state, rc.status.desiredWorkerReplicas, rc.status.readyWorkerReplicas, rc.status.desiredGPU },
      { "ready", 2, 2, "8" })
    local pods = conn:list("v1", "Pod", { namespace = "default", labels = { ["ray.io/cluster"] = rc_name } })
    local types = {}
    for _, p in ipairs(pods) do
      types[#types + 1] = p.metadata.labels["ray.io/node-type"]
      if p.metadata.labels["ray.io/node-type"] == "head" then
        t.like(p.metadata.name, "^" .. pat(rc_name) .. "%-head%-%w+$")
        t.like(p.spec.containers[1].args[1], "ray start %-%-head .*%-%-block")
      else
        t.like(p.metadata.name, "^" .. pat(rc_name) .. "%-gpu%-workers%-worker%-%w+$")
        t.eq(p.spec.containers[1].resources.requests["nvidia.com/gpu"], 4)
      end
    end
    table.sort(types)
    t.eq(types, { "head", "worker", "worker" })
    local sj = assert(conn:get("batch/v1", "Job", "rl", { namespace = "default" }), "the submitter Job")
    t.eq(sj.spec.template.spec.containers[1].name, "ray-job-submitter")
    t.like(sj.spec.template.spec.containers[1].args[1], "ray job submit %-%-address http://rl%-head%-svc%.default%.svc" ..
      "%.cluster%.local:8265 %-%-no%-wait %-%-submission%-id " .. pat(st.jobId) .. " %-%- python3 %-m " ..
      "verl%.trainer%.main_ppo")
    t.ok(conn:get("v1", "Service", "rl-head-svc", { namespace = "default" }), "the job's head service")
    local g = follow("rl", done)
    t.eq(g.phase, "Completed")
    t.eq({ g.ray.job_status, g.ray.deployment_status, g.ray.succeeded, g.ray.message },
      { "SUCCEEDED", "Complete", 1, "Job finished successfully." })
    local text = all_logs(g, "submitter")
    t.like(text, "Job '" .. pat(st.jobId) .. "' submitted successfully", "the submission")
    t.like(text, "step:20 %- actor/pg_loss:[%d%.%-]+ .* perf/throughput:[%d%.]+", "the entrypoint's steps")
    t.like(text, "Job '.-' succeeded", "the end")
    t.like(all_logs(g, "head"), "Ray runtime started%.", "the head's own lines")
    -- kubectl get rayjob: KubeRay's printer columns (the CRD cluster_configure_dependencies applied)
    local tab = assert(conn:call("GET", "/apis/ray.io/v1/namespaces/default/rayjobs", { headers = {
      accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json" } }))
    local cols = {}
    for i, c in ipairs(tab.columnDefinitions or {}) do cols[i] = c.name:lower() end
    t.eq({ table.unpack(cols, 1, 4) }, { "name", "job status", "deployment status", "ray cluster name" })
    t.eq({ tab.rows[1].cells[2], tab.rows[1].cells[3] }, { "SUCCEEDED", "Complete" })
  end)

t.test("with shutdownAfterJobFinishes the RayCluster goes ttlSecondsAfterFinished after the end; logs stay", function()
  if not rc_name then return t.skip("no RayJob ran") end
  local job = assert(conn:get("ray.io/v1", "RayJob", "rl", { namespace = "default" }))
  t.eq({ job.spec.shutdownAfterJobFinishes, job.spec.ttlSecondsAfterFinished }, { true, 300 })
  t.ok(conn:get("ray.io/v1", "RayCluster", rc_name, { namespace = "default" }), "still there right after the end")
  FH.wait(function() return conn:get("ray.io/v1", "RayCluster", rc_name, { namespace = "default" }) == nil end, 600)
  t.eq(#conn:list("v1", "Pod", { namespace = "default", labels = { ["ray.io/cluster"] = rc_name } }), 0,
    "its pods are gone")
  local g = assert(dispatch.call("training_get_job", { name = "rl", cluster = EKS, tail_lines = 5 }, ADMIN))
  t.eq(g.phase, "Completed")
  t.like(all_logs(g, "submitter"), "succeeded", "the submitter's output stays")
end)

t.test("training_list_jobs lists the RayJob; training_delete_job deletes it with its submitter Job and pods", function()
  if not rc_name then return t.skip("no RayJob ran") end
  local l = assert(dispatch.call("training_list_jobs", { cluster = EKS }, ADMIN))
  local row
  for _, j in ipairs(l.jobs) do if j.name == "rl" then row = j end end
  t.eq(row and { row.kind, row.recipe, row.phase }, { "RayJob", "verl", "Completed" })
  local r, err = TH.run("training_delete_job", { name = "rl", cluster = EKS }, ADMIN)
  t.ok(r, err and err.message)
  t.eq(r and r.action, "deleted")
  t.eq(conn:get("ray.io/v1", "RayJob", "rl", { namespace = "default" }), nil)
  FH.wait(function() return conn:get("batch/v1", "Job", "rl", { namespace = "default" }) == nil end, 120)
  local left = conn:list("v1", "Pod", { namespace = "default", labels = { ["ray.io/originated-from-cr-name"] = "rl" } })
  FH.wait(function()
    left = conn:list("v1", "Pod", { namespace = "default", labels = { ["ray.io/originated-from-cr-name"] = "rl" } })
    return #left == 0
  end, 120)
  t.eq(#left, 0, "the submitter's pod went with it")
end)

t.test("a worker's node failing mid-run fails the Ray job; KubeRay retries it on a new cluster and it completes",
  function()
    local r, err = submit("verl", verl { job_name = "rl2", max_retries = 1 })
    t.ok(r, err and err.message)
    if not r then return end
    -- submit answers once the Ray job runs: fail a worker's node at once
    local g = assert(dispatch.call("training_get_job", { name = "rl2", cluster = EKS }, ADMIN))
    t.eq(g.ray.job_status, "RUNNING")
    local victim
    for _, p in ipairs(g.pods) do if p.role == "worker" then victim = p.node end end
    t.ok(victim, "a worker's node")
    if not victim then return end
    local first = g.ray.ray_cluster
    assert(require("sandbox.k8s.controllers.nodes").fail("us-west-2", HP, victim:match("^hyperpod%-(.+)$")))
    g = follow("rl2", function(x) return x.restarts > 0 or done(x) end)
    t.eq({ g.restarts, g.max_retries }, { 1, 1 }, "one retry of one")
    local reasons, msgs = {}, {}
    for _, e in ipairs(g.events) do reasons[#reasons + 1] = e.reason; msgs[#msgs + 1] = e.message end
    t.like(table.concat(reasons, ","), "Retrying")
    t.like(table.concat(msgs, "\n"), "Job failed: the Ray node in pod rl2%-%w+%-gpu%-workers%-worker%-%w+ %(node " ..
      victim:gsub("%p", "%%%0") .. "%) died")
    g = follow("rl2", done)
    t.eq({ g.phase, g.ray.succeeded, g.ray.failed }, { "Completed", 1, 1 })
    t.ok(g.ray.ray_cluster ~= first, "the retry ran on a new cluster")
  end)

t.test("a failing entrypoint is retried with a new cluster up to backoffLimit, then the RayJob is Failed", function()
  -- a RayJob made directly: an entrypoint that exits 1, one retry
  local job = { apiVersion = "ray.io/v1", kind = "RayJob",
    metadata = { name = "bad", namespace = "default", labels = { ["app.kubernetes.io/managed-by"] = "hypd" } },
    spec = { entrypoint = "python -c 'import sys; sys.exit(1)'", backoffLimit = 1, shutdownAfterJobFinishes = true,
      rayClusterSpec = { headGroupSpec = { rayStartParams = json.object(), template = { spec = { containers = {
        { name = "ray-head", image = "rayproject/ray:2.46.0" } } } } } } } }
  assert(conn:create(job))
  local g = follow("bad", done)
  t.eq({ g.phase, g.ray.job_status, g.ray.deployment_status, g.ray.reason, g.ray.failed },
    { "Failed", "FAILED", "Failed", "AppFailed", 2 })
  t.eq({ g.restarts, g.max_retries }, { 1, 1 }, "one retry used of one")
  t.like(g.ray.message, "exit code 1")
  local reasons = {}
  for _, e in ipairs(g.events) do reasons[#reasons + 1] = e.reason end
  t.like(table.concat(reasons, ","), "Retrying")
end)

local function hpj_params(extra)
  local a = json.object()
  a.instance_type, a.model, a.replicas = "ml.g5.12xlarge", "models/qwen", 1
  for k, v in pairs(extra) do a[k] = v end
  return a
end

t.test("every HyperPodPyTorchJob recipe submitted runs to Completed with log lines (llama-factory, ms-swift)",
  function()
    TH.training_operator(conn)
    local cases = {
      { "llama-factory", hpj_params { job_name = "lf", dataset_dir = "datasets/alpaca", dataset = "alpaca" } },
      { "ms-swift", hpj_params { job_name = "swift", dataset = "datasets/train.jsonl" } },
    }
    for _, c in ipairs(cases) do
      local r, err = submit(c[1], c[2])
      t.ok(r, c[1] .. ": " .. tostring(err and err.message))
      if r then
        local seen, g = "", nil
        for _ = 1, 60 do
          g = assert(dispatch.call("training_get_job", { name = r.name, cluster = EKS, tail_lines = 200 }, ADMIN))
          seen = seen .. all_logs(g)
          if done(g) then break end
          require("hypd.task").sleep(5)
        end
        t.eq(g.phase, "Completed", c[1])
        t.like(seen, "Running training", c[1] .. " printed the Trainer's start")
        t.like(seen, "{'loss': [%d.]+, ", c[1] .. " printed training steps")
      end
    end
  end)


