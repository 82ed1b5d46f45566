-- inference/_managed: what the operator-managed inference tools share
-- (inference_deploy_managed: an InferenceEndpointConfig; inference_deploy_
-- jumpstart: a JumpStartModel; inference_list_jumpstart_models): the
-- contract labels, the refusals made before anything is created (the
-- inference operator is on; the instance type is in the cluster), the
-- SageMaker public hub (ListHubContents, ListHubContentVersions,
-- DescribeHubContent) and the apply-then-follow steps both deploy tools run.
local cap = require "_capacity"
local K = require "_k8s_objects"

local M = {}

M.API = "inference.sagemaker.aws.amazon.com/v1"
M.MANAGED_BY = "app.kubernetes.io/managed-by"
M.NAME_LABEL, M.KIND_LABEL = "hypd.io/inference", "hypd.io/inference-kind"
M.HUB = "SageMakerPublicHub"
M.FIX = "hyperpod_update_advanced_features inference_operator=true"
M.OPERATOR = "the HyperPod inference operator (EKS add-on amazon-sagemaker-hyperpod-inference)"
M.CRDS = { InferenceEndpointConfig = "inferenceendpointconfigs.inference.sagemaker.aws.amazon.com",
  JumpStartModel = "jumpstartmodels.inference.sagemaker.aws.amazon.com" }
M.DONE = { DeploymentComplete = true, DeploymentFailed = true }

-- parameters both deploy tools take
M.NAME = { type = "string", required = true, pattern = "^[a-z0-9](-*[a-z0-9]){0,62}$", max_length = 63,
  pattern_help = "a Kubernetes name of at most 63 lowercase letters, digits and '-'",
  description = "the deployment's name: the object's, its Deployment's and its Service's" }
M.NAMESPACE = { type = "string", default = "default", pattern = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length = 63,
  pattern_help = "a Kubernetes namespace name", description = "the namespace" }
M.TLS = { type = "string", pattern = "^s3://([^/]+)/?(.*)$", pattern_help = "an s3:// URI",
  description = "tlsConfig.tlsCertificateOutputS3Uri: where the operator writes the endpoint's TLS certificate " ..
    "(default: the operator's TLS bucket)" }
M.MAX_DEPLOY = { type = "integer", minimum = 60, maximum = 86400, default = 3600,
  description = "spec.maxDeployTimeInSeconds: the operator fails the deployment (DeploymentFailed) when it is not " ..
    "complete after this long" }
M.ENDPOINT = { type = "string", pattern = "^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$", max_length = 63,
  pattern_help = "a SageMaker endpoint name: letters, digits and '-', at most 63",
  description = "register the deployment as this SageMaker endpoint (DescribeEndpoint shows it), so it can be " ..
    "invoked through SageMaker Runtime too; absent: no registration" }

-- aws(...) -> the AWS actions of a deploy tool, and the given ones
function M.aws(...)
  return cap.aws("sagemaker:DescribeHubContent", "sagemaker:ListHubContentVersions", "sagemaker:DescribeEndpoint", ...)
end

-- labels(name, kind) -> the contract labels of an inference object
function M.labels(name, kind)
  return { [M.MANAGED_BY] = "hypd", [M.NAME_LABEL] = name, [M.KIND_LABEL] = kind }
end

function M.target(p)
  return (cap.target(p, tostring(p.namespace or "default") .. "/" .. tostring(p.name)):gsub("^hyperpod/", "inference/"))
end


local function missing(err)
  return type(err) == "table" and (err.code == "NotFound" or err.status == 404)
end

-- operator(conn, kind, eks): refuses (CONFLICT, naming the call that enables
-- it) when the inference operator's CRD for kind is not served
function M.operator(conn, kind, eks)
  local o, err = conn:get("apiextensions.k8s.io/v1", "CustomResourceDefinition", M.CRDS[kind])
  if o then return end
  if not missing(err) then error(err, 0) end
  hypd.errors.refuse("cluster", "operator", string.format("a %s needs %s, which is not enabled on cluster %s: " ..
    "enable it with %s cluster=%s, then deploy again", kind, M.OPERATOR, eks, M.FIX, eks), { code = "CONFLICT", prefix = "field",
    fix = M.FIX .. " cluster=" .. eks })
end

