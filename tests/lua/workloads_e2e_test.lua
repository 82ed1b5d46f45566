-- The workload tools of issue 14 working together through hypd's real
-- front ends: `hypd serve --sandbox` as its own process under the virtual
-- clock, driven as a user's programs would drive it. Over the REST API
-- (POST /api/v1/tools/{name}: 202 and an operation, followed with GET
-- /api/v1/operations/{id}?wait_seconds=): cluster_create (a GPU group, S3
-- storage, the training and inference operators), a CPU group, then
-- model_download of Qwen/Qwen2.5-0.5B-Instruct, its files in
-- storage_list_contents, a vLLM container serving them from /s3,
-- inference_get until ready, inference_call_model's answer and latency,
-- and the request's lines in job_get_logs. Over MCP (HTTP, tools/call):
-- training_submit of pytorch-torchrun, its operation followed with
-- operation_get; over /ws a client follows the job's logs to logs.end
-- completed, and training_get_job says Completed. Then the guardrails of
-- the new tools by token scope: read, operate and admin tokens made with
-- `hypd token create`.
local t = require "hypd.tap"
local http = require "hypd.http"
local json = require "hypd.json"
local H = dofile("tests/lua/helpers.lua")

local dir = H.tmpdir()
local state = dir .. "/state"
local url, admin, pid
local tokens = {}
local sandbox_env = {} -- the sandbox's AWS environment, as serve prints it
local MODEL, FOLDER = "Qwen/Qwen2.5-0.5B-Instruct", "models/Qwen--Qwen2.5-0.5B-Instruct"
local absent -- why the flow could not go on (nil: it goes on)
local function skip() return t.skip(absent or "an earlier step failed") end

t.cleanup(function()
  if pid then os.execute("kill " .. pid .. " 2>/dev/null") end
  os.execute("rm -rf " .. H.quote(dir))
end)

-- rest(name, args [, token]) -> status, body (decoded)
local function rest(name, args, token)
  local resp = assert(http.request { method = "POST", url = url .. "/api/v1/tools/" .. name, timeout = 120,
    headers = { authorization = "Bearer " .. (token or admin), ["content-type"] = "application/json" },
    body = json.encode(args or json.object()) })
  return resp.status, json.decode(resp.body ~= "" and resp.body or "null")
end

-- follow(id [, token]) -> the operation's view once it is no longer running
local function follow(id, token)
  local v
  for _ = 1, 40 do
    local resp = assert(http.request { url = url .. "/api/v1/operations/" .. id .. "?wait_seconds=300", timeout = 120,
      headers = { authorization = "Bearer " .. (token or admin) } })
    v = json.decode(resp.body)
    if v.status ~= "running" then return v end
  end
  return v
end

-- staged(name, args) -> the operation's view: 202 with an operation id and the status tool, followed to its end
local function staged(name, args, status_tool)
  local code, acc = rest(name, args)
  t.eq(code, 202, name .. " is accepted: " .. json.encode(acc))
  if code ~= 202 then return { status = "refused", error = acc and acc.error } end
  t.like(acc.operation_id or "", "^op%-%x+$", name .. " answers an operation id")
  if status_tool then t.eq(acc.status_tool, status_tool, name .. " names its status tool") end
  local v = follow(acc.operation_id)
  t.eq(v.status, "succeeded", name .. " succeeds: " .. json.encode(v.error))
  return v
end

local function read(name, args, token)
  local code, body = rest(name, args, token)
  t.eq(code, 200, name .. ": " .. json.encode(body and body.error))
  return body or {}
end

