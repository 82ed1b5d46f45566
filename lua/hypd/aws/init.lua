-- hypd.aws: calling AWS from workflows.
--
--   local aws = require "hypd.aws"
--   local out = aws.call("eks", "DescribeCluster", { name = "demo" }, { region = "us-west-2" })
--   local out, err = aws.try("sagemaker", "DescribeCluster", { ClusterName = "hp" })
--   for page in aws.pages("iam", "ListRoles", {}) do ... end
--   local roles = aws.all("iam", "ListRoles", {})          -- every item of every page
--
-- Operation and parameter names are the API's own (botocore models), so the
-- AWS documentation reads directly onto playbooks. opts: region, profile,
-- max_attempts, timeout (seconds per attempt), endpoint_url, s3_path_style,
-- check_constraints (false sends values that break the model's enum,
-- length, range or pattern constraints, as botocore's
-- parameter_validation=False does, to see what the service answers; by
-- default they fail here as VALIDATION).
-- Errors: { code = "ResourceNotFoundException", message, status, request_id,
-- service, operation, retryable, attempts }. Credentials stay in C: Lua
-- names a profile (or nothing) and the engine signs each request.
--
--   aws.class("ec2", "DescribeSubnets")                    -- "read"
--
-- Every operation has a class, "read" | "mutating" | "deleting", decided
-- once when the models are generated (tests/tools/aws_models.py says how).
local _aws = require "hypd._aws"
local classify = require "hypd.aws.classify"
local config = require "hypd.config"
local endpoints = require "hypd.aws.endpoints"
local errors = require "hypd.errors"
local guard = require "hypd.tool.guard"
local http = require "hypd.http"
local json = require "hypd.json"
local protocol = require "hypd.aws.protocol"
local retry = require "hypd.aws.retry"
local sched = require "hypd._sched"
local task = require "hypd.task"

local M = {}

-- an operation's calls get more attempts than the SDKs' 3: a 40-minute
-- workflow rides out a burst of throttling (the backoff grows to 20 s)
-- instead of stopping; AWS_MAX_ATTEMPTS or the profile's max_attempts,
-- when set, decide instead
M.OPERATION_ATTEMPTS = 8

