-- SageMaker training plans (a seeded catalogue: DescribeTrainingPlan,
-- ListTrainingPlans) and MLflow tracking servers (Create, Describe, List,
-- Delete). Records: "training_plan" (id name), "mlflow" (id name).
local D = require "sandbox.services.eks.deps"
local json = require "hypd.json"

local M = { operations = {}, transitions = {} }
local ops, tr = M.operations, M.transitions

local DAY = 86400
-- name, instance type, count, status, zone letter, start offset (days), duration (days), fee
local SEED = {
  { "hypd-p5-2x-14d", "ml.p5.48xlarge", 2, "Active", "a", -1, 14, "22075.20" },
  { "hypd-p4d-4x-7d", "ml.p4d.24xlarge", 4, "Scheduled", "b", 3, 7, "18450.00" },
  { "hypd-g5-1x-3d", "ml.g5.12xlarge", 1, "Expired", "b", -10, 3, "409.68" },
}

-- seed(ctx): the region's training plans, created once
function M.seed(ctx)
  if ctx.state:get("training_plan", "_seeded") then return end
  local now = math.floor(ctx.now())
  local zones = require "sandbox.services.ec2.zones"
  for _, s in ipairs(SEED) do
    local name, itype, count, status, zone, off, days, fee = table.unpack(s)
    -- capacity is reserved where EC2 offers the type: the seed's zone, else the first that does
    local offered = zones.zones_for(ctx.region, itype:gsub("^ml%.", ""))
    local az = offered[1].ZoneName
    for _, z in ipairs(offered) do if z.ZoneName == ctx.region .. zone then az = z.ZoneName end end
    local start = now + off * DAY
    local arn = ctx:arn("training-plan/" .. name, "sagemaker")
    local rc = { ReservedCapacityArn = ctx:arn("reserved-capacity/" .. name .. "-rc-" .. ctx.hex(8), "sagemaker"),
      ReservedCapacityType = "Instance", InstanceType = itype, TotalInstanceCount = count, Status = status,
      AvailabilityZone = az, DurationHours = days * 24, DurationMinutes = 0,
      StartTime = start, EndTime = start + days * DAY }
    ctx.state:put("training_plan", name, {
      TrainingPlanArn = arn, TrainingPlanName = name, Status = status, StatusMessage = "",
      DurationHours = days * 24, DurationMinutes = 0, StartTime = start, EndTime = start + days * DAY,
      UpfrontFee = fee, CurrencyCode = "USD", TotalInstanceCount = count, TotalUltraServerCount = 0,
      TargetResources = json.array { "hyperpod-cluster" }, ReservedCapacitySummaries = json.array { rc },
    })
  end
  ctx.state:put("training_plan", "_seeded", { seeded = true })
end

