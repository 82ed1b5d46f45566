-- storage/_fsx: the AWS side of an FSx for Lustre storage, as kit resources:
--
--   subnet(ctx, cl, az)     the HyperPod compute subnet (Name hp-compute-<az>)
--                           in the cluster's VPC; refused when there is none
--   security_group(...)     hypd-<tag>-<claim>-lustre in the VPC: Lustre
--                           (TCP 988 and 1018-1023) within the group and from
--                           each security group of the cluster's nodes
--   file_system(...)        the file system (tags Name hypd-<tag>-<claim>,
--                           hypd:cluster-tag), created with the operation's
--                           ClientRequestToken, not waited for
--   csi_driver(...)         the aws-fsx-csi-driver EKS add-on with the role
--                           of its controller's service account
--                           fsx-csi-controller-sa (hypd-<tag>-fsx-csi-driver,
--                           AmazonFSxFullAccess) through Pod Identity when the
--                           eks-pod-identity-agent add-on is there, else IRSA
--                           through the cluster's IAM OIDC provider; an add-on
--                           that exists is used as it is
local Names = require "_names"
local errors = hypd.errors
local json = hypd.json
local S = require "_storage"
local A = require "_eks_addon"
local roles = require "_iam"
local FS = require "_fsx_file_system"

local M = {}

M.LUSTRE_PORTS = { { 988, 988 }, { 1018, 1023 } }
M.SERVICE_ACCOUNT, M.SA_NAMESPACE = "fsx-csi-controller-sa", "kube-system"
M.POLICY = "AmazonFSxFullAccess"
M.SETTLE_EVERY, M.SETTLE_FOR = 3, 30
-- deployment types: the PerUnitStorageThroughput values each allows (MB/s/TiB) and its default
M.DEPLOYMENTS = {
  PERSISTENT_2 = { throughput = { 125, 250, 500, 1000 }, default = 125 },
  PERSISTENT_1 = { throughput = { 50, 100, 200 }, default = 50 },
  SCRATCH_2 = {},
}


local net = require "_network"

local tags_map = hypd.aws.tags.map
local tag_list = net.tag_list
local not_yet = roles.not_yet

local function owned_by(tag) return net.owned_by(tag, function(x) return x.Tags end) end

-- validate(p) -> raises VALIDATION (naming the fields) for a deployment
-- type, throughput and capacity FSx would refuse
function M.validate(p)
  local fields = {}
  local d = M.DEPLOYMENTS[p.deployment_type]
  local tput = p.throughput
  if d.throughput then
    tput = tput or d.default
    local ok = false
    for _, v in ipairs(d.throughput) do ok = ok or v == tput end
    if not ok then
      local allowed = {}
      for i, v in ipairs(d.throughput) do allowed[i] = tostring(v) end
      fields[#fields + 1] = { field = "throughput", rule = "enum", message = string.format("throughput: %s allows " ..
        "%s MB/s/TiB", p.deployment_type, table.concat(allowed, ", ")) }
    end
  elseif tput then
    fields[#fields + 1] = { field = "throughput", rule = "absent", message = "throughput: only PERSISTENT " ..
      "deployment types take a throughput per TiB" }
  end
  local cap = p.storage_capacity_gib
  if cap ~= 1200 and cap ~= 2400 and cap % 2400 ~= 0 then
    fields[#fields + 1] = { field = "storage_capacity_gib", rule = "multiple", message = "storage_capacity_gib: " ..
      "1200, 2400, or a multiple of 2400 GiB (SSD)" }
  end
  if #fields > 0 then
    local msgs = {}
    for i, f in ipairs(fields) do msgs[i] = f.message end
    errors.refuse_all(fields, "FSx for Lustre would refuse this file system: " .. table.concat(msgs, "; "))
  end
  return d.throughput and tput or nil
end

-- the compute subnet -------------------------------------------------------------

