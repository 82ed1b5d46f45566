-- The simulated Amazon EKS control plane (regional): clusters, add-ons,
-- access entries and pod identity associations, managed node groups. Each resource family lives
-- in lua/sandbox/services/eks/*.lua; this module merges their operations
-- and transitions.
local M = { scope = "regional", operations = {}, transitions = {} }

for _, part in ipairs { "clusters", "addons", "access", "nodegroups" } do
  local mod = require("sandbox.services.eks." .. part)
  for k, v in pairs(mod.operations) do M.operations[k] = v end
  for k, v in pairs(mod.transitions) do M.transitions[k] = v end
end

local tags = require("sandbox.services._tags").operations {
  kinds = { { kind = "cluster", arn = "arn", tags = "tags", id = "name" },
            { kind = "nodegroup", arn = "nodegroupArn", tags = "tags", id = "key" } },
  style = "map", names = { "TagResource", "UntagResource", "ListTagsForResource" },
  arn_param = "resourceArn", tags_param = "tags", keys_param = "tagKeys",
  not_found = function(ctx, arn)
    ctx.error("NotFoundException", "Resource not found: " .. tostring(arn), 404)
  end,
}
for k, v in pairs(tags) do M.operations[k] = v end

return M
