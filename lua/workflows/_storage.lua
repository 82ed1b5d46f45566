-- _storage: the storage hypd makes on an EKS cluster, as the storage tools
-- make it and the training, jobs, HyperPod and cluster tools read it: which
-- EKS cluster a call works on (and its tag), the names of the CSI driver
-- add-ons it needs (_eks_addon require_active waits for them), the names
-- and labels of the PersistentVolumes and claims hypd makes, and those
-- objects as kit resources (ctx:ensure, ctx:absent) with the wait for Bound.
--
-- A storage is one PersistentVolume (static provisioning, reclaim policy
-- Retain, storageClassName "") pre-bound to one PersistentVolumeClaim:
--   S3   driver s3.csi.aws.com (Mountpoint for S3), volumeHandle
--        s3-csi-driver-volume-<claim>, volumeAttributes.bucketName,
--        mountOptions allow-delete and region <bucket's region>
--   FSx  driver fsx.csi.aws.com, volumeHandle <file system id>,
--        volumeAttributes.dnsname and .mountname
-- Both carry the labels app.kubernetes.io/managed-by=hypd (the client adds
-- it), hypd.io/storage=s3|fsx and hypd.io/cluster-tag=<tag>, and the
-- annotation hypd.io/bucket or hypd.io/file-system-id.
local Names = require "_names"
local errors = hypd.errors
local json = hypd.json

local M = {}

M.MANAGED = "app.kubernetes.io/managed-by"
M.KIND_LABEL = "hypd.io/storage"
M.TAG_LABEL = "hypd.io/cluster-tag"
M.FAMILY_LABEL = "hypd.io/family" -- _ownership: storage-s3 | storage-fsx
M.BUCKET_ANN = "hypd.io/bucket"
M.FS_ANN = "hypd.io/file-system-id"
M.DRIVERS = { s3 = "s3.csi.aws.com", fsx = "fsx.csi.aws.com" }
M.ADDONS = { s3 = "aws-mountpoint-s3-csi-driver", fsx = "aws-fsx-csi-driver" }
M.DEFAULT_CLAIM = { s3 = "s3-claim", fsx = "fsx-claim" }
M.CAPACITY = "1200Gi"             -- what an S3 volume claims (Mountpoint ignores it; Kubernetes needs one)
M.BIND_POLL, M.BIND_LIMIT = 2, 5 * 60

-- parameters the storage tools share
M.claim_name = { type = "string", pattern = "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
  pattern_help = "a Kubernetes name: up to 63 lowercase letters, digits and '-', starting and ending with a " ..
    "letter or digit",
  description = "the PersistentVolumeClaim pods mount (its volume is named after it)" }
M.namespace = { type = "string", default = "default", pattern = "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
  pattern_help = "a Kubernetes namespace name", description = "the namespace of the claim" }

-- tag_of(name, record, tags) -> the cluster tag: what hypd recorded, the
-- EKS cluster's hypd:cluster-tag tag, the <tag> of hypd-<tag>, else a tag
-- made from the name (an imported cluster)
function M.tag_of(name, record, tags)
  local t = (record or {}).tag or (tags or {})[Names.TAG] or name:match("^hypd%-([a-z][a-z0-9-]*[a-z0-9])$")
  if t and #t <= 32 then return t end
  t = name:lower():gsub("[^a-z0-9-]", "-"):gsub("^[^a-z]+", ""):gsub("%-+", "-")
  t = t:sub(1, 32):gsub("%-+$", "")
  if #t < 3 then t = "eks-" .. t end
  return t
end