-- subnet(ctx, cl, az) -> the subnet {SubnetId, AvailabilityZone, CidrBlock}
-- tagged Name hp-compute-<az> in the cluster's VPC (az: a zone name; nil:
-- the only one there is)
function M.subnet(ctx, cl, az)
  local name = az and ("hp-compute-" .. az) or "hp-compute-*"
  local found = {}
  for _, s in ipairs(ctx:call("ec2", "DescribeSubnets", { Filters = { { Name = "vpc-id", Values = { cl.vpc_id } },
    { Name = "tag:Name", Values = { name } } } }).Subnets or {}) do
    local n = tags_map(s.Tags).Name or ""
    -- the shared compute subnets only: hp-compute-<az>, not a group's dedicated hp-compute-<group>-<az>
    if n == "hp-compute-" .. s.AvailabilityZone then found[#found + 1] = s end
  end
  table.sort(found, function(a, b) return a.AvailabilityZone < b.AvailabilityZone end)
  if #found == 0 then
    errors.refuse("availability_zone", "exists",
      string.format("the VPC %s of EKS cluster %s has no HyperPod compute subnet %s: FSx for " ..
      "Lustre is placed in the subnet of the HyperPod nodes. Create the HyperPod cluster first (hyperpod_create " ..
      "makes hp-compute-<az>), or pass the availability_zone of an existing one", tostring(cl.vpc_id), cl.name, name),
      { code = "STATE", field_message = "availability_zone: no compute subnet" })
  end
  if #found > 1 then
    local zones = {}
    for i, s in ipairs(found) do zones[i] = s.AvailabilityZone end
    errors.refuse("availability_zone", "required", "the VPC has compute subnets in several zones (" ..
      table.concat(zones, ", ") .. "): pass availability_zone, the zone of the nodes that use the file system",
      { field_message = "availability_zone: one of " .. table.concat(zones, ", ") })
  end
  return found[1]
end

-- the security group and its rules -------------------------------------------------

local function describe_group(ctx, filters)
  return (ctx:call("ec2", "DescribeSecurityGroups", filters).SecurityGroups or {})[1]
end

-- node_groups(ctx, cl, hyperpod) -> the security group ids of the cluster's
-- nodes that exist in EC2: the EKS cluster's groups, its cluster security
-- group, and the HyperPod cluster's (VpcConfig and instance group overrides)
function M.node_groups(ctx, cl, hyperpod)
  local ids, seen = {}, {}
  local function add(id) if id and not seen[id] then seen[id] = true; ids[#ids + 1] = id end end
  for _, id in ipairs(cl.security_group_ids or {}) do add(id) end
  add(cl.cluster_security_group_id)
  if hyperpod then
    for _, id in ipairs((hyperpod.VpcConfig or {}).SecurityGroupIds or {}) do add(id) end
    for _, g in ipairs(hyperpod.InstanceGroups or {}) do
      for _, id in ipairs((g.OverrideVpcConfig or {}).SecurityGroupIds or {}) do add(id) end
    end
  end
  if #ids == 0 then return {} end
  local exists = {}
  for _, g in ipairs(ctx:call("ec2", "DescribeSecurityGroups", { Filters = { { Name = "group-id",
    Values = ids } } }).SecurityGroups or {}) do exists[g.GroupId] = true end
  local out = {} -- in the order above (ids are random: an order by id would change from cluster to cluster)
  for _, id in ipairs(ids) do if exists[id] then out[#out + 1] = id end end
  return out
end

-- missing_ports(group, source) -> the Lustre port ranges group does not yet
-- let in from source
local function missing_ports(g, source)
  local out = {}
  for _, range in ipairs(M.LUSTRE_PORTS) do
    local have = false
    for _, perm in ipairs(g.IpPermissions or {}) do
      local proto = tostring(perm.IpProtocol)
      local covers = proto == "-1" or (proto == "tcp" and (perm.FromPort or 0) <= range[1] and
        range[2] <= (perm.ToPort or 65535))
      if covers then
        for _, pair in ipairs(perm.UserIdGroupPairs or {}) do have = have or pair.GroupId == source end
      end
    end
    if not have then out[#out + 1] = range end
  end
  return out
end

-- security_group(ctx, cl, subnet, names, sources) -> group id: the file
-- system's group, with the Lustre ports open within it and from sources
function M.security_group(ctx, cl, names, sources)
  local tag, name = cl.tag, names.security_group
  local g = ctx:ensure { type = "ec2:security-group", label = "security group", name = name,
    key = "fsx_security_group_id", id = "GroupId", field = "claim_name", needs = cl.vpc_id,
    retry = not_yet, retry_every = M.SETTLE_EVERY, retry_for = M.SETTLE_FOR, exists = "InvalidGroup.Duplicate",
    owned = owned_by(tag),
    find = function(id)
      local out, err = ctx:try("ec2", "DescribeSecurityGroups", { GroupIds = { id } })
      if out then return (out.SecurityGroups or {})[1] end
      if not tostring(err.code):find("NotFound", 1, true) then error(err, 0) end
    end,
    search = function()
      return describe_group(ctx, { Filters = { { Name = "vpc-id", Values = { cl.vpc_id } },
        { Name = "group-name", Values = { name } } } })
    end,
    fields = { VpcId = cl.vpc_id, ["tag:" .. Names.TAG] = tag, ["tag:Name"] = name },
    placeholder = function(id) return { GroupId = id, GroupName = name, IpPermissions = {} } end,
    create = function()
      local id = ctx:call("ec2", "CreateSecurityGroup", { GroupName = name, VpcId = cl.vpc_id,
        Description = "hypd " .. tag .. ": FSx for Lustre (ports 988, 1018-1023) for the cluster's nodes",
        TagSpecifications = { { ResourceType = "security-group", Tags = tag_list(tag, name) } } }).GroupId
      return { GroupId = id, GroupName = name, Tags = tag_list(tag, name), IpPermissions = {} }
    end }
  local id = g.GroupId
  local all = { id }
  for _, s in ipairs(sources) do if s ~= id then all[#all + 1] = s end end
  for _, source in ipairs(all) do
    local what = source == id and ("within " .. name) or ("from " .. source .. " to " .. name)
    ctx:ensure { type = "ec2:security-group-rule", label = "security group rule", name = "Lustre " .. what,
      needs = id, id = "GroupId", exists = "InvalidPermission.Duplicate", retry = not_yet,
      retry_every = M.SETTLE_EVERY, retry_for = M.SETTLE_FOR,
      fields = { GroupId = id, SourceGroupId = source, Ports = "tcp 988, 1018-1023" },
      search = function()
        local cur = describe_group(ctx, { GroupIds = { id } })
        if cur and #missing_ports(cur, source) == 0 then return cur end
      end,
      create = function()
        local cur = describe_group(ctx, { GroupIds = { id } }) or { IpPermissions = {} }
        local perms = {}
        for _, r in ipairs(missing_ports(cur, source)) do
          perms[#perms + 1] = { IpProtocol = "tcp", FromPort = r[1], ToPort = r[2],
            UserIdGroupPairs = { { GroupId = source, Description = "Lustre" } } }
        end
        ctx:call("ec2", "AuthorizeSecurityGroupIngress", { GroupId = id, IpPermissions = perms })
        return { GroupId = id }
      end }
  end
  return id
end

-- the file system ------------------------------------------------------------------

local function live(fs) return fs and fs.Lifecycle ~= "DELETING" and fs.Lifecycle ~= "FAILED" end

local function fs_fields(fs)
  local lc = fs.LustreConfiguration or {}
  return { StorageCapacity = fs.StorageCapacity, DeploymentType = lc.DeploymentType,
    PerUnitStorageThroughput = lc.PerUnitStorageThroughput }
end

-- existing(ctx, cl, names) -> the live file system of this claim (by its
-- Name and ownership tag, as file_system finds it), or nil
function M.existing(ctx, cl, names)
  for _, fs in ipairs(hypd.aws.all("fsx", "DescribeFileSystems", {}, ctx:aws_opts())) do
    local t = tags_map(fs.Tags)
    if t.Name == names.file_system and t[Names.TAG] == cl.tag and live(fs) then return fs end
  end
end

-- file_system(ctx, cl, names, o) -> the file system (DescribeFileSystems
-- shape): o = {subnet_id, security_group_id, capacity, deployment, throughput}
function M.file_system(ctx, cl, names, o)
  local tag, name = cl.tag, names.file_system
  local lc = { DeploymentType = o.deployment, PerUnitStorageThroughput = o.throughput,
    DataCompressionType = "LZ4" }
  local desired = { StorageCapacity = o.capacity, DeploymentType = o.deployment, PerUnitStorageThroughput = o.throughput }
  return ctx:ensure { type = "fsx:file-system", label = "FSx for Lustre file system", name = name,
    key = "file_system_id", id = "FileSystemId", field = "claim_name", needs = { o.subnet_id, o.security_group_id },
    owned = owned_by(tag),
    find = function(id)
      local fs = FS.describe(ctx, id)
      if live(fs) then return fs end
    end,
    search = function()
      for _, fs in ipairs(hypd.aws.all("fsx", "DescribeFileSystems", {}, ctx:aws_opts())) do
        local t = tags_map(fs.Tags)
        if t.Name == name and t[Names.TAG] == tag and live(fs) then return fs end
      end
    end,
    fields = { SubnetIds = { o.subnet_id }, SecurityGroupIds = { o.security_group_id }, FileSystemType = "LUSTRE",
      ["tag:" .. Names.TAG] = tag, ["tag:Name"] = name },
    desired = desired, current = fs_fields,
    placeholder = function(id) return { FileSystemId = id, DNSName = "planned", LustreConfiguration = lc,
      StorageCapacity = o.capacity } end,
    create = function()
      return ctx:call("fsx", "CreateFileSystem", {
        ClientRequestToken = Names.token(ctx.op_id, nil, 63), FileSystemType = "LUSTRE",
        FileSystemTypeVersion = "2.15", StorageCapacity = o.capacity, StorageType = "SSD",
        SubnetIds = { o.subnet_id }, SecurityGroupIds = { o.security_group_id }, LustreConfiguration = lc,
        Tags = tag_list(tag, name) }).FileSystem
    end }
end

-- the CSI driver add-on and its role --------------------------------------------------

local function oidc_provider(ctx, issuer)
  local host = tostring(issuer or ""):gsub("^https://", "")
  if host == "" then return nil end
  for _, p in ipairs(ctx:call("iam", "ListOpenIDConnectProviders", {}).OpenIDConnectProviderList or {}) do
    if tostring(p.Arn):sub(-#host - 1) == "/" .. host then return p.Arn, host end
  end
end

-- identity(ctx, cl) -> {mode = "pod-identity" | "irsa", trust} for the
-- controller's role; refused when the cluster has neither
local function identity(ctx, cl)
  local agent = A.describe(ctx, cl.name, "eks-pod-identity-agent")
  if agent and agent.status ~= "DELETING" then
    return { mode = "pod-identity", trust = { Version = "2012-10-17", Statement = { { Effect = "Allow",
      Principal = { Service = "pods.eks.amazonaws.com" }, Action = { "sts:AssumeRole", "sts:TagSession" } } } } }
  end
  local arn, host = oidc_provider(ctx, cl.oidc_issuer)
  if arn then
    return { mode = "irsa", trust = { Version = "2012-10-17", Statement = { { Effect = "Allow",
      Principal = { Federated = arn }, Action = "sts:AssumeRoleWithWebIdentity",
      Condition = { StringEquals = { [host .. ":sub"] = "system:serviceaccount:" .. M.SA_NAMESPACE .. ":" ..
        M.SERVICE_ACCOUNT, [host .. ":aud"] = "sts.amazonaws.com" } } } } } }
  end
  errors.raise("STATE", string.format("EKS cluster %s has neither the eks-pod-identity-agent add-on nor an IAM " ..
    "OIDC provider, so the FSx CSI driver cannot get its IAM role; %s cluster=%s sets both up, then call " ..
    "this tool again", cl.name, A.INSTALLER, cl.name), { cluster = cl.name, tool = A.INSTALLER })
end

-- csi_driver(ctx, cl) -> the add-on (DescribeAddon shape, ACTIVE once waited)
function M.csi_driver(ctx, cl)
  local st = ctx.state
  local name = S.ADDONS.fsx
  local existing = not cl.planned and A.describe(ctx, cl.name, name)
  if existing and existing.status ~= "DELETING" then
    st.fsx_csi = { addon = "existing", role_arn = existing.serviceAccountRoleArn }
  else
    local id = cl.planned and { mode = "pod-identity", trust = {} } or identity(ctx, cl)
    local role_name = Names.fsx(cl.tag, "x").role
    local role = roles.role(ctx, { name = role_name, tag = cl.tag, trust = json.encode(id.trust),
      key = "fsx_csi_role_arn", field = "cluster", needs = cl.planned and cl.arn or nil,
      fields = { identity = id.mode },
      description = "hypd " .. cl.tag .. ": the FSx CSI driver's controller (" .. M.SERVICE_ACCOUNT .. ") on " ..
        cl.name })
    roles.attach(ctx, role, roles.managed(role, M.POLICY))
    local req = { clusterName = cl.name, addonName = name, resolveConflicts = "OVERWRITE",
      clientRequestToken = Names.token(ctx.op_id, "fsx-csi"),
      tags = { [Names.TAG] = cl.tag } }
    if id.mode == "pod-identity" then
      req.podIdentityAssociations = { { serviceAccount = M.SERVICE_ACCOUNT, roleArn = role.Arn } }
    else
      req.serviceAccountRoleArn = role.Arn
    end
    ctx:ensure { type = "eks:addon", label = "EKS add-on", name = name .. " on " .. cl.name, id = "addonArn",
      needs = { cl.planned and cl.arn or nil, role.Arn }, exists = "ResourceInUseException",
      fields = { addonName = name, identity = id.mode, serviceAccount = M.SA_NAMESPACE .. "/" .. M.SERVICE_ACCOUNT,
        roleArn = role.Arn },
      -- EKS may not see a role made a moment ago
      retry = function(err)
        if err.code == "InvalidParameterException" and tostring(err.message):find("[Rr]ole") then
          return "EKS does not see role " .. role_name .. " yet"
        end
      end,
      search = function()
        local a = A.describe(ctx, cl.name, name)
        if a and a.status ~= "DELETING" then return a end
      end,
      create = function() return ctx:call("eks", "CreateAddon", req).addon end }
    st.fsx_csi = { addon = "hypd", role_arn = role.Arn, identity = id.mode }
  end
  if ctx.plan then return existing end
  return A.require_active(ctx, cl, name, "an FSx for Lustre volume", "delete that add-on (EKS DeleteAddon) and " ..
    "call storage_create_fsx again: it installs the driver with its role when the add-on is absent")
end

return M
