-- sandbox.k8s.objects: the object store of one simulated cluster (its
-- etcd). Objects live in memory, indexed by resource, and are written
-- through to the store so a restarted sandbox finds them again. Every
-- change gets the next resourceVersion and goes to an event ring that
-- watches read; a watch from before the ring's start gets 410 Gone.
local core = require "hypd.core"
local json = require "hypd.json"
local log = require "hypd.log"
local merge = require "sandbox.k8s.merge"
local resources = require "sandbox.k8s.resources"
local store = require "hypd.store"
local sys = require "hypd.sys"
local task = require "hypd.task"

local M = {}
M.RING = 20000

local clusters = {}

local function rfc3339(t) return os.date("!%Y-%m-%dT%H:%M:%SZ", math.floor(t)) end
M.rfc3339 = rfc3339

local function uuid()
  local b = { sys.random_bytes(16):byte(1, 16) }
  b[7] = (b[7] & 0x0f) | 0x40
  b[9] = (b[9] & 0x3f) | 0x80
  local h = {}
  for i, x in ipairs(b) do h[i] = string.format("%02x", x) end
  local s = table.concat(h)
  return s:sub(1, 8) .. "-" .. s:sub(9, 12) .. "-" .. s:sub(13, 16) .. "-" .. s:sub(17, 20) .. "-" .. s:sub(21)
end
M.uuid = uuid

-- status(code, reason, message [, details]) -> a Kubernetes Status failure
function M.status(code, reason, message, details)
  return { kind = "Status", apiVersion = "v1", metadata = json.object(), status = "Failure",
    message = message, reason = reason, details = details, code = code }
end

local function gr(r) return r.group .. "/" .. r.resource end

local Cluster = {}
Cluster.__index = Cluster

local function prefix(region, name) return string.format("sandbox-k8s/%s/%s/", region, name) end

local function okey(r, ns, name) return gr(r) .. "/" .. (ns or "") .. "/" .. name end

