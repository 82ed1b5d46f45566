-- sandbox: a simulated AWS account on loopback that real AWS clients accept.
--
-- Every request: faults (if configured) -> SigV4 verification -> the
-- protocol codec -> the caller's identity policy (if one is set, see
-- sandbox.policy; a refusal is audited) -> the service's operation -> the
-- audit log (mutations) -> the protocol's answer. State lives in the
-- store; long operations are scheduled work (ctx.later) that survives
-- restarts and takes simulated time (instant under the virtual clock).
-- The faults and the policy are the process's (one sandbox at a time),
-- and are not persisted.
--
-- A service is lua/sandbox/services/<name>.lua returning
--   { scope = "regional" | "global",
--     operations = { OpName = function(ctx, input) return output end },
--     transitions = { name = function(ctx, args) ... end } }
-- ctx (one per request, and one per transition):
--   ctx.account, ctx.region, ctx.service, ctx.operation, ctx.principal
--   ctx.now()                         the engine clock (epoch seconds)
--   ctx.error(code, message [, status [, fields]])  raises an AWS error
--   ctx.state                         this service's records: get/put/delete/list(kind[, id])
--   ctx.view(service)                 another service's records (its own scope)
--   ctx.id(prefix)                    "vpc-0123456789abcdef0"-style id
--   ctx.hex(n)                        n random hex characters
--   ctx.arn(resource [, service])     "arn:aws:<service>:<region>:<account>:<resource>"
--   ctx.later(seconds, transition, args)  runs transitions[transition](ctx, args)
--                                     after seconds / speed (persisted)
--   ctx.fault(kind, args) -> true     an injected fault applies (e.g.
--                                     "insufficient_capacity" {instance_type, zone})
--   ctx.target = "..."                what the audit log names (default: a guess)
local auth = require "sandbox.auth"
local codec = require "sandbox.codec"
local core = require "hypd.core"
local errors = require "hypd.errors"
local faults = require "sandbox.faults"
local json = require "hypd.json"
local log = require "hypd.log"
local policy = require "sandbox.policy"
local route = require "sandbox._route"
local server = require "hypd.http_server"
local state = require "sandbox.state"
local store = require "hypd.store"
local sys = require "hypd.sys"
local task = require "hypd.task"

local M = {}

M.SERVICES = { "sts", "iam", "ec2", "s3", "eks", "sagemaker", "fsx", "servicequotas", "sagemaker-runtime", "logs",
  "elasticloadbalancing", "pricing", "cloudformation", "ssm" }
M.speed = 1
M.default_region = "us-west-2"
local services = {}

local function service(name)
  local s = services[name]
  if s == nil then
    local ok, mod = pcall(require, "sandbox.services." .. name)
    s = ok and mod or false
    if not ok then log.warn("sandbox", "service %s is not available: %s", name, tostring(mod)) end
    services[name] = s
  end
  return s or nil
end

local function model(name)
  return require("hypd.aws.models." .. name)
end

