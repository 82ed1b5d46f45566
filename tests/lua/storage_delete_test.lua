-- storage_delete against the in-process sandbox (virtual clock): the claim
-- and volume go, the bucket stays unless asked (reported), a bucket that
-- holds data stays unless forced (reported with what it holds), a forced
-- delete empties a versioned bucket (every version and delete marker) and
-- deletes it, a reused bucket is never deleted, a claim a pod mounts is
-- refused naming the pod, and plan = true lists what would be deleted and
-- kept without sending a mutation.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
local SRV = H.sandbox_here()
require("hypd.tool.loader").load()
local SH = dofile("tests/lua/storage_helpers.lua")
local dispatch = require "hypd.tool.dispatch"
local call, try = SH.call, SH.try

local NAME = "hypd-del"
local BUCKET = "hypd-del-data-123456789012-us-west-2"

local function kept(r, typ)
  for _, k in ipairs(r.kept or {}) do if k.type == typ then return k end end
end
local function deleted(r)
  local out = {}
  for i, d in ipairs(r.deleted or {}) do out[i] = d.type .. " " .. d.name end
  return out
end

t.test("the claim and volume go; the bucket is kept, reported as not asked for", function()
  SH.cluster(NAME, 71, { "aws-mountpoint-s3-csi-driver" })
  SH.ok_run("storage_create_s3", {})
  call("s3", "PutObject", { Bucket = BUCKET, Key = "data/a.bin", Body = "hello" })
  local r = SH.ok_run("storage_delete", { claim_name = "s3-claim" })
  t.eq(deleted(r), { "kubernetes:persistentvolumeclaim default/s3-claim", "kubernetes:persistentvolume s3-pv-s3-claim" })
  t.like(kept(r, "s3:bucket").why, "^not asked: delete_bucket = true deletes it")
  local k = SH.k8s(NAME)
  t.eq(k:get("v1", "PersistentVolumeClaim", "s3-claim", { namespace = "default" }), nil)
  t.eq(k:get("v1", "PersistentVolume", "s3-pv-s3-claim"), nil)
  t.ok(try("s3", "HeadBucket", { Bucket = BUCKET }), "the bucket is still there")
end)

t.test("delete_bucket without force keeps a bucket that holds data, saying what it holds", function()
  SH.ok_run("storage_create_s3", {})
  local m = SH.mark()
  local r = SH.ok_run("storage_delete", { claim_name = "s3-claim", delete_bucket = true })
  t.like(kept(r, "s3:bucket").why, "^holds data %(1 object version%); force = true empties it")
  local counts = SH.mutations(m)
  t.eq(counts["s3 DeleteBucket"], nil)
  t.eq(counts["s3 DeleteObjects"], nil)
  t.eq(call("s3", "ListObjectsV2", { Bucket = BUCKET }).KeyCount, 1, "the object is still there")
end)

t.test("a claim a running pod mounts is refused, naming the pod, and nothing is deleted", function()
  SH.ok_run("storage_create_s3", {})
  local k = SH.k8s(NAME)
  assert(k:create { apiVersion = "v1", kind = "Pod", metadata = { name = "trainer", namespace = "default" },
    spec = { containers = { { name = "c", image = "busybox" } },
      volumes = { { name = "data", persistentVolumeClaim = { claimName = "s3-claim" } } } } })
  local view = SH.run("storage_delete", { claim_name = "s3-claim" })
  t.eq(view.status, "failed")
  t.eq(view.error.code, "CONFLICT")
  t.like(view.error.message, "mounted by 1 pod%(s%): trainer")
  t.ok(k:get("v1", "PersistentVolumeClaim", "s3-claim", { namespace = "default" }), "the claim is still there")
  assert(k:delete("v1", "Pod", "trainer", { namespace = "default", wait = true }))
end)

t.test("plan = true lists the claim and volume to delete and the bucket to keep, with no mutation", function()
  local m = SH.mark()
  local p = assert(dispatch.call("storage_delete", { claim_name = "s3-claim", delete_bucket = true, plan = true },
    SH.WHO))
  t.eq(SH.rows(p), { "delete kubernetes:persistentvolumeclaim default/s3-claim",
    "delete kubernetes:persistentvolume s3-pv-s3-claim", "keep s3:bucket " .. BUCKET })
  t.like(p.plan[3].why, "^holds data")
  t.eq(p.delete, 2)
  local _, n = SH.mutations(m)
  t.eq(n, 0)
  local p2 = assert(dispatch.call("storage_delete", { claim_name = "s3-claim", delete_bucket = true, force = true,
    plan = true }, SH.WHO))
  t.eq(p2.plan[3].action .. " " .. p2.plan[3].type, "delete s3:bucket")
end)

