-- Fields of the sandbox's Kubernetes API (issue 14): kubectl explain finds
-- real field descriptions (OpenAPI v3 built from the upstream proto doc
-- comments, and for the HyperPod CRDs from their schemas), and unknown
-- fields are refused under strict field validation (what kubectl apply
-- sends), warned about and dropped under Warn, dropped under Ignore.
-- kubectl (the dispatcher's 1.33) against a 1.33 cluster with the training
-- and inference operator add-ons.
local t = require "hypd.tap"
local json = require "hypd.json"
local K = dofile("tests/lua/sandbox_kubectl_helpers.lua").new("ex")
local H = K.H
t.cleanup(K.cleanup)

local V = "1.33"
local function kubectl(args) return K.kubectl(V, args) end

t.test("a sandbox with a 1.33 EKS cluster with the training and inference operator add-ons", function()
  K.start { V, "+cert-manager", "+eks-pod-identity-agent", "+amazon-sagemaker-hyperpod-training-operator",
    "+aws-mountpoint-s3-csi-driver", "+aws-fsx-csi-driver", "+metrics-server",
    "+amazon-sagemaker-hyperpod-inference=" .. H.quote(json.encode {
      executionRoleArn = "arn:aws:iam::123456789012:role/inference",
      tlsCertificateS3Bucket = "certs", hyperpodClusterArn = "arn:aws:sagemaker:us-west-2:123456789012:cluster/abc" }) }
end)

t.test("kubectl explain shows the upstream descriptions and types of core fields", function()
  if not K.ready then return K.skip() end
  local rc, out, err = kubectl("explain deployment.spec.replicas")
  t.eq(rc, 0, err)
  t.like(out, "FIELD: replicas <integer>")
  t.like(out, "Number of desired pods%. This is a pointer to distinguish between explicit%s+zero and not specified%.")
  rc, out, err = kubectl("explain pod.spec.containers")
  t.eq(rc, 0, err)
  t.like(out, "FIELD: containers <%[%]Container>")
  t.like(out, "\n  image\t<string>\n")
  t.like(out, "\n  resources\t<ResourceRequirements>\n")
  rc, out, err = kubectl("explain service.spec.ports.targetPort")
  t.eq(rc, 0, err)
  t.like(out, "Number or name of the port to access on the pods targeted by the service%.")
  rc, out, err = kubectl("explain cronjob.spec.schedule")
  t.eq(rc, 0, err)
  t.like(out, "The schedule in Cron format")
  local _
  rc, _, err = kubectl("explain deployment.spec.replicass")
  t.eq(rc, 1)
  t.like(err, 'field "replicass" does not exist')
end)

t.test("kubectl explain describes the HyperPod CRDs' fields: HyperPodPyTorchJob and InferenceEndpointConfig", function()
  if not K.ready then return K.skip() end
  local rc, out, err = kubectl("explain hyperpodpytorchjob.spec.runPolicy.jobMaxRetryCount")
  t.eq(rc, 0, err)
  t.like(out, "KIND:%s+HyperPodPyTorchJob")
  t.like(out, "recovery budget")
  rc, out, err = kubectl("explain hyperpodpytorchjob.spec.replicaSpecs")
  t.eq(rc, 0, err)
  t.like(out, "\n  replicas\t<integer>\n")
  t.like(out, "\n  template\t<Object>\n")
  rc, out, err = kubectl("explain inferenceendpointconfig.spec.worker.modelInvocationPort")
  t.eq(rc, 0, err)
  t.like(out, "KIND:%s+InferenceEndpointConfig")
  t.like(out, "containerPort\t<integer> %-required%-")
  rc, out, err = kubectl("explain hyperpodpytorchjob.metadata.labels")
  t.eq(rc, 0, err)
  t.like(out, "Map of string keys and values")
end)

local DEPLOY = [[
apiVersion: apps/v1
kind: Deployment
metadata: {name: NAME}
spec:
  REPLICAS: 1
  selector: {matchLabels: {app: NAME}}
  template:
    metadata: {labels: {app: NAME}}
    spec:
      containers:
      - {name: web, IMAGE: "nginx:1.27"}
]]
local function manifest(name, replicas, image)
  local path = K.dir .. "/" .. name .. ".yaml"
  H.write(path, (DEPLOY:gsub("NAME", name):gsub("REPLICAS", replicas):gsub("IMAGE", image)))
  return H.quote(path)
end

t.test("kubectl apply with a misspelled field is refused with the API server's strict decoding error", function()
  if not K.ready then return K.skip() end
  local rc, _, err = kubectl("apply -f " .. manifest("typo", "replicass", "image"))
  t.eq(rc, 1)
  t.like(err, 'Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: ' ..
    'unknown field "spec%.replicass"')
  rc, _, err = kubectl("create -f " .. manifest("typo2", "replicas", "imagee"))
  t.eq(rc, 1)
  t.like(err, 'unknown field "spec%.template%.spec%.containers%[0%]%.imagee"')
  rc, _, err = kubectl("apply --server-side -f " .. manifest("typo3", "replicass", "image"))
  t.eq(rc, 1)
  t.like(err, "failed to create typed patch object %(default/typo3; apps/v1, Kind=Deployment%): " ..
    "%.spec%.replicass: field not declared in schema")
  rc = kubectl("get deployment typo typo2 typo3")
  t.eq(rc, 1, "nothing was created")
end)

t.test("under --validate=warn the field is warned about and dropped; under --validate=false only dropped", function()
  if not K.ready then return K.skip() end
  local rc, out, err = kubectl("apply --validate=warn -f " .. manifest("warned", "replicass", "image"))
  t.eq({ rc, out }, { 0, "deployment.apps/warned created\n" }, err)
  t.like(err, 'Warning: unknown field "spec%.replicass"')
  local d = K.get_json(V, "get deployment warned")
  t.eq(d and d.spec.replicass, nil)
  t.eq(d and d.spec.template.spec.containers[1].image, "nginx:1.27")
  -- the next apply (a strategic merge patch removing the field kubectl remembers) is fine under Strict
  rc, out, err = kubectl("apply -f " .. manifest("warned", "replicas", "image"))
  t.eq({ rc, out }, { 0, "deployment.apps/warned configured\n" }, err)
  -- and a misspelling in the patch of a live object is refused
  rc, out, err = kubectl("apply -f " .. manifest("warned", "replicas", "imagee"))
  t.eq(rc, 1, out)
  t.like(err, 'error when patching .*strict decoding error: unknown field "spec%.template%.spec%.containers%[0%]%.imagee"')
  rc, out, err = kubectl("apply --validate=false -f " .. manifest("ignored", "replicass", "image"))
  t.eq({ rc, out }, { 0, "deployment.apps/ignored created\n" }, err)
  t.ok(not err:match("Warning"), err)
  t.eq(K.get_json(V, "get deployment ignored").spec.replicass, nil)
end)

t.test("a misspelled field of a HyperPodPyTorchJob is refused; the pod template and status stay open", function()
  if not K.ready then return K.skip() end
  local job = {
    apiVersion = "sagemaker.amazonaws.com/v1", kind = "HyperPodPyTorchJob", metadata = { name = "train" },
    spec = { nprocPerNode = "8", replicaSpecs = { { name = "pods", replicas = 2, template = { spec = {
      containers = { { name = "t", image = "pytorch", anything = "goes" } } } } } },
      runPolicy = { jobMaxRetryCount = 3, cleanPodPolicy = "All", restartPolicy = { evalPeriodSeconds = 60 } } } }
  H.write(K.dir .. "/job.json", json.encode(job))
  local rc, out, err = kubectl("apply --dry-run=server -f " .. H.quote(K.dir .. "/job.json"))
  t.eq({ rc, out }, { 0, "hyperpodpytorchjob.sagemaker.amazonaws.com/train created (server dry run)\n" }, err)
  job.spec.runPolicy.jobMaxRetryCounts = 3
  H.write(K.dir .. "/job.json", json.encode(job))
  local _
  rc, _, err = kubectl("apply -f " .. H.quote(K.dir .. "/job.json"))
  t.eq(rc, 1)
  t.like(err, 'strict decoding error: unknown field "spec%.runPolicy%.jobMaxRetryCounts"')
end)

t.test("OpenAPI v3 serves the schemas with $refs between them and the group-version-kinds", function()
  if not K.ready then return K.skip() end
  local conn = K.conn(V)
  local index = assert(conn:call("GET", "/openapi/v3"))
  local url = index.paths["apis/apps/v1"].serverRelativeURL
  t.like(url, "^/openapi/v3/apis/apps/v1%?hash=")
  local doc = assert(conn:call("GET", url))
  local d = doc.components.schemas["io.k8s.api.apps.v1.Deployment"]
  t.eq(d["x-kubernetes-group-version-kind"], { { group = "apps", version = "v1", kind = "Deployment" } })
  t.eq(d.properties.spec.allOf, { { ["$ref"] = "#/components/schemas/io.k8s.api.apps.v1.DeploymentSpec" } })
  t.ok(doc.components.schemas["io.k8s.api.core.v1.PodSpec"], "PodSpec is in the document")
  t.eq(doc.components.schemas["io.k8s.apimachinery.pkg.util.intstr.IntOrString"].format, "int-or-string")
end)