t.test("hypd serve --sandbox starts as its own process under the virtual clock and prints its URL and token", function()
  os.execute("mkdir -p " .. H.quote(state))
  local out = dir .. "/serve.out"
  local p = io.popen(string.format("HYPD_CLOCK=virtual HYPD_STATE=%s %s serve --sandbox --listen 127.0.0.1:0 " ..
    ">%s 2>%s/serve.err </dev/null & echo $!", H.quote(state), H.hypd, H.quote(out), H.quote(dir)))
  pid = p:read("l")
  p:close()
  local printed = ""
  for _ = 1, 300 do
    printed = H.read(out) or ""
    if printed:find("stops it", 1, true) then break end
    os.execute("sleep 0.05")
  end
  url, admin = printed:match("listening on (%S+)"), printed:match("export HYPD_TOKEN=(%S+)")
  for k, v in printed:gmatch("export (AWS_[%w_]+)=(%S+)") do sandbox_env[k] = v end
  t.ok(url and admin, "the URL and the admin token: " .. printed)
  if not (url and admin) then absent = "hypd serve --sandbox did not start" end
end)

t.test("hypd token create makes a read and an operate token for the running server", function()
  if absent then return skip() end
  for _, scope in ipairs { "read", "operate" } do
    local rc, out, err = H.run_hypd({ HYPD_STATE = state }, "token", "create", "--scope", scope, "--name", "e2e-" .. scope)
    t.eq(rc, 0, err)
    tokens[scope] = (out or ""):match("(hypd_[%w_-]+)")
    t.ok(tokens[scope], scope .. " token: " .. tostring(out))
  end
  tokens.admin = admin
end)

