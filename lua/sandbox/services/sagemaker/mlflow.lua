-- More of the simulated SageMaker MLflow tracking servers (Create,
-- Describe, List and Delete are in sagemaker/plans.lua): UpdateMlflowTrackingServer
-- (Created, Updated or Started -> Updating -> Updated after 10 to 15
-- minutes; the artifact store, size, automatic model registration and
-- maintenance window change), StartMlflowTrackingServer and
-- StopMlflowTrackingServer (Stopped <-> Starting -> Started, Stopping ->
-- Stopped, a few minutes each). Record "mlflow" (id name).
local D = require "sandbox.services.eks.deps"

local M = { operations = {}, transitions = {} }
local ops, tr = M.operations, M.transitions

local SIZES = { Small = true, Medium = true, Large = true }
local READY = { Created = true, Updated = true, Started = true }

local function server(ctx, name)
  local s = ctx.state:get("mlflow", tostring(name))
  if not s then ctx.error("ResourceNotFound", "Tracking server " .. tostring(name) .. " does not exist.") end
  return s
end

local function busy(ctx, s, doing)
  ctx.error("ValidationException", string.format("Tracking server %s cannot be %s while it is %s.",
    s.TrackingServerName, doing, s.TrackingServerStatus))
end

local function touch(ctx, s, status)
  s.TrackingServerStatus, s.LastModifiedTime = status, ctx.now()
  s.LastModifiedBy = { IamIdentity = { Arn = ctx.principal.arn, PrincipalId = ctx.principal.user_id } }
  ctx.state:put("mlflow", s.TrackingServerName, s)
end

function ops.UpdateMlflowTrackingServer(ctx, input)
  local s = server(ctx, input.TrackingServerName)
  ctx.target = s.TrackingServerName
  if not READY[s.TrackingServerStatus] then busy(ctx, s, "updated") end
  if input.TrackingServerSize and not SIZES[input.TrackingServerSize] then
    ctx.error("ValidationException", "TrackingServerSize must be Small, Medium or Large.")
  end
  if input.ArtifactStoreUri then
    local bucket = D.s3_uri(input.ArtifactStoreUri)
    if not bucket or not D.bucket_exists(ctx, bucket) then
      ctx.error("ValidationException", "ArtifactStoreUri " .. tostring(input.ArtifactStoreUri) ..
        " must name an existing S3 bucket.")
    end
  end
  s.pending = { ArtifactStoreUri = input.ArtifactStoreUri, TrackingServerSize = input.TrackingServerSize,
    AutomaticModelRegistration = input.AutomaticModelRegistration,
    WeeklyMaintenanceWindowStart = input.WeeklyMaintenanceWindowStart }
  s.IsActive = "Inactive"
  touch(ctx, s, "Updating")
  ctx:later(D.between(600, 900), "mlflow_updated", { name = s.TrackingServerName })
  return { TrackingServerArn = s.TrackingServerArn }
end

function tr.mlflow_updated(ctx, args)
  local s = ctx.state:get("mlflow", args.name)
  if not s or s.TrackingServerStatus ~= "Updating" then return end
  for k, v in pairs(s.pending or {}) do s[k] = v end
  s.pending, s.IsActive = nil, "Active"
  s.TrackingServerStatus, s.LastModifiedTime = "Updated", ctx.now()
  ctx.state:put("mlflow", s.TrackingServerName, s)
end

function ops.StopMlflowTrackingServer(ctx, input)
  local s = server(ctx, input.TrackingServerName)
  ctx.target = s.TrackingServerName
  if not READY[s.TrackingServerStatus] then busy(ctx, s, "stopped") end
  s.IsActive = "Inactive"
  touch(ctx, s, "Stopping")
  ctx:later(D.between(120, 300), "mlflow_stopped", { name = s.TrackingServerName })
  return { TrackingServerArn = s.TrackingServerArn }
end

function tr.mlflow_stopped(ctx, args)
  local s = ctx.state:get("mlflow", args.name)
  if not s or s.TrackingServerStatus ~= "Stopping" then return end
  s.TrackingServerStatus, s.LastModifiedTime = "Stopped", ctx.now()
  ctx.state:put("mlflow", s.TrackingServerName, s)
end

function ops.StartMlflowTrackingServer(ctx, input)
  local s = server(ctx, input.TrackingServerName)
  ctx.target = s.TrackingServerName
  if s.TrackingServerStatus ~= "Stopped" then busy(ctx, s, "started") end
  touch(ctx, s, "Starting")
  ctx:later(D.between(300, 600), "mlflow_started", { name = s.TrackingServerName })
  return { TrackingServerArn = s.TrackingServerArn }
end

function tr.mlflow_started(ctx, args)
  local s = ctx.state:get("mlflow", args.name)
  if not s or s.TrackingServerStatus ~= "Starting" then return end
  s.TrackingServerStatus, s.IsActive, s.LastModifiedTime = "Started", "Active", ctx.now()
  ctx.state:put("mlflow", s.TrackingServerName, s)
end

return M
