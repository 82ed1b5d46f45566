-- Endpoint resolution: the standard endpoints per partition, and configured
-- endpoints (their precedence is tested in C, tests/c/test_awsconfig.c).
local t = require "hypd.tap"
local endpoints = require "hypd.aws.endpoints"

local SM = { endpointPrefix = "api.sagemaker", signingName = "sagemaker", serviceId = "SageMaker" }
local IAM = { endpointPrefix = "iam", signingName = "iam", serviceId = "IAM" }
local STS = { endpointPrefix = "sts", signingName = "sts", serviceId = "STS" }
local LOGS = { endpointPrefix = "logs", signingName = "logs", serviceId = "CloudWatch Logs" }
local S3 = { endpointPrefix = "s3", serviceId = "S3" }

-- configured endpoints as a table { config_id = {url, source} }
local function resolve(meta, region, configured)
  return endpoints.resolve(meta, region, nil, { configured = function(id)
    local c = (configured or {})[id]
    if c then return c[1], c[2] end
  end })
end

t.test("regional services resolve to <prefix>.<region>.amazonaws.com", function()
  local ep = resolve(SM, "us-west-2")
  t.eq({ ep.url, ep.signing_region, ep.signing_name, ep.source },
    { "https://api.sagemaker.us-west-2.amazonaws.com", "us-west-2", "sagemaker", "standard" })
end)

t.test("STS is regional", function()
  t.eq(resolve(STS, "eu-west-1").url, "https://sts.eu-west-1.amazonaws.com")
end)

t.test("IAM is global per partition and signs in the partition's home region", function()
  local ep = resolve(IAM, "eu-west-1")
  t.eq({ ep.url, ep.signing_region }, { "https://iam.amazonaws.com", "us-east-1" })
  ep = resolve(IAM, "cn-northwest-1")
  t.eq({ ep.url, ep.signing_region }, { "https://iam.cn-north-1.amazonaws.com.cn", "cn-north-1" })
  ep = resolve(IAM, "us-gov-east-1")
  t.eq({ ep.url, ep.signing_region }, { "https://iam.us-gov.amazonaws.com", "us-gov-west-1" })
end)

t.test("China regions use amazonaws.com.cn", function()
  t.eq(resolve(STS, "cn-north-1").url, "https://sts.cn-north-1.amazonaws.com.cn")
end)

t.test("service ids with spaces are looked up in snake case", function()
  t.eq(endpoints.config_id("CloudWatch Logs"), "cloudwatch_logs")
  t.eq(resolve(LOGS, "us-east-1", { cloudwatch_logs = { "http://l:1", "profile endpoint_url" } }).url, "http://l:1")
end)

t.test("a configured endpoint replaces the standard one and keeps the signing region", function()
  local ep = resolve(SM, "us-west-2", { sagemaker = { "http://127.0.0.1:4566/", "AWS_ENDPOINT_URL_<SERVICE>" } })
  t.eq({ ep.url, ep.source, ep.host, ep.scheme, ep.signing_region },
    { "http://127.0.0.1:4566", "AWS_ENDPOINT_URL_SAGEMAKER", "127.0.0.1:4566", "http", "us-west-2" })
end)

t.test("an explicit endpoint_url for one call wins over configuration", function()
  local ep = endpoints.resolve(SM, "us-west-2", nil, { endpoint_url = "http://call:1",
    configured = function() return "http://configured:1", "AWS_ENDPOINT_URL" end })
  t.eq({ ep.url, ep.source }, { "http://call:1", "call option" })
end)

t.test("the real configured lookup reads the environment (AWS_ENDPOINT_URL is unset in the suite)", function()
  t.eq(endpoints.resolve(STS, "us-west-2").source, "standard")
end)

t.test("an endpoint URL without a scheme is refused with the place it came from", function()
  local ep, err = resolve(SM, "us-west-2", { sagemaker = { "localhost:4566", "AWS_ENDPOINT_URL" } })
  t.eq(ep, nil)
  t.like(err, "AWS_ENDPOINT_URL")
end)

t.test("S3 uses virtual-hosted buckets except for IP endpoints, odd names or path style", function()
  local real = resolve(S3, "us-west-2")
  t.ok(endpoints.s3_virtual_host(real, "my-bucket"), "DNS-safe name on AWS")
  t.ok(not endpoints.s3_virtual_host(real, "My_Bucket"), "not DNS-safe")
  t.ok(not endpoints.s3_virtual_host(real, "my-bucket", true), "path style asked for")
  local lo = resolve(S3, "us-west-2", { s3 = { "http://127.0.0.1:4566", "AWS_ENDPOINT_URL" } })
  t.ok(not endpoints.s3_virtual_host(lo, "my-bucket"), "loopback IP endpoint")
end)