t.test("REST: cluster_create makes EKS, a GPU group, S3 storage and both operators; a CPU group is added", function()
  if absent then return skip() end
  local v = staged("cluster_create", { cluster_tag = "e2e", instance_type = "ml.g5.12xlarge", instance_count = 2,
    availability_zone = "us-west-2a", features = { training_operator = true, inference_operator = true } },
    "cluster_get_creation_status")
  local r = v.result or {}
  t.eq({ r.cluster, r.hyperpod_cluster }, { "hypd-e2e", "hypd-e2e-hp" })
  local stages = {}
  for _, c in ipairs(v.children or {}) do stages[#stages + 1] = c.tool .. ":" .. c.status end
  table.sort(stages)
  t.eq(stages, { "cluster_configure_dependencies:succeeded", "cluster_create_eks:succeeded",
    "hyperpod_create:succeeded", "hyperpod_update_advanced_features:succeeded", "storage_create_s3:succeeded" },
    "every stage, each a child operation")
  v = staged("hyperpod_add_instance_group", { instance_group = "cpu", instance_type = "ml.m5.2xlarge",
    instance_count = 1, availability_zone = "us-west-2a" }, "hyperpod_get_creation_status")
  local groups = read("hyperpod_list_instance_groups", {})
  local seen = {}
  for _, g in ipairs(groups.instance_groups or groups.groups or {}) do
    seen[#seen + 1] = (g.name or g.instance_group) .. "=" .. tostring(g.instance_type) .. "x" ..
      tostring(g.current_count or g.count)
  end
  table.sort(seen)
  t.eq(seen, { "cpu=ml.m5.2xlargex1", "e2e-ig=ml.g5.12xlargex2" }, json.encode(groups))
  if v.status ~= "succeeded" then absent = "the cluster could not be made" end
end)

local files = {}
t.test("REST: model_download puts Qwen2.5-0.5B-Instruct into the storage; storage_list_contents lists its files", function()
  if absent then return skip() end
  local v = staged("model_download", { model_id = MODEL }, "job_get_status")
  local r = v.result or {}
  t.eq({ r.phase, r.destination, r.path }, { "Succeeded", FOLDER, "/s3/" .. FOLDER })
  t.ok((r.bytes or 0) > 900e6, "about a gigabyte: " .. tostring(r.bytes))
  t.eq(r.avoided_gpu_types, { "ml.g5.12xlarge" }, "placed away from the GPU nodes")
  for _, f in ipairs(r.files or {}) do files[#files + 1] = FOLDER .. "/" .. f.key end
  table.sort(files)
  local listed = {}
  local l = read("storage_list_contents", { claim_name = "s3-claim", prefix = FOLDER .. "/" })
  for _, o in ipairs(l.objects or {}) do listed[#listed + 1] = o.key end
  table.sort(listed)
  t.ok(#files >= 5, #files .. " files")
  t.eq(listed, files, "the files the download wrote")
  local has = {}
  for _, k in ipairs(listed) do has[k:match("[^/]+$")] = true end
  t.ok(has["model.safetensors"] and has["config.json"] and has["tokenizer.json"], json.encode(listed))
  if v.status ~= "succeeded" then absent = "the model could not be downloaded" end
end)

local answer
t.test("REST: a vLLM container serves the downloaded folder from /s3; inference_get follows it to ready", function()
  if absent then return skip() end
  local v = staged("inference_deploy_container", { name = "qwen", engine = "vllm", gpus = 1,
    instance_type = "ml.g5.12xlarge", args = { "--model", "/s3/" .. FOLDER } }, "inference_get")
  local r = v.result or {}
  t.eq({ r.kind, r.engine, r.port, r.service and r.service.name }, { "container", "vllm", 8000, "qwen" })
  local g
  for _ = 1, 10 do
    g = read("inference_get", { name = "qwen", wait_seconds = 60 })
    if g.replicas and g.replicas.ready == 1 then break end
  end
  t.eq(g.replicas, { desired = 1, ready = 1 })
  t.eq(g.service and g.service.endpoints and #g.service.endpoints, 1, "one ready endpoint")
  local logs = table.concat((g.pods and g.pods[1] and g.pods[1].logs) or {}, "\n")
  t.like(logs, "Uvicorn running on http://0%.0%.0%.0:8000")
  t.like(logs, "model='/s3/" .. FOLDER:gsub("%p", "%%%0") .. "'", "the server loaded the folder")
  if g.replicas == nil or g.replicas.ready ~= 1 then absent = "the model server never got ready" end
end)

t.test("REST: inference_call_model answers with text, usage and latency; job_get_logs has the request's lines", function()
  if absent then return skip() end
  answer = read("inference_call_model", { name = "qwen", prompt = "What is the capital of France?",
    max_tokens = 32, timeout_seconds = 30 })
  t.like(answer.answer or "", "^Simulated answer from /s3/" .. FOLDER:gsub("%p", "%%%0"))
  t.eq(answer.model, "/s3/" .. FOLDER, "vLLM names the model by its path")
  t.ok((answer.latency_ms or 0) > 0, "a latency: " .. tostring(answer.latency_ms))
  t.ok(answer.usage and answer.usage.completion_tokens > 0 and answer.usage.completion_tokens <= 32,
    json.encode(answer.usage))
  t.like(answer.id or "", "^chatcmpl%-")
  local l = read("job_get_logs", { kind = "inference", name = "qwen", tail = 20 })
  local text = {}
  for _, line in ipairs(l.lines or {}) do
    t.like(line.pod or "", "^qwen%-", "every line names its pod")
    text[#text + 1] = line.line
  end
  text = table.concat(text, "\n")
  t.ok(text:find("Received request " .. tostring(answer.id), 1, true), "the request's id in the log: " .. text)
  t.like(text, "\"POST /v1/chat/completions HTTP/1%.1\" 200 OK")
end)

-- MCP over HTTP
local sessions = {} -- by token
local function mcp(method, params, id, token)
  token = token or admin
  local resp = assert(http.request { method = "POST", url = url .. "/mcp", timeout = 120,
    headers = { authorization = "Bearer " .. token, ["content-type"] = "application/json",
      accept = "application/json, text/event-stream", ["mcp-protocol-version"] = "2025-11-25",
      ["mcp-session-id"] = sessions[token] },
    body = json.encode { jsonrpc = "2.0", id = id, method = method, params = params } })
  sessions[token] = sessions[token] or resp.headers["mcp-session-id"]
  return resp.status, resp.body ~= "" and json.decode(resp.body) or nil
end
local function mcp_call(name, args, id)
  local _, msg = mcp("tools/call", { name = name, arguments = args }, id)
  t.ok(msg and msg.result and not msg.result.isError, name .. " over MCP: " .. json.encode(msg))
  return msg and msg.result and msg.result.structuredContent or {}
end

local JOB = "e2e-train"

t.test("guardrails: a read token reads (inference, logs, job status, metrics, a test prompt) but may not deploy, " ..
  "download, scale or delete; an operate token may not destroy", function()
  if absent then return skip() end
  local reader, operator = tokens.read, tokens.operate
  t.ok(reader and operator, "the tokens")
  -- reads
  local list = read("inference_list", {}, reader)
  local names = {}
  for _, d in ipairs(list.deployments or list.items or {}) do names[#names + 1] = d.name .. ":" .. d.kind end
  t.eq(names, { "qwen:container" }, json.encode(list))
  t.eq(read("inference_get", { name = "qwen" }, reader).replicas, { desired = 1, ready = 1 })
  t.eq(#(read("job_get_logs", { kind = "inference", name = "qwen", tail = 3 }, reader).lines or {}), 3)
  -- the download's Job: under the virtual clock its day of ttlSecondsAfterFinished may be over already
  local code, body = rest("job_get_status", { name = "hf-download-qwen-qwen2-5-0-5b-instruct" }, reader)
  t.ok(code == 200 and body.phase == "Succeeded" or code == 404 and body.error.message:find("deleted a day after"),
    "job_get_status with a read token: " .. code .. " " .. json.encode(body))
  t.like(read("inference_call_model", { name = "qwen", prompt = "hi", max_tokens = 4 }, reader).answer or "",
    "^Simulated answer")
  code, body = rest("training_get_metrics", { name = "nope" }, reader)
  t.ok(code ~= 403 and code ~= 401, "training_get_metrics is a read: " .. code .. " " .. json.encode(body))
  -- mutations a read token may not make: 403 before anything is started
  local before = #(read("operation_list", { limit = 100 }).operations or {})
  for _, c in ipairs {
    { "model_download", { model_id = MODEL } },
    { "inference_deploy_container", { name = "nope", engine = "vllm", gpus = 1, instance_type = "ml.g5.12xlarge" } },
    { "inference_scale", { name = "qwen", replicas = 0 } },
    { "inference_delete", { name = "qwen" } },
    { "training_submit", { recipe = "pytorch-torchrun", params = { job_name = "nope", instance_type = "ml.g5.12xlarge",
      script = "scripts/train.py", replicas = 1 } } },
    { "training_delete_job", { name = "nope" } },
  } do
    code, body = rest(c[1], c[2], reader)
    t.eq(code, 403, c[1] .. " with a read token: " .. json.encode(body))
    t.eq(body and body.error and body.error.code, "FORBIDDEN", c[1])
    t.like(body and body.error and body.error.message or "", "needs a token with scope", c[1])
  end
  -- an operate token mutates but may not destroy
  for _, c in ipairs { { "inference_delete", { name = "qwen" } }, { "training_delete_job", { name = "nope" } },
    { "job_delete", { name = "hf-download-qwen-qwen2-5-0-5b-instruct" } } } do
    code, body = rest(c[1], c[2], operator)
    t.eq(code, 403, c[1] .. " with an operate token: " .. json.encode(body))
    t.like(body and body.error and body.error.message or "", "scope admin", c[1])
  end
  -- the same over MCP: the call is an error result naming the scope
  mcp("initialize", { protocolVersion = "2025-11-25", capabilities = json.object(),
    clientInfo = { name = "e2e-reader", version = "1" } }, 1, reader)
  local _, msg = mcp("tools/call", { name = "inference_delete", arguments = { name = "qwen" } }, 2, reader)
  local res = msg and msg.result or {}
  t.eq(res.isError, true, "an error result: " .. json.encode(msg))
  t.eq(res.structuredContent and res.structuredContent.error and res.structuredContent.error.code, "FORBIDDEN")
  t.eq(#(read("operation_list", { limit = 100 }).operations or {}), before, "no operation was started")
  t.eq(read("inference_get", { name = "qwen" }, reader).replicas, { desired = 1, ready = 1 }, "qwen is untouched")
end)

t.test("MCP: tools/call training_submit (two nodes of four GPUs, one GPU busy serving) answers an operation; " ..
  "operation_get follows it: the job is queued, Pending with the scheduler's reason", function()
  if absent then return skip() end
  local code = mcp("initialize", { protocolVersion = "2025-11-25", capabilities = json.object(),
    clientInfo = { name = "e2e", version = "1" } }, 1)
  t.eq(code, 200)
  mcp("notifications/initialized", nil, nil)
  local params = json.object()
  params.job_name, params.instance_type, params.script, params.replicas = JOB, "ml.g5.12xlarge", "scripts/train.py", 2
  local acc = mcp_call("training_submit", { recipe = "pytorch-torchrun", params = params }, 2)
  t.like(acc.operation_id or "", "^op%-%x+$")
  t.eq(acc.status_tool, "training_get_job")
  local v
  for i = 1, 20 do
    v = mcp_call("operation_get", { operation_id = acc.operation_id, wait_seconds = 300 }, 2 + i)
    if v.status ~= "running" then break end
  end
  t.eq(v.status, "succeeded", json.encode(v.error))
  t.eq(v.frontend, "mcp", "the operation says it came over MCP")
  local r = v.result or {}
  t.eq({ r.name, r.kind, r.phase }, { JOB, "HyperPodPyTorchJob", "Pending" })
  t.like(r.pending_reason or "", "Insufficient nvidia%.com/gpu")
  if v.status ~= "succeeded" then absent = "the training job could not be submitted" end
end)

t.test("/ws: a read token follows the queued job; deleting the deployment (admin) frees the GPU, the job runs and " ..
  "its lines arrive in order until logs.end completed; training_get_job says Completed", function()
  if absent then return skip() end
  local out = dir .. "/ws.json"
  local spec = json.encode { token = tokens.read, seconds = 120, connections = { { follows = {
    { type = "logs.follow", id = "train", kind = "training_job", name = JOB, tail = 1000 } } } } }
  local port = url:match(":(%d+)$")
  os.execute(string.format("python3 tests/tools/ws_logs_client.py %s %s %s %s >%s.log 2>&1 &", port, H.quote(out),
    H.quote(out .. ".ready"), H.quote(spec), H.quote(out)))
  for _ = 1, 600 do
    if H.read(out .. ".ready") then break end
    os.execute("sleep 0.05")
  end
  t.ok(H.read(out .. ".ready"), "the follow is open")
  local code, body = rest("inference_delete", { name = "qwen" })
  t.ok(code == 200 or code == 202, "admin deletes qwen: " .. code .. " " .. json.encode(body))
  if code == 202 then t.eq(follow(body.operation_id).status, "succeeded") end
  code, body = rest("inference_get", { name = "qwen" }, tokens.read)
  t.eq({ code, body and body.error and body.error.code }, { 404, "NOT_FOUND" }, json.encode(body))
  for _ = 1, 1200 do
    if H.read(out) then break end
    os.execute("sleep 0.1")
  end
  local r = json.decode(H.read(out) or "{}") or {}
  local c = (r.connections or {})[1] or {}
  t.eq(c.error, nil, "the client ran: " .. tostring(H.read(out .. ".log")))
  local lines, ends, seen, dup, steps = {}, {}, {}, 0, {}
  for _, m in ipairs(c.messages or {}) do
    if m.type == "logs.line" and m.id == "train" then
      lines[#lines + 1] = m.line
      local key = m.pod .. "|" .. m.time .. "|" .. m.line
      if seen[key] then dup = dup + 1 end
      seen[key] = true
      t.like(m.pod or "", "^e2e%-train%-pod%-[01]$")
      local rank, step = m.line:match("^%[rank (%d+)%] step (%d+)/")
      if rank then
        steps[rank] = steps[rank] or {}
        steps[rank][#steps[rank] + 1] = tonumber(step)
      end
    elseif m.type == "logs.end" and m.id == "train" then
      ends[#ends + 1] = m
    elseif m.type == "error" then
      t.ok(false, "an error: " .. json.encode(m))
    end
  end
  t.eq(dup, 0, "no duplicates")
  t.like(table.concat(lines, "\n"), "hyperpodrun .*/s3/scripts/train%.py")
  local want = {}
  for i = 1, 20 do want[i] = i end
  t.eq(steps["0"], want, "rank 0's steps, in order: " .. json.encode(lines))
  t.eq(#ends, 1, "one logs.end")
  t.eq(ends[1] and ends[1].reason, "completed", json.encode(ends[1]))
  local g
  for _ = 1, 10 do
    g = read("training_get_job", { name = JOB, wait_seconds = 60 })
    if g.phase == "Completed" or g.phase == "Failed" then break end
  end
  t.eq(g.phase, "Completed", json.encode(g.conditions))
  t.eq({ g.restarts, g.max_retries }, { 0, 5 })
  -- the recipe's cleanPodPolicy None: the finished pods stay, and so do
  -- their logs, as Kubernetes keeps a terminated container's log
  local code2, b2 = rest("job_get_logs", { kind = "training_job", name = JOB, tail = 50 }, tokens.read)
  t.eq(code2, 200, json.encode(b2))
  t.eq(b2 and b2.finished, true, "the job has ended")
  local last = {}
  for _, l in ipairs(b2 and b2.lines or {}) do last[#last + 1] = l.line end
  t.like(table.concat(last, "\n"), "%[rank 0%] Training completed: 20 steps", "its last lines are readable")
end)

t.test("REST: a JumpStart model deployed on the freed node answers inference_call_model, and boto3's " ..
  "InvokeEndpoint on its SageMaker endpoint once its model has loaded", function()
  if absent then return skip() end
  local v = staged("inference_deploy_jumpstart", { name = "llama", model_id = "meta-textgeneration-llama-3-2-1b-instruct",
    instance_type = "ml.g5.12xlarge", accept_eula = true, endpoint_name = "llama-sm" })
  local r = v.result or {}
  t.eq({ r.kind, r.state }, { "JumpStartModel", "DeploymentComplete" })
  local a, code
  for _ = 1, 60 do
    code, a = rest("inference_call_model", { name = "llama", prompt = "Say hello.", max_tokens = 8 })
    if code == 200 then break end
    os.execute("sleep 0.1")
  end
  t.eq(code, 200, json.encode(a))
  t.ok(type(a.answer) == "string" and #a.answer > 0, json.encode(a))
  local py = "import boto3, json, sys, time\n" ..
    "rt = boto3.client('sagemaker-runtime')\n" ..
    "for i in range(100):\n" ..
    "    try:\n" ..
    "        r = rt.invoke_endpoint(EndpointName='llama-sm', ContentType='application/json',\n" ..
    "            Body=json.dumps({'inputs': 'Hello', 'parameters': {'max_new_tokens': 8}}))\n" ..
    "        print(json.dumps({'body': r['Body'].read().decode(), 'variant': r.get('InvokedProductionVariant')}))\n" ..
    "        sys.exit(0)\n" ..
    "    except rt.exceptions.ModelError as e:\n" ..
    "        time.sleep(0.1)\n" ..
    "print('still ModelError'); sys.exit(1)\n"
  H.write(dir .. "/invoke.py", py)
  local rc, out, err = H.with_env(sandbox_env, dir, "python3 " .. H.quote(dir .. "/invoke.py"))
  t.eq(rc, 0, tostring(out) .. tostring(err))
  local got = json.decode(out or "null") or {}
  local g = json.decode(got.body or "null") or {}
  g = g[1] or g
  t.ok(type(g.generated_text) == "string" and #g.generated_text > 0, "boto3 gets generated text: " .. tostring(out))
  t.eq(got.variant, "AllTraffic")
  code = rest("inference_delete", { name = "llama" })
  t.ok(code == 200 or code == 202, "deleted")
end)
