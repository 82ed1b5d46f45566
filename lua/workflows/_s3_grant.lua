-- _s3_grant: the Mountpoint for S3 driver's role may use only the
-- buckets it mounts. Its own inline policy (cluster_configure_dependencies,
-- cluster/_deps.s3_policy, this module's policy) names the cluster's data
-- bucket; a bucket of the
-- user's that storage_create_s3 mounts gets an inline policy of its own on
-- that role, hypd-s3-<bucket>, and storage_delete takes it away with the
-- last volume of that bucket.
--   G.ensure(ctx, cl, bucket, own)  the grant, unless the role already
--                               allows the bucket (own: hypd's data bucket,
--                               which its policy names), or the role is not
--                               hypd's (said, never changed)
--   G.absent(ctx, cl, bucket)   the grant gone
--   G.name(bucket) -> the inline policy's name
--   G.ADDON, G.POLICY_NAME, G.role_name(tag): the driver's add-on, its own
--   inline policy's name, its role's name (cluster_configure_dependencies
--   makes them: cluster/_deps)
local A = require "_eks_addon"
local Names = require "_names"
local iam = require "_iam"

local M = {}

M.ADDON = "aws-mountpoint-s3-csi-driver"
M.POLICY_NAME = "hypd-mountpoint-s3"

-- role_name(tag) -> hypd-<tag>-s3-csi (at most 64 characters)
function M.role_name(tag) return Names.addon_role(tag, "s3-csi", 57) end

function M.name(bucket) return ("hypd-s3-" .. bucket):sub(1, 128) end

-- policy(partition, bucket) -> what Mountpoint needs on one bucket (its documented policy)
function M.policy(partition, bucket)
  local arn = "arn:" .. partition .. ":s3:::" .. bucket
  return { Version = "2012-10-17", Statement = {
    { Sid = "MountpointBucket", Effect = "Allow", Action = { "s3:ListBucket" }, Resource = { arn } },
    { Sid = "MountpointObjects", Effect = "Allow",
      Action = { "s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload", "s3:DeleteObject" },
      Resource = { arn .. "/*" } } } }
end

-- role(ctx, cl) -> {name, arn, partition} of the driver's role when it is
-- hypd's, or nil and why not
local function role(ctx, cl)
  local addon = not cl.planned and A.describe(ctx, cl.name, M.ADDON)
  local arn = addon and addon.serviceAccountRoleArn
  if cl.planned then
    local name = M.role_name(cl.tag or cl.name)
    return { name = name, arn = hypd.kit.planned_id("iam:role", name), partition = "aws" }
  end
  if not arn then return nil, "the " .. M.ADDON .. " add-on names no service account role" end
  local name = arn:match(":role/(.+)$"):match("([^/]+)$")
  local r, err = ctx:try("iam", "GetRole", { RoleName = name })
  if not r then
    if err.code == "NoSuchEntity" then return nil, "its role " .. name .. " does not exist" end
    error(err, 0)
  end
  if hypd.aws.tags.map(r.Role.Tags)[Names.EKS_TAG] ~= cl.name then
    return nil, "its role " .. name .. " is not hypd's"
  end
  return { name = name, arn = arn, partition = arn:match("^arn:([^:]+):") }
end

-- allows(doc, bucket) -> true when a statement grants s3:GetObject on the bucket's objects
local function allows(doc, bucket)
  local want = bucket .. "/x"
  for _, st in ipairs((doc or {}).Statement or {}) do
    local acts = type(st.Action) == "table" and st.Action or { st.Action }
    local res = type(st.Resource) == "table" and st.Resource or { st.Resource }
    local act = false
    for _, a in ipairs(acts) do act = act or a == "s3:GetObject" or a == "s3:*" end
    for _, r in ipairs(res) do
      local pat = "^" .. tostring(r):gsub("^arn:[^:]+:s3:::", ""):gsub("[%-%.]", "%%%0"):gsub("%*", ".*") .. "$"
      if act and (r == "*" or want:match(pat)) then return true end
    end
  end
  return false
end

local function inline(ctx, role_name, pname)
  local out, err = ctx:try("iam", "GetRolePolicy", { RoleName = role_name, PolicyName = pname })
  if out then return { PolicyName = pname, PolicyDocument = iam.doc(out.PolicyDocument) } end
  if err.code == "NoSuchEntity" then return nil end
  error(err, 0)
end

function M.ensure(ctx, cl, bucket, own_bucket)
  if cl.planned and own_bucket then return end -- the driver's own policy names the cluster's data bucket
  local r, why = role(ctx, cl)
  if not r then
    ctx:progress("the Mountpoint for S3 driver's role is not granted bucket " .. bucket .. ": " .. why ..
      "; its role must allow the bucket")
    return
  end
  if not cl.planned then
    local own = inline(ctx, r.name, M.POLICY_NAME)
    if own and allows(own.PolicyDocument, bucket) then return end
  end
  local pname, policy = M.name(bucket), M.policy(r.partition, bucket)
  ctx:ensure { type = "iam:role-policy", label = "inline policy", name = pname .. " on " .. r.name, needs = r.arn,
    id = "PolicyName",
    search = function() return inline(ctx, r.name, pname) end,
    desired = { PolicyDocument = policy },
    update = function()
      ctx:call("iam", "PutRolePolicy", { RoleName = r.name, PolicyName = pname, PolicyDocument = hypd.json.encode(policy) })
    end,
    create = function()
      ctx:call("iam", "PutRolePolicy", { RoleName = r.name, PolicyName = pname, PolicyDocument = hypd.json.encode(policy) })
      return { PolicyName = pname, PolicyDocument = policy }
    end }
end

function M.absent(ctx, cl, bucket)
  local r = role(ctx, cl)
  if not r then return end
  local pname = M.name(bucket)
  ctx:absent { type = "iam:role-policy", label = "inline policy", name = pname .. " on " .. r.name, id = "PolicyName",
    find = function() return inline(ctx, r.name, pname) end,
    delete = function() ctx:call("iam", "DeleteRolePolicy", { RoleName = r.name, PolicyName = pname }) end,
    gone = { "NoSuchEntity" } }
end

return M
