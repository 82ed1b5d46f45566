-- The sandbox's storage behaviour, as the real services behave: the
-- Kubernetes PersistentVolume binder (static volumes, pre-bound and chosen,
-- refusals with events, Released and Lost), S3 object versions (overwrite
-- and delete in a versioned bucket, delete markers, reading and deleting one
-- version, Suspended null versions, ListObjectVersions pages, a bucket with
-- versions is not empty), and FSx for Lustre's network checks (port 988
-- within the groups, groups of another VPC, the VPC's default group) with
-- its network interfaces holding its security group.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
local SRV = H.sandbox_here()
local SH = dofile("tests/lua/storage_helpers.lua")
local call, try = SH.call, SH.try

local NAME = "sbx-volumes"
local E = {}

local function pv(name, size, extra)
  local o = { apiVersion = "v1", kind = "PersistentVolume", metadata = { name = name },
    spec = { capacity = { storage = size }, accessModes = { "ReadWriteMany" }, storageClassName = "",
      persistentVolumeReclaimPolicy = "Retain", csi = { driver = "s3.csi.aws.com", volumeHandle = name } } }
  for k, v in pairs(extra or {}) do o.spec[k] = v end
  return o
end

local function pvc(name, size, extra)
  local o = { apiVersion = "v1", kind = "PersistentVolumeClaim", metadata = { name = name, namespace = "default" },
    spec = { accessModes = { "ReadWriteMany" }, storageClassName = "", resources = { requests = { storage = size } } } }
  for k, v in pairs(extra or {}) do o.spec[k] = v end
  return o
end

local function phase(kind, name)
  local o = E.k:get("v1", kind, name, { namespace = kind == "PersistentVolumeClaim" and "default" or nil })
  return o and o.status and o.status.phase, o
end

local function settle() require("hypd.task").sleep(1) end

t.test("a new volume is Available; a claim naming it binds both ways", function()
  H.eks_cluster(call, NAME, 81)
  E.k = SH.k8s(NAME)
  assert(E.k:create(pv("pv-a", "100Gi")))
  settle()
  t.eq(phase("PersistentVolume", "pv-a"), "Available")
  assert(E.k:create(pvc("claim-a", "50Gi", { volumeName = "pv-a" })))
  settle()
  local p, c = phase("PersistentVolumeClaim", "claim-a")
  t.eq(p, "Bound")
  t.eq(c.status.capacity.storage, "100Gi", "the claim gets the volume's capacity")
  t.eq(c.status.accessModes, { "ReadWriteMany" })
  t.eq(c.metadata.annotations["pv.kubernetes.io/bind-completed"], "yes")
  t.eq(c.metadata.annotations["pv.kubernetes.io/bound-by-controller"], nil, "the claim chose it")
  local vp, v = phase("PersistentVolume", "pv-a")
  t.eq(vp, "Bound")
  t.eq({ v.spec.claimRef.name, v.spec.claimRef.uid }, { "claim-a", c.metadata.uid })
end)

t.test("a claim without a volume name gets the smallest Available volume that fits", function()
  assert(E.k:create(pv("pv-big", "500Gi")))
  assert(E.k:create(pv("pv-small", "20Gi")))
  assert(E.k:create(pv("pv-mid", "60Gi")))
  assert(E.k:create(pv("pv-rwo", "30Gi", { accessModes = { "ReadWriteOnce" } })))
  settle()
  assert(E.k:create(pvc("claim-b", "25Gi")))
  settle()
  local p, c = phase("PersistentVolumeClaim", "claim-b")
  t.eq(p, "Bound")
  t.eq(c.spec.volumeName, "pv-mid", "pv-small is too small, pv-rwo lacks ReadWriteMany")
  t.eq(c.metadata.annotations["pv.kubernetes.io/bound-by-controller"], "yes")
end)

t.test("a claim for a volume bound to another claim, or that nothing fits, stays Pending with an event", function()
  assert(E.k:create(pvc("claim-c", "10Gi", { volumeName = "pv-a" })))
  assert(E.k:create(pvc("claim-d", "10Ti")))
  settle()
  t.eq(phase("PersistentVolumeClaim", "claim-c"), "Pending")
  t.eq(phase("PersistentVolumeClaim", "claim-d"), "Pending")
  local evs = assert(E.k:list("v1", "Event", { namespace = "default" }))
  local said = {}
  for _, e in ipairs(evs) do
    if e.reason == "FailedBinding" then said[e.involvedObject.name] = e.message end
  end
  t.eq(said["claim-c"], 'volume "pv-a" already bound to a different claim.')
  t.eq(said["claim-d"], "no persistent volumes available for this claim and no storage class is set")
  -- a volume pre-bound to a claim waits for it, and no other claim takes it
  assert(E.k:create(pv("pv-pre", "10Ti", { claimRef = { namespace = "default", name = "claim-e" } })))
  settle()
  t.eq(phase("PersistentVolume", "pv-pre"), "Available")
  t.eq(phase("PersistentVolumeClaim", "claim-d"), "Pending", "pv-pre is kept for claim-e")
  assert(E.k:create(pvc("claim-e", "1Ti")))
  settle()
  t.eq(phase("PersistentVolumeClaim", "claim-e"), "Bound")
  t.eq(select(2, phase("PersistentVolumeClaim", "claim-e")).spec.volumeName, "pv-pre")
end)

