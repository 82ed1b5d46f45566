-- llama-factory: LLaMA-Factory supervised fine-tuning (llamafactory-cli
-- train) on a HyperPodPyTorchJob, model and dataset from the storage.
local C = require "_common"

return {
  name = "llama-factory",
  description = "Fine-tunes a model with LLaMA-Factory (v0.9.3) as a HyperPodPyTorchJob: the model from /s3 " ..
    "(or a Hugging Face id), the dataset from /s3 in LLaMA-Factory's format, the adapter or weights written to " ..
    "/s3/outputs/JOB.",
  params = C.hpj_params("hiyouga/llamafactory:0.9.3", {
    model = C.MODEL,
    dataset_dir = C.path("the folder under /s3 holding the dataset and its dataset_info.json (datasets/alpaca)", true),
    dataset = { type = "string", required = true, decision = true, pattern = "^[A-Za-z0-9_.,-]+$",
      pattern_help = "dataset names from dataset_info.json, separated by ','",
      description = "the dataset name(s) in dataset_info.json" },
    template = { type = "string", default = "qwen", pattern = "^[a-z0-9_.-]+$",
      pattern_help = "a LLaMA-Factory chat template name", description = "the chat template (qwen, llama3, ...)" },
    finetuning_type = { type = "string", enum = { "lora", "full", "freeze" }, default = "lora",
      description = "LoRA adapters, full fine-tuning, or frozen layers" },
    epochs = { type = "number", default = 3, minimum = 0.01, maximum = 1000, description = "training epochs" },
    learning_rate = { type = "number", default = 1e-4, minimum = 0, maximum = 1, description = "learning rate" },
  }),
  render = function(p)
    local _, out = C.dirs(p)
    local cfg = {
      "model_name_or_path: " .. C.model_path(p.model), "stage: sft", "do_train: true",
      "finetuning_type: " .. p.finetuning_type, "dataset_dir: " .. C.MOUNT .. "/" .. p.dataset_dir,
      "dataset: " .. p.dataset, "template: " .. p.template, "output_dir: " .. out,
      "num_train_epochs: " .. p.epochs, "learning_rate: " .. p.learning_rate, "save_steps: 500",
      "logging_steps: 10", "bf16: true", "overwrite_output_dir: true",
      -- loss, learning rate and throughput to MLflow (the Trainer's MLflow callback), or nowhere
      C.mlflow(p) and "report_to: mlflow" or "report_to: none", C.mlflow(p) and ("run_name: " .. p.job_name) or nil,
    }
    local gpus = C.sizes(p)
    local lines = { "set -e", "cat > /tmp/train.yaml <<'HYPD'", table.concat(cfg, "\n"), "HYPD",
      "export FORCE_TORCHRUN=1 NNODES=" .. p.replicas .. " NPROC_PER_NODE=" .. gpus,
      "exec llamafactory-cli train /tmp/train.yaml" }
    return { C.pytorch_job(p, "llama-factory", { image = p.image, command = C.shell(lines) }, { hang = C.HANG_HF }) }
  end,
}
