-- sandbox.k8s.controllers.volumes: the PersistentVolume controller's
-- binder, for statically provisioned volumes (what the S3 and FSx CSI
-- drivers' static PersistentVolumes need). As kube-controller-manager does:
--
--   * a new PersistentVolume becomes Available (status.phase);
--   * a Pending claim is bound to the volume its spec.volumeName names, or
--     else to the smallest Available volume that fits (same
--     storageClassName, "" when unset, every requested access mode, at
--     least the requested storage, and a claimRef that is empty or names
--     this claim); binding sets the volume's claimRef (with the claim's
--     uid) and phase Bound, and the claim's volumeName, the annotations
--     pv.kubernetes.io/bind-completed (and bound-by-controller when the
--     controller chose the volume) and status {phase Bound, accessModes,
--     capacity};
--   * a claim that names a volume bound to another claim, or one too small,
--     stays Pending with a FailedBinding event; so does one no volume fits
--     (there is no dynamic provisioning here); one of an existing
--     StorageClass waits as for a provisioner (Normal WaitForFirstConsumer,
--     or ExternalProvisioning under Immediate binding);
--   * when its claim goes, a Retain volume is Released (its claimRef kept)
--     and a Delete volume is deleted; when its volume goes, a Bound claim is
--     Lost.
local ctl_ = require "sandbox.k8s.controllers._ctl"

local M = {}

local function pvr(ctl) return ctl:r("", "v1", "persistentvolumes") end
local function pvcr(ctl) return ctl:r("", "v1", "persistentvolumeclaims") end

local function class_of(spec) return spec.storageClassName or "" end

local function storage(where)
  return ctl_.quantity(((where or {}).storage))
end

local function modes_fit(pv, pvc)
  local have = {}
  for _, m in ipairs(pv.spec.accessModes or {}) do have[m] = true end
  for _, m in ipairs(pvc.spec.accessModes or {}) do
    if not have[m] then return false end
  end
  return true
end

-- fits(pv, pvc) -> true | false, why
local function fits(pv, pvc)
  if class_of(pv.spec) ~= class_of(pvc.spec) then
    return false, string.format("storageClassName %q does not match the claim's %q", class_of(pv.spec),
      class_of(pvc.spec))
  end
  if not modes_fit(pv, pvc) then return false, "the volume lacks a requested access mode" end
  local want = storage(((pvc.spec.resources or {}).requests))
  if storage(pv.spec.capacity) < want then return false, "the volume is smaller than the claim requests" end
  if (pv.spec.volumeMode or "Filesystem") ~= (pvc.spec.volumeMode or "Filesystem") then
    return false, "volumeMode differs"
  end
  return true
end

local function claimed_by_other(pv, pvc)
  local ref = pv.spec.claimRef
  if not ref then return false end
  if ref.namespace ~= pvc.metadata.namespace or ref.name ~= pvc.metadata.name then return true end
  return ref.uid ~= nil and ref.uid ~= pvc.metadata.uid
end

local function phase(obj) return (obj.status or {}).phase end

local function set_phase(ctl, r, obj, p)
  local st = ctl_.copy(obj.status or {})
  st.phase = p
  return ctl_.put_status(ctl, r, obj, st)
end

local function failed(ctl, pvc, message, etype, reason)
  local mem = ctl:memo("volumes")
  local k = ctl_.key(pvc)
  if mem[k] == message then return end -- said once, as the controller dedups its events
  mem[k] = message
  ctl_.event(ctl, pvc, etype or "Warning", reason or "FailedBinding", message, "persistentvolume-controller")
end

local function bind(ctl, pv, pvc, chosen)
  local cl = ctl.cl
  local v = ctl_.copy(pv)
  v.spec.claimRef = { kind = "PersistentVolumeClaim", namespace = pvc.metadata.namespace, name = pvc.metadata.name,
    uid = pvc.metadata.uid, apiVersion = "v1", resourceVersion = pvc.metadata.resourceVersion }
  v = cl:update(pvr(ctl), v) or v
  set_phase(ctl, pvr(ctl), v, "Bound")
  local c = ctl_.copy(pvc)
  c.spec.volumeName = pv.metadata.name
  c.metadata.annotations = c.metadata.annotations or {}
  c.metadata.annotations["pv.kubernetes.io/bind-completed"] = "yes"
  if chosen then c.metadata.annotations["pv.kubernetes.io/bound-by-controller"] = "yes" end
  c = cl:update(pvcr(ctl), c) or c
  ctl_.put_status(ctl, pvcr(ctl), c, { phase = "Bound", accessModes = ctl_.copy(pv.spec.accessModes),
    capacity = ctl_.copy(pv.spec.capacity) })
  ctl:memo("volumes")[ctl_.key(pvc)] = nil
end

