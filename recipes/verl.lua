-- verl: VERL reinforcement learning (PPO or GRPO) as a RayJob on KubeRay.
local C = require "_common"

return {
  name = "verl",
  description = "Trains a model with VERL reinforcement learning (GRPO or PPO) as a RayJob on KubeRay: a Ray " ..
    "head and N GPU workers, training and validation data (parquet) from /s3, checkpoints to /s3/checkpoints/JOB.",
  params = C.params("verlai/verl:app-verl0.5-vllm0.9.1-mcore0.12.2-te2.2", {
    model = C.MODEL,
    train_files = C.path("the training data (parquet) under /s3 (datasets/gsm8k/train.parquet)", true),
    val_files = C.path("the validation data (parquet) under /s3 (datasets/gsm8k/test.parquet)", true),
    algorithm = { type = "string", enum = { "grpo", "gae" }, default = "grpo",
      description = "the advantage estimator: grpo (GRPO) or gae (PPO with a critic)" },
    epochs = { type = "integer", default = 1, minimum = 1, maximum = 1000, description = "training epochs" },
    ray_version = { type = "string", default = "2.46.0", pattern = "^[0-9]+\\.[0-9]+\\.[0-9]+$",
      pattern_help = "a Ray version like 2.46.0", description = "the Ray version of the image" },
  }),
  render = function(p)
    local ckpt = C.dirs(p)
    local gpus = C.sizes(p)
    local args = { "python3", "-m", "verl.trainer.main_ppo", "algorithm.adv_estimator=" .. p.algorithm,
      "data.train_files=" .. C.MOUNT .. "/" .. p.train_files, "data.val_files=" .. C.MOUNT .. "/" .. p.val_files,
      "actor_rollout_ref.model.path=" .. C.model_path(p.model), "trainer.nnodes=" .. p.replicas,
      "trainer.n_gpus_per_node=" .. gpus, "trainer.total_epochs=" .. p.epochs,
      "trainer.default_local_dir=" .. ckpt }
    local ml = C.mlflow(p)
    if ml then
      -- VERL's tracking: the mlflow backend, experiment = project_name, run = experiment_name
      args[#args + 1] = "trainer.logger=[console,mlflow]"
      args[#args + 1] = "trainer.project_name=" .. C.quote(ml.experiment)
      args[#args + 1] = "trainer.experiment_name=" .. C.quote(ml.run)
    else
      args[#args + 1] = "trainer.logger=[console]"
    end
    if p.algorithm == "gae" then args[#args + 1] = "critic.model.path=" .. C.model_path(p.model) end
    return { C.ray_job(p, "verl", table.concat(args, " "), p.ray_version) }
  end,
}