t.test("a deleted claim leaves a Retain volume Released; a deleted volume leaves its claim Lost", function()
  assert(E.k:delete("v1", "PersistentVolumeClaim", "claim-a", { namespace = "default", wait = true }))
  settle()
  local p, v = phase("PersistentVolume", "pv-a")
  t.eq(p, "Released")
  t.eq(v.spec.claimRef.name, "claim-a", "the claimRef stays")
  assert(E.k:delete("v1", "PersistentVolume", "pv-mid", { wait = true }))
  settle()
  t.eq(phase("PersistentVolumeClaim", "claim-b"), "Lost")
  -- a Delete volume goes with its claim
  assert(E.k:create(pv("pv-del", "5Gi", { persistentVolumeReclaimPolicy = "Delete" })))
  assert(E.k:create(pvc("claim-f", "5Gi", { volumeName = "pv-del" })))
  settle()
  t.eq(phase("PersistentVolumeClaim", "claim-f"), "Bound")
  assert(E.k:delete("v1", "PersistentVolumeClaim", "claim-f", { namespace = "default", wait = true }))
  settle()
  t.eq(E.k:get("v1", "PersistentVolume", "pv-del"), nil)
end)

t.test("S3 versions: overwrites and deletes keep versions, a delete marker hides the key, one version is read " ..
  "and deleted, the one before comes back", function()
  local b = "sbx-versions"
  call("s3", "CreateBucket", { Bucket = b, CreateBucketConfiguration = { LocationConstraint = "us-west-2" } })
  call("s3", "PutObject", { Bucket = b, Key = "k", Body = "before" })
  call("s3", "PutBucketVersioning", { Bucket = b, VersioningConfiguration = { Status = "Enabled" } })
  local v1 = call("s3", "PutObject", { Bucket = b, Key = "k", Body = "one" }).VersionId
  local v2 = call("s3", "PutObject", { Bucket = b, Key = "k", Body = "two" }).VersionId
  t.ok(v1 and v2 and v1 ~= v2, "each put has its version id")
  t.eq(call("s3", "GetObject", { Bucket = b, Key = "k" }).Body, "two")
  t.eq(call("s3", "GetObject", { Bucket = b, Key = "k", VersionId = v1 }).Body, "one")
  t.eq(call("s3", "GetObject", { Bucket = b, Key = "k", VersionId = "null" }).Body, "before")
  local d = call("s3", "DeleteObject", { Bucket = b, Key = "k" })
  t.eq(d.DeleteMarker, true)
  t.eq(try("s3", "GetObject", { Bucket = b, Key = "k" }), nil, "hidden by the marker")
  t.eq(call("s3", "ListObjectsV2", { Bucket = b }).KeyCount, 0)
  local l = call("s3", "ListObjectVersions", { Bucket = b })
  t.eq(#l.Versions, 3)
  t.eq({ l.DeleteMarkers[1].VersionId, l.DeleteMarkers[1].IsLatest }, { d.VersionId, true })
  local _, err = try("s3", "GetObject", { Bucket = b, Key = "k", VersionId = d.VersionId })
  t.eq(err.code, "MethodNotAllowed")
  _, err = try("s3", "GetObject", { Bucket = b, Key = "k", VersionId = "nosuchversion" })
  t.eq(err.code, "NoSuchVersion")
  -- deleting the marker brings the latest version back
  call("s3", "DeleteObject", { Bucket = b, Key = "k", VersionId = d.VersionId })
  t.eq(call("s3", "GetObject", { Bucket = b, Key = "k" }).Body, "two")
  -- deleting the current version for good makes the one before current
  call("s3", "DeleteObject", { Bucket = b, Key = "k", VersionId = v2 })
  t.eq(call("s3", "GetObject", { Bucket = b, Key = "k" }).Body, "one")
  local _, derr = try("s3", "DeleteBucket", { Bucket = b })
  t.eq(derr.code, "BucketNotEmpty")
  -- Suspended: new writes are the null version (replacing the old null one)
  call("s3", "PutBucketVersioning", { Bucket = b, VersioningConfiguration = { Status = "Suspended" } })
  call("s3", "PutObject", { Bucket = b, Key = "k", Body = "null again" })
  l = call("s3", "ListObjectVersions", { Bucket = b })
  local ids = {}
  for _, x in ipairs(l.Versions) do ids[#ids + 1] = x.VersionId .. (x.IsLatest and "*" or "") end
  t.eq(ids, { "null*", v1 }, "one null version, the latest; v1 kept")
  t.eq(call("s3", "GetObject", { Bucket = b, Key = "k" }).Body, "null again")
end)

t.test("S3 ListObjectVersions pages with key and version markers, and DeleteObjects takes versions", function()
  local b = "sbx-versions"
  call("s3", "PutBucketVersioning", { Bucket = b, VersioningConfiguration = { Status = "Enabled" } })
  for i = 1, 5 do
    call("s3", "PutObject", { Bucket = b, Key = "p/" .. i, Body = "a" })
    call("s3", "PutObject", { Bucket = b, Key = "p/" .. i, Body = "b" })
  end
  local all, marker, vmarker, pages = {}, nil, nil, 0
  repeat
    local l = call("s3", "ListObjectVersions", { Bucket = b, Prefix = "p/", MaxKeys = 3, KeyMarker = marker,
      VersionIdMarker = vmarker })
    pages = pages + 1
    for _, x in ipairs(l.Versions or {}) do all[#all + 1] = { Key = x.Key, VersionId = x.VersionId } end
    marker, vmarker = l.NextKeyMarker, l.NextVersionIdMarker
  until not l.IsTruncated
  t.eq({ #all, pages }, { 10, 4 })
  local top = call("s3", "ListObjectVersions", { Bucket = b, Delimiter = "/" })
  t.eq(top.CommonPrefixes[1].Prefix, "p/")
  local r = call("s3", "DeleteObjects", { Bucket = b, Delete = { Objects = all } })
  t.eq(#r.Deleted, 10)
  t.eq(call("s3", "ListObjectVersions", { Bucket = b, Prefix = "p/" }).Versions, nil)
end)

t.test("FSx checks Lustre's port 988 in its groups, refuses a group of another VPC, uses the VPC's default " ..
  "group, and holds its group through its network interfaces", function()
  local vpc = call("ec2", "CreateVpc", { CidrBlock = "10.82.0.0/16" }).Vpc.VpcId
  local other = call("ec2", "CreateVpc", { CidrBlock = "10.83.0.0/16" }).Vpc.VpcId
  local subnet = call("ec2", "CreateSubnet", { VpcId = vpc, CidrBlock = "10.82.1.0/24",
    AvailabilityZone = "us-west-2a" }).Subnet.SubnetId
  local closed = call("ec2", "CreateSecurityGroup", { GroupName = "closed", Description = "x", VpcId = vpc }).GroupId
  local foreign = call("ec2", "CreateSecurityGroup", { GroupName = "far", Description = "x", VpcId = other }).GroupId
  local function fs(groups)
    return { FileSystemType = "LUSTRE", StorageCapacity = 1200, SubnetIds = { subnet }, SecurityGroupIds = groups,
      LustreConfiguration = { DeploymentType = "PERSISTENT_2", PerUnitStorageThroughput = 125 } }
  end
  local _, err = try("fsx", "CreateFileSystem", fs({ closed }))
  t.eq(err.code, "InvalidNetworkSettings")
  t.like(err.message, "do not permit Lustre LNET network traffic on port 988")
  _, err = try("fsx", "CreateFileSystem", fs({ foreign }))
  t.eq(err.code, "InvalidNetworkSettings")
  t.like(err.message, "does not belong to the VPC")
  -- a CIDR rule holding the subnet is enough; so is the default group (all traffic within itself)
  call("ec2", "AuthorizeSecurityGroupIngress", { GroupId = closed, IpPermissions = { { IpProtocol = "tcp",
    FromPort = 988, ToPort = 988, IpRanges = { { CidrIp = "10.82.0.0/16" } } } } })
  local a = call("fsx", "CreateFileSystem", fs({ closed })).FileSystem
  local b = call("fsx", "CreateFileSystem", fs(nil)).FileSystem
  t.eq({ a.Lifecycle, b.Lifecycle }, { "CREATING", "CREATING" })
  local enis = call("ec2", "DescribeNetworkInterfaces", { Filters = { { Name = "group-id", Values = { closed } } } })
  t.eq(#enis.NetworkInterfaces, 2)
  t.eq(enis.NetworkInterfaces[1].InterfaceType, "lustre")
  t.ok(enis.NetworkInterfaces[1].Description:find(a.FileSystemId, 1, true), "named after the file system")
  local _, serr = try("ec2", "DeleteSecurityGroup", { GroupId = closed })
  t.eq(serr.code, "DependencyViolation", "in use by the file system's interfaces")
  SH.until_true(function()
    return call("fsx", "DescribeFileSystems", { FileSystemIds = { a.FileSystemId } }).FileSystems[1].Lifecycle ==
      "AVAILABLE"
  end, 1200, "AVAILABLE")
  call("fsx", "DeleteFileSystem", { FileSystemId = a.FileSystemId, LustreConfiguration = { SkipFinalBackup = true } })
  SH.until_true(function()
    return try("fsx", "DescribeFileSystems", { FileSystemIds = { a.FileSystemId } }) == nil
  end, 1200, "deleted")
  t.ok(call("ec2", "DeleteSecurityGroup", { GroupId = closed }).Return, "free once the file system is gone")
end)

t.cleanup(function() SRV:stop() end)
