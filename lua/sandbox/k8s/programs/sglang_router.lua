-- sandbox.k8s.programs.sglang_router: the SGLang router, `python -m
-- sglang_router.launch_router` (any image), on --port (default 30000) and
-- its Prometheus metrics on --prometheus-port (default 29000). Workers come
-- from --worker-urls (pod IPs or Service names) or, with
-- --service-discovery, from the Ready pods matching --selector k=v ... in
-- --service-discovery-namespace (all namespaces without it), reached on
-- --service-discovery-port (default 80) through the pod network
-- (sandbox.k8s.proxy dial_ip). --policy picks one per request:
-- cache_aware (default: the worker whose earlier requests share the
-- longest prefix, above --cache-threshold 0.3, else the one that has seen
-- the least text; the least loaded when load is out of balance past
-- --balance-abs-threshold 64 and --balance-rel-threshold 1.5),
-- round_robin, random, power_of_two. The worker's answer is passed back;
-- no worker is 503, a worker that refuses is 502. /health, /liveness,
-- /readiness and /workers answer as the router's own.
local core = require "hypd.core"
local json = require "hypd.json"
local ms = require "sandbox.k8s.programs.model_server"

local M = {}
M.LOAD = 2 -- simulated seconds to listen
M.PORT, M.METRICS_PORT = 30000, 29000

local U = ms.util
local opt, opts, flag, stamp, state, reply = U.opt, U.opts, U.flag, U.stamp, U.state, U.reply

-- config(c) -> the router's options | nil (not the router)
function M.config(c)
  local ws = U.words(c)
  if not table.concat(ws, " "):find("sglang_router.launch_router", 1, true) then return nil end
  local cfg = { kind = "router", port = tonumber(opt(ws, "--port") or "") or M.PORT }
  cfg.policy = opt(ws, "--policy") or "cache_aware"
  cfg.worker_urls = opts(ws, "--worker-urls")
  cfg.discovery = flag(ws, "--service-discovery")
  cfg.selector = {}
  for _, kv in ipairs(opts(ws, "--selector")) do
    local k, v = kv:match("^([^=]+)=(.*)$")
    if k then cfg.selector[k] = v end
  end
  cfg.sd_port = tonumber(opt(ws, "--service-discovery-port") or "") or 80
  cfg.sd_namespace = opt(ws, "--service-discovery-namespace")
  cfg.metrics_port = tonumber(opt(ws, "--prometheus-port") or "") or M.METRICS_PORT
  cfg.cache_threshold = tonumber(opt(ws, "--cache-threshold") or "") or 0.3
  cfg.balance_abs = tonumber(opt(ws, "--balance-abs-threshold") or "") or 64
  cfg.balance_rel = tonumber(opt(ws, "--balance-rel-threshold") or "") or 1.5
  return cfg
end

function M.match(_, c) return M.config(c) ~= nil end

function M.ports(_, c)
  local cfg = M.config(c)
  return cfg and { cfg.port, cfg.metrics_port } or {}
end

function M.lines() return {} end

