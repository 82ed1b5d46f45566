-- EKS' rule for a cluster name lives once (hypd.aws.eks CLUSTER_NAME): the
-- workflows' cluster parameter (_params) uses it as its pattern, and the
-- EKS token and kubeconfig commands check a name with it (check_cluster):
-- 1 to 100 letters, digits, '-' or '_', starting with a letter or digit.
local t = require "hypd.tap"
local eks = require "hypd.aws.eks"
local kubeconfig = require "hypd.aws.kubeconfig"
local playbook = require "hypd.playbook"

local function refused(fn)
  local ok, err = pcall(fn)
  return not ok and type(err) == "table" and err.code == "VALIDATION" and err.field == "cluster", err
end

t.test("the workflows' cluster parameter uses hypd.aws.eks's rule", function()
  t.eq(type(eks.CLUSTER_NAME), "string")
  t.eq(playbook.load("_params").cluster.pattern, eks.CLUSTER_NAME)
end)

t.test("check_cluster takes the names EKS takes", function()
  for _, name in ipairs { "a", "9", "hypd-demo", "My_Cluster-2", string.rep("x", 100) } do
    local ok, err = pcall(eks.check_cluster, name)
    t.ok(ok, name .. ": " .. tostring(type(err) == "table" and err.message or err))
  end
end)

t.test("check_cluster, the token's prepare and the kubeconfig refuse the names EKS refuses", function()
  for _, name in ipairs { "", "-a", "_a", "a.b", "a b", "é", string.rep("x", 101) } do
    t.ok(refused(function() eks.check_cluster(name) end), "check_cluster " .. name)
    t.ok(refused(function() eks.prepare { cluster = name } end), "prepare " .. name)
    t.ok(refused(function() kubeconfig.build { cluster = name } end), "kubeconfig " .. name)
  end
  t.ok(refused(function() eks.check_cluster(nil) end), "no name")
end)
