-- hypd.tools.common: what several built-in tools share.
local aws = require "hypd.aws"

local M = {}

M.REGION = { type = "string", pattern = "^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\\d$",
  pattern_help = "an AWS region name like us-west-2",
  description = "AWS region, e.g. us-west-2 (default: the configured region)" }

-- aws_opts(region) -> options for aws.call: the region resolved
function M.aws_opts(region)
  local o = { region = aws.region { region = region } }
  return o
end

return M
