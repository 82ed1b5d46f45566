-- Plans are true (issue 19): for every staged tool, a plan and then the
-- run, and what the plan said it would create, change and delete is what
-- the sandbox's audit logs recorded (plan_diff_helpers.lua maps both to
-- "action type key" rows): on a fresh account, on a half-built one (an
-- operation stopped mid-stage, as a host that stops), and on a finished
-- one (the plan and the run both: nothing). Every plan lists each
-- resource once, with one action, and a kept resource with its reason.
-- The tools run in an order that makes each one's state (a later tool
-- needs what an earlier made): the registry's staged tools that no step
-- covers are a failure, so a new staged tool needs its step here.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
local srv = H.sandbox_here()
require("hypd.tool.loader").load()
local E = dofile("tests/lua/eks_helpers.lua")
local D = dofile("tests/lua/plan_diff_helpers.lua")
local dispatch = require "hypd.tool.dispatch"
local json, op, tool = require "hypd.json", require "hypd.tool.operations", require "hypd.tool.registry"
local WHO = { name = "tester", scope = "admin", front = "test" }

local covered = {}

-- differential(name, params [, o]) -> the run's view: plan, check the
-- plan's shape, run, compare; o.again (default true): the tool's second
-- plan and run are nothing (not for a tool whose every call acts: a
-- delete, a download, an assignment)
local function differential(name, params, o)
  o = o or {}
  covered[name] = true
  local function with(extra)
    local p = {}
    for k, v in pairs(params) do p[k] = v end
    for k, v in pairs(extra or {}) do p[k] = v end
    return p
  end
  local names = D.names()
  local p, err = dispatch.call(name, with { plan = true }, WHO)
  t.ok(p, name .. " plans: " .. json.encode(err))
  if not p then return end
  t.eq(D.once(p), {}, name .. "'s plan lists each resource once, with one action and its reasons")
  local m = D.mark()
  local acc, aerr = dispatch.call(name, params, WHO)
  t.ok(acc and acc.operation_id, name .. " runs: " .. json.encode(aerr))
  if not acc then return end
  local v = op.wait(acc.operation_id)
  t.eq(v.status, "succeeded", name .. ": " .. json.encode(v.error))
  D.names(names)
  local done, unmapped = D.done(m, names)
  t.eq(unmapped, {}, name .. ": every mutation the sandbox recorded is one the harness maps")
  local planned = D.planned(p, names)
  local diff = D.compare(planned, done)
  t.eq({ planned_not_done = diff.planned_not_done, done_not_planned = diff.done_not_planned },
    { planned_not_done = {}, done_not_planned = {} }, name .. ": the plan is what the run did")
  if o.again ~= false then
    local p2 = assert(dispatch.call(name, with { plan = true }, WHO))
    t.eq(D.planned(p2), {}, name .. " again: the plan is empty")
    local m2 = D.mark()
    local v2 = op.wait(assert(dispatch.call(name, params, WHO)).operation_id)
    t.eq(v2.status, "succeeded", name .. " again: " .. json.encode(v2.error))
    t.eq(D.minus(D.done(m2, names), {}), {}, name .. " again: nothing done")
  end
  return v
end

local HP = { instance_type = "ml.g5.12xlarge", instance_count = 2, availability_zone = "us-west-2a" }
local function create_params(tag)
  return { cluster_tag = tag, instance_type = HP.instance_type, instance_count = HP.instance_count,
    availability_zone = HP.availability_zone }
end

t.test("fresh account: cluster_create_eks, then again (finished: nothing)", function()
  differential("cluster_create_eks", { cluster_tag = "alfa" })
end)

t.test("fresh account: cluster_create, every stage, then again (finished: nothing)", function()
  differential("cluster_create", create_params("bravo"))
end)

t.test("the sandbox records each Kubernetes write a client sends, not a dry run or a read",
  function()
    local conn = require("hypd.k8s").connect { cluster = "hypd-bravo" }
    local cm = { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "plans-audit", namespace = "default" },
      data = { a = "1" } }
    local function writes(m)
      local out = {}
      for _, e in ipairs(require("hypd.store").events(m, 1000000) or {}) do
        if e.kind == "sandbox.k8s.audit" then
          out[#out + 1] = e.data.verb .. " " .. e.data.resource .. " " .. tostring(e.data.namespace) .. "/" ..
            tostring(e.data.name)
        end
      end
      return out
    end
    local m = D.mark()
    assert(conn:apply(cm, { dry_run = true }))
    conn:get("v1", "ConfigMap", "plans-audit", { namespace = "default" })
    t.eq(writes(m), {}, "a dry run and a get write nothing")
    assert(conn:apply(cm))
    assert(conn:delete("v1", "ConfigMap", "plans-audit", { namespace = "default" }))
    t.eq(writes(m), { "patch configmaps default/plans-audit", "delete configmaps default/plans-audit" })
  end)

