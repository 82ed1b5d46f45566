-- cluster/_deps: stage 3 of provisioning, what an EKS cluster needs before
-- HyperPod nodes and the managed features can use it; the catalog, the
-- names, and how the actual state of each item is read and judged. What
-- the steps of cluster_configure_dependencies call is in
-- cluster/_deps_steps; its status tool, cluster_get_dependency_status, reads through status() here.
--
-- The items, for one EKS cluster:
--   oidc-provider             the IAM OIDC provider of the cluster's issuer
--                             (DescribeCluster identity.oidc.issuer), client
--                             id sts.amazonaws.com, the issuer CA's thumbprint
--   iam-role                  hypd-<tag>-s3-csi (hypd-<eks name>-s3-csi for a
--                             cluster without a hypd tag): the Mountpoint S3
--                             CSI driver's IRSA role, trusting exactly the
--                             service account kube-system/s3-csi-driver-sa
--                             through that provider, with the S3 access the
--                             driver needs (inline policy hypd-mountpoint-s3)
--   addon:<name>              the EKS add-ons vpc-cni, coredns, kube-proxy,
--                             eks-pod-identity-agent, cert-manager,
--                             metrics-server, aws-mountpoint-s3-csi-driver
--   nvidia-device-plugin, efa-device-plugin, deep-health-check,
--   health-monitoring-agent   the HyperPod node dependencies, Kubernetes
--                             objects from lua/manifests/<name>.yaml
--   kuberay-operator          when asked (kuberay = true)
--   aws-load-balancer-controller  when asked (load_balancer_controller =
--                             true): the AWS Load Balancer Controller as its
--                             Helm chart installs it (lua/manifests), after
--                             the add-ons (its webhook certificate comes from
--                             cert-manager), with its IRSA role
--                             hypd-<tag>-lb-controller trusting exactly
--                             kube-system/aws-load-balancer-controller, with
--                             the controller's IAM policy (inline,
--                             hypd-aws-load-balancer-controller). It is
--                             what gives a LoadBalancer Service of type
--                             external (an NLB) its address; EKS offers no
--                             add-on for it.
--
-- IRSA rather than Pod Identity for the S3 CSI driver: every version of the
-- add-on EKS offers takes serviceAccountRoleArn (Pod Identity needs driver
-- v2), the OIDC provider made here serves it, and it is how the HyperPod
-- tooling (and InstantStart's SM_HP_S3_CSI_ROLE_<eks>) wires the driver.
--
-- Each item's state: present, missing, drifted (what differs), failed (the
-- reason), pending (an add-on EKS is creating, updating or deleting). The
-- rule for what hypd did not make (an imported cluster's add-ons, objects
-- of the same name, a device plugin running under another name): it is
-- kept as it is and reported (owner "other", with what hypd would change),
-- never replaced, unless the call asks with adopt_existing = true; then
-- add-ons are updated (never deleted) and same-named objects applied over
-- (server-side apply, forced). A workload that does the same job under
-- another name (another NVIDIA or EFA device plugin, health agent, KubeRay
-- operator) is never doubled: the component is left out.
local Names = require "_names"
local errors, json = hypd.errors, hypd.json
local A = require "_eks_addon"

local M = {}

M.MANAGED_TAG, M.MANAGED = "hypd:managed-by", "hypd" -- on the add-ons and the role hypd makes here
M.MANAGED_BY = "app.kubernetes.io/managed-by"        -- the label hypd.k8s puts on what it applies
-- the SHA-1 of the root CA of oidc.eks.<region>.amazonaws.com's chain, as
-- eksctl computes it; IAM validates EKS issuers against its own trusted CAs
M.THUMBPRINT = "9e99a48a9960b14926bb7f3b02e22da2b0ab7280"
M.ADDONS = { "vpc-cni", "coredns", "kube-proxy", "eks-pod-identity-agent", "cert-manager", "metrics-server",
  "aws-mountpoint-s3-csi-driver" }
