-- Each managed feature turned on, on again, then off, by
-- hyperpod_update_advanced_features in a hypd host process against a
-- sandbox process under the virtual clock, and checked as a user would,
-- never with hypd: boto3 (tests/tools/features_cluster.py: IAM roles and
-- policies, EKS add-ons and Pod Identity associations, the S3 bucket, the
-- HyperPod cluster's settings) and kubectl (the Kubernetes objects, their
-- resourceVersions). On: the whole chain is there. On again: no mutating
-- call in the sandbox audit log and no Kubernetes write (hypd's own audit of
-- the call; every object's resourceVersion unchanged). Off: no IAM role,
-- policy, add-on, association, bucket, service account or Kubernetes object
-- of the feature is left. The host is killed with SIGKILL in the middle of a
-- chain, and of its removal, and the restarted host finishes it, each
-- mutation in the audit log once. The command line takes the features as
-- key=value words.
local t = require "hypd.tap"
local json = require "hypd.json"
local H = dofile("tests/lua/helpers.lua")
local EKS, HP, ACCT = "fp", "fp-hp", "123456789012"
local dir = H.tmpdir()
local kc, env, pid = H.kubectl_harness(dir), {}, nil
local absent -- why the first test could not run (nil: it ran)
local function skip() return t.skip(absent or "no cluster: the first test failed to make it") end

local function driver(params, extra)
  local rc, out, err = H.with_env(env, dir, "HYPD_CLOCK=virtual " .. (params and ("PARAMS=" ..
    H.quote(json.encode(params)) .. " ") or "") .. (extra or "") .. " " .. H.hypd ..
    " test tests/tools/features_driver.lua")
  local line = (out or ""):match("# result ([^\n]+)")
  return line and json.decode(line) or nil, rc, (out or "") .. (err or "")
end

local function audit()
  local _, out = H.sh("curl -s " .. env.AWS_ENDPOINT_URL .. "/_sandbox/audit")
  local list = json.decode(out) or {}
  local counts = {}
  for _, a in ipairs(list) do counts[a.operation] = (counts[a.operation] or 0) + 1 end
  return #list, counts, list
end

local function since(list, n)
  local counts = {}
  for i = n + 1, #list do counts[list[i].operation] = (counts[list[i].operation] or 0) + 1 end
  return counts
end

-- look(expect) -> what boto3 sees of the names in expect {roles, policies, addons, buckets}
local function look(e)
  local rc, out, err = kc.sh("python3 tests/tools/features_cluster.py look " .. EKS .. " " .. HP .. " " ..
    H.quote(table.concat(e.roles or {}, ",") .. ",") .. " " .. H.quote(table.concat(e.policies or {}, ",") .. ",") ..
    " " .. H.quote(table.concat(e.addons or {}, ",") .. ",") .. " " .. H.quote(table.concat(e.buckets or {}, ",") .. ","))
  assert(rc == 0, err)
  return json.decode(out)
end

-- kube(list) -> {"kind/ns/name" = resourceVersion | nil} for the objects named ({kind, name[, ns]})
local function kube(objs)
  local out = {}
  for _, o in ipairs(objs) do
    local args = "get " .. o[1] .. " " .. o[2] .. (o[3] and (" -n " .. o[3]) or "") ..
      " -o jsonpath='{.metadata.resourceVersion}' --ignore-not-found"
    local rc, v, err = kc.kubectl(args)
    assert(rc == 0, err)
    out[o[1] .. "/" .. (o[3] or "") .. "/" .. o[2]] = v ~= "" and v or nil
  end
  return out
end

local function count(t_) local n = 0 for _ in pairs(t_) do n = n + 1 end return n end

-- the chain of each feature, by name: what boto3 and kubectl look for
local FEATURES = {
  { "cert_manager", aws = { addons = { "cert-manager" } }, k8s = { { "deployment", "cert-manager", "cert-manager" },
    { "namespace", "cert-manager" } } },
  { "fsx_csi_driver", aws = { roles = { "SM_HP_FSX_CSI_ROLE_fp" }, addons = { "aws-fsx-csi-driver" } },
    k8s = { { "deployment", "fsx-csi-controller", "kube-system" }, { "daemonset", "fsx-csi-node", "kube-system" } } },
  { "training_operator", aws = { roles = { "SageMakerHyperPodTrainingOperator-fp" },
    addons = { "amazon-sagemaker-hyperpod-training-operator" } },
    association = "aws-hyperpod/hp-training-operator-controller-manager",
    k8s = { { "crd", "hyperpodpytorchjobs.sagemaker.amazonaws.com" }, { "namespace", "aws-hyperpod" },
      { "deployment", "hp-training-operator-hp-training-controller-manager", "aws-hyperpod" } } },
  { "inference_operator", aws = { roles = { "SageMakerHyperPodInference-fp", "HyperPodInferenceGated-fp",
    "HyperPodInferenceALB-fp", "HyperPodInferenceKEDA-fp" }, policies = { "HyperPodInferenceALB-fp-Policy",
    "HyperPodInferenceKEDA-fp-Policy" }, addons = { "amazon-sagemaker-hyperpod-inference" },
    buckets = { "hyperpod-tls-fp-" .. ACCT } },
    k8s = { { "crd", "inferenceendpointconfigs.inference.sagemaker.aws.amazon.com" },
      { "namespace", "hyperpod-inference-system" },
      { "deployment", "hyperpod-inference-operator-controller-manager", "hyperpod-inference-system" } } },
  { "tiered_checkpointing", aws = { roles = { "SM_HP_TieredCkpt_Role_fp" }, policies = { "SM_HP_TieredCkpt_S3Policy_fp" } },
    value = { enabled = true, memory_percentage = 25 }, tiered = true,
    k8s = { { "serviceaccount", "tiered-storage-sa", "default" } } },
  { "karpenter", aws = { roles = { "hyperpod-karpenter-role-fp" }, policies = { "SageMakerHyperPodKarpenterPolicy-fp" } },
    autoscaling = true, value = { enabled = true, instance_groups = { "gpu", "cpu" } }, -- the sized group named
    k8s = { { "nodepool", "gpu-nodepool" }, { "nodepool", "cpu-nodepool" }, { "hyperpodnodeclass", "gpu-nodeclass" },
      { "hyperpodnodeclass", "cpu-nodeclass" }, { "crd", "nodepools.karpenter.sh" },
      { "crd", "hyperpodnodeclasses.karpenter.sagemaker.amazonaws.com" } } },
  { "kuberay_operator", k8s = { { "namespace", "kuberay-system" }, { "deployment", "kuberay-operator", "kuberay-system" },
    { "serviceaccount", "kuberay-operator", "kuberay-system" }, { "service", "kuberay-operator", "kuberay-system" },
    { "clusterrole", "kuberay-operator" }, { "clusterrolebinding", "kuberay-operator" },
    { "role", "kuberay-operator-leader-election", "kuberay-system" },
    { "rolebinding", "kuberay-operator-leader-election", "kuberay-system" } } },
}

t.test("a sandbox process with an EKS and a HyperPod cluster made with boto3, and kubectl for it", function()
  env, pid, absent = H.kubectl_sandbox(dir, kc)
  if absent then return skip() end
  t.ok(env.AWS_ENDPOINT_URL, "the sandbox started")
  local rc, out, err = kc.sh("python3 tests/tools/features_cluster.py make " .. EKS .. " " .. HP .. " 61")
  t.eq(rc, 0, err)
  t.eq((json.decode(out) or {}).status, "InService")
  rc, out, err = kc.sh(H.hypd .. " kubeconfig --cluster " .. EKS .. " --write " .. H.quote(kc.kc))
  t.eq({ rc, out }, { 0, "" }, err)
  rc, out, err = kc.kubectl("get nodes -o name")
  t.eq(rc, 0, err)
  t.like(out, "^node/hyperpod%-i%-")
  if rc ~= 0 then absent = "the cluster could not be made" end
end)

t.test("the command line takes the features as key=value words (a plan: nothing is sent)", function()
  if absent then return skip() end
  local before = audit()
  local rc, out, err = kc.sh("HYPD_CLOCK=virtual " .. H.hypd .. " call hyperpod_update_advanced_features cluster=" ..
    EKS .. " training_operator=true karpenter=false " ..
    H.quote('tiered_checkpointing={"enabled":true,"memory_percentage":20}') .. " --plan")
  t.eq(rc, 0, err)
  t.like(out, "SageMakerHyperPodTrainingOperator%-fp")
  t.like(out, "SM_HP_TieredCkpt_Role_fp")
  rc, out, err = kc.sh("HYPD_CLOCK=virtual " .. H.hypd .. " call hyperpod_update_advanced_features cluster=" .. EKS ..
    " tiered_checkpointing:='{\"enabled\":true,\"memory_percentage\":5}' --plan")
  t.ok(rc ~= 0, "refused")
  t.like(out .. err, "tiered_checkpointing%.memory_percentage: must be at least 20")
  local after = audit()
  t.eq(after, before, "no mutation")
end)

for _, f in ipairs(FEATURES) do
  local name = f[1]
  local value = f.value or true
  local vers

  t.test(name .. ": on builds the whole chain (boto3 and kubectl see every part)", function()
    if absent then return skip() end
    local r, rc, out = driver({ cluster = EKS, [name] = value })
    t.eq(rc, 0, out)
    t.eq((r or {}).status, "succeeded", json.encode(r and r.error))
    t.eq(r.result.features[name].status, "enabled")
    t.eq(r.result.features[name].action, "enabled")
    local seen = look(f.aws or {})
    for _, k in ipairs { "roles", "policies", "addons", "buckets" } do
      t.eq(seen[k], (f.aws or {})[k] or {}, name .. ": " .. k)
    end
    if f.association then t.ok(table.concat(seen.associations, " "):find(f.association, 1, true), f.association) end
    if f.tiered then t.eq(seen.tiered, { Mode = "Enable", InstanceMemoryAllocationPercentage = 25 }) end
    if f.autoscaling then
      t.eq(seen.autoscaling, { Mode = "Enable", AutoScalerType = "Karpenter", Status = "InService" })
      t.eq(seen.cluster_role, "arn:aws:iam::" .. ACCT .. ":role/hyperpod-karpenter-role-fp")
      t.eq(seen.node_recovery, "Automatic")
    end
    vers = kube(f.k8s)
    t.eq(count(vers), #f.k8s, name .. ": every Kubernetes object: " .. json.encode(vers))
    if name == "tiered_checkpointing" then
      local _, ann = kc.kubectl("get sa tiered-storage-sa -n default -o jsonpath=" ..
        H.quote("{.metadata.annotations.eks\\.amazonaws\\.com/role-arn}"))
      t.eq(ann, "arn:aws:iam::" .. ACCT .. ":role/SM_HP_TieredCkpt_Role_fp")
    end
  end)

  t.test(name .. ": on again sends nothing (no mutating call, no Kubernetes write)", function()
    if absent then return skip() end
    local n = audit()
    local r, rc, out = driver({ cluster = EKS, [name] = value })
    t.eq(rc, 0, out)
    t.eq((r or {}).status, "succeeded")
    t.eq(r.result.features[name].action, "unchanged")
    t.eq(audit(), n, "no mutating call in the sandbox audit log")
    t.eq(r.k8s, {}, "no Kubernetes write in hypd's audit log")
    t.eq(kube(f.k8s), vers, "every object's resourceVersion unchanged")
  end)

  t.test(name .. ": off leaves no role, policy, add-on or Kubernetes object of it behind", function()
    if absent then return skip() end
    local r, rc, out = driver({ cluster = EKS, [name] = false })
    t.eq(rc, 0, out)
    t.eq((r or {}).status, "succeeded", json.encode(r and r.error))
    t.eq(r.result.features[name].status, "disabled", json.encode(r.result.features[name].parts))
    local seen = look(f.aws or {})
    for _, k in ipairs { "roles", "policies", "addons", "buckets" } do t.eq(seen[k], {}, name .. ": no " .. k) end
    if f.association then t.eq(table.concat(seen.associations, " "):find(f.association, 1, true), nil) end
    if f.tiered then t.eq(seen.tiered.Mode, "Disable") end
    if f.autoscaling then t.eq(seen.autoscaling.Mode, "Disable") end
    t.eq(kube(f.k8s), {}, name .. ": no Kubernetes object")
    if name == "kuberay_operator" then
      local _, pods = kc.kubectl("get pods,replicasets -n kuberay-system -o name")
      t.eq(pods, "", "no pod or replica set left in kuberay-system")
    end
  end)
end

t.test("killed with SIGKILL in the middle of the Karpenter chain, the restarted host finishes it", function()
  if absent then return skip() end
  local n0, _, _ = audit()
  local r, rc, out = driver({ cluster = EKS, karpenter = true }, "CRASH_PHASE=" ..
    H.quote("waiting for HyperPod cluster fp-hp autoscaling"))
  t.ok(rc ~= 0 and r == nil, "killed: " .. tostring(rc) .. " " .. out)
  local _, _, list = audit()
  t.eq(since(list, n0).UpdateCluster, 1, "UpdateCluster sent before the kill")
  r, rc = driver(nil)
  t.eq(rc, 0)
  t.eq({ r.resumed > 0, r.status }, { true, "succeeded" }, json.encode(r))
  local _, _, after = audit()
  local c = since(after, n0)
  t.eq({ c.CreatePolicy, c.CreateRole, c.AttachRolePolicy, c.UpdateCluster }, { 1, 1, 1, 1 }, json.encode(c))
  local seen = look { roles = { "hyperpod-karpenter-role-fp" } }
  t.eq(seen.autoscaling.Mode, "Enable")
  t.eq(count(kube { { "nodepool", "gpu-nodepool" }, { "hyperpodnodeclass", "gpu-nodeclass" } }), 2)
end)

t.test("killed with SIGKILL in the middle of its removal, the restarted host finishes that", function()
  if absent then return skip() end
  local n0 = audit()
  local r, rc = driver({ cluster = EKS, karpenter = false }, "CRASH_PHASE=" ..
    H.quote("deleting IAM role hyperpod-karpenter-role-fp"))
  t.ok(rc ~= 0 and r == nil, "killed: " .. json.encode(r))
  r, rc = driver(nil)
  t.eq(rc, 0)
  t.eq(r.status, "succeeded", json.encode(r))
  local _, _, after = audit()
  local c = since(after, n0)
  t.eq({ c.DeleteRole, c.DeletePolicy, c.DetachRolePolicy }, { 1, 1, 1 }, json.encode(c))
  local seen = look { roles = { "hyperpod-karpenter-role-fp" }, policies = { "SageMakerHyperPodKarpenterPolicy-fp" } }
  t.eq({ seen.roles, seen.policies, seen.autoscaling.Mode }, { {}, {}, "Disable" })
  t.eq(kube { { "nodepool", "gpu-nodepool" }, { "crd", "nodepools.karpenter.sh" } }, {})
end)

t.cleanup(function()
  if pid then os.execute("kill " .. tostring(pid) .. " 2>/dev/null") end
  os.execute("rm -rf " .. H.quote(dir))
end)
