-- Each shipped recipe's objects, as training_render answers them, are
-- accepted by `kubectl apply --dry-run=server` against a sandbox EKS
-- cluster (a `hypd sandbox --virtual-clock` process) with the training
-- operator's CRD (the HyperPod-ready cluster has it) and KubeRay's (applied
-- by the test), and nothing is created.
local t = require "hypd.tap"
local json = require "hypd.json"
local dispatch = require "hypd.tool.dispatch"
local S = dofile("tests/lua/sandbox_k8s_helpers.lua").new()
local H, dir, kubectl = S.H, S.dir, S.kubectl
t.cleanup(S.cleanup)
require("hypd.tool.loader").load()

local WHO = { name = "recipes-kubectl", scope = "read", front = "test" }
local BASE = { job_name = "dry", instance_type = "ml.g5.12xlarge" }
local ARGS = {
  ["pytorch-torchrun"] = { script = "scripts/train.py" },
  ["llama-factory"] = { model = "models/qwen", dataset_dir = "datasets/alpaca", dataset = "alpaca_en" },
  ["ms-swift"] = { model = "models/qwen", dataset = "datasets/train.jsonl" },
  verl = { model = "models/qwen", train_files = "datasets/t.parquet", val_files = "datasets/v.parquet" },
}

t.test("a sandbox EKS cluster with the HyperPodPyTorchJob and ray.io CRDs", function()
  S.start("rec-eks", "rec-hp")
  if not S.ready then return end
  local resources = require "sandbox.k8s.resources"
  for _, row in ipairs(resources.CRDS) do
    if row[1] == "sagemaker.amazonaws.com" or row[1] == "ray.io" then
      assert(S.conn:apply(resources.crd(row), { force = true }))
    end
  end
  t.ok(S.until_ok(function() return kubectl("get hyperpodpytorchjobs,rayjobs") == 0 end), "the kinds are served")
end)

t.test("kubectl apply --dry-run=server accepts every recipe's objects and creates nothing", function()
  if not S.ready then return S.skip() end
  local names = {}
  for name in pairs(ARGS) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    local p = json.object()
    for k, v in pairs(BASE) do p[k] = v end
    for k, v in pairs(ARGS[name]) do p[k] = v end
    local r = assert(dispatch.call("training_render", { recipe = name, params = p }, WHO))
    local file = H.write(dir .. "/" .. name .. ".json", json.encode(r.objects[1]))
    local rc, out, err = kubectl("apply --dry-run=server -f " .. H.quote(file))
    t.eq(rc, 0, name .. ": " .. tostring(err))
    local kind = r.objects[1].kind:lower()
    t.like(out, kind .. "[%w.]*/dry created %(server dry run%)", name)
  end
  local rc, out = kubectl("get hyperpodpytorchjobs,rayjobs -o name")
  t.eq({ rc, out }, { 0, "" }, "nothing was created")
end)
