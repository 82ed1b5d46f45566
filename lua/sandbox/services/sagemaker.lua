-- The simulated Amazon SageMaker HyperPod API (regional): clusters and
-- their instance groups, nodes, training plans and MLflow tracking
-- servers, the JumpStart public hub and the endpoints HyperPod registers,
-- and the empty lists of what it never makes (sagemaker/unmade.lua).
-- Each family lives in lua/sandbox/services/sagemaker/*.lua; this module
-- merges their operations and transitions.
local M = { scope = "regional", operations = {}, transitions = {} }

for _, part in ipairs { "clusters", "nodes", "plans", "autoscaling", "hub", "endpoints", "mlflow", "unmade" } do
  local mod = require("sandbox.services.sagemaker." .. part)
  for k, v in pairs(mod.operations) do M.operations[k] = v end
  for k, v in pairs(mod.transitions) do M.transitions[k] = v end
end

local tags = require("sandbox.services._tags").operations {
  kinds = { { kind = "cluster", arn = "ClusterArn", tags = "Tags", id = "ClusterName" },
            { kind = "mlflow", arn = "TrackingServerArn", tags = "Tags", id = "TrackingServerName" } },
  style = "list", names = { "AddTags", "DeleteTags", "ListTags" },
  arn_param = "ResourceArn", tags_param = "Tags", keys_param = "TagKeys",
  not_found = function(ctx, arn)
    ctx.error("ValidationException", "Resource " .. tostring(arn) .. " does not exist.", 400)
  end,
}
for k, v in pairs(tags) do M.operations[k] = v end

return M