-- cluster(region, name) -> the store of that cluster, loaded on first use
function M.cluster(region, name)
  local id = region .. "/" .. name
  local cl = clusters[id]
  if cl then return cl end
  cl = setmetatable({ region = region, name = name, prefix = prefix(region, name), reg = resources.registry(),
    objs = {}, ring = {}, ring_first = 1, ring_last = 0, sig = task.signal(), hooks = {}, sorted_by = {},
    texts = setmetatable({}, { __mode = "k" }) }, Cluster)
  clusters[id] = cl
  cl.rv = tonumber(store.get(cl.prefix .. "_rv") or 0) or 0
  cl.ring_floor = cl.rv -- changes before this are not in the ring
  local all = assert(store.list(cl.prefix .. "o/"))
  local crds = {}
  for _, obj in pairs(all) do
    if obj.kind == "CustomResourceDefinition" then crds[#crds + 1] = obj end
  end
  for _, crd in ipairs(crds) do
    for _, r in ipairs(resources.from_crd(crd)) do cl.reg:add(r) end
  end
  for key, obj in pairs(all) do
    local g, res = key:sub(#cl.prefix + 3):match("^([^/]*)/([^/]+)/")
    cl:index(g .. "/" .. res)[(obj.metadata.namespace or "") .. "/" .. obj.metadata.name] = obj
  end
  return cl
end

-- forget(region, name): drops a deleted cluster's objects
function M.forget(region, name)
  local id = region .. "/" .. name
  local cl = clusters[id]
  if cl then cl.sig:fire(); cl.gone = true end
  clusters[id] = nil
  local p = prefix(region, name)
  for key in pairs(assert(store.list(p))) do store.delete(key) end
end

function Cluster:index(key)
  local t = self.objs[key]
  if not t then t = {}; self.objs[key] = t end
  return t
end

function Cluster:get(r, ns, name)
  return self:index(gr(r))[(r.namespaced and ns or "") .. "/" .. name]
end

local function before(a, b)
  local na, nb = a.metadata.namespace or "", b.metadata.namespace or ""
  if na ~= nb then return na < nb end
  return a.metadata.name < b.metadata.name
end

-- locate(arr, ns, name) -> the index of the first object of the sorted
-- array arr that does not sort before (ns, name) (binary search)
local function locate(arr, ns, name)
  local lo, hi = 1, #arr + 1
  while lo < hi do
    local mid = (lo + hi) // 2
    local m = arr[mid].metadata
    local mns = m.namespace or ""
    if mns < ns or (mns == ns and m.name < name) then lo = mid + 1 else hi = mid end
  end
  return lo
end

-- resort(key, etype, obj): keeps the sorted array of a resource (when there
-- is one) in order through a change: a binary search and one insert, swap
-- or remove, not a sort of every object
function Cluster:resort(key, etype, obj)
  local arr = self.sorted_by[key]
  if not arr then return end
  local ns, name = obj.metadata.namespace or "", obj.metadata.name
  local i = locate(arr, ns, name)
  local at = arr[i]
  local here = at and (at.metadata.namespace or "") == ns and at.metadata.name == name
  if etype == "DELETED" then
    if here then table.remove(arr, i) end
  elseif here then
    arr[i] = obj
  else
    table.insert(arr, i, obj)
  end
end

-- sorted(r) -> every object of r sorted by namespace and name: one array,
-- sorted once and kept in order through every change (resort), shared by
-- every list (callers must not change it), so a paginated list of 60,000
-- pods sorts once, not once a page
function Cluster:sorted(r)
  local key = gr(r)
  local out = self.sorted_by[key]
  if out then return out end
  out = {}
  for _, obj in pairs(self:index(key)) do out[#out + 1] = obj end
  table.sort(out, before)
  self.sorted_by[key] = out
  return out
end

-- list(r [, ns]) -> objects sorted by namespace and name (a new array)
function Cluster:list(r, ns)
  local out = {}
  for _, obj in ipairs(self:sorted(r)) do
    if not ns or not r.namespaced or obj.metadata.namespace == ns then out[#out + 1] = obj end
  end
  return out
end

-- text(obj) -> obj's JSON: the text its last commit encoded, kept (weakly,
-- by object) so lists and watches send it without encoding it again;
-- encoded here for an object no commit has seen (one loaded from the store)
function Cluster:text(obj)
  local t = self.texts[obj]
  if t and t.rv == obj.metadata.resourceVersion then return t.text end
  local text = json.encode(obj)
  self.texts[obj] = { rv = obj.metadata.resourceVersion, text = text }
  return text
end

-- every object of every resource (garbage collection, namespaces)
function Cluster:each(fn)
  local seen = {}
  for _, r in ipairs(self.reg.list) do
    if not seen[gr(r)] then
      seen[gr(r)] = true
      for _, obj in pairs(self:index(gr(r))) do fn(r, obj) end
    end
  end
end

function Cluster.now() return rfc3339(core.now()) end

-- the one place a change happens: persists, bumps resourceVersion, records
-- the event and wakes watchers and controllers
function Cluster:commit(etype, r, obj)
  self.rv = self.rv + 1
  obj.metadata.resourceVersion = tostring(self.rv)
  local key = okey(r, r.namespaced and obj.metadata.namespace or nil, obj.metadata.name)
  local ikey = (r.namespaced and obj.metadata.namespace or "") .. "/" .. obj.metadata.name
  store.transaction(function()
    if etype == "DELETED" then
      store.delete(self.prefix .. "o/" .. key)
    else
      store.put(self.prefix .. "o/" .. key, obj)
    end
    store.put(self.prefix .. "_rv", self.rv)
  end)
  if etype == "DELETED" then
    self:index(gr(r))[ikey] = nil
  else
    self:index(gr(r))[ikey] = obj
  end
  self:resort(gr(r), etype, obj)
  local text = json.encode(obj)
  if etype ~= "DELETED" then self.texts[obj] = { rv = obj.metadata.resourceVersion, text = text } end
  self.ring_last = self.ring_last + 1
  self.ring[self.ring_last] = { rv = self.rv, type = etype, gr = gr(r), ns = obj.metadata.namespace,
    obj = obj, text = text }
  while self.ring_last - self.ring_first + 1 > M.RING do
    self.ring_floor = self.ring[self.ring_first].rv
    self.ring[self.ring_first] = nil
    self.ring_first = self.ring_first + 1
  end
  if r.kind == "CustomResourceDefinition" then
    if etype == "DELETED" then self:unserve_crd(obj) else self:serve_crd(obj) end
  end
  for _, h in ipairs(self.hooks) do
    local ok, err = pcall(h, etype, r, obj)
    if not ok then log.error("sandbox", "k8s controller hook failed: %s", tostring(err)) end
  end
  self.sig:fire()
  return obj
end

-- events_after(rv) -> iterator over ring entries with rv > given | nil when
-- the ring no longer reaches back that far (410 Gone)
function Cluster:events_after(rv)
  if rv < self.ring_floor then return nil end
  local i = self.ring_first
  while i <= self.ring_last and self.ring[i].rv <= rv do i = i + 1 end
  return function()
    local e = self.ring[i]
    if e then i = i + 1 end
    return e
  end
end

-- hook(fn(etype, r, obj)): a controller's view of every change
function Cluster:hook(fn) self.hooks[#self.hooks + 1] = fn end

local function fail(code, reason, message, details)
  return nil, M.status(code, reason, message, details)
end

local function qualified(r) return r.group == "" and r.resource or r.resource .. "." .. r.group end

-- details(r, name) -> a Status's details naming one object of r
local function details(r, name)
  return { name = name, group = r.group ~= "" and r.group or nil, kind = r.resource }
end
M.details = details

-- not_found(r, name) -> the 404 Status for one object of r
function M.not_found(r, name)
  return M.status(404, "NotFound", string.format("%s %q not found", qualified(r), tostring(name)), details(r, name))
end

-- the kinds whose names are path segments (RBAC's: "system:node" is a
-- ClusterRole); every other name is an RFC 1123 subdomain
local PATH_NAMED = { ["rbac.authorization.k8s.io"] = true }

-- name_refused(r, name) -> why the API server refuses the name, or nil
local function name_refused(r, name)
  if PATH_NAMED[r.group] then
    if name == "." or name == ".." then return "may not be '" .. name .. "'" end
    for _, c in ipairs { "/", "%" } do
      if name:find(c, 1, true) then return "may not contain '" .. c .. "'" end
    end
  elseif #name > 253 or not name:match("^[a-z0-9.-]+$") or not name:match("^[a-z0-9]") or not name:match("[a-z0-9]$") then
    return "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must " ..
      "start and end with an alphanumeric character"
  end
end

-- create(r, obj [, opts]) -> stored object | nil, Status. opts: manager
-- (recorded in managedFields), dry (dryRun=All: validated and filled in as
-- a create is, then answered without a resourceVersion and never stored)
function Cluster:create(r, obj, opts)
  opts = opts or {}
  local md = obj.metadata or json.object()
  obj.metadata = md
  if (md.name == nil or md.name == "") and md.generateName then
    md.name = md.generateName .. sys.random_bytes(3):gsub(".", function(c)
      return string.format("%x", c:byte() % 36 < 26 and 10 + c:byte() % 26 or c:byte() % 10)
    end):sub(1, 5)
  end
  if type(md.name) ~= "string" or md.name == "" then
    return fail(422, "Invalid", qualified(r) .. " \"\" is invalid: metadata.name: Required value: name or " ..
      "generateName is required", { kind = r.resource, causes = { { reason = "FieldValueRequired",
      message = "Required value: name or generateName is required", field = "metadata.name" } } })
  end
  local why = name_refused(r, md.name)
  if why then
    return fail(422, "Invalid", string.format("%s %q is invalid: metadata.name: Invalid value: %q: %s", r.kind, md.name,
      md.name, why), { name = md.name, kind = r.kind,
      causes = { { reason = "FieldValueInvalid", message = "Invalid value", field = "metadata.name" } } })
  end
  if r.namespaced then
    md.namespace = md.namespace or "default"
    local nsr = self.reg:find("", "v1", "namespaces")
    if not self:get(nsr, nil, md.namespace) then
      return fail(404, "NotFound", string.format("namespaces %q not found", md.namespace),
        { name = md.namespace, kind = "namespaces" })
    end
  else
    md.namespace = nil
  end
  if self:get(r, md.namespace, md.name) then
    return fail(409, "AlreadyExists", string.format("%s %q already exists", qualified(r), md.name),
      details(r, md.name))
  end
  obj.apiVersion, obj.kind = resources.gv(r), r.kind
  md.uid = uuid()
  md.creationTimestamp = self:now()
  md.generation = 1
  md.resourceVersion = nil
  md.deletionTimestamp = nil
  if opts.manager then merge.track(nil, obj, opts.manager, "Update", md.creationTimestamp) end
  if r.kind == "Namespace" then
    obj.spec = obj.spec or { finalizers = { "kubernetes" } }
    obj.status = { phase = "Active" }
  end
  local refused = require("sandbox.k8s.admit").create(self, r, obj)
  if refused then return nil, refused end
  if opts.dry then return obj end
  self:commit("ADDED", r, obj)
  if r.kind == "Namespace" then
    self:root_ca(md.name)
    -- the service account controller's "default" in every namespace
    local sa = self.reg:find("", "v1", "serviceaccounts")
    if not self:get(sa, md.name, "default") then self:create(sa, { metadata = { name = "default", namespace = md.name } }) end
  end
  return obj
end

-- spec_changed(a, b): generation moves only when more than metadata/status changes
local function spec_changed(a, b)
  for k, v in pairs(b) do
    if k ~= "metadata" and k ~= "status" and not merge.equal(v, a[k]) then return true end
  end
  for k in pairs(a) do
    if k ~= "metadata" and k ~= "status" and b[k] == nil then return true end
  end
  return false
end

-- update(r, new [, opts]) -> stored | nil, Status. opts: manager, subresource
-- ("status": only status changes), check_rv (the caller's resourceVersion
-- must be current), dry (dryRun=All: the object as it would be, with the
-- current resourceVersion, never stored). An update that changes nothing
-- keeps resourceVersion.
function Cluster:update(r, new, opts)
  opts = opts or {}
  local md = new.metadata or {}
  local old = self:get(r, md.namespace, md.name)
  if not old then
    return nil, M.not_found(r, md.name)
  end
  if opts.check_rv and md.resourceVersion and md.resourceVersion ~= old.metadata.resourceVersion then
    return fail(409, "Conflict", string.format("Operation cannot be fulfilled on %s %q: the object has been " ..
      "modified; please apply your changes to the latest version and try again", qualified(r), md.name),
      details(r, md.name))
  end
  local out
  if opts.subresource == "status" then
    out = merge.copy(old)
    out.status = merge.copy(new.status)
  else
    out = merge.copy(new)
    out.status = r.status and merge.copy(old.status) or out.status
    -- the server owns these
    for _, k in ipairs { "uid", "creationTimestamp", "generation", "deletionTimestamp", "namespace" } do
      out.metadata[k] = old.metadata[k]
    end
    if not out.metadata.managedFields then out.metadata.managedFields = old.metadata.managedFields end
    if spec_changed(old, out) then out.metadata.generation = (old.metadata.generation or 1) + 1 end
  end
  out.apiVersion, out.kind = resources.gv(r), r.kind
  out.metadata.resourceVersion = old.metadata.resourceVersion
  if opts.subresource ~= "status" then require("sandbox.k8s.admit").update(self, r, old, out) end
  if opts.manager then merge.track(old, out, opts.manager, "Update", self:now()) end
  if merge.equal(out, old) then return old end
  if opts.dry then return out end
  return self:commit("MODIFIED", r, out)
end

-- delete(r, ns, name [, opts]) -> the deleted object | nil, Status. opts:
-- propagation ("Background" when absent, "Foreground", "Orphan"), dry
-- (dryRun=All: the object as it would be marked for deletion; nothing is
-- deleted, no dependent either)
function Cluster:delete(r, ns, name, opts)
  opts = opts or {}
  local propagation = opts.propagation
  local obj = self:get(r, ns, name)
  if not obj then
    return nil, M.not_found(r, name)
  end
  obj = merge.copy(obj)
  obj.metadata.deletionTimestamp = self:now()
  if opts.dry then return obj end
  self:commit("DELETED", r, obj)
  local uid = obj.metadata.uid
  -- garbage collection: dependents go too (Background, Foreground) or lose
  -- their owner reference (Orphan); a namespace takes everything in it
  local doomed = {}
  self:each(function(dr, d)
    local owned = false
    for _, o in ipairs(d.metadata.ownerReferences or {}) do owned = owned or o.uid == uid end
    if owned or (r.kind == "Namespace" and dr.namespaced and d.metadata.namespace == name) then
      doomed[#doomed + 1] = { dr, d, owned }
    end
  end)
  for _, x in ipairs(doomed) do
    local dr, d, owned = x[1], x[2], x[3]
    if owned and propagation == "Orphan" then
      local refs = json.array()
      for _, o in ipairs(d.metadata.ownerReferences) do if o.uid ~= uid then refs[#refs + 1] = o end end
      local c = merge.copy(d)
      c.metadata.ownerReferences = #refs > 0 and refs or nil
      self:update(dr, c)
    elseif self:get(dr, d.metadata.namespace, d.metadata.name) then
      self:delete(dr, d.metadata.namespace, d.metadata.name, { propagation = propagation })
    end
  end
  return obj
end

-- root_ca(ns): the kube-root-ca.crt ConfigMap the API server publishes in
-- every namespace (once the cluster's CA is known)
function Cluster:root_ca(ns)
  if not self.ca_pem then return end
  local cms = self.reg:find("", "v1", "configmaps")
  if not self:get(cms, ns, "kube-root-ca.crt") then
    self:create(cms, { metadata = { name = "kube-root-ca.crt", namespace = ns,
      annotations = { ["kubernetes.io/description"] = "Contains a CA bundle that can be used to verify the " ..
        "kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc." } },
      data = { ["ca.crt"] = self.ca_pem } })
  end
end

-- serve_crd(obj): a CustomResourceDefinition starts serving its resources
function Cluster:serve_crd(crd)
  for _, r in ipairs(resources.from_crd(crd)) do self.reg:add(r) end
end

function Cluster:unserve_crd(crd)
  for _, r in ipairs(resources.from_crd(crd)) do
    for _, obj in ipairs(self:list(r)) do self:delete(r, obj.metadata.namespace, obj.metadata.name) end
    self.reg:remove(r.group, r.version, r.resource)
  end
end

M.qualified = qualified
return M
