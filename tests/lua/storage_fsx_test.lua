-- storage_create_fsx end to end against the in-process sandbox (virtual
-- clock): refused before any change without a compute subnet and for sizes
-- FSx refuses; plan = true lists every resource and sends no mutation; the
-- run makes the security group and its Lustre rules, the file system
-- (CREATING, then AVAILABLE minutes later), the FSx CSI add-on with its
-- role through Pod Identity, and a PersistentVolume and claim that are
-- Bound; a second call sends no mutation; storage_list shows it; and
-- storage_delete removes the claim and volume, keeps the file system unless
-- asked and forced, then deletes it and its security group.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
local SRV = H.sandbox_here()
require("hypd.tool.loader").load()
local SH = dofile("tests/lua/storage_helpers.lua")
local dispatch = require "hypd.tool.dispatch"
local json = require "hypd.json"
local op = require "hypd.tool.operations"
local call, try = SH.call, SH.try

local NAME = "hypd-lustre"
local E = {}

-- an ACTIVE EKS cluster whose nodes' security group is hypd-lustre-cluster
local function cluster()
  local trust = json.encode { Version = "2012-10-17", Statement = { { Effect = "Allow",
    Principal = { Service = "eks.amazonaws.com" }, Action = "sts:AssumeRole" } } }
  local role = call("iam", "CreateRole", { RoleName = NAME .. "-eks", AssumeRolePolicyDocument = trust }).Role.Arn
  E.vpc = call("ec2", "CreateVpc", { CidrBlock = "10.77.0.0/16" }).Vpc.VpcId
  local subnets = {}
  for i, az in ipairs { "us-west-2a", "us-west-2b" } do
    subnets[i] = call("ec2", "CreateSubnet", { VpcId = E.vpc, CidrBlock = "10.77." .. i .. ".0/24",
      AvailabilityZone = az }).Subnet.SubnetId
  end
  E.node_sg = call("ec2", "CreateSecurityGroup", { GroupName = NAME .. "-cluster", Description = "nodes",
    VpcId = E.vpc }).GroupId
  call("ec2", "AuthorizeSecurityGroupIngress", { GroupId = E.node_sg, IpPermissions = { { IpProtocol = "-1",
    UserIdGroupPairs = { { GroupId = E.node_sg } } } } })
  call("eks", "CreateCluster", { name = NAME, roleArn = role, resourcesVpcConfig = { subnetIds = subnets,
    securityGroupIds = { E.node_sg } }, accessConfig = { authenticationMode = "API" },
    tags = { ["hypd:cluster-tag"] = "lustre" } })
  SH.until_true(function() return call("eks", "DescribeCluster", { name = NAME }).cluster.status == "ACTIVE" end,
    1800, "EKS")
  require("hypd.clusters").set_active { name = NAME, region = "us-west-2" }
  SH.addon(NAME, "eks-pod-identity-agent")
end

