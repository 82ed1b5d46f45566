-- The simulated Amazon FSx API (regional), FSx for Lustre only:
-- CreateFileSystem, DescribeFileSystems, DeleteFileSystem.
-- Records: "filesystem" (id FileSystemId). The subnet and security group
-- checks, and the network interfaces EC2 shows, are in fsx/network.lua.
local D = require "sandbox.services.eks.deps"
local json = require "hypd.json"

local M = { scope = "regional", operations = {}, transitions = {} }
local ops, tr = M.operations, M.transitions

-- per deployment type: allowed PerUnitStorageThroughput values and the
-- storage capacity rule (GiB)
local DEPLOY = {
  SCRATCH_1 = { step = 3600 },
  SCRATCH_2 = { step = 2400 },
  PERSISTENT_1 = { step = 2400, throughput = { [50] = true, [100] = true, [200] = true } },
  PERSISTENT_2 = { step = 2400, throughput = { [125] = true, [250] = true, [500] = true, [1000] = true } },
}
local HDD = { [12] = 6000, [40] = 1800 }

local function bad(ctx, msg) ctx.error("BadRequest", msg) end

local function check_capacity(ctx, cap, deploy, storage_type, tput)
  cap = math.tointeger(cap)
  if not cap then bad(ctx, "StorageCapacity is required for Lustre file systems.") end
  if storage_type == "HDD" then
    local step = HDD[tput or 0]
    if deploy ~= "PERSISTENT_1" or not step then
      bad(ctx, "HDD storage requires PERSISTENT_1 with PerUnitStorageThroughput 12 or 40.")
    end
    if cap < step or cap % step ~= 0 then
      bad(ctx, string.format("Invalid storage capacity %d GiB: for HDD with %d MB/s/TiB it must be a multiple of %d.",
        cap, tput, step))
    end
    return cap
  end
  local step = DEPLOY[deploy].step
  if cap ~= 1200 and cap ~= 2400 and (cap <= 0 or cap % step ~= 0) then
    bad(ctx, string.format("Invalid storage capacity %d GiB for deployment type %s: storage capacity must be " ..
      "1200, 2400, or a multiple of %d GiB.", cap, deploy, step))
  end
  return cap
end

local function view(fs)
  local out = D.copy(fs)
  out.token, out._groups = nil, nil
  return out
end

