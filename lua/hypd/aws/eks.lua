-- hypd.aws.eks: what the C host needs to make an EKS bearer token.
-- prepare{cluster, region, profile, sts_endpoint_url} resolves the region, the STS endpoint
-- (with the usual overrides) and fresh credentials; the token itself is made
-- in C so it never passes through Lua.
-- CLUSTER_NAME is EKS' rule for a cluster's name (a JSON Schema pattern:
-- the workflows' cluster parameter uses it, as hypd.aws.eks_cluster_name);
-- check_cluster(name) raises VALIDATION (field cluster) for a name it refuses.
local aws = require "hypd.aws"
local config = require "hypd.config"
local endpoints = require "hypd.aws.endpoints"
local errors = require "hypd.errors"
local regex = require "hypd.regex"

local M = {}

-- 1 to 100 letters, digits, '-' or '_', starting with a letter or digit
M.CLUSTER_NAME = "^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$"

function M.check_cluster(name)
  if type(name) ~= "string" or not regex.compile(M.CLUSTER_NAME):test(name) then
    errors.raise("VALIDATION", "cluster: an EKS cluster name (letters, digits, '-', '_'; up to 100) is required",
      { field = "cluster" })
  end
end

function M.prepare(args)
  M.check_cluster(args.cluster)
  local profile = args.profile or config.profile
  local region = aws.region { region = args.region, profile = profile }
  local model = aws.model("sts")
  local ep, err = endpoints.resolve(model.metadata, region, profile, { endpoint_url = args.sts_endpoint_url })
  if not ep then errors.raise("VALIDATION", err, { field = "endpoint_url" }) end
  aws.credentials(profile)
  return { sts_url = ep.url, region = ep.signing_region, profile = profile, cluster = args.cluster }
end

return M