M.S3_CSI = require("_s3_grant").ADDON
M.S3_SA_NAMESPACE, M.S3_SA = "kube-system", "s3-csi-driver-sa"
M.S3_POLICY = require("_s3_grant").POLICY_NAME
M.ROLE_ANNOTATION = "eks.amazonaws.com/role-arn"
M.ADDON_POLL, M.ADDON_LIMIT = 15, 20 * 60 -- seconds between add-on checks; give up after

-- the Kubernetes components, in the order they are applied; image: what a
-- workload doing the same job runs (found under another name, it is kept)
M.COMPONENTS = {
  { name = "nvidia-device-plugin", label = "NVIDIA device plugin", image = "k8s-device-plugin:" },
  { name = "efa-device-plugin", label = "EFA device plugin", image = "aws-efa-k8s-device-plugin:" },
  { name = "deep-health-check", label = "deep-health-check RBAC" },
  { name = "health-monitoring-agent", label = "health monitoring agent", image = "hyperpod-health-monitoring-agent:" },
  { name = "kuberay-operator", label = "KubeRay operator", image = "kuberay/operator:", optional = "kuberay" },
  { name = "aws-load-balancer-controller", label = "AWS Load Balancer Controller",
    image = "aws-load-balancer-controller:", optional = "load_balancer_controller", after_addons = true },
}
-- the optional components' parameters (cluster_configure_dependencies and its status tool)
M.OPTIONAL = { "kuberay", "load_balancer_controller" }
M.LBC_NAMESPACE, M.LBC_SA = "kube-system", "aws-load-balancer-controller"
M.LBC_POLICY = "hypd-aws-load-balancer-controller"
M.CERT_CRD = "certificates.cert-manager.io"

-- the health monitoring agent's ECR account by region (the chart's helper);
-- other regions take us-east-1's
local HMA_ACCOUNTS = { ["us-east-1"] = "767398015722", ["us-west-2"] = "905418368575",
  ["us-east-2"] = "851725546812", ["us-west-1"] = "011528288828", ["eu-central-1"] = "211125453373",
  ["eu-north-1"] = "654654141839", ["eu-west-1"] = "533267293120", ["eu-west-2"] = "011528288831",
  ["ap-northeast-1"] = "533267052152", ["ap-south-1"] = "011528288864", ["ap-southeast-1"] = "905418428165",
  ["ap-southeast-2"] = "851725636348", ["sa-east-1"] = "025066253954" }
M.HMA_TAG = "1.0.935.0_1.0.282.0"

function M.hma_image(region)
  local acct = HMA_ACCOUNTS[region]
  if not acct then acct, region = HMA_ACCOUNTS["us-east-1"], "us-east-1" end
  return string.format("%s.dkr.ecr.%s.amazonaws.com/hyperpod-health-monitoring-agent:%s", acct, region, M.HMA_TAG)
end

-- names -----------------------------------------------------------------------

-- role_name(info) -> hypd-<tag>-s3-csi, or hypd-<eks name>-s3-csi; at most 64 characters
function M.role_name(info)
  return require("_s3_grant").role_name(info.tag or info.name)
end

