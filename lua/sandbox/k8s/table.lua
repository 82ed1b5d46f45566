-- sandbox.k8s.table: the server-side printing kubectl asks for with
-- `Accept: application/json;as=Table;g=meta.k8s.io;v=v1`. The columns are
-- those the real API server prints for each kind.
local core = require "hypd.core"
local json = require "hypd.json"

local M = {}

local function epoch(ts)
  local y, mo, d, h, mi, s = tostring(ts or ""):match("^(%d+)-(%d+)-(%d+)T(%d+):(%d+):(%d+)")
  if not y then return nil end
  return require("sandbox.auth").parse_date(string.format("%04d%02d%02dT%02d%02d%02dZ", y, mo, d, h, mi, s))
end
M.epoch = epoch

-- age(ts) -> "5s", "3m2s", "4h", "2d3h", "40d" as kubectl prints durations
function M.age(ts)
  local t = epoch(ts)
  if not t then return "<unknown>" end
  local s = math.max(0, math.floor(core.now() - t))
  if s < 120 then return s .. "s" end
  local m = s // 60
  if m < 10 then return string.format("%dm%ds", m, s % 60) end
  if m < 180 then return m .. "m" end
  local h = m // 60
  if h < 8 then return string.format("%dh%dm", h, m % 60) end
  if h < 48 then return h .. "h" end
  if h < 192 then return string.format("%dd%dh", h // 24, h % 24) end
  return (h // 24) .. "d"
end

local function pod_ready(p)
  local total, ready = 0, 0
  local st = p.status or {}
  for _ in ipairs((p.spec or {}).containers or {}) do total = total + 1 end
  for _, c in ipairs(st.containerStatuses or {}) do if c.ready then ready = ready + 1 end end
  return ready .. "/" .. total
end

local function pod_status(p)
  local st = p.status or {}
  if p.metadata.deletionTimestamp then return "Terminating" end
  if st.reason then return st.reason end
  for _, c in ipairs(st.containerStatuses or {}) do
    local w = c.state and (c.state.waiting or c.state.terminated)
    if w and w.reason and w.reason ~= "Completed" then return w.reason end
  end
  if st.phase == "Succeeded" then return "Completed" end
  if st.phase == "Failed" then return "Error" end
  return st.phase or "Pending"
end

local function restarts(p)
  local n = 0
  for _, c in ipairs((p.status or {}).containerStatuses or {}) do n = n + (c.restartCount or 0) end
  return n
end

local function count(t)
  local n = 0
  for _ in pairs(t or {}) do n = n + 1 end
  return n
end

local function node_status(n)
  for _, c in ipairs((n.status or {}).conditions or {}) do
    if c.type == "Ready" then
      local s = c.status == "True" and "Ready" or "NotReady"
      if (n.spec or {}).unschedulable then s = s .. ",SchedulingDisabled" end
      return s
    end
  end
  return "Unknown"
end

local function roles(n)
  local out = {}
  for k in pairs(n.metadata.labels or {}) do
    local r = k:match("^node%-role%.kubernetes%.io/(.+)$")
    if r then out[#out + 1] = r end
  end
  table.sort(out)
  return #out > 0 and table.concat(out, ",") or "<none>"
end

-- external_ip(svc) -> kubectl's EXTERNAL-IP: a LoadBalancer's ingress
-- addresses ("<pending>" before it has one), else spec.externalIPs
local function external_ip(s)
  local out = {}
  for _, ip in ipairs((s.spec or {}).externalIPs or {}) do out[#out + 1] = ip end
  if (s.spec or {}).type == "LoadBalancer" then
    for _, ing in ipairs(((s.status or {}).loadBalancer or {}).ingress or {}) do out[#out + 1] = ing.ip or ing.hostname end
    if #out == 0 then return "<pending>" end
  end
  return #out > 0 and table.concat(out, ",") or "<none>"
end

local function ports(svc)
  local out = {}
  for _, p in ipairs((svc.spec or {}).ports or {}) do
    out[#out + 1] = tostring(p.port) .. (p.nodePort and (":" .. p.nodePort) or "") .. "/" .. (p.protocol or "TCP")
  end
  return #out > 0 and table.concat(out, ",") or "<none>"
end

local function job_status(j)
  for _, c in ipairs((j.status or {}).conditions or {}) do
    if c.status == "True" and (c.type == "Complete" or c.type == "Failed") then return c.type end
  end
  if (j.spec or {}).suspend then return "Suspended" end
  return "Running"
end

local function duration(j)
  local st = j.status or {}
  local a, b = epoch(st.startTime), epoch(st.completionTime) or core.now()
  if not a then return "" end
  local s = math.floor(b - a)
  if s < 120 then return s .. "s" end
  return (s // 60) .. "m"
end

local NAME = { "Name", "string", function(o) return o.metadata.name end, format = "name" }
local AGE = { "Age", "string", function(o) return M.age(o.metadata.creationTimestamp) end }

-- or_none(v) -> v as text, or "<none>" when unset
local function or_none(v) return v ~= nil and tostring(v) or "<none>" end

-- quota(q, limits) -> "pods: 1/10, requests.cpu: 0/4": the used/hard of a
-- ResourceQuota's requests (limits = false) or limits.* (true)
local function quota(q, limits)
  local out = {}
  for k, v in pairs((q.spec or {}).hard or {}) do
    if (k:match("^limits%.") ~= nil) == limits then
      out[#out + 1] = k .. ": " .. tostring(((q.status or {}).used or {})[k] or 0) .. "/" .. tostring(v)
    end
  end
  table.sort(out)
  return table.concat(out, ", ")
end

-- event_source(e) -> the printer's SOURCE: "component, host" (the
-- reporting controller and instance when source is empty)
local function event_source(e)
  local src = e.source or {}
  local comp = (src.component or "") ~= "" and src.component or e.reportingController or e.reportingComponent or ""
  local inst = (src.host or "") ~= "" and src.host or e.reportingInstance or ""
  return inst ~= "" and comp .. ", " .. inst or comp
end

local function event_first(e)
  if e.firstTimestamp then return M.age(e.firstTimestamp) end
  return e.eventTime and M.age(e.eventTime) or "<unknown>"
end

-- the printer's LAST SEEN: the series' last observation, else lastTimestamp,
-- else the first sighting
local function event_last(e)
  if type(e.series) == "table" and e.series.lastObservedTime then return M.age(e.series.lastObservedTime) end
  if e.lastTimestamp then return M.age(e.lastTimestamp) end
  return event_first(e)
end

local function event_count(e)
  if type(e.series) == "table" and e.series.count then return e.series.count end
  return (e.count or 0) > 0 and e.count or 1
end

local function event_object(e)
  local io = e.involvedObject or {}
  local kind = tostring(io.kind or ""):lower()
  return (io.name or "") ~= "" and kind .. "/" .. io.name or kind
end

-- the -o wide columns of the workload kinds: the pod template's container
-- names and images, and the selector as metav1.FormatLabelSelector prints it
local function containers_of(o)
  local out = {}
  for _, c in ipairs((((o.spec or {}).template or {}).spec or {}).containers or {}) do out[#out + 1] = c.name or "" end
  return table.concat(out, ",")
end
local function images_of(o)
  local out = {}
  for _, c in ipairs((((o.spec or {}).template or {}).spec or {}).containers or {}) do out[#out + 1] = c.image or "" end
  return table.concat(out, ",")
end
local function label_map(m)
  local out = {}
  for k, v in pairs(m or {}) do out[#out + 1] = k .. "=" .. tostring(v) end
  table.sort(out)
  return out
end
local function selector_of(o)
  local sel = (o.spec or {}).selector
  if type(sel) ~= "table" then return "<none>" end
  local out = label_map(sel.matchLabels)
  for _, e in ipairs(sel.matchExpressions or {}) do
    local op = e.operator or ""
    if op == "Exists" then
      out[#out + 1] = e.key
    elseif op == "DoesNotExist" then
      out[#out + 1] = "!" .. e.key
    else
      local vals = { table.unpack(e.values or {}) }
      table.sort(vals)
      out[#out + 1] = e.key .. " " .. op:lower() .. " (" .. table.concat(vals, ",") .. ")"
    end
  end
  return #out > 0 and table.concat(out, ",") or "<none>"
end
local CONTAINERS = { "Containers", "string", containers_of, priority = 1 }
local IMAGES = { "Images", "string", images_of, priority = 1 }
local SELECTOR = { "Selector", "string", selector_of, priority = 1 }

local COLUMNS = {
  -- the API server prints every column (wide); kubectl hides priority 1
  Event = { { "Last Seen", "string", event_last }, { "Type", "string", function(e) return e.type or "" end },
    { "Reason", "string", function(e) return e.reason or "" end }, { "Object", "string", event_object },
    { "Subobject", "string", function(e) return (e.involvedObject or {}).fieldPath or "" end, priority = 1 },
    { "Source", "string", event_source, priority = 1 },
    { "Message", "string", function(e) return (tostring(e.message or ""):gsub("^%s+", ""):gsub("%s+$", "")) end },
    { "First Seen", "string", event_first, priority = 1 },
    { "Count", "string", event_count, priority = 1 },
    { "Name", "string", function(e) return e.metadata.name end, format = "name", priority = 1 } },
  PodDisruptionBudget = { NAME,
    { "Min Available", "string", function(p) return or_none((p.spec or {}).minAvailable) end },
    { "Max Unavailable", "string", function(p) return or_none((p.spec or {}).maxUnavailable) end },
    { "Allowed Disruptions", "integer", function(p) return (p.status or {}).disruptionsAllowed or 0 end }, AGE },
  PriorityClass = { NAME, { "Value", "integer", function(p) return p.value or 0 end },
    { "Global-Default", "boolean", function(p) return p.globalDefault == true end }, AGE,
    { "PreemptionPolicy", "string", function(p) return p.preemptionPolicy or "PreemptLowerPriority" end } },
  Ingress = { NAME, { "Class", "string", function(i) return or_none((i.spec or {}).ingressClassName) end },
    { "Hosts", "string", function(i)
      local out = {}
      for _, r in ipairs((i.spec or {}).rules or {}) do out[#out + 1] = r.host or "*" end
      return #out > 0 and table.concat(out, ",") or "*" end },
    { "Address", "string", function(i)
      local out = {}
      for _, a in ipairs((((i.status or {}).loadBalancer or {}).ingress) or {}) do out[#out + 1] = a.ip or a.hostname end
      return table.concat(out, ",") end },
    { "Ports", "string", function(i) return #((i.spec or {}).tls or {}) > 0 and "80, 443" or "80" end }, AGE },
  HorizontalPodAutoscaler = { NAME,
    { "Reference", "string", function(h)
      local ref = (h.spec or {}).scaleTargetRef or {}
      return tostring(ref.kind) .. "/" .. tostring(ref.name) end },
    { "Targets", "string", function(h)
      local spec = h.spec or {}
      if spec.targetCPUUtilizationPercentage then return "cpu: <unknown>/" .. spec.targetCPUUtilizationPercentage .. "%" end
      local out = {}
      for _, m in ipairs(spec.metrics or {}) do
        local target = (m.resource or {}).target or {}
        if m.type == "Resource" and target.averageUtilization then
          out[#out + 1] = m.resource.name .. ": <unknown>/" .. target.averageUtilization .. "%"
        end
      end
      return #out > 0 and table.concat(out, ", ") or "<none>" end },
    { "MinPods", "string", function(h) return tostring((h.spec or {}).minReplicas or 1) end },
    { "MaxPods", "integer", function(h) return (h.spec or {}).maxReplicas or 0 end },
    { "Replicas", "integer", function(h) return (h.status or {}).currentReplicas or 0 end }, AGE },
  ResourceQuota = { NAME, AGE, { "Request", "string", function(q) return quota(q, false) end },
    { "Limit", "string", function(q) return quota(q, true) end } },
  Pod = { NAME, { "Ready", "string", pod_ready }, { "Status", "string", pod_status },
    { "Restarts", "string", restarts }, AGE,
    { "IP", "string", function(p) return (p.status or {}).podIP or "<none>" end, priority = 1 },
    { "Node", "string", function(p) return (p.spec or {}).nodeName or "<none>" end, priority = 1 },
    { "Nominated Node", "string", function(p) return (p.status or {}).nominatedNodeName or "<none>" end, priority = 1 },
    { "Readiness Gates", "string", function() return "<none>" end, priority = 1 } },
  Node = { NAME, { "Status", "string", node_status }, { "Roles", "string", roles }, AGE,
    { "Version", "string", function(n) return ((n.status or {}).nodeInfo or {}).kubeletVersion or "" end },
    { "Internal-IP", "string", function(n)
      for _, a in ipairs((n.status or {}).addresses or {}) do if a.type == "InternalIP" then return a.address end end
      return "<none>" end, priority = 1 },
    { "External-IP", "string", function() return "<none>" end, priority = 1 },
    { "OS-Image", "string", function(n) return ((n.status or {}).nodeInfo or {}).osImage or "" end, priority = 1 },
    { "Kernel-Version", "string", function(n) return ((n.status or {}).nodeInfo or {}).kernelVersion or "" end,
      priority = 1 },
    { "Container-Runtime", "string", function(n)
      return ((n.status or {}).nodeInfo or {}).containerRuntimeVersion or "" end, priority = 1 } },
  ControllerRevision = { NAME, { "Controller", "string", function(c)
      for _, o in ipairs(c.metadata.ownerReferences or {}) do
        if o.controller then
          local g = tostring(o.apiVersion or ""):match("^(.+)/[^/]+$")
          return o.kind:lower() .. (g and "." .. g or "") .. "/" .. o.name
        end
      end
      return "<none>" end },
    { "Revision", "integer", function(c) return c.revision or 0 end }, AGE },
  LimitRange = { NAME, { "Created At", "date", function(l) return l.metadata.creationTimestamp end } },
  Lease = { NAME, { "Holder", "string", function(l) return (l.spec or {}).holderIdentity or "" end }, AGE },
  Namespace = { NAME, { "Status", "string", function(n) return (n.status or {}).phase or "Active" end }, AGE },
  Deployment = { NAME,
    { "Ready", "string", function(d)
      return string.format("%d/%d", (d.status or {}).readyReplicas or 0, (d.spec or {}).replicas or 1) end },
    { "Up-to-date", "integer", function(d) return (d.status or {}).updatedReplicas or 0 end },
    { "Available", "integer", function(d) return (d.status or {}).availableReplicas or 0 end }, AGE,
    CONTAINERS, IMAGES, SELECTOR },
  ReplicaSet = { NAME,
    { "Desired", "integer", function(d) return (d.spec or {}).replicas or 1 end },
    { "Current", "integer", function(d) return (d.status or {}).replicas or 0 end },
    { "Ready", "integer", function(d) return (d.status or {}).readyReplicas or 0 end }, AGE,
    CONTAINERS, IMAGES, SELECTOR },
  StatefulSet = { NAME,
    { "Ready", "string", function(d)
      return string.format("%d/%d", (d.status or {}).readyReplicas or 0, (d.spec or {}).replicas or 1) end }, AGE,
    CONTAINERS, IMAGES },
  CronJob = { NAME, { "Schedule", "string", function(j) return (j.spec or {}).schedule or "" end },
    { "Timezone", "string", function(j) return (j.spec or {}).timeZone or "<none>" end },
    { "Suspend", "boolean", function(j) return (j.spec or {}).suspend == true end },
    { "Active", "integer", function(j) return #((j.status or {}).active or {}) end },
    { "Last Schedule", "string", function(j)
      local l = (j.status or {}).lastScheduleTime
      return l and M.age(l) or "<none>" end }, AGE },
  DaemonSet = { NAME,
    { "Desired", "integer", function(d) return (d.status or {}).desiredNumberScheduled or 0 end },
    { "Current", "integer", function(d) return (d.status or {}).currentNumberScheduled or 0 end },
    { "Ready", "integer", function(d) return (d.status or {}).numberReady or 0 end },
    { "Up-to-date", "integer", function(d) return (d.status or {}).updatedNumberScheduled or 0 end },
    { "Available", "integer", function(d) return (d.status or {}).numberAvailable or 0 end },
    { "Node Selector", "string", function(d)
      local sel = ((((d.spec or {}).template or {}).spec or {}).nodeSelector) or {}
      local out = {}
      for k, v in pairs(sel) do out[#out + 1] = k .. "=" .. v end
      table.sort(out)
      return #out > 0 and table.concat(out, ",") or "<none>" end }, AGE, CONTAINERS, IMAGES, SELECTOR },
  Job = { NAME, { "Status", "string", job_status },
    { "Completions", "string", function(j)
      return string.format("%d/%d", (j.status or {}).succeeded or 0, (j.spec or {}).completions or 1) end },
    { "Duration", "string", duration }, AGE, CONTAINERS, IMAGES, SELECTOR },
  Service = { NAME, { "Type", "string", function(s) return (s.spec or {}).type or "ClusterIP" end },
    { "Cluster-IP", "string", function(s) return (s.spec or {}).clusterIP or "<none>" end },
    { "External-IP", "string", external_ip }, { "Port(s)", "string", ports }, AGE,
    { "Selector", "string", function(v)
      local out = label_map((v.spec or {}).selector)
      return #out > 0 and table.concat(out, ",") or "<none>" end, priority = 1 } },
  -- the printer's forms: the first three address:port pairs, then "+ N more..."
  Endpoints = { NAME, { "Endpoints", "string", function(e)
    local out = {}
    for _, sub in ipairs(e.subsets or {}) do
      for _, a in ipairs(sub.addresses or {}) do
        for _, pt in ipairs(sub.ports or { {} }) do
          out[#out + 1] = a.ip .. (pt.port and (":" .. pt.port) or "")
        end
      end
    end
    if #out == 0 then return "<none>" end
    if #out > 3 then return table.concat(out, ",", 1, 3) .. " + " .. (#out - 3) .. " more..." end
    return table.concat(out, ",") end }, AGE },
  EndpointSlice = { NAME, { "AddressType", "string", function(e) return e.addressType or "IPv4" end },
    { "Ports", "string", function(e)
      local out = {}
      for _, pt in ipairs(e.ports or {}) do out[#out + 1] = tostring(pt.port) end
      return #out > 0 and table.concat(out, ",") or "<unset>" end },
    { "Endpoints", "string", function(e)
      local out = {}
      for _, x in ipairs(e.endpoints or {}) do
        for _, a in ipairs(x.addresses or {}) do out[#out + 1] = a end
      end
      if #out == 0 then return "<unset>" end
      if #out > 3 then return table.concat(out, ",", 1, 3) .. " + " .. (#out - 3) .. " more..." end
      return table.concat(out, ",") end }, AGE },
  ConfigMap = { NAME, { "Data", "integer", function(c) return count(c.data) + count(c.binaryData) end }, AGE },
  Secret = { NAME, { "Type", "string", function(s) return s.type or "Opaque" end },
    { "Data", "integer", function(s) return count(s.data) end }, AGE },
  ServiceAccount = { NAME, { "Secrets", "integer", function(s) return #(s.secrets or {}) end }, AGE },
  PersistentVolumeClaim = { NAME, { "Status", "string", function(p) return (p.status or {}).phase or "Pending" end },
    { "Volume", "string", function(p) return (p.spec or {}).volumeName or "" end },
    { "Capacity", "string", function(p) return ((p.status or {}).capacity or {}).storage or "" end },
    { "Access Modes", "string", function(p)
      local m = { ReadWriteOnce = "RWO", ReadOnlyMany = "ROX", ReadWriteMany = "RWX" }
      local out = {}
      for _, x in ipairs((p.spec or {}).accessModes or {}) do out[#out + 1] = m[x] or x end
      return table.concat(out, ",") end },
    { "StorageClass", "string", function(p) return (p.spec or {}).storageClassName or "<unset>" end }, AGE },
  -- the printers' printStorageClass, printCSIDriver, printCSINode, printVolumeAttachment
  StorageClass = { { "Name", "string", function(c)
      local default = (c.metadata.annotations or {})["storageclass.kubernetes.io/is-default-class"] == "true"
      return c.metadata.name .. (default and " (default)" or "") end, format = "name" },
    { "Provisioner", "string", function(c) return c.provisioner or "" end },
    { "ReclaimPolicy", "string", function(c) return c.reclaimPolicy or "Delete" end },
    { "VolumeBindingMode", "string", function(c) return c.volumeBindingMode or "Immediate" end },
    { "AllowVolumeExpansion", "string", function(c) return tostring(c.allowVolumeExpansion == true) end }, AGE },
  CSIDriver = { NAME,
    { "AttachRequired", "boolean", function(d) return (d.spec or {}).attachRequired ~= false end },
    { "PodInfoOnMount", "boolean", function(d) return (d.spec or {}).podInfoOnMount == true end },
    { "StorageCapacity", "boolean", function(d) return (d.spec or {}).storageCapacity == true end },
    { "TokenRequests", "string", function(d)
      local out = {}
      for _, x in ipairs((d.spec or {}).tokenRequests or {}) do out[#out + 1] = x.audience or "" end
      return #out > 0 and table.concat(out, ",") or "<unset>" end },
    { "RequiresRepublish", "boolean", function(d) return (d.spec or {}).requiresRepublish == true end },
    { "Modes", "string", function(d)
      local m = (d.spec or {}).volumeLifecycleModes or {}
      return #m > 0 and table.concat(m, ",") or "<none>" end }, AGE },
  CSINode = { NAME, { "Drivers", "integer", function(n) return #((n.spec or {}).drivers or {}) end }, AGE },
  VolumeAttachment = { NAME, { "Attacher", "string", function(v) return (v.spec or {}).attacher or "" end },
    { "PV", "string", function(v) return ((v.spec or {}).source or {}).persistentVolumeName or "" end },
    { "Node", "string", function(v) return (v.spec or {}).nodeName or "" end },
    { "Attached", "boolean", function(v) return (v.status or {}).attached == true end }, AGE },
  CustomResourceDefinition = { NAME, { "Created At", "date", function(c) return c.metadata.creationTimestamp end } },
}

-- a JSONPath like .status.conditions[-1].type, as CRDs' printer columns use
local function jsonpath(obj, path)
  local v = obj
  for part in path:gmatch("[^.]+") do
    local name, idx = part:match("^([^%[]+)%[(%-?%d+)%]$")
    if name then
      v = type(v) == "table" and v[name] or nil
      idx = tonumber(idx)
      if type(v) == "table" then v = v[idx < 0 and #v + idx + 1 or idx + 1] end
    else
      v = type(v) == "table" and v[part] or nil
    end
  end
  return v
end

local function columns_for(r)
  if COLUMNS[r.kind] then return COLUMNS[r.kind] end
  local cols = { NAME }
  for _, c in ipairs(r.columns or {}) do
    if c[1] == "AGE" then
      cols[#cols + 1] = AGE
    else
      cols[#cols + 1] = { c[1]:sub(1, 1) .. c[1]:sub(2):lower(), "string", function(o)
        local v = jsonpath(o, c[2])
        return v == nil and "" or tostring(v) end }
    end
  end
  if not r.columns then cols[#cols + 1] = AGE end
  return cols
end

-- table(r, objects, rv [, continue [, opts]]) -> a meta.k8s.io/v1 Table.
-- opts.include: the TableOptions' includeObject, what each row's object is:
-- "Metadata" (the default: a PartialObjectMetadata), "Object" (the whole
-- object, which `kubectl get --sort-by` sorts on) or "None";
-- opts.headers = false: no columnDefinitions (null), as the API server
-- sends the rows of every watch event after the first
function M.table(r, objects, rv, cont, opts)
  opts = opts or {}
  local cols = columns_for(r)
  local defs = json.array()
  for i, c in ipairs(cols) do
    defs[i] = { name = c[1], type = c[2], format = c.format or "", description = c[1], priority = c.priority or 0 }
  end
  local rows = json.array()
  for i, o in ipairs(objects) do
    local cells = json.array()
    for j, c in ipairs(cols) do cells[j] = c[3](o) end
    local obj
    if opts.include == "Object" then
      obj = o
    elseif opts.include ~= "None" then
      obj = { kind = "PartialObjectMetadata", apiVersion = "meta.k8s.io/v1", metadata = o.metadata }
    end
    rows[i] = { cells = cells, object = obj }
  end
  return { kind = "Table", apiVersion = "meta.k8s.io/v1",
    metadata = { resourceVersion = rv, continue = cont },
    columnDefinitions = opts.headers == false and json.null or defs, rows = rows }
end

-- include_object(q) -> opts.include | nil, message: the includeObject query
-- parameter, refused as the API server refuses an unknown value
function M.include_object(q)
  local v = q.includeObject
  if v == nil or v == "" then return "Metadata" end
  if v == "None" or v == "Metadata" or v == "Object" then return v end
  return nil, string.format("unrecognized includeObject value: %q", v)
end

function M.wants_table(accept)
  return (accept or ""):find("as=Table", 1, true) ~= nil
end

return M
