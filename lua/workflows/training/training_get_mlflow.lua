-- training_get_mlflow: a cluster's MLflow tracking server as it is now
-- (status, URL, ARN: the tracking URI jobs get), and the region's others;
-- with wait_seconds, first waits for its status to change.
local P = require "_params"
local S = require "storage._storage"
local ML = require "training._mlflow"

return tool {
  name = "training_get_mlflow",
  summary = "The MLflow tracking server of a cluster's jobs: status, URL, tracking URI",
  description = "Reads the SageMaker managed MLflow tracking server name (default hypd-<tag>-mlflow, the one " ..
    "training_setup_mlflow makes for the active or named cluster): its status (Creating, Created, Updating, " ..
    "Updated, Deleting, ...), whether it is active, its URL, its ARN (the MLFLOW_TRACKING_URI jobs get), " ..
    "artifact store, role and size, and lists the region's other tracking servers. With wait_seconds it first " ..
    "waits up to that long for the status to change (creation takes about 20 minutes).",
  kind = "read",
  aws = { "eks:DescribeCluster", "sagemaker:DescribeMlflowTrackingServer", "sagemaker:ListMlflowTrackingServers" },
  params = { cluster = P.cluster, region = P.region, wait_seconds = P.wait_seconds,
    name = { type = "string", pattern = "^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,255}$|^arn:aws[a-z-]*:sagemaker:",
      max_length = 2048, pattern_help = "a tracking server name or ARN",
      description = "the tracking server (default: the cluster's, hypd-<tag>-mlflow)" } },
  run = function(ctx, p)
    local name = p.name and ML.name_of(p.name)
    local cl
    if not name then
      cl = S.cluster(ctx, p)
      name = ML.server_name(cl.tag)
    end
    local d = ML.describe(ctx, name)
    if not d then
      hypd.errors.raise("NOT_FOUND", "no MLflow tracking server " .. name .. " (training_setup_mlflow makes it)",
        { fields = { { field = "name", rule = "exists", message = "name: no tracking server " .. name } } })
    end
    local before = d.TrackingServerStatus
    local changed = false
    if p.wait_seconds > 0 then
      local first = true
      local deadline = hypd.now() + p.wait_seconds
      ctx:poll { what = "tracking server " .. name .. " to change from " .. tostring(before), phase = false,
        every = math.min(30, p.wait_seconds), timeout = p.wait_seconds + 5,
        check = function()
          if first then first = false; return false end
          d = ML.describe(ctx, name) or { TrackingServerName = name, TrackingServerStatus = "Deleted" }
          changed = d.TrackingServerStatus ~= before
          return changed or hypd.now() >= deadline
        end }
    end
    local out = ML.view(d)
    out.changed = changed
    out.cluster = cl and cl.name or nil
    out.region = ctx:aws_region()
    out.others = hypd.json.array()
    for _, s in ipairs(hypd.aws.all("sagemaker", "ListMlflowTrackingServers", {}, ctx:aws_opts())) do
      if s.TrackingServerName ~= name then
        out.others[#out.others + 1] = { name = s.TrackingServerName, arn = s.TrackingServerArn,
          status = s.TrackingServerStatus, active = s.IsActive == "Active" }
      end
    end
    return out
  end,
}
