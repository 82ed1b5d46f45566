-- SageMaker HyperPod lifecycle scripts: each new node runs its group's
-- OnCreate script and its output goes to CloudWatch Logs, log group
-- /aws/sagemaker/Clusters/<cluster name>/<cluster id>, stream
-- LifecycleConfig/<group>/<instance id>, as HyperPod writes it. A
-- lifecycle_failure fault (sandbox.faults_nodes) makes the script fail on
-- a node: its error lines are in the stream and the node fails.
local faults_nodes = require "sandbox.faults_nodes"
local logs = require "sandbox.services.logs"

local M = {}

-- group_name(c) -> the cluster's lifecycle log group
function M.group_name(c)
  return "/aws/sagemaker/Clusters/" .. c.ClusterName .. "/" .. (tostring(c.ClusterArn):match("([^/]+)$") or "")
end

function M.stream_name(g, n) return "LifecycleConfig/" .. g.InstanceGroupName .. "/" .. n.InstanceId end

-- run(ctx, c, g, n) -> nil when the script succeeded, else the node's
-- failure message; the stream gets the script's lines either way
function M.run(ctx, c, g, n)
  local script = (g.LifeCycleConfig or {}).OnCreate or "on_create.sh"
  local src = (g.LifeCycleConfig or {}).SourceS3Uri or "(no lifecycle configuration)"
  local lines = {
    string.format("[sagemaker-hyperpod] Downloading lifecycle scripts from %s", src),
    string.format("[sagemaker-hyperpod] Running %s on %s (instance group %s, %s)", script, n.InstanceId,
      g.InstanceGroupName, g.InstanceType),
    "+ echo 'Configuring containerd to use /opt/sagemaker for its data root'",
    "+ mkdir -p /opt/sagemaker/containerd",
    "+ systemctl restart containerd",
  }
  local err = faults_nodes.lifecycle(c.ClusterName, g.InstanceGroupName)
  if err then
    lines[#lines + 1] = "ERROR: " .. err
    lines[#lines + 1] = string.format("[sagemaker-hyperpod] %s failed with exit code 1", script)
  else
    lines[#lines + 1] = string.format("[sagemaker-hyperpod] %s completed successfully", script)
  end
  logs.write(ctx.region, M.group_name(c), M.stream_name(g, n), lines)
  if err then
    return string.format("Lifecycle script %s failed on the instance (exit code 1). See CloudWatch Logs log group " ..
      "%s, stream %s.", script, M.group_name(c), M.stream_name(g, n))
  end
end

-- failure(c, g, failed) -> HyperPod's FailureMessage for a cluster whose
-- creation fails because the lifecycle script failed on nodes of group g
function M.failure(c, g, failed)
  return string.format("Lifecycle scripts did not run successfully on %d instance(s) of instance group %s " ..
    "(first: %s). Check the CloudWatch Logs log group %s for details.", #failed, g.InstanceGroupName, failed[1],
    M.group_name(c))
end

return M
