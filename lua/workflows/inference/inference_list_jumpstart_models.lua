-- inference_list_jumpstart_models: the models of the SageMaker public hub
-- (SageMakerPublicHub, ListHubContents with HubContentType Model), filtered
-- by a name substring and a task, a page at a time, each with what a
-- deploy needs to decide: id, latest version, display name, task, the
-- recommended and the supported instance types (DescribeHubContent's
-- document), and whether it is gated (needs accept_eula).
local M = require "inference._managed"
local P = require "_params"

return tool {
  name = "inference_list_jumpstart_models",
  summary = "JumpStart models in the SageMaker public hub: id, version, task, recommended and supported instance types",
  description = "Lists the models of the SageMaker public hub (ListHubContents on SageMakerPublicHub) whose id " ..
    "contains name_contains and whose task is task (e.g. text-generation), sorted by id, max_results at a time " ..
    "(next_token gives the next page). Each model has its id (inference_deploy_jumpstart's model_id), latest " ..
    "version, display name, task, recommended_instance_type, supported_instance_types and gated (true: " ..
    "deploying it needs accept_eula=true). Nothing is created.",
  kind = "read",
  aws = { "sagemaker:ListHubContents", "sagemaker:DescribeHubContent" },
  params = P.form({},
    { "max_results", "name_contains", "next_token", "task", "region" },
    {
    region = P.region,
    name_contains = { type = "string", pattern = "^[A-Za-z0-9._-]{1,63}$", pattern_help = "part of a model id",
      description = "only models whose id contains this (case-insensitive)" },
    task = { type = "string", pattern = "^[a-z0-9-]{1,63}$", pattern_help = "a task like text-generation",
      description = "only models of this task (text-generation, sentence-similarity, ...)" },
    max_results = { type = "integer", minimum = 1, maximum = 100, default = 20, description = "models per page" },
    next_token = { type = "string", pattern = "^[0-9]{1,6}$", description = "the previous page's next_token" },
  }),
  run = function(ctx, p)
    if p.region then ctx.region = p.region end
    local input = { HubName = M.HUB, HubContentType = "Model", NameContains = p.name_contains, MaxResults = 100,
      SortBy = "HubContentName", SortOrder = "Ascending" }
    local all = {}
    for _, s in ipairs(M.summaries(ctx, "ListHubContents", input)) do
      if not p.task or M.task(s) == p.task then all[#all + 1] = s end
    end
    table.sort(all, function(a, b) return a.HubContentName < b.HubContentName end)
    local start = tonumber(p.next_token or "0") + 1
    local models = hypd.json.array()
    for i = start, math.min(#all, start + p.max_results - 1) do
      local s = all[i]
      local d = M.describe(ctx, s.HubContentName, s.HubContentVersion)
      models[#models + 1] = M.model_view(s, d)
    end
    local nxt = start + p.max_results <= #all and tostring(start + p.max_results - 1) or nil
    return { hub = M.HUB, region = ctx:aws_region(), models = models, total = #all, next_token = nxt }
  end,
}
