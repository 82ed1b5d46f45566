-- storage_create_s3 against the in-process sandbox (virtual clock): on a
-- cluster without the Mountpoint add-on it is refused before any change,
-- naming the tool that installs it; with it, hypd's bucket (named and
-- tagged for the cluster tag) and a PersistentVolume and claim exactly as
-- specified, Bound; a second call changes nothing; an existing bucket in
-- another region is mounted as it is (never tagged); a bucket with hypd's
-- name that is not hypd's is a CONFLICT; plan = true lists what it would
-- make and sends no mutation; storage_list shows the storages and follows
-- an operation with wait_seconds.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
local SRV = H.sandbox_here() -- kept: the sandbox lives while this does
require("hypd.tool.loader").load()
local SH = dofile("tests/lua/storage_helpers.lua")
local dispatch = require "hypd.tool.dispatch"
local tool = require "hypd.tool.registry"
local call, try = SH.call, SH.try

local BARE, NAME = "hypd-bare", "hypd-demo"
local BUCKET = "hypd-demo-data-123456789012-us-west-2"

local function tags_of(bucket, region)
  local out = {}
  local r = require("hypd.aws").call("s3", "GetBucketTagging", { Bucket = bucket }, { region = region or "us-west-2" })
  for _, x in ipairs(r.TagSet) do out[x.Key] = x.Value end
  return out
end