-- lbc_role_name(info) -> hypd-<tag>-lb-controller (the AWS Load Balancer
-- Controller's IRSA role), at most 64 characters
function M.lbc_role_name(info)
  return Names.addon_role(info.tag or info.name, "lb-controller", 50)
end

function M.lbc_role_arn(info)
  if info.planned then return hypd.kit.planned_id("iam:role", M.lbc_role_name(info)) end
  return string.format("arn:%s:iam::%s:role/%s", info.partition, info.account, M.lbc_role_name(info))
end

-- the controller's IAM policy: the one the HyperPod inference operator's
-- own copy of the controller gets (its iam_policy.json), kept in one place
M.lbc_policy = require("_lb_controller_policy").policy

-- tags(info) -> {key = value}: what hypd tags its add-ons and role with here
function M.tags(info)
  local t = { [M.MANAGED_TAG] = M.MANAGED, [Names.EKS_TAG] = info.name }
  if info.tag then t[Names.TAG] = info.tag end
  return t
end

-- tag_list(info) -> those tags as [{Key, Value}]
function M.tag_list(info) return hypd.aws.tags.list(M.tags(info)) end

-- the S3 access Mountpoint needs (its documented policy), on the cluster's
-- data bucket (the one storage_create_s3 makes: Names.bucket); a bucket of
-- the user's that it mounts is granted by an inline policy of its own
-- (_s3_grant)
function M.s3_policy(info)
  return require("_s3_grant").policy(info.partition or "aws",
    Names.bucket(info.tag or info.name, info.account, info.region))
end

-- same(a, b) -> true when two JSON values are equal
M.same = hypd.json.equal

-- policy_doc(text) -> the JSON of an IAM policy document IAM answers URL-encoded
M.policy_doc = require("_iam").doc

-- add-ons ---------------------------------------------------------------------

-- versions(ctx, name, k8s_version) -> {default, compatible = {[v] = true}, list}:
-- what DescribeAddonVersions offers for the cluster's Kubernetes version
function M.versions(ctx, name, kv)
  local out = ctx:call("eks", "DescribeAddonVersions", { addonName = name, kubernetesVersion = kv })
  local a = (out.addons or {})[1]
  local r = { compatible = {}, list = {} }
  for _, v in ipairs(a and a.addonVersions or {}) do
    r.list[#r.list + 1] = v.addonVersion
    r.compatible[v.addonVersion] = true
    for _, c in ipairs(v.compatibilities or {}) do
      if c.clusterVersion == kv and c.defaultVersion and not r.default then r.default = v.addonVersion end
    end
  end
  r.default = r.default or r.list[1]
  if not r.default then
    errors.raise("NOT_FOUND", string.format("EKS offers no version of the add-on %s for Kubernetes %s", name,
      tostring(kv)), { addon = name })
  end
  return r
end

function M.addon_owner(a) return ((a and a.tags) or {})[M.MANAGED_TAG] == M.MANAGED and "hypd" or "other" end

-- addon_differs(a, want) -> [{field, have, want}]: what hypd would change on
-- add-on a. want = {versions (versions()), role = the IRSA role ARN or nil}
function M.addon_differs(a, want)
  local out = {}
  if want.versions and not want.versions.compatible[a.addonVersion] then
    out[#out + 1] = { field = "addonVersion", have = a.addonVersion, want = want.versions.default,
      why = "EKS offers " .. tostring(a.addonVersion) .. " no more for this Kubernetes version" }
  end
  if want.role and a.serviceAccountRoleArn ~= want.role then
    out[#out + 1] = { field = "serviceAccountRoleArn", have = a.serviceAccountRoleArn or json.null, want = want.role }
  end
  return out
end

-- judge_addon(a, want) -> the item's view: {item, state, status, version, owner, differs, reason}
function M.judge_addon(name, a, want)
  local v = { item = "addon:" .. name, kind = "eks-addon", name = name }
  if not a then
    v.state = "missing"
    return v
  end
  v.status, v.version, v.owner, v.arn = a.status, a.addonVersion, M.addon_owner(a), a.addonArn
  v.service_account_role_arn = a.serviceAccountRoleArn
  if A.FAILED[a.status] then
    v.state = "failed"
    local issues = A.issue_list(a)
    v.reason = "the add-on is " .. a.status .. (#issues > 0 and (": " .. table.concat(issues, "; ")) or "")
    return v
  end
  if A.PENDING[a.status] then
    v.state = "pending"
    return v
  end
  local d = M.addon_differs(a, want)
  if #d > 0 then v.differs = d end
  v.state = (#d > 0 and v.owner == "hypd") and "drifted" or "present"
  if #d > 0 and v.owner ~= "hypd" then v.kept = "not hypd's: kept as it is (adopt_existing = true updates it)" end
  return v
end

-- Kubernetes objects --------------------------------------------------------------

function M.vars(info)
  return { region = info.region, hma_image = M.hma_image(info.region), cluster = info.name,
    vpc_id = info.vpc_id or hypd.kit.planned_id("ec2:vpc", info.name), lbc_role_arn = M.lbc_role_arn(info) }
end

-- objects(info, component) -> the component's objects, fresh from its manifest
function M.objects(info, component)
  return hypd.manifests.load(component, M.vars(info))
end

function M.ident(obj)
  local md = obj.metadata or {}
  return obj.kind .. " " .. (md.namespace and (md.namespace .. "/") or "") .. tostring(md.name)
end

function M.ours(obj) return (((obj or {}).metadata or {}).labels or {})[M.MANAGED_BY] == "hypd" end

-- get(k, obj) -> the live object of obj's kind and name | nil (NotFound, or
-- the API, a CRD's, not served yet)
function M.get(k, obj)
  local live, err = k:get(obj.apiVersion, obj.kind, obj.metadata.name, { namespace = obj.metadata.namespace })
  if live then return live end
  if err.code == "NotFound" then return nil end
  error(err, 0)
end

local function is_list(v) return type(v) == "table" and (json.is_array(v) or (v[1] ~= nil and not json.is_object(v))) end

local function show(v)
  if v == nil then return json.null end
  return v
end

-- subset(want, have, path, out): the leaves of want that have lacks or holds
-- otherwise (lists of named maps matched by name, other lists item by
-- item, an empty map asks for nothing)
local subset

local function covers(want, have)
  local o = {}
  subset(want, have, "", o)
  return #o == 0
end

function subset(want, have, path, out)
  if type(want) ~= "table" then
    if want ~= have then out[#out + 1] = { path = path, have = show(have), want = want } end
    return
  end
  if is_list(want) then
    local named = #want > 0
    for _, x in ipairs(want) do named = named and type(x) == "table" and x.name ~= nil end
    if named and is_list(have) then
      for _, x in ipairs(want) do
        local match
        for _, y in ipairs(have) do if type(y) == "table" and y.name == x.name then match = y end end
        local p = path .. "[" .. tostring(x.name) .. "]"
        if match then subset(x, match, p, out) else out[#out + 1] = { path = p, have = json.null, want = x } end
      end
    else
      local same = is_list(have) and #have == #want
      for i = 1, #want do same = same and covers(want[i], have[i]) end
      if not same then out[#out + 1] = { path = path, have = show(have), want = want } end
    end
    return
  end
  if type(have) ~= "table" then
    if next(want) ~= nil then out[#out + 1] = { path = path, have = show(have), want = want } end
    return
  end
  local keys = {}
  for k in pairs(want) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do subset(want[k], have[k], path == "" and k or (path .. "." .. k), out) end
end

-- object_differs(want, live) -> [{path, have, want}]: the fields the manifest
-- sets that the live object holds otherwise (what the status tool reports)
function M.object_differs(want, live)
  local out = {}
  local w = {}
  for k, v in pairs(want) do
    if k ~= "metadata" and k ~= "status" and k ~= "apiVersion" and k ~= "kind" then w[k] = v end
  end
  w.metadata = { labels = (want.metadata or {}).labels, annotations = (want.metadata or {}).annotations }
  if w.metadata.labels == nil and w.metadata.annotations == nil then w.metadata = nil end
  subset(w, live, "", out)
  return out
end

local NOISE = { managedFields = true, resourceVersion = true, generation = true }

-- changes(live, after, path, out): every leaf that differs between the
-- object as it is and as an apply makes it (a server-side dry run), but the
-- bookkeeping (managedFields, resourceVersion, generation, status)
local function changes(a, b, path, out)
  if type(a) ~= "table" or type(b) ~= "table" then
    if a ~= b then out[#out + 1] = { path = path, have = show(a), want = show(b) } end
    return
  end
  local keys, seen = {}, {}
  for k in pairs(a) do keys[#keys + 1] = k; seen[k] = true end
  for k in pairs(b) do if not seen[k] then keys[#keys + 1] = k end end
  table.sort(keys, function(x, y) return tostring(x) < tostring(y) end)
  for _, k in ipairs(keys) do
    local skip = (path == "" and k == "status") or (path == "metadata" and NOISE[k])
    if not skip then
      local p = type(k) == "number" and (path .. "[" .. (k - 1) .. "]") or (path == "" and k or (path .. "." .. k))
      changes(a[k], b[k], p, out)
    end
  end
end

function M.apply_changes(live, after)
  local out = {}
  changes(live, after, "", out)
  return out
end

-- workloads(k, image) -> [{namespace, name, kind}]: the DaemonSets and
-- Deployments not labelled hypd's whose containers run an image containing
-- image (a workload doing a component's job under another name)
function M.workloads(k, image)
  local out = {}
  for _, kind in ipairs { "DaemonSet", "Deployment" } do
    local items, err = k:list("apps/v1", kind, { all_namespaces = true })
    if not items then error(err, 0) end
    for _, o in ipairs(items) do
      local hit = false
      for _, c in ipairs((((o.spec or {}).template or {}).spec or {}).containers or {}) do
        hit = hit or tostring(c.image):find(image, 1, true) ~= nil
      end
      if hit and not M.ours(o) then
        out[#out + 1] = { kind = kind, namespace = o.metadata.namespace, name = o.metadata.name }
      end
    end
  end
  return out
end

-- ready(obj) -> "ready/desired" for a DaemonSet or Deployment, else nil
function M.ready(obj)
  local s = obj.status or {}
  if obj.kind == "DaemonSet" then
    return string.format("%d/%d", s.numberReady or 0, s.desiredNumberScheduled or 0)
  elseif obj.kind == "Deployment" then
    return string.format("%d/%d", s.readyReplicas or 0, (obj.spec or {}).replicas or 1)
  end
end

-- judge_component(k, info, comp) -> the item's view: {item, state, objects =
-- [{object, state, owner, differs, ready}], elsewhere}
function M.judge_component(k, info, comp)
  local v = { item = comp.name, kind = "kubernetes", label = comp.label, objects = json.array() }
  local present, missing, drifted = 0, 0, 0
  local names = {}
  for _, obj in ipairs(M.objects(info, comp.name)) do
    names[obj.kind .. "/" .. tostring(obj.metadata.namespace) .. "/" .. obj.metadata.name] = true
    local live = M.get(k, obj)
    local o = { object = M.ident(obj) }
    if not live then
      o.state, missing = "missing", missing + 1
    else
      o.owner = M.ours(live) and "hypd" or "other"
      o.ready = M.ready(live)
      local d = M.object_differs(obj, live)
      if #d > 0 then o.differs = d end
      if #d > 0 and o.owner == "hypd" then
        o.state, drifted = "drifted", drifted + 1
      else
        o.state, present = "present", present + 1
      end
    end
    v.objects[#v.objects + 1] = o
  end
  if comp.image then
    for _, w in ipairs(M.workloads(k, comp.image)) do
      if not names[w.kind .. "/" .. tostring(w.namespace) .. "/" .. w.name] then
        v.elsewhere = v.elsewhere or json.array()
        v.elsewhere[#v.elsewhere + 1] = w.kind .. " " .. w.namespace .. "/" .. w.name
      end
    end
  end
  if v.elsewhere and present + drifted == 0 then
    v.state, v.owner = "present", "other"
    v.kept = comp.label .. " runs as " .. table.concat(v.elsewhere, ", ") .. " (not hypd's): kept, hypd adds none"
  elseif missing == #v.objects then
    v.state = "missing"
  elseif drifted > 0 or missing > 0 then
    v.state = "drifted"
  else
    v.state = "present"
  end
  return v
end

return M
