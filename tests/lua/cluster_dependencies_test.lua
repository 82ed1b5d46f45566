-- cluster_configure_dependencies and cluster_get_dependency_status against
-- the in-process sandbox (virtual clock), on EKS clusters made by direct
-- calls: a plan lists every item and sends nothing; afterwards every item is
-- present (read back with AWS calls and the Kubernetes client, the IRSA
-- role's trust proven with AssumeRoleWithWebIdentity); a re-run sends no
-- mutation (the sandbox's audit log, hypd's Kubernetes audit); a deleted
-- add-on, a changed DaemonSet and another service account role are reported
-- and a re-run fixes exactly them; a failing item does not stop the others;
-- the KubeRay operator when asked; an imported cluster keeps what it has
-- unless adopt_existing.
local t = require "hypd.tap"
local O = dofile("tests/lua/outside_helpers.lua") -- the in-process sandbox and the tools
local E = dofile("tests/lua/eks_helpers.lua")
local srv = O.srv
local dispatch = require "hypd.tool.dispatch"
local core, json, op, store, task = require "hypd.core", require "hypd.json", require "hypd.tool.operations",
  require "hypd.store", require "hypd.task"
local k8s = require "hypd.k8s"
local sys = require "hypd.sys"
local call, mark, since = O.call, E.mark, E.since

local ADDONS = { "vpc-cni", "coredns", "kube-proxy", "eks-pod-identity-agent", "cert-manager", "metrics-server",
  "aws-mountpoint-s3-csi-driver" }
local OBJECTS = { "DaemonSet kube-system/hyperpod-dependencies-nvidia-device-plugin",
  "DaemonSet kube-system/hyperpod-dependencies-aws-efa-k8s-device-plugin", "Namespace aws-hyperpod",
  "ServiceAccount aws-hyperpod/deep-health-check-service-account", "ClusterRole deep-health-check-service-account-role",
  "ClusterRoleBinding deep-health-check-service-account-role-binding", "ClusterRole health-monitoring-agent",
  "ServiceAccount aws-hyperpod/health-monitoring-agent", "ClusterRoleBinding health-monitoring-agent",
  "DaemonSet aws-hyperpod/health-monitoring-agent", "DaemonSet aws-hyperpod/health-monitoring-agent-non-nvidia" }

-- k8s_writes(m) -> {"verb Kind/name" = n}, total: the Kubernetes writes hypd audited after mark m
local function k8s_writes(m)
  local out, n = {}, 0
  for _, e in ipairs(store.events(m, 1000000) or {}) do
    if e.kind == "audit" and e.data.k8s and e.data.class ~= "read" and not e.data.refused then
      out[e.data.k8s], n = (out[e.data.k8s] or 0) + 1, n + 1
    end
  end
  return out, n
end

-- run(params) -> the finished operation's view
local function run(params)
  local acc, err = dispatch.call("cluster_configure_dependencies", params or {}, E.WHO)
  t.ok(acc and acc.operation_id, json.encode(err))
  return op.wait(acc.operation_id)
end

local function status(params)
  local out, err = dispatch.call("cluster_get_dependency_status", params or {}, E.READ)
  t.ok(out, json.encode(err))
  local by = {}
  for _, i in ipairs(out and out.items or {}) do by[i.item] = i end
  return out or {}, by
end

local function plan(params)
  local p = { plan = true }
  for k, v in pairs(params or {}) do p[k] = v end
  local out, err = dispatch.call("cluster_configure_dependencies", p, E.WHO)
  t.ok(out, json.encode(err))
  local rows = {}
  for _, e in ipairs(out and out.plan or {}) do rows[#rows + 1] = e.action .. " " .. e.type .. " " .. e.name end
  return rows, out
end

local function conn(name) return k8s.connect { cluster = name, region = "us-west-2" } end

local fresh -- the DescribeCluster of the cluster the first tests configure

t.test("a plan on a fresh cluster lists every item in order and sends no mutation", function()
  fresh = O.eks("deps", 71)
  assert(dispatch.call("cluster_import", { cluster = "deps" }, E.WHO))
  local m = mark()
  local rows = plan()
  local issuer = fresh.identity.oidc.issuer:gsub("^https://", "")
  local want = { "create iam:oidc-provider " .. issuer, "create iam:role hypd-deps-s3-csi",
    "create iam:role-policy hypd-mountpoint-s3 on hypd-deps-s3-csi" }
  for _, a in ipairs(ADDONS) do want[#want + 1] = "create eks:addon " .. a .. " on deps" end
  for _, o in ipairs(OBJECTS) do
    local kind, name = o:match("^(%S+) (.+)$")
    want[#want + 1] = "create kubernetes:" .. kind:lower() .. " " .. name
  end
  t.eq(rows, want)
  local counts, n = since(m)
  t.eq(n, 0, "no AWS mutation: " .. json.encode(counts))
  local writes, wn = k8s_writes(m)
  t.eq(wn, 0, "no Kubernetes write: " .. json.encode(writes))
end)

local took
t.test("afterwards every item is present, read back with AWS calls and the Kubernetes client", function()
  local started = core.now()
  local conflicts = {}
  local restore = E.swap("eks", "CreateAddon", function(original, ctx, input)
    conflicts[#conflicts + 1] = input.resolveConflicts
    return original(ctx, input)
  end)
  local v = run()
  restore()
  took = core.now() - started
  t.eq(conflicts, { "NONE", "NONE", "NONE", "NONE", "NONE", "NONE", "NONE" },
    "an imported cluster's own settings are not overwritten (resolveConflicts NONE)")
  t.eq(v.status, "succeeded", json.encode(v.error))
  local arn = "arn:aws:iam::123456789012:oidc-provider/" .. fresh.identity.oidc.issuer:gsub("^https://", "")
  local p = call("iam", "GetOpenIDConnectProvider", { OpenIDConnectProviderArn = arn })
  t.eq({ p.ClientIDList, p.ThumbprintList }, { { "sts.amazonaws.com" }, { "9e99a48a9960b14926bb7f3b02e22da2b0ab7280" } })
  for _, a in ipairs(ADDONS) do
    local d = call("eks", "DescribeAddon", { clusterName = "deps", addonName = a }).addon
    local vs = call("eks", "DescribeAddonVersions", { addonName = a, kubernetesVersion = "1.34" }).addons[1]
    local default
    for _, x in ipairs(vs.addonVersions) do
      for _, c in ipairs(x.compatibilities) do
        if c.clusterVersion == "1.34" and c.defaultVersion then default = x.addonVersion end
      end
    end
    t.eq({ a, d.status, d.addonVersion, d.tags["hypd:managed-by"] }, { a, "ACTIVE", default, "hypd" })
  end
  local role = call("iam", "GetRole", { RoleName = "hypd-deps-s3-csi" }).Role
  local s3 = call("eks", "DescribeAddon", { clusterName = "deps", addonName = "aws-mountpoint-s3-csi-driver" }).addon
  t.eq(s3.serviceAccountRoleArn, role.Arn, "the driver's add-on has its IRSA role")
  local k = conn("deps")
  -- (the add-on makes its account as it becomes ACTIVE: the sandbox's controller a moment after)
  local sa = assert(k:wait("v1", "ServiceAccount", "s3-csi-driver-sa", function(o) return o end,
    { namespace = "kube-system", timeout = 10 }))
  t.eq(sa.metadata.annotations["eks.amazonaws.com/role-arn"], role.Arn, "the service account carries the role")
  for _, o in ipairs(OBJECTS) do
    local kind, ns, name = o:match("^(%S+) ([^/]+)/(.+)$")
    if not kind then kind, name = o:match("^(%S+) (.+)$") end
    local api = ({ DaemonSet = "apps/v1", ClusterRole = "rbac.authorization.k8s.io/v1",
      ClusterRoleBinding = "rbac.authorization.k8s.io/v1" })[kind] or "v1"
    local live = k:get(api, kind, name, { namespace = ns })
    t.ok(live, o .. " exists")
    local mf = {}
    for _, f in ipairs(live and live.metadata.managedFields or {}) do mf[#mf + 1] = f.manager .. " " .. f.operation end
    t.ok(live and live.metadata.labels["app.kubernetes.io/managed-by"] == "hypd", o .. " is labelled hypd's")
    t.ok(table.concat(mf, ","):find("hypd Apply", 1, true), o .. " was applied server-side by hypd: " ..
      table.concat(mf, ","))
  end
  local hma = assert(k:get("apps/v1", "DaemonSet", "health-monitoring-agent", { namespace = "aws-hyperpod" }))
  t.eq(hma.spec.template.spec.containers[1].image,
    "905418368575.dkr.ecr.us-west-2.amazonaws.com/hyperpod-health-monitoring-agent:1.0.935.0_1.0.282.0")
  local st = status()
  t.eq({ st.configured, st.counts.present, #st.items }, { true, 13, 13 }, json.encode(st.counts))
end)

t.test("the add-ons are made together: the stage takes one add-on's time, not seven", function()
  t.ok(took and took <= 200, "configured in " .. tostring(took) .. " simulated seconds (each add-on takes 60 to 180)")
  print(string.format("# cluster_configure_dependencies on a fresh cluster: %.0f simulated seconds", took or -1))
end)

local JWT_HEAD = (sys.b64encode(json.encode { alg = "RS256", kid = "k1" }):gsub("+", "-"):gsub("/", "_"):gsub("=", ""))
local function jwt(claims)
  local b = sys.b64encode(json.encode(claims)):gsub("+", "-"):gsub("/", "_"):gsub("=", "")
  return JWT_HEAD .. "." .. b .. ".c2lnbmF0dXJl"
end

t.test("the IRSA role trusts exactly kube-system/s3-csi-driver-sa through the cluster's OIDC provider", function()
  local role = call("iam", "GetRole", { RoleName = "hypd-deps-s3-csi" }).Role
  local function assume(sub)
    return require("hypd.aws").try("sts", "AssumeRoleWithWebIdentity", { RoleArn = role.Arn, RoleSessionName = "pod",
      WebIdentityToken = jwt { iss = fresh.identity.oidc.issuer, sub = sub, aud = "sts.amazonaws.com",
        exp = math.floor(core.now()) + 3600 } }, O.OPTS)
  end
  local out, err = assume("system:serviceaccount:kube-system:s3-csi-driver-sa")
  t.ok(out, json.encode(err))
  t.eq(out and out.AssumedRoleUser.Arn, "arn:aws:sts::123456789012:assumed-role/hypd-deps-s3-csi/pod")
  local _, err2 = assume("system:serviceaccount:default:someone-else")
  t.eq(err2 and err2.code, "AccessDenied", "another service account is refused")
  local pol = O.call("iam", "GetRolePolicy", { RoleName = "hypd-deps-s3-csi", PolicyName = "hypd-mountpoint-s3" })
  E.has(pol.PolicyDocument, "s3%3AListBucket", "the inline policy")
end)

t.test("a re-run sends no AWS mutation and no Kubernetes write; a plan is empty", function()
  local m = mark()
  local v = run()
  t.eq(v.status, "succeeded", json.encode(v.error))
  local counts, n = since(m)
  t.eq(n, 0, "no AWS mutation: " .. json.encode(counts))
  local writes, wn = k8s_writes(m)
  t.eq(wn, 0, "no Kubernetes write: " .. json.encode(writes))
  local acts = {}
  for _, i in ipairs(v.result.items) do acts[i.action] = (acts[i.action] or 0) + 1 end
  t.eq(acts, { unchanged = 13 })
  t.eq(plan(), {})
end)

t.test("a deleted add-on is reported missing, planned alone, and a re-run creates only it", function()
  call("eks", "DeleteAddon", { clusterName = "deps", addonName = "coredns" })
  local _, by = status()
  t.eq(by["addon:coredns"].state, "pending", "DELETING is pending")
  while require("hypd.aws").try("eks", "DescribeAddon", { clusterName = "deps", addonName = "coredns" }, O.OPTS) do
    task.sleep(15)
  end
  local st
  st, by = status()
  t.eq({ st.configured, by["addon:coredns"].state, by["addon:vpc-cni"].state }, { false, "missing", "present" })
  t.eq(plan(), { "create eks:addon coredns on deps" })
  local m = mark()
  t.eq(run().status, "succeeded")
  local counts = since(m)
  t.eq(counts, { ["eks CreateAddon"] = 1 })
  t.eq(select(2, k8s_writes(m)), 0, "no Kubernetes write")
  t.eq(status().configured, true)
end)

t.test("a changed DaemonSet is reported drifted with what differs, and a re-run applies only it", function()
  local k = conn("deps")
  assert(k:patch("apps/v1", "DaemonSet", "hyperpod-dependencies-nvidia-device-plugin", { spec = { template = { spec = {
    containers = { { name = "nvidia-device-plugin-ctr", image = "nvcr.io/nvidia/k8s-device-plugin:v0.14.0" } } } } } },
    { namespace = "kube-system", type = "strategic", field_manager = "kubectl-edit" }))
  local _, by = status()
  local nv = by["nvidia-device-plugin"]
  t.eq(nv.state, "drifted")
  local d = nv.objects[1].differs or {}
  t.eq({ d[1] and d[1].path, d[1] and d[1].have, d[1] and d[1].want },
    { "spec.template.spec.containers[nvidia-device-plugin-ctr].image", "nvcr.io/nvidia/k8s-device-plugin:v0.14.0",
      "nvcr.io/nvidia/k8s-device-plugin:v0.16.1" })
  local rows, p = plan()
  t.eq(rows, { "change kubernetes:daemonset kube-system/hyperpod-dependencies-nvidia-device-plugin" })
  local ch = p.plan[1].changes["spec.template.spec.containers[0].image"] or {}
  t.eq({ ch.from, ch.to }, { "nvcr.io/nvidia/k8s-device-plugin:v0.14.0", "nvcr.io/nvidia/k8s-device-plugin:v0.16.1" })
  local m = mark()
  t.eq(run().status, "succeeded")
  local _, n = since(m)
  t.eq(n, 0, "no AWS mutation")
  t.eq(k8s_writes(m), { ["apply DaemonSet/hyperpod-dependencies-nvidia-device-plugin"] = 1 })
  local live = k:get("apps/v1", "DaemonSet", "hyperpod-dependencies-nvidia-device-plugin", { namespace = "kube-system" })
  t.eq(live.spec.template.spec.containers[1].image, "nvcr.io/nvidia/k8s-device-plugin:v0.16.1")
  t.eq(status().configured, true)
end)

t.test("the S3 CSI add-on given another role is drifted (serviceAccountRoleArn) and updated back alone", function()
  local other = call("iam", "CreateRole", { RoleName = "someone-s3", AssumeRolePolicyDocument = json.encode {
    Version = "2012-10-17", Statement = { { Effect = "Allow", Principal = { Service = "eks.amazonaws.com" },
    Action = "sts:AssumeRole" } } } }).Role.Arn
  call("eks", "UpdateAddon", { clusterName = "deps", addonName = "aws-mountpoint-s3-csi-driver",
    serviceAccountRoleArn = other })
  while call("eks", "DescribeAddon", { clusterName = "deps", addonName = "aws-mountpoint-s3-csi-driver" }).addon.status
      ~= "ACTIVE" do
    task.sleep(15)
  end
  local _, by = status()
  local s3 = by["addon:aws-mountpoint-s3-csi-driver"]
  t.eq({ s3.state, s3.differs and s3.differs[1].field, s3.differs and s3.differs[1].have }, { "drifted",
    "serviceAccountRoleArn", other })
  local m = mark()
  t.eq(run().status, "succeeded")
  t.eq(since(m), { ["eks UpdateAddon"] = 1 })
  local role = call("iam", "GetRole", { RoleName = "hypd-deps-s3-csi" }).Role.Arn
  t.eq(call("eks", "DescribeAddon", { clusterName = "deps", addonName = "aws-mountpoint-s3-csi-driver" }).addon
    .serviceAccountRoleArn, role)
  local st = status()
  t.eq(st.configured, true, json.encode(st.counts) .. " " .. json.encode(st.items))
end)

t.test("a failing add-on does not stop the others: reported failed with its reason; a re-run makes only it", function()
  O.eks("deps2", 72)
  assert(dispatch.call("cluster_import", { cluster = "deps2" }, E.WHO))
  local restore = E.swap("eks", "CreateAddon", function(original, ctx, input)
    if input.addonName == "metrics-server" then
      ctx.error("InvalidParameterException", "Addon metrics-server cannot be created now (the test refuses it)")
    end
    return original(ctx, input)
  end)
  local v = run { cluster = "deps2", kuberay = true }
  restore()
  t.eq(v.status, "failed")
  E.has(v.error and v.error.message, "1 of the dependencies of deps2 failed: addon:metrics-server " ..
    "(InvalidParameterException: Addon metrics-server cannot be created now", "the error")
  local st, by = status { cluster = "deps2" }
  t.eq({ by["addon:metrics-server"].state, st.counts.present, st.kuberay }, { "failed", 13, true })
  E.has(by["addon:metrics-server"].reason, "cannot be created now", "the reason")
  local m = mark()
  v = run { cluster = "deps2", kuberay = true }
  t.eq(v.status, "succeeded", json.encode(v.error))
  t.eq(since(m), { ["eks CreateAddon"] = 1 })
  t.eq(status({ cluster = "deps2" }).configured, true)
end)

t.test("kuberay = true: the operator's CRDs serve ray.io kinds, its Deployment and RBAC are hypd's", function()
  local k = conn("deps2")
  local _, by = status { cluster = "deps2" }
  local kr = by["kuberay-operator"]
  t.eq(kr and kr.state, "present")
  local items, err = k:list("ray.io/v1", "RayJob", { namespace = "default" })
  t.ok(items, "RayJob is served: " .. json.encode(err))
  local d = assert(k:get("apps/v1", "Deployment", "kuberay-operator", { namespace = "kuberay-operator" }))
  t.eq({ d.spec.template.spec.containers[1].image, d.metadata.labels["app.kubernetes.io/managed-by"] },
    { "quay.io/kuberay/operator:v1.6.1", "hypd" })
  t.ok(k:get("rbac.authorization.k8s.io/v1", "ClusterRole", "kuberay-operator"), "its ClusterRole")
  local _, none = status { cluster = "deps" }
  t.eq(none["kuberay-operator"], nil, "not part of a cluster that did not ask for it")
end)

t.test("an imported cluster keeps what it has: foreign add-ons, same-named objects, a device plugin elsewhere",
  function()
    local c = O.eks("legacy", 73)
    call("eks", "CreateAddon", { clusterName = "legacy", addonName = "vpc-cni", addonVersion = "v1.19.5-eksbuild.3" })
    local k = conn("legacy")
    assert(k:create { apiVersion = "apps/v1", kind = "DaemonSet", metadata = { name = "nvidia-device-plugin-daemonset",
      namespace = "kube-system", labels = { ["app.kubernetes.io/managed-by"] = "Helm" } },
      spec = { selector = { matchLabels = { name = "nv" } }, template = { metadata = { labels = { name = "nv" } },
        spec = { containers = { { name = "ctr", image = "nvcr.io/nvidia/k8s-device-plugin:v0.15.0" } } } } } })
    assert(k:create { apiVersion = "rbac.authorization.k8s.io/v1", kind = "ClusterRole",
      metadata = { name = "health-monitoring-agent", labels = { ["app.kubernetes.io/managed-by"] = "Helm" } },
      rules = { { apiGroups = { "" }, resources = { "nodes" }, verbs = { "get" } } } })
    -- made with hypd.k8s's create, so labelled hypd's: relabel them as someone else's
    for _, o in ipairs { { "apps/v1", "DaemonSet", "nvidia-device-plugin-daemonset", "kube-system" },
      { "rbac.authorization.k8s.io/v1", "ClusterRole", "health-monitoring-agent" } } do
      assert(k:patch(o[1], o[2], o[3], { metadata = { labels = { ["app.kubernetes.io/managed-by"] = "Helm" } } },
        { namespace = o[4], field_manager = "helm" }))
    end
    while call("eks", "DescribeAddon", { clusterName = "legacy", addonName = "vpc-cni" }).addon.status ~= "ACTIVE" do
      task.sleep(15)
    end
    assert(dispatch.call("cluster_import", { cluster = "legacy" }, E.WHO))
    local v = run { cluster = "legacy" }
    t.eq(v.status, "succeeded", json.encode(v.error))
    local acts = {}
    for _, i in ipairs(v.result.items) do acts[i.item] = i.action end
    t.eq({ acts["addon:vpc-cni"], acts["nvidia-device-plugin"], acts["health-monitoring-agent"], acts["addon:coredns"] },
      { "kept", "kept", "created", "created" })
    local vpc = call("eks", "DescribeAddon", { clusterName = "legacy", addonName = "vpc-cni" }).addon
    t.eq({ vpc.addonVersion, vpc.tags["hypd:managed-by"] }, { "v1.19.5-eksbuild.3", nil }, "vpc-cni is untouched")
    t.eq(k:get("apps/v1", "DaemonSet", "hyperpod-dependencies-nvidia-device-plugin", { namespace = "kube-system" }), nil,
      "no second NVIDIA device plugin")
    local cr = assert(k:get("rbac.authorization.k8s.io/v1", "ClusterRole", "health-monitoring-agent"))
    t.eq({ cr.metadata.labels["app.kubernetes.io/managed-by"], #cr.rules }, { "Helm", 1 }, "the ClusterRole is kept")
    local st, by = status { cluster = "legacy" }
    t.eq({ by["addon:vpc-cni"].state, by["addon:vpc-cni"].owner }, { "present", "other" })
    t.eq({ by["nvidia-device-plugin"].state, by["nvidia-device-plugin"].owner }, { "present", "other" })
    E.has(by["nvidia-device-plugin"].kept, "runs as DaemonSet kube-system/nvidia-device-plugin-daemonset", "kept")
    local hma = {}
    for _, o in ipairs(by["health-monitoring-agent"].objects) do hma[o.object] = o.owner end
    t.eq(hma["ClusterRole health-monitoring-agent"], "other")
    t.eq(st.configured, true, "what the cluster has counts as present")
    -- asked to adopt: same-named objects are applied over; a plugin elsewhere is still never doubled
    local m = mark()
    v = run { cluster = "legacy", adopt_existing = true }
    t.eq(v.status, "succeeded", json.encode(v.error))
    t.eq(k8s_writes(m), { ["apply ClusterRole/health-monitoring-agent"] = 1 })
    cr = assert(k:get("rbac.authorization.k8s.io/v1", "ClusterRole", "health-monitoring-agent"))
    t.eq({ cr.metadata.labels["app.kubernetes.io/managed-by"], #cr.rules }, { "hypd", 3 })
    t.eq(since(m), {}, "vpc-cni's version is offered for Kubernetes 1.34: adopting it changes nothing")
    t.ok(c.arn, "the cluster")
  end)

t.test("cluster_get_dependency_status with wait_seconds answers when the operation's phase changes", function()
  O.eks("deps3", 74)
  local acc = assert(dispatch.call("cluster_configure_dependencies", { cluster = "deps3" }, E.WHO))
  local first = op.get(acc.operation_id).phase
  local out = status { cluster = "deps3", wait_seconds = 300 }
  t.ok(out.operation and out.operation.operation_id == acc.operation_id, "the running operation is shown")
  t.ok(out.operation and (out.operation.phase ~= first or out.operation.status ~= "running"),
    "it answered after a change: " .. tostring(first) .. " -> " .. tostring(out.operation and out.operation.phase))
  t.eq(op.wait(acc.operation_id).status, "succeeded")
end)

t.test("on a cluster cluster_create_eks made, add-ons replace EKS's self-managed copies (resolveConflicts OVERWRITE)",
  function()
    local acc = assert(dispatch.call("cluster_create_eks", { cluster_tag = "made", vpc_cidr = "10.76.0.0/16" }, E.WHO))
    t.eq(op.wait(acc.operation_id).status, "succeeded")
    local conflicts = {}
    local restore = E.swap("eks", "CreateAddon", function(original, ctx, input)
      conflicts[input.resolveConflicts] = (conflicts[input.resolveConflicts] or 0) + 1
      return original(ctx, input)
    end)
    local v = run { cluster = "hypd-made" }
    restore()
    t.eq(v.status, "succeeded", json.encode(v.error))
    t.eq(conflicts, { OVERWRITE = 7 })
    local role = call("iam", "GetRole", { RoleName = "hypd-made-s3-csi" }).Role
    t.eq(E.tags_of(role.Tags)["hypd:cluster-tag"], "made", "the role carries the cluster's tag")
    t.eq(status({ cluster = "hypd-made" }).configured, true)
  end)

t.test("a plan for a cluster that does not exist yet (cluster_create's) lists every item and sends nothing", function()
  local m = mark()
  local rows, out = plan { cluster = "hypd-later", kuberay = true }
  t.eq(#rows, 3 + #ADDONS + #OBJECTS + 11, table.concat(rows, "\n"))
  t.eq(rows[1], "create iam:oidc-provider the issuer of hypd-later")
  t.eq(rows[2], "create iam:role hypd-later-s3-csi")
  local s3 = out.plan[3 + #ADDONS]
  t.eq({ s3.name, s3.fields.serviceAccountRoleArn }, { "aws-mountpoint-s3-csi-driver on hypd-later",
    "planned:iam:role:hypd-later-s3-csi" })
  t.eq(select(2, since(m)), 0, "no AWS mutation")
  t.eq(select(2, k8s_writes(m)), 0, "no Kubernetes write")
  local acc, err = dispatch.call("cluster_configure_dependencies", { cluster = "hypd-later" }, E.WHO)
  t.eq(err, nil, "a real call is an operation")
  local v = op.wait(acc.operation_id)
  t.eq({ v.status, v.error and v.error.code }, { "failed", "NOT_FOUND" }, "which finds no such cluster")
end)

t.test("stages 2 and 3 run under the IAM policy hypd iam-policy prints for their tools", function()
  O.eks("policed", 75)
  -- an imported cluster is not named as hypd names its own: its ARN is given, as hypd iam-policy --resources does
  local doc = assert(require("hypd.iam_policy").document { tools = { "cluster_import", "cluster_configure_dependencies",
    "cluster_get_dependency_status" }, resources = { "arn:aws:eks:us-west-2:123456789012:cluster/policed" } })
  local function set(d)
    return assert(require("hypd.http").request { method = "POST", url = "http://127.0.0.1:" .. srv.port ..
      "/_sandbox/policy", headers = { ["content-type"] = "application/json" },
      body = json.encode { policy = d or json.null } }).status
  end
  t.eq(set(doc), 200)
  local imp, ierr = dispatch.call("cluster_import", { cluster = "policed" }, E.WHO)
  local v = imp and run { cluster = "policed", kuberay = true }
  local st = imp and status { cluster = "policed" }
  set(nil)
  t.ok(imp, json.encode(ierr))
  t.eq(v and v.status, "succeeded", json.encode(v and v.error))
  t.eq(st and st.configured, true)
end)

t.test("without a cluster and none active the call is refused, naming the field", function()
  local clusters = require "hypd.clusters"
  local act = clusters.active()
  store.delete(clusters.KEY)
  local out, err = dispatch.call("cluster_configure_dependencies", {}, E.WHO)
  t.eq(out, nil)
  t.eq({ err and err.code, err and err.fields and err.fields[1].field }, { "VALIDATION", "cluster" })
  if act then clusters.set_active(act) end
end)

t.cleanup(function() srv:stop() end)