t.test("without the aws-mountpoint-s3-csi-driver add-on the call fails before any change, naming " ..
  "cluster_configure_dependencies", function()
  SH.cluster(BARE, 61)
  local m = SH.mark()
  local view = SH.run("storage_create_s3", { cluster = BARE })
  t.eq(view.status, "failed")
  t.eq(view.error.code, "STATE")
  t.like(view.error.message, "has no aws%-mountpoint%-s3%-csi%-driver add%-on")
  t.like(view.error.message, "cluster_configure_dependencies cluster=hypd%-bare installs it")
  local _, n = SH.mutations(m)
  t.eq(n, 0, "no AWS mutation was sent")
  t.eq(try("s3", "HeadBucket", { Bucket = "hypd-bare-data-123456789012-us-west-2" }), nil, "no bucket made")
  local k = SH.k8s(BARE)
  t.eq(#assert(k:list("v1", "PersistentVolume")), 0, "no volume made")
  -- the status tool shows the failed operation
  local st = SH.read("storage_list", { operation_id = view.operation_id })
  t.eq(st.operation.status, "failed")
  t.eq(st.addons.s3.status, "NOT_INSTALLED")
end)

t.test("plan = true on a cluster with the add-on lists the bucket, volume and claim and sends no mutation",
  function()
    SH.cluster(NAME, 62, { "aws-mountpoint-s3-csi-driver" })
    local m = SH.mark()
    local p = assert(dispatch.call("storage_create_s3", { plan = true }, SH.WHO))
    t.eq(SH.rows(p), { "create s3:bucket " .. BUCKET, "create kubernetes:persistentvolume s3-pv-s3-claim",
      "create kubernetes:persistentvolumeclaim default/s3-claim" })
    t.eq(p.plan[1].fields["tag:hypd:cluster-tag"], "demo")
    t.eq(p.plan[2].fields.mountOptions, { "allow-delete", "region us-west-2" })
    t.eq(p.plan[2].fields.volumeHandle, "s3-csi-driver-volume-s3-claim")
    t.eq(p.plan[2].fields.volumeAttributes, { bucketName = BUCKET })
    local _, n = SH.mutations(m)
    t.eq(n, 0, "the audit log is empty")
    t.eq(try("s3", "HeadBucket", { Bucket = BUCKET }), nil, "no bucket")
  end)

t.test("hypd's bucket, tagged, and a PersistentVolume and claim as specified, Bound", function()
  local r = SH.ok_run("storage_create_s3", {})
  t.eq(r.bucket, BUCKET)
  t.eq(r.bucket_created, true)
  t.eq(r.claim_phase, "Bound")
  t.eq(r.volume_phase, "Bound")
  t.eq(r.mount_options, { "allow-delete", "region us-west-2" })
  local tags = tags_of(BUCKET)
  t.eq(tags["hypd:cluster-tag"], "demo")
  t.eq(tags["hypd:storage"], "s3")
  t.eq(call("s3", "GetBucketLocation", { Bucket = BUCKET }).LocationConstraint, "us-west-2")
  local k = SH.k8s(NAME)
  local pv = assert(k:get("v1", "PersistentVolume", "s3-pv-s3-claim"))
  t.eq(pv.spec.csi.driver, "s3.csi.aws.com")
  t.eq(pv.spec.csi.volumeHandle, "s3-csi-driver-volume-s3-claim")
  t.eq(pv.spec.csi.volumeAttributes, { bucketName = BUCKET })
  t.eq(pv.spec.mountOptions, { "allow-delete", "region us-west-2" })
  t.eq(pv.spec.capacity, { storage = "1200Gi" })
  t.eq(pv.spec.accessModes, { "ReadWriteMany" })
  t.eq(pv.spec.persistentVolumeReclaimPolicy, "Retain")
  t.eq(pv.spec.storageClassName, "")
  t.eq({ pv.spec.claimRef.namespace, pv.spec.claimRef.name }, { "default", "s3-claim" })
  t.eq(pv.status.phase, "Bound")
  t.eq(pv.metadata.labels["app.kubernetes.io/managed-by"], "hypd")
  local pvc = assert(k:get("v1", "PersistentVolumeClaim", "s3-claim", { namespace = "default" }))
  t.eq(pvc.spec.volumeName, "s3-pv-s3-claim")
  t.eq(pvc.spec.accessModes, { "ReadWriteMany" })
  t.eq(pvc.spec.resources.requests.storage, "1200Gi")
  t.eq(pvc.status.phase, "Bound")
  t.eq(pvc.status.capacity, { storage = "1200Gi" })
  t.eq(pvc.metadata.annotations["pv.kubernetes.io/bind-completed"], "yes")
  t.eq(pv.spec.claimRef.uid, pvc.metadata.uid, "the volume names the claim's uid")
end)

t.test("a second call sends no mutation and changes nothing", function()
  local m = SH.mark()
  local r = SH.ok_run("storage_create_s3", {})
  t.eq(r.bucket_created, false)
  t.eq(r.claim_phase, "Bound")
  local _, n = SH.mutations(m)
  t.eq(n, 0)
  local p = assert(dispatch.call("storage_create_s3", { plan = true }, SH.WHO))
  t.eq(#p.plan, 0, "nothing to plan")
end)

t.test("an existing bucket in another region is mounted as it is, with its region, and never tagged", function()
  require("hypd.aws").call("s3", "CreateBucket", { Bucket = "team-datasets",
    CreateBucketConfiguration = { LocationConstraint = "eu-west-1" } }, { region = "eu-west-1" })
  local m = SH.mark()
  local r = SH.ok_run("storage_create_s3", { bucket = "team-datasets", claim_name = "datasets",
    namespace = "kube-public", mount_options = { "allow-other", "uid=1000" } })
  t.eq({ r.bucket, r.bucket_region, r.bucket_reused, r.bucket_created, r.bucket_owned_by_hypd },
    { "team-datasets", "eu-west-1", true, false, false })
  local counts = SH.mutations(m)
  t.eq(counts, {}, "no AWS mutation: the bucket is used as it is")
  t.eq(try("s3", "GetBucketTagging", { Bucket = "team-datasets" }), nil, "still untagged")
  local pv = assert(SH.k8s(NAME):get("v1", "PersistentVolume", "s3-pv-kube-public-datasets"))
  t.eq(pv.spec.mountOptions, { "allow-delete", "region eu-west-1", "allow-other", "uid=1000" })
  t.eq(pv.spec.csi.volumeHandle, "s3-csi-driver-volume-kube-public-datasets")
  t.eq(pv.status.phase, "Bound")
end)

t.test("a bucket with hypd's name that hypd did not tag is a CONFLICT that says how to mount it", function()
  call("s3", "CreateBucket", { Bucket = "hypd-other-data-123456789012-us-west-2",
    CreateBucketConfiguration = { LocationConstraint = "us-west-2" } })
  SH.cluster("hypd-other", 63, { "aws-mountpoint-s3-csi-driver" })
  local view = SH.run("storage_create_s3", { cluster = "hypd-other" })
  t.eq(view.status, "failed")
  t.eq(view.error.code, "CONFLICT")
  t.like(view.error.message, "pass bucket = hypd%-other%-data%-123456789012%-us%-west%-2")
  t.eq(#assert(SH.k8s("hypd-other"):list("v1", "PersistentVolume")), 0)
end)

t.test("storage_list shows every S3 volume with its claim, bucket and status, and follows an operation", function()
  require("hypd.clusters").set_active { name = NAME, region = "us-west-2" }
  local l = SH.read("storage_list", {})
  t.eq(l.cluster, NAME)
  t.eq(l.addons.s3.status, "ACTIVE")
  t.eq(l.addons.fsx.status, "NOT_INSTALLED")
  t.eq(#l.storages, 2)
  local d = l.storages[1]
  t.eq({ d.type, d.claim, d.namespace, d.bucket, d.bucket_region, d.claim_phase, d.volume_phase, d.bucket_status,
    d.managed_by_hypd }, { "s3", "s3-claim", "default", BUCKET, "us-west-2", "Bound", "Bound", "exists", true })
  t.eq(l.storages[2].bucket, "team-datasets")
  local acc = assert(dispatch.call("storage_create_s3", { claim_name = "more" }, SH.WHO))
  local core = require "hypd.core"
  local t0 = core.now()
  local w = SH.read("storage_list", { operation_id = acc.operation_id, wait_seconds = 60 })
  t.ok(core.now() - t0 < 5, "answered as soon as the phase changed, not after 60 s: " .. (core.now() - t0))
  t.ok(w.operation.phase ~= "queued", "the new phase: " .. tostring(w.operation.phase))
  require("hypd.tool.operations").wait(acc.operation_id)
  w = SH.read("storage_list", { operation_id = acc.operation_id })
  t.eq(w.operation.status, "succeeded")
  t.eq(#w.storages, 3)
end)

t.test("in a pipeline's plan a cluster that does not exist yet plans the bucket, volume and claim, and reads " ..
  "nothing about the cluster's Kubernetes", function()
  local m = SH.mark()
  local p, err = dispatch.call("storage_create_s3", { cluster = "hypd-future", plan = true }, SH.WHO)
  t.ok(p, require("hypd.json").encode(err))
  t.eq(SH.rows(p), { "create s3:bucket hypd-future-data-123456789012-us-west-2",
    "create kubernetes:persistentvolume s3-pv-s3-claim", "create kubernetes:persistentvolumeclaim default/s3-claim" })
  local _, n = SH.mutations(m)
  t.eq(n, 0)
  local view = SH.run("storage_create_s3", { cluster = "hypd-future" })
  t.eq(view.error.code, "NOT_FOUND", "without plan, a missing cluster is refused")
end)

t.test("ensure_bucket makes hypd's bucket with no EKS cluster at all (the pipeline's early step), once", function()
  local playbook = require "hypd.playbook"
  local s3 = playbook.load("_s3")
  tool.define { name = "cluster_test_early_bucket", summary = "test", description = "test", kind = "mutating",
    status_tool = "operation_get", aws = s3.AWS, target = function(p) return "early/" .. p.tag end,
    params = { tag = { type = "string", required = true } },
    steps = { { name = "bucket", run = function(ctx)
      ctx.state.result = s3.ensure_bucket(ctx, ctx.params.tag)
    end } } }
  local plan = assert(dispatch.call("cluster_test_early_bucket", { tag = "early", plan = true }, SH.WHO))
  t.eq(plan.plan[1].action .. " " .. plan.plan[1].name, "create hypd-early-data-123456789012-us-west-2")
  local m = SH.mark()
  local r = SH.ok_run("cluster_test_early_bucket", { tag = "early" })
  t.eq({ r.name, r.region, r.action, r.owned }, { "hypd-early-data-123456789012-us-west-2", "us-west-2", "created",
    true })
  t.eq(tags_of(r.name)["hypd:cluster-tag"], "early")
  local counts = SH.mutations(m)
  t.eq(counts, { ["s3 CreateBucket"] = 1 })
  m = SH.mark()
  t.eq(SH.ok_run("cluster_test_early_bucket", { tag = "early" }).action, "unchanged")
  local _, n = SH.mutations(m)
  t.eq(n, 0)
  -- a long tag still gives a valid bucket name of at most 63 characters
  local long = playbook.load("_names").bucket("a-very-long-cluster-tag-of-32-ch", "123456789012", "ap-southeast-4")
  t.ok(#long <= 63, long .. " has " .. #long .. " characters")
  t.like(long, "^hypd%-a%-very%-long%-cluste%-%x%x%x%x%x%x%-data%-123456789012%-ap%-southeast%-4$")
end)

t.cleanup(function() SRV:stop() end)
