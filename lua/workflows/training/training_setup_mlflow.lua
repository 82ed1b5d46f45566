-- training_setup_mlflow: a SageMaker managed MLflow tracking server for a
-- cluster's training jobs (training/_mlflow has the names): the artifact
-- bucket, the server's IAM role, the server, then waits until it is
-- Created (about 20 minutes). Named ones that exist are reused as they are.
local Names = require "_names"
local P = require "_params"
local S = require "_storage"
local s3 = require "_s3"
local I = require "_iam"
local ML = require "training._mlflow"
local irsa = require "_irsa"
local K = require "_k8s_objects"

local NAME = "^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,255}$"

local function check(ctx)
  local p, st = ctx.params, ctx.state
  local cl = S.cluster(ctx, p, { plan_missing = true })
  st.cluster, st.region, st.tag = cl.name, cl.region, cl.tag
  st.name = p.name or Names.mlflow(cl.tag).server
end

local function bucket(ctx)
  local st = ctx.state
  local b = s3.ensure_bucket(ctx, st.tag, ctx.params.bucket, "mlflow")
  st.bucket = { name = b.name, arn = b.arn, action = b.action, reused = b.reused }
end

local TRUST = hypd.json.encode { Version = "2012-10-17", Statement = { { Effect = "Allow",
  Principal = { Service = "sagemaker.amazonaws.com" }, Action = "sts:AssumeRole" } } }

local function role(ctx)
  local p, st = ctx.params, ctx.state
  if p.role then
    -- a named role that exists is used as it is
    local r = I.get(ctx, "NoSuchEntity", "iam", "GetRole", { RoleName = p.role })
    if r then
      st.role = { name = r.Role.RoleName, arn = r.Role.Arn, action = "unchanged", reused = true }
      return
    end
  end
  local name = p.role or Names.mlflow(st.tag).role
  local r, action = I.role(ctx, { name = name, tag = st.tag, trust = TRUST, key = "role_arn", field = "role",
    service = "sagemaker.amazonaws.com",
    description = "hypd: the SageMaker MLflow tracking server " .. st.name .. " (its artifacts in " ..
      st.bucket.name .. ")" })
  I.inline(ctx, { RoleName = name, Arn = r.Arn }, "hypd-mlflow-artifacts",
    ML.role_policy(st.bucket.arn, p.automatic_model_registration))
  st.role = { name = name, arn = r.Arn, action = action }
end

local function server(ctx)
  local p, st = ctx.params, ctx.state
  local named = p.name ~= nil
  local uri = "s3://" .. st.bucket.name .. "/mlflow"
  local d, action = ctx:ensure { type = "sagemaker:mlflow-tracking-server", label = "MLflow tracking server",
    name = st.name, key = "server_arn", id = "TrackingServerArn", field = "name",
    needs = { st.role.arn, st.bucket.arn },
    retry = function(err)
      if err.code == "ValidationException" and tostring(err.message):find("assum") then
        return "IAM does not show role " .. st.role.name .. " to SageMaker yet"
      end
    end,
    search = function() return ML.describe(ctx, st.name) end,
    -- hypd's name: the server must be hypd's for this tag; a named one is used as it is
    owned = not named and function(x)
      local t = ML.tags(ctx, x.TrackingServerArn)
      if t[Names.TAG] == st.tag then return true end
      return false, string.format("its %s tag is %s, not '%s'; to use it as it is, pass name = %s", Names.TAG,
        t[Names.TAG] and ("'" .. t[Names.TAG] .. "'") or "missing", st.tag, st.name)
    end or nil,
    fields = { ArtifactStoreUri = uri, RoleArn = st.role.arn, ["tag:" .. Names.TAG] = st.tag,
      MlflowVersion = p.mlflow_version },
    desired = not named and { TrackingServerSize = p.size } or nil,
    current = function(x) return { TrackingServerSize = x.TrackingServerSize } end,
    update = function(x)
      ctx:call("sagemaker", "UpdateMlflowTrackingServer", { TrackingServerName = st.name,
        TrackingServerSize = p.size })
      x.TrackingServerSize = p.size
      return x
    end,
    placeholder = function(id) return { TrackingServerArn = id, TrackingServerName = st.name } end,
    create = function()
      local out = ctx:call("sagemaker", "CreateMlflowTrackingServer", { TrackingServerName = st.name,
        ArtifactStoreUri = uri, RoleArn = st.role.arn, TrackingServerSize = p.size, MlflowVersion = p.mlflow_version,
        AutomaticModelRegistration = p.automatic_model_registration,
        Tags = { { Key = Names.TAG, Value = st.tag }, { Key = Names.EKS_TAG, Value = st.cluster } } })
      return { TrackingServerArn = out.TrackingServerArn, TrackingServerName = st.name, TrackingServerSize = p.size }
    end }
  st.server = { arn = d.TrackingServerArn, action = action, reused = named and action == "unchanged" or nil }
