-- SageMaker hubs as JumpStart uses them: the public hub SageMakerPublicHub
-- (owned by the account "aws", the same in every region) with a small
-- seeded catalogue of JumpStart models, each in a few versions.
-- ListHubContents answers the newest version of each model,
-- ListHubContentVersions every version of one, DescribeHubContent one
-- version (the newest when none is named) with its HubContentDocument: a
-- JSON string carrying, as the real documents do, the serving image
-- (HostingEcrUri), the artifacts, DefaultInferenceInstanceType and
-- SupportedInferenceInstanceTypes, and HostingEulaUri for gated models.
-- Hubs other than the public one are not simulated (ResourceNotFound).
local D = require "sandbox.services.eks.deps"
local json = require "hypd.json"

local M = { operations = {}, transitions = {} }
local ops = M.operations

M.PUBLIC = "SageMakerPublicHub"
M.SCHEMA = "2.3.0"
M.CREATED = 1704067200 -- 2024-01-01, the catalogue's first import

local LMI = "djl-inference:0.31.0-lmi13.0.0-cu124"
local TGI = "huggingface-pytorch-tgi-inference:2.4.0-tgi2.4.0-gpu-py311-cu124-ubuntu22.04"
local TEI = "tei:2.0.1-tei1.4.0-gpu-py310-cu122-ubuntu22.04"
local WHISPER = "huggingface-pytorch-inference:2.1.0-transformers4.37.0-gpu-py310-cu118-ubuntu20.04"

