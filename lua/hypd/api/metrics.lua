-- hypd.api.metrics: GET /metrics, Prometheus text format 0.0.4 (any token).
--
--   hypd_http_requests_total{route,status}           requests answered, by route template
--   hypd_tool_calls_total{tool,outcome}              tool calls of every front end (ok,
--                                                    accepted, or the error code)
--   hypd_operation_duration_seconds{tool,status}     histogram of finished operations
--   hypd_operations_running                          operations running in this process
--   hypd_aws_calls_total{service,operation,outcome}  AWS requests (ok or the error code)
--   hypd_aws_retries_total{service}                  attempts beyond the first
--   hypd_engine_tasks, hypd_engine_timers, hypd_engine_http_transfers   (task.stats())
--   hypd_log_follow_subscribers, hypd_log_follow_upstreams   live /ws log follows and the pod
--                                                    log streams they share (hypd.logstream)
--   hypd_log_follow_streams_opened_total, hypd_log_follow_reconnects_total,
--   hypd_log_follow_lines_total                      upstream follows opened (reconnects
--                                                    among them) and lines delivered
--
-- install() hooks the sources once: hypd.aws's on_call, hypd.tool.operations's events
-- and hypd.tool.dispatch.call. Counters live in this process and start at zero.
local aws = require "hypd.aws"
local op = require "hypd.tool.operations"
local task = require "hypd.task"
local dispatch = require "hypd.tool.dispatch"
local tool = require "hypd.tool.registry"
local logstream = require "hypd.logstream"
local rest = require "hypd.api.rest"
local errors = require "hypd.errors"

local M = {}

M.BUCKETS = { 1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200 }

local counters = {} -- metric name -> { label text -> value }
local histograms = {} -- label text -> { counts = {...}, sum, count }
local installed = false

local function esc(v)
  return (tostring(v):gsub("\\", "\\\\"):gsub("\n", "\\n"):gsub('"', '\\"'))
end

-- labels{k = v, ...} in the given key order -> 'k="v",...'
local function labels(keys, values)
  local parts = {}
  for i, k in ipairs(keys) do parts[i] = k .. '="' .. esc(values[i]) .. '"' end
  return table.concat(parts, ",")
end

local function inc(name, keys, values, by)
  local c = counters[name] or {}
  counters[name] = c
  local l = labels(keys, values)
  c[l] = (c[l] or 0) + (by or 1)
end

-- request(route, status): one HTTP answer
function M.request(route, status)
  inc("hypd_http_requests_total", { "route", "status" }, { route, status })
end

-- tool_call(name, outcome): one tool call; names not in the registry are
-- counted as "(unknown)" so callers cannot grow the label set
function M.tool_call(name, outcome)
  if not tool.get(name) then name = "(unknown)" end
  inc("hypd_tool_calls_total", { "tool", "outcome" }, { name, outcome })
end

-- aws_call(service, operation, outcome, attempts)
function M.aws_call(service, operation, outcome, attempts)
  inc("hypd_aws_calls_total", { "service", "operation", "outcome" }, { service, operation, outcome })
  if (attempts or 1) > 1 then inc("hypd_aws_retries_total", { "service" }, { service }, attempts - 1) end
end

-- operation(tool, status, seconds): one finished operation
function M.operation(name, status, seconds)
  local l = labels({ "tool", "status" }, { name, status })
  local h = histograms[l]
  if not h then
    h = { counts = {}, sum = 0, count = 0 }
    for i = 1, #M.BUCKETS do h.counts[i] = 0 end
    histograms[l] = h
  end
  for i, le in ipairs(M.BUCKETS) do
    if seconds <= le then h.counts[i] = h.counts[i] + 1 end
  end
  h.sum, h.count = h.sum + seconds, h.count + 1
end

local FINISHED = { ["operation.finished"] = "succeeded", ["operation.failed"] = "failed",
  ["operation.cancelled"] = "cancelled" }

