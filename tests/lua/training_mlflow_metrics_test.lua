-- Recipes report throughput and loss to MLflow, and hypd reads them back.
-- First the MLflow REST API of the sandbox's managed tracking servers as
-- the sagemaker-mlflow plugin reaches it (python requests signed with
-- botocore's SigV4Auth for the service sagemaker-mlflow, the header
-- x-mlflow-sm-tracking-server-arn, against a `hypd sandbox --speed 600`
-- process): refused while the server is Creating, then MLflow's shapes and
-- error codes. Then, in the in-process sandbox under the virtual clock: a
-- llama-factory job with MLflow runs to Completed and training_get_metrics
-- shows its run FINISHED and the loss decreasing with the very numbers of
-- its log lines (training_get_job shows the latest); a verl RayJob reports
-- to its experiment too; a job without MLflow has no metrics, and says so.
local t = require "hypd.tap"
local TH = dofile("tests/lua/training_helpers.lua")
local call = TH.start()
local H, FH = TH.H, TH.FH
local dispatch = require "hypd.tool.dispatch"
local json, op = require "hypd.json", require "hypd.tool.operations"
local ADMIN = { name = "metrics-tester", scope = "admin", front = "test" }
local EKS, HP = "mlm-a", "mlm-a-hp"
local obj = TH.obj

-- the MLflow API with a real client ------------------------------------------