local function plans(ctx)
  M.seed(ctx)
  local out = {}
  for _, p in ipairs(ctx.state:list("training_plan")) do
    if p.TrainingPlanName then out[#out + 1] = p end
  end
  return out
end

-- with_usage(ctx, p) -> the plan with in-use counts from the clusters' nodes
local function with_usage(ctx, p)
  local used = 0
  for _, c in ipairs(ctx.state:list("cluster")) do
    for _, g in ipairs(c.groups or {}) do
      if g.TrainingPlanArn == p.TrainingPlanArn then
        for _, n in ipairs(ctx.state:list("node")) do
          if n.cluster == c.ClusterName and n.group == g.InstanceGroupName and n.Status ~= "ShuttingDown" then
            used = used + 1
          end
        end
      end
    end
  end
  local out = D.copy(p)
  out.InUseInstanceCount = used
  out.AvailableInstanceCount = math.max(0, p.TotalInstanceCount - used)
  out.UnhealthyInstanceCount, out.AvailableSpareInstanceCount = 0, 0
  return out
end

function ops.DescribeTrainingPlan(ctx, input)
  M.seed(ctx)
  local p = ctx.state:get("training_plan", tostring(input.TrainingPlanName))
  if not p or not p.TrainingPlanName then
    ctx.error("ResourceNotFound", "Training plan " .. tostring(input.TrainingPlanName) .. " does not exist.")
  end
  return with_usage(ctx, p)
end

function ops.ListTrainingPlans(ctx, input)
  local all = {}
  for _, p in ipairs(plans(ctx)) do
    local keep = (not input.StartTimeAfter or p.StartTime > input.StartTimeAfter)
      and (not input.StartTimeBefore or p.StartTime < input.StartTimeBefore)
    for _, f in ipairs(input.Filters or {}) do
      if f.Name == "Status" and p.Status ~= f.Value then keep = false end
    end
    if keep then
      local v = with_usage(ctx, p)
      v.UnhealthyInstanceCount, v.AvailableSpareInstanceCount = nil, nil
      all[#all + 1] = v
    end
  end
  local by = input.SortBy or "StartTime"
  local desc = (input.SortOrder or "Ascending") == "Descending"
  table.sort(all, function(a, b)
    local x, y = a[by] or a.StartTime, b[by] or b.StartTime
    if x == y then x, y = a.TrainingPlanName, b.TrainingPlanName end
    if desc then return x > y end
    return x < y
  end)
  local page, nxt = D.page(ctx, all, input.MaxResults, input.NextToken, 100, "ValidationException")
  return { TrainingPlanSummaries = page, NextToken = nxt }
end

-- MLflow tracking servers ----------------------------------------------------

local SIZES = { Small = true, Medium = true, Large = true }

local function server(ctx, name)
  local s = ctx.state:get("mlflow", tostring(name))
  if not s then ctx.error("ResourceNotFound", "Tracking server " .. tostring(name) .. " does not exist.") end
  return s
end

function ops.CreateMlflowTrackingServer(ctx, input)
  local name = input.TrackingServerName
  if type(name) ~= "string" or not name:match("^[%w][%w%-]*$") or #name > 256 then
    ctx.error("ValidationException", "1 validation error detected: Value '" .. tostring(name) .. "' at " ..
      "'trackingServerName' failed to satisfy constraint: Member must satisfy regular expression pattern: " ..
      "^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,255}")
  end
  if ctx.state:get("mlflow", name) then
    ctx.error("ValidationException", "Tracking server with name " .. name .. " already exists.")
  end
  local bucket = D.s3_uri(input.ArtifactStoreUri)
  if not bucket or not D.bucket_exists(ctx, bucket) then
    ctx.error("ValidationException", "ArtifactStoreUri " .. tostring(input.ArtifactStoreUri) ..
      " must name an existing S3 bucket.")
  end
  if not D.role(ctx, input.RoleArn) then
    ctx.error("ValidationException", "RoleArn " .. tostring(input.RoleArn) .. " does not exist or cannot be assumed.")
  end
  local size = input.TrackingServerSize or "Small"
  if not SIZES[size] then ctx.error("ValidationException", "TrackingServerSize must be Small, Medium or Large.") end
  local now = ctx.now()
  local who = { IamIdentity = { Arn = ctx.principal.arn, PrincipalId = ctx.principal.user_id } }
  local s = {
    TrackingServerArn = ctx:arn("mlflow-tracking-server/" .. name), TrackingServerName = name,
    ArtifactStoreUri = input.ArtifactStoreUri, TrackingServerSize = size, MlflowVersion = input.MlflowVersion or "3.0",
    RoleArn = input.RoleArn, TrackingServerStatus = "Creating", IsActive = "Inactive",
    TrackingServerUrl = string.format("https://t-%s.%s.experiments.sagemaker.aws", ctx.hex(12), ctx.region),
    WeeklyMaintenanceWindowStart = input.WeeklyMaintenanceWindowStart or "Tue:03:30",
    AutomaticModelRegistration = input.AutomaticModelRegistration == true,
    CreationTime = now, CreatedBy = who, LastModifiedTime = now, LastModifiedBy = who,
    Tags = input.Tags, -- for ListTags (sandbox.services._tags); not part of Describe's answer
  }
  ctx.state:put("mlflow", name, s)
  ctx:later(D.between(1200, 1500), "mlflow_created", { name = name })
  return { TrackingServerArn = s.TrackingServerArn }
end

function tr.mlflow_created(ctx, args)
  local s = ctx.state:get("mlflow", args.name)
  if not s or s.TrackingServerStatus ~= "Creating" then return end
  s.TrackingServerStatus, s.IsActive, s.LastModifiedTime = "Created", "Active", ctx.now()
  ctx.state:put("mlflow", s.TrackingServerName, s)
end

function ops.DescribeMlflowTrackingServer(ctx, input)
  local s = D.copy(server(ctx, input.TrackingServerName))
  s.Tags, s.pending = nil, nil
  return s
end

function ops.ListMlflowTrackingServers(ctx, input)
  local all = {}
  for _, s in ipairs(ctx.state:list("mlflow")) do
    if (not input.TrackingServerStatus or s.TrackingServerStatus == input.TrackingServerStatus)
      and (not input.MlflowVersion or s.MlflowVersion == input.MlflowVersion)
      and (not input.CreatedAfter or s.CreationTime > input.CreatedAfter)
      and (not input.CreatedBefore or s.CreationTime < input.CreatedBefore) then
      all[#all + 1] = { TrackingServerArn = s.TrackingServerArn, TrackingServerName = s.TrackingServerName,
        CreationTime = s.CreationTime, LastModifiedTime = s.LastModifiedTime,
        TrackingServerStatus = s.TrackingServerStatus, IsActive = s.IsActive, MlflowVersion = s.MlflowVersion }
    end
  end
  local by = input.SortBy == "Name" and "TrackingServerName" or input.SortBy == "Status" and "TrackingServerStatus"
    or "CreationTime"
  local desc = (input.SortOrder or "Descending") == "Descending"
  table.sort(all, function(a, b)
    if desc then return a[by] > b[by] end
    return a[by] < b[by]
  end)
  local page, nxt = D.page(ctx, all, input.MaxResults, input.NextToken, 100, "ValidationException")
  return { TrackingServerSummaries = page, NextToken = nxt }
end

function ops.DeleteMlflowTrackingServer(ctx, input)
  local s = server(ctx, input.TrackingServerName)
  ctx.target = s.TrackingServerName
  if s.TrackingServerStatus ~= "Deleting" then
    s.TrackingServerStatus, s.IsActive, s.LastModifiedTime = "Deleting", "Inactive", ctx.now()
    ctx.state:put("mlflow", s.TrackingServerName, s)
    ctx:later(D.between(180, 420), "mlflow_deleted", { name = s.TrackingServerName })
  end
  return { TrackingServerArn = s.TrackingServerArn }
end

function tr.mlflow_deleted(ctx, args)
  ctx.state:delete("mlflow", args.name)
  require("sandbox.mlflow.store").forget(ctx.state, args.name) -- its experiments, runs and metrics
end

-- SearchTrainingPlanOfferings: offerings for the asked type and count, in
-- the region's first zone, starting a day from now
function ops.SearchTrainingPlanOfferings(ctx, input)
  local itype = input.InstanceType
  if itype and not require("sandbox.data.instance_types")[itype] then
    ctx.error("ValidationException", "InstanceType " .. tostring(itype) .. " is not a valid instance type.")
  end
  local hours = tonumber(input.DurationHours) or 24
  if hours < 1 then ctx.error("ValidationException", "DurationHours must be at least 1.") end
  local count = tonumber(input.InstanceCount) or 1
  local start = math.floor(ctx.now()) + DAY
  local offerings = json.array()
  for i, zone in ipairs { "a", "b" } do
    local id = "tpo-" .. ctx.hex(20)
    local offer = {
      TrainingPlanOfferingId = id, TargetResources = input.TargetResources or json.array { "hyperpod-cluster" },
      DurationHours = hours, DurationMinutes = 0, UpfrontFee = string.format("%.2f", 32.77 * hours * count * i),
      CurrencyCode = "USD",
      ReservedCapacityOfferings = json.array { { ReservedCapacityType = "Instance", InstanceType = itype or "ml.p5.48xlarge",
        InstanceCount = count, AvailabilityZone = ctx.region .. zone, DurationHours = hours, DurationMinutes = 0,
        StartTime = start, EndTime = start + hours * 3600 } },
    }
    ctx.state:put("offering", id, offer)
    offerings[#offerings + 1] = offer
  end
  return { TrainingPlanOfferings = offerings, TrainingPlanExtensionOfferings = json.array() }
end

-- CreateTrainingPlan: buys an offering; the plan is Scheduled until it starts
function ops.CreateTrainingPlan(ctx, input)
  M.seed(ctx)
  local name = input.TrainingPlanName
  if ctx.state:get("training_plan", name) then
    ctx.error("ResourceInUse", "Training plan " .. name .. " already exists.")
  end
  local offer = ctx.state:get("offering", input.TrainingPlanOfferingId)
  if not offer then
    ctx.error("ResourceNotFound", "Training plan offering " .. tostring(input.TrainingPlanOfferingId) .. " not found.")
  end
  local rco = offer.ReservedCapacityOfferings[1]
  local arn = ctx:arn("training-plan/" .. name, "sagemaker")
  ctx.state:put("training_plan", name, {
    TrainingPlanArn = arn, TrainingPlanName = name, Status = "Scheduled", StatusMessage = "",
    DurationHours = offer.DurationHours, DurationMinutes = 0, StartTime = rco.StartTime, EndTime = rco.EndTime,
    UpfrontFee = offer.UpfrontFee, CurrencyCode = "USD", TotalInstanceCount = rco.InstanceCount,
    TotalUltraServerCount = 0, TargetResources = offer.TargetResources,
    ReservedCapacitySummaries = json.array { {
      ReservedCapacityArn = ctx:arn("reserved-capacity/" .. name .. "-rc-" .. ctx.hex(8), "sagemaker"),
      ReservedCapacityType = "Instance", InstanceType = rco.InstanceType, TotalInstanceCount = rco.InstanceCount,
      Status = "Scheduled", AvailabilityZone = rco.AvailabilityZone, DurationHours = rco.DurationHours,
      DurationMinutes = 0, StartTime = rco.StartTime, EndTime = rco.EndTime } },
  })
  ctx.state:delete("offering", input.TrainingPlanOfferingId)
  return { TrainingPlanArn = arn }
end

-- CreatePresignedMlflowTrackingServerUrl: a short-lived sign-in URL
function ops.CreatePresignedMlflowTrackingServerUrl(ctx, input)
  local s = server(ctx, input.TrackingServerName)
  local expires = tonumber(input.ExpiresInSeconds) or 300
  if expires < 5 or expires > 300 then ctx.error("ValidationException", "ExpiresInSeconds must be 5 to 300.") end
  return { AuthorizedUrl = s.TrackingServerUrl .. "/auth?authToken=" .. ctx.hex(64) }
end

return M
