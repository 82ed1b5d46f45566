-- hypd.aws.endpoints: where a service's requests go, and how they are signed.
--
-- Standard resolution: https://<endpointPrefix>.<region>.<dnsSuffix>, with
-- IAM global per partition and STS regional. Configured endpoints override
-- it exactly as the AWS SDKs apply them (AWS_ENDPOINT_URL_<SERVICE>, then
-- AWS_ENDPOINT_URL, then the profile's services section, then the profile's
-- endpoint_url; none with AWS_IGNORE_CONFIGURED_ENDPOINT_URLS): that order
-- lives in C (awsconfig_endpoint_url), shared with the credential chain's
-- STS calls. This is how the hypd sandbox and LocalStack-style endpoints
-- are reached.
local _aws = require "hypd._aws"

local M = {}

local PARTITIONS = {
  { prefix = "cn-", name = "aws-cn", suffix = "amazonaws.com.cn", iam_region = "cn-north-1" },
  { prefix = "us-gov-", name = "aws-us-gov", suffix = "amazonaws.com", iam_region = "us-gov-west-1" },
  { prefix = "", name = "aws", suffix = "amazonaws.com", iam_region = "us-east-1" },
}

function M.partition(region)
  for _, p in ipairs(PARTITIONS) do
    if region:sub(1, #p.prefix) == p.prefix then return p end
  end
end

-- "CloudWatch Logs" -> "cloudwatch_logs": the service id as the SDKs
-- spell it in AWS_ENDPOINT_URL_<ID> and in config services sections
function M.config_id(service_id)
  return (service_id:gsub("[ %-]", "_"):lower())
end

-- resolve(meta, region, profile [, opts]) -> { url, host, scheme,
-- signing_region, signing_name, source } | nil, message
--   meta: the model's metadata (endpointPrefix, signingName, serviceId)
--   opts.endpoint_url: an explicit endpoint for this call (wins over all)
--   opts.configured(config_id, profile) -> url, source: the configured
--   endpoint lookup (default: the C one; tests pass their own)
function M.resolve(meta, region, profile, opts)
  opts = opts or {}
  local prefix = meta.endpointPrefix
  local signing_name = meta.signingName or prefix
  local part = M.partition(region)
  local url, source = opts.endpoint_url, "call option"
  if not url then
    local id = M.config_id(meta.serviceId)
    local found, how = (opts.configured or _aws.endpoint_url)(id, profile)
    if found == nil and how ~= nil then return nil, how.message or tostring(how) end
    url, source = found, how
    if source == "AWS_ENDPOINT_URL_<SERVICE>" then source = "AWS_ENDPOINT_URL_" .. id:upper() end
  end
  local signing_region = region
  if prefix == "iam" then signing_region = part.iam_region end
  if not url then
    source = "standard"
    if prefix == "iam" then
      url = part.name == "aws" and "https://iam.amazonaws.com"
        or part.name == "aws-us-gov" and "https://iam.us-gov.amazonaws.com"
        or ("https://iam." .. part.iam_region .. "." .. part.suffix)
    else
      url = "https://" .. prefix .. "." .. region .. "." .. part.suffix
    end
  end
  url = url:gsub("/+$", "")
  local scheme, host = url:match("^(https?)://([^/]+)")
  if not scheme then
    return nil, "endpoint URL '" .. url .. "' (from " .. source .. ") must start with http:// or https://"
  end
  return { url = url, scheme = scheme, host = host, signing_region = signing_region,
           signing_name = signing_name, source = source }
end

-- S3 buckets: virtual-hosted style unless the bucket name is not DNS-safe,
-- the endpoint is an IP address or localhost, or path style is asked for.
function M.s3_virtual_host(endpoint, bucket, path_style)
  if path_style then return false end
  local hostname = endpoint.host:gsub(":%d+$", "")
  if hostname:match("^%d+%.%d+%.%d+%.%d+$") or hostname == "localhost" or hostname:find("^%[") then
    return false
  end
  if #bucket < 3 or #bucket > 63 or not bucket:match("^[a-z0-9][a-z0-9%-]*[a-z0-9]$") then return false end
  return true
end

return M