end

-- pods: IRSA for the jobs' pods: role hypd-<tag>-mlflow-pods trusting the
-- service account <namespace>/hypd-mlflow through the cluster's OIDC
-- provider (cluster_configure_dependencies makes it), and that service
-- account annotated with the role; training_submit then runs MLflow jobs
-- under it. Skipped, saying why, without the provider or pod_access.
local function pods(ctx)
  local p, st = ctx.params, ctx.state
  if not p.pod_access then st.pods = { skipped = "pod_access is false" } return end
  local info = irsa.cluster(ctx, p)
  local provider = info.issuer and not info.planned and irsa.provider_arn(info)
  local found = provider and I.get(ctx, "NoSuchEntity", "iam", "GetOpenIDConnectProvider",
    { OpenIDConnectProviderArn = provider })
  if not found then
    st.pods = { skipped = "the cluster has no IAM OIDC provider yet (cluster_configure_dependencies makes it); " ..
      "run this tool again afterwards" }
    return
  end
  local name = Names.mlflow(st.tag).pods_role
  local r = I.role(ctx, { name = name, tag = st.tag, trust = hypd.json.encode(irsa.trust(info, p.namespace,
    ML.SERVICE_ACCOUNT)), key = "pods_role_arn", field = "pod_access",
    description = "hypd: training pods of " .. st.cluster .. " reporting to MLflow tracking server " .. st.name })
  I.inline(ctx, { RoleName = name, Arn = r.Arn }, "hypd-mlflow-access", ML.pods_policy(st.server.arn, st.bucket.arn))
  local conn = ctx:k8s(st.cluster)
  K.ensure(ctx, conn, { apiVersion = "v1", kind = "ServiceAccount",
    metadata = { name = ML.SERVICE_ACCOUNT, namespace = p.namespace,
      labels = { ["app.kubernetes.io/managed-by"] = "hypd" }, annotations = { [ML.ROLE_ANN] = r.Arn } } })
  st.pods = { role = name, role_arn = r.Arn, service_account = p.namespace .. "/" .. ML.SERVICE_ACCOUNT }
end

local function wait(ctx)
  local st = ctx.state
  if ctx.plan then return end
  local d = ctx:poll { what = "MLflow tracking server " .. st.name .. " to be Created", timeout = 45 * 60,
    -- creation takes about 20 minutes: rare checks first, close ones when it is due
    every = function(waited) return waited < 15 * 60 and 120 or 30 end,
    check = function()
      local x = ML.describe(ctx, st.name)
      if not x then hypd.errors.raise("NOT_FOUND", "MLflow tracking server " .. st.name .. " is gone") end
      if ML.FAILED[x.TrackingServerStatus] then
        hypd.errors.raise("FAILED", "MLflow tracking server " .. st.name .. " is " .. x.TrackingServerStatus)
      end
      return ML.READY[x.TrackingServerStatus] == true, "it is " .. tostring(x.TrackingServerStatus), x
    end }
  st.result = ML.view(d)
  st.result.cluster, st.result.region = st.cluster, st.region
  st.result.bucket, st.result.role = st.bucket, st.role
  st.result.server_action = st.server.action
  st.result.pods = st.pods
  st.result.next = "training_submit recipe=<recipe> params:=<json-object> (mlflow defaults to " .. st.name .. "); " ..
    "training_get_mlflow name=" .. st.name
