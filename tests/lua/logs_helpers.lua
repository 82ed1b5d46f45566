-- What job_logs_test and ws_logs_test share: the training operator's CRDs
-- on a sandbox cluster and a small HyperPodPyTorchJob.
local M = {}

-- training_operator(conn): the HyperPod training operator's CRDs (as the
-- add-on installs them); the sandbox then runs HyperPodPyTorchJobs
function M.training_operator(conn)
  local resources = require "sandbox.k8s.resources"
  for _, row in ipairs(resources.CRDS) do
    if row[1] == "sagemaker.amazonaws.com" then assert(conn:create(resources.crd(row))) end
  end
end

-- hyperpod_job(conn, name, o): a HyperPodPyTorchJob of o.replicas (2) pods
-- running o.steps (sandbox.hypd.io/steps) with o.retries restarts allowed;
-- created as soon as its CRD is served
function M.hyperpod_job(conn, name, o)
  local tpl = { spec = { containers = { { name = "pytorch", image = "pytorch/pytorch:2.6.0",
    command = { "torchrun", "train.py" } } } } }
  for _ = 1, 60 do
    if conn:create { apiVersion = "sagemaker.amazonaws.com/v1", kind = "HyperPodPyTorchJob",
      metadata = { name = name, namespace = "default", annotations = { ["sandbox.hypd.io/steps"] = tostring(o.steps) } },
      spec = { nprocPerNode = "1", replicaSpecs = { { name = "pods", replicas = o.replicas or 2, template = tpl } },
        runPolicy = { jobMaxRetryCount = o.retries or 0 } } } then return end
    require("hypd.task").sleep(1)
  end
  error("the HyperPodPyTorchJob CRD was never served")
end

return M
