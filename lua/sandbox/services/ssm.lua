-- The simulated AWS Systems Manager Parameter Store (regional), its read
-- side for the public parameters a user looks up before making nodes:
-- GetParameter and GetParameters of the Amazon EKS optimized AMI
-- parameters, /aws/service/eks/optimized-ami/<version>/<ami path>/recommended
-- (a JSON document) and its image_id, image_name and release_version
-- children, answered from the same AMI catalogue the sandbox's managed node
-- groups launch from (services/eks/amis.lua). Any other name answers
-- ParameterNotFound (with no message, as SSM answers).
local amis = require "sandbox.services.eks.amis"
local json = require "hypd.json"

local M = { scope = "regional", operations = {}, transitions = {} }
local ops = M.operations

local PREFIX = "/aws/service/eks/optimized-ami/"
-- when the catalogue's release was published: amis.RELEASE_DATE, 12:00 UTC
local PUBLISHED = 1762171200

-- lookup(ctx, name) -> the Parameter named, or nil
local function lookup(ctx, name)
  if type(name) ~= "string" or name:sub(1, #PREFIX) ~= PREFIX then return nil end
  local version, rest = name:sub(#PREFIX + 1):match("^(1%.%d+)/(.+)$")
  if not version then return nil end
  local path, leaf = rest:match("^(.-)/recommended/([%w_]+)$")
  if not path then path = rest:match("^(.-)/recommended$") end
  local ami = path and amis.published(ctx.region, version, path)
  if not ami then return nil end
  local value
  if leaf then
    value = ami[leaf]
    if type(value) ~= "string" then return nil end
  else
    value = json.encode { schema_version = "2", image_id = ami.image_id, image_name = ami.image_name,
      release_version = ami.release_version }
  end
  return { Name = name, Type = "String", Value = value, Version = 1, LastModifiedDate = PUBLISHED,
    ARN = "arn:aws:ssm:" .. ctx.region .. "::parameter" .. name, DataType = "text" }
end

function ops.GetParameter(ctx, input)
  local p = lookup(ctx, input.Name)
  if not p then ctx.error("ParameterNotFound", "", 400) end
  return { Parameter = p }
end

function ops.GetParameters(ctx, input)
  local found, missing = json.array(), json.array()
  for _, name in ipairs(input.Names or {}) do
    local p = lookup(ctx, name)
    if p then found[#found + 1] = p else missing[#missing + 1] = name end
  end
  return { Parameters = found, InvalidParameters = missing }
end

return M
