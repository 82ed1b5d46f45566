-- hypd.manifests: the Kubernetes manifests kept as YAML in the Lua tree
-- (lua/manifests/*.yaml, compiled into hypd by the build) as playbooks read
-- them: every document an object, ${key} filled from vars, a missing value
-- named, and a file in the playbook directory's manifests/ over the
-- built-in one.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
local config = require "hypd.config"
local manifests = require "hypd.manifests"
local playbook_api = require "hypd.playbook_api"

local VARS = { region = "us-west-2", hma_image = "example.com/hma:1", cluster = "hypd-demo", vpc_id = "vpc-1",
  lbc_role_arn = "arn:aws:iam::123456789012:role/hypd-demo-lb-controller" }

t.test("the build embeds every lua/manifests/*.yaml and playbooks list them through hypd.manifests", function()
  t.eq(manifests.list(), { "aws-load-balancer-controller", "deep-health-check", "efa-device-plugin",
    "health-monitoring-agent", "kuberay-operator", "nvidia-device-plugin" })
  t.eq(playbook_api.build("x").manifests.list(), manifests.list())
end)

t.test("every document of every manifest is an object with apiVersion, kind and a name", function()
  local kinds = {}
  for _, name in ipairs(manifests.list()) do
    local objs = manifests.load(name, VARS)
    t.ok(#objs > 0, name .. " has objects")
    for _, o in ipairs(objs) do
      t.ok(type(o.apiVersion) == "string" and type(o.kind) == "string" and type(o.metadata.name) == "string",
        name .. ": " .. tostring(o.kind) .. " " .. tostring(o.metadata and o.metadata.name))
      kinds[o.kind] = (kinds[o.kind] or 0) + 1
    end
  end
  t.eq(kinds, { DaemonSet = 4, Namespace = 2, ServiceAccount = 4, ClusterRole = 4, ClusterRoleBinding = 4, Role = 2,
    RoleBinding = 2, Deployment = 2, Service = 2, CustomResourceDefinition = 5, Issuer = 1, Certificate = 1 })
end)

t.test("${key} is filled from vars; a value the manifest needs and vars lack is a VALIDATION naming it", function()
  local hma = manifests.load("health-monitoring-agent", VARS)
  t.eq(hma[4].spec.template.spec.containers[1].image, "example.com/hma:1")
  local ok, err = pcall(manifests.load, "health-monitoring-agent", { region = "us-west-2" })
  t.eq(ok, false)
  t.eq({ err.code, err.field }, { "VALIDATION", "hma_image" })
  ok, err = pcall(manifests.load, "no-such")
  t.eq({ ok, err.code }, { false, "NOT_FOUND" })
end)

t.test("a file in the playbook directory's manifests/ replaces the built-in one", function()
  local dir = H.tmpdir()
  os.execute("mkdir -p " .. dir .. "/manifests")
  H.write(dir .. "/manifests/deep-health-check.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: mine\n")
  config.playbooks_dir = dir
  local objs = manifests.load("deep-health-check", VARS)
  local _, from = manifests.text("deep-health-check")
  config.playbooks_dir = nil
  t.eq({ #objs, objs[1].metadata.name, from }, { 1, "mine", dir .. "/manifests/deep-health-check.yaml" })
  t.eq(select(2, manifests.text("deep-health-check")), "built-in")
end)