-- id, display name, task, provider, image, default type, supported types,
-- versions (oldest first), gated (EULA), Hugging Face repository
M.MODELS = {
  { "huggingface-llm-qwen2-5-7b-instruct", "Qwen2.5 7B Instruct", "text-generation", "Qwen", LMI,
    "ml.g5.2xlarge", { "ml.g5.2xlarge", "ml.g5.4xlarge", "ml.g5.8xlarge", "ml.g5.12xlarge", "ml.g5.24xlarge",
      "ml.g5.48xlarge", "ml.g6.2xlarge", "ml.g6.12xlarge", "ml.g6e.2xlarge", "ml.g6e.12xlarge", "ml.p4d.24xlarge" },
    { "1.0.0", "1.1.0", "1.2.3" }, false, "Qwen/Qwen2.5-7B-Instruct" },
  { "huggingface-llm-qwen2-5-72b-instruct", "Qwen2.5 72B Instruct", "text-generation", "Qwen", LMI,
    "ml.g5.48xlarge", { "ml.g5.48xlarge", "ml.g6e.48xlarge", "ml.p4d.24xlarge", "ml.p5.48xlarge" },
    { "1.0.0", "1.1.2" }, false, "Qwen/Qwen2.5-72B-Instruct" },
  { "huggingface-llm-qwen3-8b", "Qwen3 8B", "text-generation", "Qwen", LMI,
    "ml.g5.12xlarge", { "ml.g5.12xlarge", "ml.g5.24xlarge", "ml.g5.48xlarge", "ml.g6.12xlarge", "ml.g6e.2xlarge",
      "ml.g6e.12xlarge", "ml.p4d.24xlarge", "ml.p5.48xlarge" }, { "1.0.0", "1.0.4" }, false, "Qwen/Qwen3-8B" },
  { "meta-textgeneration-llama-3-2-1b-instruct", "Llama 3.2 1B Instruct", "text-generation", "Meta", LMI,
    "ml.g6.xlarge", { "ml.g5.xlarge", "ml.g5.2xlarge", "ml.g5.4xlarge", "ml.g5.12xlarge", "ml.g6.xlarge",
      "ml.g6.2xlarge", "ml.g6e.xlarge", "ml.p4d.24xlarge" }, { "1.0.0", "1.1.0", "1.2.0", "1.3.1" }, true,
    "meta-llama/Llama-3.2-1B-Instruct" },
  { "meta-textgeneration-llama-3-1-8b-instruct", "Llama 3.1 8B Instruct", "text-generation", "Meta", LMI,
    "ml.g5.2xlarge", { "ml.g5.2xlarge", "ml.g5.4xlarge", "ml.g5.12xlarge", "ml.g5.24xlarge", "ml.g5.48xlarge",
      "ml.g6.2xlarge", "ml.g6.12xlarge", "ml.g6e.2xlarge", "ml.p4d.24xlarge", "ml.p5.48xlarge" },
    { "2.0.0", "2.1.0", "2.6.2" }, true, "meta-llama/Llama-3.1-8B-Instruct" },
  { "meta-textgeneration-llama-3-3-70b-instruct", "Llama 3.3 70B Instruct", "text-generation", "Meta", LMI,
    "ml.p4d.24xlarge", { "ml.g5.48xlarge", "ml.g6e.48xlarge", "ml.p4d.24xlarge", "ml.p5.48xlarge" },
    { "1.0.0", "1.2.0" }, true, "meta-llama/Llama-3.3-70B-Instruct" },
  { "deepseek-llm-r1-distill-qwen-1-5b", "DeepSeek-R1-Distill-Qwen-1.5B", "text-generation", "DeepSeek", LMI,
    "ml.g6.xlarge", { "ml.g5.xlarge", "ml.g5.2xlarge", "ml.g5.12xlarge", "ml.g6.xlarge", "ml.g6.2xlarge",
      "ml.g6.12xlarge", "ml.g6e.xlarge", "ml.p4d.24xlarge" }, { "1.0.0", "2.0.1" }, false,
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B" },
  { "deepseek-llm-r1-distill-llama-8b", "DeepSeek-R1-Distill-Llama-8B", "text-generation", "DeepSeek", LMI,
    "ml.g6.12xlarge", { "ml.g5.2xlarge", "ml.g5.12xlarge", "ml.g5.24xlarge", "ml.g6.12xlarge", "ml.g6e.2xlarge",
      "ml.p4d.24xlarge" }, { "1.0.0", "2.0.0" }, false, "deepseek-ai/DeepSeek-R1-Distill-Llama-8B" },
  { "huggingface-llm-mistral-7b-instruct-v3", "Mistral 7B Instruct v0.3", "text-generation", "Mistral AI", TGI,
    "ml.g5.2xlarge", { "ml.g5.2xlarge", "ml.g5.4xlarge", "ml.g5.12xlarge", "ml.g6.2xlarge", "ml.g6e.2xlarge",
      "ml.p4d.24xlarge" }, { "1.0.0", "1.3.0" }, false, "mistralai/Mistral-7B-Instruct-v0.3" },
  { "huggingface-llm-gemma-2-9b-instruct", "Gemma 2 9B Instruct", "text-generation", "Google", TGI,
    "ml.g5.12xlarge", { "ml.g5.12xlarge", "ml.g5.24xlarge", "ml.g5.48xlarge", "ml.g6.12xlarge", "ml.g6e.12xlarge",
      "ml.p4d.24xlarge" }, { "1.0.0", "1.1.4" }, true, "google/gemma-2-9b-it" },
  { "huggingface-sentencesimilarity-bge-large-en-v1-5", "BGE Large En v1.5", "sentence-similarity", "BAAI", TEI,
    "ml.g5.xlarge", { "ml.g5.xlarge", "ml.g5.2xlarge", "ml.g6.xlarge", "ml.g6.2xlarge", "ml.c6i.2xlarge",
      "ml.c6i.4xlarge", "ml.m5.2xlarge" }, { "1.0.0", "2.0.2" }, false, "BAAI/bge-large-en-v1.5" },
  { "huggingface-asr-whisper-large-v3-turbo", "Whisper Large v3 Turbo", "automatic-speech-recognition", "OpenAI",
    WHISPER, "ml.g5.2xlarge", { "ml.g5.xlarge", "ml.g5.2xlarge", "ml.g5.4xlarge", "ml.g6.xlarge", "ml.g6.2xlarge" },
    { "1.0.0", "1.0.3" }, false, "openai/whisper-large-v3-turbo" },
}

-- compare(a, b) -> true when semantic version a is older than b
function M.older(a, b)
  local function parts(v)
    local x, y, z = tostring(v):match("^(%d+)%.(%d+)%.(%d+)$")
    return tonumber(x) or 0, tonumber(y) or 0, tonumber(z) or 0
  end
  local a1, a2, a3 = parts(a)
  local b1, b2, b3 = parts(b)
  if a1 ~= b1 then return a1 < b1 end
  if a2 ~= b2 then return a2 < b2 end
  return a3 < b3
end

local function hub_arn(ctx) return string.format("arn:aws:sagemaker:%s:aws:hub/%s", ctx.region, M.PUBLIC) end

local function content_arn(ctx, id, version)
  return string.format("arn:aws:sagemaker:%s:aws:hub-content/%s/Model/%s/%s", ctx.region, M.PUBLIC, id, version)
end

local function document(ctx, m, version)
  local id, _, task, _, image, default, supported, _, gated, repo = table.unpack(m)
  local bucket = "jumpstart-cache-prod-" .. ctx.region
  local prefix = (gated and "meta-textgeneration/" or "huggingface-llm/") .. id .. "/artifacts/inference-prepack/v" ..
    version .. "/"
  local env = {
    { Name = "SAGEMAKER_PROGRAM", Type = "text", Default = "inference.py", Scope = "container",
      RequiredForModelClass = true },
    { Name = "HF_MODEL_ID", Type = "text", Default = "/opt/ml/model", Scope = "container",
      RequiredForModelClass = true },
    { Name = "OPTION_ENTRYPOINT", Type = "text", Default = "inference.py", Scope = "container",
      RequiredForModelClass = false },
    { Name = "SAGEMAKER_MODEL_SERVER_WORKERS", Type = "int", Default = 1, Scope = "container",
      RequiredForModelClass = true },
  }
  local doc = {
    Url = "https://huggingface.co/" .. repo, MinSdkVersion = "2.225.0", TrainingSupported = false,
    IncrementalTrainingSupported = false, Task = task, Framework = image == LMI and "djl" or "huggingface",
    HostingEcrUri = string.format("763104351884.dkr.ecr.%s.amazonaws.com/%s", ctx.region, image),
    HostingArtifactUri = "s3://" .. bucket .. "/" .. prefix,
    HostingScriptUri = "s3://" .. bucket .. "/source-directory-tarballs/" .. (image == LMI and "djl" or "huggingface") ..
      "/inference/llm/v1.0.1/sourcedir.tar.gz",
    HostingPrepackedArtifactUri = "s3://" .. bucket .. "/" .. prefix,
    HostingUseScriptUri = false, HostingArtifactS3DataType = "S3Prefix", HostingArtifactCompressionType = "None",
    InferenceEnvironmentVariables = env, InferenceDependencies = json.array(),
    DefaultInferenceInstanceType = default, SupportedInferenceInstanceTypes = supported,
    InferenceVolumeSize = 256, InferenceEnableNetworkIsolation = true, ResourceNameBase = (id:gsub("^%a+%-", "")),
    DynamicContainerDeploymentSupported = true, GatedBucket = gated or nil,
    HostingEulaUri = gated and ("s3://jumpstart-cache-prod-" .. ctx.region .. "/fmhMetadata/eula/" .. id ..
      "-eula.txt") or nil,
  }
  return json.encode(doc)
end

local function keywords(m)
  return json.array { "@task:" .. m[3], "@framework:" .. (m[5] == LMI and "djl" or "huggingface"),
    "@provider:" .. m[4]:lower():gsub(" ", "-"), "@capability:inference", m[4] }
end

-- created(idx, i) -> when version i of model idx was imported (a week per version)
local function created(idx, i) return M.CREATED + idx * 3600 + (i - 1) * 7 * 86400 end

local function summary(ctx, idx, m, i)
  local version = m[8][i]
  return { HubContentName = m[1], HubContentArn = content_arn(ctx, m[1], version),
    SageMakerPublicHubContentArn = content_arn(ctx, m[1], version), HubContentVersion = version,
    HubContentType = "Model", DocumentSchemaVersion = M.SCHEMA, HubContentDisplayName = m[2],
    HubContentDescription = m[2] .. " from " .. m[4] .. " (" .. m[3] .. "), served with " .. m[5]:match("^[^:]+") .. ".",
    SupportStatus = "Supported", HubContentSearchKeywords = keywords(m), HubContentStatus = "Available",
    CreationTime = created(idx, i), OriginalCreationTime = created(idx, 1) }
end

local function check_hub(ctx, input)
  local hub = tostring(input.HubName or "")
  if hub ~= M.PUBLIC and hub ~= hub_arn(ctx) then
    ctx.error("ResourceNotFound", "Hub " .. hub .. " does not exist.")
  end
  local t = input.HubContentType
  if t ~= "Model" and t ~= "Notebook" and t ~= "ModelReference" and t ~= "DataSet" and t ~= "JsonDoc" then
    ctx.error("ValidationException", "1 validation error detected: Value '" .. tostring(t) .. "' at " ..
      "'hubContentType' failed to satisfy constraint: Member must satisfy enum value set: [Model, Notebook, " ..
      "ModelReference, DataSet, JsonDoc]")
  end
  return t == "Model"
end

local function find(name)
  for idx, m in ipairs(M.MODELS) do
    if m[1] == name then return m, idx end
  end
end

local function sorted(items, input)
  local by = input.SortBy or "HubContentName"
  local desc = input.SortOrder == "Descending"
  table.sort(items, function(a, b)
    local x, y
    if by == "CreationTime" then x, y = a.CreationTime, b.CreationTime
    elseif by == "HubContentStatus" then x, y = a.HubContentStatus .. a.HubContentName, b.HubContentStatus .. b.HubContentName
    else x, y = a.HubContentName .. "/" .. a.HubContentVersion, b.HubContentName .. "/" .. b.HubContentVersion end
    if x == y then return false end
    if desc then return x > y end
    return x < y
  end)
  return items
end

local function in_window(s, input)
  if input.CreationTimeBefore and s.CreationTime >= tonumber(input.CreationTimeBefore) then return false end
  if input.CreationTimeAfter and s.CreationTime <= tonumber(input.CreationTimeAfter) then return false end
  return true
end

local function not_found(ctx, input)
  ctx.error("ResourceNotFound", "Hub content " .. tostring(input.HubContentName) ..
    (input.HubContentVersion and (" version " .. tostring(input.HubContentVersion)) or "") .. " of type " ..
    tostring(input.HubContentType) .. " does not exist in hub " .. M.PUBLIC .. ".")
end

-- answer(ctx, summaries, input) -> the page asked for, sorted as asked
local function answer(ctx, all, input)
  local page, nxt = D.page(ctx, sorted(all, input), input.MaxResults, input.NextToken, 100, "ValidationException")
  return { HubContentSummaries = page, NextToken = nxt }
end

function ops.ListHubContents(ctx, input)
  local models = check_hub(ctx, input)
  local all = json.array()
  if models then
    local needle = input.NameContains and tostring(input.NameContains):lower()
    for idx, m in ipairs(M.MODELS) do
      local s = summary(ctx, idx, m, #m[8])
      if (not needle or m[1]:lower():find(needle, 1, true)) and in_window(s, input) then all[#all + 1] = s end
    end
  end
  return answer(ctx, all, input)
end

function ops.ListHubContentVersions(ctx, input)
  check_hub(ctx, input)
  local m, idx = find(input.HubContentName)
  if not m or input.HubContentType ~= "Model" then not_found(ctx, input) end
  local all = json.array()
  for i, v in ipairs(m[8]) do
    local s = summary(ctx, idx, m, i)
    if (not input.MinVersion or not M.older(v, input.MinVersion)) and in_window(s, input) then all[#all + 1] = s end
  end
  return answer(ctx, all, input)
end

function ops.DescribeHubContent(ctx, input)
  check_hub(ctx, input)
  local m, idx = find(input.HubContentName)
  local i = m and #m[8]
  if m and input.HubContentVersion then
    i = nil
    for k, v in ipairs(m[8]) do if v == input.HubContentVersion then i = k end end
  end
  if not m or not i or input.HubContentType ~= "Model" then not_found(ctx, input) end
  local s = summary(ctx, idx, m, i)
  s.HubName, s.HubArn = M.PUBLIC, hub_arn(ctx)
  s.HubContentDocument = document(ctx, m, m[8][i])
  s.HubContentMarkdown = "# " .. m[2] .. "\n\n" .. s.HubContentDescription .. "\n"
  s.HubContentDependencies = json.array()
  s.LastModifiedTime = s.CreationTime
  s.OriginalCreationTime = nil
  return s
end

return M
