-- Managed MLflow for training jobs: training_setup_mlflow (plan, artifact
-- bucket, IAM role, tracking server, the wait to Created) and
-- training_get_mlflow against the in-process sandbox under the virtual
-- clock; training_submit then gives jobs MLFLOW_TRACKING_URI (the server's
-- ARN) and MLFLOW_EXPERIMENT_NAME and the recipes report to MLflow; a
-- named server is reused as it is; a server still Creating is refused for
-- jobs. Then the sandbox's tracking servers as boto3 and the aws CLI see
-- them (a `hypd sandbox --speed 600` process): Describe's fields are
-- botocore's, Update goes Updating -> Updated, Delete takes it away.
local t = require "hypd.tap"
local TH = dofile("tests/lua/training_helpers.lua")
local call = TH.start()
local H, FH = TH.H, TH.FH
local dispatch = require "hypd.tool.dispatch"
local core, json = require "hypd.core", require "hypd.json"
local ADMIN = { name = "mlflow-tester", scope = "admin", front = "test" }
local EKS, HP = "mlf-a", "mlf-a-hp"
local SERVER = "hypd-mlf-a-mlflow"
local field_rules = H.field_rules
local conn, EKS_D

local function setup(args)
  local a = { cluster = EKS }
  for k, v in pairs(args or {}) do a[k] = v end
  return TH.run("training_setup_mlflow", a, ADMIN)
end

t.test("a cluster with the training operator", function()
  conn, EKS_D = TH.cluster(call, EKS, HP, 89)
  TH.training_operator(conn)
  t.ok(conn ~= nil)
end)

t.test("a plan lists the bucket, the role, its policy and the tracking server, and sends nothing", function()
  local m = FH.mark()
  local r, err = setup { plan = true }
  t.ok(r, err and err.message)
  local rows = {}
  for _, e in ipairs(r and r.plan or {}) do rows[#rows + 1] = e.action .. " " .. e.type end
  t.eq(rows, { "create s3:bucket", "create iam:role", "create iam:role-policy",
    "create sagemaker:mlflow-tracking-server" })
  local _, total = FH.since(m)
  t.eq(total, 0, "no AWS mutation")
end)

local arn
t.test("training_setup_mlflow makes the bucket, the role and the server, and waits about 20 minutes to Created",
  function()
    local t0 = core.now()
    local r, err = setup()
    t.ok(r, err and err.message)
    if not r then return end
    local took = core.now() - t0
    t.ok(took >= 19 * 60 and took <= 30 * 60, string.format("creation took %.0f simulated seconds", took))
    t.eq({ r.name, r.status, r.active, r.server_action }, { SERVER, "Created", true, "created" })
    arn = r.arn
    t.like(arn, "^arn:aws:sagemaker:us%-west%-2:%d+:mlflow%-tracking%-server/hypd%-mlf%-a%-mlflow$")
    t.eq(r.tracking_uri, arn, "the tracking URI jobs get is the ARN")
    local bucket = r.bucket.name
    t.like(bucket, "^hypd%-mlf%-a%-mlflow%-%d+%-us%-west%-2$")
    t.eq(r.artifact_store_uri, "s3://" .. bucket .. "/mlflow")
    local tags = {}
    for _, x in ipairs(call("s3", "GetBucketTagging", { Bucket = bucket }).TagSet) do tags[x.Key] = x.Value end
    t.eq({ tags["hypd:cluster-tag"], tags["hypd:storage"] }, { "mlf-a", "mlflow" })
    local role = call("iam", "GetRole", { RoleName = "hypd-mlf-a-mlflow" }).Role
    t.eq(r.role_arn, role.Arn)
    t.like(role.AssumeRolePolicyDocument, "sagemaker%.amazonaws%.com")
    local pol = call("iam", "GetRolePolicy", { RoleName = "hypd-mlf-a-mlflow", PolicyName = "hypd-mlflow-artifacts" })
    local doc = pol.PolicyDocument
    if doc:sub(1, 1) ~= "{" then doc = doc:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end) end
    t.like(doc, "arn:aws:s3:::" .. bucket:gsub("%-", "%%-") .. "/%*", "the role may use the bucket's objects")
    local st = {}
    for _, x in ipairs(call("sagemaker", "ListTags", { ResourceArn = arn }).Tags) do st[x.Key] = x.Value end
    t.eq({ st["hypd:cluster-tag"], st["hypd:eks-cluster"] }, { "mlf-a", EKS })
  end)

