-- sandbox.k8s.controllers._aws: the simulated AWS account as a controller
-- (or a test) reaches it in-process. ctx(region, service) is shaped like the
-- ctx the sandbox gives operations and transitions (sandbox/init.lua), so
-- a service's operation or transition can run without a signed request:
-- the Kubernetes side asks HyperPod to replace or reboot a node this way.
-- ctx:later persists the scheduled transition under sandbox/later/ exactly
-- as the sandbox does, so a restarted sandbox still runs it.
local auth = require "sandbox.auth"
local core = require "hypd.core"
local faults = require "sandbox.faults"
local json = require "hypd.json"
local log = require "hypd.log"
local state = require "sandbox.state"
local store = require "hypd.store"
local sys = require "hypd.sys"
local task = require "hypd.task"

local M = {}

local function service(name) return require("sandbox.services." .. name) end
local function scope(name, region) return service(name).scope == "global" and "global" or region end

local function hex(n)
  return (sys.random_bytes((n + 1) // 2):gsub(".", function(c) return string.format("%02x", c:byte()) end)):sub(1, n)
end

local Ctx = {}
Ctx.__index = Ctx

-- ctx(region, service [, operation]) -> a ctx for that service's records
function M.ctx(region, svc, operation)
  return setmetatable({ account = auth.ACCOUNT, region = region, service = svc,
    operation = operation or "(sandbox.k8s)",
    principal = { arn = auth.USER, user_id = auth.USER_ID, account = auth.ACCOUNT },
    state = state.view(scope(svc, region), svc) }, Ctx)
end

function Ctx.now() return core.now() end
function Ctx.hex(n) return hex(n) end
function Ctx.id(prefix) return prefix .. "-0" .. hex(16) end

function Ctx.error(code, message, status, fields)
  error(setmetatable({ code = code, message = message, status = status or 400, fields = fields },
    require("sandbox").AWS_ERROR), 0)
end

function Ctx:arn(resource, svc)
  svc = svc or self.service
  return string.format("arn:aws:%s:%s:%s:%s", svc, scope(svc, self.region) == "global" and "" or self.region,
    auth.ACCOUNT, resource)
end

function Ctx:view(name) return state.view(scope(name, self.region), name) end

function Ctx:fault(kind, args) return faults.applies(kind, args, self) end

local function run(job)
  task.spawn(function()
    local wait = job.at - core.now()
    if wait > 0 then task.sleep(wait) end
    store.delete(job.key)
    local fn = service(job.service).transitions[job.transition]
    if not fn then return log.error("sandbox", "no transition %s in %s", job.transition, job.service) end
    local ok, err = pcall(fn, M.ctx(job.region, job.service, "(transition " .. job.transition .. ")"), job.args or {})
    if not ok then log.error("sandbox", "transition %s.%s failed: %s", job.service, job.transition, tostring(err)) end
  end, { name = "sandbox " .. job.service .. "." .. job.transition, daemon = true })
end

function Ctx:later(seconds, transition, args)
  local at = core.now() + seconds / require("sandbox.k8s.controllers._ctl").speed()
  local key = string.format("sandbox/later/%020.6f-%s", at, hex(8))
  local job = { key = key, at = at, service = self.service, region = self.region, transition = transition,
    args = args or json.object() }
  assert(store.put(key, job))
  run(job)
end

-- call(region, service, operation, input) -> output | nil, err (the AWS
-- error table: code, message, status)
function M.call(region, svc, op, input)
  local fn = service(svc).operations[op]
  if not fn then return nil, { code = "UnsupportedOperation", message = svc .. " " .. op, status = 400 } end
  local ok, out = pcall(fn, M.ctx(region, svc, op), input or json.object())
  if ok then return out end
  if type(out) ~= "table" then out = { code = "InternalFailure", message = tostring(out), status = 500 } end
  return nil, out
end

return M
