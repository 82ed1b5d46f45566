-- training_list_recipes: the recipes training_render (and training_submit)
-- take, each with its parameter schema.
return tool {
  name = "training_list_recipes",
  summary = "The training recipes, each with its description and parameter schema",
  description = "Lists the training recipes: the built-in ones (pytorch-torchrun, llama-factory, ms-swift, verl) " ..
    "and the playbook directory's recipes/ files (which replace a built-in of the same name). Each has a JSON " ..
    "Schema of its parameters (x-hypd-decision marks what a person must choose). Every recipe shares one data " ..
    "contract: the S3 storage claim (storage_claim, default s3-claim) mounted at /s3 in every pod; datasets are " ..
    "read from it and checkpoints and outputs written under /s3/checkpoints/JOB and /s3/outputs/JOB. A recipe " ..
    "file that is refused is listed with its error. Render one with training_render.",
  kind = "read",
  params = {},
  result = { type = "object", properties = { recipes = { type = "array", items = { type = "object",
    properties = { name = { type = "string" }, description = { type = "string" }, source = { type = "string" },
      params = { type = "object" }, error = { type = "string" } } } } } },
  run = function()
    return { recipes = hypd.recipes.list() }
  end,
}
