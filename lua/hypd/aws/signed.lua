-- hypd.aws.signed: one SigV4-signed JSON request to an AWS endpoint that has
-- no botocore model (a SageMaker managed MLflow tracking server's MLflow
-- REST API), through the same guardrail, endpoint configuration and signer
-- as hypd.aws.try.
--
--   local out, err = signed.request {
--     service = "sagemaker-mlflow",        -- the signing name and IAM prefix
--     action = "GetRun",                   -- the IAM action: it must be the one method and
--                                          -- path are (hypd.aws.classify), else GUARDRAIL
--     url = "https://t-abc.us-west-2.experiments.sagemaker.aws", -- the standard endpoint
--     method = "GET", path = "/api/2.0/mlflow/runs/get", query = { run_id = "..." },
--     body = { ... },                      -- a table, sent as JSON (POST)
--     headers = { ["x-mlflow-sm-tracking-server-arn"] = arn },
--     region = "us-west-2", profile = nil, timeout = 30 }
--
-- The endpoint: a configured one wins as the SDKs apply it
-- (AWS_ENDPOINT_URL_<SERVICE> with the service's name upper-cased and
-- dashes as underscores, AWS_ENDPOINT_URL, the profile's), else url.
-- Answers the decoded JSON body, or nil, err {code (the body's error_code,
-- x-amzn-errortype, or HTTP_<status>), message, status, service, operation}.
-- Read actions are retried on throttling and 500/502/504 (three attempts).
local _aws = require "hypd._aws"
local aws = require "hypd.aws"
local classify = require "hypd.aws.classify"
local config = require "hypd.config"
local errors = require "hypd.errors"
local guard = require "hypd.tool.guard"
local guard_request = require "hypd.tool.guard_request"
local http = require "hypd.http"
local json = require "hypd.json"
local task = require "hypd.task"

local M = {}

local function escape(s)
  return (tostring(s):gsub("[^%w%-%._~]", function(c) return string.format("%%%02X", c:byte()) end))
end

-- query(t) -> "a=1&b=2" in key order (arrays repeat their key)
local function query(q)
  if type(q) == "string" then return q end
  local keys, out = {}, {}
  for k in pairs(q or {}) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local v = q[k]
    if type(v) == "table" then
      for _, x in ipairs(v) do out[#out + 1] = escape(k) .. "=" .. escape(x) end
    else
      out[#out + 1] = escape(k) .. "=" .. escape(v)
    end
  end
  return table.concat(out, "&")
end

local RETRY = { [429] = true, [500] = true, [502] = true, [504] = true }

function M.request(r)
  local service, action = r.service, r.action
  if type(service) ~= "string" or type(action) ~= "string" then
    return errors.fail("VALIDATION", "signed_json needs service and action", { field = "service" })
  end
  local profile = r.profile or config.profile
  local region = aws.region { region = r.region, profile = profile }
  local id = service:gsub("%-", "_")
  local url, how = _aws.endpoint_url(id, profile)
  if url == nil and how ~= nil then return errors.fail("VALIDATION", how.message or tostring(how)) end
  url = url or r.url
  if type(url) ~= "string" or not url:match("^https?://[^/]+") then
    return errors.fail("VALIDATION", "no endpoint for " .. service .. " (pass url, or set AWS_ENDPOINT_URL_" ..
      id:upper() .. ")", { field = "url" })
  end
  url = url:gsub("/+$", "") .. (r.path or "/")
  local q = query(r.query)
  if q ~= "" then url = url .. "?" .. q end
  aws.credentials(profile)
  local headers = { ["user-agent"] = "hypd/" .. config.version, accept = "application/json" }
  for k, v in pairs(r.headers or {}) do headers[k:lower()] = v end
  local body
  if r.body ~= nil then
    body = json.encode(r.body)
    headers["content-type"] = "application/json"
  end
  local request = { method = r.method or (body and "POST" or "GET"), url = url, headers = headers, body = body,
    timeout = r.timeout or 30,
    aws = { service = service, region = region, profile = profile, sign_body = true } }
  -- the action is the one the request itself is (hypd.aws.classify), which
  -- the chokepoint in hypd.http checks again: a caller's word is not enough
  local derived = classify.request(request)
  if derived and derived.operation ~= action then
    local g = guard.current()
    local name = g and g.tool and g.tool.name or "this caller"
    local err = errors.new("GUARDRAIL", string.format("%s says %s:%s, but %s %s is %s:%s; nothing was sent", name,
      service, action, request.method, r.path or "/", derived.service, derived.operation),
      { action = service .. ":" .. action, derived = derived.service .. ":" .. derived.operation,
        service = service, operation = action })
    if not g then return nil, err end
    return guard_request.refused(g, { aws = derived.service .. ":" .. derived.operation,
      claimed = service .. ":" .. action, class = derived.class }, err)
  end
  local class, gerr = guard.aws(service, action, aws.class(service, action), r.body)
  if not class then
    gerr.service, gerr.operation = service, action
    return nil, gerr
  end
  request.fresh_connection = class ~= "read"
  local attempts = class == "read" and 3 or 1
  for attempt = 1, attempts do
    local resp, terr = http.request(request)
    local out, err
    if resp then
      local ok, decoded = pcall(json.decode, resp.body ~= "" and resp.body or "{}")
      if resp.status < 300 and ok then
        out = decoded
      else
        local b = ok and type(decoded) == "table" and decoded or {}
        local h = resp.headers or {}
        err = errors.new(tostring(b.error_code or (h["x-amzn-errortype"] or ""):match("^[^:]+") or
          ("HTTP_" .. resp.status)), tostring(b.message or b.Message or (ok and "" or resp.body)),
          { status = resp.status, retryable = RETRY[resp.status] or false })
      end
    else
      err = terr
    end
    if out then
      if aws.on_call then pcall(aws.on_call, service, action, "ok", attempt) end
      return out
    end
    err.service, err.operation, err.attempts = service, action, attempt
    if attempt == attempts or not (err.retryable or (not resp)) then
      if aws.on_call then pcall(aws.on_call, service, action, tostring(err.code), attempt) end
      return nil, err
    end
    task.sleep(0.2 * 2 ^ attempt)
  end
end

return M
