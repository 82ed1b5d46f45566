-- hyperpod_node_reboot: reboot HyperPod nodes (BatchRebootClusterNodes).
-- A quick tool: SageMaker answers at once with each node's outcome, and a
-- node already rebooting is refused by the service itself (InstanceIdInUse),
-- so a repeated call reboots nothing twice; hyperpod_list_nodes follows it.
local P = require "_params"
local N = require "hyperpod._nodes"
local cap = require "_capacity"

return tool {
  name = "hyperpod_node_reboot",
  summary = "Reboot HyperPod nodes (by instance id or Kubernetes node name), with each node's outcome",
  description = "Reboots the given nodes of the active (or named) HyperPod cluster; their pods stop while they " ..
    "reboot, local volumes are kept. Answers at once with the nodes accepted and those refused (code, " ..
    "message). Follow it with hyperpod_list_nodes (wait_seconds) until they are Running and Ready again.",
  kind = "mutating",
  aws = cap.aws("sagemaker:BatchRebootClusterNodes"),
  params = P.form({ "nodes" }, { "cluster", "region" }, N.params("The nodes to reboot.", nil,
      "Each node restarts: the work on it stops and its local volumes are kept.")),
  result = N.RESULT,
  status_tool = "hyperpod_list_nodes",
  run = N.runner("BatchRebootClusterNodes", 25, "ErrorCode"),
}