t.test("half-built account: cluster_create stopped as HyperPod's stage began, planned, resumed", function()
  E.stop_at("creating HyperPod cluster hypd-charlie-hp", "")
  local acc = assert(dispatch.call("cluster_create", create_params("charlie"), WHO))
  local v = op.wait(acc.operation_id)
  t.eq(v.status, "running", "stopped midway: " .. json.encode(v.error))
  local names = D.names()
  local p = assert(dispatch.call("cluster_create", { cluster_tag = "charlie", instance_type = HP.instance_type,
    instance_count = HP.instance_count, availability_zone = HP.availability_zone, plan = true }, WHO))
  t.eq(D.once(p), {}, "the plan of the rest lists each resource once")
  local rows = table.concat(E.rows(p), "\n")
  t.ok(rows:find("create sagemaker:cluster hypd-charlie-hp", 1, true), "the rest: HyperPod's cluster\n" .. rows)
  t.ok(not rows:find("create ec2:vpc ", 1, true) and not rows:find("create eks:cluster ", 1, true),
    "not what was made before the stop\n" .. rows)
  local m = D.mark()
  t.ok(op.resume() >= 1, "the stopped operations resume")
  t.eq(op.wait(acc.operation_id).status, "succeeded")
  D.names(names)
  local done, unmapped = D.done(m, names)
  t.eq(unmapped, {})
  local planned = D.planned(p, names)
  t.eq(D.compare(planned, done), { planned_not_done = {}, done_not_planned = {} },
    "the plan of the rest is what the resumed run did")
end)

t.test("half-built by a fault: cluster_create stopped by no capacity, planned, run again once capacity is back",
  function()
    local faults = require "sandbox.faults"
    assert(faults.configure { insufficient_capacity = { { instance_type = HP.instance_type, zone = "usw2-az2" } } })
    local v = op.wait(assert(dispatch.call("cluster_create", create_params("echo"), WHO)).operation_id)
    faults.configure {}
    t.eq({ v.status, v.error and v.error.code }, { "failed", "INSUFFICIENT_CAPACITY" }, json.encode(v.error))
    local with = create_params("echo")
    with.plan = true
    local names = D.names()
    local p = assert(dispatch.call("cluster_create", with, WHO))
    t.eq(D.once(p), {})
    local rows = table.concat(E.rows(p), "\n")
    t.ok(not rows:find("create ec2:vpc ", 1, true) and not rows:find("create eks:cluster ", 1, true),
      "what the failed run made is not planned again\n" .. rows)
    local m = D.mark()
    t.eq(op.wait(assert(dispatch.call("cluster_create", create_params("echo"), WHO)).operation_id).status, "succeeded")
    D.names(names)
    local done, unmapped = D.done(m, names)
    t.eq(unmapped, {})
    t.eq(D.compare(D.planned(p, names), done), { planned_not_done = {}, done_not_planned = {} },
      "the plan of the rest is what the second run did")
  end)

