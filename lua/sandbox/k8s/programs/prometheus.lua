-- sandbox.k8s.programs.prometheus: a simulated Prometheus server (images
-- prom/prometheus, quay.io/prometheus/prometheus), listening on
-- --web.listen-address (default :9090). It scrapes as the community chart's
-- kubernetes-pods job does: every Running pod annotated
-- prometheus.io/scrape: "true", at prometheus.io/port (else each container
-- port) and prometheus.io/path (default /metrics), through the pod network
-- (sandbox.k8s.proxy dial_ip), adding the labels namespace and pod. It
-- scrapes when asked, so a query sees the simulated servers' current values.
--
-- /api/v1/query (GET or POST form) evaluates an instant vector of one
-- selector, metric{l="v", l!="v", l=~"re", l!~"re"}, bare or inside one of
-- sum, avg, max, min, count; anything else is answered 400 bad_data saying
-- so. /-/healthy and /-/ready answer as Prometheus does.
local core = require "hypd.core"
local json = require "hypd.json"
local regex = require "hypd.regex"

local M = {}
M.AGGREGATIONS = { sum = true, avg = true, max = true, min = true, count = true }

local words = require("sandbox.k8s.programs.model_server").words

function M.match(_, c)
  local repo = tostring(c.image or ""):lower():gsub("[:@].*$", "")
  return repo == "prom/prometheus" or repo:match("/prometheus/prometheus$") ~= nil or repo == "prometheus/prometheus"
end

function M.ports(_, c)
  for _, w in ipairs(words(c)) do
    local p = w:match("^%-%-web%.listen%-address=.-:(%d+)$")
    if p then return { tonumber(p) } end
  end
  return { 9090 }
end

local function form(q) return require("sandbox.k8s.api").parse_query(q) end

