-- A model download seen by the real clients, against a `hypd sandbox`
-- process at 200 times real time: boto3 makes the EKS cluster (Mountpoint
-- add-on) and a HyperPod cluster of one GPU and one CPU node; `hypd call`
-- (its own process, log at debug level) makes the S3 storage and downloads
-- a gated model with a token; kubectl shows the Job (on the CPU node, no
-- GPU request) and its log with the download's progress, the aws CLI lists
-- the files in the bucket and reads config.json; the token is in no output
-- of hypd, in no file of its state directory, and only in the Secret.
local t = require "hypd.tap"
local json = require "hypd.json"
local H = dofile("tests/lua/helpers.lua")

local dir = H.tmpdir()
local kc = H.kubectl_harness(dir)
local NAME = "hypd-hub"
local BUCKET = "hypd-hub-data-123456789012-us-west-2"
local JOB = "hf-download-meta-llama-llama-3-2-1b"
local DEST = "models/meta-llama--Llama-3.2-1B"
local TOKEN = "hf_" .. string.rep("Kp4", 11) .. "w"
local pid, ready, absent = nil, false, nil
local done = {} -- rc, out, err of the download call
local function skip() return t.skip(absent or "no cluster: the first test failed to make it") end

local function hypd(args) return kc.sh(H.hypd .. " " .. args) end

t.test("a sandbox process, a cluster with a GPU and a CPU node (boto3), and hypd's S3 storage (hypd call)", function()
  if H.sh("command -v kubectl") ~= 0 or H.sh("python3 -c 'import boto3'") ~= 0 then
    absent = "no kubectl or boto3 on this machine"
    return skip()
  end
  -- a running clock (200 times real time), not the virtual one: a process
  -- that idles between the client's calls would jump over the Job's
  -- ttlSecondsAfterFinished (a day) at once, and kubectl would find no Job
  local env
  env, pid = H.sandbox_process(dir, "--speed 200")
  kc.env = env or {}
  t.ok(env and env.AWS_ENDPOINT_URL, "the sandbox started")
  local rc, out, err = kc.sh("python3 tests/tools/model_cluster.py " .. NAME)
  t.eq(rc, 0, err)
  t.like(out, "^https://127%.0%.0%.1:%d+")
  rc, out, err = hypd("call storage_create_s3 cluster=" .. NAME .. " --wait")
  t.eq(rc, 0, err)
  t.eq(((json.decode(out or "null") or {}).result or {}).bucket, BUCKET, out)
  rc, out, err = hypd("kubeconfig --cluster " .. NAME .. " --write " .. H.quote(kc.kc))
  t.eq({ rc, out }, { 0, "" }, err)
  ready = rc == 0
end)