-- cluster(ctx, p) -> {name, region, tag, arn, version, vpc_id, security_group_ids,
-- cluster_security_group_id, oidc_issuer, planned}: the EKS cluster the call
-- works on (p.cluster, else the active one), which must be ACTIVE. With
-- opts.plan_missing, in a plan a cluster that does not exist yet (a
-- pipeline's plan) is planned: its Kubernetes objects are listed as things
-- to create.
function M.cluster(ctx, p, opts)
  local hp = require "_hyperpod"
  local e = hp.eks(ctx, p)
  local d, err = ctx:try("eks", "DescribeCluster", { name = e.name })
  if not d then
    if err.code ~= "ResourceNotFoundException" then error(err, 0) end
    if ctx.plan and (opts or {}).plan_missing then
      return { name = e.name, region = e.region, tag = M.tag_of(e.name, e.record), planned = true,
        arn = hypd.kit.planned_id("eks:cluster", e.name) }
    end
    errors.refuse("cluster", "exists", string.format("EKS cluster %s does not exist in %s: pass cluster (cluster_list " ..
      "shows them) or create it with cluster_create_eks", e.name, e.region),
      { code = "NOT_FOUND", field_message = "cluster: no EKS cluster " .. e.name })
  end
  local c = d.cluster
  if c.status ~= "ACTIVE" and c.status ~= "UPDATING" then
    errors.raise("STATE", string.format("EKS cluster %s is %s; storage needs it ACTIVE%s", e.name, tostring(c.status),
      c.status == "CREATING" and " (follow cluster_get_creation_status)" or ""), { cluster = e.name })
  end
  local vpc = c.resourcesVpcConfig or {}
  return { name = c.name, region = e.region, tag = M.tag_of(c.name, e.record, c.tags), arn = c.arn,
    version = c.version, vpc_id = vpc.vpcId, security_group_ids = vpc.securityGroupIds or json.array(),
    cluster_security_group_id = vpc.clusterSecurityGroupId,
    oidc_issuer = ((c.identity or {}).oidc or {}).issuer }
end

-- names ----------------------------------------------------------------------

-- volume_name(kind, ns, claim) -> the PersistentVolume's name
function M.volume_name(kind, ns, claim)
  if ns == "default" then return kind .. "-pv-" .. claim end
  return kind .. "-pv-" .. ns .. "-" .. claim
end

-- s3_handle(ns, claim) -> the S3 volume's volumeHandle (unique in the cluster)
function M.s3_handle(ns, claim)
  if ns == "default" then return "s3-csi-driver-volume-" .. claim end
  return "s3-csi-driver-volume-" .. ns .. "-" .. claim
end

-- target(p) -> the operation target of a storage tool: one claim of one cluster
function M.target(p)
  local region, cluster = require("_params").where(p)
  return string.format("storage/%s/%s/%s/%s", region, cluster, p.namespace or "default", tostring(p.claim_name))
end

-- Kubernetes objects -----------------------------------------------------------

-- get(k, api, kind, name, ns) -> the object | nil (raises other errors)
function M.get(k, api, kind, name, ns)
  local obj, err = k:get(api, kind, name, { namespace = ns })
  if obj then return obj end
  if err.code == "NotFound" then return nil end
  error(err, 0)
end

function M.labels(obj) return ((obj or {}).metadata or {}).labels or {} end

-- owned(obj) -> true | false, why: made by hypd (its managed-by label)
function M.owned(obj)
  local v = M.labels(obj)[M.MANAGED]
  if v == "hypd" then return true end
  return false, "its " .. M.MANAGED .. " label is " .. (v and ("'" .. v .. "'") or "missing") .. ", not 'hypd'"
end

-- claim_free(ctx, cl, kind, ns, claim): before any write, the claim and
-- the volume of that name, when they exist, are this storage kind's
-- (hypd.io/family storage-s3 or storage-fsx, _ownership): one that another
-- tool or anyone else made is a CONFLICT naming its owner, so an FSx
-- storage never takes over an S3 one's claim (nor makes its file system
-- first). A planned cluster has nothing to read.
function M.claim_free(ctx, cl, kind, ns, claim)
  if cl.planned then return end
  local O = require "_ownership"
  local k = ctx:k8s(cl.name)
  local named = { { "PersistentVolumeClaim", claim, ns }, { "PersistentVolume", M.volume_name(kind, ns, claim) } }
  for _, o in ipairs(named) do
    local live = M.get(k, "v1", o[1], o[2], o[3])
    if live then
      live.kind = live.kind or o[1]
      O.check(live, "storage-" .. kind, { field = "claim_name", cluster = cl.name })
    end
  end
