-- The managed features (hyperpod_get_advanced_features,
-- hyperpod_update_advanced_features, hyperpod_disable_advanced_features)
-- against the in-process sandbox under the virtual clock, through the
-- registry and hypd.tool.operations: the parameters every front end takes (booleans,
-- objects, key=value text, JSON through REST and MCP), bad input refused
-- before any mutation naming the field and the rule, plans that list each
-- chain with nothing sent, conflicts and scopes refused before anything
-- changes, chains a stopped host or a cancelled operation left half built
-- (or half removed) finished by the next call, a link removed by hand put
-- back alone, and managed Karpenter in the sandbox: a GPU pod against a
-- group at zero gets a node, which goes when idle past consolidateAfter.
-- The full on / on again / off round of every feature, checked with boto3
-- and kubectl, is features_process_test.lua.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
require("hypd.tool.loader").load()
local srv, OPTS = H.sandbox_here()
local FH = dofile("tests/lua/features_helpers.lua")
local call = FH.aws(OPTS)
local core, json, op = require "hypd.core", require "hypd.json", require "hypd.tool.operations"
local dispatch = require "hypd.tool.dispatch"
local task, tool = require "hypd.task", require "hypd.tool.registry"
local ADMIN = { name = "admin-tester", scope = "admin", front = "test" }
local OPERATOR = { name = "operator-tester", scope = "operate", front = "test" }
local UPDATE, DISABLE, GET = "hyperpod_update_advanced_features", "hyperpod_disable_advanced_features",
  "hyperpod_get_advanced_features"
local EKS = "feat-a"
local C

local function update(params, who)
  params.cluster = params.cluster or EKS
  local acc, err = dispatch.call(UPDATE, params, who or ADMIN)
  if not acc then return nil, err end
  return op.wait(acc.operation_id)
end

local function get(name, cluster)
  local r = assert(dispatch.call(GET, { cluster = cluster or EKS }, ADMIN))
  return name and r.features[name] or r
end

