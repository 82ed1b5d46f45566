-- training_render: a recipe's objects for review, before submission.
local P = require "_params"
local R = require "training._recipe"

return tool {
  name = "training_render",
  summary = "The exact Kubernetes objects a recipe makes from its parameters, for review",
  description = "Validates the recipe's parameters (each refused naming the field, params.NAME, and the rule) " ..
    "and answers the objects that submitting it would apply: a HyperPodPyTorchJob (sagemaker.amazonaws.com/v1) " ..
    "for pytorch-torchrun, llama-factory and ms-swift, a RayJob (ray.io/v1) for verl. Nothing is sent to the " ..
    "cluster. `hypd call training_render recipe=pytorch-torchrun params:='{...}'` prints them as JSON. " ..
    "training_list_recipes gives each recipe's parameters.",
  kind = "read",
  params = P.form({ "recipe", "params" },
    {  }, { recipe = R.recipe, params = R.params }),
  result = { type = "object", properties = { recipe = { type = "string" }, params = { type = "object" },
    objects = { type = "array", items = { type = "object" } } } },
  run = function(ctx, p)
    local params, objects = R.render(ctx, p.recipe, p.params)
    return { recipe = p.recipe, params = params, objects = objects }
  end,
}