function M.start(env)
  local cfg = M.config(env.container)
  if not cfg then return end
  env.log(string.format("[Router] %s INFO sglang_router: starting router on 0.0.0.0:%d, policy %s, %s", stamp(),
    cfg.port, cfg.policy, cfg.discovery and "service discovery" or (#cfg.worker_urls .. " worker url(s)")))
  local task = require "hypd.task"
  task.spawn(function()
    task.sleep(M.LOAD / U.speed())
    env.log(string.format("[Router] %s INFO sglang_router: router listening on 0.0.0.0:%d", stamp(), cfg.port))
  end, { name = "sglang router start", daemon = true })
end

-- workers(env, cfg) -> { {url, ip, port, pod} } the router would send to
local function workers(env, cfg)
  local cl = env.cl
  local pr, sr = cl.reg:find("", "v1", "pods"), cl.reg:find("", "v1", "services")
  local out = {}
  local function pod_by_ip(ip)
    for _, p in ipairs(cl:list(pr)) do if (p.status or {}).podIP == ip then return p end end
  end
  if cfg.discovery then
    local sel = require "sandbox.k8s.select"
    for _, p in ipairs(cl:list(pr, cfg.sd_namespace)) do
      local ready = false
      for _, c in ipairs((p.status or {}).conditions or {}) do ready = ready or (c.type == "Ready" and c.status == "True") end
      if ready and p.status.podIP and next(cfg.selector) and sel.match_selector({ matchLabels = cfg.selector },
          p.metadata.labels) and p.metadata.uid ~= env.pod.metadata.uid then
        out[#out + 1] = { url = "http://" .. p.status.podIP .. ":" .. cfg.sd_port, ip = p.status.podIP,
          port = cfg.sd_port, pod = p }
      end
    end
    table.sort(out, function(a, b) return a.pod.metadata.name < b.pod.metadata.name end)
    return out
  end
  for _, u in ipairs(cfg.worker_urls) do
    local host, port = u:match("^https?://([^/:]+):?(%d*)")
    port = tonumber(port) or 80
    local p
    if host and host:match("^%d+%.%d+%.%d+%.%d+$") then
      p = pod_by_ip(host)
    elseif host then
      local name, ns = host:match("^([^.]+)%.?([^.]*)")
      local svc = cl:get(sr, ns ~= "" and ns or env.pod.metadata.namespace, name)
      local ep = svc and cl:get(cl.reg:find("", "v1", "endpoints"), svc.metadata.namespace, name)
      local a = ep and ep.subsets and ep.subsets[1] and ep.subsets[1].addresses and ep.subsets[1].addresses[1]
      if a then p = pod_by_ip(a.ip) end
      for _, sp in ipairs(svc and svc.spec.ports or {}) do
        if sp.port == port and ep and ep.subsets[1].ports then port = ep.subsets[1].ports[1].port end
      end
    end
    if p then out[#out + 1] = { url = u, ip = p.status.podIP, port = port, pod = p } end
  end
  return out
end

local function common_prefix(a, b)
  local n = math.min(#a, #b)
  local i = 0
  while i < n and a:byte(i + 1) == b:byte(i + 1) do i = i + 1 end
  return i
end

-- pick(s, cfg, list, text) -> the worker the policy chooses
local function pick(s, cfg, list, text)
  local function load(w) return (s.workers[w.url] or {}).running or 0 end
  if cfg.policy == "round_robin" then
    s.rr = s.rr + 1
    return list[(s.rr - 1) % #list + 1]
  elseif cfg.policy == "random" then
    return list[math.random(#list)]
  elseif cfg.policy == "power_of_two" then
    local a, b = list[math.random(#list)], list[math.random(#list)]
    return load(a) <= load(b) and a or b
  end
  -- cache_aware: the worker whose earlier requests share the longest prefix
  -- (above cache_threshold of this one), else the one that has seen the
  -- least text; the least loaded when the load is out of balance
  local hi, lo = 0, math.huge
  for _, w in ipairs(list) do hi, lo = math.max(hi, load(w)), math.min(lo, load(w)) end
  if hi - lo > cfg.balance_abs and hi > cfg.balance_rel * lo then
    table.sort(list, function(a, b) return load(a) < load(b) end)
    return list[1]
  end
  local best, best_n, small, small_n = nil, -1, nil, math.huge
  for _, w in ipairs(list) do
    local ws = s.workers[w.url] or {}
    for _, seen in ipairs(ws.texts or {}) do
      local n = common_prefix(seen, text)
      if n > best_n then best, best_n = w, n end
    end
    local size = ws.chars or 0
    if size < small_n then small, small_n = w, size end
  end
  if best and #text > 0 and best_n / #text > cfg.cache_threshold then return best end
  return small
end

local function route(env, cfg, req)
  local s = state(env)
  local path = req.path:gsub("/+$", "")
  if req.port == cfg.metrics_port then
    if path ~= "/metrics" then return { status = 404, headers = { ["content-type"] = "text/plain" }, body = "" } end
    local out = { "# TYPE sgl_router_requests_total counter",
      string.format('sgl_router_requests_total{route="/v1/chat/completions"} %d', s.requests),
      "# TYPE sgl_router_job_queue_depth gauge", string.format("sgl_router_job_queue_depth %d", s.running),
      "# TYPE sgl_router_active_workers gauge", string.format("sgl_router_active_workers %d", #workers(env, cfg)),
      "# TYPE sgl_router_processed_requests_total counter" }
    for url, w in pairs(s.workers) do
      out[#out + 1] = string.format('sgl_router_processed_requests_total{worker="%s"} %d', url, w.processed or 0)
    end
    return { status = 200, headers = { ["content-type"] = "text/plain; version=0.0.4" },
      body = table.concat(out, "\n") .. "\n" }
  end
  local list = workers(env, cfg)
  if path == "/health" or path == "/liveness" or path == "/readiness" then
    if #list == 0 and path == "/readiness" then return reply(503, { status = "not ready", healthy_workers = 0 }) end
    return { status = 200, headers = { ["content-type"] = "text/plain" }, body = "OK" }
  end
  if path == "/workers" or path == "/list_workers" then
    local urls = {}
    for i, w in ipairs(list) do urls[i] = w.url end
    return reply(200, { urls = urls })
  end
  if #list == 0 then
    env.log(string.format("[Router] %s WARN sglang_router: no available workers for %s", stamp(), req.path))
    return reply(503, { error = { message = "No available workers (all circuits open or unhealthy)",
      type = "service_unavailable", code = 503 } })
  end
  local b = json.decode(req.body or "")
  local text = ""
  if type(b) == "table" then
    if type(b.messages) == "table" then
      for _, m in ipairs(b.messages) do text = text .. tostring(m.role) .. ":" .. tostring(m.content) .. "\n" end
    else
      text = tostring(b.prompt or b.text or "")
    end
  end
  local w = pick(s, cfg, list, text)
  local ws = s.workers[w.url] or { texts = {}, chars = 0, processed = 0, running = 0 }
  s.workers[w.url] = ws
  ws.texts[#ws.texts + 1] = text
  if #ws.texts > 64 then table.remove(ws.texts, 1) end
  ws.chars = ws.chars + #text
  s.requests, s.running, ws.running = s.requests + 1, s.running + 1, ws.running + 1
  local out, why = require("sandbox.k8s.proxy").dial_ip(env.cl, w.ip, w.port,
    { method = req.method, path = req.path, query = req.query, headers = req.headers, body = req.body,
      peer = (env.pod.status or {}).podIP })
  s.running, ws.running = s.running - 1, ws.running - 1
  ws.processed = ws.processed + 1
  if not out then
    env.log(string.format("[Router] %s ERROR sglang_router: request to %s failed: %s", stamp(), w.url, why))
    return reply(502, { error = { message = "Failed to send request to worker " .. w.url .. ": " .. why,
      type = "bad_gateway", code = 502 } })
  end
  env.log(string.format("[Router] %s INFO sglang_router: %s %s -> %s (policy %s) %d", stamp(), req.method, req.path,
    w.url, cfg.policy, out.status))
  return out
end


function M.http(env, req)
  local cfg = M.config(env.container)
  if not cfg then return nil end
  local up = U.started_at(env.pod, env.container)
  if not up or core.now() < up + M.LOAD / U.speed() then return nil end
  return route(env, cfg, req)
end

return M
