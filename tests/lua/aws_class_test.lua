-- Every AWS operation has a class, read | mutating | deleting, decided once
-- when the models are generated (tests/tools/aws_models.py: verb rules,
-- overrides, deleting by default); aws.class reads it, and answers
-- deleting for anything the models do not have.
local t = require "hypd.tap"
local aws = require "hypd.aws"

-- service -> { operation = expected class }
local CASES = {
  ec2 = {
    DescribeSubnets = "read", CreateVpc = "mutating", DeleteVpc = "deleting",
    DisassociateRouteTable = "deleting", AssociateRouteTable = "mutating", CreateTags = "mutating",
    DeleteTags = "mutating", TerminateInstances = "deleting", StopInstances = "mutating",
    RebootInstances = "mutating", RevokeSecurityGroupIngress = "deleting", ReleaseAddress = "deleting",
    CancelCapacityReservation = "deleting", DetachInternetGateway = "deleting",
    ExportClientVpnClientConfiguration = "read", CreateReplaceRootVolumeTask = "deleting",
    GetConsoleOutput = "read",
  },
  eks = {
    ListClusters = "read", DescribeCluster = "read", CreateCluster = "mutating", DeleteCluster = "deleting",
    TagResource = "mutating", UntagResource = "mutating", DeregisterCluster = "deleting",
    AssociateAccessPolicy = "mutating", DisassociateAccessPolicy = "deleting",
  },
  sagemaker = {
    CreateCluster = "mutating", DescribeCluster = "read", DeleteCluster = "deleting",
    BatchDescribeModelPackage = "read", BatchDeleteClusterNodes = "deleting",
    BatchRebootClusterNodes = "mutating", BatchReplaceClusterNodes = "deleting",
    StopTrainingJob = "mutating", Search = "read", AddTags = "mutating", DeleteTags = "mutating",
  },
  s3 = {
    GetObject = "read", HeadObject = "read", ListObjectsV2 = "read", PutObject = "mutating",
    DeleteObject = "deleting", DeleteObjects = "deleting", AbortMultipartUpload = "deleting",
    CreateSession = "mutating", SelectObjectContent = "read", DeleteBucketTagging = "mutating",
  },
  iam = {
    GetRole = "read", CreateRole = "mutating", AttachRolePolicy = "mutating",
    DetachRolePolicy = "deleting", RemoveRoleFromInstanceProfile = "deleting", UntagRole = "mutating",
    SimulatePrincipalPolicy = "read",
  },
  sts = {
    GetCallerIdentity = "read", AssumeRole = "mutating", GetSessionToken = "mutating",
    DecodeAuthorizationMessage = "read",
  },
  logs = { FilterLogEvents = "read", GetLogEvents = "read", StartQuery = "mutating", StopQuery = "mutating" },
  cloudformation = { ValidateTemplate = "read", TestType = "mutating", CancelUpdateStack = "deleting" },
  ssm = { GetParameter = "read", GetAccessToken = "mutating", RemoveTagsFromResource = "mutating" },
  fsx = { DescribeFileSystems = "read", CreateFileSystem = "mutating", ReleaseFileSystemNfsV3Locks = "mutating" },
}

t.test("spot checks across services: each operation has the class its rule gives", function()
  local n = 0
  for service, ops in pairs(CASES) do
    for op, want in pairs(ops) do
      t.eq(aws.class(service, op), want, service .. ":" .. op)
      n = n + 1
    end
  end
  t.ok(n > 60, "compared " .. n .. " operations")
end)

t.test("iam:PassRole is a permission, not an operation: it has no model entry and counts as deleting", function()
  t.eq(aws.model("iam").operations.PassRole, nil)
  t.eq(aws.class("iam", "PassRole"), "deleting")
  t.eq(aws.class("ec2", "NoSuchOperation"), "deleting")
end)

t.test("an unknown service is a VALIDATION error, as for aws.model", function()
  local ok, err = pcall(aws.class, "nosuch", "Describe")
  t.eq(ok, false)
  t.eq(err.code, "VALIDATION")
end)

t.test("every operation of every model has one of the three classes", function()
  local counts, total = { read = 0, mutating = 0, deleting = 0 }, 0
  for service in pairs(aws.SERVICES) do
    for name, op in pairs(aws.model(service).operations) do
      if counts[op.class] == nil then t.ok(false, service .. ":" .. name .. " has class " .. tostring(op.class)) end
      counts[op.class] = (counts[op.class] or 0) + 1
      total = total + 1
    end
  end
  t.ok(total > 1500, total .. " operations")
  t.ok(counts.read > 0 and counts.mutating > 0 and counts.deleting > 0,
    string.format("%d read, %d mutating, %d deleting", counts.read, counts.mutating, counts.deleting))
end)

t.test("no operation named like a read is classified otherwise without an override, and no Delete is read", function()
  -- the verb rules seen from the models: a Describe/List that is not read, or
  -- a Delete that is read, would mean the generator's rules went wrong
  local wrong = {}
  for service in pairs(aws.SERVICES) do
    for name, op in pairs(aws.model(service).operations) do
      if (name:match("^Describe") or name:match("^List")) and op.class ~= "read" then wrong[#wrong + 1] = name end
      if name:match("^Delete") and op.class == "read" then wrong[#wrong + 1] = name end
    end
  end
  t.eq(wrong, {})
end)

t.test("the read-only services refuse anything but read operations before sending", function()
  local r, err = aws.try("logs", "CreateLogGroup", { logGroupName = "x" }, { region = "us-west-2" })
  t.eq(r, nil)
  t.eq(err.code, "VALIDATION")
  t.like(err.message, "read%-only")
end)
