-- jobs/_download: the Kubernetes objects of a Hugging Face model download
-- (model_download): a batch/v1 Job that runs the Hub's CLI on a CPU node
-- and copies the files into the S3 storage, and, with a token, the Secret
-- it reads HF_TOKEN from. As the reference templates do
-- (hf-download-*-template.yaml): python:3.12, `pip install
-- huggingface_hub[cli,hf_transfer]`, `hf download`, backoffLimit 3,
-- activeDeadlineSeconds 1800, CPU and memory requests only.
--
-- Where the files go: the claim (default s3-claim, storage_create_s3's) is
-- mounted at /s3 and the files are copied to /s3/<destination>, by default
-- models/<org>--<name> (the Hub's own cache naming, models--org--name,
-- without the leading "models--"), so s3://<bucket>/models/<org>--<name>/
-- holds config.json, the weights, the tokenizer. `hf download` first writes
-- into an emptyDir scratch volume: Mountpoint for S3 cannot rename files or
-- write them in place, which the CLI's .incomplete files need.
local hash = require "_hash"

local M = {}

M.MANAGED_BY = "app.kubernetes.io/managed-by"
M.KIND_LABEL = "hypd.io/job-kind"
M.KIND = "model-download"
M.DOWNLOAD_LABEL = "hypd.io/model-download"
M.ANN = { model = "hypd.io/model-id", revision = "hypd.io/revision", claim = "hypd.io/claim",
  destination = "hypd.io/destination", token = "hypd.io/token-sha256" }
M.IMAGE = "python:3.12"
M.MOUNT = "/s3"
M.SCRATCH = "/scratch"
M.TOKEN_KEY = "HF_TOKEN"
-- a finished Job (and its pods, logs and token Secret, which it owns) stays
-- a day, so job_get_status can still say how it ended; the reference's 60 s
-- would leave nothing to look at
M.TTL = 86400
M.BACKOFF, M.DEADLINE = 3, 1800
M.RESOURCES = { requests = { cpu = "2", memory = "8Gi" }, limits = { cpu = "4", memory = "16Gi" } }
M.GPU_RESOURCES = { "nvidia.com/gpu", "aws.amazon.com/neurondevice", "aws.amazon.com/neuron" }

-- the shell script of the download container: every value it uses comes
-- from the environment (MODEL_ID, REVISION, DEST_DIR; HF_TOKEN from the
-- Secret), so no parameter is ever spliced into shell text
M.SCRIPT = table.concat({
  "set -e",
  "pip install --no-cache-dir --root-user-action=ignore \"huggingface_hub[cli,hf_transfer]\"",
  "hf download \"$MODEL_ID\" --revision \"$REVISION\" --local-dir /scratch/model",
  "rm -rf /scratch/model/.cache",
  "mkdir -p \"/s3/$DEST_DIR\"",
  -- Mountpoint for S3 refuses to overwrite a file (no allow-overwrite): the
  -- files of an earlier download of the same names go first, nothing else
  "(cd /scratch/model && find . -type f -exec rm -f \"/s3/$DEST_DIR/{}\" \\;)",
  "cp -r /scratch/model/. \"/s3/$DEST_DIR/\"",
}, "\n")

-- slug(model_id) -> a DNS label part: "Qwen/Qwen2.5-0.5B-Instruct" -> "qwen-qwen2-5-0-5b-instruct"
function M.slug(id)
  return (id:lower():gsub("[^a-z0-9]+", "-"):gsub("^%-+", ""):gsub("%-+$", ""))
end

-- default_name(model_id) -> hf-download-<slug>, cut to 63 with a hash
function M.default_name(id)
  local name = "hf-download-" .. M.slug(id)
  if #name <= 63 then return name end
  return (name:sub(1, 56):gsub("%-+$", "")) .. "-" .. hash.fnv1a(id, 6)
end

-- secret_name(job) -> <job>-hf-token (cut to 63 with a hash)
function M.secret_name(job)
  local name = job .. "-hf-token"
  if #name <= 63 then return name end
  return (job:sub(1, 47):gsub("%-+$", "")) .. "-" .. hash.fnv1a(job, 6) .. "-hf-token"
end

-- default_destination(model_id) -> models/<org>--<name>
function M.default_destination(id) return "models/" .. id:gsub("/", "--") end

-- base64 (the Secret's data; playbooks have no binding for it)
local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
function M.b64(s)
  local out = {}
  for i = 1, #s, 3 do
    local a, b, c = s:byte(i, i + 2)
    local n = (a << 16) | ((b or 0) << 8) | (c or 0)
    local q = {}
    for k = 1, 4 do
      local v = (n >> (6 * (4 - k))) & 63
      q[k] = B64:sub(v + 1, v + 1)
    end
    if not b then q[3], q[4] = "=", "=" elseif not c then q[4] = "=" end
    out[#out + 1] = table.concat(q)
  end
  return table.concat(out)
end

-- token_hash(token) -> the first 16 hex digits of its SHA-256: what tells a
-- changed token from the same one without keeping it
function M.token_hash(token) return hypd.digest("sha256", token):sub(1, 16) end

local function is_gpu_node(node)
  local cap = (node.status or {}).capacity or {}
  for _, r in ipairs(M.GPU_RESOURCES) do
    if (tonumber(cap[r]) or 0) > 0 then return true end
  end
  return false
end

-- placement(nodes) -> affinity, {gpu_types, cpu_nodes}: where the pod may run.
-- Required node affinity, not a preference: a download is hours of network
-- and disk work that must never hold a GPU node, and a preference would
-- still put it on one when the CPU nodes are full. The rule excludes, in
-- one term (all must hold):
--   * node.kubernetes.io/instance-type NotIn the instance types whose
--     nodes on this cluster advertise GPUs or Neuron devices now;
--   * nvidia.com/gpu.present NotIn [true] (GPU feature discovery's label);
--   * karpenter.k8s.aws/instance-gpu-count NotIn the non-zero counts (a
--     GPU node Karpenter would launch for the pod).
-- The pod has no toleration, so nodes tainted nvidia.com/gpu stay out too.
function M.placement(nodes)
  local gpu, cpu, seen = {}, 0, {}
  for _, n in ipairs(nodes) do
    local t = ((n.metadata or {}).labels or {})["node.kubernetes.io/instance-type"]
    if is_gpu_node(n) then
      if t and not seen[t] then seen[t] = true; gpu[#gpu + 1] = t end
    else
      cpu = cpu + 1
    end
  end
  table.sort(gpu)
  local exprs = hypd.json.array()
  if #gpu > 0 then
    exprs[#exprs + 1] = { key = "node.kubernetes.io/instance-type", operator = "NotIn", values = gpu }
  end
  exprs[#exprs + 1] = { key = "nvidia.com/gpu.present", operator = "NotIn", values = { "true" } }
  exprs[#exprs + 1] = { key = "karpenter.k8s.aws/instance-gpu-count", operator = "NotIn",
    values = { "1", "2", "4", "8", "16" } }
  return { nodeAffinity = { requiredDuringSchedulingIgnoredDuringExecution = {
    nodeSelectorTerms = { { matchExpressions = exprs } } } } }, { gpu_types = gpu, cpu_nodes = cpu }
end

-- labels(name) -> the labels of every object of a download
function M.labels(name)
  return { [M.MANAGED_BY] = "hypd", [M.KIND_LABEL] = M.KIND, [M.DOWNLOAD_LABEL] = name,
    ["hypd.io/family"] = "download" } -- _ownership
end

-- secret(d) -> the token Secret (data base64, as the API keeps it)
function M.secret(d)
  local ann = { [M.ANN.token] = M.token_hash(d.token), [M.ANN.model] = d.model_id }
  return { apiVersion = "v1", kind = "Secret", type = "Opaque",
    metadata = { name = d.secret, namespace = d.namespace, labels = M.labels(d.name), annotations = ann },
    data = { [M.TOKEN_KEY] = M.b64(d.token) } }
end

-- job(d, affinity) -> the download Job; d = {name, namespace, model_id,
-- revision, claim, destination, secret (or nil)}
function M.job(d, affinity)
  local env = {
    { name = "MODEL_ID", value = d.model_id },
    { name = "REVISION", value = d.revision },
    { name = "DEST_DIR", value = d.destination },
    { name = "HF_HUB_ENABLE_HF_TRANSFER", value = "1" },
    { name = "HF_HOME", value = M.SCRATCH .. "/hf-home" },
    { name = "HF_HUB_DISABLE_PROGRESS_BARS", value = "0" },
  }
  if d.secret then
    env[#env + 1] = { name = "HF_TOKEN", valueFrom = { secretKeyRef = { name = d.secret, key = M.TOKEN_KEY } } }
  end
  local labels = M.labels(d.name)
  local ann = { [M.ANN.model] = d.model_id, [M.ANN.revision] = d.revision, [M.ANN.claim] = d.claim,
    [M.ANN.destination] = d.destination }
  return { apiVersion = "batch/v1", kind = "Job",
    metadata = { name = d.name, namespace = d.namespace, labels = labels, annotations = ann },
    spec = {
      backoffLimit = M.BACKOFF, activeDeadlineSeconds = M.DEADLINE, ttlSecondsAfterFinished = M.TTL,
      template = {
        metadata = { labels = labels, annotations = ann },
        spec = {
          restartPolicy = "Never",
          affinity = affinity,
          containers = { {
            name = "download", image = M.IMAGE, command = { "sh", "-c", M.SCRIPT }, env = env,
            resources = M.RESOURCES,
            volumeMounts = { { name = "storage", mountPath = M.MOUNT }, { name = "scratch", mountPath = M.SCRATCH } },
          } },
          volumes = { { name = "storage", persistentVolumeClaim = { claimName = d.claim } },
            { name = "scratch", emptyDir = hypd.json.object() } },
        },
      },
    } }
end

-- progress(lines, phase) -> {stage, files_done, files_total, percent, file,
-- file_percent, line}: how far a download is, read from its pod's last log
-- lines (pip's, then the CLI's tqdm bars: "Fetching 10 files:  60%|...| 6/10"
-- and "<file>:  50%|...|"; the local folder it prints when the fetch is
-- done; the copy after it). stage: starting, installing, downloading,
-- copying, done, failed.
function M.progress(lines, phase)
  local out = { stage = "starting" }
  for _, l in ipairs(lines or {}) do
    if l:match("^Fetching %d+ files:") then
      local d, t = l:match("| *(%d+)/(%d+) %[")
      out.stage, out.files_done, out.files_total = "downloading", tonumber(d), tonumber(t)
      out.percent = tonumber(l:match("^Fetching %d+ files: *(%d+)%%"))
    elseif l:match("^[^ ].-: +%d+%%|") then
      local file, fp = l:match("^(.-): +(%d+)%%|")
      out.stage, out.file, out.file_percent = "downloading", file, tonumber(fp)
    elseif l:match("^Collecting ") or l:match("^Installing collected") or l:match("^Successfully installed") then
      out.stage = "installing"
    elseif l == M.SCRATCH .. "/model" then
      out.stage = "copying"
    end
    if l ~= "" then out.line = l end
  end
  if phase == "Succeeded" then out.stage, out.percent = "done", 100 end
  if phase == "Failed" then out.stage = "failed" end
  return out
end

-- written(bucket, region, prefix) -> {files = [{key, size, last_modified}],
-- bytes, truncated}: what is in the bucket under the download's folder
-- (keys relative to it; up to 5 pages of 1000)
function M.written(bucket, region, prefix)
  local files, bytes, token = hypd.json.array(), 0, nil
  for _ = 1, 5 do
    local r = hypd.aws.call("s3", "ListObjectsV2", { Bucket = bucket, Prefix = prefix, ContinuationToken = token },
      { region = region })
    for _, o in ipairs(r.Contents or {}) do
      files[#files + 1] = { key = o.Key:sub(#prefix + 1), size = o.Size, last_modified = o.LastModified }
      bytes = bytes + (tonumber(o.Size) or 0)
    end
    token = r.IsTruncated and r.NextContinuationToken or nil
    if not token then break end
  end
  return { files = files, bytes = bytes, truncated = token ~= nil }
end

return M
