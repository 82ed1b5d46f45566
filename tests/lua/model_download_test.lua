-- model_download, job_get_status and job_list against the in-process
-- sandbox under the virtual clock: an EKS cluster with the Mountpoint add-on
-- and a HyperPod cluster of one GPU node (ml.g5.12xlarge) and one CPU node
-- (ml.m5.2xlarge). Without the storage claim the download is refused before
-- anything is made, naming storage_create_s3; bad input is refused at the
-- call naming field and rule; a plan lists the Job and sends nothing; a
-- download runs on the CPU node with no GPU request and its files are in
-- the bucket (storage_list_contents); a second call writes nothing; a gated
-- model without a token fails and job_get_status says why; with a token it
-- succeeds and the token is nowhere but in the Secret; an unknown model
-- fails with the Hub's 404.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
local _, OPTS = H.sandbox_here()
require("hypd.tool.loader").load()
local SH = dofile("tests/lua/storage_helpers.lua")
local FH = dofile("tests/lua/features_helpers.lua")
local dispatch = require "hypd.tool.dispatch"
local json, op = require "hypd.json", require "hypd.tool.operations"
local store = require "hypd.store"
local call = FH.aws(OPTS)
local WHO = SH.WHO
local EKS, HP = "hypd-models", "hypd-models-hp"
local QWEN, QWEN_DIR = "Qwen/Qwen2.5-0.5B-Instruct", "models/Qwen--Qwen2.5-0.5B-Instruct"
local LLAMA = "meta-llama/Llama-3.2-1B"
local TOKEN = "hf_" .. string.rep("Zq7", 11) .. "x" -- 37 characters, an hf_ token's shape

local conn
local field_rules = H.field_rules

