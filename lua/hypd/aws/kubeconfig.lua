-- hypd.aws.kubeconfig: a kubeconfig for an EKS cluster that uses
-- `hypd eks-token` as its exec credential plugin, the same shape
-- `aws eks update-kubeconfig` writes (kubectl reads it as is).
local aws = require "hypd.aws"
local config = require "hypd.config"
local eks = require "hypd.aws.eks"
local errors = require "hypd.errors"

local M = {}

-- YAML scalars: quote anything that is not plainly safe
local function q(s)
  s = tostring(s)
  if s:match("^[%w][%w%._/:%-]*$") and not s:match(":$") then return s end
  return '"' .. s:gsub('[\\"]', "\\%0") .. '"'
end

-- build{cluster, region, profile, command} -> kubeconfig text
function M.build(args)
  eks.check_cluster(args.cluster)
  local profile = args.profile or config.profile
  local region = aws.region { region = args.region, profile = profile }
  local c = aws.call("eks", "DescribeCluster", { name = args.cluster }, { region = region, profile = profile }).cluster
  if c.status ~= "ACTIVE" and c.status ~= "UPDATING" then
    errors.raise("STATE", string.format("cluster %s is %s; its API is reachable once it is ACTIVE",
      args.cluster, tostring(c.status)))
  end
  local ca = c.certificateAuthority and c.certificateAuthority.data
  if not c.endpoint or not ca then
    errors.raise("STATE", "cluster " .. args.cluster .. " has no endpoint or certificate authority yet")
  end
  local name = c.arn
  local lines = {
    "apiVersion: v1",
    "kind: Config",
    "clusters:",
    "- cluster:",
    "    certificate-authority-data: " .. q(ca),
    "    server: " .. q(c.endpoint),
    "  name: " .. q(name),
    "contexts:",
    "- context:",
    "    cluster: " .. q(name),
    "    user: " .. q(name),
    "  name: " .. q(name),
    "current-context: " .. q(name),
    "preferences: {}",
    "users:",
    "- name: " .. q(name),
    "  user:",
    "    exec:",
    "      apiVersion: client.authentication.k8s.io/v1beta1",
    "      command: " .. q(args.command or "hypd"),
    "      args:",
    "      - eks-token",
    "      - --cluster",
    "      - " .. q(args.cluster),
    "      - --region",
    "      - " .. q(region),
  }
  if profile then
    lines[#lines + 1] = "      - --profile"
    lines[#lines + 1] = "      - " .. q(profile)
  end
  lines[#lines + 1] = "      interactiveMode: Never"
  lines[#lines + 1] = "      provideClusterInfo: false"
  return table.concat(lines, "\n") .. "\n"
end

return M
