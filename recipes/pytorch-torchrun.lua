-- pytorch-torchrun: a plain PyTorch script from the storage, run with
-- torchrun (hyperpodrun) on every node of a HyperPodPyTorchJob.
local C = require "_common"

return {
  name = "pytorch-torchrun",
  description = "Runs a PyTorch training script kept in the S3 storage (/s3) with torchrun on N nodes as a " ..
    "HyperPodPyTorchJob: one process per GPU, checkpoints and outputs under /s3/checkpoints/JOB and " ..
    "/s3/outputs/JOB (CHECKPOINT_DIR, OUTPUT_DIR).",
  params = C.hpj_params("763104351884.dkr.ecr.us-west-2.amazonaws.com/pytorch-training:2.6.0-gpu-py312-cu126-ubuntu22.04-ec2", {
    script = C.path("the training script, a path under /s3 (scripts/train.py)", true),
    args = { type = "array", items = { type = "string", max_length = 1024 }, default = hypd.json.array(),
      description = "the script's arguments" },
    launcher = { type = "string", enum = { "hyperpodrun", "torchrun" }, default = "hyperpodrun",
      description = "hyperpodrun (torchrun with the training operator's elastic agent) or plain torchrun" },
  }),
  render = function(p)
    local argv = { C.MOUNT .. "/" .. p.script }
    for _, a in ipairs(p.args) do argv[#argv + 1] = a end
    return { C.pytorch_job(p, "pytorch-torchrun", { image = p.image, command = C.launch(p, argv) }, { hang = C.HANG_PLAIN }) }
  end,
}
