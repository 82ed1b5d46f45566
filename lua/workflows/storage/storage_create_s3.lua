-- storage_create_s3: stage 5, an S3 bucket mounted in the cluster through
-- Mountpoint for Amazon S3 (the aws-mountpoint-s3-csi-driver add-on): the
-- bucket (_s3), a static PersistentVolume and its claim
-- (_storage).
local P = require "_params"
local S = require "_storage"
local A = require "_eks_addon"
local s3 = require "_s3"
local grant = require "_s3_grant"

local params = {
  cluster = P.cluster,
  region = P.region,
  claim_name = P.with(S.claim_name, { default = S.DEFAULT_CLAIM.s3,
    description = "the PersistentVolumeClaim pods mount (default s3-claim, the name training and inference " ..
      "templates use); its volume is s3-pv-<claim>" }),
  namespace = S.namespace,
  bucket = { type = "string", pattern = "^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$", decision = true,
    pattern_help = "an S3 bucket name: 3 to 63 lowercase letters, digits, '.' and '-'",
    description = "an existing bucket to mount as it is (any region; hypd never tags or changes it). Without " ..
      "it hypd creates, or finds again, its own bucket hypd-<tag>-data-<account>-<region> in the call's region." },
  mount_options = { type = "array", items = { type = "string", pattern = "^[a-z][a-z0-9-]*( [^ ]+| *=[^ ]+)?$",
    pattern_help = "a Mountpoint option like uid=1000, allow-other, prefix data/ or cache /tmp/s3" },
    description = "more Mountpoint for S3 mount options besides allow-delete and region <bucket's region> " ..
      "(e.g. allow-other, uid=1000, gid=1000, prefix data/)" },
}

local function mount_options(p, region)
  local out = { "allow-delete", "region " .. region }
  for _, o in ipairs(p.mount_options or {}) do
    if not o:match("^region[ =]") and o ~= "allow-delete" then out[#out + 1] = o end
  end
  return out
end

local function check(ctx)
  local p, st = ctx.params, ctx.state
  local cl = S.cluster(ctx, p, { plan_missing = true })
  st.cluster = cl
  S.claim_free(ctx, cl, "s3", p.namespace, p.claim_name)
  A.require_active(ctx, cl, S.ADDONS.s3, "an S3 volume (Mountpoint for Amazon S3)")
end

local function bucket(ctx)
  local st = ctx.state
  local b = s3.ensure_bucket(ctx, st.cluster.tag, ctx.params.bucket)
  st.bucket = b
  -- the driver's role may use only the buckets it mounts
  grant.ensure(ctx, st.cluster, b.name, ctx.params.bucket == nil)
end

local function volume(ctx)
  local p, st = ctx.params, ctx.state
  local cl, b = st.cluster, st.bucket
  local k = not cl.planned and ctx:k8s(cl.name) or nil
  local name = S.volume_name("s3", p.namespace, p.claim_name)
  local opts = mount_options(p, b.region)
  local v = S.ensure_volume(ctx, k, cl, { kind = "s3", name = name, ns = p.namespace, claim = p.claim_name,
    tag = cl.tag, capacity = S.CAPACITY, mount_options = opts, annotations = { [S.BUCKET_ANN] = b.name },
    csi = { driver = S.DRIVERS.s3, volumeHandle = S.s3_handle(p.namespace, p.claim_name),
      volumeAttributes = { bucketName = b.name } } })
  st.result = { cluster = cl.name, region = cl.region, cluster_tag = cl.tag, claim_name = p.claim_name,
    namespace = p.namespace, volume_name = v.volume, claim_phase = v.claim_phase, volume_phase = v.volume_phase,
    bucket = b.name, bucket_region = b.region, bucket_created = b.action == "created", bucket_reused = b.reused,
    bucket_owned_by_hypd = b.owned, mount_options = opts, driver = S.DRIVERS.s3,
    mount = { persistentVolumeClaim = { claimName = p.claim_name } } }
end

return tool {
  name = "storage_create_s3",
  summary = "Stage 5: mount an S3 bucket in the cluster (Mountpoint for S3 PersistentVolume and claim)",
  description = "Makes an S3 bucket available to pods as the PersistentVolumeClaim claim_name (default " ..
    "s3-claim, ReadWriteMany) through the Mountpoint for Amazon S3 CSI driver: a static PersistentVolume " ..
    "s3-pv-<claim> (driver s3.csi.aws.com, volumeHandle s3-csi-driver-volume-<claim>, mount options allow-delete " ..
    "and region <bucket's region>, 1200Gi) pre-bound to the claim. The bucket is hypd's own " ..
    "hypd-<tag>-data-<account>-<region> (created when missing, tagged hypd:cluster-tag=<tag>) unless bucket " ..
    "names an existing one to reuse as it is (the driver's role, which names only hypd's data bucket, is then " ..
    "granted that bucket by an inline policy hypd-s3-<bucket>). Needs the aws-mountpoint-s3-csi-driver EKS add-on: when it is " ..
    "missing the operation fails at once, before any change, naming cluster_configure_dependencies (which " ..
    "installs it). Pods mount it with volumes: [{name: data, persistentVolumeClaim: {claimName: s3-claim}}]. " ..
    "It answers with an operation (a few seconds of work); follow it with storage_list (operation_id, " ..
    "wait_seconds). Calling it again changes nothing; plan = true lists what it would make.",
  kind = "mutating",
  status_tool = "storage_list",
  aws = { "eks:DescribeCluster", "eks:DescribeAddon", "s3:HeadBucket", "s3:CreateBucket", "s3:GetBucketTagging",
    "s3:PutBucketTagging", "sts:GetCallerIdentity", "iam:GetRole", "iam:GetRolePolicy", "iam:PutRolePolicy" },
  k8s = { "get", "list", "watch", "apply" },
  params = P.form({ "claim_name", "bucket" }, { "mount_options", "namespace", "cluster", "region" }, params),
  target = S.target,
  steps = {
    { name = "check", run = check },
    { name = "bucket", run = bucket },
    { name = "volume", run = volume },
  },
}