-- services hypd talks to; `true` = read-only use. A service is named by
-- its IAM action prefix (botocore's "service-quotas" is "servicequotas")
M.SERVICES = {
  sagemaker = false, eks = false, ec2 = false, iam = false, sts = false, s3 = false,
  fsx = false, ssm = false, cloudformation = true, logs = true, servicequotas = true, pricing = true,
}

local models = {}
function M.model(service)
  if M.SERVICES[service] == nil then
    local names = {}
    for k in pairs(M.SERVICES) do names[#names + 1] = k end
    table.sort(names)
    errors.raise("VALIDATION", "unknown AWS service '" .. tostring(service) .. "' (hypd knows: " ..
      table.concat(names, ", ") .. ")", { field = "service" })
  end
  local m = models[service]
  if not m then
    m = require("hypd.aws.models." .. service) -- a model is large: loaded when its service is first used
    models[service] = m
  end
  return m
end

-- endpoint_env(service) -> "AWS_ENDPOINT_URL_<ID>": the variable that
-- names the service's endpoint, as the SDKs spell it from its service id
-- (sagemaker: ..._SAGEMAKER, servicequotas: ..._SERVICE_QUOTAS, logs:
-- ..._CLOUDWATCH_LOGS)
function M.endpoint_env(service)
  return "AWS_ENDPOINT_URL_" .. endpoints.config_id(M.model(service).metadata.serviceId):upper()
end

-- members(service, shape) -> the member names of a structure shape of the
-- service model, in the model's order (nil for an unknown shape)
function M.members(service, shape)
  local s = M.model(service).shapes[shape]
  if type(s) ~= "table" or s[1] ~= "structure" then return nil end
  local out = {}
  for i, m in ipairs(s[2] or {}) do out[i] = m[1] end
  return out
end

-- class(service, operation) -> "read" | "mutating" | "deleting": the
-- operation's class from its model; "deleting" (the safe default) for an
-- operation the model does not have, and for names that are permissions
-- rather than operations (iam:PassRole). Raises VALIDATION for an unknown
-- service, like model().
function M.class(service, operation)
  local rest = classify.REST_ACTIONS[service]
  if rest then return rest[operation] or "deleting" end
  local op = M.model(service).operations[operation]
  return op and op.class or "deleting"
end

local imds_region -- false once looked up and absent

-- region(opts) -> the region for a call: opts.region, --region, AWS_REGION,
-- AWS_DEFAULT_REGION, the profile, then instance metadata.
function M.region(opts)
  opts = opts or {}
  local r = opts.region or config.region or _aws.region(opts.profile or config.profile)
  if r then return r end
  if imds_region == nil then
    local res = sched.await("job", _aws.imds_region())
    imds_region = res and res.region or false
  end
  if imds_region then return imds_region end
  errors.raise("VALIDATION", "no AWS region: pass --region, set AWS_REGION or AWS_DEFAULT_REGION, " ..
    "or set region in the AWS profile", { field = "region" })
end

-- credentials(profile) -> { source, expiration, profile } (never a secret);
-- resolves through the provider chain on a worker thread when not cached.
function M.credentials(profile)
  local info = _aws.credentials_cached(profile)
  if info then return info end
  local r = sched.await("job", _aws.credentials(profile))
  if r.err then error(r.err, 0) end
  return r
end

local clients = {} -- retry quota per service and region

M.on_call = nil -- fn(service, operation, outcome, attempts): after every AWS request ("ok" or the error code)

local function called(service, operation, outcome, attempts)
  if M.on_call then pcall(M.on_call, service, operation, outcome, attempts) end
end

local function url_for(ep, req, opts, service)
  local host, path = ep.host, req.path
  if service == "s3" and req.bucket and endpoints.s3_virtual_host(ep, req.bucket, opts.s3_path_style) then
    host = req.bucket .. "." .. host
    local prefix = "/" .. req.bucket
    if path:sub(1, #prefix) == prefix then path = path:sub(#prefix + 1) end
    if path == "" then path = "/" end
  end
  if req.host_prefix and ep.source == "standard" then host = req.host_prefix .. host end
  local base = ep.url:match("^https?://[^/]+(/.*)$") or ""
  local url = ep.scheme .. "://" .. host .. base .. path
  if req.query and req.query ~= "" then url = url .. "?" .. req.query end
  return url
end

local SAFE_METHODS = { GET = true, HEAD = true, PUT = true, DELETE = true }

-- try(service, operation, params, opts) -> result | nil, err
function M.try(service, operation, params, opts)
  opts = opts or {}
  local model = M.model(service)
  local op = model.operations[operation]
  if not op then
    return errors.fail("VALIDATION", service .. " has no operation '" .. tostring(operation) .. "'",
      { field = "operation", service = service })
  end
  if M.SERVICES[service] and op.class ~= "read" then
    return errors.fail("VALIDATION", "hypd uses " .. service .. " read-only; " .. operation .. " changes state",
      { field = "operation", service = service })
  end
  -- the running tool's guardrail (hypd.tool.guard): checked before anything is sent
  local class, gerr, empty = guard.aws(service, operation, M.class(service, operation), params)
  if not class then
    gerr.service, gerr.operation = service, operation
    return nil, gerr
  end
  if empty then return json.object() end
  local profile = opts.profile or config.profile
  local region = M.region(opts)
  local cfg = _aws.config(profile)
  local ep, eperr = endpoints.resolve(model.metadata, region, profile, opts)
  if not ep then return errors.fail("VALIDATION", eperr, { field = "endpoint_url" }) end
  local req, err = protocol.build(model, operation, params or {},
    { check_constraints = opts.check_constraints ~= false })
  if not req then
    err.service, err.operation = service, operation
    return nil, err
  end
  local signed = op.auth ~= "none"
  if signed then M.credentials(profile) end
  local headers = {}
  for k, v in pairs(req.headers or {}) do headers[k] = v end
  headers["user-agent"] = "hypd/" .. config.version
  local request = {
    method = req.method, url = url_for(ep, req, opts, service), headers = headers, body = req.body,
    timeout = opts.timeout or 60,
    aws = signed and { service = ep.signing_name, region = ep.signing_region, profile = profile,
                       sign_body = service == "s3", s3_path = service == "s3" } or nil,
  }
  local safe = op.class == "read" or req.idempotency_token_filled or op.idempotency_token ~= nil
    or (model.metadata.protocol:find("^rest") and SAFE_METHODS[req.method]) or false
  request.fresh_connection = not safe
  local key = service .. "/" .. region
  local client = clients[key] or retry.client()
  clients[key] = client
  local g = guard.current()
  local max = opts.max_attempts or tonumber(os.getenv("AWS_MAX_ATTEMPTS") or "") or cfg.max_attempts or
    (g and (g.op_id or g.patient) and M.OPERATION_ATTEMPTS) or 3
  local spent = 0
  for attempt = 1, max do
    local resp, terr = http.request(request)
    local result, aerr
    if resp then
      result, aerr = protocol.parse(model, operation, resp)
    else
      aerr = terr
    end
    if result then
      client:success(spent)
      called(service, operation, "ok", attempt)
      return result
    end
    aerr.service, aerr.operation, aerr.attempts = service, operation, attempt
    local kind = retry.classify(aerr)
    aerr.retryable = kind ~= nil
    if not retry.safe_to_retry(kind, safe) or attempt == max then
      called(service, operation, tostring(aerr.code), attempt)
      return nil, aerr
    end
    local cost = client:acquire(kind)
    if not cost then
      aerr.message = (aerr.message or "") .. " (not retried: the retry quota is spent)"
      called(service, operation, tostring(aerr.code), attempt)
      return nil, aerr
    end
    spent = spent + cost
    task.sleep(retry.delay(attempt, kind))
  end
end

-- call(...) -> result; raises the error table
function M.call(service, operation, params, opts)
  local r, err = M.try(service, operation, params, opts)
  if r == nil then error(err, 0) end
  return r
end

-- pages(service, operation, params, opts) -> iterator over result pages,
-- following the operation's paginator (NextToken, nextToken, Marker,
-- ContinuationToken, ...). Raises on errors.
function M.pages(service, operation, params, opts)
  local model = M.model(service)
  local op = model.operations[operation]
  local pag = op and op.paginator
  local p = {}
  for k, v in pairs(params or {}) do p[k] = v end
  local done = false
  return function()
    if done then return nil end
    local page = M.call(service, operation, p, opts)
    if not pag then done = true return page end
    local ins = type(pag.input_token) == "table" and pag.input_token or { pag.input_token }
    local outs = type(pag.output_token) == "table" and pag.output_token or { pag.output_token }
    local more = true
    if pag.more_results then more = page[pag.more_results] == true end
    local any = false
    for i, name in ipairs(ins) do
      local v = page[outs[i]]
      p[name] = v
      if v ~= nil and v ~= "" then any = true end
    end
    if not more or not any then done = true end
    return page
  end
end

-- all(service, operation, params, opts) -> every item of the paginator's
-- result key over all pages (or the list of pages when there is none)
function M.all(service, operation, params, opts)
  local op = M.model(service).operations[operation]
  local key = op and op.paginator and op.paginator.result_key
  if type(key) == "table" then key = key[1] end
  local items = {}
  for page in M.pages(service, operation, params, opts) do
    if key then
      for _, v in ipairs(page[key] or {}) do items[#items + 1] = v end
    else
      items[#items + 1] = page
    end
  end
  return items
end

return M