-- cluster_types(d) -> the instance types of the HyperPod cluster's groups, listed
function M.cluster_types(d)
  local seen, out = {}, {}
  for _, g in ipairs(d.InstanceGroups or {}) do
    if g.InstanceType and not seen[g.InstanceType] then seen[g.InstanceType] = true; out[#out + 1] = g.InstanceType end
  end
  table.sort(out)
  return out
end

-- in_cluster(d, itype): refuses (naming instance_type) a type no group has
function M.in_cluster(d, itype)
  local have = M.cluster_types(d)
  for _, t in ipairs(have) do if t == itype then return end end
  hypd.errors.refuse("instance_type", "exists", string.format("HyperPod cluster %s has no instance group of %s " ..
    "(its types: %s); add one with hyperpod_add_instance_group or pick a type it has", d.ClusterName, itype,
    #have > 0 and table.concat(have, ", ") or "none"), { prefix = "field" })
end

-- gpus_fit(ctx, itype, gpus): refuses (naming gpus) more GPUs per replica
-- than one instance of itype has (EC2 DescribeInstanceTypes; nothing is
-- refused when EC2 does not say)
function M.gpus_fit(ctx, itype, gpus)
  local r = ctx:try("ec2", "DescribeInstanceTypes", { InstanceTypes = { (itype:gsub("^ml%.", "")) } })
  local t = r and (r.InstanceTypes or {})[1]
  if not t then return end
  local have = 0
  for _, g in ipairs((t.GpuInfo or {}).Gpus or {}) do have = have + (g.Count or 0) end
  if gpus > have then
    hypd.errors.refuse("gpus", "fits", string.format("%d GPUs per replica can never be scheduled: an %s has %d; " ..
      "lower gpus or pick a larger instance type", gpus, itype, have), { prefix = "field" })
  end
end

-- endpoint_free(ctx, conn, kind): refuses (naming endpoint_name) a
-- SageMaker endpoint name that exists and is not this object's own
-- registration (its status.endpoints.sagemaker.endpointArn)
function M.endpoint_free(ctx, conn, kind)
  local p = ctx.params
  if not p.endpoint_name then return end
  local e, err = ctx:try("sagemaker", "DescribeEndpoint", { EndpointName = p.endpoint_name })
  if not e then
    if err.code == "ValidationException" or err.code == "ResourceNotFound" then return end
    error(err, 0)
  end
  local function arn(o) return (((o.status or {}).endpoints or {}).sagemaker or {}).endpointArn end
  local own = K.get(conn, M.API, kind, p.name, p.namespace)
  if own and arn(own) == e.EndpointArn then return end
  local by
  for other in pairs(M.CRDS) do
    for _, o in ipairs(conn:list(M.API, other, { all_namespaces = true }) or {}) do
      if arn(o) == e.EndpointArn then by = other .. " " .. o.metadata.namespace .. "/" .. o.metadata.name end
    end
  end
  hypd.errors.refuse("endpoint_name", "exists", string.format("SageMaker endpoint %s is already registered%s; " ..
    "pick another endpoint_name", p.endpoint_name, by and (" by " .. by) or (" (" .. e.EndpointArn .. ")")), { prefix = "field" })
end

-- check(ctx, kind [, later]) -> e, d, conn: the cluster the call works on,
-- after the refusals every deploy makes (operator on; the namespace exists;
-- instance type in the cluster, unless `later`: the caller calls
-- M.in_cluster itself; the SageMaker endpoint name is free)
function M.check(ctx, kind, later)
  local p, st = ctx.params, ctx.state
  local e, d = cap.cluster(ctx, p)
  st.eks, st.region, st.hyperpod = e.name, e.region, e.hyperpod
  local conn = ctx:k8s(e.name)
  M.operator(conn, kind, e.name)
  if not K.get(conn, "v1", "Namespace", p.namespace) then
    hypd.errors.refuse("namespace", "exists", string.format("cluster %s has no namespace %s; create it first " ..
      "(kubectl create namespace %s) or deploy to default", e.name, p.namespace, p.namespace), { code = "NOT_FOUND",
      prefix = "field" })
  end
  if not later then M.in_cluster(d, p.instance_type) end
  M.endpoint_free(ctx, conn, kind)
  return e, d, conn
end

-- hub -------------------------------------------------------------------

-- describe(ctx, id [, version]) -> DescribeHubContent | nil, err
function M.describe(ctx, id, version)
  local d, err = ctx:try("sagemaker", "DescribeHubContent", { HubName = M.HUB, HubContentType = "Model",
    HubContentName = id, HubContentVersion = version })
  if d then return d end
  if err.code == "ResourceNotFound" or err.code == "ResourceNotFoundException" then return nil, err end
  error(err, 0)
end

-- summaries(ctx, operation, input) -> every HubContentSummaries item over
-- all pages (the hub operations have no paginator in the model: NextToken
-- is followed here)
function M.summaries(ctx, operation, input)
  local out, p = {}, {}
  for k, v in pairs(input) do p[k] = v end
  for _ = 1, 1000 do
    local page = ctx:call("sagemaker", operation, p)
    for _, s in ipairs(page.HubContentSummaries or {}) do out[#out + 1] = s end
    if not page.NextToken or page.NextToken == "" then break end
    p.NextToken = page.NextToken
  end
  return out
end

-- versions(ctx, id) -> the model's versions, oldest first
function M.versions(ctx, id)
  local out = {}
  for _, s in ipairs(M.summaries(ctx, "ListHubContentVersions", { HubName = M.HUB, HubContentType = "Model",
    HubContentName = id, SortBy = "CreationTime", SortOrder = "Ascending" })) do out[#out + 1] = s.HubContentVersion end
  return out
end

-- task(summary) -> the task a hub summary's keywords name ("@task:...")
function M.task(s)
  for _, k in ipairs(s.HubContentSearchKeywords or {}) do
    local t = tostring(k):match("^@task:(.+)$")
    if t then return t end
  end
end

-- document(d) -> the decoded HubContentDocument (an empty table when it is not JSON)
function M.document(d)
  local ok, doc = pcall(hypd.json.decode, d.HubContentDocument or "")
  return ok and type(doc) == "table" and doc or {}
end

-- model_view(summary, describe) -> what the tools show of a hub model
function M.model_view(s, d)
  local doc = d and M.document(d) or {}
  local supported = hypd.json.array()
  for i, t in ipairs(doc.SupportedInferenceInstanceTypes or {}) do supported[i] = t end
  return { id = s.HubContentName, version = s.HubContentVersion, display_name = s.HubContentDisplayName,
    description = s.HubContentDescription, task = M.task(s) or doc.Task,
    recommended_instance_type = doc.DefaultInferenceInstanceType, supported_instance_types = supported,
    gated = doc.HostingEulaUri ~= nil, eula = doc.HostingEulaUri, image = doc.HostingEcrUri }
end

-- steps ------------------------------------------------------------------

-- apply(ctx): the object in ctx.state.object, by server-side apply (field
-- manager hypd) only when missing or different
--
-- The operator makes a Deployment and a Service of the resource's name: one
-- another tool made (inference_deploy_container's, the other operator
-- kind's) would be taken over, so any of those names that is not this
-- family's is a CONFLICT naming its owner, before the first write.
M.FAMILY = { InferenceEndpointConfig = "inference-managed", JumpStartModel = "inference-jumpstart" }

function M.apply(ctx)
  local st = ctx.state
  local conn = ctx:k8s(st.eks)
  local md = st.object.metadata
  local family = M.FAMILY[st.object.kind]
  local stand_ins = { st.object,
    { apiVersion = "apps/v1", kind = "Deployment", metadata = { name = md.name, namespace = md.namespace } },
    { apiVersion = "v1", kind = "Service", metadata = { name = md.name, namespace = md.namespace } } }
  for _, c in ipairs(require("_inference").CRS) do
    if c.kind ~= st.object.kind then
      stand_ins[#stand_ins + 1] = { apiVersion = c.api, kind = c.kind, metadata = { name = md.name,
        namespace = md.namespace } }
    end
  end
  K.claim(conn, stand_ins, family, { cluster = st.eks })
  local obj, action = K.ensure(ctx, conn, st.object, { family = family, field = "name" })
  st.applied = { kind = st.object.kind, name = st.object.metadata.name, namespace = st.object.metadata.namespace,
    action = action, uid = obj and obj.uid }
end

-- state(obj) -> status.state ("DeploymentPending" before the operator says)
function M.state(obj) return ((obj or {}).status or {}).state or "DeploymentPending" end

-- message(obj) -> the message of the newest True condition
function M.message(obj)
  local best
  for _, c in ipairs(((obj or {}).status or {}).conditions or {}) do
    if c.status == "True" then best = c end
  end
  return best and best.message
end

-- wait(ctx): follows the object until the operator reports it complete
-- for its current generation (status.observedGeneration); DeploymentFailed
-- fails the operation with the operator's reason
function M.wait(ctx)
  local st = ctx.state
  if ctx.plan then return end
  local conn = ctx:k8s(st.eks)
  local o = st.object
  local ns, name = o.metadata.namespace, o.metadata.name
  local last
  st.state = ctx:poll { what = o.kind .. " " .. ns .. "/" .. name .. " to be DeploymentComplete", every = 5,
    timeout = (tonumber(o.spec.maxDeployTimeInSeconds) or 3600) + 600,
    check = function()
      last = K.get(conn, M.API, o.kind, name, ns)
      local s = M.state(last)
      -- the operator's answer counts once it has seen this generation
      local seen = last and (tonumber((last.status or {}).observedGeneration) or 0) >=
        (tonumber(last.metadata.generation) or 1)
      if not seen and M.DONE[s] then s = "DeploymentInProgress" end
      return M.DONE[s] ~= nil, s .. (M.message(last) and (": " .. M.message(last)) or ""), s
    end }
  if st.state == "DeploymentFailed" then
    hypd.errors.refuse("name", "deployed", string.format("%s %s/%s failed to deploy: %s", o.kind, ns, name,
      tostring(M.message(last) or "no reason given")),
      { code = "STATE", field_message = "name: the operator reports DeploymentFailed" })
  end
  local s = (last or {}).status or {}
  st.replicas = s.replicas
  st.endpoint = s.endpoints and s.endpoints.sagemaker or nil
end

-- result(ctx, extra) -> the answer of a deploy
function M.result(ctx, extra)
  local st, p = ctx.state, ctx.params
  if ctx.plan then return end
  local o = st.object
  local r = { cluster = st.eks, region = st.region, hyperpod_cluster = st.hyperpod, name = o.metadata.name,
    namespace = o.metadata.namespace, kind = o.kind, state = st.state, replicas = st.replicas,
    sagemaker_endpoint = st.endpoint, object = st.applied, service = o.metadata.name,
    next = "inference_get name=" .. p.name .. " namespace=" .. p.namespace }
  for k, v in pairs(extra or {}) do r[k] = v end
  st.result = r
end

return M
