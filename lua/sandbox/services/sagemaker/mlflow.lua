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

-- settle: the transition that ends a change (from -> to), with pending
-- fields applied and IsActive as given
function tr.mlflow_settle(ctx, args)
  local s = ctx.state:get("mlflow", args.name)
  if not s or s.TrackingServerStatus ~= args.from then return end
  for k, v in pairs(s.pending or {}) do s[k] = v end
  s.pending = nil
  s.TrackingServerStatus, s.IsActive, s.LastModifiedTime = args.to, args.active, ctx.now()
  ctx.state:put("mlflow", s.TrackingServerName, s)
end

-- move(ctx, input, ok, doing, status, to, active, lo, hi) -> the answer: a
-- change that takes lo to hi seconds, allowed from the statuses ok
local function move(ctx, input, ok, doing, status, to, active, lo, hi)
  local s = server(ctx, input.TrackingServerName)
  ctx.target = s.TrackingServerName
  if not ok[s.TrackingServerStatus] then busy(ctx, s, doing) end
  s.IsActive = "Inactive"
  touch(ctx, s, status)
  ctx:later(D.between(lo, hi), "mlflow_settle", { name = s.TrackingServerName, from = status, to = to,
    active = active })
  return { TrackingServerArn = s.TrackingServerArn }
end

function ops.StopMlflowTrackingServer(ctx, input)
  return move(ctx, input, READY, "stopped", "Stopping", "Stopped", "Inactive", 120, 300)
end

function ops.StartMlflowTrackingServer(ctx, input)
  return move(ctx, input, { Stopped = true }, "started", "Starting", "Started", "Active", 300, 600)
end

function ops.UpdateMlflowTrackingServer(ctx, input)
  local s = server(ctx, input.TrackingServerName)
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
  ctx.state:put("mlflow", s.TrackingServerName, s)
  return move(ctx, input, READY, "updated", "Updating", "Updated", "Active", 600, 900)
end

return M