t.test("force empties a versioned bucket, every version and delete marker, then deletes it", function()
  call("s3", "PutBucketVersioning", { Bucket = BUCKET, VersioningConfiguration = { Status = "Enabled" } })
  for i = 1, 3 do call("s3", "PutObject", { Bucket = BUCKET, Key = "data/a.bin", Body = "v" .. i }) end
  for i = 1, 1200 do call("s3", "PutObject", { Bucket = BUCKET, Key = string.format("bulk/%04d", i), Body = "x" }) end
  call("s3", "DeleteObject", { Bucket = BUCKET, Key = "bulk/0001" })
  local v = call("s3", "ListObjectVersions", { Bucket = BUCKET, Prefix = "data/" })
  t.eq(#v.Versions, 4, "the null version and three more")
  local m = SH.mark()
  local r = SH.ok_run("storage_delete", { claim_name = "s3-claim", delete_bucket = true, force = true })
  t.eq(r.objects_deleted, 1205, "4 versions of data/a.bin, 1200 bulk objects, 1 delete marker")
  t.eq(deleted(r)[3], "s3:bucket " .. BUCKET)
  t.eq(kept(r, "s3:bucket"), nil)
  local counts = SH.mutations(m)
  t.eq(counts["s3 DeleteObjects"], 2, "a thousand a call")
  t.eq(counts["s3 DeleteBucket"], 1)
  t.eq(try("s3", "HeadBucket", { Bucket = BUCKET }), nil, "the bucket is gone")
end)

t.test("a reused bucket is never deleted, even with force, and the reason is reported", function()
  call("s3", "CreateBucket", { Bucket = "shared-data", CreateBucketConfiguration = { LocationConstraint = "us-west-2" } })
  call("s3", "PutObject", { Bucket = "shared-data", Key = "x", Body = "keep me" })
  SH.ok_run("storage_create_s3", { bucket = "shared-data", claim_name = "shared" })
  local r = SH.ok_run("storage_delete", { claim_name = "shared", delete_bucket = true, force = true })
  t.like(kept(r, "s3:bucket").why, "^not hypd's: it has no hypd:cluster%-tag=del tag")
  t.eq(call("s3", "GetObject", { Bucket = "shared-data", Key = "x" }).Body, "keep me")
end)

t.test("a storage that does not exist, or one hypd did not make, is refused", function()
  local view = SH.run("storage_delete", { claim_name = "nothing-here" })
  t.eq(view.error.code, "NOT_FOUND")
  local k = SH.k8s(NAME)
  -- made by someone else (hypd's client would label it as hypd's)
  local cl = require("sandbox.k8s").cluster("us-west-2", NAME)
  assert(cl:create(cl.reg:find("", "v1", "persistentvolumeclaims"), { apiVersion = "v1",
    kind = "PersistentVolumeClaim", metadata = { name = "theirs", namespace = "default",
      labels = { ["app.kubernetes.io/managed-by"] = "Helm" } },
    spec = { accessModes = { "ReadWriteOnce" }, resources = { requests = { storage = "1Gi" } } } }))
  view = SH.run("storage_delete", { claim_name = "theirs" })
  t.eq(view.error.code, "CONFLICT")
  t.like(view.error.message, "was not made by hypd")
  t.ok(k:get("v1", "PersistentVolumeClaim", "theirs", { namespace = "default" }), "still there")
end)

t.test("the storage tools run under the IAM policy hypd iam-policy prints for them, enforced by the sandbox",
  function()
    local policy = require "sandbox.policy"
    local doc = assert(require("hypd.iam_policy").document { tools = { "storage_create_s3", "storage_list",
      "storage_list_contents", "storage_delete" } })
    local function policed(fn)
      assert(policy.set(doc))
      local ok, err = pcall(fn)
      policy.set(nil)
      if not ok then error(err, 0) end
    end
    policed(function() SH.ok_run("storage_create_s3", { claim_name = "policed" }) end)
    call("s3", "PutObject", { Bucket = BUCKET, Key = "a/b", Body = "data" })
    policed(function()
      local l = SH.read("storage_list_contents", { claim_name = "policed", prefix = "a/" })
      t.eq(#l.objects, 1)
      local r = SH.ok_run("storage_delete", { claim_name = "policed", delete_bucket = true, force = true })
      t.eq(r.objects_deleted, 1)
    end)
    t.eq(try("s3", "HeadBucket", { Bucket = BUCKET }), nil)
    -- one action less: refused, naming it
    doc = H.policy_without(doc, "s3:ListBucket")
    local _, err
    policed(function() _, err = dispatch.call("storage_list_contents", { bucket = "shared-data" }, SH.WHO) end)
    t.eq(err and err.code, "AccessDenied")
    t.like(err and err.message, "s3:ListBucket")
  end)

t.cleanup(function() SRV:stop() end)
