-- sandbox.mlflow.http: the MLflow REST API of the simulated SageMaker
-- managed tracking servers, as the sagemaker-mlflow plugin reaches it:
-- requests under /api/2.0/mlflow/ (and /ajax-api/2.0/mlflow/) to the
-- server's host (TrackingServerUrl, https://t-….<region>.experiments.
-- sagemaker.aws) or to https://<region>.experiments.sagemaker.aws with the
-- header x-mlflow-sm-tracking-server-arn naming the server (what the plugin
-- sends; SAGEMAKER_MLFLOW_CUSTOM_ENDPOINT, or AWS_ENDPOINT_URL_SAGEMAKER_MLFLOW
-- for other clients, points them at the sandbox), SigV4-signed for the
-- service sagemaker-mlflow.
--
-- Refusals: unsigned or badly signed as the AWS front ends do (403); a
-- server that does not exist 404 RESOURCE_DOES_NOT_EXIST; one that is not
-- Created, Updated or Started 503 TEMPORARILY_UNAVAILABLE; the caller's
-- identity policy (sandbox.policy) must allow sagemaker-mlflow:<Action> on
-- the server's ARN (403 AccessDeniedException). Then MLflow's own answers
-- and errors (sandbox.mlflow.store). Writes are in the sandbox audit log
-- (service sagemaker-mlflow).
local auth = require "sandbox.auth"
local core = require "hypd.core"
local json = require "hypd.json"
local PC = require "sandbox.policy_context"
local policy = require "sandbox.policy"
local Q = require "sandbox._codec_query"
local state = require "sandbox.state"
local store = require "hypd.store"
local T = require "sandbox.mlflow.store"

local M = {}

M.SERVICE = "sagemaker-mlflow"

-- path -> { methods, store function, IAM action, class }
M.ROUTES = {
  ["experiments/create"] = { "POST", T.create_experiment, "CreateExperiment", "mutating" },
  ["experiments/get"] = { "GET", T.get_experiment, "GetExperiment", "read" },
  ["experiments/get-by-name"] = { "GET", T.get_experiment_by_name, "GetExperimentByName", "read" },
  ["experiments/search"] = { "GET POST", T.search_experiments, "SearchExperiments", "read" },
  ["runs/create"] = { "POST", T.create_run, "CreateRun", "mutating" },
  ["runs/update"] = { "POST", T.update_run, "UpdateRun", "mutating" },
  ["runs/get"] = { "GET", T.get_run, "GetRun", "read" },
  ["runs/search"] = { "GET POST", T.search_runs, "SearchRuns", "read" },
  ["runs/log-metric"] = { "POST", T.log_metric, "LogMetric", "mutating" },
  ["runs/log-batch"] = { "POST", T.log_batch, "LogBatch", "mutating" },
  ["runs/log-parameter"] = { "POST", T.log_param, "LogParam", "mutating" },
  ["runs/set-tag"] = { "POST", T.set_tag, "SetTag", "mutating" },
  ["metrics/get-history"] = { "GET", T.get_metric_history, "GetMetricHistory", "read" },
}

local function scope(req)
  return (req.headers.authorization or ""):match("Credential=[^/]+/%d+/[^/]+/([^/]+)/")
end

local function host(req)
  return ((req.host or req.headers.host or ""):lower():match("^([^:]*)"))
end

-- claims(req) -> true when the request is for a tracking server's API
function M.claims(req)
  if scope(req) == M.SERVICE then return true end
  if host(req):match("%.experiments%.sagemaker%.aws$") then return true end
  local signed = req.headers.authorization ~= nil
  local path = req.path or ""
  return not signed and (path:match("^/api/2%.0/mlflow/") or path:match("^/ajax%-api/2%.0/mlflow/")) ~= nil
end

local function answer(status, body, extra)
  local h = { ["content-type"] = "application/json" }
  for k, v in pairs(extra or {}) do h[k] = v end
  return { status = status, headers = h, body = json.encode(body) }
end

local function mlflow_error(code, message, status)
  return answer(status, { error_code = code, message = message })
end

-- the AWS front's refusal (before MLflow sees the request)
local function aws_error(e)
  return answer(e.status or 403, { message = e.message }, { ["x-amzn-errortype"] = e.code })
end

