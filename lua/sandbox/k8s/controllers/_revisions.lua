-- sandbox.k8s.controllers._revisions: the ControllerRevisions
-- (apps/v1) a StatefulSet or DaemonSet keeps, one per pod template, as
-- their controllers write them: named <owner>-<hash>, labelled with the
-- owner's selector and controller-revision-hash, data a strategic merge
-- patch that puts the template back ({"spec":{"template":{"$patch":
-- "replace", ...}}}), revision numbered 1, 2, ... (a template come back
-- takes the next number). The oldest beyond spec.revisionHistoryLimit go.
-- kubectl rollout history and rollout undo of those kinds read them.
local ctl_ = require "sandbox.k8s.controllers._ctl"

local M = {}

-- sync(ctl, owner, name, hash_label): the revision of owner's current template
function M.sync(ctl, owner, name, hash_label)
  local cl = ctl.cl
  local cr = ctl:r("apps", "v1", "controllerrevisions")
  if not cr then return end
  local ns = owner.metadata.namespace
  local cur, others, maxrev = nil, {}, 0
  for _, r in ipairs(ctl_.children(ctl, cr, owner)) do
    if r.metadata.name == name then
      cur = r
    else
      others[#others + 1] = r
      maxrev = math.max(maxrev, tonumber(r.revision) or 0)
    end
  end
  if not cur then
    local sel = (owner.spec.selector or {}).matchLabels or ((owner.spec.template or {}).metadata or {}).labels or {}
    local labels = ctl_.copy(sel)
    labels["controller-revision-hash"] = hash_label
    local cause = (owner.metadata.annotations or {})["kubernetes.io/change-cause"]
    local template = ctl_.copy(owner.spec.template or {})
    template["$patch"] = "replace"
    cl:create(cr, { apiVersion = "apps/v1", kind = "ControllerRevision",
      metadata = { name = name, namespace = ns, labels = labels,
        annotations = cause and { ["kubernetes.io/change-cause"] = cause } or nil,
        ownerReferences = { ctl_.owner_ref(owner) } },
      data = { spec = { template = template } }, revision = maxrev + 1 })
  elseif (tonumber(cur.revision) or 0) <= maxrev then
    local c = ctl_.copy(cur)
    c.revision = maxrev + 1
    cl:update(cr, c)
  end
  table.sort(others, function(a, b) return (tonumber(a.revision) or 0) < (tonumber(b.revision) or 0) end)
  for i = 1, #others - (tonumber(owner.spec.revisionHistoryLimit) or 10) do
    cl:delete(cr, ns, others[i].metadata.name)
  end
end

return M
