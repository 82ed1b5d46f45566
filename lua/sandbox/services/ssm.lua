-- The simulated AWS Systems Manager Parameter Store (regional), its read
-- side for the public parameters a user looks up before making nodes:
-- GetParameter and GetParameters of the Amazon EKS optimized AMI
-- parameters, /aws/service/eks/optimized-ami/<version>/<ami path>/recommended
-- (a JSON document) and its image_id, image_name and release_version
-- children, answered from the same AMI catalogue the sandbox's managed node
-- groups launch from (services/eks/amis.lua), and Debian's own public
-- parameters of its Debian 12 images, /aws/service/debian/release/12/latest/
-- amd64 or arm64 (12 or bookworm; the image id is the region's, stable).
-- Any other name answers ParameterNotFound (with no message, as SSM answers).
local amis = require "sandbox.services.eks.amis"
local ctl_ = require "sandbox.k8s.controllers._ctl"
local json = require "hypd.json"

local M = { scope = "regional", operations = {}, transitions = {} }
local ops = M.operations

local PREFIX = "/aws/service/eks/optimized-ami/"
-- when the catalogue's release was published: amis.RELEASE_DATE, 12:00 UTC
local PUBLISHED = 1762171200

-- debian(ctx, name) -> the Parameter of a Debian 12 image, or nil
local function debian(ctx, name)
  local release, arch = name:match("^/aws/service/debian/release/(%w+)/latest/(%w+)$")
  if (release ~= "12" and release ~= "bookworm") or (arch ~= "amd64" and arch ~= "arm64") then return nil end
  local id = ctl_.hash("debian-12-" .. arch .. "-" .. ctx.region, 8):gsub(".", function(ch)
    return string.format("%x", ch:byte() % 16)
  end)
  return { Name = name, Type = "String", Value = "ami-0" .. id .. id:reverse(), Version = 1,
    LastModifiedDate = PUBLISHED, ARN = "arn:aws:ssm:" .. ctx.region .. "::parameter" .. name, DataType = "text" }
end

-- lookup(ctx, name) -> the Parameter named, or nil
local function lookup(ctx, name)
  if type(name) == "string" and name:sub(1, 20) == "/aws/service/debian/" then return debian(ctx, name) end
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