local function input_of(req)
  local input = {}
  if req.method == "GET" or req.method == "DELETE" then
    for _, p in ipairs(Q.form_pairs(req.query or "")) do
      local k, v = p[1], p[2]
      if k == "experiment_ids" or k == "order_by" then
        input[k] = input[k] or {}
        table.insert(input[k], v)
      else
        input[k] = v
      end
    end
    return input
  end
  if req.body == nil or req.body == "" then return input end
  local ok, body = pcall(json.decode, req.body)
  if not ok or type(body) ~= "table" or json.is_array(body) then return nil end
  return body
end

local function audit(region, operation, target, principal)
  store.event("sandbox.audit", nil, { service = M.SERVICE, operation = operation, region = region, target = target,
    at = core.now(), principal = principal and principal.arn or nil })
end

-- call(region, server, path, input) -> status, body: one API call on a
-- server record (the HTTP front, and in-process reporters, which are not
-- audited: they are the simulated workload's own traffic)
function M.call(region, s, path, input)
  local route = M.ROUTES[path]
  if not route then
    return 404, { error_code = "ENDPOINT_NOT_FOUND", message = "No API endpoint found for /api/2.0/mlflow/" .. path }
  end
  if not T.READY[s.TrackingServerStatus] then
    return 503, { error_code = "TEMPORARILY_UNAVAILABLE", message = string.format("The tracking server %s is %s; " ..
      "it serves the MLflow API once it is Created (or Started).", s.TrackingServerName,
      tostring(s.TrackingServerStatus)) }
  end
  local v = state.view(region, "sagemaker")
  local ok, out = pcall(route[2], v, s, input or {})
  if not ok then
    if type(out) == "table" and out.mlflow then return out.status, { error_code = out.code, message = out.message } end
    return 500, { error_code = "INTERNAL_ERROR", message = "The hypd sandbox failed: " .. tostring(out) }
  end
  return 200, out
end

-- handle(req) -> { status, headers, body }
function M.handle(req)
  local principal, aerr = auth.verify(req, "rest-json")
  if not principal then return aws_error(aerr) end
  if principal.service ~= M.SERVICE then
    return aws_error { code = "InvalidSignatureException", status = 403, message = "Credential should be scoped " ..
      "to correct service: '" .. M.SERVICE .. "'." }
  end
  local path = (req.path or ""):match("^/api/2%.0/mlflow/(.+)$") or (req.path or ""):match("^/ajax%-api/2%.0/mlflow/(.+)$")
  if not path then
    return mlflow_error("ENDPOINT_NOT_FOUND", "No API endpoint found for " .. tostring(req.path), 404)
  end
  local arn = req.headers["x-mlflow-sm-tracking-server-arn"]
  local region = principal.region
  if arn then
    local r = arn:match("^arn:aws[%w-]*:sagemaker:([%w-]+):")
    if r and r ~= region then
      return aws_error { code = "InvalidSignatureException", status = 403, message = "Credential should be scoped " ..
        "to a valid region, not '" .. region .. "'. " }
    end
  end
  local s = T.server(state.view(region, "sagemaker"), arn or host(req))
  if not s then
    return mlflow_error("RESOURCE_DOES_NOT_EXIST", "Tracking server " .. tostring(arn or host(req)) ..
      " does not exist.", 404)
  end
  local route = M.ROUTES[path]
  if route and not route[1]:find(req.method, 1, true) then
    return mlflow_error("ENDPOINT_NOT_FOUND", "The method " .. req.method .. " is not allowed for " .. req.path, 405)
  end
  local doc = policy.get()
  if doc and route then
    local action = M.SERVICE .. ":" .. route[3]
    -- the request context its conditions read (the caller, the region, ...)
    local pctx = { principal = principal, region = region,
      view = function(_, name) return state.view(name == "iam" and "global" or region, name) end }
    local context = PC.check(pctx, PC.request(pctx, M.SERVICE, route[3], {}), { action, s.TrackingServerArn })
    local verdict = policy.evaluate(doc, action, s.TrackingServerArn, context)
    if verdict ~= "allow" then
      return aws_error { code = "AccessDeniedException", status = 403, message = string.format("User: %s is not " ..
        "authorized to perform: %s on resource: %s because %s", principal.arn, action, s.TrackingServerArn,
        verdict == "deny" and "an explicit deny in an identity-based policy denies it" or
        "no identity-based policy allows the " .. action .. " action") }
    end
  end
  local input = input_of(req)
  if not input then
    return mlflow_error("MALFORMED_REQUEST", "Malformed request: the body is not a JSON object", 400)
  end
  local status, body = M.call(region, s, path, input)
  if status == 200 and route[4] ~= "read" then audit(region, route[3], s.TrackingServerName, principal) end
  return answer(status, body)
end

return M