t.test("training_get_mlflow shows the server; a second setup changes nothing", function()
  local g, err = dispatch.call("training_get_mlflow", { cluster = EKS }, ADMIN)
  t.ok(g, err and err.message)
  t.eq({ g and g.name, g and g.status, g and g.tracking_uri }, { SERVER, "Created", arn })
  local m = FH.mark()
  local r, serr = setup()
  t.ok(r, serr and serr.message)
  local _, total = FH.since(m)
  t.eq(total, 0, "no AWS mutation the second time")
  local _, nerr = dispatch.call("training_get_mlflow", { name = "nobody-here" }, ADMIN)
  t.eq(field_rules(nerr), { "name:exists" })
end)

t.test("with the cluster's OIDC provider, a second setup adds IRSA for the pods: role, policy, service account",
  function()
    local first = assert(setup { plan = true })
    call("iam", "CreateOpenIDConnectProvider", { Url = EKS_D.identity.oidc.issuer,
      ClientIDList = { "sts.amazonaws.com" }, ThumbprintList = { FH.THUMBPRINT } })
    local r, err = setup()
    t.ok(r, err and err.message)
    if not r then return end
    t.eq(#first.plan, 0, "before the provider: nothing to do (the pods part is skipped)")
    t.eq(r.pods and r.pods.service_account, "default/hypd-mlflow")
    local role = call("iam", "GetRole", { RoleName = "hypd-mlf-a-mlflow-pods" }).Role
    local trust = role.AssumeRolePolicyDocument
    if trust:sub(1, 1) ~= "{" then trust = trust:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end) end
    t.like(trust, "system:serviceaccount:default:hypd%-mlflow", "trusts exactly the service account")
    t.like(trust, "AssumeRoleWithWebIdentity")
    local pol = call("iam", "GetRolePolicy", { RoleName = "hypd-mlf-a-mlflow-pods", PolicyName = "hypd-mlflow-access" })
    local doc = pol.PolicyDocument
    if doc:sub(1, 1) ~= "{" then doc = doc:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end) end
    t.like(doc, "sagemaker%-mlflow:%*")
    t.like(doc, arn:gsub("%p", "%%%0"), "on the tracking server")
    local sa = assert(conn:get("v1", "ServiceAccount", "hypd-mlflow", { namespace = "default" }))
    t.eq(sa.metadata.annotations["eks.amazonaws.com/role-arn"], role.Arn)
  end)

local function job(recipe, params, extra)
  local args = { recipe = recipe, params = params, cluster = EKS }
  for k, v in pairs(extra or {}) do args[k] = v end
  return TH.run("training_submit", args, ADMIN)
end

local function env_of(name)
  local j = conn:get("sagemaker.amazonaws.com/v1", "HyperPodPyTorchJob", name, { namespace = "default" })
  local env = {}
  for _, e in ipairs(j.spec.replicaSpecs[1].template.spec.containers[1].env) do env[e.name] = e.value end
  return env, j
end

local obj = TH.obj

t.test("jobs get MLFLOW_TRACKING_URI (the ARN) and MLFLOW_EXPERIMENT_NAME from the cluster's server by default",
  function()
    local r, err = job("pytorch-torchrun", obj { job_name = "tracked", instance_type = "ml.g5.12xlarge",
      script = "scripts/train.py" })
    t.ok(r, err and err.message)
    if not r then return end
    t.eq(r.mlflow and r.mlflow.name, SERVER)
    local env, tj = env_of("tracked")
    t.eq({ env.MLFLOW_TRACKING_URI, env.MLFLOW_EXPERIMENT_NAME }, { arn, "tracked" })
    t.eq(tj.spec.replicaSpecs[1].template.spec.serviceAccountName, "hypd-mlflow", "the pods run with the IRSA role")
    r, err = job("llama-factory", obj { job_name = "lf", instance_type = "ml.g5.12xlarge", model = "models/qwen",
      dataset_dir = "datasets/alpaca", dataset = "alpaca", mlflow = obj { experiment_name = "sft runs" } })
    t.ok(r, err and err.message)
    local lenv, lj = env_of("lf")
    t.eq({ lenv.MLFLOW_TRACKING_URI, lenv.MLFLOW_EXPERIMENT_NAME }, { arn, "sft runs" })
    t.like(lj.spec.replicaSpecs[1].template.spec.containers[1].command[3], "report_to: mlflow\nrun_name: lf",
      "LLaMA-Factory reports loss and throughput to MLflow")
    r = job("pytorch-torchrun", obj { job_name = "untracked", instance_type = "ml.g5.12xlarge",
      script = "scripts/train.py" }, { mlflow = "none" })
    t.ok(r, "mlflow=none")
    t.eq(env_of("untracked").MLFLOW_TRACKING_URI, nil, "mlflow=none: no MLflow")
    local _, berr = job("pytorch-torchrun", obj { job_name = "lost", instance_type = "ml.g5.12xlarge",
      script = "scripts/train.py" }, { mlflow = "no-such-server" })
    t.eq(field_rules(berr), { "mlflow:exists" })
  end)

