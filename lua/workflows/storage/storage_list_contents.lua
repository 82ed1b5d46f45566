-- storage_list_contents: one page of what an S3 storage holds under a
-- prefix, as a file browser shows a folder (ListObjectsV2, delimiter "/").
local P = require "_params"
local S = require "_storage"
local s3 = require "_s3"

return tool {
  name = "storage_list_contents",
  summary = "List an S3 storage's folder: sub-folders and objects with sizes and times, a page at a time",
  description = "Lists one level of an S3 storage under prefix (folders end with '/'): by claim_name (the " ..
    "claim's volume gives the bucket, its region and any Mountpoint prefix) or by bucket. Answers folders, " ..
    "objects (key, size in bytes, last_modified, storage_class), and next_page_token while there is more: pass " ..
    "it back as page_token for the next page. page_size is at most 1000 (default 100).",
  kind = "read",
  aws = { "eks:DescribeCluster", "s3:HeadBucket", "s3:ListObjectsV2" },
  k8s = { "get" },
  params = P.form({},
    { "bucket", "claim_name", "page_size", "page_token", "prefix", "namespace", "cluster", "region" },
    {
    cluster = P.cluster,
    region = P.region,
    claim_name = P.with(S.claim_name, { description = "the claim of an S3 storage (storage_list shows them)" }),
    namespace = S.namespace,
    bucket = { type = "string", pattern = "^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$",
      pattern_help = "an S3 bucket name", description = "a bucket to list instead of a claim's" },
    prefix = { type = "string", default = "", max_length = 1024,
      description = "the folder to list, e.g. datasets/ (default: the top); a prefix without '/' at the end " ..
        "lists what starts with it" },
    page_token = { type = "string", max_length = 4096,
      description = "next_page_token of the previous page of the same listing" },
    page_size = { type = "integer", minimum = 1, maximum = 1000, default = 100,
      description = "at most this many folders and objects per page" },
  }, { bucket = "Bucket" }),
  run = function(ctx, p)
    local bucket, region, base = p.bucket, nil, ""
    local out = {}
    if not bucket then
      if not p.claim_name then
        hypd.errors.refuse("claim_name", "required", "give claim_name (an S3 storage's claim) or bucket",
          { field_message = "claim_name or bucket" })
      end
      local e = require("_hyperpod").eks(ctx, p)
      local k = ctx:k8s(e.name)
      local pvc = S.get(k, "v1", "PersistentVolumeClaim", p.claim_name, p.namespace)
      if not pvc then
        hypd.errors.refuse("claim_name", "exists", string.format("no claim %s/%s in cluster %s", p.namespace, p.claim_name,
          e.name), { code = "NOT_FOUND", field_message = "claim_name: no such claim" })
      end
      local pv = pvc.spec.volumeName and S.get(k, "v1", "PersistentVolume", pvc.spec.volumeName)
      if not pv or S.kind_of(pv) ~= "s3" then
        hypd.errors.refuse("claim_name", "s3", string.format("claim %s/%s is not an S3 storage (its volume is %s)",
          p.namespace, p.claim_name, pv and tostring((pv.spec.csi or {}).driver or "not a CSI volume") or "not bound"),
          { field_message = "claim_name: not an S3 storage" })
      end
      bucket = pv.spec.csi.volumeAttributes.bucketName
      region = S.mount_option(pv, "region")
      base = S.mount_option(pv, "prefix") or ""
      out.claim_name, out.namespace, out.cluster, out.mount_prefix = p.claim_name, p.namespace, e.name, base
    end
    if not region then
      local h = s3.head(ctx, bucket)
      if not h then
        hypd.errors.refuse("bucket", "exists", "S3 bucket " .. bucket .. " does not exist",
          { code = "NOT_FOUND", field_message = "bucket: no such bucket" })
      end
      region = h.Region
    end
    local page = s3.list(ctx, bucket, region, base .. p.prefix, p.page_token, p.page_size)
    out.bucket, out.bucket_region, out.prefix = bucket, region, p.prefix
    -- keys as the pods see them: under the Mountpoint prefix
    local function strip(key) return base ~= "" and key:sub(1, #base) == base and key:sub(#base + 1) or key end
    for i, f in ipairs(page.folders) do page.folders[i] = strip(f) end
    for _, o in ipairs(page.objects) do o.key = strip(o.key) end
    out.folders, out.objects = page.folders, page.objects
    out.next_page_token, out.truncated = page.next_page_token, page.truncated
    return out
  end,
}