t.test("the MLflow REST API of a tracking server: refused while Creating, then MLflow's shapes and errors", function()
  local dir = H.tmpdir()
  local env, pid = H.sandbox_process(dir, "--speed 600")
  t.cleanup(function() os.execute("kill " .. tostring(pid) .. " 2>/dev/null") end)
  if not env then return t.skip("the sandbox process did not start") end
  H.write(dir .. "/api.py", [==[
import boto3, botocore.session, hashlib, json, os, time, requests
from urllib.parse import urlencode
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
EP = os.environ["AWS_ENDPOINT_URL"]
sm, s3, iam = boto3.client("sagemaker"), boto3.client("s3"), boto3.client("iam")
s3.create_bucket(Bucket="api-artifacts", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"},
         "Action": "sts:AssumeRole"}]}
role = iam.create_role(RoleName="api-mlflow", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
ARN = sm.create_mlflow_tracking_server(TrackingServerName="api", ArtifactStoreUri="s3://api-artifacts/mlflow",
                                       RoleArn=role)["TrackingServerArn"]
creds = botocore.session.get_session().get_credentials()

def call(method, path, body=None, params=None, arn=ARN, sign=True, host=None):
    # as sagemaker_mlflow.auth.AuthBoto signs MLflow's requests
    url = EP + "/api/2.0/mlflow/" + path + ("?" + urlencode(params, doseq=True) if params else "")
    data = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"} if data else {}
    if arn:
        headers["x-mlflow-sm-tracking-server-arn"] = arn
    if host:
        headers["Host"] = host
    headers["X-Amz-Content-SHA256"] = hashlib.sha256(data or b"").hexdigest()
    req = AWSRequest(method=method, url=url, data=data, headers=headers)
    if sign:
        SigV4Auth(creds, "sagemaker-mlflow", "us-west-2").add_auth(req)
    r = requests.request(method, url, data=data, headers=dict(req.prepare().headers))
    try:
        return r.status_code, r.json()
    except ValueError:
        return r.status_code, r.text

st, b = call("GET", "experiments/get-by-name", params={"experiment_name": "Default"})
print("CREATING", st, b.get("error_code"))
for _ in range(400):
    if sm.describe_mlflow_tracking_server(TrackingServerName="api")["TrackingServerStatus"] == "Created":
        break
    time.sleep(0.02)
url = sm.describe_mlflow_tracking_server(TrackingServerName="api")["TrackingServerUrl"]
print("URL", url)
st, b = call("GET", "experiments/get-by-name", params={"experiment_name": "Default"})
print("DEFAULT", st, b["experiment"]["experiment_id"], b["experiment"]["lifecycle_stage"])
st, b = call("POST", "experiments/create", {"name": "sft"})
exp = b["experiment_id"]
print("CREATE", st, sorted(b))
st, b = call("POST", "experiments/create", {"name": "sft"})
print("AGAIN", st, b["error_code"], b["message"])
st, b = call("GET", "experiments/get-by-name", params={"experiment_name": "nobody"})
print("MISSING", st, b["error_code"], b["message"])
st, b = call("GET", "experiments/get-by-name", params={"experiment_name": "sft"})
print("GET", st, sorted(b["experiment"]), b["experiment"]["artifact_location"])
st, b = call("POST", "experiments/search", {"max_results": 10})
print("SEARCHX", st, [e["name"] for e in b["experiments"]])
st, b = call("POST", "runs/create", {"experiment_id": exp, "run_name": "job-a", "start_time": 1700000000000,
                                      "tags": [{"key": "team", "value": "ml"}]})
run = b["run"]["info"]["run_id"]
print("RUN", st, sorted(b["run"]), sorted(b["run"]["info"]), b["run"]["info"]["status"], len(run))
st, b = call("POST", "runs/create", {"experiment_id": "999"})
print("RUN-NOEXP", st, b["error_code"])
for step, (loss, tput) in enumerate([(2.5, 180.0), (1.9, 182.5), (1.2, 181.0)], 1):
    st, b = call("POST", "runs/log-batch", {"run_id": run, "metrics": [
        {"key": "loss", "value": loss, "timestamp": 1700000000000 + step, "step": step},
        {"key": "throughput", "value": tput, "timestamp": 1700000000000 + step, "step": step}]})
st, b = call("POST", "runs/log-metric", {"run_id": run, "key": "learning_rate", "value": 1e-4,
                                          "timestamp": 1700000000009, "step": 3})
print("LOGGED", st, b)
st, b = call("POST", "runs/log-parameter", {"run_id": run, "key": "epochs", "value": "3"})
st, b = call("POST", "runs/log-parameter", {"run_id": run, "key": "epochs", "value": "4"})
print("PARAM-CHANGE", st, b["error_code"])
st, b = call("POST", "runs/log-metric", {"run_id": run, "key": "bad(key)", "value": 1, "timestamp": 1})
print("BADKEY", st, b["error_code"])
st, b = call("POST", "runs/log-metric", {"run_id": run, "key": "loss", "timestamp": 1})
print("NOVALUE", st, b["error_code"])
st, b = call("GET", "runs/get", params={"run_id": run})
m = {x["key"]: (x["value"], x["step"]) for x in b["run"]["data"]["metrics"]}
print("GOT", st, m["loss"], m["throughput"], b["run"]["data"]["params"], sorted(b["run"]["data"]))
st, b = call("GET", "runs/get", params={"run_id": "0" * 32})
print("NORUN", st, b["error_code"], b["message"])
st, b = call("GET", "metrics/get-history", params={"run_id": run, "metric_key": "loss"})
print("HISTORY", st, [(x["step"], x["value"]) for x in b["metrics"]], sorted(b["metrics"][0]))
st, b = call("POST", "runs/search", {"experiment_ids": [exp], "filter": "attributes.run_name = 'job-a'"})
print("SEARCH", st, [r["info"]["run_name"] for r in b["runs"]])
st, b = call("POST", "runs/search", {"experiment_ids": [exp], "filter": "tags.team = 'other'"})
print("SEARCH-NONE", st, len(b.get("runs", [])))
st, b = call("POST", "runs/update", {"run_id": run, "status": "FINISHED", "end_time": 1700000009999})
print("UPDATE", st, b["run_info"]["status"], b["run_info"]["end_time"])
host = url.split("://")[1]
st, b = call("GET", "experiments/get-by-name", params={"experiment_name": "sft"}, arn=None, host=host)
print("BYHOST", st, b.get("experiment", {}).get("experiment_id") == exp)
st, b = call("GET", "experiments/get-by-name", params={"experiment_name": "sft"}, sign=False)
print("UNSIGNED", st)
st, b = call("GET", "experiments/get-by-name", params={"experiment_name": "sft"},
             arn=ARN.replace("/api", "/other"))
print("NOSERVER", st, b["error_code"])
# the caller's identity policy decides, as IAM does, on sagemaker-mlflow:<Action> and the server's ARN
deny = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"},
        {"Effect": "Deny", "Action": "sagemaker-mlflow:GetMetricHistory", "Resource": ARN}]}
requests.post(EP + "/_sandbox/policy", data=json.dumps({"policy": deny}))
st, b = call("GET", "metrics/get-history", params={"run_id": run, "metric_key": "loss"})
print("DENIED", st, b.get("message"))
st, b = call("GET", "runs/get", params={"run_id": run})
print("ALLOWED", st)
requests.post(EP + "/_sandbox/policy", data=json.dumps({"policy": None}))
audit = [e["operation"] for e in requests.get(EP + "/_sandbox/audit").json() if e["service"] == "sagemaker-mlflow"]
print("AUDIT", sorted(set(audit)))
# a deleted server's store goes with it: a new one of the same name starts empty
sm.delete_mlflow_tracking_server(TrackingServerName="api")
for _ in range(400):
    try:
        sm.describe_mlflow_tracking_server(TrackingServerName="api")
        time.sleep(0.02)
    except sm.exceptions.ResourceNotFound:
        break
ARN = sm.create_mlflow_tracking_server(TrackingServerName="api", ArtifactStoreUri="s3://api-artifacts/mlflow",
                                       RoleArn=role)["TrackingServerArn"]
for _ in range(400):
    if sm.describe_mlflow_tracking_server(TrackingServerName="api")["TrackingServerStatus"] == "Created":
        break
    time.sleep(0.02)
st, b = call("GET", "experiments/get-by-name", params={"experiment_name": "sft"})
print("RECREATED", st, b.get("error_code"))
]==])
  local rc, out, err = H.with_env(env, dir, "python3 " .. H.quote(dir .. "/api.py"))
  t.eq(rc, 0, err)
  out = out or ""
  t.like(out, "CREATING 503 TEMPORARILY_UNAVAILABLE", "refused while the server is Creating")
  t.like(out, "URL https://t%-%x+%.us%-west%-2%.experiments%.sagemaker%.aws\n")
  t.like(out, "DEFAULT 200 0 active", "experiment 0 (Default) is there")
  t.like(out, "CREATE 200 %['experiment_id'%]")
  t.like(out, "AGAIN 400 RESOURCE_ALREADY_EXISTS Experiment 'sft' already exists%.")
  t.like(out, "MISSING 404 RESOURCE_DOES_NOT_EXIST Could not find experiment with name 'nobody'")
  t.like(out, "GET 200 %['artifact_location', 'creation_time', 'experiment_id', 'last_update_time', " ..
    "'lifecycle_stage', 'name'%] s3://api%-artifacts/mlflow/1\n")
  t.like(out, "SEARCHX 200 %['sft', 'Default'%]")
  t.like(out, "RUN 200 %['data', 'info', 'inputs'%] %['artifact_uri', 'experiment_id', 'lifecycle_stage', " ..
    "'run_id', 'run_name', 'run_uuid', 'start_time', 'status', 'user_id'%] RUNNING 32")
  t.like(out, "RUN%-NOEXP 404 RESOURCE_DOES_NOT_EXIST")
  t.like(out, "LOGGED 200 {}")
  t.like(out, "PARAM%-CHANGE 400 INVALID_PARAMETER_VALUE")
  t.like(out, "BADKEY 400 INVALID_PARAMETER_VALUE")
  t.like(out, "NOVALUE 400 INVALID_PARAMETER_VALUE")
  t.like(out, "GOT 200 %(1%.2, 3%) %(181%.0, 3%) %[{'key': 'epochs', 'value': '3'}%] %['metrics', 'params', 'tags'%]",
    "runs/get: the latest value of each metric, the params")
  t.like(out, "NORUN 404 RESOURCE_DOES_NOT_EXIST Run with id=0+ not found")
  t.like(out, "HISTORY 200 %[%(1, 2%.5%), %(2, 1%.9%), %(3, 1%.2%)%] %['key', 'step', 'timestamp', 'value'%]")
  t.like(out, "SEARCH 200 %['job%-a'%]")
  t.like(out, "SEARCH%-NONE 200 0")
  t.like(out, "UPDATE 200 FINISHED 1700000009999")
  t.like(out, "BYHOST 200 True", "the server's own host (TrackingServerUrl) names it without the header")
  t.like(out, "UNSIGNED 403")
  t.like(out, "NOSERVER 404 RESOURCE_DOES_NOT_EXIST")
  t.like(out, "DENIED 403 User: %S+ is not authorized to perform: sagemaker%-mlflow:GetMetricHistory on resource: " ..
    "arn:aws:sagemaker:us%-west%-2:%d+:mlflow%-tracking%-server/api because an explicit deny")
  t.like(out, "ALLOWED 200")
  t.like(out, "AUDIT %['CreateExperiment', 'CreateRun', 'LogBatch', 'LogMetric', 'LogParam', 'UpdateRun'%]",
    "the writes are in the sandbox audit log, the reads are not")
  t.like(out, "RECREATED 404 RESOURCE_DOES_NOT_EXIST", "a deleted server's experiments went with it")
