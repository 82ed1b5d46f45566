-- sandbox.k8s.programs.model_server: a simulated LLM server, matched on
-- what a real container runs:
--
--   vllm    `vllm serve MODEL`, `python -m vllm.entrypoints.openai.api_server`,
--           or a vLLM image (vllm/vllm-openai: its entrypoint serves; args only)
--   sglang  `python -m sglang.launch_server`, or an lmsysorg/sglang image with
--           a model argument
--   tgi     `text-generation-launcher`, TGI images (SageMaker's listen on 8080)
--   lmi     DJL LMI images (djl-inference ...-lmi...): SageMaker's contract, 8080
--   tei     text-embeddings-inference (tei images, text-embeddings-router):
--           embeddings only (/embed, /v1/embeddings), no chat
--   openai  any other container that declares a port and names a model
--           (--model, --model-id, --model-path, --served-model-name, or
--           MODEL_ID / HF_MODEL_ID / OPTION_MODEL_ID / MODEL_NAME), and is
--           not a training or download launcher
-- (the SGLang router, sglang_router.launch_router, is programs.sglang_router)
--
-- A server listens on --port or its engine's default (vLLM 8000, SGLang 30000,
-- TGI 80 / 8080, LMI 8080, others their first container
-- port) once its model is loaded (LOAD seconds of simulated time after the
-- container started; before that the proxy's dial is refused). It answers
-- OpenAI-style /v1/models, /v1/chat/completions, /v1/completions (not
-- streamed), /health, /ping and /invocations, /metrics (Prometheus text with
-- the engine's metric names; SGLang only with --enable-metrics), with a
-- deterministic simulated answer that depends on the model and the prompt,
-- token counts, and a simulated latency (prefill plus per-token decode time);
-- each request writes the engine's log lines.
local core = require "hypd.core"
local json = require "hypd.json"
local sys = require "hypd.sys"
local task = require "hypd.task"

local M = {}
M.LOAD = { vllm = 20, sglang = 20, tgi = 20, lmi = 20, tei = 10, openai = 10 } -- simulated seconds to listen
M.DEFAULT_PORT = { vllm = 8000, sglang = 30000, tgi = 80, lmi = 8080, tei = 80 }
M.TTFT, M.PER_PROMPT_TOKEN, M.PER_TOKEN = 0.02, 0.0002, 0.012 -- simulated seconds

local function speed()
  local ok, sb = pcall(require, "sandbox")
  return ok and tonumber(sb.speed) or 1
end

-- words(c) -> command and args as tokens (a shell string split on spaces)
local function words(c)
  local out = {}
  for _, list in ipairs { c.command or {}, c.args or {} } do
    for _, w in ipairs(list) do
      for t in tostring(w):gmatch("%S+") do out[#out + 1] = (t:gsub("^[\"']+", ""):gsub("[\"';&|]+$", "")) end
    end
  end
  return out
end

M.words = words

-- opt(ws, name) -> the value of --name (--name v | --name=v), or nil
local function opt(ws, name)
  for i, w in ipairs(ws) do
    if w == name then return ws[i + 1] end
    local v = w:match("^" .. name:gsub("%-", "%%-") .. "=(.*)$")
    if v then return v end
  end
end

-- opts(ws, name) -> every value after --name up to the next option
local function opts(ws, name)
  local out = {}
  for i, w in ipairs(ws) do
    if w == name then
      for j = i + 1, #ws do
        if ws[j]:sub(1, 2) == "--" then break end
        out[#out + 1] = ws[j]
      end
    end
  end
  return out
end

local function flag(ws, name)
  for _, w in ipairs(ws) do if w == name then return true end end
  return false
end

local function env_of(c, name)
  for _, e in ipairs(c.env or {}) do
    if e.name == name and e.value ~= nil then return tostring(e.value) end
  end
end

-- what launches training or downloads, never a model server
local NOT_SERVING = { "torchrun", "hyperpodrun", "swift sft", "swift rlhf", "swift pt", "llamafactory-cli",
  "accelerate launch", "deepspeed ", "torch.distributed", "verl.trainer", "ray job", "hf download",
  "huggingface-cli download", "snapshot_download" }

-- engine(c) -> kind, tokens | nil
local function engine(c)
  local ws = words(c)
  local cmd = " " .. table.concat(ws, " ") .. " "
  local image = (c.image or ""):lower()
  local repo = image:gsub("[:@].*$", "")
  local function has(s) return cmd:find(s, 1, true) ~= nil end
  if has("sglang_router.launch_router") then return nil end -- the router: programs.sglang_router
  if has("sglang.launch_server") then return "sglang", ws end
  if has(" vllm serve ") or has("vllm.entrypoints.openai.api_server") then return "vllm", ws end
  if has("text-generation-launcher") then return "tgi", ws end
  if has("text-embeddings-router") then return "tei", ws end
  for _, s in ipairs(NOT_SERVING) do if has(s) then return nil end end
  local bare = #(c.command or {}) == 0 -- the image's entrypoint runs
  local model = opt(ws, "--model") or opt(ws, "--model-path") or opt(ws, "--model-id")
    or opt(ws, "--served-model-name")
  if repo:find("vllm", 1, true) and (bare or model) then return "vllm", ws end
  if repo:find("sglang", 1, true) and model then return "sglang", ws end
  if repo:find("tgi", 1, true) or repo:find("text-generation-inference", 1, true) then return "tgi", ws end
  if repo:find("/tei$") or repo:find("^tei$") or repo:find("text-embeddings-inference", 1, true) then
    return "tei", ws
  end
  if repo:find("djl-inference", 1, true) or image:find("lmi", 1, true) then return "lmi", ws end
  local named = model or env_of(c, "MODEL_ID") or env_of(c, "HF_MODEL_ID") or env_of(c, "OPTION_MODEL_ID")
    or env_of(c, "MODEL_NAME")
  if named and c.ports and c.ports[1] then return "openai", ws end
  return nil
end

-- config(c) -> {kind, port, model, ...} | nil: what the server would run with
function M.config(c)
  local kind, ws = engine(c)
  if not kind then return nil end
  local cfg = { kind = kind }
  local port = tonumber(opt(ws, "--port") or "")
  if not port and kind == "openai" then port = tonumber(env_of(c, "PORT") or "") end
  if not port and (kind == "tgi" or kind == "tei") then port = tonumber(env_of(c, "PORT") or "") end
  if not port and (kind == "tgi" or kind == "tei") and (c.image or ""):find("dkr.ecr", 1, true) then
    port = 8080 -- SageMaker's TGI and TEI containers
  end
  if not port and kind == "openai" then port = tonumber(c.ports[1].containerPort) end
  cfg.port = port or M.DEFAULT_PORT[kind]
  local served = opts(ws, "--served-model-name")[1]
  if kind == "vllm" then
    local pos
    for i, w in ipairs(ws) do
      if w == "serve" and ws[i - 1] and ws[i - 1]:match("vllm$") and ws[i + 1] and ws[i + 1]:sub(1, 2) ~= "--" then
        pos = ws[i + 1]
      end
    end
    cfg.model = served or opt(ws, "--model") or pos or "Qwen/Qwen3-0.6B" -- vLLM's default model
    cfg.max_running = tonumber(opt(ws, "--max-num-seqs") or "") or 256
    cfg.log_requests = not flag(ws, "--disable-log-requests")
    cfg.metrics = true
  elseif kind == "sglang" then
    cfg.model = served or opt(ws, "--model-path") or opt(ws, "--model") or "?"
    cfg.max_running = tonumber(opt(ws, "--max-running-requests") or "") or 256
    cfg.log_requests = flag(ws, "--log-requests")
    cfg.metrics = flag(ws, "--enable-metrics")
  else
    cfg.model = served or opt(ws, "--model-id") or opt(ws, "--model") or opt(ws, "--model-path")
      or env_of(c, "MODEL_ID") or env_of(c, "HF_MODEL_ID") or env_of(c, "OPTION_MODEL_ID")
      or env_of(c, "MODEL_NAME") or (kind == "lmi" and "lmi" or kind == "tgi" and "tgi" or "model")
    cfg.max_running = 128
    cfg.log_requests = kind ~= "lmi"
    cfg.metrics = true
  end
  return cfg
end

function M.match(_, c) return engine(c) ~= nil end

function M.ports(_, c)
  local cfg = M.config(c)
  if not cfg then return {} end
  return { cfg.port }
end

-- parse_time("2026-01-01T00:00:00Z") -> seconds since the epoch
local function parse_time(s)
  local y, mo, d, h, mi, sec = tostring(s):match("^(%d+)-(%d+)-(%d+)T(%d+):(%d+):(%d+)")
  if not y then return nil end
  y, mo, d = tonumber(y), tonumber(mo), tonumber(d)
  if mo <= 2 then y, mo = y - 1, mo + 12 end
  local days = 365 * y + y // 4 - y // 100 + y // 400 + (153 * (mo - 3) + 2) // 5 + d - 719469
  return days * 86400 + tonumber(h) * 3600 + tonumber(mi) * 60 + tonumber(sec)
end

local function started_at(pod, c)
  for _, s in ipairs((pod.status or {}).containerStatuses or {}) do
    if s.name == c.name and s.state and s.state.running then return parse_time(s.state.running.startedAt) end
  end
end

local function stamp() return os.date("!%Y-%m-%d %H:%M:%S", math.floor(core.now())) end
local function vstamp() return os.date("!%m-%d %H:%M:%S", math.floor(core.now())) end

-- state(env, cfg) -> this server's counters (kept per pod in the cluster's memory)
local function state(env)
  local mem = env.ctl:memo("model_server")
  local k = env.pod.metadata.uid .. "/" .. env.container.name
  local s = mem[k]
  if not s then
    s = { requests = 0, ok = 0, errors = 0, prompt = 0, gen = 0, running = 0, waiting = 0, latency = 0, ttft = 0,
      hist = {}, seq = 0, rr = 0, workers = {}, started = core.now() }
    mem[k] = s
  end
  return s
end

-- lines(pod, c) -> none of the kubelet's generic start lines: start()
-- prints the engine's own, and "listening" only once the model is loaded
function M.lines() return {} end

-- start(env): the engine's start-up lines, then "ready" once loaded
function M.start(env)
  local cfg = M.config(env.container)
  if not cfg then return end
  local log = env.log
  if cfg.kind == "vllm" then
    log(string.format("INFO %s [api_server.py:1090] vLLM API server version 0.9.2", vstamp()))
    log(string.format("INFO %s [api_server.py:1091] args: model='%s', port=%d", vstamp(), cfg.model, cfg.port))
  elseif cfg.kind == "sglang" then
    log(string.format("[%s] server_args=ServerArgs(model_path='%s', port=%d)", stamp(), cfg.model, cfg.port))
  else
    log(string.format("%s model server (%s) loading %s", stamp(), cfg.kind, cfg.model))
  end
  local load = (M.LOAD[cfg.kind] or 10) / speed()
  task.spawn(function()
    task.sleep(load)
    if cfg.kind == "vllm" then
      log(string.format("INFO %s [api_server.py:1127] Starting vLLM API server 0 on http://0.0.0.0:%d", vstamp(),
        cfg.port))
      log("INFO:     Started server process [1]")
      log("INFO:     Waiting for application startup.")
      log("INFO:     Application startup complete.")
      log(string.format("INFO:     Uvicorn running on http://0.0.0.0:%d (Press CTRL+C to quit)", cfg.port))
    elseif cfg.kind == "sglang" then
      log(string.format("[%s] INFO:     Uvicorn running on http://0.0.0.0:%d (Press CTRL+C to quit)", stamp(), cfg.port))
      log(string.format("[%s] The server is fired up and ready to roll!", stamp()))
    else
      log(string.format("model server listening on 0.0.0.0:%d, model %s", cfg.port, cfg.model))
    end
  end, { name = "model server start", daemon = true })
end

-- tokens(text) -> a rough token count: words and punctuation, as a BPE counts them
local function tokens(text)
  local n = 0
  for _ in tostring(text or ""):gmatch("[%w']+") do n = n + 1 end
  for _ in tostring(text or ""):gmatch("[^%w%s']") do n = n + 1 end
  return n
end

local VOCAB = { "the", "model", "answers", "with", "a", "short", "simulated", "reply", "about", "your", "question",
  "which", "depends", "on", "its", "words", "and", "so", "the", "same", "prompt", "always", "gets", "this", "text",
  "served", "by", "a", "sandbox", "engine", "that", "runs", "no", "weights", "but", "counts", "tokens", "as",
  "a", "real", "server", "would", "report", "them", "in", "usage", "here", "now" }

-- compose(model, prompt, max_tokens) -> text, completion_tokens, finish_reason
function M.compose(model, prompt, max_tokens)
  local h = sys.digest("sha256", tostring(model) .. "\0" .. tostring(prompt), "raw")
  local quoted = tostring(prompt):gsub("%s+", " "):sub(1, 80)
  local parts = { "Simulated answer from " .. tostring(model) .. " to \"" .. quoted .. "\":" }
  local n = 12 + h:byte(1) % 24
  for i = 1, n do
    local b = h:byte((i % #h) + 1) + i * 7
    parts[#parts + 1] = VOCAB[(b % #VOCAB) + 1]
  end
  local text = table.concat(parts, " ") .. "."
  local count = tokens(text)
  if max_tokens and count > max_tokens then
    -- the first max_tokens tokens (a word, or one punctuation mark, with its leading space)
    local i, used = 1, 0
    while used < max_tokens do
      local _, e = text:find("^%s*[%w']+", i)
      if not e then _, e = text:find("^%s*[^%w%s']", i) end
      i, used = e + 1, used + 1
    end
    return text:sub(1, i - 1), used, "length"
  end
  return text, count, "stop"
end

local JSONH = { ["content-type"] = "application/json" }
local function reply(status, obj) return { status = status, headers = JSONH, body = json.encode(obj) } end

local function oai_error(cfg, status, typ, message)
  if cfg.kind == "vllm" then
    return reply(status, { object = "error", message = message, type = typ, param = json.null, code = status })
  end
  return reply(status, { error = { message = message, type = typ, code = status } })
end

local function access_log(env, cfg, req, status)
  local text = string.format('INFO:     %s:%d - "%s %s HTTP/1.1" %d %s', req.peer or "10.0.0.2",
    40000 + (state(env).requests % 20000), req.method, req.path, status, status < 400 and "OK" or "")
  if cfg.kind == "sglang" then text = "[" .. stamp() .. "] " .. text end
  env.log((text:gsub("%s+$", "")))
end

-- prompt_of(body, chat) -> the prompt text, prompt token count | nil, why
local function prompt_of(body, chat)
  if chat then
    if type(body.messages) ~= "table" or #body.messages == 0 then return nil, "messages: Field required" end
    local texts, n = {}, 0
    for _, m in ipairs(body.messages) do
      local content = m.content
      if type(content) == "table" then
        local bits = {}
        for _, part in ipairs(content) do if type(part) == "table" and part.text then bits[#bits + 1] = part.text end end
        content = table.concat(bits, " ")
      end
      texts[#texts + 1] = tostring(m.role or "user") .. ": " .. tostring(content or "")
      n = n + tokens(content) + 4
    end
    return table.concat(texts, "\n"), n + 3
  end
  local p = body.prompt
  if type(p) == "table" then p = p[1] end
  if type(p) ~= "string" then return nil, "prompt: Field required" end
  return p, tokens(p) + 1
end

-- generate(env, cfg, body, chat) -> the OpenAI answer (after its simulated latency)
local function generate(env, cfg, body, chat)
  local s = state(env)
  local prompt, ptok = prompt_of(body, chat)
  if not prompt then return oai_error(cfg, 400, "BadRequestError", ptok) end
  if body.model ~= nil and body.model ~= cfg.model then
    return oai_error(cfg, 404, "NotFoundError", "The model `" .. tostring(body.model) .. "` does not exist.")
  end
  local max_tokens = tonumber(body.max_tokens or body.max_completion_tokens) or (not chat and 16 or nil)
  if max_tokens and max_tokens < 1 then
    return oai_error(cfg, 400, "BadRequestError", "max_tokens must be at least 1, got " .. tostring(max_tokens) .. ".")
  end
  local last = prompt
  if chat then
    local m = body.messages[#body.messages]
    last = type(m.content) == "string" and m.content or prompt
  end
  local text, ctok, finish = M.compose(cfg.model, last, max_tokens)
  s.seq = s.seq + 1
  local id = (chat and "chatcmpl-" or "cmpl-") .. sys.digest("sha256", env.pod.metadata.uid .. s.seq .. prompt,
    "hex"):sub(1, 32)
  -- the queue: requests beyond the engine's running limit wait
  local t0 = core.now()
  -- the metrics change: anything that reads them (the sandbox's KEDA) looks again
  local function changed() env.ctl:enqueue("metrics") end
  s.waiting = s.waiting + 1
  changed()
  while s.running >= cfg.max_running do task.sleep(0.05 / speed()) end
  s.waiting, s.running = s.waiting - 1, s.running + 1
  if cfg.log_requests then
    if cfg.kind == "sglang" then
      env.log(string.format("[%s] Receive: obj=GenerateReqInput(rid='%s', text='%s')", stamp(), id,
        prompt:sub(1, 60):gsub("\n", " ")))
    else
      env.log(string.format("INFO %s [logger.py:43] Received request %s: prompt: '%s', params: " ..
        "SamplingParams(temperature=%s, max_tokens=%s)", vstamp(), id, prompt:sub(1, 60):gsub("\n", "\\n"),
        tostring(body.temperature or 1.0), tostring(max_tokens or "None")))
    end
  end
  if cfg.kind == "sglang" then
    env.log(string.format("[%s] Prefill batch. #new-seq: 1, #new-token: %d, #cached-token: 0, #running-req: %d, " ..
      "#queue-req: %d", stamp(), ptok, s.running - 1, s.waiting))
  end
  local ttft = M.TTFT + ptok * M.PER_PROMPT_TOKEN
  task.sleep((ttft + ctok * M.PER_TOKEN) / speed())
  s.running = s.running - 1
  local took = core.now() - t0
  changed()
  s.requests, s.ok = s.requests + 1, s.ok + 1
  s.prompt, s.gen = s.prompt + ptok, s.gen + ctok
  s.latency, s.ttft = s.latency + took, s.ttft + ttft
  for _, le in ipairs { 0.3, 0.5, 1, 2.5, 5, 10, 30, 60 } do
    if took <= le then s.hist[le] = (s.hist[le] or 0) + 1 end
  end
  if cfg.kind == "sglang" then
    env.log(string.format("[%s] Decode batch. #running-req: %d, #token: %d, gen throughput (token/s): %.2f, " ..
      "#queue-req: %d", stamp(), s.running + 1, ptok + ctok, ctok / math.max(took, 1e-3), s.waiting))
  end
  local usage = { prompt_tokens = ptok, completion_tokens = ctok, total_tokens = ptok + ctok }
  local created = math.floor(core.now())
  if chat then
    return reply(200, { id = id, object = "chat.completion", created = created, model = cfg.model,
      choices = { { index = 0, message = { role = "assistant", content = text }, finish_reason = finish,
        logprobs = json.null } }, usage = usage })
  end
  return reply(200, { id = id, object = "text_completion", created = created, model = cfg.model,
    choices = { { index = 0, text = text, finish_reason = finish, logprobs = json.null } }, usage = usage })
end

local function metric_lines(cfg, s, pod)
  local out = {}
  local function add(name, typ, help, value, labels)
    out[#out + 1] = "# HELP " .. name .. " " .. help
    out[#out + 1] = "# TYPE " .. name .. " " .. typ
    out[#out + 1] = string.format("%s{%s} %s", name, labels, tostring(value))
  end
  local model = string.format('model_name="%s"', cfg.model)
  local lat = function(prefix)
    local name = prefix .. "e2e_request_latency_seconds"
    out[#out + 1] = "# HELP " .. name .. " Histogram of end to end request latency in seconds."
    out[#out + 1] = "# TYPE " .. name .. " histogram"
    for _, le in ipairs { 0.3, 0.5, 1, 2.5, 5, 10, 30, 60 } do
      out[#out + 1] = string.format('%s_bucket{le="%s",%s} %d', name, tostring(le), model, s.hist[le] or 0)
    end
    out[#out + 1] = string.format('%s_bucket{le="+Inf",%s} %d', name, model, s.ok)
    out[#out + 1] = string.format("%s_sum{%s} %.6f", name, model, s.latency)
    out[#out + 1] = string.format("%s_count{%s} %d", name, model, s.ok)
  end
  if cfg.kind == "vllm" then
    add("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.", s.running, model)
    add("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", s.waiting, model)
    add("vllm:gpu_cache_usage_perc", "gauge", "GPU KV-cache usage. 1 means 100 percent usage.",
      string.format("%.4f", math.min(1, s.running / cfg.max_running)), model)
    add("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.", s.prompt, model)
    add("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.", s.gen, model)
    add("vllm:request_success_total", "counter", "Count of successfully processed requests.", s.ok,
      'finished_reason="stop",' .. model)
    lat("vllm:")
  elseif cfg.kind == "sglang" then
    add("sglang:num_running_reqs", "gauge", "The number of running requests.", s.running, model)
    add("sglang:num_queue_reqs", "gauge", "The number of requests in the waiting queue.", s.waiting, model)
    add("sglang:token_usage", "gauge", "The token usage.", string.format("%.4f", math.min(1, s.running / cfg.max_running)),
      model)
    add("sglang:cache_hit_rate", "gauge", "The prefix cache hit rate.", "0.0", model)
    add("sglang:prompt_tokens_total", "counter", "Number of prefill tokens processed.", s.prompt, model)
    add("sglang:generation_tokens_total", "counter", "Number of generation tokens processed.", s.gen, model)
    add("sglang:num_requests_total", "counter", "Number of requests processed.", s.ok, model)
    lat("sglang:")
  elseif cfg.kind == "tei" then
    add("te_request_count", "counter", "Requests received.", s.requests, "")
    add("te_request_success", "counter", "Requests succeeded.", s.ok, "")
    add("te_queue_size", "gauge", "Requests waiting.", s.waiting, "")
  elseif cfg.kind == "tgi" then
    add("tgi_request_count", "counter", "Requests received.", s.requests, "")
    add("tgi_request_success", "counter", "Requests succeeded.", s.ok, "")
    add("tgi_queue_size", "gauge", "Requests waiting.", s.waiting, "")
    add("tgi_batch_current_size", "gauge", "Requests in the batch.", s.running, "")
  else
    add("model_server_requests_total", "counter", "Requests processed.", s.ok, model)
    add("model_server_requests_running", "gauge", "Requests running.", s.running, model)
    add("model_server_requests_waiting", "gauge", "Requests waiting.", s.waiting, model)
  end
  out[#out + 1] = ""
  return ((table.concat(out, "\n"):gsub("{}", ""))), pod
end

-- embed(env, cfg, body, openai) -> deterministic unit vectors, one per input
local function embed(env, cfg, b, openai)
  local s = state(env)
  local inputs = b.input or b.inputs
  if type(inputs) == "string" then inputs = { inputs } end
  if type(inputs) ~= "table" or #inputs == 0 then
    return reply(422, { error = "Input validation error: `inputs` cannot be empty", error_type = "Validation" })
  end
  local vectors, n = {}, 0
  for i, text in ipairs(inputs) do
    local h = sys.digest("sha256", cfg.model .. "\0" .. tostring(text), "raw")
    local v, norm = {}, 0
    for j = 1, 16 do v[j] = (h:byte(j) - 127.5) / 127.5; norm = norm + v[j] ^ 2 end
    for j = 1, 16 do v[j] = v[j] / math.sqrt(norm) end
    vectors[i] = v
    n = n + tokens(text)
  end
  task.sleep((M.TTFT + n * M.PER_PROMPT_TOKEN) / speed())
  s.requests, s.ok, s.prompt = s.requests + 1, s.ok + 1, s.prompt + n
  if not openai then return reply(200, vectors) end
  local data = {}
  for i, v in ipairs(vectors) do data[i] = { object = "embedding", index = i - 1, embedding = v } end
  return reply(200, { object = "list", data = data, model = cfg.model, usage = { prompt_tokens = n, total_tokens = n } })
end

-- http(env, req) -> the server's answer | nil (not listening yet)
function M.http(env, req)
  local cfg = M.config(env.container)
  if not cfg then return nil end
  local up = started_at(env.pod, env.container)
  if not up or core.now() < up + (M.LOAD[cfg.kind] or 10) / speed() then return nil end
  local s = state(env)
  local path = req.path:gsub("/+$", "")
  if path == "" then path = "/" end
  local method = req.method == "HEAD" and "GET" or req.method
  local out
  local function body()
    local b = json.decode(req.body or "")
    if type(b) ~= "table" then return nil end
    return b
  end
  local ROUTES = {
    ["/health"] = "GET", ["/ping"] = "GET", ["/v1/models"] = "GET", ["/metrics"] = "GET", ["/version"] = "GET",
    ["/v1/chat/completions"] = "POST", ["/v1/completions"] = "POST", ["/invocations"] = "POST",
  }
  if cfg.kind == "sglang" then ROUTES["/generate"], ROUTES["/get_model_info"] = "POST", "GET" end
  if cfg.kind == "tgi" then ROUTES["/generate"], ROUTES["/info"] = "POST", "GET" end
  if cfg.kind == "tei" then
    ROUTES = { ["/health"] = "GET", ["/ping"] = "GET", ["/info"] = "GET", ["/metrics"] = "GET",
      ["/embed"] = "POST", ["/v1/embeddings"] = "POST", ["/invocations"] = "POST" }
  end
  local want = ROUTES[path]
  if not want or (path == "/metrics" and not cfg.metrics) then
    out = cfg.kind == "vllm" and reply(404, { detail = "Not Found" }) or { status = 404,
      headers = { ["content-type"] = "text/plain" }, body = "Not Found" }
  elseif method ~= want then
    out = reply(405, { detail = "Method Not Allowed" })
  elseif path == "/health" or path == "/ping" then
    out = { status = 200, headers = { ["content-type"] = "application/json" }, body = path == "/ping" and "{}" or "" }
  elseif path == "/version" then
    out = reply(200, { version = cfg.kind == "vllm" and "0.9.2" or "0.4.9" })
  elseif path == "/get_model_info" then
    out = reply(200, { model_path = cfg.model, tokenizer_path = cfg.model, is_generation = true })
  elseif path == "/info" then
    out = reply(200, { model_id = cfg.model, max_concurrent_requests = cfg.max_running, version = "2.4.0" })
  elseif path == "/v1/models" then
    out = reply(200, { object = "list", data = { { id = cfg.model, object = "model", created = math.floor(s.started),
      owned_by = cfg.kind == "vllm" and "vllm" or cfg.kind, root = cfg.model, parent = json.null,
      max_model_len = 32768 } } })
  elseif path == "/metrics" then
    out = { status = 200, headers = { ["content-type"] = "text/plain; version=0.0.4; charset=utf-8" },
      body = metric_lines(cfg, s, env.pod) }
  else
    local b = body()
    if not b then
      out = oai_error(cfg, 400, "BadRequestError", "the body is not a JSON object")
    elseif cfg.kind == "tei" then
      out = embed(env, cfg, b, path == "/v1/embeddings")
    elseif path == "/v1/chat/completions" or (path == "/invocations" and b.messages) then
      out = generate(env, cfg, b, true)
    elseif path == "/v1/completions" then
      out = generate(env, cfg, b, false)
    else -- /generate, /invocations: {"inputs"|"text": ..., "parameters"|"sampling_params": {max_new_tokens}}
      local params = b.parameters or b.sampling_params or {}
      local r = generate(env, cfg, { prompt = b.inputs or b.text, max_tokens = params.max_new_tokens or 64 }, false)
      local o = json.decode(r.body)
      if r.status == 200 and cfg.kind == "sglang" then
        r.body = json.encode { text = o.choices[1].text, meta_info = { id = o.id, prompt_tokens = o.usage.prompt_tokens,
          completion_tokens = o.usage.completion_tokens, finish_reason = { type = o.choices[1].finish_reason } } }
      elseif r.status == 200 then
        r.body = json.encode { { generated_text = o.choices[1].text } }
      end
      out = r
    end
    if out.status >= 400 then s.errors = s.errors + 1 end
  end
  if path ~= "/metrics" and path ~= "/health" and path ~= "/ping" then access_log(env, cfg, req, out.status) end
  return out
end

-- what programs.sglang_router shares
M.util = { words = words, opt = opt, opts = opts, flag = flag, speed = speed, started_at = started_at,
  stamp = stamp, state = state, reply = reply }

return M