local function plan(params)
  params.cluster = params.cluster or EKS
  params.plan = true
  local r, err = dispatch.call(UPDATE, params, ADMIN)
  assert(r, err and err.message)
  local rows = {}
  for _, e in ipairs(r.plan) do rows[#rows + 1] = e.action .. " " .. e.type .. " " .. e.name end
  return rows, r
end

local function has(rows, want, msg)
  for _, r in ipairs(rows) do if r == want then return t.ok(true, msg or want) end end
  t.ok(false, (msg or want) .. ": not in " .. json.encode(rows))
end

t.test("a cluster: EKS with its OIDC provider and the S3 CSI driver, HyperPod with a GPU group at zero", function()
  C = FH.cluster(call, EKS, 73)
  t.eq(call("sagemaker", "DescribeCluster", { ClusterName = C.hp }).ClusterStatus, "InService")
  local r = get()
  t.eq(r.has_hyperpod, true)
  t.eq(r.hyperpod_cluster, C.hp)
  for _, name in ipairs { "training_operator", "inference_operator", "tiered_checkpointing", "karpenter",
    "fsx_csi_driver", "kuberay_operator", "cert_manager" } do
    t.eq(r.features[name].status, "disabled", name .. " starts off")
    t.eq(r.features[name].enabled, false)
    t.ok(#r.features[name].parts > 0, name .. " lists the parts of its chain")
  end
end)

t.test("every feature takes true, false or an object, from JSON and from key=value text", function()
  local def = tool.get(UPDATE)
  for _, name in ipairs { "training_operator", "inference_operator", "tiered_checkpointing", "karpenter",
    "fsx_csi_driver", "kuberay_operator", "cert_manager" } do
    local schema = tool.input_schema(def).properties[name]
    t.eq(schema.type, { "boolean", "object" }, name .. ": boolean or object in the schema")
    t.eq(schema.properties.enabled.type, "boolean")
    t.eq(tool.coerce(def.params, name, "true"), true, name .. "=true")
    t.eq(tool.coerce(def.params, name, "false"), false, name .. "=false")
    t.eq(tool.coerce(def.params, name, '{"enabled":true}'), { enabled = true }, name .. "={...}")
  end
  local ok = tool.validate(def, { tiered_checkpointing = { enabled = true, memory_percentage = 20 }, karpenter = false,
    training_operator = true })
  t.eq(ok.tiered_checkpointing, { enabled = true, memory_percentage = 20 })
  t.eq(ok.karpenter, false)
  local ui = tool.input_schema(def).properties.tiered_checkpointing
  t.eq(ui.properties.memory_percentage.minimum, 20)
  t.eq(ui.additionalProperties, false)
end)

t.test("bad input is refused before any mutation, naming the field and the rule", function()
  local m = FH.mark()
  local cases = {
    { { tiered_checkpointing = { enabled = true, memory_percentage = 5 } }, "tiered_checkpointing.memory_percentage",
      "minimum" },
    { { tiered_checkpointing = { enabled = true, percent = 5 } }, "tiered_checkpointing.percent", "unknown" },
    { { karpenter = { consolidate_after = "5m" } }, "karpenter.enabled", "required" },
    { { karpenter = { enabled = true, consolidate_after = "soon" } }, "karpenter.consolidate_after", "pattern" },
    { { kuberay_operator = "yes" }, "kuberay_operator", "type" },
  }
  for _, c in ipairs(cases) do
    c[1].cluster = EKS
    local r, err = dispatch.call(UPDATE, c[1], ADMIN)
    t.eq(r, nil, json.encode(c[1]))
    t.eq(err.code, "VALIDATION")
    t.eq({ err.fields[1].field, err.fields[1].rule }, { c[2], c[3] }, err.message)
  end
  -- checked by the tool's first step: an operation that fails before sending anything
  local v = update { tiered_checkpointing = { enabled = false, memory_percentage = 30 } }
  t.eq({ v.status, v.error.code }, { "failed", "VALIDATION" })
  t.eq(v.error.fields[1].field, "tiered_checkpointing.memory_percentage")
  t.eq(v.error.fields[1].rule, "with_enabled")
  v = update {}
  t.eq({ v.status, v.error.code, v.error.fields[1].rule }, { "failed", "VALIDATION", "required" })
  local _, n = FH.since(m)
  t.eq(n, 0, "no AWS mutation")
end)

t.test("plan mode lists every link of each chain and sends nothing", function()
  local m = FH.mark()
  local n = "feat-a"
  local rows = plan { training_operator = true }
  has(rows, "create eks:addon cert-manager")
  has(rows, "create eks:addon eks-pod-identity-agent")
  has(rows, "create iam:role SageMakerHyperPodTrainingOperator-" .. n)
  has(rows, "create iam:role-policy-attachment AmazonSageMakerHyperPodTrainingOperatorAccess on " ..
    "SageMakerHyperPodTrainingOperator-" .. n)
  has(rows, "create eks:addon amazon-sagemaker-hyperpod-training-operator")
  -- its Pod Identity association comes with the add-on (CreateAddon's
  -- podIdentityAssociations): the run sends no create of its own, so the plan lists none
  for _, r in ipairs(rows) do t.ok(not r:find("eks:pod-identity-association", 1, true), "no association of its own: " .. r) end
  rows = plan { tiered_checkpointing = { enabled = true, memory_percentage = 25 } }
  has(rows, "change sagemaker:cluster-setting " .. C.hp .. " TieredStorageConfig")
  has(rows, "create iam:policy SM_HP_TieredCkpt_S3Policy_" .. n)
  has(rows, "create iam:role SM_HP_TieredCkpt_Role_" .. n)
  has(rows, "create iam:role-policy-attachment SM_HP_TieredCkpt_S3Policy_" .. n .. " on SM_HP_TieredCkpt_Role_" .. n)
  has(rows, "create k8s:serviceaccount default/tiered-storage-sa")
  rows = plan { karpenter = true }
  has(rows, "create iam:policy SageMakerHyperPodKarpenterPolicy-" .. n)
  has(rows, "create iam:role hyperpod-karpenter-role-" .. n)
  has(rows, "change sagemaker:cluster-setting " .. C.hp .. " AutoScaling")
  has(rows, "create k8s:hyperpodnodeclass gpu-nodeclass")
  has(rows, "create k8s:nodepool gpu-nodepool")
  has(rows, "change hyperpod:autoscaling gpu in " .. C.hp, "the group at 0 nodes goes under Karpenter")
  has(rows, "keep hyperpod:autoscaling cpu in " .. C.hp, "the sized group is left out, and said so")
  rows = plan { inference_operator = true }
  for _, r in ipairs { "create eks:addon metrics-server", "create eks:addon aws-fsx-csi-driver",
    "create iam:role SM_HP_FSX_CSI_ROLE_" .. n, "create iam:role SageMakerHyperPodInference-" .. n,
    "create iam:role HyperPodInferenceGated-" .. n, "create iam:policy HyperPodInferenceALB-" .. n .. "-Policy",
    "create iam:role HyperPodInferenceKEDA-" .. n, "create s3:bucket hyperpod-tls-" .. n .. "-123456789012",
    "create eks:addon amazon-sagemaker-hyperpod-inference" } do has(rows, r) end
  rows = plan { kuberay_operator = true }
  has(rows, "create k8s:namespace kuberay-system")
  has(rows, "create k8s:clusterrole kuberay-operator")
  has(rows, "create k8s:deployment kuberay-system/kuberay-operator")
  rows = plan { fsx_csi_driver = true, cert_manager = true }
  has(rows, "create eks:addon aws-fsx-csi-driver")
  has(rows, "create eks:addon cert-manager")
  local _, total = FH.since(m)
  t.eq(total, 0, "the sandbox audit log has no mutation")
  t.eq(#FH.k8s_writes(m), 0, "no Kubernetes write")
  t.eq(get("karpenter").status, "disabled", "nothing changed")
end)

t.test("REST and MCP take the same parameters as JSON", function()
  local rest, mcp, auth = require "hypd.api.rest", require "hypd.api.mcp", require "hypd.api.auth"
  local token = assert(auth.create { name = "features-rest", scope = "admin" })
  local resp = rest.handle { method = "POST", path = "/api/v1/tools/" .. UPDATE, peer = "127.0.0.1",
    headers = { authorization = "Bearer " .. token, ["content-type"] = "application/json" },
    body = json.encode { cluster = EKS, plan = true, karpenter = false,
      tiered_checkpointing = { enabled = true, memory_percentage = 20 } } }
  t.eq(resp.status, 200, resp.body)
  local body = json.decode(resp.body)
  t.ok(#body.plan > 0, "REST: a plan")
  local session = mcp.session { caller = ADMIN }
  local reply = mcp.handle(session, { jsonrpc = "2.0", id = 7, method = "tools/call", params = { name = UPDATE,
    arguments = { cluster = EKS, plan = true, training_operator = true, cert_manager = { enabled = true } } } })
  t.ok(not reply.result.isError, json.encode(reply))
  t.ok(#reply.result.structuredContent.plan > 0, "MCP: a plan")
  reply = mcp.handle(session, { jsonrpc = "2.0", id = 8, method = "tools/call", params = { name = UPDATE,
    arguments = { cluster = EKS, karpenter = { enabled = "yes" } } } })
  t.eq(reply.result.isError, true)
  t.like(json.encode(reply.result), "karpenter%.enabled")
end)

t.test("turning cert-manager off while the training operator stays on is refused before anything changes", function()
  local v = update { training_operator = true }
  t.eq(v.status, "succeeded", json.encode(v.error))
  t.eq(get("training_operator").status, "enabled")
  local m = FH.mark()
  v = update { cert_manager = false }
  t.eq({ v.status, v.error.code, v.error.fields[1].field, v.error.fields[1].rule },
    { "failed", "VALIDATION", "cert_manager", "conflict" })
  v = update { cert_manager = false, training_operator = true }
  t.eq({ v.status, v.error.fields[1].rule }, { "failed", "conflict" })
  local r, err = dispatch.call(DISABLE, { cluster = EKS, features = { "cert_manager" } }, ADMIN)
  v = op.wait(r.operation_id)
  t.eq({ v.status, v.error.fields[1].rule }, { "failed", "conflict" }, err)
  local _, n = FH.since(m)
  t.eq(n, 0, "no AWS mutation")
  t.eq(get("cert_manager").status, "enabled")
end)

t.test("turning a feature off needs scope admin; an operator is refused before anything changes", function()
  local m = FH.mark()
  local v = update({ training_operator = false }, OPERATOR)
  t.eq({ v.status, v.error.code }, { "failed", "FORBIDDEN" })
  t.like(v.error.message, "hyperpod_disable_advanced_features")
  local r, err = dispatch.call(DISABLE, { cluster = EKS, features = { "training_operator" } }, OPERATOR)
  t.eq({ r, err.code }, { nil, "FORBIDDEN" })
  local _, n = FH.since(m)
  t.eq(n, 0)
  t.eq(get("training_operator").status, "enabled")
  -- turning one on is an operator's
  v = update({ cert_manager = true }, OPERATOR)
  t.eq(v.status, "succeeded")
  t.eq(v.result.features.cert_manager.action, "unchanged", "already on: nothing sent")
end)

-- stop_at(prefix): the next phase of a managed-features operation that
-- starts with prefix stops it as a stopping host does (its task cancelled
-- with no cancel request: the record stays running, op.resume continues it)
local function stop_at(prefix, how)
  local off
  off = op.subscribe(function(ev)
    if ev.kind == "operation.phase" and tostring(ev.phase):find(prefix, 1, true) == 1 then
      off()
      if how == "cancel" then
        task.spawn(function() op.cancel(ev.operation_id, ADMIN) end)
      else
        local victim = op.active()[ev.operation_id]
        task.spawn(function() victim:cancel("the host is stopping (the test interrupts it)") end)
      end
    end
  end)
end

t.test("a host stopped mid-chain: the resumed operation finishes the chain, each link made once", function()
  local m = FH.mark()
  stop_at("creating IAM role SM_HP_TieredCkpt_Role_")
  local acc = assert(dispatch.call(UPDATE, { cluster = EKS, tiered_checkpointing = { enabled = true,
    memory_percentage = 30 } }, ADMIN))
  local v = op.wait(acc.operation_id)
  t.eq(v.status, "running", "left running by the stop")
  local mid = get("tiered_checkpointing")
  t.eq(mid.status, "partial", "half built: " .. json.encode(mid.missing))
  t.eq(op.resume(), 1)
  v = op.wait(acc.operation_id)
  t.eq(v.status, "succeeded", json.encode(v.error))
  local s = get("tiered_checkpointing")
  t.eq({ s.status, s.memory_percentage }, { "enabled", 30 })
  local counts = FH.since(m)
  t.eq(counts["sagemaker UpdateCluster"], 1)
  t.eq(counts["iam CreatePolicy"], 1)
  t.eq(counts["iam CreateRole"] or 0, 1, "the role made once (the stop came before or after its create)")
  t.eq(counts["iam AttachRolePolicy"], 1)
  local d = call("sagemaker", "DescribeCluster", { ClusterName = C.hp })
  t.eq(d.TieredStorageConfig, { Mode = "Enable", InstanceMemoryAllocationPercentage = 30 })
  -- the pods' policy: the checkpoints/ prefix of the cluster's data bucket, never s3:* on every bucket
  local arn = "arn:aws:iam::123456789012:policy/SM_HP_TieredCkpt_S3Policy_" .. EKS
  local version = call("iam", "GetPolicy", { PolicyArn = arn }).Policy.DefaultVersionId
  local text = call("iam", "GetPolicyVersion", { PolicyArn = arn, VersionId = version }).PolicyVersion.Document
  local doc = json.decode((text:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end)))
  local s3 = {}
  for _, st in ipairs(doc.Statement) do
    for _, a in ipairs(type(st.Action) == "table" and st.Action or { st.Action }) do
      if a:match("^s3:") then s3[#s3 + 1] = a .. " " .. (type(st.Resource) == "table" and st.Resource[1] or st.Resource) end
    end
  end
  table.sort(s3)
  local bucket = "arn:aws:s3:::hypd-" .. EKS .. "-data-123456789012-us-west-2" -- the tag: the cluster's name
  t.eq(s3, { "s3:AbortMultipartUpload " .. bucket .. "/checkpoints/*", "s3:DeleteObject " .. bucket .. "/checkpoints/*",
    "s3:GetBucketLocation " .. bucket, "s3:GetObject " .. bucket .. "/checkpoints/*", "s3:ListBucket " .. bucket,
    "s3:ListMultipartUploadParts " .. bucket .. "/checkpoints/*", "s3:PutObject " .. bucket .. "/checkpoints/*" })
end)

t.test("a cancelled operation leaves a half-built chain that the next call finishes", function()
  stop_at("creating IAM role hyperpod-karpenter-role-", "cancel")
  local v = update { karpenter = true }
  t.eq(v.status, "cancelled")
  t.eq(get("karpenter").status, "partial")
  local m = FH.mark()
  v = update { karpenter = true }
  t.eq(v.status, "succeeded", json.encode(v.error))
  t.eq(v.result.features.karpenter.before, "partial")
  t.eq(get("karpenter").status, "enabled")
  local counts = FH.since(m)
  t.eq(counts["iam CreatePolicy"], nil, "the policy the first call made is kept")
  t.eq(counts["sagemaker UpdateCluster"], 1)
end)

t.test("a removal cancelled half way is finished by the next disable", function()
  stop_at("deleting IAM role hyperpod-karpenter-role-", "cancel")
  local v = update { karpenter = false }
  t.eq(v.status, "failed", "the child operation was cancelled")
  t.eq(get("karpenter").status, "partial")
  v = update { karpenter = false }
  t.eq(v.status, "succeeded", json.encode(v.error))
  local s = get("karpenter")
  t.eq(s.status, "disabled", json.encode(s.parts))
  t.eq(call("sagemaker", "DescribeCluster", { ClusterName = C.hp }).AutoScaling.Mode, "Disable")
end)

t.test("a link removed by hand is put back alone, and a second call changes nothing", function()
  local k = require("hypd.k8s").connect { cluster = EKS, region = "us-west-2" }
  assert(k:delete("v1", "ServiceAccount", "tiered-storage-sa", { namespace = "default" }))
  local s = get("tiered_checkpointing")
  t.eq(s.status, "partial")
  t.eq(s.missing, { "service account default/tiered-storage-sa annotated eks.amazonaws.com/role-arn" })
  local m = FH.mark()
  local v = update { tiered_checkpointing = true }
  t.eq(v.status, "succeeded")
  local _, n = FH.since(m)
  t.eq(n, 0, "no AWS mutation: only the service account was missing")
  t.eq(FH.k8s_writes(m), { "apply ServiceAccount/tiered-storage-sa" })
  t.eq(get("tiered_checkpointing").status, "enabled")
  m = FH.mark()
  v = update { tiered_checkpointing = { enabled = true, memory_percentage = 30 }, training_operator = true }
  t.eq(v.result.features.tiered_checkpointing.action, "unchanged")
  t.eq(v.result.features.training_operator.action, "unchanged")
  _, n = FH.since(m)
  t.eq({ n, #FH.k8s_writes(m) }, { 0, 0 }, "nothing sent")
end)

t.test("managed Karpenter: a GPU pod against a group at zero gets a node, which goes when idle", function()
  local v = update { karpenter = { enabled = true, consolidate_after = "5m" } }
  t.eq(v.status, "succeeded", json.encode(v.error))
  local k = require("hypd.k8s").connect { cluster = EKS, region = "us-west-2" }
  local pool = assert(k:get("karpenter.sh/v1", "NodePool", "gpu-nodepool"))
  t.eq(pool.spec.disruption.consolidateAfter, "5m")
  local class = assert(k:get("karpenter.sagemaker.amazonaws.com/v1", "HyperpodNodeClass", "gpu-nodeclass"))
  t.eq(class.status.instanceGroups[1].instanceTypes, { "ml.g5.12xlarge" })
  local function group()
    for _, g in ipairs(call("sagemaker", "DescribeCluster", { ClusterName = C.hp }).InstanceGroups) do
      if g.InstanceGroupName == "gpu" then return g end
    end
  end
  t.eq(group().TargetCount, 0, "the GPU group is at zero")
  assert(k:create { apiVersion = "v1", kind = "Pod", metadata = { name = "train-0", namespace = "default",
    annotations = { ["sandbox.hypd.io/run-seconds"] = "600" } },
    spec = { restartPolicy = "Never", nodeSelector = { ["node.kubernetes.io/instance-type"] = "ml.g5.12xlarge" },
      containers = { { name = "main", image = "busybox:1.36", command = { "sh", "-c", "echo training" },
        resources = { limits = { ["nvidia.com/gpu"] = "4" } } } } } })
  local t0 = core.now()
  local joined, ran, gone
  while core.now() - t0 < 3 * 3600 do
    task.sleep(10)
    local p = k:get("v1", "Pod", "train-0", { namespace = "default" })
    local g = group()
    if not joined and p.spec.nodeName then joined = { at = core.now() - t0, node = p.spec.nodeName, target = g.TargetCount } end
    if not ran and p.status.phase == "Succeeded" then ran = core.now() - t0 end
    if ran and g.TargetCount == 0 and not k:get("v1", "Node", joined.node) then gone = core.now() - t0 break end
  end
  t.ok(joined, "the pod got a node")
  t.eq(joined.target, 1, "HyperPod added one node to the group (its target count rose)")
  t.like(joined.node, "^hyperpod%-i%-")
  t.ok(joined.at >= 240 and joined.at <= 600, "the node joined after " .. joined.at .. " s")
  t.ok(ran, "the pod ran to the end")
  t.ok(gone, "the idle node went")
  t.ok(gone - ran >= 300, "not before consolidateAfter (idle " .. (gone - ran) .. " s)")
  local reasons = {}
  for _, e in ipairs(k:list("v1", "Event", { namespace = "default" })) do reasons[e.reason] = true end
  t.ok(reasons.Nominated and reasons.DisruptionTerminating, "Karpenter's Nominated and DisruptionTerminating events")
end)

t.test("a pod that no group's instance type can take adds no node", function()
  local k = require("hypd.k8s").connect { cluster = EKS, region = "us-west-2" }
  assert(k:create { apiVersion = "v1", kind = "Pod", metadata = { name = "too-big", namespace = "default" },
    spec = { containers = { { name = "main", image = "busybox:1.36",
      resources = { limits = { ["nvidia.com/gpu"] = "16" } } } } } })
  task.sleep(900)
  local p = k:get("v1", "Pod", "too-big", { namespace = "default" })
  t.eq(p.spec.nodeName, nil)
  for _, g in ipairs(call("sagemaker", "DescribeCluster", { ClusterName = C.hp }).InstanceGroups) do
    if g.InstanceGroupName == "gpu" then t.eq(g.TargetCount, 0) end
  end
  assert(k:delete("v1", "Pod", "too-big", { namespace = "default" }))
end)

t.test("a plan to turn Karpenter off lists what it would delete and change, through the destructive tool", function()
  local m = FH.mark()
  local rows = plan { karpenter = false }
  local n = "feat-a"
  has(rows, "delete k8s:nodepool gpu-nodepool")
  has(rows, "delete k8s:hyperpodnodeclass gpu-nodeclass")
  has(rows, "change sagemaker:cluster-setting " .. C.hp .. " AutoScaling")
  has(rows, "delete iam:role-policy-attachment SageMakerHyperPodKarpenterPolicy-" .. n .. " on hyperpod-karpenter-role-" .. n)
  has(rows, "delete iam:role hyperpod-karpenter-role-" .. n)
  has(rows, "delete iam:policy SageMakerHyperPodKarpenterPolicy-" .. n)
  local _, total = FH.since(m)
  t.eq({ total, #FH.k8s_writes(m) }, { 0, 0 }, "nothing sent")
  t.eq(get("karpenter").status, "enabled")
end)

t.test("a KubeRay operator someone else installed reads as on, and turning it off keeps it", function()
  local k = require("hypd.k8s").connect { cluster = EKS, region = "us-west-2" }
  -- made the way Helm makes them (hypd.k8s would mark them as hypd's): straight into the cluster's store
  local cl = require("sandbox.k8s").cluster("us-west-2", EKS)
  local helm = { ["app.kubernetes.io/managed-by"] = "Helm" }
  assert(cl:create(cl.reg:find("", "v1", "namespaces"), { metadata = { name = "kuberay-system", labels = helm } }))
  assert(cl:create(cl.reg:find("apps", "v1", "deployments"), { metadata = { name = "kuberay-operator",
    namespace = "kuberay-system", labels = helm }, spec = { replicas = 1,
      selector = { matchLabels = { app = "kuberay" } }, template = { metadata = { labels = { app = "kuberay" } },
        spec = { containers = { { name = "op", image = "quay.io/kuberay/operator:v1.4.2" } } } } } }))
  local s = get("kuberay_operator")
  t.eq({ s.enabled, s.source }, { true, "kubernetes" }, json.encode(s))
  t.like(s.note, "Helm")
  local m = FH.mark()
  local v = update { kuberay_operator = false }
  t.eq(v.status, "succeeded", json.encode(v.error))
  t.eq(v.result.features.kuberay_operator.action, "kept")
  t.eq(#FH.k8s_writes(m), 0, "nothing deleted")
  t.ok(k:get("apps/v1", "Deployment", "kuberay-operator", { namespace = "kuberay-system" }), "still there")
  assert(k:delete("apps/v1", "Deployment", "kuberay-operator", { namespace = "kuberay-system" }))
  assert(k:delete("v1", "Namespace", "kuberay-system"))
  task.sleep(5)
  t.eq(get("kuberay_operator").status, "disabled")
end)

t.test("the sandbox's inference add-on refuses to be made without its required configuration", function()
  local _, err = require("hypd.aws").try("eks", "CreateAddon", { clusterName = EKS,
    addonName = "amazon-sagemaker-hyperpod-inference" }, OPTS)
  t.eq(err.code, "InvalidParameterException")
  t.like(err.message, "executionRoleArn")
end)

t.test("the status tool follows an operation with wait_seconds", function()
  local acc = assert(dispatch.call(UPDATE, { cluster = EKS, kuberay_operator = true }, ADMIN))
  local r = assert(dispatch.call(GET, { cluster = EKS, wait_seconds = 60 }, ADMIN))
  t.eq(r.operation.operation_id, acc.operation_id)
  t.ok(r.operation.phase ~= nil)
  op.wait(acc.operation_id)
  r = assert(dispatch.call(GET, { cluster = EKS, features = { "kuberay_operator" } }, ADMIN))
  t.eq(r.operation.status, "succeeded")
  t.eq(r.features.kuberay_operator.status, "enabled")
  t.eq(r.features.karpenter, nil, "only the features asked for")
end)

t.cleanup(function() srv:stop() end)
