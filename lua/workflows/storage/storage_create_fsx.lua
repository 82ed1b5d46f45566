-- storage_create_fsx: stage 5, an FSx for Lustre file system in the
-- HyperPod compute subnet, mounted in the cluster through the FSx CSI
-- driver: security group (storage/_fsx), file system, CSI driver add-on
-- with its role, then a static PersistentVolume and its claim
-- (_storage).
local Names = require "_names"
local P = require "_params"
local S = require "_storage"
local F = require "storage._fsx"
local FS = require "_fsx_file_system"

local deployments = {}
for k in pairs(F.DEPLOYMENTS) do deployments[#deployments + 1] = k end
table.sort(deployments)

local params = {
  cluster = P.cluster,
  region = P.region,
  claim_name = P.with(S.claim_name, { default = S.DEFAULT_CLAIM.fsx,
    description = "the PersistentVolumeClaim pods mount (default fsx-claim); it names the file system " ..
      "hypd-<tag>-<claim>, its security group hypd-<tag>-<claim>-lustre and its volume fsx-pv-<claim>" }),
  namespace = S.namespace,
  availability_zone = { type = "string", pattern = "^[a-z]{2}(-[a-z]+)+-\\d[a-z]$",
    pattern_help = "an Availability Zone name like us-west-2a",
    description = "the zone of the HyperPod compute subnet hp-compute-<zone> the file system goes in (needed " ..
      "only when the VPC has compute subnets in several zones)" },
  deployment_type = { type = "string", enum = deployments, default = "PERSISTENT_2", decision = true,
    fixed = true,
    description = "FSx for Lustre deployment type: PERSISTENT_2 (default: SSD, replicated, 125 to 1000 MB/s/TiB), " ..
      "PERSISTENT_1 (50 to 200 MB/s/TiB) or SCRATCH_2 (temporary, not replicated, no throughput choice)" },
  throughput = { type = "integer", minimum = 50, maximum = 1000, decision = true,
    description = "MB/s per TiB of storage for PERSISTENT types (default 125 for PERSISTENT_2: 125, 250, 500 or " ..
      "1000; 50 for PERSISTENT_1: 50, 100 or 200)" },
  storage_capacity_gib = { type = "integer", minimum = 1200, maximum = 2073600, default = 1200, decision = true,
    description = "size in GiB: 1200, 2400, or a multiple of 2400 (default 1200)" },
  file_system_id = { type = "string", pattern = "^fs-[0-9a-f]{8,21}$",
    pattern_help = "an FSx file system id like fs-0123456789abcdef0",
    description = "an existing FSx for Lustre file system in the cluster's VPC to mount as it is (no file " ..
      "system, security group or rule is made then)" },
}

local function check(ctx)
  local p, st = ctx.params, ctx.state
  local cl = S.cluster(ctx, p)
  st.cluster = cl
  S.claim_free(ctx, cl, "fsx", p.namespace, p.claim_name)
  if p.file_system_id then
    local fs = FS.describe(ctx, p.file_system_id)
    if not fs then
      hypd.errors.refuse("file_system_id", "exists", "no FSx file system " .. p.file_system_id .. " in " .. cl.region,
        { prefix = "field" })
    end
    if fs.FileSystemType ~= "LUSTRE" then
      hypd.errors.refuse("file_system_id", "lustre", p.file_system_id .. " is not an FSx for Lustre file system",
        { prefix = "field" })
    end
    if fs.VpcId ~= cl.vpc_id then
      hypd.errors.refuse("file_system_id", "vpc", string.format("%s is in VPC %s, not in the cluster's VPC %s: its " ..
        "nodes could not reach it", p.file_system_id, tostring(fs.VpcId), tostring(cl.vpc_id)), { prefix = "field" })
    end
    if fs.Lifecycle ~= "AVAILABLE" and fs.Lifecycle ~= "CREATING" and fs.Lifecycle ~= "UPDATING" then
      hypd.errors.refuse("file_system_id", "available", p.file_system_id .. " is " .. tostring(fs.Lifecycle),
        { prefix = "field" })
    end
    st.file_system_id, st.reused = fs.FileSystemId, true
    return
  end
  st.throughput = F.validate(p)
  -- a file system of this claim keeps its deployment type (FSx cannot change it): a different one is refused
  local fs = not cl.planned and F.existing(ctx, cl, Names.fsx(cl.tag, p.claim_name))
  local have = fs and (fs.LustreConfiguration or {}).DeploymentType
  if have and have ~= p.deployment_type then
    local msg = string.format("file system %s of claim %s has deployment type %s; it is fixed when the file " ..
      "system is created (FSx cannot change it), not %s: pass deployment_type=%s, or make another claim",
      fs.FileSystemId, p.claim_name, have, p.deployment_type, have)
    hypd.errors.refuse("deployment_type", "fixed_at_create", msg, { prefix = "message" })
  end
  local subnet = F.subnet(ctx, cl, p.availability_zone)
  st.subnet_id, st.availability_zone = subnet.SubnetId, subnet.AvailabilityZone
  local hp = require("_hyperpod").find(ctx, cl.arn)
  st.node_security_group_ids = F.node_groups(ctx, cl, hp)
  st.hyperpod_cluster = hp and hp.ClusterName or nil
end

local function network(ctx)
  local st = ctx.state
  if st.reused then return end
  local names = Names.fsx(st.cluster.tag, ctx.params.claim_name)
  st.security_group_id = F.security_group(ctx, st.cluster, names, st.node_security_group_ids)
end

local function file_system(ctx)
  local p, st = ctx.params, ctx.state
  if st.reused then return end
  local fs = F.file_system(ctx, st.cluster, Names.fsx(st.cluster.tag, p.claim_name), { subnet_id = st.subnet_id,
    security_group_id = st.security_group_id, capacity = p.storage_capacity_gib, deployment = p.deployment_type,
    throughput = st.throughput })
  st.file_system_id = fs.FileSystemId
  st.file_system_created_at = st.file_system_created_at or hypd.now()
end

local function csi_driver(ctx)
  F.csi_driver(ctx, ctx.state.cluster)
end

local function wait_available(ctx)
  local st = ctx.state
  local fs = FS.wait_available(ctx, st.file_system_id, st.file_system_created_at)
  if fs then
    st.dns_name, st.mount_name = fs.DNSName, (fs.LustreConfiguration or {}).MountName
    st.storage_capacity_gib = fs.StorageCapacity
    st.deployment_type = (fs.LustreConfiguration or {}).DeploymentType
  end
end

local function volume(ctx)
  local p, st = ctx.params, ctx.state
  local cl = st.cluster
  local k = ctx:k8s(cl.name)
  local name = S.volume_name("fsx", p.namespace, p.claim_name)
  local cap = st.storage_capacity_gib or p.storage_capacity_gib
  local v = S.ensure_volume(ctx, k, cl, { kind = "fsx", name = name, ns = p.namespace, claim = p.claim_name,
    tag = cl.tag, capacity = cap .. "Gi", mount_options = { "flock" },
    annotations = { [S.FS_ANN] = st.file_system_id },
    csi = { driver = S.DRIVERS.fsx, volumeHandle = st.file_system_id,
      volumeAttributes = { dnsname = st.dns_name or "planned", mountname = st.mount_name or "planned" } } })
  st.result = { cluster = cl.name, region = cl.region, cluster_tag = cl.tag, claim_name = p.claim_name,
    namespace = p.namespace, volume_name = v.volume, claim_phase = v.claim_phase, volume_phase = v.volume_phase,
    file_system_id = st.file_system_id, file_system_reused = st.reused == true, dns_name = st.dns_name,
    mount_name = st.mount_name, storage_capacity_gib = cap, deployment_type = st.deployment_type or p.deployment_type,
    throughput = st.throughput, subnet_id = st.subnet_id, availability_zone = st.availability_zone,
    security_group_id = st.security_group_id, node_security_group_ids = st.node_security_group_ids,
    csi_driver = st.fsx_csi, driver = S.DRIVERS.fsx,
    mount = { persistentVolumeClaim = { claimName = p.claim_name } } }
end

return tool {
  name = "storage_create_fsx",
  summary = "Stage 5: an FSx for Lustre file system in the compute subnet, mounted in the cluster (PV and claim)",
  description = "Creates (or finds again) an FSx for Lustre file system hypd-<tag>-<claim> in the HyperPod " ..
    "compute subnet hp-compute-<az> of the cluster's VPC, with its security group hypd-<tag>-<claim>-lustre " ..
    "(Lustre TCP 988 and 1018-1023 within the group and from the security groups of the cluster's nodes), " ..
    "installs the aws-fsx-csi-driver EKS add-on when it is absent (with the IAM role hypd-<tag>-fsx-csi-driver " ..
    "for its controller's service account fsx-csi-controller-sa, through Pod Identity or IRSA), waits for the " ..
    "file system to be AVAILABLE (5 to 15 minutes on AWS), then makes a static PersistentVolume fsx-pv-<claim> " ..
    "(driver fsx.csi.aws.com, volumeHandle the file system id, dnsname, mountname) bound to the claim " ..
    "claim_name (default fsx-claim, ReadWriteMany). Defaults: PERSISTENT_2, 1200 GiB, 125 MB/s/TiB. " ..
    "file_system_id mounts an existing file system instead. Refused before any change when there is no " ..
    "compute subnet (create the HyperPod cluster first) or the sizes are ones FSx refuses. It answers with an " ..
    "operation; follow it with storage_list (operation_id, wait_seconds). Calling it again changes nothing; " ..
    "plan = true lists what it would make.",
  kind = "mutating",
  status_tool = "storage_list",
  aws = { "pricing:GetProducts",
    "eks:DescribeCluster", "eks:DescribeAddon", "eks:CreateAddon", "eks:CreatePodIdentityAssociation",
    "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups", "ec2:CreateSecurityGroup",
    "ec2:AuthorizeSecurityGroupIngress", "ec2:CreateTags", "fsx:DescribeFileSystems", "fsx:CreateFileSystem",
    "fsx:TagResource", "iam:GetRole", "iam:CreateRole", "iam:TagRole", "iam:AttachRolePolicy",
    "iam:ListAttachedRolePolicies", "iam:ListOpenIDConnectProviders", "iam:PassRole",
    "iam:CreateServiceLinkedRole", "sagemaker:ListClusters", "sagemaker:DescribeCluster" },
  k8s = { "get", "list", "watch", "apply" },
  params = P.form({ "storage_capacity_gib", "deployment_type", "throughput" },
    { "availability_zone", "file_system_id", "claim_name", "namespace", "cluster", "region" },
    params),
  target = S.target,
  steps = {
    { name = "check", run = check, on_call = true }, -- refused on the call (hypd.tool.operations): reads only
    { name = "network", run = network },
    { name = "file_system", run = file_system },
    { name = "csi_driver", run = csi_driver },
    { name = "wait_available", run = wait_available },
    { name = "volume", run = volume },
  },
}
