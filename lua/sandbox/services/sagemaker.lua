-- The simulated Amazon SageMaker HyperPod API (regional): clusters and
-- their instance groups, nodes, training plans and MLflow tracking
-- servers. Each family lives in lua/sandbox/services/sagemaker/*.lua; this
-- module merges their operations and transitions.
local M = { scope = "regional", operations = {}, transitions = {} }

for _, part in ipairs { "clusters", "nodes", "plans" } do
  local mod = require("sandbox.services.sagemaker." .. part)
  for k, v in pairs(mod.operations) do M.operations[k] = v end
  for k, v in pairs(mod.transitions) do M.transitions[k] = v end
end

return M
