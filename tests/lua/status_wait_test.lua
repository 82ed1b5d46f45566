-- Status tools say what is happening, checked on every tool the registry
-- has (in-process sandbox, virtual clock):
--   * while cluster_create runs, cluster_get_creation_status cluster_tag=
--     reports cluster_create (running, its running stage under it), never
--     a finished stage; with wait_seconds it answers at the first change;
--   * for every staged tool whose status tool is a read tool: while an
--     operation of it runs on a target, its status tool asked about that
--     target reports that operation (running), and with wait_seconds
--     answers at the operation's next phase ("changed");
--   * for every tool with wait_seconds: on a settled target the answer comes
--     at once (simulated time) with waited.ended = "settled"; on a target in
--     a passing state it comes at the first change ("changed"), before the
--     timeout.
local t = require "hypd.tap"
local json = require "hypd.json"
local op = require "hypd.tool.operations"
local task = require "hypd.task"
local dispatch = require "hypd.tool.dispatch"
local tool = require "hypd.tool.registry"
local H = dofile("tests/lua/helpers.lua")
require("hypd.tool.loader").load()

H.sandbox_here() -- it keeps its server for the life of the process
local E = dofile("tests/lua/eks_helpers.lua")
local ADMIN = { name = "status-tester", scope = "admin", front = "test" }
local TAG, EKS = "stw", "hypd-stw"

local function call(name, args, who)
  local r, err = dispatch.call(name, args, who or ADMIN)
  return r, err
end

-- timed(name, args) -> answer, err, simulated seconds the call took
local function timed(name, args)
  local t0 = task.now()
  local r, err = call(name, args, E.READ)
  return r, err, task.now() - t0
end

