-- An S3 storage seen by the real clients, against a `hypd sandbox` process:
-- boto3 makes the EKS cluster with the Mountpoint add-on, storage_create_s3
-- (this process, through the standard endpoint variables) mounts hypd's
-- bucket, kubectl shows the PersistentVolume and claim as specified and
-- Bound, boto3 puts a tree of objects (versioned, one overwritten, one
-- deleted), storage_list_contents lists it folder by folder with pages,
-- and storage_delete with force empties the versioned bucket (boto3 finds
-- no bucket after).
local t = require "hypd.tap"
local json = require "hypd.json"
local op = require "hypd.tool.operations"
local dispatch = require "hypd.tool.dispatch"
local sys = require "hypd.sys"
local H = dofile("tests/lua/helpers.lua")

local dir = H.tmpdir()
local kc = H.kubectl_harness(dir)
local env, pid = {}, nil
local NAME = "hypd-files"
local BUCKET = "hypd-files-data-123456789012-us-west-2"
local WHO = { name = "tester", scope = "admin", front = "test" }
local ready, absent = false, nil
local function skip() return t.skip(absent or "no cluster: the first test failed to make it") end

local function py(args) return kc.sh("python3 tests/tools/storage_s3.py " .. args) end

local function run(name, params)
  local acc, err = dispatch.call(name, params, WHO)
  t.ok(acc, name .. " accepted: " .. json.encode(err))
  local view = op.wait(acc.operation_id)
  t.eq(view.status, "succeeded", name .. ": " .. json.encode(view.error))
  return view.result or {}
end

local function contents(params)
  local r, err = dispatch.call("storage_list_contents", params, WHO)
  t.ok(r, "storage_list_contents answers: " .. json.encode(err))
  return r or {}
end

t.test("a sandbox process, an EKS cluster with the Mountpoint add-on (boto3), and hypd's S3 storage on it",
  function()
    if H.sh("command -v kubectl") ~= 0 or H.sh("python3 -c 'import boto3'") ~= 0 then
      absent = "no kubectl or boto3 on this machine"
      return skip()
    end
    env, pid = H.sandbox_process(dir, "--virtual-clock")
    env = env or {}
    kc.env = env
    t.ok(env.AWS_ENDPOINT_URL, "the sandbox started")
    -- this process reaches it the standard way, as `hypd serve` would
    sys.setenv("AWS_PROFILE")
    sys.setenv("AWS_SESSION_TOKEN")
    for svc in pairs(require("hypd.aws").SERVICES) do sys.setenv("AWS_ENDPOINT_URL_" .. svc:upper()) end
    for k, v in pairs(env) do sys.setenv(k, v) end
    require("hypd.tool.loader").load()
    local rc, out, err = py("cluster " .. NAME)
    t.eq(rc, 0, err)
    t.like(out, "^https://127%.0%.0%.1:%d+")
    require("hypd.clusters").set_active { name = NAME, region = "us-west-2" }
    local r = run("storage_create_s3", {})
    t.eq({ r.bucket, r.claim_phase }, { BUCKET, "Bound" })
    rc, out, err = kc.sh(H.hypd .. " kubeconfig --cluster " .. NAME .. " --write " .. H.quote(kc.kc))
    t.eq({ rc, out }, { 0, "" }, err)
    ready = rc == 0 and r.claim_phase == "Bound"
  end)

t.test("kubectl shows the PersistentVolume and claim as specified, Bound", function()
  if not ready then return skip() end
  local rc, out, err = kc.kubectl("get pv s3-pv-s3-claim -o json")
  t.eq(rc, 0, err)
  local pv = json.decode(out)
  t.eq(pv.spec.csi.driver, "s3.csi.aws.com")
  t.eq(pv.spec.csi.volumeHandle, "s3-csi-driver-volume-s3-claim")
  t.eq(pv.spec.csi.volumeAttributes.bucketName, BUCKET)
  t.eq(pv.spec.mountOptions, { "allow-delete", "region us-west-2" })
  t.eq(pv.spec.capacity.storage, "1200Gi")
  t.eq(pv.spec.accessModes, { "ReadWriteMany" })
  t.eq(pv.status.phase, "Bound")
  rc, out, err = kc.kubectl("get pvc s3-claim")
  t.eq(rc, 0, err)
  t.like(out, "^NAME%s+STATUS%s+VOLUME%s+CAPACITY%s+ACCESS MODES%s+STORAGECLASS%s+")
  t.like(out, "\ns3%-claim%s+Bound%s+s3%-pv%-s3%-claim%s+1200Gi%s+RWX%s+")
end)

t.test("storage_list_contents lists folders and objects a page at a time, with sizes and times", function()
  if not ready then return skip() end
  local rc, out, err = py("put " .. BUCKET)
  t.eq({ rc, out }, { 0, "255\n" }, err)
  local top = contents { claim_name = "s3-claim" }
  t.eq(top.bucket, BUCKET)
  t.eq(top.bucket_region, "us-west-2")
  t.eq(top.folders, { "checkpoints/", "datasets/", "models/" })
  local keys = {}
  for i, o in ipairs(top.objects) do keys[i] = o.key end
  t.eq(keys, { "README.md", "config.yaml" }, "notes.txt was deleted (a delete marker hides it)")
  t.eq(top.objects[2].size, #"second version", "the current version")
  t.ok(top.objects[1].last_modified ~= nil, "a time")
  t.eq(top.next_page_token, nil)
  -- 250 objects in pages of 100
  local seen, pages, token = {}, 0, nil
  repeat
    local page = contents { claim_name = "s3-claim", prefix = "datasets/", page_size = 100, page_token = token }
    pages = pages + 1
    for _, o in ipairs(page.objects) do seen[#seen + 1] = o end
    token = page.next_page_token
    t.eq(page.truncated, token ~= nil)
  until not token or pages > 5
  t.eq(pages, 3)
  t.eq(#seen, 250)
  t.eq({ seen[1].key, seen[1].size, seen[250].key, seen[250].size },
    { "datasets/img-000.jpg", 1, "datasets/img-249.jpg", 250 })
  local m = contents { claim_name = "s3-claim", prefix = "models/" }
  t.eq({ m.folders, #m.objects }, { { "models/llama/" }, 0 })
  local by_bucket = contents { bucket = BUCKET, prefix = "models/llama/" }
  t.eq(#by_bucket.objects, 2)
  t.eq(by_bucket.objects[2].size, 4096)
end)

t.test("storage_delete with force empties the versioned bucket and deletes it (boto3 sees it gone)", function()
  if not ready then return skip() end
  local rc, out, err = py("versions " .. BUCKET)
  -- 256 keys put, config.yaml twice (its first version kept), notes.txt kept under its delete marker
  t.eq({ rc, out }, { 0, "257 1\n" }, err)
  local r = run("storage_delete", { claim_name = "s3-claim", delete_bucket = true, force = true })
  t.eq(r.objects_deleted, 258, "every version and the delete marker")
  local gone, _, gerr = py("gone " .. BUCKET)
  t.eq(gone, 0, "HeadBucket answers 404: " .. tostring(gerr))
  rc, out = kc.kubectl("get pv,pvc -o name")
  t.eq({ rc, out }, { 0, "" }, "no volume or claim left")
end)

t.cleanup(function()
  if pid then os.execute("kill " .. tostring(pid) .. " 2>/dev/null") end
  os.execute("rm -rf " .. H.quote(dir))
end)
