-- training/_mlflow: SageMaker managed MLflow for training jobs: the names
-- hypd gives a cluster's tracking server, its role and its artifact bucket,
-- the server as a kit resource, and finding the server a job reports to.
--
--   server name   hypd-<tag>-mlflow (the cluster tag: _storage tag_of)
--   role          hypd-<tag>-mlflow: trusts sagemaker.amazonaws.com, inline
--                 policy hypd-mlflow-artifacts (the artifact bucket's objects,
--                 and the model registry when automatic registration is on)
--   bucket        hypd-<tag>-mlflow-<account>-<region> (_s3, kind
--                 mlflow); artifacts under s3://<bucket>/mlflow
-- A job gets MLFLOW_TRACKING_URI = the server's ARN (what the sagemaker-mlflow
-- plugin of the mlflow client resolves, as the reference templates set it)
-- and MLFLOW_EXPERIMENT_NAME.
local Names = require "_names"
local M = {}

M.READY = { Created = true, Updated = true, Started = true }
M.FAILED = { CreateFailed = true, UpdateFailed = true, StartFailed = true, MaintenanceFailed = true }
M.ARN = "^arn:aws[a-z%-]*:sagemaker:[a-z0-9%-]+:%d+:mlflow%-tracking%-server/(.+)$"

M.SERVICE_ACCOUNT = "hypd-mlflow" -- the pods' service account (IRSA: role hypd-<tag>-mlflow-pods)
M.ROLE_ANN = "eks.amazonaws.com/role-arn"

-- pods_policy(server_arn, bucket_arn) -> what a job's pods need: the
-- tracking server's API (the sagemaker-mlflow plugin signs its calls) and
-- the artifact store (the mlflow client writes artifacts to S3 itself)
function M.pods_policy(server_arn, bucket_arn)
  return { Version = "2012-10-17", Statement = {
    { Sid = "TrackingServer", Effect = "Allow", Action = { "sagemaker-mlflow:*" }, Resource = { server_arn } },
    { Sid = "Artifacts", Effect = "Allow", Action = { "s3:GetObject", "s3:PutObject", "s3:ListBucket" },
      Resource = { bucket_arn, bucket_arn .. "/*" } } } }
end

-- name_of(v) -> the tracking server name of a name or an ARN
function M.name_of(v)
  return tostring(v):match(M.ARN) or v
end

-- describe(ctx, name) -> DescribeMlflowTrackingServer | nil
function M.describe(ctx, name)
  local out, err = ctx:try("sagemaker", "DescribeMlflowTrackingServer", { TrackingServerName = name })
  if out then return out end
  if err.code == "ResourceNotFound" or err.code == "ResourceNotFoundException" then return nil end
  error(err, 0)
end

-- tags(ctx, arn) -> {key = value} of the server
function M.tags(ctx, arn)
  return hypd.aws.tags.map(hypd.aws.all("sagemaker", "ListTags", { ResourceArn = arn }, ctx:aws_opts()))
end

-- view(d) -> what the tools answer about a server
function M.view(d)
  return { name = d.TrackingServerName, arn = d.TrackingServerArn, status = d.TrackingServerStatus,
    active = d.IsActive == "Active", url = d.TrackingServerUrl, artifact_store_uri = d.ArtifactStoreUri,
    role_arn = d.RoleArn, size = d.TrackingServerSize, mlflow_version = d.MlflowVersion,
    automatic_model_registration = d.AutomaticModelRegistration, created = d.CreationTime,
    maintenance_status = d.TrackingServerMaintenanceStatus,
    tracking_uri = d.TrackingServerArn }
end

-- role_policy(bucket_arn, registration) -> the inline policy of the server's role
function M.role_policy(bucket_arn, registration)
  local st = {
    { Sid = "Artifacts", Effect = "Allow", Action = { "s3:GetObject", "s3:PutObject", "s3:DeleteObject",
      "s3:ListBucket", "s3:GetBucketLocation" }, Resource = { bucket_arn, bucket_arn .. "/*" } },
  }
  if registration then
    st[#st + 1] = { Sid = "ModelRegistry", Effect = "Allow", Action = { "sagemaker:AddTags",
      "sagemaker:CreateModelPackageGroup", "sagemaker:CreateModelPackage", "sagemaker:UpdateModelPackage",
      "sagemaker:DescribeModelPackageGroup" }, Resource = "*" }
  end
  return { Version = "2012-10-17", Statement = st }
end

-- for_job(ctx, tag, want) -> nil | {name, arn, status}: the server a job
-- reports to. want: a name or ARN (refused naming field mlflow when it does
-- not exist or is not ready), "none" (no MLflow), or nil: the cluster's own
-- (hypd-<tag>-mlflow) when it exists
function M.for_job(ctx, tag, want)
  if want == "none" then return nil end
  local name = want and M.name_of(want) or Names.mlflow(tag).server
  local d = M.describe(ctx, name)
  if not d then
    if not want then return nil end
    hypd.errors.refuse("mlflow", "exists", "mlflow: no MLflow tracking server " .. name .. " in this region; make one " ..
      "with training_setup_mlflow or pass mlflow=none", { field_message = "mlflow: no tracking server " .. name })
  end
  if not M.READY[d.TrackingServerStatus] then
    hypd.errors.refuse("mlflow", "ready", string.format("mlflow: tracking server %s is %s, not ready for jobs; follow " ..
      "it with training_get_mlflow name=%s wait_seconds=600, or submit with mlflow=none", name,
      tostring(d.TrackingServerStatus), name),
      { field_message = "mlflow: " .. name .. " is " .. tostring(d.TrackingServerStatus) })
  end
  return { name = name, arn = d.TrackingServerArn, status = d.TrackingServerStatus }
end

return M
