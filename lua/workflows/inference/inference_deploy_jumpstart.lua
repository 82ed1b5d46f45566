-- inference_deploy_jumpstart: a JumpStart model from the SageMaker public
-- hub served by the HyperPod inference operator: a JumpStartModel
-- (inference.sagemaker.aws.amazon.com/v1) as the hyp CLI's
-- `hyp create hyp-jumpstart-endpoint` makes it (model {modelHubName,
-- modelId, modelVersion, acceptEula}, server {instanceType},
-- sageMakerEndpoint {name}, tlsConfig), the version pinned to the newest
-- when none is given. Refused before anything is created: operator off, a
-- model or version the hub does not have, an instance type the model does
-- not support (the supported ones listed) or the cluster has not, a gated
-- model without accept_eula.
local P = require "_params"
local M = require "inference._managed"

local params = {
  name = M.NAME, namespace = M.NAMESPACE, cluster = P.cluster, region = P.region,
  model_id = { type = "string", required = true, decision = true, pattern = "^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$",
    max_length = 63, pattern_help = "a JumpStart model id like meta-textgeneration-llama-3-2-1b-instruct",
    description = "the JumpStart model (inference_list_jumpstart_models lists them)" },
  model_version = { type = "string", pattern = "^\\d{1,4}\\.\\d{1,4}\\.\\d{1,4}$", pattern_help = "a version like 1.2.3",
    description = "the model's version (default: the newest in the hub, pinned in the object)" },
  instance_type = { type = "string", required = true, decision = true, pattern = P.instance_type.pattern,
    pattern_help = P.instance_type.pattern_help,
    description = "server.instanceType: one the model supports and an instance group of the cluster has" },
  accept_eula = { type = "boolean", default = false, decision = true,
    description = "model.acceptEula: a gated model (its EULA named by inference_list_jumpstart_models) needs true" },
  replicas = { type = "integer", minimum = 1, maximum = 100, default = 1, decision = true,
    description = "spec.replicas: model server pods" },
  endpoint_name = M.ENDPOINT,
  max_deploy_seconds = M.MAX_DEPLOY,
  tls_certificate_output_s3_uri = M.TLS,
}

-- model(ctx, p) -> describe (the version to deploy), its document
local function model(ctx, p)
  local d = M.describe(ctx, p.model_id, p.model_version)
  if not d and p.model_version and M.describe(ctx, p.model_id) then
    local have = M.versions(ctx, p.model_id)
    hypd.errors.refuse("model_version", "exists", string.format("JumpStart model %s has no version %s in %s " ..
      "(versions: %s); leave model_version out for the newest", p.model_id, p.model_version, M.HUB,
      table.concat(have, ", ")), { prefix = "field" })
  end
  if not d then
    hypd.errors.refuse("model_id", "exists", string.format("no JumpStart model %s in %s; " ..
      "inference_list_jumpstart_models lists the models (name_contains narrows it)", p.model_id, M.HUB), { prefix = "field" })
  end
  return d, M.document(d)
end

local function check(ctx)
  local p, st = ctx.params, ctx.state
  local _, hp = M.check(ctx, "JumpStartModel", true)
  local d, doc = model(ctx, p)
  local supported = doc.SupportedInferenceInstanceTypes or {}
  local ok = false
  for _, t in ipairs(supported) do ok = ok or t == p.instance_type end
  if not ok then
    hypd.errors.refuse("instance_type", "supported", string.format("JumpStart model %s %s does not support %s; " ..
      "it supports: %s (recommended: %s)", p.model_id, d.HubContentVersion, p.instance_type,
      table.concat(supported, ", "), tostring(doc.DefaultInferenceInstanceType)), { prefix = "field", supported = supported })
  end
  if doc.HostingEulaUri and not p.accept_eula then
    hypd.errors.refuse("accept_eula", "required", string.format("JumpStart model %s is gated: read its EULA " ..
      "(%s) and pass accept_eula=true to accept it", p.model_id, doc.HostingEulaUri), { prefix = "field" })
  end
  M.in_cluster(hp, p.instance_type)
  local spec = {
    model = { acceptEula = p.accept_eula, modelHubName = M.HUB, modelId = p.model_id,
      modelVersion = d.HubContentVersion },
    server = { instanceType = p.instance_type },
    replicas = p.replicas,
    maxDeployTimeInSeconds = p.max_deploy_seconds,
    sageMakerEndpoint = p.endpoint_name and { name = p.endpoint_name } or nil,
    tlsConfig = p.tls_certificate_output_s3_uri and { tlsCertificateOutputS3Uri = p.tls_certificate_output_s3_uri }
      or nil,
  }
  st.model = { id = p.model_id, version = d.HubContentVersion, display_name = d.HubContentDisplayName,
    pinned = p.model_version == nil }
  st.object = { apiVersion = M.API, kind = "JumpStartModel",
    metadata = { name = p.name, namespace = p.namespace, labels = M.labels(p.name, "jumpstart") }, spec = spec }
end

return tool {
  name = "inference_deploy_jumpstart",
  summary = "Deploy a JumpStart model (a JumpStartModel for the HyperPod inference operator), followed until ready",
  description = "Deploys a SageMaker JumpStart model (a JumpStartModel run by the HyperPod inference operator) on the " ..
    "active (or named) cluster: model_id at model_version (default the newest, pinned), instance_type, " ..
    "replicas, accept_eula for gated models, optionally registered as a SageMaker endpoint " ..
    "(endpoint_name). Refused first: an unknown model or version, an instance type the model or the " ..
    "cluster lacks, a gated model without accept_eula, the inference operator off. " ..
    "inference_list_jumpstart_models finds models. Follow it with inference_get (wait_seconds); plan = " ..
    "true lists what it would create.",
  kind = "mutating",
  status_tool = "inference_get",
  aws = M.aws(),
  k8s = { "get", "list", "apply" },
  params = P.form({ "name", "model_id", "instance_type", "replicas", "accept_eula" },
    { "model_version", "endpoint_name", "max_deploy_seconds", "tls_certificate_output_s3_uri", "namespace", "cluster",
      "region" },
    params, { name = "Endpoint name" }),
  target = M.target,
  steps = {
    { name = "check", run = check, on_call = true }, -- refused on the call (hypd.tool.operations): reads only
    { name = "apply", run = M.apply },
    { name = "wait", run = M.wait },
    { name = "result", run = function(ctx)
      local m = ctx.state.model
      M.result(ctx, { model_id = m.id, model_version = m.version, display_name = m.display_name,
        instance_type = ctx.params.instance_type })
    end },
  },
}
