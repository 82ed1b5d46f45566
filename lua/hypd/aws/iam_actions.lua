-- hypd.aws.iam_actions: the IAM actions an API operation needs, where IAM
-- names them otherwise than the operation (S3: ListObjectsV2 is
-- s3:ListBucket, HeadBucket s3:ListBucket, DeleteObjects s3:DeleteObject,
-- ...). Tools declare operations (`aws = { "s3:ListObjectsV2" }`: what the
-- guardrail checks); `hypd iam-policy` turns them into IAM actions here.
--
--   iam_actions.of("s3:ListObjectsV2") -> { "s3:ListBucket" }
--   iam_actions.of("eks:DescribeCluster") -> { "eks:DescribeCluster" }
local M = {}

-- S3 operations whose IAM actions have other names; a version-aware
-- operation also needs the *Version action (deleting or reading one version)
M.S3 = {
  ListObjects = { "ListBucket" }, ListObjectsV2 = { "ListBucket" }, HeadBucket = { "ListBucket" },
  ListObjectVersions = { "ListBucketVersions" }, ListBuckets = { "ListAllMyBuckets" },
  HeadObject = { "GetObject" }, CreateMultipartUpload = { "PutObject" }, UploadPart = { "PutObject" },
  UploadPartCopy = { "PutObject" }, CompleteMultipartUpload = { "PutObject" }, CopyObject = { "PutObject" },
  DeleteObjects = { "DeleteObject", "DeleteObjectVersion" }, DeleteObject = { "DeleteObject", "DeleteObjectVersion" },
  ListParts = { "ListMultipartUploadParts" }, ListMultipartUploads = { "ListBucketMultipartUploads" },
  GetBucketEncryption = { "GetEncryptionConfiguration" }, PutBucketEncryption = { "PutEncryptionConfiguration" },
  DeleteBucketEncryption = { "PutEncryptionConfiguration" },
  GetPublicAccessBlock = { "GetBucketPublicAccessBlock" }, PutPublicAccessBlock = { "PutBucketPublicAccessBlock" },
  DeletePublicAccessBlock = { "PutBucketPublicAccessBlock" }, DeleteBucketTagging = { "PutBucketTagging" },
  GetBucketLifecycleConfiguration = { "GetLifecycleConfiguration" },
  PutBucketLifecycleConfiguration = { "PutLifecycleConfiguration" },
  DeleteBucketLifecycle = { "PutLifecycleConfiguration" },
}

-- of(action) -> the IAM actions a declared "service:Operation" needs (a
-- wildcard, or an operation IAM names the same, as it is)
function M.of(action)
  local service, op = tostring(action):match("^([%w-]+):(.+)$")
  local names = service == "s3" and M.S3[op]
  if not names then return { action } end
  local out = {}
  for i, n in ipairs(names) do out[i] = "s3:" .. n end
  return out
end

return M
