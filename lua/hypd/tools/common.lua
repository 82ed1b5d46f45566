-- hypd.tools.common: what several built-in tools share.
local aws = require "hypd.aws"
local op = require "hypd.op"

local M = {}

M.REGION = { type = "string", pattern = "^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\\d$",
  pattern_help = "an AWS region name like us-west-2",
  description = "AWS region, e.g. us-west-2 (default: the configured region)" }

-- aws_opts(region) -> options for aws.call: the region resolved, plus the
-- operation layer's endpoint options
function M.aws_opts(region)
  local o = { region = aws.region { region = region } }
  for k, v in pairs(op.aws_opts) do o[k] = v end
  return o
end

return M