end

-- pv(o) -> a PersistentVolume pre-bound to its claim. o: {kind, name, ns,
-- claim, tag, capacity, csi = {driver, volumeHandle, volumeAttributes},
-- mount_options, annotations}
function M.pv(o)
  return { apiVersion = "v1", kind = "PersistentVolume",
    metadata = { name = o.name, labels = { [M.KIND_LABEL] = o.kind, [M.TAG_LABEL] = o.tag,
      [M.FAMILY_LABEL] = "storage-" .. o.kind },
      annotations = o.annotations },
    spec = { capacity = { storage = o.capacity }, accessModes = { "ReadWriteMany" }, volumeMode = "Filesystem",
      persistentVolumeReclaimPolicy = "Retain", storageClassName = "", mountOptions = o.mount_options,
      claimRef = { apiVersion = "v1", kind = "PersistentVolumeClaim", namespace = o.ns, name = o.claim },
      csi = o.csi } }
end

-- pvc(o) -> the claim bound to volume o.name
function M.pvc(o)
  return { apiVersion = "v1", kind = "PersistentVolumeClaim",
    metadata = { name = o.claim, namespace = o.ns, labels = { [M.KIND_LABEL] = o.kind, [M.TAG_LABEL] = o.tag,
      [M.FAMILY_LABEL] = "storage-" .. o.kind },
      annotations = o.annotations },
    spec = { accessModes = { "ReadWriteMany" }, storageClassName = "", volumeName = o.name,
      resources = { requests = { storage = o.capacity } } } }
end

-- what a volume must hold (the explicit diff)
local function pv_fields(v)
  local s = v.spec or {}
  local csi = s.csi or {}
  return { driver = csi.driver, volumeHandle = csi.volumeHandle, volumeAttributes = csi.volumeAttributes,
    mountOptions = s.mountOptions, capacity = (s.capacity or {}).storage, accessModes = s.accessModes,
    claim = s.claimRef and ((s.claimRef.namespace or "") .. "/" .. tostring(s.claimRef.name)) or nil }
end

local function pvc_fields(c)
  local s = c.spec or {}
  return { volumeName = s.volumeName, storageClassName = s.storageClassName, accessModes = s.accessModes }
end

local function phase(obj) return ((obj or {}).status or {}).phase end