local function hex(n)
  return (sys.random_bytes((n + 1) // 2):gsub(".", function(c) return string.format("%02x", c:byte()) end)):sub(1, n)
end

local AWS_ERROR = {}

local Ctx = {}
Ctx.__index = Ctx
M.Ctx = Ctx -- a request's context class (make bench records its later() calls)

function Ctx.now() return core.now() end
function Ctx.hex(n) return hex(n) end
function Ctx.id(prefix) return prefix .. "-0" .. hex(16) end

function Ctx.error(code, message, status, fields)
  error(setmetatable({ code = code, message = message, status = status or 400, fields = fields }, AWS_ERROR), 0)
end

function Ctx:arn(resource, svc)
  svc = svc or self.service
  local global = service(svc) and service(svc).scope == "global"
  return string.format("arn:aws:%s:%s:%s:%s", svc, global and "" or self.region, auth.ACCOUNT, resource)
end

function Ctx:view(name)
  local s = service(name)
  return state.view(s and s.scope == "global" and "global" or self.region, name)
end

function Ctx:fault(kind, args)
  return faults.applies(kind, args, self)
end

local function new_ctx(svc, region, operation, principal)
  local s = service(svc)
  return setmetatable({
    account = auth.ACCOUNT, region = region, service = svc, operation = operation,
    principal = principal or { arn = auth.USER, user_id = auth.USER_ID, account = auth.ACCOUNT },
    state = state.view(s and s.scope == "global" and "global" or region, svc),
  }, Ctx)
end

-- scheduled work: persisted, so a restart resumes it
local function run_later(job)
  task.spawn(function()
    local wait = job.at - core.now()
    if wait > 0 then task.sleep(wait) end
    local s = service(job.service)
    local fn = s and s.transitions and s.transitions[job.transition]
    local ctx = new_ctx(job.service, job.region, "(transition " .. job.transition .. ")")
    if not fn then
      store.delete(job.key)
      log.error("sandbox", "no transition %s in %s", job.transition, job.service)
      return
    end
    local ok, err = pcall(fn, ctx, job.args or {})
    -- a transition the host's stop interrupted stays scheduled: it runs at
    -- the next start (an add-on is not left CREATING for ever)
    if not ok and type(err) == "table" and err.abort then return end
    store.delete(job.key)
    if not ok then log.error("sandbox", "transition %s.%s failed: %s", job.service, job.transition, tostring(err)) end
  end, { name = "sandbox " .. job.service .. "." .. job.transition, daemon = true, steady = true })
end

function Ctx:later(seconds, transition, args)
  local at = core.now() + seconds / M.speed
  local key = string.format("sandbox/later/%020.6f-%s", at, hex(8))
  local job = { key = key, at = at, service = self.service, region = self.region,
                transition = transition, args = args or json.object() }
  assert(store.put(key, job))
  run_later(job)
end

local function resume_scheduled()
  local jobs = assert(store.list("sandbox/later/"))
  local n = 0
  for _, job in pairs(jobs) do
    run_later(job)
    n = n + 1
  end
  return n
end

-- the guess at what a mutation targets, for the audit log
local TARGET_KEYS = { "name", "Name", "ClusterName", "RoleName", "PolicyArn", "PolicyName", "Bucket", "VpcId",
  "SubnetId", "GroupId", "clusterName", "addonName", "FileSystemId", "InstanceGroupName", "TrackingServerName" }
local function guess_target(input)
  for _, k in ipairs(TARGET_KEYS) do
    if type(input[k]) == "string" then return input[k] end
  end
end

-- audit(ctx, call, output [, refused]): one entry of the audit log; a
-- request the identity policy refused adds refused (the error code),
-- action, resource ("*" when it names none) and principal
local function audit(ctx, call, output, refused)
  local e = {
    service = ctx.service, operation = call.operation, region = ctx.region,
    target = ctx.target or guess_target(call.input) or (type(output) == "table" and guess_target(output)) or "",
    at = core.now(),
  }
  if refused then
    e.refused, e.action, e.resource = refused.code, refused.action, refused.resource or "*"
    e.principal = ctx.principal.arn
  end
  store.event("sandbox.audit", nil, e)
end

-- the answer to a request signed for a service the sandbox does not
-- simulate, in the protocol of the one it seems to address
local UNKNOWN_OP = { query = { "InvalidAction", 400 }, ec2 = { "InvalidAction", 400 },
  json = { "UnknownOperationException", 400 }, ["rest-json"] = { "UnknownOperationException", 404 },
  ["rest-xml"] = { "NotImplemented", 501 } }

-- unsigned(service, req) -> true for operations AWS takes without a signature
local function unsigned(svc, req)
  if req.headers.authorization or (req.query or ""):find("X-Amz-Signature=", 1, true) then return false end
  local call = codec.decode(svc, req)
  local op = call and model(svc).operations[call.operation]
  return op ~= nil and op.auth == "none"
end

-- not_simulated(svc, req) -> the error for a request of a simulated service
-- that the sandbox recognizes and does not simulate, or nil: S3's POST
-- Object (a browser form upload, authorized by the policy in its form
-- fields rather than a signature) answers S3's NotImplemented, not the
-- AccessDenied an unsigned request would get
local function not_simulated(svc, req)
  if model(svc).metadata.protocol == "rest-xml" and req.method == "POST" and
      (req.headers["content-type"] or ""):lower():find("multipart/form-data", 1, true) then
    return { code = "NotImplemented", status = 501,
      message = "POST Object (browser form upload) is not simulated by the hypd sandbox" }
  end
end

-- canonical(v) -> a text equal for equal values (keys sorted): what a
-- repeated idempotency token's parameters are compared by
local function canonical(v)
  if type(v) ~= "table" then return type(v) .. ":" .. tostring(v) end
  local keys = {}
  for k in pairs(v) do keys[#keys + 1] = k end
  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
  local parts = {}
  for i, k in ipairs(keys) do parts[i] = tostring(k) .. "=" .. canonical(v[k]) end
  return "{" .. table.concat(parts, ",") .. "}"
end

-- handle(req) -> { status, headers, body }: one AWS request
function M.handle(req)
  local request_id = string.format("%s-%s-%s-%s-%s", hex(8), hex(4), hex(4), hex(4), hex(12))
  local rctx = { request_id = request_id, method = req.method }
  -- a SageMaker managed MLflow tracking server's REST API (not a Smithy service)
  local mlflow = require "sandbox.mlflow.http"
  if mlflow.claims(req) then return mlflow.handle(req) end
  -- even an unsigned request, or one for a service not simulated here, is
  -- answered in the protocol of the service it addresses
  local svc, scoped = route.service(req, M.SERVICES)
  local proto = model(svc).metadata.protocol
  if scoped and scoped ~= svc or not service(svc) then
    local e = UNKNOWN_OP[proto]
    return codec.encode_error(svc, nil, { code = e[1], status = e[2], message = "The hypd sandbox does not " ..
      "simulate the service '" .. tostring(scoped or svc) .. "'" }, rctx)
  end
  local unsupported = not_simulated(svc, req)
  if unsupported then return codec.encode_error(svc, nil, unsupported, rctx) end
  local injected = faults.on_request(svc, proto)
  if injected and injected.reset then return { status = 0 } end
  if injected then return codec.encode_error(svc, nil, injected, rctx) end
  local principal, aerr
  local anonymous = unsigned(svc, req)
  if anonymous then
    principal = { arn = "anonymous", user_id = "anonymous", region = M.default_region }
  else
    principal, aerr = auth.verify(req, proto)
    if not principal then return codec.encode_error(svc, nil, aerr, rctx) end
  end
  local call, derr = codec.decode(svc, req)
  if not call then return codec.encode_error(svc, nil, derr, rctx) end
  local ctx = new_ctx(svc, principal.region, call.operation, principal)
  ctx.request_id, ctx.bucket = request_id, call.bucket
  if not anonymous then
    local refused = policy.authorize(ctx, svc, call.operation, call.input, proto)
    if refused then
      audit(ctx, call, nil, refused)
      return codec.encode_error(svc, call.operation, refused, rctx)
    end
  end
  local s = service(svc)
  local fn = s.operations[call.operation]
  if not fn then
    return codec.encode_error(svc, call.operation, { code = proto == "ec2" and "InvalidAction" or
      "UnsupportedOperation", message = "The hypd sandbox does not simulate " .. svc .. " " .. call.operation,
      status = 400 }, rctx)
  end
  -- a repeated idempotency token with the same parameters (a client
  -- retrying a create whose answer it lost) gets the first call's answer, as
  -- AWS gives it: nothing is done or audited again (other parameters: the
  -- operation itself decides, IdempotentParameterMismatch where AWS says so)
  local tok_member = model(svc).operations[call.operation].idempotency_token
  local token = tok_member and type(call.input[tok_member]) == "string" and
    (call.operation .. "/" .. call.input[tok_member]) or nil
  local input_key = token and canonical(call.input)
  -- (the answer is kept as it went on the wire: a handler's output is a
  -- shape the codec reads, not always a value the store can keep)
  local seen = token and ctx.state:get("idempotency_token", token)
  if seen and seen.input == input_key and seen.answer then return seen.answer end
  local ok, out = pcall(fn, ctx, call.input)
  if not ok then
    if getmetatable(out) == AWS_ERROR then return codec.encode_error(svc, call.operation, out, rctx) end
    local e = errors.is(out) and out or errors.new("INTERNAL", tostring(out))
    log.error("sandbox", "%s %s failed: %s", svc, call.operation, tostring(e))
    return codec.encode_error(svc, call.operation,
      { code = "InternalFailure", message = "The hypd sandbox failed: " .. tostring(e.code), status = 500 }, rctx)
  end
  if model(svc).operations[call.operation].class ~= "read" then audit(ctx, call, out) end
  local answer = codec.encode(svc, call.operation, out or {}, rctx)
  if token then ctx.state:put("idempotency_token", token, { input = input_key, answer = answer }) end
  local after = faults.after_request(svc) -- done, and the answer says it failed
  if after then return codec.encode_error(svc, call.operation, after, rctx) end
  return answer
end

-- invoke(ctx, svc, operation, input) -> output | nil, err: one operation of
-- another simulated service, called from inside the sandbox for ctx's
-- principal in ctx's region (CloudFormation making a stack's resources, as
-- it does with its caller's permissions): held to the identity policy and
-- audited like a request, with no signature or wire codec. input is the
-- decoded shape an operation receives; err is the AWS error {code,
-- message, status}.
function M.invoke(ctx, svc, operation, input)
  local s = service(svc)
  local fn = s and s.operations[operation]
  if not fn then
    return nil, { code = "InternalFailure", status = 500,
      message = "The hypd sandbox does not simulate " .. svc .. " " .. operation }
  end
  local c = new_ctx(svc, ctx.region, operation, ctx.principal)
  c.request_id, c.bucket = ctx.request_id, input.Bucket
  local call = { operation = operation, input = input }
  local refused = policy.authorize(c, svc, operation, input, model(svc).metadata.protocol)
  if refused then
    audit(c, call, nil, refused)
    return nil, refused
  end
  local ok, out = pcall(fn, c, input)
  if not ok then
    if getmetatable(out) == AWS_ERROR then return nil, out end
    error(out, 0)
  end
  if model(svc).operations[operation].class ~= "read" then audit(c, call, out) end
  return out or {}
end

-- the sandbox's own endpoints (unsigned, loopback): /_sandbox/...
local function admin(req)
  if req.path == "/_sandbox/audit" then
    local evs = store.events(0, 100000) or {}
    local out = json.array()
    for _, e in ipairs(evs) do
      if e.kind == "sandbox.audit" then out[#out + 1] = e.data end
    end
    return { status = 200, headers = { ["content-type"] = "application/json" }, body = json.encode(out) }
  elseif req.path == "/_sandbox/faults" and req.method == "POST" then
    local spec, err = json.decode(req.body)
    if spec then spec, err = faults.configure(spec) end
    if not spec then return { status = 400, body = tostring(err) .. "\n" } end
    return { status = 200, body = "ok" }
  elseif req.path == "/_sandbox/policy" and req.method == "POST" then
    -- {"policy": {...IAM policy document...}} sets the caller's identity
    -- policy, {"policy": null} removes it
    local body = json.decode(req.body or "")
    if type(body) ~= "table" or json.is_array(body) or body.policy == nil then
      return { status = 400, body = "expected {\"policy\": POLICY_DOCUMENT} or {\"policy\": null}\n" }
    end
    local ok, err = policy.set(body.policy)
    if not ok then return { status = 400, body = tostring(err.message or err) .. "\n" } end
    return { status = 200, body = "ok" }
  elseif req.path == "/_sandbox/policy" and req.method == "GET" then
    return { status = 200, headers = { ["content-type"] = "application/json" },
             body = json.encode { policy = policy.get() or json.null } }
  elseif req.path == "/_sandbox/nodes/fail" and req.method == "POST" then
    -- {cluster, node_id [, region, message]}: a HyperPod node fails now
    local a = json.decode(req.body)
    if type(a) ~= "table" or type(a.cluster) ~= "string" or type(a.node_id) ~= "string" then
      return { status = 400, body = "expected {\"cluster\": HYPERPOD_CLUSTER, \"node_id\": NODE_ID}\n" }
    end
    local ok, err = require("sandbox.k8s.controllers.nodes").fail(a.region or M.default_region, a.cluster,
      a.node_id, a.message)
    if not ok then return { status = 404, body = tostring(err) .. "\n" } end
    return { status = 200, body = "ok" }
  elseif req.path == "/_sandbox/quotas" and req.method == "POST" then
    -- {quota (a name or code), value [, region, service_code]}: the
    -- account's applied quota changes (Service Quotas answers it, and
    -- SageMaker holds requests to it)
    local a = json.decode(req.body or "")
    if type(a) ~= "table" or type(a.quota) ~= "string" or type(a.value) ~= "number" then
      return { status = 400, body = "expected {\"quota\": NAME_OR_CODE, \"value\": NUMBER}\n" }
    end
    local q, err = require("sandbox.services.servicequotas").set(a.region or M.default_region, a.quota, a.value,
      a.service_code)
    if not q then return { status = 404, body = tostring(err) .. "\n" } end
    return { status = 200, headers = { ["content-type"] = "application/json" },
             body = json.encode { quota_code = q.QuotaCode, quota_name = q.QuotaName, value = q.Value } }
  elseif req.path == "/_sandbox/health" then
    return { status = 200, headers = { ["content-type"] = "application/json" },
             body = json.encode { ok = true, account = auth.ACCOUNT, speed = M.speed } }
  end
  return { status = 404, body = "unknown sandbox endpoint\n" }
end

-- start{listen, speed, faults, credentials = {[access_key] = secret},
--       policy = DOCUMENT | policy_file = PATH} -> srv | nil, err
-- (a hypd.http_server: srv.port, srv:stop()). policy (or the JSON file
-- policy_file) is the identity policy every signed request is held to
-- (sandbox.policy); without either, the caller may do anything.
function M.start(opts)
  opts = opts or {}
  local doc = opts.policy
  if doc == nil and opts.policy_file then
    local lerr
    doc, lerr = policy.load(opts.policy_file)
    if not doc then return nil, lerr end
  end
  local pok, perr = policy.set(doc)
  if not pok then return nil, perr end
  auth.extra = opts.credentials or {}
  M.speed = tonumber(opts.speed) or 1
  if M.speed <= 0 then return errors.fail("VALIDATION", "speed must be a positive number", { field = "speed" }) end
  local listen = opts.listen or "127.0.0.1:4566"
  if not tostring(listen):match("^127%.%d+%.%d+%.%d+:%d+$") then
    return errors.fail("VALIDATION", "listen: the sandbox serves plain HTTP on loopback only " ..
      "(127.0.0.0/8), e.g. 127.0.0.1:4566; got '" .. tostring(listen) .. "'", { field = "listen" })
  end
  if opts.faults then
    local ok, err = faults.configure(opts.faults)
    if not ok then return nil, err end
  end
  -- a simulated remote AWS: the host's interrupt (SIGTERM to hypd serve
  -- --sandbox) does not strike its requests, transitions or clusters
  -- halfway (hypd.task's steady), as it leaves a real account alone; every
  -- client of the simulated account (hypd's AWS layer with its pool of 64
  -- connections, the aws CLI, tests) is on this machine: one address, so no
  -- per-client limit below the server's own
  local me = task.current()
  local was = me and me.steady
  if me then me.steady = true end
  local srv, err = server.start { listen = listen, max_body = 64 << 20, steady = true, max_per_client = 1000,
    handler = function(req)
      if req.path:sub(1, 10) == "/_sandbox/" then return admin(req) end
      return M.handle(req)
    end }
  if not srv then
    if me then me.steady = was end
    return nil, err
  end
  local resumed = resume_scheduled()
  if resumed > 0 then log.info("sandbox", "resumed %d scheduled changes", resumed) end
  -- EKS tokens name this endpoint as their STS host
  require("sandbox.k8s.auth").sts_hosts["127.0.0.1:" .. srv.port] = true
  local served = require("sandbox.k8s").resume()
  if served > 0 then log.info("sandbox", "serving the Kubernetes API of %d clusters", served) end
  if me then me.steady = was end
  return srv
end

M.env = function(port)
  return {
    AWS_ENDPOINT_URL = "http://127.0.0.1:" .. port,
    AWS_REGION = M.default_region,
    AWS_DEFAULT_REGION = M.default_region,
    AWS_ACCESS_KEY_ID = auth.ACCESS_KEY,
    AWS_SECRET_ACCESS_KEY = auth.SECRET_KEY,
  }
end

-- exports(port [, indent]) -> the shell lines that point an AWS client
-- (the AWS CLI, an SDK, hypd doctor and kubeconfig, kubectl's exec plugin)
-- at the sandbox on port
function M.exports(port, indent)
  local env, out = M.env(port), {}
  for _, k in ipairs { "AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID",
                       "AWS_SECRET_ACCESS_KEY" } do
    out[#out + 1] = (indent or "") .. "export " .. k .. "=" .. env[k] .. "\n"
  end
  return table.concat(out)
end

-- serve{listen, speed, faults, policy, policy_file}: the `hypd sandbox`
-- command; runs until interrupted
function M.serve(opts)
  -- the simulated account lives in the store and its scheduled changes
  -- resume at start: one process per state directory, like hypd serve
  local held, lerr = require("hypd.statelock").acquire { command = "hypd sandbox --listen " ..
    tostring(opts and opts.listen or "127.0.0.1:4566"), wait = true }
  if not held then error(lerr, 0) end
  local srv, err = M.start(opts)
  if not srv then error(err, 0) end
  local port = srv.port
  io.stdout:write(M.exports(port))
  io.stdout:write("# hypd sandbox: account ", auth.ACCOUNT, ", listening on 127.0.0.1:", port,
    ", speed ", M.speed, core.virtual() and " (virtual clock)" or "", "; Ctrl-C stops it\n")
  io.stdout:flush()
  require("hypd.task").forever()
end

M.AWS_ERROR = AWS_ERROR
return M
