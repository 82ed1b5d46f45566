-- The simulated Service Quotas API (regional), read side: the quotas of
-- the account as AWS applies them, for Amazon SageMaker's HyperPod cluster
-- usage ("ml.p5.48xlarge for cluster usage", one per HyperPod instance
-- type) and the services it knows. GetServiceQuota, ListServiceQuotas,
-- GetAWSDefaultServiceQuota, ListAWSDefaultServiceQuotas, ListServices.
--
-- Records: "quota" (id "<service code>/<quota code>"): { ServiceCode,
-- QuotaCode, QuotaName, Value, Default, Description }. A region's quotas are
-- made the first time they are read, at their AWS default; a test lowers
-- one with M.set (in process) or POST /_sandbox/quotas (sandbox.init), and
-- SageMaker's CreateCluster and UpdateCluster hold requests to them
-- (services/sagemaker/quotas).
local D = require "sandbox.services.eks.deps"
local core = require "hypd.core"
local sys = require "hypd.sys"
local state = require "sandbox.state"

local M = { scope = "regional", operations = {}, transitions = {} }
local ops = M.operations

M.SERVICES = { sagemaker = "Amazon SageMaker" }

-- the HyperPod types with scarce capacity get the lower default
local SCARCE = { p4d = true, p4de = true, p5 = true, p5e = true, p5en = true, ["p6-b200"] = true,
  ["p6-b300"] = true, ["p6e-gb200"] = true, trn2 = true, trn2u = true }
M.DEFAULT, M.DEFAULT_SCARCE = 100, 16

-- cluster_usage(itype) -> the quota name SageMaker gives HyperPod capacity of a type
function M.cluster_usage(itype) return itype .. " for cluster usage" end

-- code(name) -> a stable "L-1A2B3C4D" quota code for a quota name
function M.code(name) return "L-" .. sys.digest("sha256", "sagemaker/" .. name, "hex"):sub(1, 8):upper() end

local function view(region) return state.view(region, "servicequotas") end

-- seed(region): the region's SageMaker HyperPod quotas at their defaults, once
local function seed(region)
  local v = view(region)
  if v:get("seeded", "sagemaker") then return end
  for _, itype in ipairs(require "hypd.aws.hyperpod_types") do
    local name = M.cluster_usage(itype)
    local code = M.code(name)
    local value = SCARCE[itype:match("^ml%.([^.]+)%.")] and M.DEFAULT_SCARCE or M.DEFAULT
    v:put("quota", "sagemaker/" .. code, { ServiceCode = "sagemaker", QuotaCode = code, QuotaName = name,
      Value = value, Default = value,
      Description = "The maximum number of " .. itype .. " instances allowed across all SageMaker HyperPod " ..
        "clusters in this account in the current Region." })
  end
  v:put("seeded", "sagemaker", { at = core.now() })
end

-- all(region, service) -> the quota records of a service, by quota name
local function all(region, service)
  seed(region)
  local out = {}
  for _, q in ipairs(view(region):list("quota")) do
    if q.ServiceCode == service then out[#out + 1] = q end
  end
  table.sort(out, function(a, b) return a.QuotaName < b.QuotaName end)
  return out
end

-- find(region, name_or_code [, service]) -> the quota record or nil
function M.find(region, key, service)
  for _, q in ipairs(all(region, service or "sagemaker")) do
    if q.QuotaCode == key or q.QuotaName == key then return q end
  end
end

-- set(region, name_or_code, value [, service]) -> the record | nil, message:
-- the account's applied value changes (a test lowers a quota)
function M.set(region, key, value, service)
  local q = M.find(region, key, service)
  if not q then return nil, "no quota " .. tostring(key) end
  if type(value) ~= "number" or value < 0 then return nil, "value must be a number >= 0" end
  q.Value = value
  view(region):put("quota", q.ServiceCode .. "/" .. q.QuotaCode, q)
  return q
end

local function out(ctx, q, default)
  return { ServiceCode = q.ServiceCode, ServiceName = M.SERVICES[q.ServiceCode], QuotaCode = q.QuotaCode,
    QuotaName = q.QuotaName, QuotaArn = string.format("arn:aws:servicequotas:%s:%s:%s/%s", ctx.region, ctx.account,
      q.ServiceCode, q.QuotaCode),
    Value = default and q.Default or q.Value, Unit = "None", Adjustable = true, GlobalQuota = false,
    QuotaAppliedAtLevel = "ACCOUNT", Description = q.Description }
end

local function service_of(ctx, input)
  local code = input.ServiceCode
  if type(code) ~= "string" or code == "" then
    ctx.error("ValidationException", "1 validation error detected: Value at 'serviceCode' failed to satisfy " ..
      "constraint: Member must not be null")
  end
  if not M.SERVICES[code] then
    ctx.error("NoSuchResourceException", "The request failed because the specified service does not exist.")
  end
  return code
end

local function one(ctx, input, default)
  local service = service_of(ctx, input)
  local q = type(input.QuotaCode) == "string" and M.find(ctx.region, input.QuotaCode, service)
  if not q or q.QuotaCode ~= input.QuotaCode then
    ctx.error("NoSuchResourceException", "The request failed because the specified quota does not exist.")
  end
  return { Quota = out(ctx, q, default) }
end

local function many(ctx, input, default)
  local service = service_of(ctx, input)
  local list = {}
  for _, q in ipairs(all(ctx.region, service)) do
    if not input.QuotaCode or input.QuotaCode == q.QuotaCode then list[#list + 1] = out(ctx, q, default) end
  end
  local page, nxt = D.page(ctx, list, input.MaxResults, input.NextToken, 100, "InvalidPaginationTokenException")
  return { Quotas = page, NextToken = nxt }
end

function ops.GetServiceQuota(ctx, input) return one(ctx, input, false) end
function ops.GetAWSDefaultServiceQuota(ctx, input) return one(ctx, input, true) end
function ops.ListServiceQuotas(ctx, input) return many(ctx, input, false) end
function ops.ListAWSDefaultServiceQuotas(ctx, input) return many(ctx, input, true) end

function ops.ListServices(ctx, input)
  local list = {}
  for code, name in pairs(M.SERVICES) do list[#list + 1] = { ServiceCode = code, ServiceName = name } end
  table.sort(list, function(a, b) return a.ServiceCode < b.ServiceCode end)
  local page, nxt = D.page(ctx, list, input.MaxResults, input.NextToken, 100, "InvalidPaginationTokenException")
  return { Services = page, NextToken = nxt }
end

return M