t.test("the recipes render their MLflow reporting: ms-swift --report_to mlflow, verl's mlflow logger", function()
  local ml = obj { tracking_uri = "arn:aws:sagemaker:us-west-2:123456789012:mlflow-tracking-server/x" }
  local r = assert(dispatch.call("training_render", { recipe = "ms-swift", params = obj { job_name = "sw",
    instance_type = "ml.g5.12xlarge", model = "models/qwen", dataset = "datasets/train.jsonl", mlflow = ml } }, ADMIN))
  t.like(r.objects[1].spec.replicaSpecs[1].template.spec.containers[1].command[3], "%-%-report_to mlflow %-%-run_name 'sw'")
  r = assert(dispatch.call("training_render", { recipe = "verl", params = obj { job_name = "rl",
    instance_type = "ml.g5.12xlarge", model = "models/qwen", train_files = "a.parquet", val_files = "b.parquet",
    mlflow = ml } }, ADMIN))
  local spec = r.objects[1].spec
  t.like(spec.entrypoint, "trainer%.logger=%[console,mlflow%] trainer%.project_name='rl' trainer%.experiment_name='rl'")
  local head = {}
  for _, e in ipairs(spec.rayClusterSpec.headGroupSpec.template.spec.containers[1].env) do head[e.name] = e.value end
  t.eq(head.MLFLOW_TRACKING_URI, ml.tracking_uri, "the Ray driver (on the head) gets the tracking URI")
  local _, err = dispatch.call("training_render", { recipe = "verl", params = obj { job_name = "rl",
    instance_type = "ml.g5.12xlarge", model = "models/qwen", train_files = "a.parquet", val_files = "b.parquet",
    mlflow = obj { tracking_uri = "mlflow.example" } } }, ADMIN)
  t.eq(field_rules(err), { "params.mlflow.tracking_uri:pattern" })
end)

t.test("a named server is reused as it is; one still Creating is refused for jobs, naming mlflow", function()
  local role = call("iam", "GetRole", { RoleName = "hypd-mlf-a-mlflow" }).Role.Arn
  call("s3", "CreateBucket", { Bucket = "team-artifacts", CreateBucketConfiguration = { LocationConstraint = "us-west-2" } })
  call("sagemaker", "CreateMlflowTrackingServer", { TrackingServerName = "team-mlflow",
    ArtifactStoreUri = "s3://team-artifacts", RoleArn = role })
  local _, err = job("pytorch-torchrun", obj { job_name = "early", instance_type = "ml.g5.12xlarge",
    script = "scripts/train.py" }, { mlflow = "team-mlflow" })
  t.eq(field_rules(err), { "mlflow:ready" })
  t.like(err and err.message, "team%-mlflow is Creating")
  local m = FH.mark()
  local r, serr = setup { name = "team-mlflow", bucket = "team-artifacts", role = "hypd-mlf-a-mlflow" }
  t.ok(r, serr and serr.message)
  t.eq({ r and r.server_action, r and r.status, r and r.artifact_store_uri }, { "unchanged", "Created",
    "s3://team-artifacts" }, "waited for it, changed nothing")
  local by = FH.since(m)
  t.eq(by["sagemaker CreateMlflowTrackingServer"], nil, "not created again")
  t.eq(by["iam CreateRole"], nil)
end)

-- real clients against a sandbox process ----------------------------------