function M.install()
  if installed then return end
  installed = true
  aws.on_call = M.aws_call
  op.subscribe(function(ev)
    local status = FINISHED[ev.kind]
    if not status then return end
    local rec = op.get(ev.operation_id)
    local started = rec and rec.created_at or ev.at
    M.operation(ev.tool, status, math.max(0, (rec and rec.finished_at or ev.at) - started))
  end)
  dispatch.hooks[#dispatch.hooks + 1] = function(name, def, r, err)
    local outcome = "ok"
    if r == nil and err then
      outcome = type(err) == "table" and tostring(err.code) or "error"
    elseif type(r) == "table" and r.operation_id and def and def.steps then
      outcome = r.existing and "joined" or "accepted"
    end
    M.tool_call(name, outcome)
  end
end

-- reset() forgets every counter (tests)
function M.reset() counters, histograms = {}, {} end

local function fmt(v)
  if math.type(v) == "integer" then return tostring(v) end
  if v == math.floor(v) and math.abs(v) < 2 ^ 53 then return string.format("%d", v) end
  return string.format("%.6g", v)
end

local HELP = {
  hypd_http_requests_total = "HTTP requests answered, by route template and status",
  hypd_tool_calls_total = "Tool calls (every front end), by tool and outcome (ok, accepted, joined, or the error code)",
  hypd_aws_calls_total = "AWS API requests, by service, operation and outcome (ok or the error code)",
  hypd_aws_retries_total = "AWS request attempts beyond the first",
}

local function sorted_keys(t)
  local ks = {}
  for k in pairs(t) do ks[#ks + 1] = k end
  table.sort(ks)
  return ks
end

-- render() -> the exposition text
function M.render()
  local out = {}
  local function line(s) out[#out + 1] = s end
  for _, name in ipairs { "hypd_http_requests_total", "hypd_tool_calls_total", "hypd_aws_calls_total",
                          "hypd_aws_retries_total" } do
    line("# HELP " .. name .. " " .. HELP[name])
    line("# TYPE " .. name .. " counter")
    local c = counters[name] or {}
    for _, l in ipairs(sorted_keys(c)) do line(name .. "{" .. l .. "} " .. fmt(c[l])) end
  end
  line("# HELP hypd_operation_duration_seconds Duration of finished operations, by tool and final status")
  line("# TYPE hypd_operation_duration_seconds histogram")
  for _, l in ipairs(sorted_keys(histograms)) do
    local h = histograms[l]
    for i, le in ipairs(M.BUCKETS) do
      line("hypd_operation_duration_seconds_bucket{" .. l .. ',le="' .. fmt(le) .. '"} ' .. h.counts[i])
    end
    line("hypd_operation_duration_seconds_bucket{" .. l .. ',le="+Inf"} ' .. h.count)
    line("hypd_operation_duration_seconds_sum{" .. l .. "} " .. fmt(h.sum))
    line("hypd_operation_duration_seconds_count{" .. l .. "} " .. h.count)
  end
  local running = 0
  for _ in pairs(op.active()) do running = running + 1 end
  local s = task.stats()
  local ls = logstream.stats()
  for _, c in ipairs {
    { "hypd_log_follow_streams_opened_total", "Upstream pod log follows opened (reconnects included)",
      ls.follows_opened },
    { "hypd_log_follow_reconnects_total", "Upstream pod log follows reopened after a drop", ls.reconnects },
    { "hypd_log_follow_lines_total", "Log lines the upstream follows delivered", ls.lines },
  } do
    line("# HELP " .. c[1] .. " " .. c[2])
    line("# TYPE " .. c[1] .. " counter")
    line(c[1] .. " " .. fmt(c[3]))
  end
  for _, g in ipairs {
    { "hypd_log_follow_subscribers", "Live /ws log follows open", ls.subscribers },
    { "hypd_log_follow_upstreams", "Upstream pod log streams the follows share", ls.upstreams },
    { "hypd_operations_running", "Operations running in this process", running },
    { "hypd_engine_tasks", "Engine tasks alive (not counting server and operation background tasks)", s.tasks },
    { "hypd_engine_timers", "Engine timers pending", s.timers },
    { "hypd_engine_http_transfers", "HTTP client transfers in flight", s.http },
  } do
    line("# HELP " .. g[1] .. " " .. g[2])
    line("# TYPE " .. g[1] .. " gauge")
    line(g[1] .. " " .. fmt(g[3]))
  end
  return table.concat(out, "\n") .. "\n"
end

-- handle(req) -> response (GET /metrics with a token of any scope)
function M.handle(req)
  local caller, resp = rest.authenticate(req, "metrics")
  if not caller then return resp end
  if req.method ~= "GET" then
    return rest.error_response(errors.new("METHOD_NOT_ALLOWED", "use GET /metrics",
      { allow = "GET" }), 405)
  end
  return { status = 200, headers = { ["content-type"] = "text/plain; version=0.0.4; charset=utf-8",
    ["cache-control"] = "no-store" }, body = M.render() }
end

return M
