-- storage_delete: a storage's claim and volume; its bucket or file system
-- only when asked, and never while it holds data unless forced. What is
-- kept is reported with the reason. The driver's grant of a bucket of the
-- user's (_s3_grant) goes with the bucket's last volume.
local Names = require "_names"
local P = require "_params"
local S = require "_storage"
local s3 = require "_s3"
local FS = require "_fsx_file_system"
local grant = require "_s3_grant"
local errors = hypd.errors
local json = hypd.json

local SG_RETRY_EVERY, SG_RETRY_FOR = 15, 15 * 60 -- a group is in use until FSx has released its interfaces

local function note(st, list, entry)
  st[list] = st[list] or json.array()
  for _, e in ipairs(st[list]) do
    if e.type == entry.type and e.name == entry.name then return end
  end
  st[list][#st[list] + 1] = entry
end

local function find(ctx)
  local p, st = ctx.params, ctx.state
  if st.found then return end
  local cl = S.cluster(ctx, p)
  st.cluster = cl
  local k = ctx:k8s(cl.name)
  local pvc = S.get(k, "v1", "PersistentVolumeClaim", p.claim_name, p.namespace)
  local pv
  if pvc and pvc.spec.volumeName and pvc.spec.volumeName ~= "" then
    pv = S.get(k, "v1", "PersistentVolume", pvc.spec.volumeName)
  end
  if not pv then
    for kind in pairs(S.DRIVERS) do
      pv = pv or S.get(k, "v1", "PersistentVolume", S.volume_name(kind, p.namespace, p.claim_name))
    end
  end
  if not pvc and not pv then
    -- a file system an earlier delete kept (its claim and volume are gone)
    local name = Names.fsx(cl.tag, p.claim_name).file_system
    for _, fs in ipairs(hypd.aws.all("fsx", "DescribeFileSystems", {}, ctx:aws_opts())) do
      local tags = hypd.aws.tags.map(fs.Tags)
      if tags.Name == name and tags[Names.TAG] == cl.tag and fs.Lifecycle ~= "DELETING" then
        st.kind, st.file_system_id, st.found = "fsx", fs.FileSystemId, true
        return
      end
    end
    errors.refuse("claim_name", "exists", string.format("cluster %s has no storage with claim %s/%s (storage_list shows them)",
      cl.name, p.namespace, p.claim_name), { code = "NOT_FOUND", field_message = "claim_name: no such claim or volume" })
  end
  for _, obj in ipairs { pvc or false, pv or false } do
    if obj then
      -- only what storage_create_s3 or storage_create_fsx made (_ownership)
      require("_ownership").check(obj, { "storage-s3", "storage-fsx" }, { field = "claim_name", cluster = cl.name,
        by = "storage_delete" })
    end
  end
  if pvc then
    local users = S.claim_users(k, p.namespace, p.claim_name)
    if ctx.plan then -- a teardown's plan that deletes their workloads first (cluster_delete force)
      local td = require "_teardown_pieces"
      local left = {}
      for _, u in ipairs(users) do
        if not td.going(ctx, p.namespace .. "/" .. u) then left[#left + 1] = u end
      end
      users = left
    end
    if #users > 0 then
      errors.raise("CONFLICT", string.format("claim %s/%s is mounted by %d pod(s): %s; stop them (delete their " ..
        "jobs or deployments) first, then call storage_delete again", p.namespace, p.claim_name, #users,
        table.concat(users, ", ")), { pods = users })
    end
  end
  st.claim_exists, st.volume = pvc ~= nil, pv and pv.metadata.name
  if pv then
    local d = S.describe(pv, pvc)
    st.kind = d.type
    st.bucket, st.bucket_region = d.bucket, d.bucket_region
    st.file_system_id = d.file_system_id
  end
  st.found = true
end

local function claim(ctx)
  local p, st = ctx.params, ctx.state
  local k = ctx:k8s(st.cluster.name)
  local action = ctx:absent { type = "kubernetes:persistentvolumeclaim", label = "PersistentVolumeClaim",
    name = p.namespace .. "/" .. p.claim_name, owned = S.owned, field = "claim_name",
    find = function() return S.get(k, "v1", "PersistentVolumeClaim", p.claim_name, p.namespace) end,
    id = function(x) return x.metadata.uid end,
    delete = function()
      local ok, err = k:delete("v1", "PersistentVolumeClaim", p.claim_name, { namespace = p.namespace, wait = true,
        timeout = 120 })
      if not ok then error(err, 0) end
    end }
  if action == "deleted" or action == "delete" then
    note(st, "deleted", { type = "kubernetes:persistentvolumeclaim", name = p.namespace .. "/" .. p.claim_name })
  end
end

local function volume(ctx)
  local st = ctx.state
  if not st.volume then return end
  local k = ctx:k8s(st.cluster.name)
  local action = ctx:absent { type = "kubernetes:persistentvolume", label = "PersistentVolume", name = st.volume,
    owned = S.owned, field = "claim_name", id = function(x) return x.metadata.uid end,
    find = function() return S.get(k, "v1", "PersistentVolume", st.volume) end,
    delete = function()
      local ok, err = k:delete("v1", "PersistentVolume", st.volume, { wait = true, timeout = 120 })
      if not ok then error(err, 0) end
    end }
  if action == "deleted" or action == "delete" then
    note(st, "deleted", { type = "kubernetes:persistentvolume", name = st.volume })
  end
end

-- others(ctx, k, field, value) -> names of the other volumes of the cluster that use a bucket or file system
local function others(ctx, k, is_it)
  local out = {}
  for _, pv in ipairs(assert(k:list("v1", "PersistentVolume"))) do
    if pv.metadata.name ~= ctx.state.volume and is_it(S.describe(pv)) then out[#out + 1] = pv.metadata.name end
  end
  table.sort(out)
  return out
end

local function bucket(ctx)
  local p, st = ctx.params, ctx.state
  local name, tag = st.bucket, st.cluster.tag
  local entry = { type = "s3:bucket", name = name }
  -- the driver's grant of a bucket of the user's goes with its last volume
  if #others(ctx, ctx:k8s(st.cluster.name), function(d) return d.bucket == name end) == 0 then
    grant.absent(ctx, st.cluster, name)
  end
  local b = s3.head(ctx, name)
  if not b then return end
  local region = b.Region
  local keep
  if not p.delete_bucket then
    keep = "not asked: delete_bucket = true deletes it"
  elseif s3.tags(ctx, name, region)[Names.TAG] ~= tag then
    keep = string.format("not hypd's: it has no %s=%s tag (a bucket hypd reused); hypd deletes only buckets it " ..
      "made", Names.TAG, tag)
  else
    local users = others(ctx, ctx:k8s(st.cluster.name), function(d) return d.bucket == name end)
    if #users > 0 then
      keep = "still mounted by volume(s) " .. table.concat(users, ", ")
    else
      local h = s3.holdings(ctx, name, region)
      st.bucket_holdings = h
      if h.versions > 0 and not p.force then
        keep = string.format("holds data (%s%d object version%s%s); force = true empties it (every version) and " ..
          "deletes it", h.more and "more than " or "", h.versions, h.versions == 1 and "" or "s",
          h.versioning and (", versioning " .. h.versioning) or "")
      end
    end
  end
  local action = ctx:absent { type = "s3:bucket", label = "S3 bucket", name = name, keep = keep, id = "Name",
    find = function() return { Name = name, Region = region } end,
    delete = function()
      local n = s3.empty(ctx, name, region)
      st.objects_deleted = n
      s3.delete_bucket(ctx, name, region)
    end }
  if action ~= "kept" then note(st, "deleted", entry) end -- the kit reports what it keeps (ctx.state.kept)
end

local function file_system(ctx)
  local p, st = ctx.params, ctx.state
  local id, cl = st.file_system_id, st.cluster
  local fs = FS.describe(ctx, id)
  if not fs then return end
  local tags = hypd.aws.tags.map(fs.Tags)
  local entry = { type = "fsx:file-system", name = tags.Name or id, id = id }
  local keep
  if not p.delete_file_system then
    keep = "not asked: delete_file_system = true (with force = true) deletes it"
  elseif tags[Names.TAG] ~= cl.tag then
    keep = "not hypd's: it has no " .. Names.TAG .. "=" .. cl.tag .. " tag; hypd deletes only file systems it made"
  else
    local users = others(ctx, ctx:k8s(cl.name), function(d) return d.file_system_id == id end)
    if #users > 0 then
      keep = "still mounted by volume(s) " .. table.concat(users, ", ")
    elseif not p.force then
      keep = "it may hold data (FSx cannot tell hypd what a Lustre file system holds); force = true deletes it " ..
        "with everything on it, without a final backup"
    end
  end
  local action = ctx:absent { type = "fsx:file-system", label = "FSx file system", name = entry.name, keep = keep,
    id = "FileSystemId", gone = "FileSystemNotFound",
    find = function()
      local x = FS.describe(ctx, id)
      if x and x.Lifecycle ~= "DELETING" then return x end
    end,
    delete = function(x) FS.delete(ctx, x) end }
  if action == "kept" then return end -- reported by the kit (ctx.state.kept)
  note(st, "deleted", entry)
  ctx:poll { what = "FSx file system " .. id .. " to be deleted", every = FS.DELETE_POLL, timeout = FS.DELETE_LIMIT,
    check = function()
      local x = FS.describe(ctx, id)
      return x == nil, "FSx file system " .. id .. " " .. tostring(x and x.Lifecycle or "gone")
    end }
  -- its security group, once FSx has released the interfaces that use it
  local names = Names.fsx(cl.tag, p.claim_name)
  local g = (ctx:call("ec2", "DescribeSecurityGroups", { Filters = { { Name = "vpc-id", Values = { cl.vpc_id } },
    { Name = "group-name", Values = { names.security_group } } } }).SecurityGroups or {})[1]
  if g then
    ctx:absent { type = "ec2:security-group", label = "security group", name = names.security_group, id = "GroupId",
      owned = function(x)
        for _, t in ipairs(x.Tags or {}) do if t.Key == Names.TAG and t.Value == cl.tag then return true end end
        return false, "it has no " .. Names.TAG .. "=" .. cl.tag .. " tag"
      end,
      gone = "InvalidGroup.NotFound", retry_every = SG_RETRY_EVERY, retry_for = SG_RETRY_FOR,
      retry = function(err) if err.code == "DependencyViolation" then return "still in use by FSx" end end,
      find = function() return g end,
      delete = function(x) ctx:call("ec2", "DeleteSecurityGroup", { GroupId = x.GroupId }) end }
    note(st, "deleted", { type = "ec2:security-group", name = names.security_group, id = g.GroupId })
  end
end

local function data(ctx)
  local st = ctx.state
  if st.kind == "s3" and st.bucket then
    bucket(ctx)
  elseif st.kind == "fsx" and st.file_system_id then
    file_system(ctx)
    note(st, "kept", { type = "eks:addon", name = S.ADDONS.fsx, why = "the cluster's FSx CSI driver (with its " ..
      "role): other FSx volumes use it; cluster_delete removes it" })
  end
  if ctx.plan then return end
  st.result = { cluster = st.cluster.name, claim_name = ctx.params.claim_name, namespace = ctx.params.namespace,
    type = st.kind, volume_name = st.volume, bucket = st.bucket, file_system_id = st.file_system_id,
    objects_deleted = st.objects_deleted, deleted = st.deleted or json.array(), kept = st.kept or json.array() }
end

return tool {
  name = "storage_delete",
  summary = "Delete a storage's claim and volume; its bucket or file system only when asked (and forced if it " ..
    "holds data)",
  description = "Deletes the PersistentVolumeClaim claim_name and its PersistentVolume (both must be hypd's, and " ..
    "no running pod may mount the claim: it is refused, naming the pods). The data store stays unless asked: " ..
    "delete_bucket = true deletes hypd's S3 bucket when it is empty (with force = true also when it holds data: " ..
    "every object version and delete marker is deleted first); delete_file_system = true with force = true " ..
    "deletes hypd's FSx file system (FSx cannot say whether it holds data) and then its security group; a file " ..
    "system an earlier call kept is found again by its claim_name. A " ..
    "bucket or file system hypd did not make, or that another volume still mounts, is never deleted. The " ..
    "result lists what was deleted and what was kept, with the reason. It answers with an operation; follow it " ..
    "with storage_list (operation_id, wait_seconds); plan = true lists what it would delete and keep.",
  kind = "destructive",
  status_tool = "storage_list",
  aws = { "eks:DescribeCluster", "s3:HeadBucket", "s3:GetBucketTagging", "s3:GetBucketVersioning",
    "s3:ListObjectVersions", "s3:DeleteObjects", "s3:DeleteBucket", "fsx:DescribeFileSystems",
    "fsx:DeleteFileSystem", "ec2:DescribeSecurityGroups", "ec2:DeleteSecurityGroup", "eks:DescribeAddon",
    "iam:GetRole", "iam:GetRolePolicy", "iam:DeleteRolePolicy" },
  k8s = { "get", "list", "watch", "delete" },
  params = P.form({ "claim_name", "delete_bucket", "delete_file_system", "force" },
    { "namespace", "cluster", "region" },
    {
    cluster = P.cluster,
    region = P.region,
    claim_name = P.with(S.claim_name, { required = true, decision = true,
      description = "the claim of the storage to delete (storage_list shows them)" }),
    namespace = S.namespace,
    delete_bucket = { type = "boolean", default = false, decision = true,
      description = "also delete the S3 bucket (hypd's own only; refused while it holds data unless force)" },
    delete_file_system = { type = "boolean", default = false, decision = true,
      description = "also delete the FSx file system (hypd's own only; needs force, since it may hold data)" },
    force = { type = "boolean", default = false, decision = true,
      description = "delete the bucket or file system even when it holds data: everything in it is lost" },
  }),
  target = S.target,
  steps = {
    { name = "find", run = find },
    { name = "claim", run = claim },
    { name = "volume", run = volume },
    { name = "data", run = data },
  },
}
