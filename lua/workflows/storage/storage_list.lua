-- storage_list: the cluster's storages (the S3 and FSx volumes hypd made and
-- any other S3 or FSx CSI volume found), and the status tool of the
-- storage tools (operation_id, wait_seconds).
local Names = require "_names"
local P = require "_params"
local R = require "_running"
local W = require "_wait"
local S = require "_storage"
local A = require "_eks_addon"

local function file_systems(ctx, tag)
  local out = {}
  for _, fs in ipairs(hypd.aws.all("fsx", "DescribeFileSystems", {}, ctx:aws_opts())) do
    local tags = hypd.aws.tags.map(fs.Tags)
    out[fs.FileSystemId] = { fs = fs, ours = tags[Names.TAG] == tag, name = tags.Name }
  end
  return out
end

local function list(ctx, p, out)
  local cl = S.cluster(ctx, p)
  out.cluster, out.region, out.cluster_tag = cl.name, cl.region, cl.tag
  out.addons = {}
  for kind, name in pairs(S.ADDONS) do
    local a = A.describe(ctx, cl.name, name)
    out.addons[kind] = { name = name, status = a and a.status or "NOT_INSTALLED", version = a and a.addonVersion }
  end
  local k = ctx:k8s(cl.name)
  local claims = {}
  for _, c in ipairs(assert(k:list("v1", "PersistentVolumeClaim", { all_namespaces = true }))) do
    claims[c.metadata.namespace .. "/" .. c.metadata.name] = c
  end
  local fss = file_systems(ctx, cl.tag)
  local buckets = {}
  local storages = hypd.json.array()
  for _, pv in ipairs(assert(k:list("v1", "PersistentVolume"))) do
    local kind = S.kind_of(pv)
    if kind or S.labels(pv)[S.KIND_LABEL] then
      local ref = (pv.spec or {}).claimRef or {}
      local pvc = ref.name and claims[(ref.namespace or "default") .. "/" .. ref.name]
      local d = S.describe(pv, pvc)
      if kind == "s3" and d.bucket then
        if buckets[d.bucket] == nil then
          local ok, h = pcall(require("_s3").head, ctx, d.bucket)
          buckets[d.bucket] = ok and (h and "exists" or "missing") or "unknown"
        end
        d.bucket_status = buckets[d.bucket]
      elseif kind == "fsx" then
        local f = fss[d.file_system_id]
        d.file_system_status = f and f.fs.Lifecycle or "missing"
        if f then
          d.storage_capacity_gib = f.fs.StorageCapacity
          d.deployment_type = (f.fs.LustreConfiguration or {}).DeploymentType
          f.mounted = true
        end
      end
      storages[#storages + 1] = d
    end
  end
  table.sort(storages, function(a, b) return (a.namespace or "") .. "/" .. (a.claim or a.volume) <
    (b.namespace or "") .. "/" .. (b.claim or b.volume) end)
  out.storages = storages
  -- hypd's file systems for this cluster that no volume mounts (yet: being created, or left over)
  local loose = hypd.json.array()
  for id, f in pairs(fss) do
    if f.ours and not f.mounted then
      loose[#loose + 1] = { file_system_id = id, name = f.name, status = f.fs.Lifecycle,
        storage_capacity_gib = f.fs.StorageCapacity, dns_name = f.fs.DNSName,
        deployment_type = (f.fs.LustreConfiguration or {}).DeploymentType }
    end
  end
  table.sort(loose, function(a, b) return a.file_system_id < b.file_system_id end)
  out.unmounted_file_systems = loose
end

return tool {
  name = "storage_list",
  summary = "The cluster's storages: S3 and FSx volumes, their claims, buckets and file systems, with status",
  description = "Lists the PersistentVolumes of the cluster (cluster, else the active one) that are S3 " ..
    "(Mountpoint, s3.csi.aws.com) or FSx for Lustre (fsx.csi.aws.com) volumes, whether hypd made them or not: " ..
    "type, volume and claim (namespace, phases Bound/Pending/Lost/Released), bucket and its region or file " ..
    "system id, DNS and mount name with its lifecycle (CREATING, AVAILABLE, ...), capacity, mount options, " ..
    "managed_by_hypd. Also the two CSI driver add-ons' status and hypd's FSx file systems of this cluster " ..
    "that no volume mounts yet. It is the status tool of storage_create_s3, storage_create_fsx and " ..
    "storage_delete: with operation_id it adds that operation (phase, steps, result or error), and with " ..
    "wait_seconds it answers at once when nothing is in progress " ..
    "(waited.ended = settled), else as soon as the operation's phase or status changes.",
  kind = "read",
  aws = { "eks:DescribeCluster", "eks:DescribeAddon", "fsx:DescribeFileSystems", "s3:HeadBucket" },
  k8s = { "get", "list" },
  params = P.form({},
    { "operation_id", "cluster", "region", "wait_seconds" },
    {
    cluster = P.cluster,
    region = P.region,
    operation_id = P.with(P.operation_id, { description = "a storage tool's operation to report (and wait for)" }),
    wait_seconds = P.wait_seconds,
  }),
  run = function(ctx, p)
    -- read() -> the storages now, the operation named (with the child it
    -- runs) and the top-level operation at work on the cluster's storage
    local watch -- the cluster's storage targets, once read
    local function read()
      local out = {}
      local q = { cluster = p.cluster, region = p.region }
      if p.operation_id then
        local view = hypd.operations.get(p.operation_id)
        if not view then
          hypd.errors.refuse("operation_id", "exists", "no operation " .. p.operation_id,
            { code = "NOT_FOUND", field_message = "operation_id: no such operation" })
        end
        view.running_child = R.short(view).running_child
        out.operation = view
        local op, st = view.params or {}, hypd.operations.state(p.operation_id) or {}
        q.cluster = q.cluster or op.cluster or (st.cluster or {}).name
        q.region = q.region or op.region or st.region
      end
      local ok, err = pcall(list, ctx, q, out)
      if not ok then
        if not out.operation then error(err, 0) end
        -- the operation is the answer; the cluster's storages could not be read
        out.error = type(err) == "table" and { code = err.code, message = err.message } or { message = tostring(err) }
      end
      if out.cluster and out.region then
        watch = "storage/" .. out.region .. "/" .. out.cluster
        local at_work = R.on(watch)
        if at_work and not (out.operation and out.operation.operation_id == at_work.operation_id) then
          if out.operation then out.at_work = at_work else out.operation = at_work end
        end
      end
      return out
    end
    local function states(x)
      local parts = {}
      for k, a in pairs(x.addons or {}) do parts[#parts + 1] = k .. "=" .. tostring(a.status) end
      for _, d in ipairs(x.storages or {}) do
        parts[#parts + 1] = tostring(d.claim or d.volume) .. "=" .. tostring(d.volume_phase) .. "/" ..
          tostring(d.claim_phase) .. "/" ..
          tostring(d.bucket_status) .. "/" .. tostring(d.file_system_status)
      end
      for _, f in ipairs(x.unmounted_file_systems or {}) do parts[#parts + 1] = f.file_system_id .. "=" .. tostring(f.status) end
      table.sort(parts)
      return parts
    end
    local function running(x)
      local o = x.at_work or x.operation
      return (x.operation and x.operation.status == "running") or (o and o.status == "running")
    end
    local out, waited = W.follow(p.wait_seconds, { read = read,
      quick = function() return R.fingerprint(watch, { p.operation_id }) end,
      settled = function(x)
        if running(x) then return false end
        for _, s in ipairs(states(x)) do
          for part in s:gmatch("[^=/]+") do if W.moving(part) then return false end end
        end
        return true
      end,
      signature = function(x)
        return R.signature(x.operation and x.operation.status == "running" and R.short(x.operation) or nil) .. " " ..
          R.signature(x.at_work) .. " " .. table.concat(states(x), ",")
      end })
    out.waited = waited
    return out
  end,
}
