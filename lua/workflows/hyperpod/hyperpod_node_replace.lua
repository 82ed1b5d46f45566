-- hyperpod_node_replace: replace HyperPod nodes with new instances
-- (BatchReplaceClusterNodes). Destructive: the old instance is terminated
-- and everything on its local volumes (root volume, instance store, the
-- extra EBS volume) is lost, which is why the API model classes the call as
-- deleting. A quick tool, like the other node operations: SageMaker answers
-- at once per node, and refuses a node already being replaced
-- (InstanceIdInUse), so a repeated call replaces nothing twice.
local P = require "_params"
local N = require "hyperpod._nodes"
local cap = require "_capacity"

return tool {
  name = "hyperpod_node_replace",
  summary = "Replace HyperPod nodes with new instances; WIPES their local volumes",
  description = "Replaces the given nodes of the active (or named) HyperPod cluster with new instances. WARNING: the " ..
    "old instances are terminated and their local volumes are wiped; copy what is needed to S3 or FSx " ..
    "first. Answers at once with the nodes accepted and those refused (code, message). Follow it with " ..
    "hyperpod_list_nodes (wait_seconds).",
  kind = "destructive",
  aws = cap.aws("sagemaker:BatchReplaceClusterNodes"),
  params = P.form({ "nodes" },
    { "cluster", "region" },
    N.params("The nodes to replace (ask the person: their local data is lost).", true,
      "Each node is swapped for a new instance: its work stops and its local volumes are wiped.")),
  result = N.RESULT,
  status_tool = "hyperpod_list_nodes",
  run = N.runner("BatchReplaceClusterNodes", 25, "ErrorCode"),
}
