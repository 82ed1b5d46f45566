-- sandbox IAM roles, their tags and their inline policies.
--
-- Record "role"/<RoleName>: { RoleName, RoleId, Arn, Path, CreateDate,
--   AssumeRolePolicyDocument (the JSON text as given), Description,
--   MaxSessionDuration, Tags = [{Key, Value}], attached = [policy arn],
--   inline = { [PolicyName] = JSON text } }
-- STS reads these records (ctx:view("iam"):get("role", name)).
local C = require "sandbox.services.iam.common"
local json = require "hypd.json"

local M = { operations = {} }
local ops = M.operations

-- get(ctx, name) -> the role record or NoSuchEntity
function M.get(ctx, name)
  C.check_name(ctx, name, "roleName")
  local r = ctx.state:get("role", name)
  if not r then ctx.error("NoSuchEntity", "The role with name " .. name .. " cannot be found.", 404) end
  return r
end

-- view(r, full) -> the Role shape; full: "get" (tags and last use, as
-- GetRole answers), "create" (tags), false (ListRoles and instance profiles)
function M.view(r, full)
  local out = {
    Path = r.Path, RoleName = r.RoleName, RoleId = r.RoleId, Arn = r.Arn, CreateDate = r.CreateDate,
    AssumeRolePolicyDocument = C.urlencode(r.AssumeRolePolicyDocument),
    Description = r.Description, MaxSessionDuration = r.MaxSessionDuration,
  }
  if full then
    if r.Tags and #r.Tags > 0 then out.Tags = r.Tags end
    if full == "get" then out.RoleLastUsed = json.object() end
  end
  return out
end

function ops.CreateRole(ctx, input)
  local name = input.RoleName
  C.check_name(ctx, name, "roleName")
  local path = C.check_path(ctx, input.Path, "path")
  C.parse_policy(ctx, input.AssumeRolePolicyDocument, "trust")
  local max = input.MaxSessionDuration and math.tointeger(tonumber(input.MaxSessionDuration)) or 3600
  if not max or max < 3600 or max > 43200 then
    ctx.error("ValidationError", "1 validation error detected: Value '" .. tostring(input.MaxSessionDuration) ..
      "' at 'maxSessionDuration' failed to satisfy constraint: Member must have value less than or equal to 43200")
  end
  if input.Description and #input.Description > 1000 then
    ctx.error("ValidationError", "1 validation error detected: Value at 'description' failed to satisfy " ..
      "constraint: Member must have length less than or equal to 1000")
  end
  local tags = C.check_tags(ctx, input.Tags)
  for _, r in ipairs(ctx.state:list("role")) do
    if r.RoleName:lower() == name:lower() then
      ctx.error("EntityAlreadyExists", "Role with name " .. name .. " already exists.", 409)
    end
  end
  local r = {
    RoleName = name, RoleId = C.id("AROA"), Arn = C.arn("role", path, name), Path = path,
    CreateDate = C.now(ctx), AssumeRolePolicyDocument = input.AssumeRolePolicyDocument,
    Description = input.Description, MaxSessionDuration = max, Tags = tags,
    attached = json.array(), inline = json.object(),
  }
  ctx.state:put("role", name, r)
  return { Role = M.view(r, "create") }
end

function ops.GetRole(ctx, input)
  return { Role = M.view(M.get(ctx, input.RoleName), "get") }
end

function ops.DeleteRole(ctx, input)
  local r = M.get(ctx, input.RoleName)
  if #r.attached > 0 then
    ctx.error("DeleteConflict", "Cannot delete entity, must detach all policies first.", 409)
  end
  if next(r.inline) ~= nil then
    ctx.error("DeleteConflict", "Cannot delete entity, must delete policies first.", 409)
  end
  for _, p in ipairs(ctx.state:list("instance_profile")) do
    for _, rn in ipairs(p.Roles) do
      if rn == r.RoleName then
        ctx.error("DeleteConflict", "Cannot delete entity, must remove roles from instance profile first.", 409)
      end
    end
  end
  ctx.state:delete("role", r.RoleName)
  return {}
end

function ops.UpdateAssumeRolePolicy(ctx, input)
  local r = M.get(ctx, input.RoleName)
  C.parse_policy(ctx, input.PolicyDocument, "trust")
  r.AssumeRolePolicyDocument = input.PolicyDocument
  ctx.state:put("role", r.RoleName, r)
  return {}