t.test("fresh account with features: the plan's later stage is planned once it can be, and the two plans are the run",
  function()
    local params = create_params("delta")
    params.features = { training_operator = true }
    local with = {}
    for k, v in pairs(params) do with[k] = v end
    with.plan = true
    local names = D.names()
    local p = assert(dispatch.call("cluster_create", with, WHO))
    t.eq(D.once(p), {})
    local later = {}
    for _, e in ipairs(p.plan) do
      if e.action == "later" then later[#later + 1] = e.name .. ": " .. tostring(e.why) end
    end
    t.eq(#later, 1, "one stage planned later: " .. json.encode(later))
    t.like(later[1] or "", "^hyperpod_update_advanced_features: .*plans once the HyperPod cluster is ready")
    -- the run, stopped as its features stage begins: that stage can be planned now
    E.stop_at("features", "")
    local m = D.mark()
    local acc = assert(dispatch.call("cluster_create", params, WHO))
    t.eq(op.wait(acc.operation_id).status, "running", "stopped before the features")
    local rest = assert(dispatch.call("hyperpod_update_advanced_features", { cluster = "hypd-delta",
      training_operator = true, plan = true }, WHO))
    t.eq(D.once(rest), {})
    t.ok(rest.create > 0, "the later stage has its plan now")
    t.ok(op.resume() >= 1)
    t.eq(op.wait(acc.operation_id).status, "succeeded")
    D.names(names)
    local both = json.array()
    for _, x in ipairs { p.plan, rest.plan } do
      for _, e in ipairs(x) do both[#both + 1] = e end
    end
    local planned = D.planned({ plan = both }, names) -- the later stage's change of what the first creates is its create
    local done, unmapped = D.done(m, names)
    t.eq(unmapped, {})
    t.eq(D.compare(planned, done), { planned_not_done = {}, done_not_planned = {} },
      "the plan, with its later stage's plan, is what the run did")
  end)

-- the tools below act on the active cluster: charlie's, made whole above
t.test("stages on a finished cluster: each plans nothing and does nothing", function()
  assert(dispatch.call("cluster_switch", { cluster = "hypd-charlie" }, WHO))
  differential("cluster_create_eks", { cluster_tag = "charlie" })
  differential("cluster_configure_dependencies", {})
  differential("hyperpod_create", { instance_type = HP.instance_type, instance_count = HP.instance_count,
    availability_zone = HP.availability_zone })
  differential("storage_create_s3", {})
end)

t.test("storage_create_fsx", function() differential("storage_create_fsx", {}) end)
t.test("hyperpod_add_instance_group", function()
  differential("hyperpod_add_instance_group", { instance_group = "cpu", instance_type = "ml.m5.2xlarge",
    instance_count = 1, availability_zone = "us-west-2a" })
end)
t.test("hyperpod_scale_instance_group", function()
  differential("hyperpod_scale_instance_group", { instance_group = "cpu", instance_count = 2 })
end)
t.test("hyperpod_update_advanced_features", function()
  differential("hyperpod_update_advanced_features", { training_operator = true })
end)
t.test("training_submit (the training operator is on, the GPU group there)", function()
  local a = json.object()
  a.job_name, a.instance_type, a.script, a.replicas = "demo", "ml.g5.12xlarge", "scripts/train.py", 2
  differential("training_submit", { recipe = "pytorch-torchrun", params = a })
end)
t.test("training_delete_job", function()
  differential("training_delete_job", { name = "demo" }, { again = false })
end)
t.test("training_setup_mlflow", function() differential("training_setup_mlflow", {}) end)
t.test("inference_deploy_container", function()
  differential("inference_deploy_container", { name = "web", engine = "custom", image = "ghcr.io/acme/server:1",
    port = 8080, gpus = 0, instance_type = "ml.m5.2xlarge" })
end)
t.test("inference_scale", function() differential("inference_scale", { name = "web", replicas = 2 }) end)
t.test("inference_set_autoscaling", function()
  differential("inference_set_autoscaling", { name = "web", max_replicas = 3,
    query = "sum(rate(http_requests_total{service=\"web\"}[1m]))", threshold = 10 })
end)
local SGLANG = { "python3", "-m", "sglang.launch_server", "--model-path", "/s3/models/qwen", "--host", "0.0.0.0" }
t.test("a pool of warm workers: inference_assign_pool_pod, inference_release_pool_pod", function()
  differential("inference_deploy_container", { name = "warm", engine = "sglang", command = SGLANG,
    instance_type = "ml.g5.12xlarge", gpus = 1, replicas = 2, service = "pool" })
  differential("inference_assign_pool_pod", { pool = "warm", model = "qwen", count = 1 }, { again = false })
  differential("inference_release_pool_pod", { pool = "warm", model = "qwen", count = 1 }, { again = false })
  differential("inference_delete", { name = "warm", force = true }, { again = false })
end)
t.test("inference_deploy_router over two SGLang deployments", function()
  for _, n in ipairs { "sgl-a", "sgl-b" } do
    differential("inference_deploy_container", { name = n, engine = "sglang", command = SGLANG,
      instance_type = "ml.g5.12xlarge", gpus = 1, replicas = 1 })
  end
  differential("inference_deploy_router", { workers = { "sgl-a", "sgl-b" } })
  -- gone again: their GPUs are the JumpStart model's below, and the S3 claim
  -- they mount would stand in cluster_delete's way
  for _, n in ipairs { "sglang-router", "sgl-a", "sgl-b" } do
    differential("inference_delete", { name = n }, { again = false })
  end
end)
t.test("the inference operator: inference_deploy_managed, inference_deploy_jumpstart", function()
  differential("hyperpod_update_advanced_features", { inference_operator = true })
  differential("inference_deploy_jumpstart", { name = "llama", model_id = "meta-textgeneration-llama-3-2-1b-instruct",
    instance_type = "ml.g5.12xlarge", accept_eula = true })
  differential("inference_deploy_managed", { name = "qwen", model_source = "s3",
    s3_bucket = "hypd-charlie-data-123456789012-us-west-2", model_location = "models/qwen2-5-7b",
    instance_type = "ml.g5.12xlarge", replicas = 1, image = "vllm/vllm-openai:v0.8.5",
    args = { "--model", "/opt/ml/model", "--port", "8000", "--served-model-name", "qwen" }, port = 8000, gpus = 1 })
  for _, n in ipairs { "llama", "qwen" } do differential("inference_delete", { name = n }, { again = false }) end
end)
t.test("inference_delete", function() differential("inference_delete", { name = "web" }, { again = false }) end)

t.test("model_download (a CPU group and the S3 storage are there)", function()
  differential("model_download", { model_id = "Qwen/Qwen2.5-0.5B-Instruct" }, { again = false })
end)
t.test("job_delete", function()
  local jobs = assert(dispatch.call("job_list", {}, WHO))
  local name = ((jobs.jobs or jobs.items or {})[1] or {}).name
  t.ok(name, "the download's job: " .. json.encode(jobs))
  if name then differential("job_delete", { name = name }, { again = false }) end
end)
-- an EKS managed node group: no hypd tool makes one, so the test does, as a person would
t.test("cluster_scale_node_group and cluster_delete_node_group", function()
  local call = function(svc, o, i) return require("hypd.aws").call(svc, o, i, { region = "us-west-2" }) end
  local c = call("eks", "DescribeCluster", { name = "hypd-charlie" }).cluster
  local trust = json.encode { Version = "2012-10-17", Statement = { { Effect = "Allow",
    Principal = { Service = "ec2.amazonaws.com" }, Action = "sts:AssumeRole" } } }
  local role = call("iam", "CreateRole", { RoleName = "plans-node", AssumeRolePolicyDocument = trust }).Role.Arn
  call("eks", "CreateNodegroup", { clusterName = "hypd-charlie", nodegroupName = "system", nodeRole = role,
    subnets = c.resourcesVpcConfig.subnetIds, instanceTypes = { "m5.large" },
    scalingConfig = { minSize = 1, maxSize = 3, desiredSize = 1 } })
  differential("cluster_scale_node_group", { node_group = "system", desired_size = 2 })
  differential("cluster_delete_node_group", { node_group = "system" }, { again = false })
end)
t.test("hyperpod_update_software", function()
  differential("hyperpod_update_software", { instance_groups = { "cpu" } }, { again = false })
end)
t.test("hyperpod_disable_advanced_features", function()
  differential("hyperpod_disable_advanced_features", { features = { "training_operator" } })
end)
t.test("storage_delete (the FSx claim, its file system too)", function()
  differential("storage_delete", { claim_name = "fsx-claim", delete_file_system = true }, { again = false })
end)
t.test("hyperpod_delete_instance_group", function()
  differential("hyperpod_delete_instance_group", { instance_group = "cpu" }, { again = false })
end)
t.test("hyperpod_delete", function() differential("hyperpod_delete", {}, { again = false }) end)
t.test("cluster_delete of an EKS-only cluster", function()
  differential("cluster_delete", { cluster_tag = "alfa" }, { again = false })
end)
t.test("cluster_delete of the cluster the tools above used",
  function()
    differential("cluster_delete", { cluster_tag = "charlie" }, { again = false })
  end)

t.test("every staged tool of the registry had its differential above", function()
  local missing = {}
  for _, d in ipairs(tool.list()) do
    if d.steps and not covered[d.name] then missing[#missing + 1] = d.name end
  end
  t.eq(missing, {}, "staged tools without a differential step")
  t.ok(#tool.list() > 0 and next(covered) ~= nil, "the registry is loaded and steps ran")
end)

t.test("every staged tool's published answer schema has a plan entry's reason (why)", function()
  local without = {}
  for _, d in ipairs(tool.list()) do
    if d.steps then
      local plan
      for _, s in ipairs(tool.output_schema(d).anyOf or {}) do plan = plan or (s.properties or {}).plan end
      if not (plan and plan.items.properties.why) then without[#without + 1] = d.name end
    end
  end
  t.eq(without, {}, "staged tools whose schema drops why")
end)

t.cleanup(function()
  E.restore_all()
  require("hypd.core").virtual(false)
  srv:stop()
end)
