-- Objects validated as the API server validates them (issue 23), with the
-- machine's kubectl (the dispatcher's 1.33) against a 1.33 cluster with
-- the training and inference operator add-ons: a built-in kind whose
-- field has the wrong JSON type is refused by the decoder (400, Go's
-- encoding/json text), a custom resource by its CRD's structural schema
-- (422 Invalid, kube-openapi's text and the field causes); valid objects
-- are still created, and field validation (strict, warn, ignore) is kept.
local t = require "hypd.tap"
local json = require "hypd.json"
local K = dofile("tests/lua/sandbox_kubectl_helpers.lua").new("va")
local H = K.H
t.cleanup(K.cleanup)

local V = "1.33"
local function kubectl(args) return K.kubectl(V, args) end
local function file(name, text)
  local path = K.dir .. "/" .. name .. ".yaml"
  H.write(path, text)
  return H.quote(path)
end

t.test("a sandbox with a 1.33 EKS cluster with the training and inference operator add-ons", function()
  K.start { V, "+cert-manager", "+eks-pod-identity-agent", "+amazon-sagemaker-hyperpod-training-operator",
    "+aws-mountpoint-s3-csi-driver", "+aws-fsx-csi-driver", "+metrics-server",
    "+amazon-sagemaker-hyperpod-inference=" .. H.quote(json.encode {
      executionRoleArn = "arn:aws:iam::123456789012:role/inference",
      tlsCertificateS3Bucket = "certs", hyperpodClusterArn = "arn:aws:sagemaker:us-west-2:123456789012:cluster/abc" }) }
end)

local function deployment(name, replicas, extra)
  return ([[
apiVersion: apps/v1
kind: Deployment
metadata:
  name: NAME
spec:
  replicas: REPLICAS
  selector:
    matchLabels:
      app: NAME
  template:
    metadata:
      labels:
        app: NAME
    spec:
      containers:
      - name: web
        image: nginx:1.27
EXTRA]]):gsub("NAME", name):gsub("REPLICAS", replicas):gsub("EXTRA", extra or "")
end

t.test("kubectl apply of a Deployment with replicas: one is refused by the decoder (server-side: by the typed patch)",
  function()
  if not K.ready then return K.skip() end
  local f = file("web-one", deployment("web-one", "one"))
  local rc, out, err = kubectl("apply -f " .. f)
  t.ok(rc ~= 0, "refused: " .. out)
  t.eq(err, "Error from server (BadRequest): error when creating " .. f:gsub("'", "\"") .. ": Deployment in version " ..
    "\"v1\" cannot be handled as a Deployment: json: cannot unmarshal string into Go struct field " ..
    "DeploymentSpec.spec.replicas of type int32\n")
  -- server-side apply: structured-merge-diff cannot make the typed patch object
  rc, out, err = kubectl("apply --server-side -f " .. f)
  t.ok(rc ~= 0, "refused: " .. out)
  t.eq(err, "Error from server (BadRequest): failed to create typed patch object (default/web-one; apps/v1, " ..
    "Kind=Deployment): .spec.replicas: expected numeric (int or float), got string\n")
  rc = kubectl("get deployment web-one")
  t.ok(rc ~= 0, "nothing was created")
end)

t.test("a container port given as a word and a malformed quantity are refused with the decoder's words", function()
  if not K.ready then return K.skip() end
  local rc, _, err = kubectl("create -f " .. file("web-port", deployment("web-port", "1",
    "        ports:\n        - containerPort: http\n")))
  t.ok(rc ~= 0)
  t.like(err, "json: cannot unmarshal string into Go struct field ContainerPort%.spec%.template%.spec%.containers" ..
    "%.ports%.containerPort of type int32\n$")
  rc, _, err = kubectl("create -f " .. file("web-cpu", deployment("web-cpu", "1",
    "        resources:\n          limits:\n            cpu: lots\n")))
  t.ok(rc ~= 0)
  t.like(err, "Deployment in version \"v1\" cannot be handled as a Deployment: quantities must match the regular " ..
    "expression '%^%(%[%+%-%]%?%[0%-9%.%]%+%)%(%[eEinumkKMGTP%]%*%[%-%+%]%?%[0%-9%]%*%)%$'\n$")
end)

t.test("a valid Deployment is created, and a merge patch that makes replicas a string is an invalid patch", function()
  if not K.ready then return K.skip() end
  local rc, out, err = kubectl("apply -f " .. file("web", deployment("web", "2")))
  t.eq({ rc, out }, { 0, "deployment.apps/web created\n" }, err)
  rc, out, err = kubectl([[patch deployment web --type merge -p '{"spec":{"replicas":"two"}}']])
  t.ok(rc ~= 0, out)
  t.like(err, "^The request is invalid: patch: Invalid value: \".*\": json: cannot unmarshal string into Go struct " ..
    "field DeploymentSpec%.spec%.replicas of type int32\n$")
  rc, out = kubectl("get deployment web -o jsonpath={.spec.replicas}")
  t.eq({ rc, out }, { 0, "2" }, "unchanged")
end)

local function hpj(name, replicas, retries, extra)
  return ([[
apiVersion: sagemaker.amazonaws.com/v1
kind: HyperPodPyTorchJob
metadata:
  name: NAME
spec:
  nprocPerNode: "4"
  replicaSpecs:
  - name: pods
    replicas: REPLICAS
    template:
      spec:
        containers:
        - name: pytorch
          image: 123456789012.dkr.ecr.us-west-2.amazonaws.com/train:latest
  runPolicy:
    jobMaxRetryCount: RETRIES
    cleanPodPolicy: None
EXTRA]]):gsub("NAME", name):gsub("REPLICAS", replicas):gsub("RETRIES", retries):gsub("EXTRA", extra or "")
end

t.test("kubectl apply of a HyperPodPyTorchJob with replicas: one is refused by the CRD's schema (422)", function()
  if not K.ready then return K.skip() end
  local f = file("hpj-one", hpj("hpj-one", "one", "3"))
  local rc, out, err = kubectl("apply -f " .. f)
  t.ok(rc ~= 0, "refused: " .. out)
  -- kubectl prints an Invalid Status from its kind, name and causes
  t.eq(err, "The HyperPodPyTorchJob \"hpj-one\" is invalid: spec.replicaSpecs[0].replicas: Invalid value: " ..
    "\"string\": spec.replicaSpecs[0].replicas in body must be of type integer: \"string\"\n")
  local obj = require("hypd.yaml").decode(H.read(f:sub(2, -2)))
  local resp = K.conn(V):request("POST", "/apis/sagemaker.amazonaws.com/v1/namespaces/default/hyperpodpytorchjobs",
    { body = json.encode(obj), headers = { ["content-type"] = "application/json" } })
  local st = resp and json.decode(resp.body) or {}
  t.eq({ resp and resp.status, st.reason, st.message }, { 422, "Invalid", "HyperPodPyTorchJob.sagemaker.amazonaws.com " ..
    "\"hpj-one\" is invalid: spec.replicaSpecs[0].replicas: Invalid value: \"string\": spec.replicaSpecs[0].replicas " ..
    "in body must be of type integer: \"string\"" })
  t.eq(st.details and st.details.causes, { { reason = "FieldValueTypeInvalid", field = "spec.replicaSpecs[0].replicas",
    message = "Invalid value: \"string\": spec.replicaSpecs[0].replicas in body must be of type integer: \"string\"" } })
  rc = kubectl("get hyperpodpytorchjob hpj-one")
  t.ok(rc ~= 0, "nothing was created")
end)

t.test("a HyperPodPyTorchJob with jobMaxRetryCount: \"x\" is refused, server-side apply too", function()
  if not K.ready then return K.skip() end
  local f = file("hpj-x", hpj("hpj-x", "2", '"x"'))
  local rc, out, err = kubectl("apply -f " .. f)
  t.ok(rc ~= 0, out)
  t.like(err, "^The HyperPodPyTorchJob \"hpj%-x\" is invalid: spec%.runPolicy%.jobMaxRetryCount: " ..
    "Invalid value: \"string\": spec%.runPolicy%.jobMaxRetryCount in body must be of type integer: \"string\"\n$")
  rc, out, err = kubectl("apply --server-side -f " .. f)
  t.ok(rc ~= 0, out)
  t.like(err, "spec%.runPolicy%.jobMaxRetryCount in body must be of type integer: \"string\"")
  rc = kubectl("get hyperpodpytorchjob hpj-x")
  t.ok(rc ~= 0, "nothing was created")
end)

t.test("kubectl create prints each of several errors: an enum, a required field, with their causes", function()
  if not K.ready then return K.skip() end
  local f = file("hpj-many", hpj("hpj-many", "2", "3", "    logMonitoringConfiguration:\n    - logPattern: " ..
    "'.*loss'\n"):gsub("cleanPodPolicy: None", "cleanPodPolicy: Sometimes"))
  local rc, out, err = kubectl("create -f " .. f)
  t.ok(rc ~= 0, out)
  t.eq(err, "The HyperPodPyTorchJob \"hpj-many\" is invalid: \n" ..
    "* spec.runPolicy.cleanPodPolicy: Unsupported value: \"Sometimes\": supported values: \"All\", \"Running\", " ..
    "\"None\"\n" ..
    "* spec.runPolicy.logMonitoringConfiguration[0].name: Required value\n")
  local obj = require("hypd.yaml").decode(H.read(f:sub(2, -2)))
  local resp = K.conn(V):request("POST", "/apis/sagemaker.amazonaws.com/v1/namespaces/default/hyperpodpytorchjobs",
    { body = json.encode(obj), headers = { ["content-type"] = "application/json" } })
  t.eq(resp and resp.status, 422)
  local body = resp and json.decode(resp.body) or {}
  t.eq(body.reason, "Invalid")
  t.eq(body.details and body.details.causes, {
    { reason = "FieldValueNotSupported", field = "spec.runPolicy.cleanPodPolicy",
      message = "Unsupported value: \"Sometimes\": supported values: \"All\", \"Running\", \"None\"" },
    { reason = "FieldValueRequired", field = "spec.runPolicy.logMonitoringConfiguration[0].name",
      message = "Required value" } })
end)

t.test("an InferenceEndpointConfig with replicas: two, or without its worker, is refused", function()
  if not K.ready then return K.skip() end
  local IEC = [[
apiVersion: inference.sagemaker.aws.amazon.com/v1
kind: InferenceEndpointConfig
metadata:
  name: NAME
spec:
  modelName: llama
  replicas: REPLICAS
  modelSourceConfig:
    modelSourceType: s3
    s3Storage:
      bucketName: models
      region: us-west-2
WORKER]]
  local WORKER = [[
  worker:
    image: 763104351884.dkr.ecr.us-west-2.amazonaws.com/djl-inference:0.32.0-lmi14.0.0-cu126
    modelInvocationPort:
      containerPort: 8080
    modelVolumeMount:
      name: model-weights
      mountPath: /opt/ml/model
    resources:
      limits:
        nvidia.com/gpu: 1
]]
  local function iec(name, replicas, worker)
    return (IEC:gsub("NAME", name):gsub("REPLICAS", replicas):gsub("WORKER", worker))
  end
  local rc, out, err = kubectl("apply -f " .. file("iec-two", iec("iec-two", "two", WORKER)))
  t.ok(rc ~= 0, out)
  t.like(err, "^The InferenceEndpointConfig \"iec%-two\" is invalid: " ..
    "spec%.replicas: Invalid value: \"string\": spec%.replicas in body must be of type integer: \"string\"\n$")
  rc, out, err = kubectl("apply -f " .. file("iec-noworker", iec("iec-noworker", "1", "")))
  t.ok(rc ~= 0, out)
  t.like(err, "\"iec%-noworker\" is invalid: spec%.worker: Required value\n$")
  rc, out, err = kubectl("apply -f " .. file("iec-ok", iec("iec-ok", "1", WORKER)))
  t.eq({ rc, out }, { 0, "inferenceendpointconfig.inference.sagemaker.aws.amazon.com/iec-ok created\n" }, err)
end)

t.test("valid HyperPodPyTorchJobs are still created, client-side and server-side", function()
  if not K.ready then return K.skip() end
  local rc, out, err = kubectl("apply -f " .. file("hpj-ok", hpj("hpj-ok", "2", "3")))
  t.eq({ rc, out }, { 0, "hyperpodpytorchjob.sagemaker.amazonaws.com/hpj-ok created\n" }, err)
  rc, out, err = kubectl("apply --server-side -f " .. file("hpj-ssa", hpj("hpj-ssa", "2", "3")))
  t.eq({ rc, out }, { 0, "hyperpodpytorchjob.sagemaker.amazonaws.com/hpj-ssa serverside-applied\n" }, err)
end)

t.test("field validation is kept: an unknown field is refused under strict, warned about under warn", function()
  if not K.ready then return K.skip() end
  local f = file("hpj-unknown", hpj("hpj-unknown", "2", "3", "  replicaz: 1\n"))
  local rc, out, err = kubectl("apply -f " .. f)
  t.ok(rc ~= 0, out)
  t.like(err, "strict decoding error: unknown field \"spec%.replicaz\"")
  rc, out, err = kubectl("apply --validate=warn -f " .. f)
  t.eq({ rc, out }, { 0, "hyperpodpytorchjob.sagemaker.amazonaws.com/hpj-unknown created\n" }, err)
  t.like(err, "unknown field \"spec%.replicaz\"")
  rc, out, err = kubectl("apply --validate=false -f " .. file("web-unknown", deployment("web-unknown", "1",
    "        imagee: x\n")))
  t.eq({ rc, out }, { 0, "deployment.apps/web-unknown created\n" }, err)
end)

-- one object per CRD with a typed schema, each with a wrong type at a typed field
local BAD = {
  { "scaledobject", "keda.sh/v1alpha1", "ScaledObject", [==[
  scaleTargetRef: {name: web}
  minReplicaCount: one
  triggers: [{type: prometheus, metadata: {query: up, threshold: "1"}}]]==], "spec.minReplicaCount", "integer",
    "string" },
  { "nodepool", "karpenter.sh/v1", "NodePool", [==[
  weight: heavy
  template:
    spec:
      nodeClassRef: {group: karpenter.sagemaker.amazonaws.com, kind: HyperpodNodeClass, name: workers}
      requirements: [{key: node.kubernetes.io/instance-type, operator: Exists}]]==], "spec.weight", "integer", "string",
    true },
  { "hyperpodnodeclass", "karpenter.sagemaker.amazonaws.com/v1", "HyperpodNodeClass", [==[
  instanceGroups: workers]==], "spec.instanceGroups", "array", "string", true },
  { "jumpstartmodel", "inference.sagemaker.aws.amazon.com/v1", "JumpStartModel", [==[
  model: {modelHubName: SageMakerPublicHub, modelId: meta-textgeneration-llama-3-2-1b-instruct}
  server: {instanceType: ml.g5.8xlarge}
  replicas: two]==], "spec.replicas", "integer", "string" },
  { "certificate", "cert-manager.io/v1", "Certificate", [==[
  secretName: web-tls
  issuerRef: {name: selfsigned}
  isCA: "yes"]==], "spec.isCA", "boolean", "string" },
  { "issuer", "cert-manager.io/v1", "Issuer", [==[
  ca: {secretName: 5}]==], "spec.ca.secretName", "string", "integer" },
}

t.test("an object of each CRD with a typed schema is refused at a field of the wrong type", function()
  if not K.ready then return K.skip() end
  local resources = require "sandbox.k8s.resources"
  for _, row in ipairs(resources.CRDS) do
    -- managed Karpenter's CRDs come with HyperPod autoscaling: made here as it makes them
    if row[4] == "NodePool" or row[4] == "HyperpodNodeClass" then assert(K.conn(V):create(resources.crd(row))) end
  end
  local rc, out, err
  for _ = 1, 20 do -- a CRD is served a moment after it is created
    rc, out, err = kubectl("get nodepools,hyperpodnodeclasses")
    if rc == 0 then break end
    require("hypd.task").sleep(0.5)
  end
  t.eq(rc, 0, out .. err)
  for _, b in ipairs(BAD) do
    local name, api, kind, spec, field, want, got, cluster = table.unpack(b)
    local text = "apiVersion: " .. api .. "\nkind: " .. kind .. "\nmetadata:\n  name: bad-" .. name .. "\nspec:\n" ..
      spec .. "\n"
    rc, out, err = kubectl("apply -f " .. file("bad-" .. name, text))
    t.ok(rc ~= 0, kind .. " refused: " .. out)
    t.eq(err, string.format("The %s \"bad-%s\" is invalid: %s: Invalid value: \"%s\": %s in body must be of type " ..
      "%s: \"%s\"\n", kind, name, field, got, field, want, got), kind)
    rc = kubectl("get " .. name .. " bad-" .. name .. (cluster and "" or " -n default"))
    t.ok(rc ~= 0, kind .. ": nothing was created")
  end
end)

t.test("a built-in kind's validation: an image required, a selector that must select, a Job's restart policy", function()
  if not K.ready then return K.skip() end
  local rc, out, err = kubectl("apply -f " .. file("web-noimage",
    (deployment("web-noimage", "1"):gsub("        image: nginx:1%.27\n", ""))))
  t.ok(rc ~= 0, out)
  t.eq(err, "The Deployment \"web-noimage\" is invalid: spec.template.spec.containers[0].image: Required value\n")
  local never = deployment("web-never", "1", "      restartPolicy: Never\n"):gsub("        app: web%-never\n    spec",
    "        app: other\n    spec")
  rc, out, err = kubectl("create -f " .. file("web-never", never))
  t.ok(rc ~= 0, out)
  t.eq(err, "The Deployment \"web-never\" is invalid: \n" ..
    "* spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"other\"}: `selector` does not match " ..
    "template `labels`\n" ..
    "* spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\"\n")
  local JOB = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: once\nspec:\n  template:\n    spec:\n" ..
    "      containers:\n      - name: once\n        image: busybox\n"
  rc, out, err = kubectl("apply -f " .. file("job", JOB))
  t.ok(rc ~= 0, out)
  t.eq(err, "The Job \"once\" is invalid: spec.template.spec.restartPolicy: Unsupported value: \"Always\": supported " ..
    "values: \"OnFailure\", \"Never\"\n")
  local resp = K.conn(V):request("POST", "/apis/batch/v1/namespaces/default/jobs",
    { body = json.encode(require("hypd.yaml").decode(JOB)), headers = { ["content-type"] = "application/json" } })
  local st = resp and json.decode(resp.body) or {}
  t.eq({ resp and resp.status, st.message, st.details and st.details.group }, { 422, "Job.batch \"once\" is invalid: " ..
    "spec.template.spec.restartPolicy: Unsupported value: \"Always\": supported values: \"OnFailure\", \"Never\"",
    "batch" })
  rc, out, err = kubectl("apply -f " .. file("job-never", JOB .. "      restartPolicy: Never\n"))
  t.eq({ rc, out }, { 0, "job.batch/once created\n" }, err)
  rc, out, err = kubectl("create service clusterip web --tcp=80:8080 --dry-run=client -o yaml")
  t.eq(rc, 0, err)
  rc, out, err = kubectl("apply -f " .. file("svc", out:gsub("type: ClusterIP", "type: Public")))
  t.ok(rc ~= 0, out)
  t.eq(err, "The Service \"web\" is invalid: spec.type: Unsupported value: \"Public\": supported values: " ..
    "\"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\"\n")
  -- a core kind is named by its kind alone
  resp = K.conn(V):request("POST", "/api/v1/namespaces/default/services", { body = json.encode {
    apiVersion = "v1", kind = "Service", metadata = { name = "bad-ip" },
    spec = { clusterIP = "192.0.2.1", ports = { { port = 80 } } } }, headers = { ["content-type"] = "application/json" } })
  st = resp and json.decode(resp.body) or {}
  t.eq(resp and resp.status, 422)
  t.like(st.message, "^Service \"bad%-ip\" is invalid: spec%.clusterIPs: Invalid value: %[%]string{\"192%.0%.2%.1\"}")
end)