-- parse(query) -> {agg, name, matchers = {{label, op, value}}} | nil, why
function M.parse(query)
  local q = tostring(query):gsub("^%s+", ""):gsub("%s+$", "")
  local agg, inner = q:match("^(%a+)%s*%((.*)%)$")
  if agg and not M.AGGREGATIONS[agg] then return nil, "aggregation " .. agg .. " is not evaluated here" end
  if not agg then inner = q end
  inner = inner:gsub("^%s+", ""):gsub("%s+$", "")
  local name, rest = inner:match("^([%a_:][%w_:]*)%s*(.*)$")
  if not name then return nil, "expected a metric name" end
  local out = { agg = agg, name = name, matchers = {} }
  if rest ~= "" then
    local body = rest:match("^{(.*)}$")
    if not body then return nil, "unexpected " .. rest end
    for label, op, value in body:gmatch('%s*([%a_][%w_]*)%s*([=!~]+)%s*"([^"]*)"%s*,?') do
      if op ~= "=" and op ~= "!=" and op ~= "=~" and op ~= "!~" then return nil, "bad matcher " .. op end
      local m = { label = label, op = op, value = value }
      if op == "=~" or op == "!~" then
        local re, err = regex.compile("^(?:" .. value .. ")$")
        if not re then return nil, "bad regex " .. value .. ": " .. tostring(err) end
        m.re = re
      end
      out.matchers[#out.matchers + 1] = m
    end
  end
  return out
end

local function matches(ms, labels)
  for _, m in ipairs(ms) do
    local v = labels[m.label] or ""
    if (m.op == "=" and v ~= m.value) or (m.op == "!=" and v == m.value) or (m.op == "=~" and not m.re:test(v))
        or (m.op == "!~" and m.re:test(v)) then
      return false
    end
  end
  return true
end

-- samples(text, extra) -> {{name, labels, value}} from the Prometheus text format
local function samples(text, extra)
  local out = {}
  for line in tostring(text):gmatch("[^\n]+") do
    if line:sub(1, 1) ~= "#" then
      local name, labels, value = line:match("^([%a_:][%w_:]*)(%b{})%s+(%S+)")
      if not name then name, value = line:match("^([%a_:][%w_:]*)%s+(%S+)") end
      if name and tonumber(value) then
        local l = {}
        for k, v in (labels or ""):gmatch('([%a_][%w_]*)="([^"]*)"') do l[k] = v end
        for k, v in pairs(extra) do l[k] = v end
        out[#out + 1] = { name = name, labels = l, value = tonumber(value) }
      end
    end
  end
  return out
end

-- scrape(cl) -> every sample of the pods the kubernetes-pods job scrapes
local function scrape(cl)
  local proxy = require "sandbox.k8s.proxy"
  local out = {}
  for _, p in ipairs(cl:list(cl.reg:find("", "v1", "pods"))) do
    local ann = p.metadata.annotations or {}
    local st = p.status or {}
    if ann["prometheus.io/scrape"] == "true" and st.phase == "Running" and st.podIP then
      local ports = {}
      if tonumber(ann["prometheus.io/port"]) then
        ports[1] = tonumber(ann["prometheus.io/port"])
      else
        for _, c in ipairs(p.spec.containers or {}) do
          for _, cp in ipairs(c.ports or {}) do ports[#ports + 1] = tonumber(cp.containerPort) end
        end
      end
      for _, port in ipairs(ports) do
        local r = proxy.dial_ip(cl, st.podIP, port, { method = "GET", path = ann["prometheus.io/path"] or "/metrics",
          headers = {}, peer = "prometheus" })
        if r and r.status == 200 then
          for _, s in ipairs(samples(r.body, { namespace = p.metadata.namespace, pod = p.metadata.name })) do
            out[#out + 1] = s
          end
        end
      end
    end
  end
  return out
end

local function reply(status, obj)
  return { status = status, headers = { ["content-type"] = "application/json" }, body = json.encode(obj) }
end

function M.http(env, req)
  local path = req.path:gsub("/+$", "")
  if path == "/-/healthy" then return { status = 200, headers = {}, body = "Prometheus Server is Healthy.\n" } end
  if path == "/-/ready" then return { status = 200, headers = {}, body = "Prometheus Server is Ready.\n" } end
  if path ~= "/api/v1/query" then
    return { status = 404, headers = { ["content-type"] = "text/plain" }, body = "404 page not found\n" }
  end
  local args = form(req.query)
  if req.method == "POST" then for k, v in pairs(form(req.body)) do args[k] = v end end
  if not args.query or args.query == "" then
    return reply(400, { status = "error", errorType = "bad_data", error = 'invalid parameter "query": unknown ' ..
      "position: parse error: no expression found in input" })
  end
  local q, why = M.parse(args.query)
  if not q then
    return reply(400, { status = "error", errorType = "bad_data", error = "invalid parameter \"query\": the sandbox's " ..
      "Prometheus evaluates one selector, bare or in sum, avg, max, min or count: " .. why })
  end
  local now = core.now()
  local hits = {}
  for _, s in ipairs(scrape(env.cl)) do
    if s.name == q.name and matches(q.matchers, s.labels) then hits[#hits + 1] = s end
  end
  local result = json.array()
  if not q.agg then
    for _, s in ipairs(hits) do
      local m = { __name__ = s.name }
      for k, v in pairs(s.labels) do m[k] = v end
      result[#result + 1] = { metric = m, value = { now, tostring(s.value) } }
    end
  elseif #hits > 0 or q.agg == "count" then
    local v = q.agg == "count" and #hits or hits[1].value
    if q.agg ~= "count" then
      local sum = 0
      for _, s in ipairs(hits) do
        sum = sum + s.value
        if q.agg == "max" then v = math.max(v, s.value) elseif q.agg == "min" then v = math.min(v, s.value) end
      end
      if q.agg == "sum" then v = sum elseif q.agg == "avg" then v = sum / #hits end
    end
    if not (q.agg == "count" and #hits == 0) then
      result[1] = { metric = json.object(), value = { now, tostring(v) } }
    end
  end
  return reply(200, { status = "success", data = { resultType = "vector", result = result } })
end

return M