function ops.CreateFileSystem(ctx, input)
  for _, old in ipairs(input.ClientRequestToken and ctx.state:list("filesystem") or {}) do
    if old.token == input.ClientRequestToken then return { FileSystem = view(old) } end -- a retry
  end
  if input.FileSystemType ~= "LUSTRE" then
    bad(ctx, "The hypd sandbox simulates FSx for Lustre only; FileSystemType " .. tostring(input.FileSystemType) ..
      " is not supported.")
  end
  local lc = input.LustreConfiguration or {}
  local deploy = lc.DeploymentType or "SCRATCH_1"
  if not DEPLOY[deploy] then bad(ctx, "Invalid DeploymentType " .. tostring(deploy) .. ".") end
  local storage_type = input.StorageType or "SSD"
  local tput = lc.PerUnitStorageThroughput
  if deploy:match("^PERSISTENT") then
    local ok = storage_type == "HDD" and HDD[tput or 0] or (DEPLOY[deploy].throughput or {})[tput or 0]
    if not ok then
      ctx.error("InvalidPerUnitStorageThroughput", "PerUnitStorageThroughput " .. tostring(tput) ..
        " is not valid for deployment type " .. deploy .. ".")
    end
  elseif tput then
    ctx.error("InvalidPerUnitStorageThroughput", "PerUnitStorageThroughput is only valid for PERSISTENT " ..
      "deployment types.")
  end
  local cap = check_capacity(ctx, input.StorageCapacity, deploy, storage_type, tput)
  local subnets = input.SubnetIds or {}
  if #subnets ~= 1 then
    ctx.error("InvalidNetworkSettings", "Lustre file systems require exactly one subnet ID.", 400,
      { InvalidSubnetId = subnets[2] })
  end
  local s = D.subnet(ctx, subnets[1])
  if not s then
    ctx.error("InvalidNetworkSettings", "The subnet ID '" .. tostring(subnets[1]) .. "' does not exist", 400,
      { InvalidSubnetId = subnets[1] })
  end
  local groups = require("sandbox.services.fsx.network").groups(ctx, input, s)
  local id = ctx.id("fs")
  local mount = deploy == "SCRATCH_1" and "fsx" or ctx.hex(8):gsub("%d", function(d)
    return string.char(97 + tonumber(d)) end)
  local fs = {
    OwnerId = ctx.account, CreationTime = ctx.now(), FileSystemId = id, FileSystemType = "LUSTRE",
    Lifecycle = "CREATING", StorageCapacity = cap, StorageType = storage_type, VpcId = s.vpc,
    SubnetIds = D.list(subnets), NetworkInterfaceIds = json.array { ctx.id("eni"), ctx.id("eni") },
    DNSName = string.format("%s.fsx.%s.amazonaws.com", id, ctx.region),
    KmsKeyId = deploy:match("^PERSISTENT") and input.KmsKeyId or nil,
    ResourceARN = ctx:arn("file-system/" .. id), Tags = input.Tags or json.array(),
    FileSystemTypeVersion = input.FileSystemTypeVersion or "2.15", NetworkType = input.NetworkType or "IPV4",
    LustreConfiguration = {
      WeeklyMaintenanceStartTime = lc.WeeklyMaintenanceStartTime or "6:09:30",
      DeploymentType = deploy, PerUnitStorageThroughput = tput, MountName = mount,
      DataCompressionType = lc.DataCompressionType or "NONE",
      CopyTagsToBackups = lc.CopyTagsToBackups == true,
      AutomaticBackupRetentionDays = deploy:match("^PERSISTENT") and (lc.AutomaticBackupRetentionDays or 0) or nil,
      DailyAutomaticBackupStartTime = lc.DailyAutomaticBackupStartTime,
      EfaEnabled = lc.EfaEnabled,
      LogConfiguration = { Level = "DISABLED" },
      MetadataConfiguration = deploy == "PERSISTENT_2" and { Mode = "AUTOMATIC", Iops = cap <= 12000 and 1500 or 3000 }
        or nil,
    },
    AdministrativeActions = json.array(), token = input.ClientRequestToken,
    _groups = groups, -- not shown: the groups of its network interfaces (EC2 lists them)
  }
  if lc.ImportPath then
    fs.LustreConfiguration.DataRepositoryConfiguration = { Lifecycle = "CREATING", ImportPath = lc.ImportPath,
      ExportPath = lc.ExportPath or (lc.ImportPath .. "/FSxLustre"), ImportedFileChunkSize = lc.ImportedFileChunkSize
      or 1024, AutoImportPolicy = lc.AutoImportPolicy or "NONE" }
  end
  ctx.state:put("filesystem", id, fs)
  ctx:later(D.between(360, 720), "filesystem_available", { id = id })
  ctx.target = id
  return { FileSystem = view(fs) }
end

function tr.filesystem_available(ctx, args)
  local fs = ctx.state:get("filesystem", args.id)
  if not fs or fs.Lifecycle ~= "CREATING" then return end
  fs.Lifecycle = "AVAILABLE"
  local drc = fs.LustreConfiguration.DataRepositoryConfiguration
  if drc then drc.Lifecycle = "AVAILABLE" end
  ctx.state:put("filesystem", fs.FileSystemId, fs)
end

local function not_found(ctx, id)
  ctx.error("FileSystemNotFound", "File system '" .. tostring(id) .. "' does not exist.")
end

