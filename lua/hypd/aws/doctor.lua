-- hypd.aws.doctor: what hypd would use to reach AWS, checked for real:
-- the region and where it came from, the credential source (never a
-- secret), the caller identity from STS GetCallerIdentity, and the endpoint
-- of every service with where it came from.
local aws = require "hypd.aws"
local config = require "hypd.config"
local endpoints = require "hypd.aws.endpoints"
local errors = require "hypd.errors"
local _aws = require "hypd._aws"

local M = {}

local function region_source(opts, profile)
  if opts.region then return "--region" end
  if config.region then return "--region" end
  if os.getenv("AWS_REGION") then return "AWS_REGION" end
  if os.getenv("AWS_DEFAULT_REGION") then return "AWS_DEFAULT_REGION" end
  if _aws.region(profile) then return "profile " .. (profile or "default") end
  return "instance metadata"
end

function M.run(opts)
  opts = opts or {}
  local profile = opts.profile or config.profile
  local cfg = _aws.config(profile)
  local report = { profile = cfg.profile or profile or "default", ok = true }
  local region, rerr = errors.try(aws.region, { region = opts.region, profile = profile })
  if not region then
    report.ok, report.region_error = false, errors.public(rerr).message
    return report
  end
  report.region = region
  report.region_source = region_source(opts, profile)
  local creds, cerr = errors.try(aws.credentials, profile)
  if creds then
    report.credentials = { source = creds.source, expiration = creds.expiration }
  else
    report.ok, report.credentials_error = false, errors.public(cerr).message
  end
  report.endpoints = {}
  local names = {}
  for name in pairs(aws.SERVICES) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    local ep, err = endpoints.resolve(aws.model(name).metadata, region, profile)
    report.endpoints[name] = ep and { url = ep.url, source = ep.source } or { error = err }
  end
  if creds then
    local id, err = aws.try("sts", "GetCallerIdentity", {}, { region = region, profile = profile, max_attempts = 2 })
    if id then
      report.identity = { account = id.Account, arn = id.Arn, user_id = id.UserId }
    else
      report.ok = false
      report.identity_error = errors.public(err).code .. ": " .. errors.public(err).message
    end
  end
  return report
end

-- format(report) -> text for people
function M.format(r)
  local lines = {}
  local function add(fmt, ...) lines[#lines + 1] = string.format(fmt, ...) end
  add("profile      %s", r.profile)
  add("region       %s", r.region and (r.region .. "  (from " .. r.region_source .. ")") or ("MISSING: " .. r.region_error))
  if r.credentials then
    add("credentials  %s%s", r.credentials.source, r.credentials.expiration
      and os.date("!  (expires %Y-%m-%dT%H:%M:%SZ)", math.floor(r.credentials.expiration)) or "")
  elseif r.credentials_error then
    add("credentials  MISSING: %s", r.credentials_error)
  end
  if r.identity then
    add("identity     %s  (account %s)", r.identity.arn, r.identity.account)
  elseif r.identity_error then
    add("identity     FAILED: %s", r.identity_error)
  end
  if r.endpoints then
    add("endpoints")
    local names = {}
    for name in pairs(r.endpoints) do names[#names + 1] = name end
    table.sort(names)
    for _, name in ipairs(names) do
      local e = r.endpoints[name]
      add("  %-15s %s", name, e.url and (e.url .. (e.source ~= "standard" and "  (" .. e.source .. ")" or ""))
        or ("ERROR: " .. tostring(e.error)))
    end
  end
  add("%s", r.ok and "ok" or "PROBLEMS FOUND")
  return table.concat(lines, "\n")
end

return M
