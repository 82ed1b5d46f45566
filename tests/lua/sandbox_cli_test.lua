-- `hypd sandbox` as a user runs it: a separate process that prints its
-- environment, answers hypd's own doctor, boto3 and the aws CLI, keeps its
-- state across a kill -9, and logs each mutation once in its audit log.
local t = require "hypd.tap"
local http = require "hypd.http"
local json = require "hypd.json"
local H = dofile("tests/lua/helpers.lua")

local dir = H.tmpdir()
local env, pid

local function start()
  env, pid = H.sandbox_process(dir)
  return env ~= nil
end

local function stop(signal)
  os.execute("kill -" .. (signal or "TERM") .. " " .. pid .. " 2>/dev/null; sleep 0.2")
end

local function with_env(cmd) return H.with_env(env, dir, cmd) end

local function have_boto3() return H.sh("python3 -c 'import boto3'") == 0 end

t.test("bad sandbox options are one clear line and change nothing", function()
  local state = H.quote(dir .. "/bad")
  local rc, _, err = H.sh(H.hypd .. " --state " .. state .. " sandbox --listen 0.0.0.0:4566")
  t.eq(rc, 1)
  t.like(err, "^hypd: VALIDATION: listen: the sandbox serves plain HTTP on loopback only")
  rc, _, err = H.sh(H.hypd .. " --state " .. state .. " sandbox --speed fast")
  t.eq(rc, 2)
  t.like(err, "%-%-speed must be a positive number, not 'fast'")
  rc, _, err = H.sh(H.hypd .. " --state " .. state .. " sandbox --speed 2 --virtual-clock")
  t.eq(rc, 2)
  t.like(err, "cannot be combined")
  rc, _, err = H.sh(H.hypd .. " --state " .. state .. " sandbox --faults /nonexistent.json")
  t.eq(rc, 2)
  t.like(err, "%-%-faults: cannot read a JSON object from /nonexistent.json")
end)

t.test("hypd sandbox prints the environment to use it", function()
  t.ok(start(), "the sandbox started: " .. tostring(H.read(dir .. "/sandbox.err")))
  t.like(env.AWS_ENDPOINT_URL, "^http://127%.0%.0%.1:%d+$")
  t.eq(env.AWS_REGION, "us-west-2")
  t.like(env.AWS_ACCESS_KEY_ID, "^AKIA")
end)

t.test("hypd doctor reaches the sandbox and sees the sandbox's identity", function()
  local rc, out = with_env(H.hypd .. " doctor --json")
  t.eq(rc, 0, out)
  local r = json.decode(out)
  t.eq(r.identity.arn, "arn:aws:iam::123456789012:user/sandbox")
  t.eq(r.endpoints.sts.source, "AWS_ENDPOINT_URL")
end)

t.test("boto3 creates a bucket and an object in the sandbox", function()
  if not have_boto3() then return t.skip("boto3 is absent") end
  local rc, out, err = with_env([[python3 -c '
import boto3
s3 = boto3.client("s3")
s3.create_bucket(Bucket="kept-bucket", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
s3.put_object(Bucket="kept-bucket", Key="lifecycle/on_create.sh", Body=b"#!/bin/bash\n")
print(boto3.client("sts").get_caller_identity()["Account"])
']])
  t.eq(rc, 0, err)
  t.eq(out, "123456789012\n")
end)

t.test("the aws CLI works against the sandbox", function()
  if H.sh("command -v aws") ~= 0 then return t.skip("no aws CLI") end
  local rc, out, err = with_env("aws sts get-caller-identity --output json")
  t.eq(rc, 0, err)
  t.eq(json.decode(out).Account, "123456789012")
  -- CloudWatch Logs (the HyperPod lifecycle logs' service): JSON 1.1 as the CLI speaks it
  rc, out, err = with_env("aws logs describe-log-groups --log-group-name-prefix /aws/sagemaker/ --output json")
  t.eq(rc, 0, err)
  t.eq(json.decode(out), { logGroups = {} })
  rc, out, err = with_env("aws logs describe-log-streams --log-group-name /aws/sagemaker/Clusters/none/0 --output json")
  t.ok(rc ~= 0, "a log group that does not exist is an error: " .. tostring(out))
  t.like(err, "ResourceNotFoundException.*The specified log group does not exist")
end)

t.test("state survives kill -9 and a restart", function()
  if not have_boto3() then return t.skip("boto3 is absent") end
  stop("9")
  t.ok(start(), "restarted")
  local rc, out, err = with_env([[python3 -c '
import boto3
o = boto3.client("s3").get_object(Bucket="kept-bucket", Key="lifecycle/on_create.sh")
print(o["Body"].read().decode().strip())
']])
  t.eq(rc, 0, err)
  t.eq(out, "#!/bin/bash\n")
end)

t.test("the audit log shows each mutation exactly once", function()
  if not have_boto3() then return t.skip("boto3 is absent") end
  local log = json.decode(http.request { url = env.AWS_ENDPOINT_URL .. "/_sandbox/audit" }.body)
  local seen = {}
  for _, e in ipairs(log) do
    local k = e.service .. " " .. e.operation .. " " .. e.target
    seen[k] = (seen[k] or 0) + 1
  end
  t.eq(seen["s3 CreateBucket kept-bucket"], 1)
  t.eq(seen["s3 PutObject kept-bucket/lifecycle/on_create.sh"], 1)
end)

t.test("the sandbox stops on SIGTERM", function()
  stop("TERM")
  local gone = false
  for _ = 1, 100 do
    if H.sh("kill -0 " .. pid) ~= 0 then gone = true break end
    os.execute("sleep 0.1")
  end
  t.ok(gone, "the process is gone")
  os.execute("rm -rf " .. H.quote(dir))
end)