function ops.DescribeFileSystems(ctx, input)
  local all = json.array()
  if input.FileSystemIds and #input.FileSystemIds > 0 then
    for _, id in ipairs(input.FileSystemIds) do
      local fs = ctx.state:get("filesystem", id)
      if not fs then not_found(ctx, id) end
      all[#all + 1] = view(fs)
    end
  else
    for _, fs in ipairs(ctx.state:list("filesystem")) do all[#all + 1] = view(fs) end
  end
  local page, nxt = D.page(ctx, all, input.MaxResults, input.NextToken, 2147483647, "BadRequest")
  return { FileSystems = page, NextToken = nxt }
end

function ops.DeleteFileSystem(ctx, input)
  local fs = ctx.state:get("filesystem", tostring(input.FileSystemId))
  if not fs then not_found(ctx, input.FileSystemId) end
  ctx.target = fs.FileSystemId
  if fs.Lifecycle == "CREATING" then
    bad(ctx, "File system " .. fs.FileSystemId .. " is being created; it can be deleted when AVAILABLE.")
  end
  if fs.Lifecycle ~= "DELETING" then
    fs.Lifecycle = "DELETING"
    ctx.state:put("filesystem", fs.FileSystemId, fs)
    ctx:later(D.between(300, 600), "filesystem_deleted", { id = fs.FileSystemId })
  end
  local out = { FileSystemId = fs.FileSystemId, Lifecycle = "DELETING" }
  local del = input.LustreConfiguration or {}
  if fs.LustreConfiguration.DeploymentType:match("^PERSISTENT") and del.SkipFinalBackup == false then
    out.LustreResponse = { FinalBackupId = ctx.id("backup"), FinalBackupTags = del.FinalBackupTags or json.array() }
  end
  return out
end

function tr.filesystem_deleted(ctx, args)
  ctx.state:delete("filesystem", args.id)
end

-- data repository associations: an S3 prefix linked to a path of a
-- PERSISTENT_2 file system (CREATING -> AVAILABLE)
function M.operations.CreateDataRepositoryAssociation(ctx, input)
  local fs = ctx.state:get("filesystem", tostring(input.FileSystemId))
  if not fs then
    ctx.error("FileSystemNotFound", "File system '" .. tostring(input.FileSystemId) .. "' does not exist.")
  end
  local repo = tostring(input.DataRepositoryPath)
  local bucket = repo:match("^s3://([^/]+)")
  if not bucket then ctx.error("BadRequest", "DataRepositoryPath must be an s3:// URI.") end
  if not ctx:view("s3"):get("bucket", bucket) then
    ctx.error("BadRequest", "The S3 bucket " .. bucket .. " does not exist or is not accessible.")
  end
  local path = input.FileSystemPath or "/"
  for _, a in ipairs(ctx.state:list("dra")) do
    if a.FileSystemId == fs.FileSystemId and a.FileSystemPath == path then
      ctx.error("BadRequest", "FileSystemPath " .. path .. " already has a data repository association.")
    end
  end
  local id = "dra-0" .. ctx.hex(16)
  local a = {
    AssociationId = id, ResourceARN = ctx:arn("association/" .. fs.FileSystemId .. "/" .. id),
    FileSystemId = fs.FileSystemId, Lifecycle = "CREATING", FileSystemPath = path, DataRepositoryPath = repo,
    BatchImportMetaDataOnCreate = input.BatchImportMetaDataOnCreate == true,
    ImportedFileChunkSize = input.ImportedFileChunkSize or 1024, S3 = input.S3,
    Tags = input.Tags or json.array(), CreationTime = ctx.now(),
  }
  ctx.state:put("dra", id, a)
  ctx.target = id
  ctx:later(120, "dra_available", { id = id })
  return { Association = a }
end

function M.transitions.dra_available(ctx, args)
  local a = ctx.state:get("dra", args.id)
  if a and a.Lifecycle == "CREATING" then
    a.Lifecycle = "AVAILABLE"
    ctx.state:put("dra", a.AssociationId, a)
  end
end

function M.operations.DescribeDataRepositoryAssociations(ctx, input)
  local out = json.array()
  local want = {}
  for _, id in ipairs(input.AssociationIds or {}) do want[id] = true end
  for _, a in ipairs(ctx.state:list("dra")) do
    local keep = next(want) == nil or want[a.AssociationId]
    for _, f in ipairs(input.Filters or {}) do
      if f.Name == "file-system-id" then
        local hit = false
        for _, v in ipairs(f.Values or {}) do hit = hit or v == a.FileSystemId end
        keep = keep and hit
      end
    end
    if keep then out[#out + 1] = a end
  end
  for id in pairs(want) do
    if not ctx.state:get("dra", id) then
      ctx.error("DataRepositoryAssociationNotFound", "Data repository association '" .. id .. "' does not exist.")
    end
  end
  return { Associations = out }
end

function M.operations.DeleteDataRepositoryAssociation(ctx, input)
  local a = ctx.state:get("dra", tostring(input.AssociationId))
  if not a then
    ctx.error("DataRepositoryAssociationNotFound",
      "Data repository association '" .. tostring(input.AssociationId) .. "' does not exist.")
  end
  ctx.state:delete("dra", a.AssociationId)
  ctx.target = a.AssociationId
  return { AssociationId = a.AssociationId, Lifecycle = "DELETING",
           DeleteDataInFileSystem = input.DeleteDataInFileSystem == true }
end

local tags = require("sandbox.services._tags").operations {
  kinds = { { kind = "filesystem", arn = "ResourceARN", tags = "Tags", id = "FileSystemId" } },
  style = "list", names = { "TagResource", "UntagResource", "ListTagsForResource" },
  arn_param = "ResourceARN", tags_param = "Tags", keys_param = "TagKeys",
  not_found = function(ctx, arn)
    ctx.error("ResourceNotFound", "The resource ARN " .. tostring(arn) .. " does not exist.", 400)
  end,
}
for k, v in pairs(tags) do M.operations[k] = v end

return M
