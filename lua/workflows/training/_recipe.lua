-- training/_recipe.lua: what the training tools share about recipes: the
-- recipe and params parameters, and rendering a recipe's objects with a
-- bad parameter named as the tool's field (params.gpus_per_node).
local M = {}

M.recipe = { type = "string", required = true, decision = true, pattern = "^[a-z0-9][a-z0-9-]*$",
  pattern_help = "a recipe name (training_list_recipes lists them)",
  description = "the recipe: pytorch-torchrun, llama-factory, ms-swift, verl, or one of the playbook directory's " ..
    "(training_list_recipes lists them with their parameters)" }
M.params = { type = "object", default = {}, decision = true,
  description = "the recipe's parameters (training_list_recipes gives each recipe's schema), e.g. {\"job_name\": " ..
    "\"demo\", \"instance_type\": \"ml.g5.12xlarge\", \"script\": \"scripts/train.py\"}" }

-- render(ctx, recipe, params) -> validated params, objects; a VALIDATION
-- whose fields are the tool's (recipe, params.<name>)
function M.render(ctx, recipe, params)
  local ok, p, objs = pcall(hypd.recipes.render, recipe, params or {}, ctx)
  if ok then return p, objs end
  local e = p
  if hypd.errors.is(e) and e.code == "VALIDATION" and type(e.fields) == "table" then
    local fields = {}
    for i, f in ipairs(e.fields) do
      local name = (f.field == "recipe" or f.field == "") and "recipe" or "params." .. f.field
      fields[i] = { field = name, rule = f.rule, message = f.message }
    end
    hypd.errors.refuse_all(fields, e.message)
  end
  error(e, 0)
end

return M