end

function ops.UpdateRole(ctx, input)
  local r = M.get(ctx, input.RoleName)
  if input.Description ~= nil then r.Description = input.Description end
  if input.MaxSessionDuration ~= nil then
    local max = math.tointeger(tonumber(input.MaxSessionDuration))
    if not max or max < 3600 or max > 43200 then
      ctx.error("ValidationError", "The requested MaxSessionDuration must be between 3600 and 43200 seconds.")
    end
    r.MaxSessionDuration = max
  end
  ctx.state:put("role", r.RoleName, r)
  return {}
end

function ops.ListRoles(ctx, input)
  local prefix = input.PathPrefix or "/"
  local all = {}
  for _, r in ipairs(ctx.state:list("role")) do
    if r.Path:sub(1, #prefix) == prefix then all[#all + 1] = r end
  end
  local page, truncated, marker = C.page(ctx, all, input, function(r) return r.RoleName end)
  local roles = json.array()
  for i, r in ipairs(page) do roles[i] = M.view(r, false) end
  return { Roles = roles, IsTruncated = truncated, Marker = marker }
end

function ops.TagRole(ctx, input)
  local r = M.get(ctx, input.RoleName)
  local tags = C.check_tags(ctx, input.Tags)
  r.Tags = C.merge_tags(r.Tags, tags)
  if #r.Tags > 50 then ctx.error("LimitExceeded", "Cannot exceed quota for TagsPerRole: 50.", 409) end
  ctx.state:put("role", r.RoleName, r)
  return {}
end

function ops.UntagRole(ctx, input)
  local r = M.get(ctx, input.RoleName)
  r.Tags = C.remove_tags(r.Tags, input.TagKeys)
  ctx.state:put("role", r.RoleName, r)
  return {}
end

function ops.ListRoleTags(ctx, input)
  local r = M.get(ctx, input.RoleName)
  local tags = {}
  for i, t in ipairs(r.Tags or {}) do tags[i] = t end
  table.sort(tags, function(a, b) return a.Key < b.Key end)
  local page, truncated, marker = C.page(ctx, tags, input, function(t) return t.Key end)
  return { Tags = page, IsTruncated = truncated, Marker = marker }
end

-- --- inline policies ----------------------------------------------------

function ops.PutRolePolicy(ctx, input)
  local r = M.get(ctx, input.RoleName)
  C.check_name(ctx, input.PolicyName, "policyName", 128)
  C.parse_policy(ctx, input.PolicyDocument, "inline")
  local total = C.size(input.PolicyDocument)
  for name, doc in pairs(r.inline) do
    if name ~= input.PolicyName then total = total + C.size(doc) end
  end
  if total > 10240 then ctx.error("LimitExceeded", "Maximum policy size of 10240 bytes exceeded for role " ..
    r.RoleName, 409) end
  r.inline[input.PolicyName] = input.PolicyDocument
  ctx.state:put("role", r.RoleName, r)
  ctx.target = r.RoleName
  return {}
end

local function inline_of(ctx, r, name)
  C.check_name(ctx, name, "policyName", 128)
  local doc = r.inline[name]
  if not doc then
    ctx.error("NoSuchEntity", "The role policy with name " .. name .. " cannot be found.", 404)
  end
  return doc
end

function ops.GetRolePolicy(ctx, input)
  local r = M.get(ctx, input.RoleName)
  local doc = inline_of(ctx, r, input.PolicyName)
  return { RoleName = r.RoleName, PolicyName = input.PolicyName, PolicyDocument = C.urlencode(doc) }
end

function ops.DeleteRolePolicy(ctx, input)
  local r = M.get(ctx, input.RoleName)
  inline_of(ctx, r, input.PolicyName)
  r.inline[input.PolicyName] = nil
  if next(r.inline) == nil then r.inline = json.object() end
  ctx.state:put("role", r.RoleName, r)
  ctx.target = r.RoleName
  return {}
end

function ops.ListRolePolicies(ctx, input)
  local r = M.get(ctx, input.RoleName)
  local names = {}
  for name in pairs(r.inline) do names[#names + 1] = name end
  table.sort(names)
  local page, truncated, marker = C.page(ctx, names, input, function(n) return n end)
  return { PolicyNames = page, IsTruncated = truncated, Marker = marker }
end

return M