local function download(params, plan)
  local args = { model_id = QWEN }
  for k, v in pairs(params or {}) do args[k] = v end
  args.plan = plan
  local before = #op.list { tool = "model_download", limit = 1000 }
  local acc, err = dispatch.call("model_download", args, WHO)
  if not acc and not plan then
    -- refused on the call (its check step runs there: hypd.tool.operations): no operation recorded
    t.eq(#op.list { tool = "model_download", limit = 1000 }, before, "a refused call records no operation")
    return { status = "refused", error = err }, err
  end
  if not acc then return nil, err end
  if plan then return acc end
  t.eq(acc.status_tool, "job_get_status", "model_download names its status tool")
  local v = op.wait(acc.operation_id)
  return v, nil, acc
end

local function jobs()
  return conn:list("batch/v1", "Job", { namespace = "default" }) or {}
end

local function status(name, extra)
  local args = { name = name }
  for k, v in pairs(extra or {}) do args[k] = v end
  return assert(dispatch.call("job_get_status", args, WHO))
end

t.test("a cluster: EKS with the Mountpoint add-on, no storage claim yet, and no node", function()
  SH.cluster(EKS, 91, { "aws-mountpoint-s3-csi-driver" })
  conn = require("hypd.k8s").connect { cluster = EKS, region = "us-west-2" }
  t.ok(conn, "a Kubernetes connection")
end)

t.test("without the storage claim the download is refused before anything is made, naming storage_create_s3",
  function()
    local m = FH.mark()
    local v = download()
    t.eq(v.status, "refused")
    t.eq(v.error and v.error.code, "STATE")
    t.like(v.error and v.error.message, "no storage claim default/s3%-claim")
    t.like(v.error and v.error.message, "storage_create_s3 claim_name=s3%-claim namespace=default")
    t.eq(field_rules(v.error), { "claim_name:exists" })
    t.eq(#FH.k8s_writes(m), 0, "no Kubernetes write")
    local _, total = FH.since(m)
    t.eq(total, 0, "no AWS mutation")
    t.eq(#jobs(), 0, "no Job")
  end)

t.test("bad input is refused at the call, naming the field and the rule, and a token is never echoed", function()
  local m = FH.mark()
  local cases = {
    { { model_id = "../../etc/passwd" }, { "model_id:pattern" } },
    { { model_id = "Qwen" }, { "model_id:pattern" } },
    { { model_id = "Qwen/../secrets" }, { "model_id:pattern" } },
    { { model_id = "org/a..b" }, { "model_id:pattern" } },
    { { destination = "../outside" }, { "destination:pattern" } },
    { { destination = "/abs/path" }, { "destination:pattern" } },
    { { revision = "main;rm -rf /" }, { "revision:pattern" } },
    { { revision = TOKEN }, { "revision:secret" } },
    { { name = "Bad_Name" }, { "name:pattern" } },
    { { hf_token = "not-a-token" }, { "hf_token:pattern" } },
  }
  for _, c in ipairs(cases) do
    local args = { model_id = QWEN }
    for k, v in pairs(c[1]) do args[k] = v end
    local acc, err = dispatch.call("model_download", args, WHO)
    t.eq(acc, nil, "refused: " .. json.encode(c[1]))
    t.eq(field_rules(err), c[2], json.encode(c[1]))
    t.ok(not json.encode(err or {}):find(TOKEN, 1, true), "the token is not in the error")
    t.ok(not json.encode(err or {}):find("not-a-token", 1, true), "a bad secret value is not echoed")
  end
  t.eq(#op.list { tool = "model_download", limit = 100 }, 0, "no operation was started")
  t.eq(#FH.k8s_writes(m), 0, "no Kubernetes write")
end)

t.test("with no node without a GPU the download is refused before anything is made", function()
  SH.ok_run("storage_create_s3", {})
  local m = FH.mark()
  local v = download()
  t.eq(v.status, "refused")
  t.eq(field_rules(v.error), { "cluster:cpu_node" })
  t.like(v.error and v.error.message, "no node without a GPU")
  -- the hint is a whole call: the group's name, the cluster, a zone (a placeholder: no node has one)
  t.like(v.error and v.error.message, "hyperpod_add_instance_group cluster=hypd%-models instance_group=system " ..
    "instance_type=ml%.m5%.2xlarge instance_count=1 availability_zone=<zone>")
  t.eq(#FH.k8s_writes(m), 0, "no Kubernetes write")
end)

t.test("a HyperPod cluster with a GPU node (ml.g5.12xlarge) and a CPU node (ml.m5.2xlarge)", function()
  local eks = call("eks", "DescribeCluster", { name = EKS }).cluster
  local trust = json.encode { Version = "2012-10-17", Statement = { { Effect = "Allow",
    Principal = { Service = "sagemaker.amazonaws.com" }, Action = "sts:AssumeRole" } } }
  local role = call("iam", "CreateRole", { RoleName = EKS .. "-exec", AssumeRolePolicyDocument = trust }).Role.Arn
  local sg = call("ec2", "CreateSecurityGroup", { GroupName = EKS .. "-hp", Description = "hyperpod",
    VpcId = eks.resourcesVpcConfig.vpcId }).GroupId
  call("sagemaker", "CreateCluster", { ClusterName = HP, NodeRecovery = "None",
    InstanceGroups = {
      { InstanceGroupName = "gpu", InstanceType = "ml.g5.12xlarge", InstanceCount = 1, ExecutionRole = role },
      { InstanceGroupName = "cpu", InstanceType = "ml.m5.2xlarge", InstanceCount = 1, ExecutionRole = role } },
    Orchestrator = { Eks = { ClusterArn = eks.arn } },
    VpcConfig = { Subnets = { eks.resourcesVpcConfig.subnetIds[1] }, SecurityGroupIds = { sg } } })
  FH.wait(function() return call("sagemaker", "DescribeCluster", { ClusterName = HP }).ClusterStatus == "InService" end)
  FH.wait(function() return #(conn:list("v1", "Node") or {}) == 2 end)
  t.eq(#conn:list("v1", "Node"), 2, "two nodes")
end)

t.test("plan mode lists the Job (and the token's Secret, without its value) and sends nothing", function()
  local m = FH.mark()
  local p = assert(download(nil, true))
  t.eq(SH.rows(p), { "create k8s:job default/hf-download-qwen-qwen2-5-0-5b-instruct" })
  local pt = assert(download({ model_id = LLAMA, hf_token = TOKEN }, true))
  t.eq(SH.rows(pt), { "create k8s:secret default/hf-download-meta-llama-llama-3-2-1b-hf-token",
    "create k8s:job default/hf-download-meta-llama-llama-3-2-1b" })
  t.ok(not json.encode(pt):find(TOKEN, 1, true), "the plan has no token")
  t.eq(#FH.k8s_writes(m), 0, "no Kubernetes write")
  t.eq(#jobs(), 0, "no Job")
end)

local QJOB = "hf-download-qwen-qwen2-5-0-5b-instruct"

t.test("a download runs to Succeeded and storage_list_contents shows the model's files", function()
  local v = download()
  t.eq(v.status, "succeeded", json.encode(v.error))
  local r = v.result or {}
  t.eq({ r.name, r.phase, r.job, r.destination }, { QJOB, "Succeeded", "created", QWEN_DIR })
  t.eq(#(r.files or {}), 10, "ten files")
  t.eq(r.path, "/s3/" .. QWEN_DIR)
  t.like(r.s3_uri, "^s3://hypd%-models%-data%-123456789012%-us%-west%-2/models/Qwen%-%-Qwen2%.5%-0%.5B%-Instruct/$")
  local c = assert(dispatch.call("storage_list_contents", { claim_name = "s3-claim", prefix = QWEN_DIR .. "/" }, WHO))
  local sizes = {}
  for _, o in ipairs(c.objects) do sizes[o.key:match("[^/]+$")] = o.size end
  t.eq(sizes["model.safetensors"], 988097824, "the weights, at their size")
  t.eq(sizes["config.json"], 659)
  t.eq(sizes["tokenizer.json"], 7031645)
  t.eq(#c.objects, 10)
  local top = assert(dispatch.call("storage_list_contents", { claim_name = "s3-claim", prefix = "models/" }, WHO))
  t.eq(top.folders, { QWEN_DIR .. "/" })
  -- the small files have content: config.json is the model's config
  local body = require("hypd.aws").call("s3", "GetObject", { Bucket = "hypd-models-data-123456789012-us-west-2",
    Key = QWEN_DIR .. "/config.json" }, OPTS).Body
  t.eq(#body, 659)
  t.eq(json.decode(body).model_type, "qwen2")
  local ranged = require("hypd.aws").call("s3", "GetObject", { Bucket = "hypd-models-data-123456789012-us-west-2",
    Key = QWEN_DIR .. "/model.safetensors", Range = "bytes=0-1023" }, OPTS)
  t.eq(#ranged.Body, 1024, "a range of a big file")
  -- progress was reported while the Job ran
  local notes = {}
  for _, e in ipairs(store.events(0, 100000) or {}) do
    if e.kind == "operation.progress" and (e.data or {}).operation_id == v.operation_id then
      notes[#notes + 1] = e.data.message
    end
  end
  t.like(table.concat(notes, "\n"), "model%.safetensors: +%d+%%", "a progress note shows the download")
end)

t.test("the Job requests no GPU, tolerates no GPU taint and ran on the CPU node, away from the GPU type", function()
  local job = assert(conn:get("batch/v1", "Job", QJOB, { namespace = "default" }))
  t.eq(job.metadata.labels["app.kubernetes.io/managed-by"], "hypd")
  local managers = {}
  for _, f in ipairs(job.metadata.managedFields or {}) do managers[#managers + 1] = f.manager end
  t.like(table.concat(managers, ","), "hypd", "server-side apply by field manager hypd")
  t.eq({ job.spec.backoffLimit, job.spec.activeDeadlineSeconds }, { 3, 1800 })
  t.ok(job.spec.ttlSecondsAfterFinished, "ttlSecondsAfterFinished is set")
  local spec = job.spec.template.spec
  local c = spec.containers[1]
  t.eq(c.image, "python:3.12")
  t.like(c.command[3], "pip install .*huggingface_hub%[cli,hf_transfer%]")
  t.like(c.command[3], "hf download \"%$MODEL_ID\"")
  for _, where in ipairs { c.resources.requests or {}, c.resources.limits or {} } do
    for k in pairs(where) do t.ok(k == "cpu" or k == "memory", "only cpu and memory: " .. k) end
  end
  t.eq(spec.tolerations, nil, "no toleration")
  local exprs = spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[1]
    .matchExpressions
  t.eq(exprs[1], { key = "node.kubernetes.io/instance-type", operator = "NotIn", values = { "ml.g5.12xlarge" } })
  t.eq(spec.volumes[1], { name = "storage", persistentVolumeClaim = { claimName = "s3-claim" } })
  local s = status(QJOB)
  t.eq(s.phase, "Succeeded")
  t.eq({ s.succeeded, s.failed, s.active }, { 1, 0, 0 })
  t.ok(s.start_time and s.completion_time, "start and completion times")
  local node = assert(conn:get("v1", "Node", s.pods[1].node))
  t.eq(node.metadata.labels["node.kubernetes.io/instance-type"], "ml.m5.2xlarge", "the pod ran on the CPU node")
  t.like(table.concat(s.pods[1].logs, "\n"), "Fetching 10 files: 100%%")
  t.eq(#s.download.files, 10, "job_get_status shows what it wrote")
  t.eq(s.download.bytes, 988097824 + 1519 + 11343 + 4917 + 659 + 242 + 1671839 + 7031645 + 7305 + 2776833)
  local reasons = {}
  for _, e in ipairs(s.events) do reasons[#reasons + 1] = e.reason end
  t.like(table.concat(reasons, ","), "SuccessfulCreate.*Completed")
  local l = assert(dispatch.call("job_list", {}, WHO))
  t.eq(#l.jobs, 1)
  t.eq({ l.jobs[1].name, l.jobs[1].kind, l.jobs[1].phase, l.jobs[1].model_id }, { QJOB, "model-download", "Succeeded",
    QWEN })
end)

t.test("a second call with the same parameters makes no Kubernetes write and answers the same Job", function()
  local m = FH.mark()
  local v = download()
  t.eq(v.status, "succeeded", json.encode(v.error))
  t.eq((v.result or {}).job, "unchanged")
  t.eq(#FH.k8s_writes(m), 0, "no Kubernetes write")
  t.eq(#jobs(), 1)
end)

local LJOB = "hf-download-meta-llama-llama-3-2-1b"

t.test("a gated model without a token fails with the Hub's error, and job_get_status says why", function()
  local v = download { model_id = LLAMA }
  t.eq(v.status, "failed")
  t.like(v.error and v.error.message, "GatedRepoError: 401 Client Error")
  t.like(v.error and v.error.message, "Access to model meta%-llama/Llama%-3%.2%-1B is restricted")
  t.like(v.error and v.error.message, "pass hf_token")
  local s = status(LJOB)
  t.eq({ s.phase, s.reason }, { "Failed", "BackoffLimitExceeded" })
  t.eq(s.failed, 4, "backoffLimit 3: four pods failed")
  t.like(table.concat(s.pods[#s.pods].logs, "\n"), "Cannot access gated repo for url " ..
    "https://huggingface%.co/meta%-llama/Llama%-3%.2%-1B/resolve/main/config%.json")
  t.eq(s.pods[#s.pods].exit_code, 1)
  t.eq(#s.download.files, 0, "nothing written")
  -- by the operation id as well (the status tool of model_download)
  local byop = assert(dispatch.call("job_get_status", { operation_id = v.operation_id }, WHO))
  t.eq({ byop.name, byop.phase, byop.operation.status }, { LJOB, "Failed", "failed" })
end)

t.test("a Job of the name for another download is refused before any write, naming job_delete when it ended",
  function()
    local m = FH.mark()
    local v = download { model_id = LLAMA, hf_token = TOKEN }
    t.eq(v.status, "refused")
    t.eq(v.error and v.error.code, "CONFLICT")
    t.eq(field_rules(v.error), { "name:same_download" })
    t.like(v.error and v.error.message, "exists %(Failed%) for another download %(token_secret none, not " ..
      LJOB:gsub("%-", "%%-") .. "%-hf%-token%)")
    t.like(v.error and v.error.message, "job_delete name=" .. LJOB:gsub("%-", "%%-"))
    v = download { model_id = "TinyLlama/TinyLlama-1.1B-Chat-v1.0", name = QJOB }
    t.eq(field_rules(v.error), { "name:same_download" })
    t.like(v.error and v.error.message, "model_id Qwen/Qwen2%.5%-0%.5B%-Instruct, not TinyLlama/")
    t.eq(#FH.k8s_writes(m), 0, "no Kubernetes write")
    t.eq(conn:get("v1", "Secret", LJOB .. "-hf-token", { namespace = "default" }), nil, "no Secret made")
    -- job_delete removes the failed Job (and its pods); the retry can then use the name
    local acc = assert(dispatch.call("job_delete", { name = LJOB }, WHO))
    local d = op.wait(acc.operation_id)
    t.eq({ d.status, d.result and d.result.action, d.result and d.result.phase }, { "succeeded", "deleted", "Failed" })
    t.eq(conn:get("batch/v1", "Job", LJOB, { namespace = "default" }), nil, "the Job is gone")
    -- made in the sandbox cluster directly: hypd's client labels whatever it makes as hypd's
    local ctl = assert(require("sandbox.k8s.controllers._ctl").find("us-west-2", EKS))
    local other = ctl.cl:create(ctl:r("batch", "v1", "jobs"), { apiVersion = "batch/v1", kind = "Job",
      metadata = { name = "not-hypds", namespace = "default", labels = { ["app.kubernetes.io/managed-by"] = "helm" } },
      spec = { template = { spec = { restartPolicy = "Never", containers = { { name = "c", image = "busybox" } } } } } })
    t.ok(other, "a Job hypd did not make")
    local dv = op.wait(assert(dispatch.call("job_delete", { name = "not-hypds" }, WHO)).operation_id)
    t.eq(dv.error and dv.error.code, "CONFLICT", "a Job hypd did not make is refused")
    t.ok(conn:get("batch/v1", "Job", "not-hypds", { namespace = "default" }), "and kept")
  end)

t.test("with a token the gated model downloads, and the token is only in the Secret", function()
  local log = require "hypd.log"
  local lines = {}
  local stop = log.subscribe(function(_, comp, msg) lines[#lines + 1] = comp .. " " .. msg end, "debug")
  local b64 = require("hypd.sys").b64encode(TOKEN)
  local v = download { model_id = LLAMA, hf_token = TOKEN }
  stop()
  t.eq(v.status, "succeeded", json.encode(v.error))
  t.eq(#(v.result.files or {}), 13)
  local secret = assert(conn:get("v1", "Secret", LJOB .. "-hf-token", { namespace = "default" }))
  t.eq(secret.metadata.labels["app.kubernetes.io/managed-by"], "hypd")
  t.eq(secret.data.HF_TOKEN, b64, "the Secret holds the token")
  local job = assert(conn:get("batch/v1", "Job", LJOB, { namespace = "default" }))
  t.eq(secret.metadata.ownerReferences[1].uid, job.metadata.uid, "the Job owns the Secret (it goes with the Job)")
  local env = {}
  for _, e in ipairs(job.spec.template.spec.containers[1].env) do env[e.name] = e end
  t.eq(env.HF_TOKEN.valueFrom, { secretKeyRef = { name = LJOB .. "-hf-token", key = "HF_TOKEN" } })
  local function clean(what, text)
    t.ok(not text:find(TOKEN, 1, true), "no token in " .. what)
    t.ok(not text:find(b64, 1, true), "no base64 of the token in " .. what)
  end
  clean("the Job", json.encode(job))
  clean("the operation record", json.encode(op.view(op.get(v.operation_id))))
  clean("the operation's state", json.encode(op.state(v.operation_id) or {}))
  clean("the operation's events", json.encode(store.events(0, 1000000) or {}))
  clean("the Kubernetes events", json.encode(conn:list("v1", "Event", { namespace = "default" }) or {}))
  clean("the job's status", json.encode(status(LJOB)))
  clean("the log", table.concat(lines, "\n"))
  t.ok(not table.concat(lines, "\n"):find("[REDACTED]", 1, true), "nothing tried to log a secret")
  -- the state directory: no file holds the token; only the sandbox's own
  -- record of the Secret (its etcd) holds its base64
  local dir = require("hypd.config").state_dir
  t.ok(dir, "a state dir")
  t.eq(H.sh("grep -rqaF " .. H.quote(TOKEN) .. " " .. H.quote(dir)), 1, "no file under the state dir has the token")
  t.eq(H.sh("test -e " .. H.quote(dir .. "/secrets/" .. v.operation_id .. ".json")), 1,
    "the operation's secret file is gone")
  local holders = {}
  for k, val in pairs(store.list("") or {}) do
    local text = type(val) == "string" and val or json.encode(val)
    if text:find(TOKEN, 1, true) or text:find(b64, 1, true) then holders[#holders + 1] = k end
  end
  t.eq(#holders, 1, "one record holds the token: " .. table.concat(holders, ", "))
  t.like(holders[1] or "", "^sandbox%-k8s/.*/secrets/default/" .. LJOB:gsub("%-", "%%-") .. "%-hf%-token$",
    "the sandbox cluster's Secret")
  -- the pod read it and the download succeeded; its log has no token
  local s = status(LJOB)
  t.eq(s.phase, "Succeeded")
  clean("the pod's log", table.concat(s.pods[1].logs, "\n"))
  -- another token: the Secret changes (one write), the Job does not
  local m = FH.mark()
  local TOKEN2 = TOKEN:gsub("x$", "y")
  local again = download { model_id = LLAMA, hf_token = TOKEN2 }
  t.eq(again.status, "succeeded", json.encode(again.error))
  t.eq((again.result or {}).job, "unchanged")
  t.eq(#FH.k8s_writes(m), 1, "one write: the Secret")
  local s2 = assert(conn:get("v1", "Secret", LJOB .. "-hf-token", { namespace = "default" }))
  t.eq(s2.data.HF_TOKEN, require("hypd.sys").b64encode(TOKEN2))
  -- when the Job goes (ttlSecondsAfterFinished, or by hand) its Secret goes with it
  assert(conn:delete("batch/v1", "Job", LJOB, { namespace = "default" }))
  FH.wait(function() return conn:get("v1", "Secret", LJOB .. "-hf-token", { namespace = "default" }) == nil end, 120, 1)
  t.eq(conn:get("v1", "Secret", LJOB .. "-hf-token", { namespace = "default" }), nil, "the token's Secret is gone")
end)

t.test("job_get_status with wait_seconds follows a running download (a repeated call joins it): Running, then " ..
  "progress, then Succeeded",
  function()
    local acc = assert(dispatch.call("model_download", { model_id = "TinyLlama/TinyLlama-1.1B-Chat-v1.0" }, WHO))
    local name = "hf-download-tinyllama-tinyllama-1-1b-chat-v1-0"
    local joined = assert(dispatch.call("model_download", { model_id = "TinyLlama/TinyLlama-1.1B-Chat-v1.0" }, WHO))
    t.eq(joined.operation_id, acc.operation_id, "the same call while it runs joins the running operation")
    local first = assert(dispatch.call("job_get_status", { operation_id = acc.operation_id }, WHO))
    t.eq(first.name, name, "by the operation id, before or after the Job exists")
    FH.wait(function() return conn:get("batch/v1", "Job", name, { namespace = "default" }) ~= nil end, 60, 1)
    local s = status(name, { wait_seconds = 60 })
    t.eq(s.phase, "Running")
    t.eq(s.active, 1)
    local seen = {}
    for _ = 1, 20 do
      local lines = table.concat((s.pods[1] or {}).logs or {}, "\n")
      if lines:find("model%.safetensors: +%d+%%") then seen.progress = true end
      local pr = s.download and s.download.progress or {}
      seen[pr.stage or "?"] = true
      if pr.stage == "downloading" and pr.file == "model.safetensors" and pr.files_total == 10 then seen.file = true end
      if s.phase == "Succeeded" then break end
      require("hypd.task").sleep(3)
      s = status(name)
    end
    t.ok(seen.progress, "the weights' progress lines while it ran")
    t.ok(seen.installing or seen.downloading, "download.progress says the stage")
    t.ok(seen.file, "download.progress names the file being fetched and the files in all")
    s = status(name, { wait_seconds = 120 })
    t.eq(s.phase, "Succeeded")
    t.eq(op.wait(acc.operation_id).status, "succeeded")
    t.eq(#s.download.files, 10)
    t.eq({ s.download.progress.stage, s.download.progress.percent }, { "done", 100 })
  end)

t.test("an unknown model fails the pod with the Hub's 404", function()
  local v = download { model_id = "no-such-org/no-such-model", hf_token = TOKEN }
  t.eq(v.status, "failed")
  t.like(v.error and v.error.message, "RepositoryNotFoundError: 404 Client Error")
  t.like(v.error and v.error.message, "the Hub has no such model")
  local s = status("hf-download-no-such-org-no-such-model")
  t.like(table.concat(s.pods[1].logs, "\n"), "Repository Not Found for url: " ..
    "https://huggingface%.co/api/models/no%-such%-org/no%-such%-model/revision/main%.")
end)

t.test("the sandbox's hf_download runs any container's huggingface-cli download: onto the claim's subPath, " ..
  "with the Hub's revision check", function()
  local function job(name, args)
    return { apiVersion = "batch/v1", kind = "Job", metadata = { name = name, namespace = "default" },
      spec = { backoffLimit = 0, template = { spec = { restartPolicy = "Never",
        containers = { { name = "get", image = "python:3.12", command = { "huggingface-cli", "download" },
          args = args, volumeMounts = { { name = "data", mountPath = "/data", subPath = "team-a" } } } },
        volumes = { { name = "data", persistentVolumeClaim = { claimName = "s3-claim" } } } } } } }
  end
  assert(conn:apply(job("gpt2-get", { "openai-community/gpt2", "--local-dir", "/data/gpt2" })))
  assert(conn:apply(job("gpt2-bad-rev", { "openai-community/gpt2", "--revision", "v9", "--local-dir", "/data/x" })))
  local function phase(name)
    local j = conn:get("batch/v1", "Job", name, { namespace = "default" })
    for _, c in ipairs(j and j.status and j.status.conditions or {}) do
      if c.status == "True" and (c.type == "Complete" or c.type == "Failed") then
        return c.type == "Complete" and "Succeeded" or "Failed"
      end
    end
  end
  FH.wait(function() return phase("gpt2-get") == "Succeeded" and phase("gpt2-bad-rev") == "Failed" end, 600, 2)
  t.eq({ phase("gpt2-get"), phase("gpt2-bad-rev") }, { "Succeeded", "Failed" })
  local c = assert(dispatch.call("storage_list_contents", { claim_name = "s3-claim", prefix = "team-a/gpt2/" }, WHO))
  t.eq(#c.objects, 13, "gpt2's files under the mount's subPath")
  local bad = status("gpt2-bad-rev")
  t.like(table.concat(bad.pods[1].logs, "\n"), "RevisionNotFoundError: 404 Client Error.*Invalid rev id: v9")
end)
