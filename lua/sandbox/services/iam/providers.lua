-- sandbox IAM OpenID Connect providers and instance profiles.
--
-- Record "oidc"/<host/path>: { Url (without https://), Arn, ClientIDList,
--   ThumbprintList, Tags, CreateDate }
-- Record "instance_profile"/<name>: { InstanceProfileName, InstanceProfileId,
--   Arn, Path, CreateDate, Roles = [role name], Tags }
local C = require "sandbox.services.iam.common"
local json = require "hypd.json"
local roles = require "sandbox.services.iam.roles"

local M = { operations = {} }
local ops = M.operations

-- --- OpenID Connect providers --------------------------------------------

local OIDC_PREFIX = "arn:aws:iam::" .. C.ACCOUNT .. ":oidc-provider/"
M.EKS_THUMBPRINT = "9e99a48a9960b14926bb7f3b02e22da2b0ab7280"

-- provider(ctx, arn) -> the record or nil
function M.oidc(ctx, arn)
  if type(arn) ~= "string" or arn:sub(1, #OIDC_PREFIX) ~= OIDC_PREFIX then return nil end
  return ctx.state:get("oidc", arn:sub(#OIDC_PREFIX + 1))
end

local function get_oidc(ctx, arn)
  if type(arn) ~= "string" or not arn:match("^arn:aws:iam::%d+:oidc%-provider/.") then
    ctx.error("InvalidInput", "ARN " .. tostring(arn) .. " is not valid.")
  end
  local p = M.oidc(ctx, arn)
  if not p then ctx.error("NoSuchEntity", "OpenIDConnect Provider not found for arn " .. arn, 404) end
  return p
end

local function check_thumbprints(ctx, list)
  local out = json.array()
  if #(list or {}) > 5 then ctx.error("LimitExceeded", "Thumbprint list must contain at most 5 entries.", 409) end
  for _, t in ipairs(list or {}) do
    if type(t) ~= "string" or #t ~= 40 or not t:match("^%x+$") then
      ctx.error("ValidationError", "1 validation error detected: Value '" .. tostring(t) .. "' at " ..
        "'thumbprintList' failed to satisfy constraint: Member must have length greater than or equal to 40")
    end
    out[#out + 1] = t:lower()
  end
  return out
end

function ops.CreateOpenIDConnectProvider(ctx, input)
  local url = input.Url
  if type(url) ~= "string" or #url > 255 then ctx.error("ValidationError", "Url must be at most 255 characters.") end
  local rest = url:match("^https://([^?#]+)$")
  if not rest or rest:match("^/") or rest:find("%s") then
    ctx.error("InvalidInput", "Invalid openid connect provider url.")
  end
  rest = rest:gsub("/$", "")
  local clients = C.copy_array(input.ClientIDList)
  if #clients > 100 then ctx.error("LimitExceeded", "Cannot exceed quota for ClientIdsPerOpenIdConnectProvider: 100.", 409) end
  local thumbs = check_thumbprints(ctx, input.ThumbprintList)
  -- without a thumbprint IAM reads the top intermediate CA's of the issuer's
  -- certificate chain itself (for EKS issuers: Amazon's, as below)
  if #thumbs == 0 then thumbs[1] = M.EKS_THUMBPRINT end
  local tags = C.check_tags(ctx, input.Tags)
  if ctx.state:get("oidc", rest) then
    ctx.error("EntityAlreadyExists", "Provider with url " .. url .. " already exists.", 409)
  end
  local p = { Url = rest, Arn = OIDC_PREFIX .. rest, ClientIDList = clients, ThumbprintList = thumbs, Tags = tags,
              CreateDate = C.now(ctx) }
  ctx.state:put("oidc", rest, p)
  ctx.target = p.Arn
  return { OpenIDConnectProviderArn = p.Arn, Tags = #tags > 0 and tags or nil }
end

function ops.GetOpenIDConnectProvider(ctx, input)
  local p = get_oidc(ctx, input.OpenIDConnectProviderArn)
  return { Url = p.Url, ClientIDList = p.ClientIDList, ThumbprintList = p.ThumbprintList, CreateDate = p.CreateDate,
           Tags = #p.Tags > 0 and p.Tags or nil }
end

function ops.ListOpenIDConnectProviders(ctx)
  local out = json.array()
  for _, p in ipairs(ctx.state:list("oidc")) do out[#out + 1] = { Arn = p.Arn } end
  return { OpenIDConnectProviderList = out }
end

function ops.DeleteOpenIDConnectProvider(ctx, input)
  local p = get_oidc(ctx, input.OpenIDConnectProviderArn)
  ctx.state:delete("oidc", p.Url)
  ctx.target = p.Arn
  return {}
end

function ops.UpdateOpenIDConnectProviderThumbprint(ctx, input)
  local p = get_oidc(ctx, input.OpenIDConnectProviderArn)
  p.ThumbprintList = check_thumbprints(ctx, input.ThumbprintList)
  ctx.state:put("oidc", p.Url, p)
  ctx.target = p.Arn
  return {}
end

function ops.AddClientIDToOpenIDConnectProvider(ctx, input)
  local p = get_oidc(ctx, input.OpenIDConnectProviderArn)
  for _, c in ipairs(p.ClientIDList) do
    if c == input.ClientID then return {} end
  end
  p.ClientIDList[#p.ClientIDList + 1] = input.ClientID
  ctx.state:put("oidc", p.Url, p)
  ctx.target = p.Arn
  return {}
end

-- --- instance profiles ----------------------------------------------------

local function get_profile(ctx, name)
  C.check_name(ctx, name, "instanceProfileName", 128)
  local p = ctx.state:get("instance_profile", name)
  if not p then ctx.error("NoSuchEntity", "Instance Profile " .. name .. " cannot be found.", 404) end
  return p
end

local function profile_view(ctx, p)
  local rs = json.array()
  for _, rn in ipairs(p.Roles) do
    local r = ctx.state:get("role", rn)
    if r then rs[#rs + 1] = roles.view(r, false) end
  end
  return { Path = p.Path, InstanceProfileName = p.InstanceProfileName, InstanceProfileId = p.InstanceProfileId,
           Arn = p.Arn, CreateDate = p.CreateDate, Roles = rs, Tags = #p.Tags > 0 and p.Tags or nil }
end

function ops.CreateInstanceProfile(ctx, input)
  local name = input.InstanceProfileName
  C.check_name(ctx, name, "instanceProfileName", 128)
  local path = C.check_path(ctx, input.Path, "path")
  local tags = C.check_tags(ctx, input.Tags)
  if ctx.state:get("instance_profile", name) then
    ctx.error("EntityAlreadyExists", "Instance Profile " .. name .. " already exists.", 409)
  end
  local p = { InstanceProfileName = name, InstanceProfileId = C.id("AIPA"), Arn = C.arn("instance-profile", path, name),
              Path = path, CreateDate = C.now(ctx), Roles = json.array(), Tags = tags }
  ctx.state:put("instance_profile", name, p)
  return { InstanceProfile = profile_view(ctx, p) }
end

function ops.GetInstanceProfile(ctx, input)
  return { InstanceProfile = profile_view(ctx, get_profile(ctx, input.InstanceProfileName)) }
end

function ops.DeleteInstanceProfile(ctx, input)
  local p = get_profile(ctx, input.InstanceProfileName)
  if #p.Roles > 0 then
    ctx.error("DeleteConflict", "Cannot delete entity, must remove roles from instance profile first.", 409)
  end
  ctx.state:delete("instance_profile", p.InstanceProfileName)
  return {}
end

function ops.AddRoleToInstanceProfile(ctx, input)
  local p = get_profile(ctx, input.InstanceProfileName)
  local r = roles.get(ctx, input.RoleName)
  C.append(ctx, p.Roles, r.RoleName, 1, "Cannot exceed quota for InstanceSessionsPerInstanceProfile: 1")
  ctx.state:put("instance_profile", p.InstanceProfileName, p)
  ctx.target = p.InstanceProfileName
  return {}
end

function ops.RemoveRoleFromInstanceProfile(ctx, input)
  local p = get_profile(ctx, input.InstanceProfileName)
  C.check_name(ctx, input.RoleName, "roleName")
  p.Roles = C.without(ctx, p.Roles, input.RoleName, "The role with name " .. input.RoleName .. " cannot be found.")
  ctx.state:put("instance_profile", p.InstanceProfileName, p)
  ctx.target = p.InstanceProfileName
  return {}
end

local function list_profiles(ctx, input, keep)
  local all = {}
  for _, p in ipairs(ctx.state:list("instance_profile")) do
    if keep(p) then all[#all + 1] = p end
  end
  local page, truncated, marker = C.page(ctx, all, input, function(p) return p.InstanceProfileName end)
  local out = json.array()
  for i, p in ipairs(page) do out[i] = profile_view(ctx, p) end
  return { InstanceProfiles = out, IsTruncated = truncated, Marker = marker }
end

function ops.ListInstanceProfilesForRole(ctx, input)
  local r = roles.get(ctx, input.RoleName)
  return list_profiles(ctx, input, function(p)
    for _, rn in ipairs(p.Roles) do
      if rn == r.RoleName then return true end
    end
    return false
  end)
end

function ops.ListInstanceProfiles(ctx, input)
  local prefix = input.PathPrefix or "/"
  return list_profiles(ctx, input, function(p) return p.Path:sub(1, #prefix) == prefix end)
end

return M
