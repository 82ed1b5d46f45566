-- training_get_mlflow: a cluster's MLflow tracking server as it is now
-- (status, URL, ARN: the tracking URI jobs get), and the region's others;
-- with wait_seconds, first waits for its status to change.
local Names = require "_names"
local P = require "_params"
local S = require "_storage"
local ML = require "training._mlflow"
local R = require "_running"
local W = require "_wait"

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
  params = P.form({},
    { "name", "cluster", "region", "wait_seconds" },
    { cluster = P.cluster, region = P.region, wait_seconds = P.wait_seconds,
    name = { type = "string", pattern = "^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,255}$|^arn:aws[a-z-]*:sagemaker:",
      max_length = 2048, pattern_help = "a tracking server name or ARN",
      description = "the tracking server (default: the cluster's, hypd-<tag>-mlflow)" } }, { name = "Tracking server" }),
  run = function(ctx, p)
    local name = p.name and ML.name_of(p.name)
    local cl
    if not name then
      cl = S.cluster(ctx, p)
      name = Names.mlflow(cl.tag).server
    end
    local region, cluster_name = ctx:aws_region(), cl and cl.name
    if not cluster_name then
      local target = hypd.clusters.target(p)
      cluster_name = target and target.name or "?"
    end
    -- training_setup_mlflow's target names the server, or "default" for the cluster's own
    local at = string.format("mlflow/%s/%s/", region, cluster_name)
    local match = p.name and { at .. name } or { at .. name, at .. "default" }
    local function read() return { d = ML.describe(ctx, name), op = R.on(match) } end
    local now = read()
    if not now.d and not now.op then
      hypd.errors.refuse("name", "exists", "no MLflow tracking server " .. name .. " (training_setup_mlflow makes it)",
        { code = "NOT_FOUND", field_message = "name: no tracking server " .. name })
    end
    local first = true
    local w, waited = W.follow(p.wait_seconds, {
      read = function()
        if first then first = false; return now end
        return read()
      end,
      settled = function(x) return not x.op and not W.moving(x.d and x.d.TrackingServerStatus or "Deleted") end,
      signature = function(x) return tostring(x.d and x.d.TrackingServerStatus or "Deleted") .. " " .. R.signature(x.op) end,
      quick = function() return R.fingerprint(match) end, every = 30 })
    local d = w.d or { TrackingServerName = name, TrackingServerStatus = now.d and "Deleted" or "NotCreated" }
    local changed = waited ~= nil and waited.ended == "changed"
    local out = ML.view(d)
    out.changed = changed
    out.waited, out.operation = waited, w.op
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
