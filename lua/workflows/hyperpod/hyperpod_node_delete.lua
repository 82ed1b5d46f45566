-- hyperpod_node_delete: remove HyperPod nodes from the cluster
-- (BatchDeleteClusterNodes): each instance is terminated and its group's
-- target count goes down by one. A quick tool: SageMaker answers at once
-- per node (a failure carries `Code` here, not `ErrorCode`), and refuses a
-- node already shutting down (InvalidNodeStatus), so a repeated call
-- deletes nothing twice.
local P = require "_params"
local N = require "hyperpod._nodes"
local cap = require "_capacity"

return tool {
  name = "hyperpod_node_delete",
  summary = "Delete HyperPod nodes (terminate them and lower their group's count), with each node's outcome",
  description = "Deletes the given nodes of the active (or named) HyperPod cluster: each instance is terminated, its " ..
    "local data lost, and its group's target count lowered, so it is not replaced. Answers at once with " ..
    "the nodes accepted and those refused. Follow it with hyperpod_list_nodes (wait_seconds).",
  kind = "destructive",
  aws = cap.aws("sagemaker:BatchDeleteClusterNodes"),
  params = P.form({ "nodes" },
    { "cluster", "region" },
    N.params("The nodes to delete (ask the person: they and their local data are gone for good).", true,
      "The nodes to remove from their group for good: their work stops and their local volumes are wiped.")),
  result = N.RESULT,
  status_tool = "hyperpod_list_nodes",
  run = N.runner("BatchDeleteClusterNodes", 99, "Code"),
}