ctl_.handlers.pvc = function(ctl, k)
  local cl = ctl.cl
  local ns, name = k:match("^([^/]*)/(.*)$")
  local pvc = cl:get(pvcr(ctl), ns, name)
  if not pvc or pvc.metadata.deletionTimestamp then return end
  pvc.spec = pvc.spec or {}
  local want = pvc.spec.volumeName
  if phase(pvc) == "Bound" then
    local pv = want and cl:get(pvr(ctl), nil, want)
    if not pv or claimed_by_other(pv, pvc) then
      set_phase(ctl, pvcr(ctl), pvc, "Lost")
      ctl_.event(ctl, pvc, "Warning", "ClaimLost", "Bound claim has lost its PersistentVolume. Data on the " ..
        "volume is lost!", "persistentvolume-controller")
    end
    return
  end
  if phase(pvc) == "Lost" then return end
  if phase(pvc) ~= "Pending" then pvc = set_phase(ctl, pvcr(ctl), pvc, "Pending") end
  if want and want ~= "" then
    local pv = cl:get(pvr(ctl), nil, want)
    if not pv then
      return failed(ctl, pvc, "volume \"" .. want .. "\" not found")
    end
    if claimed_by_other(pv, pvc) then
      return failed(ctl, pvc, "volume \"" .. want .. "\" already bound to a different claim.")
    end
    local ok, why = fits(pv, pvc)
    if not ok then return failed(ctl, pvc, "Cannot bind to requested volume \"" .. want .. "\": " .. why) end
    return bind(ctl, pv, pvc, false)
  end
  local best
  for _, pv in ipairs(cl:list(pvr(ctl))) do
    local p = phase(pv)
    if (p == "Available" or p == nil or p == "Pending") and not pv.metadata.deletionTimestamp and
        not claimed_by_other(pv, pvc) and fits(pv, pvc) then
      -- a volume pre-bound to this claim wins; then the smallest
      local pre = pv.spec.claimRef ~= nil
      if not best or (pre and not best.pre) or (pre == best.pre and
          storage(pv.spec.capacity) < storage(best.pv.spec.capacity)) then
        best = { pv = pv, pre = pre }
      end
    end
  end
  if not best then
    if class_of(pvc.spec) == "" then
      return failed(ctl, pvc, "no persistent volumes available for this claim and no storage class is set")
    end
    local sc = ctl.cl:get(ctl:r("storage.k8s.io", "v1", "storageclasses"), nil, class_of(pvc.spec))
    if not sc then
      return failed(ctl, pvc, "storageclass.storage.k8s.io \"" .. class_of(pvc.spec) .. "\" not found")
    end
    -- a class of a provisioner: the claim waits (nothing here provisions volumes)
    if sc.volumeBindingMode == "WaitForFirstConsumer" then
      return failed(ctl, pvc, "waiting for first consumer to be created before binding", "Normal",
        "WaitForFirstConsumer")
    end
    return failed(ctl, pvc, string.format("Waiting for a volume to be created either by the external provisioner " ..
      "'%s' or manually by the system administrator. If volume creation is delayed, please verify that the " ..
      "provisioner is running and correctly registered.", sc.provisioner or ""), "Normal", "ExternalProvisioning")
  end
  bind(ctl, best.pv, pvc, true)
end

ctl_.handlers.pv = function(ctl, name)
  local cl = ctl.cl
  local pv = cl:get(pvr(ctl), nil, name)
  if not pv or pv.metadata.deletionTimestamp then return end
  local ref = pv.spec and pv.spec.claimRef
  local p = phase(pv)
  if not ref then
    if p ~= "Available" then set_phase(ctl, pvr(ctl), pv, "Available") end
    -- a claim waiting for any volume may fit this one
    for _, c in ipairs(cl:list(pvcr(ctl))) do
      if phase(c) ~= "Bound" and phase(c) ~= "Lost" then ctl:enqueue("pvc", ctl_.key(c)) end
    end
    return
  end
  local pvc = cl:get(pvcr(ctl), ref.namespace, ref.name)
  if pvc and ref.uid and pvc.metadata.uid ~= ref.uid then pvc = nil end -- a new claim of the same name
  if pvc then
    if p ~= "Bound" then
      if p == nil then set_phase(ctl, pvr(ctl), pv, "Available") end
      ctl:enqueue("pvc", ctl_.key(pvc)) -- the claim binds it
    end
    return
  end
  if not ref.uid then -- pre-bound to a claim that does not exist yet
    if p ~= "Available" then set_phase(ctl, pvr(ctl), pv, "Available") end
    return
  end
  -- its claim is gone
  if (pv.spec.persistentVolumeReclaimPolicy or "Retain") == "Delete" then
    cl:delete(pvr(ctl), nil, name)
  elseif p ~= "Released" and p ~= "Failed" then
    set_phase(ctl, pvr(ctl), pv, "Released")
  end
end

function M.watch(ctl, etype, r, obj)
  if r.group ~= "" then return end
  if r.kind == "PersistentVolume" then
    if etype ~= "DELETED" then ctl:enqueue("pv", obj.metadata.name) end
    local ref = obj.spec and obj.spec.claimRef
    if ref and ref.namespace and ref.name then ctl:enqueue("pvc", ref.namespace .. "/" .. ref.name) end
  elseif r.kind == "PersistentVolumeClaim" then
    if etype ~= "DELETED" then
      ctl:enqueue("pvc", ctl_.key(obj))
    else
      ctl:memo("volumes")[ctl_.key(obj)] = nil
      local v = obj.spec and obj.spec.volumeName
      if v and v ~= "" then ctl:enqueue("pv", v) end
    end
  end
end

function M.start(ctl)
  for _, pv in ipairs(ctl.cl:list(pvr(ctl))) do ctl:enqueue("pv", pv.metadata.name) end
  for _, c in ipairs(ctl.cl:list(pvcr(ctl))) do ctl:enqueue("pvc", ctl_.key(c)) end
end

return M
