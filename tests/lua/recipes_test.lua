-- Training recipes (hypd.recipes, recipes/*.lua): training_list_recipes
-- lists the four built-in ones with their parameter schemas;
-- training_render gives each one's objects (HyperPodPyTorchJob or RayJob)
-- on the one data contract (s3-claim at /s3), with GPU and EFA requests from
-- the instance type, node selection by type or group and a visible recovery
-- budget; bad input is refused naming the field and the rule; a recipe in
-- the playbook directory replaces the built-in and a broken one is refused
-- with its error; and each recipe's objects pass the sandbox API server's
-- server-side dry run through hypd's Kubernetes client.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
local config = require "hypd.config"
local json = require "hypd.json"
local recipes = require("hypd.recipes").catalogue(require "hypd.playbook")
local dispatch = require "hypd.tool.dispatch"

require("hypd.tool.loader").load()

local WHO = { name = "recipes-test", scope = "read", front = "test" }
local dir = H.tmpdir()
t.cleanup(function() config.playbooks_dir = nil; os.execute("rm -rf " .. H.quote(dir)) end)

-- the smallest valid parameters of each recipe
local BASE = { job_name = "demo", instance_type = "ml.g5.12xlarge" }
local ARGS = {
  ["pytorch-torchrun"] = { script = "scripts/train.py", args = { "--epochs", "2" } },
  ["llama-factory"] = { model = "models/qwen", dataset_dir = "datasets/alpaca", dataset = "alpaca_en" },
  ["ms-swift"] = { model = "Qwen/Qwen2.5-0.5B-Instruct", dataset = "datasets/train.jsonl" },
  verl = { model = "models/qwen", train_files = "datasets/gsm8k/train.parquet",
    val_files = "datasets/gsm8k/test.parquet" },
}
local function args(name, extra)
  local a = json.object()
  for k, v in pairs(BASE) do a[k] = v end
  for k, v in pairs(ARGS[name]) do a[k] = v end
  for k, v in pairs(extra or {}) do a[k] = v end
  return a
end

local function render(name, extra) return dispatch.call("training_render", { recipe = name, params = args(name, extra) },
  WHO) end

-- pods(obj) -> the pod templates of a HyperPodPyTorchJob or RayJob
local function pods(o)
  if o.kind == "RayJob" then
    local out = { o.spec.rayClusterSpec.headGroupSpec.template }
    for _, g in ipairs(o.spec.rayClusterSpec.workerGroupSpecs) do out[#out + 1] = g.template end
    return out
  end
  local out = {}
  for _, r in ipairs(o.spec.replicaSpecs) do out[#out + 1] = r.template end
  return out
end

local field_rules = H.field_rules

t.test("training_list_recipes lists the four built-in recipes with descriptions and parameter schemas", function()
  local r = assert(dispatch.call("training_list_recipes", {}, WHO))
  local names = {}
  for i, x in ipairs(r.recipes) do
    names[i] = x.name
    t.ok(#x.description > 40, x.name .. " has a description")
    t.eq(x.source, "built-in")
    t.eq(x.params.properties.storage_claim.default, "s3-claim", x.name .. ": the data contract's claim")
    t.eq(x.params.properties.job_name["x-hypd-decision"], true, x.name .. ": job_name is a decision")
    t.ok(x.params.properties.gpus_per_node.minimum == 1, x.name .. ": gpus_per_node at least 1")
  end
  t.eq(names, { "llama-factory", "ms-swift", "pytorch-torchrun", "verl" })
  t.eq(r.recipes[3].params.required, { "instance_type", "job_name", "script" })
end)

t.test("every recipe renders its objects on the data contract: s3-claim mounted at /s3 in every pod", function()
  for name in pairs(ARGS) do
    local r, err = render(name)
    t.ok(r, name .. ": " .. tostring(err and err.message))
    if r then
      local o = r.objects[1]
      t.eq(#r.objects, 1, name)
      t.eq(o.metadata.labels["app.kubernetes.io/managed-by"], "hypd", name .. ": managed-by")
      t.eq(o.metadata.name, "demo")
      for _, pod in ipairs(pods(o)) do
        t.eq(pod.spec.volumes[1], { name = "s3", persistentVolumeClaim = { claimName = "s3-claim" } }, name)
        t.eq(pod.spec.containers[1].volumeMounts[1], { name = "s3", mountPath = "/s3" }, name)
        t.eq(pod.spec.nodeSelector, { ["node.kubernetes.io/instance-type"] = "ml.g5.12xlarge" }, name)
      end
    end
  end
end)

t.test("a HyperPodPyTorchJob has replicas, processes per node, GPU and EFA from the instance type, its budget",
  function()
    local r = assert(render("pytorch-torchrun", { replicas = 2, instance_type = "ml.p5.48xlarge", max_retries = 7 }))
    local o = r.objects[1]
    t.eq({ o.apiVersion, o.kind }, { "sagemaker.amazonaws.com/v1", "HyperPodPyTorchJob" })
    t.eq(o.spec.nprocPerNode, "8")
    t.eq(o.spec.replicaSpecs[1].replicas, 2)
    local c = o.spec.replicaSpecs[1].template.spec.containers[1]
    t.eq(c.resources.requests, { ["nvidia.com/gpu"] = 8, ["vpc.amazonaws.com/efa"] = 32 })
    t.eq(c.resources.limits, c.resources.requests)
    t.eq({ c.command[1], c.command[2], c.command[3], c.command[#c.command - 1] },
      { "hyperpodrun", "--nnodes=2", "--nproc-per-node=8", "--epochs" })
    t.eq(o.spec.runPolicy.jobMaxRetryCount, 7)
    t.eq(o.spec.runPolicy.restartPolicy, { numRestartBeforeFullJobRestart = 3, evalPeriodSeconds = 21600,
      maxFullJobRestarts = 1 })
    t.eq(r.params.storage_claim, "s3-claim", "the defaults are in the answer")
    local g = assert(render("ms-swift", { instance_group = "gpu-a", gpus_per_node = 2, efa_per_node = 0 }))
    local pod = g.objects[1].spec.replicaSpecs[1].template.spec
    t.eq(pod.nodeSelector, { ["sagemaker.amazonaws.com/instance-group-name"] = "gpu-a" }, "placed by group")
    t.eq(pod.containers[1].resources.requests, { ["nvidia.com/gpu"] = 2 }, "given GPUs, no EFA")
  end)

t.test("verl renders a ray.io/v1 RayJob: a head without GPUs and GPU workers, data and checkpoints under /s3",
  function()
    local o = assert(render("verl", { replicas = 3 })).objects[1]
    t.eq({ o.apiVersion, o.kind }, { "ray.io/v1", "RayJob" })
    local rc = o.spec.rayClusterSpec
    t.eq(rc.headGroupSpec.template.spec.containers[1].resources, nil)
    t.eq(rc.workerGroupSpecs[1].replicas, 3)
    t.eq(rc.workerGroupSpecs[1].template.spec.containers[1].resources.requests["nvidia.com/gpu"], 4)
    t.like(o.spec.entrypoint, "data%.train_files=/s3/datasets/gsm8k/train%.parquet")
    t.like(o.spec.entrypoint, "trainer%.default_local_dir=/s3/checkpoints/demo")
    t.eq(o.spec.backoffLimit, 5)
  end)

t.test("bad input is refused naming the field and the rule: unknown recipe, missing parameter, GPUs 0 or text",
  function()
    local _, err = dispatch.call("training_render", { recipe = "nope", params = {} }, WHO)
    t.eq(err and err.code, "VALIDATION")
    t.eq(field_rules(err), { "recipe:unknown" })
    t.like(err.message, "no recipe named 'nope' %(recipes: llama%-factory, ms%-swift, pytorch%-torchrun, verl%)")
    local a = args("pytorch-torchrun")
    a.script = nil
    _, err = dispatch.call("training_render", { recipe = "pytorch-torchrun", params = a }, WHO)
    t.eq(field_rules(err), { "params.script:required" })
    _, err = render("pytorch-torchrun", { gpus_per_node = 0 })
    t.eq(field_rules(err), { "params.gpus_per_node:minimum" })
    t.like(err.message, "gpus_per_node: must be at least 1; got 0")
    _, err = render("llama-factory", { gpus_per_node = "8" })
    t.eq(field_rules(err), { "params.gpus_per_node:type" })
    _, err = render("verl", { instance_type = "ml.c5.large" })
    t.eq(field_rules(err), { "params.gpus_per_node:required" }, "an instance type without known GPUs")
    _, err = render("ms-swift", { dataset = "../etc/passwd", color = "red" })
    t.eq(field_rules(err), { "params.color:unknown", "params.dataset:pattern" })
  end)

t.test("hypd call training_render prints the objects as JSON", function()
  local rc, out, err = H.run_hypd({ HYPD_STATE = dir .. "/state" }, "call", "training_render",
    "recipe=pytorch-torchrun", "params:=" .. json.encode(args("pytorch-torchrun")))
  t.eq(rc, 0, err)
  local r = json.decode(out or "")
  t.eq(r and r.objects[1].kind, "HyperPodPyTorchJob")
  local rc2, _, err2 = H.run_hypd({ HYPD_STATE = dir .. "/state" }, "call", "training_render", "recipe=pytorch-torchrun",
    "params:=" .. json.encode(args("pytorch-torchrun", { gpus_per_node = 0 })))
  t.eq(rc2 ~= 0, true)
  t.like(err2, "gpus_per_node: must be at least 1")
end)

t.test("a recipe in the playbook directory replaces the built-in; a broken one is refused with its error", function()
  os.execute("mkdir -p " .. H.quote(dir .. "/pb/recipes"))
  config.playbooks_dir = dir .. "/pb"
  local own = dir .. "/pb/recipes/pytorch-torchrun.lua"
  H.write(own, [[
local C = require "_common"
return { name = "pytorch-torchrun", description = "the operator's own torchrun recipe",
  params = C.params("example.com/own:1", { script = C.path("the script", true) }),
  render = function(p)
    local job = C.pytorch_job(p, "pytorch-torchrun", { image = p.image, command = { "python", p.script } })
    job.metadata.labels.team = "ours"
    return { job }
  end }]])
  local a = args("pytorch-torchrun")
  a.args = nil
  local r = assert(dispatch.call("training_render", { recipe = "pytorch-torchrun", params = a }, WHO))
  t.eq(r.objects[1].metadata.labels.team, "ours")
  t.eq(r.objects[1].spec.replicaSpecs[1].template.spec.containers[1].image, "example.com/own:1")
  t.eq(recipes.get("pytorch-torchrun").source, own)
  local errs = require("hypd.tool.loader").reload({ name = "recipes-test" }).errors
  t.eq(errs, {}, "the recipes/ folder is not read as tools")

  H.write(own, "return { name = 'pytorch-torchrun', description = 'broken', render = function( }")
  local _, err = render("pytorch-torchrun")
  t.eq(err and err.code, "VALIDATION")
  t.like(err.message, "recipe " .. own:gsub("%p", "%%%0") .. " is refused: it does not compile")
  H.write(own, "error('boom')")
  _, err = render("pytorch-torchrun")
  t.like(err and err.message, "is refused: it fails when loaded: .*boom")
  H.write(own, "return { name = 'pytorch-torchrun', description = 'x', render = function() end, " ..
    "params = { gpus = { type = 'int' } } }")
  _, err = render("pytorch-torchrun")
  t.like(err and err.message, "is refused: recipe pytorch%-torchrun: param gpus: type must be one of")
  H.write(own, "return {}")
  os.execute("chmod 0666 " .. H.quote(own))
  _, err = render("pytorch-torchrun")
  t.like(err and err.message, "is refused: it is writable by other users %(mode 0666%); fix it with: chmod go%-w")
  local listed
  for _, x in ipairs(assert(dispatch.call("training_list_recipes", {}, WHO)).recipes) do
    if x.name == "pytorch-torchrun" then listed = x end
  end
  t.like(listed.error, "is refused")
  H.write(dir .. "/pb/recipes/tiny.lua", [[
local C = require "_common"
return { name = "tiny", description = "an added recipe", params = C.params("busybox:1"),
  render = function(p) return { C.pytorch_job(p, "tiny", { image = p.image, command = { "true" } }) } end }]])
  t.eq(recipes.names(), { "llama-factory", "ms-swift", "pytorch-torchrun", "tiny", "verl" })
  os.remove(own)
  t.eq(recipes.get("pytorch-torchrun").source, "built-in", "the built-in is back once the file goes")
  config.playbooks_dir = nil
end)

t.test("every recipe's objects pass the sandbox API server's server-side dry run; nothing is created", function()
  config.playbooks_dir = nil
  H.sandbox_here()
  H.eks_cluster(function(s, o, p) return require("hypd.aws").call(s, o, p or {}) end, "recipes-kube", 73)
  local c = require("hypd.k8s").connect { cluster = "recipes-kube" }
  local resources = require "sandbox.k8s.resources"
  for _, row in ipairs(resources.CRDS) do
    if row[1] == "sagemaker.amazonaws.com" or row[1] == "ray.io" then assert(c:create(resources.crd(row))) end
  end
  for name in pairs(ARGS) do
    local r = assert(render(name))
    for _, o in ipairs(r.objects) do
      local ok, got = pcall(c.apply, c, o, { dry_run = true })
      t.ok(ok, name .. ": " .. (ok and "" or tostring(got and got.message or got)))
      if ok then
        t.eq({ got.kind, got.metadata.name }, { o.kind, o.metadata.name }, name)
        t.eq(got.spec, o.spec, name .. ": the server keeps the spec as rendered")
      end
      local items = c:list(o.apiVersion, o.kind, { namespace = "default" })
      t.eq(#items, 0, name .. ": dry run created nothing")
    end
  end
end)