t.test("without a HyperPod compute subnet the call is refused before any change and says what makes one", function()
  cluster()
  local m = SH.mark()
  local before = #op.list {}
  local acc, err = dispatch.call("storage_create_fsx", {}, SH.WHO)
  t.eq(acc, nil, "refused on the call (its check runs there: hypd.tool.operations)")
  t.eq(#op.list {}, before, "no operation recorded")
  t.eq(err and err.code, "STATE")
  t.like(err and err.message, "has no HyperPod compute subnet hp%-compute%-%*")
  t.like(err and err.message, "hyperpod_create")
  local _, n = SH.mutations(m)
  t.eq(n, 0)
end)

t.test("sizes FSx refuses are refused first, naming the fields", function()
  local m = SH.mark()
  local p, err = dispatch.call("storage_create_fsx", { plan = true, throughput = 300, storage_capacity_gib = 3000 },
    SH.WHO)
  t.eq(p, nil)
  t.eq(err.code, "VALIDATION")
  local fields = {}
  for _, f in ipairs(err.fields) do fields[#fields + 1] = f.field end
  t.eq(fields, { "throughput", "storage_capacity_gib" })
  t.like(err.message, "PERSISTENT_2 allows 125, 250, 500, 1000 MB/s/TiB")
  local _, e2 = dispatch.call("storage_create_fsx", { plan = true, deployment_type = "SCRATCH_2", throughput = 125 },
    SH.WHO)
  t.eq(e2.fields[1].field, "throughput")
  local _, n = SH.mutations(m)
  t.eq(n, 0)
end)

t.test("plan = true lists the security group, rules, file system, CSI driver, volume and claim, and sends " ..
  "no mutation", function()
  E.subnet = call("ec2", "CreateSubnet", { VpcId = E.vpc, CidrBlock = "10.77.16.0/20", AvailabilityZone = "us-west-2a",
    TagSpecifications = { { ResourceType = "subnet", Tags = { { Key = "Name", Value = "hp-compute-us-west-2a" } } } }
  }).Subnet.SubnetId
  -- the nodes' groups: the cluster's, then the cluster security group EKS made
  E.cluster_sg = call("eks", "DescribeCluster", { name = "hypd-lustre" }).cluster.resourcesVpcConfig
    .clusterSecurityGroupId
  local sources = { E.node_sg, E.cluster_sg }
  local m = SH.mark()
  local p = assert(dispatch.call("storage_create_fsx", { plan = true }, SH.WHO))
  t.eq(SH.rows(p), {
    "create ec2:security-group hypd-lustre-fsx-claim-lustre",
    "create ec2:security-group-rule Lustre within hypd-lustre-fsx-claim-lustre",
    "create ec2:security-group-rule Lustre from " .. sources[1] .. " to hypd-lustre-fsx-claim-lustre",
    "create ec2:security-group-rule Lustre from " .. sources[2] .. " to hypd-lustre-fsx-claim-lustre",
    "create fsx:file-system hypd-lustre-fsx-claim",
    "create iam:role hypd-lustre-fsx-csi-driver",
    "create iam:role-policy-attachment AmazonFSxFullAccess on hypd-lustre-fsx-csi-driver",
    "create eks:addon aws-fsx-csi-driver on hypd-lustre",
    "create kubernetes:persistentvolume fsx-pv-fsx-claim",
    "create kubernetes:persistentvolumeclaim default/fsx-claim" })
  local fs = p.plan[5].fields
  t.eq({ fs.StorageCapacity, fs.DeploymentType, fs.PerUnitStorageThroughput, fs.SubnetIds[1] },
    { 1200, "PERSISTENT_2", 125, E.subnet })
  t.eq(p.plan[8].fields.identity, "pod-identity")
  local _, n = SH.mutations(m)
  t.eq(n, 0, "the audit log is empty")
end)

t.test("the run under its IAM policy, stopped while it waits for the file system and resumed: security group " ..
  "with Lustre rules, one file system AVAILABLE after minutes, CSI add-on with its role, volume and claim Bound",
  function()
  local task = require "hypd.task"
  local t0 = require("hypd.core").now()
  local m = SH.mark()
  -- the host stops (as on SIGTERM) when the operation starts waiting for FSx
  local off
  off = op.subscribe(function(ev)
    if ev.kind == "operation.phase" and tostring(ev.phase):find("^waiting for FSx file system") then
      off()
      local victim = op.active()[ev.operation_id]
      task.spawn(function() victim:cancel("the host is stopping (the test interrupts it)") end)
    end
  end)
  -- under the IAM policy hypd iam-policy prints for the tool, enforced by the sandbox
  assert(require("sandbox.policy").set(assert(require("hypd.iam_policy").document { tools = {
    "storage_create_fsx" } })))
  local acc = assert(dispatch.call("storage_create_fsx", {}, SH.WHO))
  local first = op.wait(acc.operation_id)
  t.eq(first.status, "running", "left running, as a stopped host leaves it")
  t.like(first.phase, "^waiting for FSx file system")
  t.eq(op.resume(), 1, "one operation resumed")
  local view = op.wait(acc.operation_id)
  require("sandbox.policy").set(nil)
  t.eq(view.status, "succeeded", json.encode(view.error))
  local r = view.result
  local took = require("hypd.core").now() - t0
  local counts = SH.mutations(m)
  t.eq({ counts["fsx CreateFileSystem"], counts["eks CreateAddon"], counts["ec2 CreateSecurityGroup"],
    counts["iam CreateRole"] }, { 1, 1, 1, 1 }, "each made once")
  t.ok(took >= 360 and took <= 900, "took " .. took .. " simulated seconds (FSx: 6 to 12 minutes)")
  E.fs = r.file_system_id
  t.like(E.fs, "^fs%-%x+$")
  t.eq({ r.claim_phase, r.volume_phase, r.subnet_id, r.availability_zone, r.deployment_type, r.throughput },
    { "Bound", "Bound", E.subnet, "us-west-2a", "PERSISTENT_2", 125 })
  local fs = call("fsx", "DescribeFileSystems", { FileSystemIds = { E.fs } }).FileSystems[1]
  t.eq({ fs.Lifecycle, fs.StorageCapacity, fs.LustreConfiguration.DeploymentType,
    fs.LustreConfiguration.PerUnitStorageThroughput, fs.SubnetIds[1] }, { "AVAILABLE", 1200, "PERSISTENT_2", 125,
    E.subnet })
  -- the security group: Lustre ports within it and from the nodes' groups (EKS's cluster group too)
  local sg = call("ec2", "DescribeSecurityGroups", { GroupIds = { r.security_group_id } }).SecurityGroups[1]
  t.eq(sg.GroupName, "hypd-lustre-fsx-claim-lustre")
  local open = {}
  for _, perm in ipairs(sg.IpPermissions) do
    for _, pair in ipairs(perm.UserIdGroupPairs or {}) do
      open[#open + 1] = perm.IpProtocol .. " " .. perm.FromPort .. "-" .. perm.ToPort .. " " ..
        (pair.GroupId == sg.GroupId and "self" or pair.GroupId)
    end
  end
  table.sort(open)
  local want = { "tcp 1018-1023 " .. E.node_sg, "tcp 1018-1023 self", "tcp 988-988 " .. E.node_sg, "tcp 988-988 self",
    "tcp 1018-1023 " .. E.cluster_sg, "tcp 988-988 " .. E.cluster_sg }
  table.sort(want)
  t.eq(open, want)
  -- its network interfaces are EC2's, in the compute subnet, with the group
  local enis = call("ec2", "DescribeNetworkInterfaces", { Filters = { { Name = "group-id",
    Values = { sg.GroupId } } } }).NetworkInterfaces
  t.eq(#enis, 2)
  t.eq(enis[1].SubnetId, E.subnet)
  -- the CSI driver: ACTIVE, its controller's role through Pod Identity
  local a = call("eks", "DescribeAddon", { clusterName = NAME, addonName = "aws-fsx-csi-driver" }).addon
  t.eq(a.status, "ACTIVE")
  local pia = call("eks", "ListPodIdentityAssociations", { clusterName = NAME }).associations
  local found
  for _, x in ipairs(pia) do if x.serviceAccount == "fsx-csi-controller-sa" then found = x end end
  t.ok(found, "a Pod Identity association for fsx-csi-controller-sa")
  t.eq(found and found.namespace, "kube-system")
  local role = call("iam", "GetRole", { RoleName = "hypd-lustre-fsx-csi-driver" }).Role
  t.like(role.AssumeRolePolicyDocument, "pods%.eks%.amazonaws%.com", "the role trusts Pod Identity")
  local attached = call("iam", "ListAttachedRolePolicies", { RoleName = "hypd-lustre-fsx-csi-driver" })
  t.eq(attached.AttachedPolicies[1].PolicyName, "AmazonFSxFullAccess")
  -- the volume and claim
  local k = SH.k8s(NAME)
  local pv = assert(k:get("v1", "PersistentVolume", "fsx-pv-fsx-claim"))
  t.eq(pv.spec.csi.driver, "fsx.csi.aws.com")
  t.eq(pv.spec.csi.volumeHandle, E.fs)
  t.eq(pv.spec.csi.volumeAttributes, { dnsname = fs.DNSName, mountname = fs.LustreConfiguration.MountName })
  t.eq(pv.spec.capacity.storage, "1200Gi")
  t.eq(pv.spec.accessModes, { "ReadWriteMany" })
  t.eq(pv.status.phase, "Bound")
  local pvc = assert(k:get("v1", "PersistentVolumeClaim", "fsx-claim", { namespace = "default" }))
  t.eq({ pvc.status.phase, pvc.spec.volumeName }, { "Bound", "fsx-pv-fsx-claim" })
end)

t.test("a second call sends no mutation, another deployment type is a CONFLICT, and storage_list shows the " ..
  "file system AVAILABLE", function()
  local m = SH.mark()
  SH.ok_run("storage_create_fsx", {})
  local _, n = SH.mutations(m)
  t.eq(n, 0)
  -- the deployment type is fixed when the file system is made: refused on the call, naming the field
  local before = #op.list {}
  local acc, err = dispatch.call("storage_create_fsx", { deployment_type = "PERSISTENT_1", throughput = 50 }, SH.WHO)
  t.eq(acc, nil, "refused on the call")
  t.eq(#op.list {}, before, "no operation recorded")
  t.eq(H.field_rules(err), { "deployment_type:fixed_at_create" })
  t.like(err and err.message, "has deployment type PERSISTENT_2; it is fixed when the file system is created")
  local _, n2 = SH.mutations(m)
  t.eq(n2, 0, "nothing changed")
  local l = SH.read("storage_list", {})
  t.eq(l.addons.fsx.status, "ACTIVE")
  t.eq(#l.storages, 1)
  local d = l.storages[1]
  t.eq({ d.type, d.claim, d.file_system_id, d.file_system_status, d.claim_phase, d.storage_capacity_gib },
    { "fsx", "fsx-claim", E.fs, "AVAILABLE", "Bound", 1200 })
  t.eq(#l.unmounted_file_systems, 0)
end)

t.test("storage_delete keeps the file system unless asked and forced, finds a kept one again by its claim, then " ..
  "deletes it and its security group",
  function()
    local r = SH.ok_run("storage_delete", { claim_name = "fsx-claim", delete_file_system = true })
    local kept = {}
    for _, k in ipairs(r.kept) do kept[k.type] = k.why end
    t.like(kept["fsx:file-system"], "^it may hold data")
    t.like(kept["eks:addon"], "FSx CSI driver")
    t.eq(call("fsx", "DescribeFileSystems", { FileSystemIds = { E.fs } }).FileSystems[1].Lifecycle, "AVAILABLE")
    local l = SH.read("storage_list", {})
    t.eq(#l.storages, 0)
    t.eq(l.unmounted_file_systems[1].file_system_id, E.fs, "listed as hypd's, mounted by no volume")
    -- made again: the same file system, found by its tags
    local again = SH.ok_run("storage_create_fsx", {})
    t.eq(again.file_system_id, E.fs)
    r = SH.ok_run("storage_delete", { claim_name = "fsx-claim" })
    t.like(r.kept[1].why, "^not asked")
    -- the kept file system is found again by its claim's name, and deleted when forced
    local m = SH.mark()
    local t0 = require("hypd.core").now()
    r = SH.ok_run("storage_delete", { claim_name = "fsx-claim", delete_file_system = true, force = true })
    local took = require("hypd.core").now() - t0
    local gone = {}
    for _, d in ipairs(r.deleted) do gone[#gone + 1] = d.type end
    t.eq(gone, { "fsx:file-system", "ec2:security-group" })
    t.ok(took >= 300, "waited " .. took .. " simulated seconds for FSx to delete it")
    local _, err = try("fsx", "DescribeFileSystems", { FileSystemIds = { E.fs } })
    t.eq(err and err.code, "FileSystemNotFound")
    local counts = SH.mutations(m)
    t.eq({ counts["fsx DeleteFileSystem"], counts["ec2 DeleteSecurityGroup"] }, { 1, 1 })
    t.eq(#call("ec2", "DescribeSecurityGroups", { Filters = { { Name = "group-name",
      Values = { "hypd-lustre-fsx-claim-lustre" } } } }).SecurityGroups, 0)
    t.eq(call("eks", "DescribeAddon", { clusterName = NAME, addonName = "aws-fsx-csi-driver" }).addon.status,
      "ACTIVE", "the CSI driver stays")
  end)

t.test("without Pod Identity the driver's role trusts the cluster's OIDC provider (IRSA); with neither the call " ..
  "is refused naming cluster_configure_dependencies", function()
  for i, name in ipairs { "hypd-irsa", "hypd-noid" } do
    local c = SH.cluster(name, 84 + i)
    call("ec2", "CreateSubnet", { VpcId = c.resourcesVpcConfig.vpcId, CidrBlock = "10." .. (84 + i) .. ".16.0/20",
      AvailabilityZone = "us-west-2b", TagSpecifications = { { ResourceType = "subnet",
      Tags = { { Key = "Name", Value = "hp-compute-us-west-2b" } } } } })
    if name == "hypd-irsa" then
      call("iam", "CreateOpenIDConnectProvider", { Url = c.identity.oidc.issuer, ClientIDList = { "sts.amazonaws.com" },
        ThumbprintList = { string.rep("a", 40) } })
    end
  end
  local p = assert(dispatch.call("storage_create_fsx", { cluster = "hypd-irsa", plan = true }, SH.WHO))
  local by = {}
  for _, e in ipairs(p.plan) do by[e.type] = e end
  t.eq(by["eks:addon"].fields.identity, "irsa")
  local trust = json.decode(by["iam:role"].fields.AssumeRolePolicyDocument)
  local st = trust.Statement[1]
  t.like(st.Principal.Federated, "^arn:aws:iam::123456789012:oidc%-provider/oidc%.eks%.us%-west%-2%.amazonaws%.com/id/")
  t.eq(st.Action, "sts:AssumeRoleWithWebIdentity")
  local cond = {}
  for k, v in pairs(st.Condition.StringEquals) do cond[k:match(":(%a+)$")] = v end
  t.eq(cond, { sub = "system:serviceaccount:kube-system:fsx-csi-controller-sa", aud = "sts.amazonaws.com" })
  local _, err = dispatch.call("storage_create_fsx", { cluster = "hypd-noid", plan = true }, SH.WHO)
  t.eq(err and err.code, "STATE")
  t.like(err and err.message, "neither the eks%-pod%-identity%-agent add%-on nor an IAM OIDC provider")
  t.like(err and err.message, "cluster_configure_dependencies cluster=hypd%-noid sets both up")
end)

t.cleanup(function() SRV:stop() end)