-- ensure_volume(ctx, k, cl, o) -> {volume, claim, volume_phase, claim_phase}:
-- the PersistentVolume and its claim exist as o says (hypd's, or a
-- CONFLICT), then the claim is Bound. In a plan on a planned cluster
-- nothing is read.
function M.ensure_volume(ctx, k, cl, o)
  local pv_obj, pvc_obj = M.pv(o), M.pvc(o)
  local needs = cl.planned and cl.arn or nil
  local function spec(obj, desired, current)
    local api, kind, name, ns = obj.apiVersion, obj.kind, obj.metadata.name, obj.metadata.namespace
    return { type = "kubernetes:" .. kind:lower(), label = kind, name = (ns and (ns .. "/") or "") .. name,
      field = "claim_name", needs = needs,
      search = function() return M.get(k, api, kind, name, ns) end,
      owned = require("_ownership").owned("storage-" .. o.kind, { field = "claim_name", cluster = cl.name }),
      desired = desired, current = current,
      placeholder = function() return obj end,
      create = function()
        local made, err = k:apply(json.decode(json.encode(obj)), { operation = ctx.op_id })
        if not made then error(err, 0) end
        return made
      end }
  end
  local want_pv = pv_fields(pv_obj)
  local v = ctx:ensure(spec(pv_obj, want_pv, pv_fields))
  local c = ctx:ensure(spec(pvc_obj, pvc_fields(pvc_obj), pvc_fields))
  local out = { volume = o.name, claim = o.claim, namespace = o.ns }
  if ctx.plan then
    out.volume_phase, out.claim_phase = phase(v), phase(c)
    return out
  end
  local bound = ctx:poll { what = "claim " .. o.ns .. "/" .. o.claim .. " to be Bound", every = M.BIND_POLL,
    timeout = M.BIND_LIMIT,
    check = function()
      local x = M.get(k, "v1", "PersistentVolumeClaim", o.claim, o.ns)
      if not x then
        errors.raise("CONFLICT", "claim " .. o.ns .. "/" .. o.claim .. " was deleted while hypd waited for it")
      end
      if phase(x) == "Lost" then
        errors.raise("CONFLICT", "claim " .. o.ns .. "/" .. o.claim .. " is Lost: its volume " .. o.name .. " is gone")
      end
      return phase(x) == "Bound", "claim " .. o.claim .. " " .. tostring(phase(x) or "Pending"), x
    end }
  out.claim_phase = phase(bound)
  out.volume_phase = phase(M.get(k, "v1", "PersistentVolume", o.name))
  return out
end

-- claim_users(k, ns, claim) -> names of the pods (not finished) that mount the claim
function M.claim_users(k, ns, claim)
  local out = {}
  for _, pod in ipairs(assert(k:list("v1", "Pod", { namespace = ns }))) do
    local ph = phase(pod)
    if ph ~= "Succeeded" and ph ~= "Failed" then
      for _, vol in ipairs((pod.spec or {}).volumes or {}) do
        if vol.persistentVolumeClaim and vol.persistentVolumeClaim.claimName == claim then
          out[#out + 1] = pod.metadata.name
          break
        end
      end
    end
  end
  table.sort(out)
  return out
end

-- mount_option(pv, name) -> the value of mount option `name value` (or
-- name=value) of a volume, or nil
function M.mount_option(pv, name)
  for _, opt in ipairs(((pv or {}).spec or {}).mountOptions or {}) do
    local k, v = tostring(opt):match("^%-*([%w-]+)[ =](.+)$")
    if k == name then return v end
  end
end

-- kind_of(pv) -> "s3" | "fsx" | nil: the storage a volume is
function M.kind_of(pv)
  local d = (((pv or {}).spec or {}).csi or {}).driver
  for kind, driver in pairs(M.DRIVERS) do
    if d == driver then return kind end
  end
end

-- describe(pv, pvc) -> what storage_list shows of a volume and its claim
function M.describe(pv, pvc)
  local s = pv.spec or {}
  local csi = s.csi or {}
  local attrs = csi.volumeAttributes or {}
  local kind = M.kind_of(pv)
  local ref = s.claimRef or {}
  local out = { type = kind or "other", driver = csi.driver, volume = pv.metadata.name,
    volume_phase = phase(pv) or "Pending", capacity = (s.capacity or {}).storage, access_modes = s.accessModes,
    reclaim_policy = s.persistentVolumeReclaimPolicy, claim = ref.name, namespace = ref.namespace,
    claim_phase = pvc and (phase(pvc) or "Pending") or (ref.name and "absent" or nil),
    managed_by_hypd = M.labels(pv)[M.MANAGED] == "hypd", mount_options = s.mountOptions,
    cluster_tag = M.labels(pv)[M.TAG_LABEL] }
  if kind == "s3" then
    out.bucket = attrs.bucketName
    out.bucket_region = M.mount_option(pv, "region")
    out.prefix = M.mount_option(pv, "prefix")
  elseif kind == "fsx" then
    out.file_system_id = csi.volumeHandle
    out.dns_name, out.mount_name = attrs.dnsname, attrs.mountname
  end
  return out
end

return M