local created
t.test("while cluster_create runs, cluster_get_creation_status reports it (not a finished stage), and " ..
  "wait_seconds answers at the first change", function()
  local acc = assert(call("cluster_create", { cluster_tag = TAG, instance_type = "ml.g5.12xlarge", instance_count = 1,
    availability_zone = "us-west-2a", features = { training_operator = true } }))
  created = acc.operation_id
  local polls, changed, wrong = 0, 0, {}
  while op.get(created).status == "running" and polls < 200 do
    polls = polls + 1
    local s, err, took = timed("cluster_get_creation_status", { cluster_tag = TAG, wait_seconds = 300 })
    if not s then
      wrong[#wrong + 1] = "error " .. tostring(err and err.message)
    else
      local still = op.get(created).status == "running"
      if s.operation_id ~= created and still then wrong[#wrong + 1] = "reported " .. tostring(s.tool) end
      if s.status == "succeeded" and still then wrong[#wrong + 1] = "said succeeded while it runs" end
      if (s.waited or {}).ended == "changed" then
        changed = changed + 1
        -- (a change first seen by the read at the deadline is answered as
        -- one: that read takes its time; later than a read's length past
        -- the deadline is a wait that overran)
        if took > 310 then wrong[#wrong + 1] = "a change answered after the timeout (" .. took .. " s)" end
      end
      if still and s.status == "running" and not s.running_child and s.phase ~= "check" and s.phase ~= "active" and
          s.phase ~= "result" and s.phase ~= "queued" then
        wrong[#wrong + 1] = "no running child shown in phase " .. tostring(s.phase)
      end
    end
  end
  t.eq(wrong, {}, polls .. " polls")
  t.ok(changed >= 3, "answers came at changes: " .. changed .. " of " .. polls)
  t.eq(op.get(created).status, "succeeded", "the create succeeded")
end)

local function ok_answer(name, args)
  local r, err, took = timed(name, args)
  t.ok(r, name .. ": " .. json.encode(err))
  return r or {}, took
end

-- What each staged tool's operation needs, to be started (blocked in its
-- first step: a real record and task, for the tool's own target) and what
-- its status tool is asked about that target. A staged tool the registry has
-- that is missing here fails the test.
local NAME = "stw-x"
local STARTS = {
  cluster_create = { { cluster_tag = "stw-new", instance_type = "ml.g5.12xlarge", instance_count = 1,
    availability_zone = "us-west-2a" }, { cluster_tag = "stw-new" } },
  cluster_create_eks = { { cluster_tag = "stw-eks" }, { cluster_tag = "stw-eks" } },
  cluster_configure_dependencies = { {}, {} },
  cluster_scale_node_group = { { node_group = "ng1", desired_size = 1 }, { node_group = "ng1" } },
  cluster_delete_node_group = { { node_group = "ng1" }, { node_group = "ng1" } },
  hyperpod_create = { { instance_type = "ml.g5.12xlarge", instance_count = 1, availability_zone = "us-west-2a" }, {} },
  hyperpod_add_instance_group = { { instance_group = "cpu", instance_type = "ml.m5.2xlarge", instance_count = 1,
    availability_zone = "us-west-2a" }, {} },
  hyperpod_scale_instance_group = { { instance_group = TAG .. "-ig", instance_count = 2 }, {} },
  hyperpod_delete_instance_group = { { instance_group = TAG .. "-ig" }, {} },
  hyperpod_update_software = { {}, {} },
  hyperpod_update_advanced_features = { { inference_operator = true }, {} },
  hyperpod_disable_advanced_features = { { features = { "training_operator" } }, {} },
  inference_deploy_container = { { name = NAME, engine = "vllm", instance_type = "ml.g5.12xlarge", gpus = 1 },
    { name = NAME } },
  inference_deploy_managed = { { name = NAME, instance_type = "ml.g5.12xlarge", model_source = "s3", gpus = 1,
    image = "public.ecr.aws/deep-learning-containers/vllm:latest", s3_bucket = "stw-models", model_location = "m" },
    { name = NAME } },
  inference_deploy_jumpstart = { { name = NAME, model_id = "m", instance_type = "ml.g5.12xlarge" }, { name = NAME } },
  inference_deploy_router = { { name = NAME, workers = { "a", "b" } }, { name = NAME } },
  inference_scale = { { name = NAME, replicas = 2 }, { name = NAME } },
  inference_set_autoscaling = { { name = NAME, min_replicas = 1, max_replicas = 2 }, { name = NAME } },
  inference_assign_pool_pod = { { pool = NAME, model = "m", count = 1 }, { name = NAME } },
  inference_release_pool_pod = { { pool = NAME, model = "m", count = 1 }, { name = NAME } },
  model_download = { { model_id = "Qwen/Qwen2.5-0.5B-Instruct", name = NAME }, { name = NAME } },
  storage_create_s3 = { { claim_name = "stw-claim" }, {} },
  storage_create_fsx = { { claim_name = "stw-fsx", availability_zone = "us-west-2a" }, {} },
  storage_delete = { { claim_name = "stw-claim" }, {} },
  training_setup_mlflow = { {}, {} },
  inference_delete = { { name = NAME }, {} },
  job_delete = { { name = NAME }, {} },
  training_delete_job = { { name = NAME }, {} },
  training_submit = { { recipe = "pytorch-torchrun", params = { job_name = NAME, instance_type = "ml.g5.12xlarge",
    script = "scripts/train.py", replicas = 1 } }, { name = NAME } },
}

-- the operation the answer of a status tool reports as running (the answer
-- itself when it is an operation's view)
local function reported(r)
  local out = {}
  local function add(v)
    if type(v) == "table" and v.operation_id then out[v.operation_id] = v.status or "running" end
  end
  add(r)
  for _, k in ipairs { "operation", "at_work" } do
    add(r[k])
    if type(r[k]) == "table" then add(r[k].top) end
  end
  for _, o in ipairs(r.operations or {}) do add(o) end
  return out
end

t.test("for every staged tool with a read status tool: while its operation runs on a target, the status tool " ..
  "reports that operation", function()
  if not created then return t.skip("no cluster") end
  local checked, expected, waits = 0, 0, 0
  for _, def in ipairs(tool.list()) do
    local st = def.steps and def.status_tool and tool.get(def.status_tool)
    if st and st.kind == "read" and st.name ~= "operation_get" then
      expected = expected + 1
      local case = STARTS[def.name]
      t.ok(case, def.name .. ": the test knows how to start it and ask " .. st.name)
      if case then
        -- the field rules only: its validate's reads ask about things this test does not make
        local params, perr = tool.validate(setmetatable({ validate = false }, { __index = def }), case[1])
        t.ok(params, def.name .. ": valid parameters: " .. json.encode(perr))
        if params then
          -- the tool's own definition and target, with one step that moves
          -- to a new phase every 20 s (simulated) and never ends
          local blocked = setmetatable({ steps = { { name = "work", run = function(ctx)
            for i = 1, 1e6 do
              ctx:phase("working on it, part " .. i)
              task.sleep(20)
            end
          end } } }, { __index = def })
          local acc, err = op.start(blocked, params, { name = "status-tester", front = "test" })
          t.ok(acc, def.name .. ": started: " .. json.encode(err))
          if acc then
            local r, rerr = call(st.name, case[2], E.READ)
            t.ok(r, st.name .. " while " .. def.name .. " runs: " .. json.encode(rerr))
            local seen = reported(r or {})
            t.eq(seen[acc.operation_id], "running", st.name .. " reports the running " .. def.name .. " " ..
              acc.operation_id .. ": " .. json.encode(seen))
            if st.params.wait_seconds then
              -- at work: not settled; the next phase is the first change
              local args = {}
              for k, v in pairs(case[2]) do args[k] = v end
              args.wait_seconds = 300
              local w, werr, took = timed(st.name, args)
              t.ok(w, st.name .. " wait_seconds: " .. json.encode(werr))
              t.eq((w and w.waited or {}).ended, "changed", st.name .. " while " .. def.name .. " runs: " ..
                json.encode(w and w.waited))
              t.ok(took < 60, st.name .. ": at the change (" .. took .. " s), not at the timeout")
              waits = waits + 1
            end
            op.cancel(acc.operation_id, { name = "status-tester" })
            checked = checked + 1
          end
        end
      end
    end
  end
  t.eq(checked, expected, "every staged tool with a read status tool was checked")
  t.ok(expected >= 25, "the registry's staged tools: " .. expected)
  t.ok(waits >= 20, "status tools with wait_seconds answered at the change: " .. waits)
end)

-- settled cases: a tool with wait_seconds, the arguments that name a thing
-- that is settled once the setup below ran
local SETTLED = {
  operation_get = function() return { operation_id = created } end,
  operation_list_events = function()
    local r = call("operation_list_events", { operation_id = created, limit = 1000 }, E.READ)
    return { operation_id = created, after = r and r.next or 0 }
  end,
  cluster_get_creation_status = function() return { cluster_tag = TAG } end,
  cluster_get_status = function() return {} end,
  cluster_get_dependency_status = function() return {} end,
  cluster_get_node_group_status = function() return { node_group = "ng1" } end,
  hyperpod_get_creation_status = function() return {} end,
  hyperpod_get_advanced_features = function() return {} end,
  hyperpod_list_instance_groups = function() return {} end,
  hyperpod_list_nodes = function() return {} end,
  monitor_get_cluster = function() return {} end,
  storage_list = function() return {} end,
  inference_get = function() return { name = "stw-web" } end,
  training_get_job = function() return { name = "stw-job" } end,
  training_get_mlflow = function() return {} end,
  job_get_status = function() return { name = "stw-batch" } end,
}

t.test("setup: a node group, an inference deployment, a training job, a batch Job and an MLflow server, each " ..
  "followed to its end", function()
  if not created then return t.skip("no cluster") end
  local c = E.call("eks", "DescribeCluster", { name = EKS }).cluster
  local role = E.call("iam", "CreateRole", { RoleName = "stw-node", AssumeRolePolicyDocument = json.encode {
    Version = "2012-10-17", Statement = { { Effect = "Allow", Principal = { Service = "ec2.amazonaws.com" },
      Action = "sts:AssumeRole" } } } }).Role.Arn
  E.call("eks", "CreateNodegroup", { clusterName = EKS, nodegroupName = "ng1", nodeRole = role,
    subnets = c.resourcesVpcConfig.subnetIds, instanceTypes = { "m5.large" },
    scalingConfig = { minSize = 1, maxSize = 2, desiredSize = 1 } })
  for _, s in ipairs {
    { "inference_deploy_container", { name = "stw-web", engine = "vllm", instance_type = "ml.g5.12xlarge", gpus = 1 } },
    { "training_submit", { recipe = "pytorch-torchrun", params = { job_name = "stw-job",
      instance_type = "ml.g5.12xlarge", script = "scripts/train.py", replicas = 1, gpus_per_node = 1 } } },
    { "training_setup_mlflow", {} },
  } do
    local acc, err = call(s[1], s[2])
    t.ok(acc, s[1] .. ": " .. json.encode(err))
    if acc then
      local v = op.wait(acc.operation_id, 4 * 3600)
      t.eq(v.status, "succeeded", s[1] .. ": " .. json.encode(v.error))
    end
  end
  -- a plain batch Job (job_get_status reads any)
  local k = require("hypd.k8s").connect { cluster = EKS, region = "us-west-2" }
  assert(k:apply { apiVersion = "batch/v1", kind = "Job", metadata = { name = "stw-batch", namespace = "default" },
    spec = { template = { spec = { restartPolicy = "Never", containers = { { name = "c", image = "busybox",
      command = { "true" } } } } } } })
  -- everything reaches its end state (simulated time)
  for _ = 1, 120 do
    local g = E.call("eks", "DescribeNodegroup", { clusterName = EKS, nodegroupName = "ng1" }).nodegroup
    local j = call("training_get_job", { name = "stw-job" }, E.READ) or {}
    local b = call("job_get_status", { name = "stw-batch" }, E.READ) or {}
    local i = call("inference_get", { name = "stw-web" }, E.READ) or {}
    if g.status == "ACTIVE" and (j.phase == "Completed" or j.phase == "Failed") and
        (b.phase == "Succeeded" or b.phase == "Failed") and i.replicas and i.replicas.ready == i.replicas.desired then
      break
    end
    task.sleep(30)
  end
  task.sleep(120) -- the node group's nodes join
end)

t.test("every tool with wait_seconds answers at once, saying settled, about a settled target", function()
  if not created then return t.skip("no cluster") end
  for _, def in ipairs(tool.list()) do
    if def.params.wait_seconds then
      local case = SETTLED[def.name]
      t.ok(case, def.name .. " has wait_seconds: the test names a settled target for it")
      if case then
        local args = case()
        args.wait_seconds = 300
        local r, took = ok_answer(def.name, args)
        t.eq((r.waited or {}).ended, "settled", def.name .. ": waited says settled: " .. json.encode(r.waited) ..
          " " .. json.encode(r.operation or r.status) .. " " .. tostring(r.phase))
        t.ok(took < 60, def.name .. ": answered within a minute of simulated time (" .. took .. " s), not after 300")
      end
    end
  end
end)

t.test("on a target in a passing state, wait_seconds answers at the first change", function()
  if not created then return t.skip("no cluster") end
  -- a new deployment: its pods go Pending -> Running -> Ready
  local acc = assert(call("inference_deploy_container", { name = "stw-web2", engine = "vllm",
    instance_type = "ml.g5.12xlarge", gpus = 1 }))
  local r, took = ok_answer("inference_get", { name = "stw-web2", wait_seconds = 300 })
  t.eq((r.waited or {}).ended, "changed", "inference_get: changed: " .. json.encode(r.waited))
  t.ok(took < 300, "before the timeout: " .. took)
  local g, gtook = ok_answer("operation_get", { operation_id = acc.operation_id, wait_seconds = 300 })
  t.ok(({ changed = true, settled = true })[(g.waited or {}).ended], "operation_get: " .. json.encode(g.waited))
  t.ok(gtook < 300, "before the timeout: " .. gtook)
  op.wait(acc.operation_id, 3600)
  -- a scale of the node group: ACTIVE -> UPDATING -> ACTIVE
  local s = assert(call("cluster_scale_node_group", { node_group = "ng1", desired_size = 2 }))
  local n, ntook = ok_answer("cluster_get_node_group_status", { node_group = "ng1", wait_seconds = 300 })
  t.eq((n.waited or {}).ended, "changed", "cluster_get_node_group_status: " .. json.encode(n.waited))
  t.ok(ntook < 300, "before the timeout: " .. ntook)
  op.wait(s.operation_id, 3600)
  -- a tracking server being deleted outside hypd: Deleting, then gone
  E.call("sagemaker", "DeleteMlflowTrackingServer", { TrackingServerName = "hypd-" .. TAG .. "-mlflow" })
  -- each answer: at the change (the status differs from the last answer's),
  -- or at the timeout with the status unchanged; the last one at its end
  local last, ends = (call("training_get_mlflow", {}, E.READ) or {}).status, {}
  for _ = 1, 20 do
    local m, mtook = ok_answer("training_get_mlflow", { wait_seconds = 300 })
    local ended = (m.waited or {}).ended
    ends[#ends + 1] = tostring(ended) .. ":" .. tostring(m.status)
    if ended == "timeout" then
      t.eq({ m.status, mtook >= 300 }, { last, true }, "a timeout only when nothing changed: " .. json.encode(ends))
    elseif ended == "changed" then
      t.ok(m.status ~= last and mtook <= 300, "a change is answered when seen: " .. json.encode(ends) .. " from " ..
        tostring(last) .. " in " .. mtook .. " s")
    else
      t.eq(ended, "settled", json.encode(ends))
      break
    end
    last = m.status
    if last == "Deleted" then break end
  end
  t.eq(ends[#ends], "changed:Deleted", "the wait ends at the deletion: " .. json.encode(ends))
end)
