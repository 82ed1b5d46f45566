-- ms-swift: MS-Swift fine-tuning (swift sft / swift rlhf) on a
-- HyperPodPyTorchJob, model and dataset from the storage.
local C = require "_common"

local IMAGE = "modelscope-registry.us-west-1.cr.aliyuncs.com/modelscope-repo/modelscope:" ..
  "ubuntu22.04-cuda12.4.0-py311-torch2.6.0-vllm0.8.5.post1-modelscope1.27.1-swift3.5.3"

return {
  name = "ms-swift",
  description = "Fine-tunes a model with MS-Swift as a HyperPodPyTorchJob (swift sft, or swift rlhf for DPO/GRPO): " ..
    "the model from /s3 (or a Hugging Face id), the dataset file from /s3, checkpoints written to /s3/outputs/JOB.",
  params = C.hpj_params(IMAGE, {
    model = C.MODEL,
    dataset = C.path("the dataset file under /s3 (datasets/train.jsonl)", true),
    mode = { type = "string", enum = { "sft", "dpo", "grpo" }, default = "sft",
      description = "supervised fine-tuning, or RLHF with DPO or GRPO (swift rlhf)" },
    train_type = { type = "string", enum = { "lora", "full" }, default = "lora", description = "LoRA or full" },
    epochs = { type = "number", default = 1, minimum = 0.01, maximum = 1000, description = "training epochs" },
  }),
  render = function(p)
    local _, out = C.dirs(p)
    local gpus = C.sizes(p)
    local cmd = p.mode == "sft" and "swift sft" or ("swift rlhf --rlhf_type " .. p.mode)
    local lines = { "set -e", "export NNODES=" .. p.replicas .. " NPROC_PER_NODE=" .. gpus ..
      " NODE_RANK=${RANK:-0} MASTER_ADDR=${MASTER_ADDR:-localhost} MASTER_PORT=${MASTER_PORT:-29500}",
      "exec " .. cmd .. " --model " .. C.quote(C.model_path(p.model)) .. " --dataset " ..
      C.quote(C.MOUNT .. "/" .. p.dataset) .. " --train_type " .. p.train_type .. " --num_train_epochs " ..
      p.epochs .. " --output_dir " .. C.quote(out) .. " --logging_steps 10 --save_steps 500" ..
      (C.mlflow(p) and (" --report_to mlflow --run_name " .. C.quote(p.job_name)) or "") }
    return { C.pytorch_job(p, "ms-swift", { image = p.image, command = C.shell(lines) }, { hang = C.HANG_HF }) }
  end,
}
