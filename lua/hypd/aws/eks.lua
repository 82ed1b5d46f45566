-- hypd.aws.eks: what the C host needs to make an EKS bearer token.
-- prepare{cluster, region, profile, sts_endpoint_url} resolves the region, the STS endpoint
-- (with the usual overrides) and fresh credentials; the token itself is made
-- in C so it never passes through Lua.
local aws = require "hypd.aws"
local config = require "hypd.config"
local endpoints = require "hypd.aws.endpoints"
local errors = require "hypd.errors"

local M = {}

function M.prepare(args)
  if type(args.cluster) ~= "string" or not args.cluster:match("^[%w][%w_%-]*$") or #args.cluster > 100 then
    errors.raise("VALIDATION", "cluster: an EKS cluster name (letters, digits, '-', '_'; up to 100) is required",
      { field = "cluster" })
  end
  local profile = args.profile or config.profile
  local region = aws.region { region = args.region, profile = profile }
  local model = aws.model("sts")
  local ep, err = endpoints.resolve(model.metadata, region, profile, { endpoint_url = args.sts_endpoint_url })
  if not ep then errors.raise("VALIDATION", err, { field = "endpoint_url" }) end
  aws.credentials(profile)
  return { sts_url = ep.url, region = ep.signing_region, profile = profile, cluster = args.cluster }
end

return M