end)

t.test("the guardrail classes sagemaker-mlflow's actions: reads for a read tool, writes refused before sending",
  function()
    local aws, signed, guard = require "hypd.aws", require "hypd.aws.signed", require "hypd.tool.guard"
    t.eq({ aws.class("sagemaker-mlflow", "GetMetricHistory"), aws.class("sagemaker-mlflow", "SearchRuns"),
      aws.class("sagemaker-mlflow", "LogBatch"), aws.class("sagemaker-mlflow", "DeleteRun") },
      { "read", "read", "mutating", "deleting" })
    local g = guard.new { tool = { name = "reader", kind = "read", aws = { "sagemaker-mlflow:*" } } }
    local out, err = guard.with(g, signed.request, { service = "sagemaker-mlflow", action = "CreateRun",
      url = "https://t-0.us-west-2.experiments.sagemaker.aws", path = "/api/2.0/mlflow/runs/create",
      body = { experiment_id = "0" } })
    t.eq({ out, err and err.code }, { nil, "GUARDRAIL" })
    t.like(err and err.message or "", "reader may not call sagemaker%-mlflow:CreateRun: a read tool makes only " ..
      "read%-only calls")
    local doc = assert(require("hypd.iam_policy").document { tools = { "training_get_metrics" } })
    local acts = table.concat(H.policy_actions(doc), " ")
    for _, a in ipairs { "sagemaker:DescribeMlflowTrackingServer", "sagemaker-mlflow:GetExperimentByName",
        "sagemaker-mlflow:SearchRuns", "sagemaker-mlflow:GetRun", "sagemaker-mlflow:GetMetricHistory" } do
      t.like(acts, a:gsub("%p", "%%%0"), "the tool's policy has " .. a)
    end
    t.ok(not acts:find("sagemaker-mlflow:Log", 1, true), "and no MLflow write")
  end)

