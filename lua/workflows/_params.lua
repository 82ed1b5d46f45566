-- _params: the parameter rules several tools share, defined once.
--   local P = require "_params"
--   params = { region = P.region, cluster = P.cluster, ... }
local M = {}

M.region = { type = "string", pattern = "^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\\d$",
  pattern_help = "an AWS region name like us-west-2",
  description = "AWS region, e.g. us-west-2 (default: the configured region)" }

M.cluster = { type = "string", pattern = hypd.aws.eks_cluster_name,
  pattern_help = "an EKS cluster name: 1 to 100 letters, digits, '-' or '_', starting with a letter or digit",
  description = "EKS cluster name (default: the active cluster; see cluster_switch)" }

M.cluster_tag = { type = "string", pattern = "^[a-z][a-z0-9-]{1,30}[a-z0-9]$",
  pattern_help = "a cluster tag: 3 to 32 characters of a-z, 0-9 and '-', starting with a letter",
  description = "Short lowercase name of the cluster (3 to 32 characters: a-z, 0-9, '-'). It names every " ..
    "resource hypd makes for it: EKS cluster hypd-<tag>, VPC hypd-<tag>-vpc, ...; all are tagged " ..
    "hypd:cluster-tag=<tag>." }

M.operation_id = { type = "string", pattern = "^op-[0-9a-f]{16}$",
  pattern_help = "an operation id: op- and 16 hex digits", description = "the id a mutating tool returned" }

M.wait_seconds = { type = "integer", minimum = 0, maximum = 300, default = 0,
  description = "wait up to this many seconds for a change (the phase or status; for events, a new event) " ..
    "before answering: at once when nothing is at work on it and it is in no passing state (Creating, " ..
    "Pending, ...), else at the first change, else when the time is up; waited = {seconds, ended = settled, " ..
    "changed or timeout} says which. 0 answers at once" }

-- HyperPod decisions, shared by the tools that create and change capacity
M.instance_type = { type = "string", pattern = "^ml\\.[a-z0-9-]+\\.[a-z0-9]+$",
  pattern_help = "a HyperPod instance type like ml.g5.12xlarge (aws_get_instance_types lists them)",
  description = "the HyperPod instance type (aws_get_instance_types lists those the zone offers)" }
M.instance_count = { type = "integer", minimum = 0, maximum = 1000,
  description = "how many instances the group has" }
M.availability_zone = { type = "string", pattern = "^([a-z]{2}-[a-z]+-\\d[a-z]|[a-z]{3,4}\\d-az\\d+)$",
  pattern_help = "an Availability Zone name like us-west-2a or a zone ID like usw2-az1",
  description = "the Availability Zone (name or zone ID) the instances are placed in" }
M.capacity_type = { type = "string", enum = { "on-demand", "spot", "training-plan" }, default = "on-demand",
  description = "how the capacity is bought: on-demand, spot, or a SageMaker training plan (training_plan names it)" }
M.training_plan = { type = "string", pattern = "^[A-Za-z0-9][A-Za-z0-9-]{0,63}$|^arn:aws[a-z-]*:sagemaker:",
  pattern_help = "a training plan name or ARN",
  description = "the SageMaker training plan whose reserved capacity the group uses (capacity_type training-plan)" }
M.instance_group = { type = "string", pattern = "^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$",
  pattern_help = "an instance group name: up to 63 letters, digits and '-'",
  description = "the instance group's name" }

-- with(spec, changes) -> a copy of spec with changes applied
function M.with(spec, changes)
  local out = {}
  for k, v in pairs(spec) do out[k] = v end
  for k, v in pairs(changes or {}) do out[k] = v end
  return out
end

-- where(p) -> region, cluster: what a call with P.cluster and P.region works
-- on (the named cluster, else the active one; the region given, else the
-- active cluster's, else the configured one, else "default"), for targets
function M.where(p)
  local c = hypd.clusters.target(p) or { region = p.region }
  local region = c.region
  if not region then
    local ok, r = pcall(hypd.aws.region, {})
    region = ok and r or "default"
  end
  return region, c.name or "?"
end

return M