t.test("hypd call model_download with a token: the Job succeeds and its result names the files", function()
  if not ready then return skip() end
  local rc, out, err = hypd("--log-level debug call model_download cluster=" .. NAME ..
    " model_id=meta-llama/Llama-3.2-1B hf_token=" .. TOKEN .. " --wait")
  done = { rc, out or "", err or "" }
  t.eq(rc, 0, err)
  local r = (json.decode(out or "null") or {}).result or {}
  t.eq({ r.name, r.phase, #(r.files or {}) }, { JOB, "Succeeded", 13 })
  t.eq(r.s3_uri, "s3://" .. BUCKET .. "/" .. DEST .. "/")
end)

t.test("kubectl: the Job ran on the CPU node with no GPU request, and its log shows the download", function()
  if not ready then return skip() end
  local rc, out, err = kc.kubectl("get job " .. JOB .. " -o json")
  t.eq(rc, 0, err)
  local job = json.decode(out or "null") or {}
  t.eq(((job.status or {}).succeeded), 1)
  local c = job.spec.template.spec.containers[1]
  t.eq(c.resources.requests, { cpu = "2", memory = "8Gi" })
  t.ok(not json.encode(c.resources):find("gpu", 1, true), "no GPU request or limit")
  rc, out, err = kc.kubectl("get pods -l job-name=" .. JOB .. " -o jsonpath='{.items[0].spec.nodeName}'")
  t.eq(rc, 0, err)
  local node = out
  rc, out, err = kc.kubectl("get node " .. tostring(node) ..
    " -o jsonpath='{.metadata.labels.node\\.kubernetes\\.io/instance-type}'")
  t.eq({ rc, out }, { 0, "ml.m5.2xlarge" }, err)
  rc, out, err = kc.kubectl("logs job/" .. JOB)
  t.eq(rc, 0, err)
  t.like(out, "Successfully installed .*huggingface_hub%-")
  t.like(out, "model%.safetensors:  50%%|")
  t.like(out, "Fetching 13 files: 100%%|")
  rc, out, err = kc.kubectl("get jobs")
  t.eq(rc, 0, err)
  t.like(out, JOB:gsub("%-", "%%-") .. "%s+Complete%s+1/1")
end)

t.test("the aws CLI lists the model's files in the bucket and reads its config.json", function()
  if not ready then return skip() end
  if H.sh("command -v aws") ~= 0 then return t.skip("no aws CLI on this machine") end
  local rc, out, err = kc.sh("aws s3 ls --recursive s3://" .. BUCKET .. "/" .. DEST .. "/")
  t.eq(rc, 0, err)
  local n = 0
  for _ in (out or ""):gmatch("[^\n]+") do n = n + 1 end
  t.eq(n, 13, out)
  t.like(out, "%s2471645608 " .. DEST:gsub("%p", "%%%0") .. "/model%.safetensors\n")
  t.like(out, "%s2183982 " .. DEST:gsub("%p", "%%%0") .. "/original/tokenizer%.model\n")
  rc, out, err = kc.sh("aws s3 cp s3://" .. BUCKET .. "/" .. DEST .. "/config.json -")
  t.eq(rc, 0, err)
  t.eq((json.decode(out or "null") or {}).model_type, "llama")
end)

t.test("the token is in no output of hypd, in no file of its state directory, and only in the Secret", function()
  if not ready then return skip() end
  local b64 = require("hypd.sys").b64encode(TOKEN)
  t.ok(#done[3] > 0, "hypd logged at debug level")
  for i, what in ipairs { "the exit status", "the output", "the log (stderr, debug)" } do
    if i > 1 then
      t.ok(not done[i]:find(TOKEN, 1, true), "no token in " .. what)
      t.ok(not done[i]:find(b64, 1, true), "no base64 token in " .. what)
    end
  end
  t.eq(H.sh("grep -rqaF " .. H.quote(TOKEN) .. " " .. H.quote(dir .. "/client")), 1, "no client state file has it")
  t.eq(H.sh("grep -rqaF " .. H.quote(b64) .. " " .. H.quote(dir .. "/client")), 1, "nor its base64")
  local rc, out, err = kc.kubectl("get job,pods -o json")
  t.eq(rc, 0, err)
  t.ok(not out:find(TOKEN, 1, true) and not out:find(b64, 1, true), "not in the Job or its pods")
  rc, out, err = kc.kubectl("get events -o json")
  t.eq(rc, 0, err)
  t.ok(not out:find(TOKEN, 1, true) and not out:find(b64, 1, true), "not in the events")
  rc, out, err = hypd("call job_get_status cluster=" .. NAME .. " name=" .. JOB)
  t.eq(rc, 0, err)
  t.ok(not out:find(TOKEN, 1, true) and not out:find(b64, 1, true), "not in job_get_status")
  rc, out, err = kc.kubectl("get secret " .. JOB .. "-hf-token -o jsonpath='{.data.HF_TOKEN}'")
  t.eq({ rc, out }, { 0, b64 }, err)
end)

t.cleanup(function()
  if pid then os.execute("kill " .. tostring(pid) .. " 2>/dev/null") end
  os.execute("rm -rf " .. H.quote(dir))
end)