t.test("boto3 and the aws CLI: Describe has botocore's fields, Update goes Updating -> Updated, Delete removes it",
  function()
    local dir = H.tmpdir()
    -- a real clock 600 times faster: Creating (20 to 25 minutes) lasts 2 to 2.5 seconds
    local env, pid = H.sandbox_process(dir, "--speed 600")
    t.cleanup(function() os.execute("kill " .. tostring(pid) .. " 2>/dev/null") end)
    if not env then return t.skip("the sandbox process did not start") end
    H.write(dir .. "/mlflow.py", [[
import boto3, json, time, sys
sm = boto3.client("sagemaker")
s3 = boto3.client("s3")
iam = boto3.client("iam")
s3.create_bucket(Bucket="cli-artifacts", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"},
         "Action": "sts:AssumeRole"}]}
role = iam.create_role(RoleName="cli-mlflow", AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
arn = sm.create_mlflow_tracking_server(TrackingServerName="cli", ArtifactStoreUri="s3://cli-artifacts",
                                       RoleArn=role, Tags=[{"Key": "team", "Value": "ml"}])["TrackingServerArn"]
d = sm.describe_mlflow_tracking_server(TrackingServerName="cli")
shape = sm.meta.service_model.operation_model("DescribeMlflowTrackingServer").output_shape
extra = sorted(set(d) - set(shape.members) - {"ResponseMetadata"})
print("EXTRA", extra)
print("FIRST", d["TrackingServerStatus"], d["IsActive"], type(d["CreationTime"]).__name__)
try:
    sm.update_mlflow_tracking_server(TrackingServerName="cli", TrackingServerSize="Medium")
    print("UPDATE-WHILE-CREATING ok")
except sm.exceptions.ClientError as e:
    print("UPDATE-WHILE-CREATING", e.response["Error"]["Code"])
for _ in range(200):
    d = sm.describe_mlflow_tracking_server(TrackingServerName="cli")
    if d["TrackingServerStatus"] == "Created":
        break
    time.sleep(0.05)
print("THEN", d["TrackingServerStatus"], d["IsActive"])
s = sm.list_mlflow_tracking_servers()["TrackingServerSummaries"]
print("LIST", [x["TrackingServerName"] for x in s], sorted(s[0]))
print("TAGS", sm.list_tags(ResourceArn=arn)["Tags"])
sm.update_mlflow_tracking_server(TrackingServerName="cli", TrackingServerSize="Medium")
print("UPDATING", sm.describe_mlflow_tracking_server(TrackingServerName="cli")["TrackingServerStatus"])
for _ in range(200):
    d = sm.describe_mlflow_tracking_server(TrackingServerName="cli")
    if d["TrackingServerStatus"] == "Updated":
        break
    time.sleep(0.05)
print("UPDATED", d["TrackingServerStatus"], d["TrackingServerSize"])
]])
    local rc, out, err = H.with_env(env, dir, "python3 " .. H.quote(dir .. "/mlflow.py"))
    t.eq(rc, 0, err)
    out = out or ""
    t.like(out, "EXTRA %[%]", "no field botocore does not know")
    t.like(out, "FIRST Creating Inactive datetime")
    t.like(out, "UPDATE%-WHILE%-CREATING ValidationException")
    t.like(out, "THEN Created Active")
    t.like(out, "LIST %['cli'%] %['CreationTime', 'IsActive', 'LastModifiedTime', 'MlflowVersion', " ..
      "'TrackingServerArn', 'TrackingServerName', 'TrackingServerStatus'%]")
    t.like(out, "TAGS %[{'Key': 'team', 'Value': 'ml'}%]")
    t.like(out, "UPDATING Updating")
    t.like(out, "UPDATED Updated Medium")
    local out2, err2
    rc, out2, err2 = H.with_env(env, dir, "aws sagemaker describe-mlflow-tracking-server --tracking-server-name cli " ..
      "--output json")
    t.eq(rc, 0, err2)
    local d = json.decode(out2 or "{}") or {}
    t.eq({ d.TrackingServerName, d.TrackingServerStatus, d.TrackingServerSize }, { "cli", "Updated", "Medium" })
    local drc, _, derr = H.with_env(env, dir, "aws sagemaker delete-mlflow-tracking-server --tracking-server-name cli")
    t.eq(drc, 0, derr)
    -- Deleting for 3 to 7 minutes (0.3 to 0.7 s here), then gone
    local gone
    for _ = 1, 20 do
      rc, out2, err2 = H.with_env(env, dir, "aws sagemaker describe-mlflow-tracking-server --tracking-server-name " ..
        "cli --query TrackingServerStatus --output text")
      if rc ~= 0 then gone = err2 break end
      t.like(out2 or "", "Deleting", "while it goes")
    end
    t.like(gone or "", "ResourceNotFound", "then it is gone")
  end)