end

return tool {
  name = "training_setup_mlflow",
  summary = "Set up a SageMaker managed MLflow tracking server (role, artifact bucket) for a cluster's jobs",
  description = "Makes (or finds again) the SageMaker managed MLflow tracking server the training jobs of the active " ..
    "(or named) cluster report to, with its artifact bucket and IAM role (or the bucket and role given), " ..
    "and IRSA for the pods (pod_access). About 20 minutes; follow it with training_get_mlflow " ..
    "(wait_seconds). Then training_submit points every job at it. plan = true lists what it would make; " ..
    "calling it again changes nothing.",
  kind = "mutating",
  status_tool = "training_get_mlflow",
  k8s = { "get", "list", "apply" },
  aws = { "eks:DescribeCluster", "iam:GetOpenIDConnectProvider", "s3:HeadBucket", "s3:CreateBucket",
    "s3:GetBucketTagging", "s3:PutBucketTagging",
    "sts:GetCallerIdentity", "iam:GetRole", "iam:CreateRole", "iam:UpdateAssumeRolePolicy", "iam:GetRolePolicy",
    "iam:PutRolePolicy", "iam:PassRole", "sagemaker:DescribeMlflowTrackingServer",
    "sagemaker:CreateMlflowTrackingServer", "sagemaker:UpdateMlflowTrackingServer", "sagemaker:ListTags",
    "sagemaker:AddTags" },
  params = P.form({ "name", "size" },
    { "automatic_model_registration", "bucket", "mlflow_version", "pod_access", "role", "namespace", "cluster", "region" },
    {
    cluster = P.cluster, region = P.region,
    name = { type = "string", pattern = NAME, max_length = 256, decision = true,
      pattern_help = "a tracking server name: letters, digits and '-'",
      description = "the tracking server: an existing one to use as it is, or the name of a new one (default " ..
        "hypd-<tag>-mlflow, hypd's own)" },
    bucket = { type = "string", pattern = "^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$",
      pattern_help = "an S3 bucket name", description = "an existing bucket for the artifacts, used as it is " ..
        "(default: hypd's own hypd-<tag>-mlflow-<account>-<region>)" },
    role = { type = "string", pattern = "^[A-Za-z0-9+=,.@_-]{1,64}$", pattern_help = "an IAM role name",
      description = "an existing IAM role the server assumes, used as it is (default: hypd's own hypd-<tag>-mlflow)" },
    size = { type = "string", enum = { "Small", "Medium", "Large" }, default = "Small", decision = true,
      description = "the tracking server's size (Small: up to about 25 users, Medium 50, Large 100)" },
    mlflow_version = { type = "string", pattern = "^[0-9]+\\.[0-9]+(\\.[0-9]+)?$",
      pattern_help = "an MLflow version like 3.0", description = "the MLflow version (default: SageMaker's)" },
    automatic_model_registration = { type = "boolean", default = false,
      description = "register logged models in the SageMaker Model Registry (the role then may)" },
    pod_access = { type = "boolean", default = true,
      description = "IRSA for the jobs' pods: the role hypd-<tag>-mlflow-pods and the service account " ..
        "<namespace>/hypd-mlflow (training_submit uses it for MLflow jobs in that namespace)" },
    namespace = { type = "string", default = "default", pattern = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
      max_length = 63, pattern_help = "a Kubernetes namespace name",
      description = "where the jobs run (the service account's namespace)" },
  }, { name = "Tracking server name" }),
  target = function(p)
    local region, cluster = P.where(p)
    return string.format("mlflow/%s/%s/%s", region, cluster, tostring(p.name or "default"))
  end,
  steps = {
    { name = "check", run = check },
    { name = "bucket", run = bucket },
    { name = "role", run = role },
    { name = "server", run = server },
    { name = "pods", run = pods },
    { name = "wait", run = wait },
  },
}