-- recipes reporting, read back by hypd ---------------------------------------

local conn, arn

local function submit(recipe, params, extra)
  local args = { recipe = recipe, params = params, cluster = EKS }
  for k, v in pairs(extra or {}) do args[k] = v end
  return TH.run("training_submit", args, ADMIN)
end

local function lines_of(g)
  local out = {}
  for _, p in ipairs(g.pods or {}) do
    for _, l in ipairs(p.logs or {}) do out[#out + 1] = l end
  end
  return out
end

-- watch(name) -> the job once done, and the log lines of its pods as last
-- seen (a restart replaces the pods, and their logs with them)
local function watch(name)
  local seen, g = {}, nil
  for _ = 1, 200 do
    g = assert(dispatch.call("training_get_job", { name = name, cluster = EKS, tail_lines = 200, wait_seconds = 2 },
      ADMIN))
    for _, p in ipairs(g.pods or {}) do
      if p.logs and #p.logs >= #(seen[p.name] or {}) then seen[p.name] = p.logs end
    end
    if g.phase == "Completed" or g.phase == "Failed" then break end
  end
  local lines = {}
  for _, p in pairs(seen) do for _, l in ipairs(p) do lines[#lines + 1] = l end end
  return g, lines
end

t.test("a cluster with the training operator, KubeRay and its MLflow server (Created)", function()
  conn = TH.cluster(call, EKS, HP, 91)
  TH.training_operator(conn)
  local acc = assert(dispatch.call("cluster_configure_dependencies", { cluster = EKS, kuberay = true }, ADMIN))
  local v = op.wait(acc.operation_id)
  t.eq(v.status, "succeeded", v.error and v.error.message)
  FH.wait(function()
    local d = conn:get("apps/v1", "Deployment", "kuberay-operator", { namespace = "kuberay-operator" })
    return d and ((d.status or {}).availableReplicas or 0) >= 1
  end, 600, 5)
  local r, err = TH.run("training_setup_mlflow", { cluster = EKS }, ADMIN)
  t.ok(r, err and err.message)
  arn = r and r.arn
  t.eq(r and r.status, "Created")
end)

t.test("a llama-factory job with MLflow: training_get_metrics shows the loss decreasing with its log lines' numbers",
  function()
    local r, err = submit("llama-factory", obj { job_name = "lf", instance_type = "ml.g5.12xlarge",
      model = "models/qwen", dataset_dir = "datasets/alpaca", dataset = "alpaca",
      mlflow = obj { experiment_name = "sft runs" } })
    t.ok(r, err and err.message)
    if not r then return end
    local g, lines = watch("lf")
    t.eq(g.phase, "Completed")
    -- the Trainer's lines: {'loss': L, 'grad_norm': G, 'learning_rate': R, 'epoch': E, 'throughput': T},
    -- step = epoch * 20 (the pods go at completion: the last lines may be unseen)
    local printed, tputs, n = {}, {}, 0
    for _, l in ipairs(lines) do
      local loss, epoch, tput = l:match("^{'loss': ([%d%.]+),.*'epoch': ([%d%.]+), 'throughput': ([%d%.]+)}$")
      if loss then
        local step = math.floor(tonumber(epoch) * 20 + 0.5)
        printed[step], tputs[step], n = tonumber(loss), tonumber(tput), n + 1
      end
    end
    t.ok(n >= 10, "step lines seen: " .. n)
    local m, merr = dispatch.call("training_get_metrics", { name = "lf", cluster = EKS, history = 50 }, ADMIN)
    t.ok(m, merr and merr.message)
    if not m then return end
    t.eq({ m.metrics, m.tracking_uri, m.experiment and m.experiment.name }, { true, arn, "sft runs" })
    t.eq({ m.run and m.run.name, m.run and m.run.status, m.run and m.run.attempts }, { "lf", "FINISHED", 1 })
    local loss_at, tput_at, steps = {}, {}, {}
    for i, p in ipairs(m.loss and m.loss.history or {}) do loss_at[p.step], steps[i] = p.value, p.step end
    for _, p in ipairs(m.throughput and m.throughput.history or {}) do tput_at[p.step] = p.value end
    t.eq(#steps, 20, "20 points of loss")
    t.eq({ steps[1], steps[20] }, { 1, 20 }, "steps 1 to 20")
    local same, tsame = {}, {}
    for step in pairs(printed) do same[step], tsame[step] = loss_at[step], tput_at[step] end
    t.eq(same, printed, "each printed loss is the logged one, at its step")
    t.eq(tsame, tputs, "each printed throughput is the logged one")
    t.eq({ m.loss and m.loss.key, m.loss and m.loss.trend, m.loss and m.loss.latest }, { "loss", "decreasing",
      loss_at[20] })
    t.ok(loss_at[20] < loss_at[1] * 0.5, string.format("the loss fell from %s to %s", loss_at[1], loss_at[20]))
    t.eq({ m.throughput and m.throughput.key, m.throughput and m.throughput.unit }, { "throughput", "samples/s" })
    t.eq(m.latest and m.latest.learning_rate and m.latest.learning_rate.value, 9.5e-05)
    t.eq({ m.params and m.params.run_name, m.params and m.params.dataset, m.params and m.params.max_steps },
      { "lf", "alpaca", "20" })
    t.eq(m.tags and m.tags.hypd_job, "lf", "tags from MLFLOW_TAG_*")
    local short = assert(dispatch.call("training_get_metrics", { name = "lf", cluster = EKS, history = 5 }, ADMIN))
    t.eq(#short.loss.history, 5, "history: the last N points")
    t.eq(short.loss.history[5].step, 20)
    local gj = assert(dispatch.call("training_get_job", { name = "lf", cluster = EKS }, ADMIN))
    t.eq({ gj.mlflow and gj.mlflow.run and gj.mlflow.run.status, gj.mlflow and gj.mlflow.loss and
      gj.mlflow.loss.value, gj.mlflow and gj.mlflow.loss and gj.mlflow.loss.step }, { "FINISHED", loss_at[20], 20 },
      "training_get_job shows the latest metrics")
    -- by experiment and run, and the cluster's server by default
    local byrun = assert(dispatch.call("training_get_metrics", { experiment = "sft runs", run = "lf", cluster = EKS },
      ADMIN))
    t.eq(byrun.loss and byrun.loss.latest, loss_at[20])
  end)

t.test("a verl RayJob reports its loss and throughput to its experiment", function()
  local p = json.object()
  p.job_name, p.instance_type, p.model, p.replicas = "rl", "ml.g5.12xlarge", "models/qwen", 1
  p.train_files, p.val_files = "datasets/gsm8k/train.parquet", "datasets/gsm8k/test.parquet"
  local r, err = submit("verl", p)
  t.ok(r, err and err.message)
  if not r then return end
  local g = TH.follow({ name = "rl", cluster = EKS, tail_lines = 200 }, ADMIN)
  t.eq(g.phase, "Completed")
  local printed = {}
  for _, l in ipairs(lines_of(g)) do
    local loss, tput = l:match("step:%d+ %- actor/pg_loss:([%d%.%-]+) .* perf/throughput:([%d%.]+)")
    if loss then printed[#printed + 1] = { tonumber(loss), tonumber(tput) } end
  end
  t.ok(#printed >= 20, "the entrypoint printed its steps: " .. #printed)
  local m, merr = dispatch.call("training_get_metrics", { name = "rl", cluster = EKS, history = 100 }, ADMIN)
  t.ok(m, merr and merr.message)
  if not m then return end
  t.eq({ m.kind, m.experiment and m.experiment.name, m.run and m.run.name, m.run and m.run.status },
    { "RayJob", "rl", "rl", "FINISHED" })
  t.eq({ m.loss and m.loss.key, m.throughput and m.throughput.key, m.throughput and m.throughput.unit },
    { "actor/pg_loss", "perf/throughput", "tokens/s" })
  t.eq(m.loss and m.loss.latest, printed[#printed] and printed[#printed][1], "the last printed loss")
  t.eq(m.throughput and m.throughput.latest, printed[#printed] and printed[#printed][2])
  t.eq(m.loss and m.loss.points, 20)
end)

t.test("a job without MLflow: training_get_metrics says there are no metrics (not an error)", function()
  local r, err = submit("pytorch-torchrun", obj { job_name = "plain", instance_type = "ml.g5.12xlarge",
    script = "scripts/train.py" }, { mlflow = "none" })
  t.ok(r, err and err.message)
  local m, merr = dispatch.call("training_get_metrics", { name = "plain", cluster = EKS }, ADMIN)
  t.ok(m, merr and merr.message)
  t.eq(m and m.metrics, false)
  t.like(m and m.message or "", "does not report to MLflow %(it has no MLFLOW_TRACKING_URI%): there are no metrics")
  local gj = assert(dispatch.call("training_get_job", { name = "plain", cluster = EKS }, ADMIN))
  t.eq(gj.mlflow, nil, "training_get_job has no mlflow part")
  local _, verr = dispatch.call("training_get_metrics", { cluster = EKS }, ADMIN)
  t.eq(H.field_rules(verr), { "name:required" }, "a job, or experiment and run")
  local _, nerr = dispatch.call("training_get_metrics", { name = "nobody", cluster = EKS }, ADMIN)
  t.eq(nerr and nerr.code, "NOT_FOUND")
end)

t.test("a job restarted after a node failure reports a new run per attempt (the interrupted one KILLED); " ..
  "a job that fails ends its run FAILED", function()
    local nodes = require "sandbox.k8s.controllers.nodes"
    local r, err = submit("pytorch-torchrun", obj { job_name = "resilient", instance_type = "ml.g5.12xlarge",
      script = "scripts/train.py", max_retries = 3 })
    t.ok(r, err and err.message)
    if not r then return end
    local m
    FH.wait(function()
      m = dispatch.call("training_get_metrics", { name = "resilient", cluster = EKS }, ADMIN)
      return m and m.loss and m.loss.points >= 2
    end, 300, 1)
    t.eq({ m and m.run and m.run.status, m and m.loss and m.loss.key, m and m.throughput and m.throughput.key },
      { "RUNNING", "loss", "throughput" }, "while it runs: RUNNING, with points")
    local first = m and m.run and m.run.id
    local g = assert(dispatch.call("training_get_job", { name = "resilient", cluster = EKS }, ADMIN))
    assert(nodes.fail("us-west-2", HP, g.pods[1].node:match("^hyperpod%-(.+)$")))
    g = TH.follow({ name = "resilient", cluster = EKS }, ADMIN)
    t.eq({ g.phase, g.restarts }, { "Completed", 1 })
    m = assert(dispatch.call("training_get_metrics", { name = "resilient", cluster = EKS }, ADMIN))
    t.eq({ m.run and m.run.status, m.run and m.run.attempts, m.loss and m.loss.points }, { "FINISHED", 2, 20 },
      "the newest attempt's run, all its steps")
    t.ok(m.run and m.run.id ~= first, "a new run")
    local old = assert(dispatch.call("training_get_metrics", { experiment = "resilient", run = first, cluster = EKS },
      ADMIN))
    t.eq(old.run and old.run.status, "KILLED", "the interrupted attempt's run")
    r, err = submit("pytorch-torchrun", obj { job_name = "fragile", instance_type = "ml.g5.12xlarge",
      script = "scripts/train.py", max_retries = 0 })
    t.ok(r, err and err.message)
    if not r then return end
    FH.wait(function()
      m = dispatch.call("training_get_metrics", { name = "fragile", cluster = EKS }, ADMIN)
      return m and m.run ~= nil
    end, 300, 1)
    g = assert(dispatch.call("training_get_job", { name = "fragile", cluster = EKS }, ADMIN))
    assert(nodes.fail("us-west-2", HP, g.pods[1].node:match("^hyperpod%-(.+)$")))
    g = TH.follow({ name = "fragile", cluster = EKS }, ADMIN)
    t.eq(g.phase, "Failed")
    m = assert(dispatch.call("training_get_metrics", { name = "fragile", cluster = EKS }, ADMIN))
    t.eq({ m.run and m.run.status, g.mlflow and g.mlflow.run and g.mlflow.run.status }, { "FAILED", "FAILED" })
    -- a stopped server serves no API: the tool says so, the API answers 503
    call("sagemaker", "StopMlflowTrackingServer", { TrackingServerName = "hypd-mlm-a-mlflow" })
    m = assert(dispatch.call("training_get_metrics", { name = "fragile", cluster = EKS }, ADMIN))
    t.eq(m.metrics, false)
    t.like(m.message or "", "tracking server hypd%-mlm%-a%-mlflow is Stopping; it serves metrics once it is Created")
    local d = call("sagemaker", "DescribeMlflowTrackingServer", { TrackingServerName = "hypd-mlm-a-mlflow" })
    local _, aerr = require("hypd.aws.signed").request { service = "sagemaker-mlflow", action = "GetExperimentByName",
      url = d.TrackingServerUrl, path = "/api/2.0/mlflow/experiments/get-by-name",
      query = { experiment_name = "fragile" }, headers = { ["x-mlflow-sm-tracking-server-arn"] = arn } }
    t.eq({ aerr and aerr.status, aerr and aerr.code }, { 503, "TEMPORARILY_UNAVAILABLE" })
  end)
