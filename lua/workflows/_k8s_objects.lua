-- _k8s_objects: Kubernetes objects as links of the managed features'
-- chains, made by server-side apply only when they are missing or differ.
--   get(conn, api_version, kind, name [, namespace]) -> obj | nil (also nil
--     when the API does not serve the kind yet: a CRD still to come)
--   ensure(ctx, conn, obj [, opts]) -> obj, action: found by name, hypd's
--     by its app.kubernetes.io/managed-by=hypd label (opts.shared: any
--     owner will do, and only its presence counts: a CRD), compared on the
--     fields the manifest gives (what the API server adds is not a
--     difference), applied when missing or different. A re-run whose
--     objects all match makes no Kubernetes write. With opts.family (a tool
--     family of _ownership) the object is labelled with it, and one of its
--     name that another family or anyone else made is a CONFLICT naming
--     the owner and the tool that manages it (never taken over)
--   absent(ctx, conn, api_version, kind, name [, namespace]) -> action, why
--     deleted (and waited for until gone) when it is hypd's; kept otherwise
--     (the delete tools refuse another family's first: _ownership.check)
--   claim(conn, objects, family [, opts]): before any write (and in a
--     plan), each object of that kind and name that exists must be the
--     family's (_ownership.check: a CONFLICT naming its owner otherwise);
--     objects may be stand-ins {apiVersion, kind, metadata = {name,
--     namespace}} for what a controller will make of the family's resource
--   view(obj, want) -> the part of obj that want's fields name
local O = require "_ownership"

local M = {}
M.MANAGED_BY = "app.kubernetes.io/managed-by"

local function missing(err)
  return type(err) == "table" and (err.code == "NotFound" or err.status == 404)
end

function M.get(conn, api_version, kind, name, ns)
  local obj, err = conn:get(api_version, kind, name, { namespace = ns })
  if obj then return obj end
  if missing(err) then return nil end
  error(err, 0)
end

-- view(live, want) -> live cut down to the keys want has (lists by position)
function M.view(live, want)
  if type(want) ~= "table" or type(live) ~= "table" then return live end
  local out = {}
  if want[1] ~= nil or (next(want) == nil and live[1] ~= nil) then
    for i, x in ipairs(live) do out[i] = want[i] ~= nil and M.view(x, want[i]) or x end
    return out
  end
  for k, w in pairs(want) do out[k] = M.view(live[k], w) end
  return out
end

local function copy(v) return hypd.json.decode(hypd.json.encode(v)) end

local function body(obj)
  local out = {}
  for k, v in pairs(obj) do
    if k ~= "apiVersion" and k ~= "kind" and k ~= "status" then out[k] = v end
  end
  out.metadata = { labels = obj.metadata.labels, annotations = obj.metadata.annotations }
  return out
end

local function owned(o)
  local v = ((o.metadata or {}).labels or {})[M.MANAGED_BY]
  if v == "hypd" then return true end
  return false, v and ("managed by " .. v .. ", not by hypd") or "not made by hypd"
end
M.owned = owned

function M.ensure(ctx, conn, obj, opts)
  opts = opts or {}
  local md = obj.metadata
  local ns = md.namespace
  local name = (ns and (ns .. "/") or "") .. md.name
  local own = not opts.shared and owned or nil
  if opts.family then
    O.label(obj, opts.family)
    own = O.owned(opts.family, { field = opts.field, cluster = type(ctx.state.eks) == "string" and ctx.state.eks,
      by = ctx.tool and ctx.tool.name })
  end
  local want = body(obj)
  return ctx:ensure { type = "k8s:" .. obj.kind:lower(), label = obj.kind, name = name, id = "uid",
    owned = own, field = opts.field,
    search = function()
      local o = M.get(conn, obj.apiVersion, obj.kind, md.name, ns)
      if o then o.uid = o.metadata.uid end
      return o
    end,
    fields = opts.shared and { kind = obj.kind } or nil,
    desired = not opts.shared and want or nil,
    current = function(live) return M.view(live, want) end,
    placeholder = function(id) return { uid = id, metadata = { name = md.name, namespace = ns } } end,
    create = function()
      local o = assert(conn:apply(copy(obj), { operation = ctx.op_id }))
      o.uid = o.metadata.uid
      return o
    end,
    update = function()
      local o = assert(conn:apply(copy(obj), { operation = ctx.op_id, force = true }))
      o.uid = o.metadata.uid
      return o
    end }
end

function M.claim(conn, objects, family, opts)
  for _, o in ipairs(objects) do
    local live = M.get(conn, o.apiVersion, o.kind, o.metadata.name, o.metadata.namespace)
    if live then
      live.kind = live.kind or o.kind
      O.check(live, family, opts)
    end
  end
end

function M.absent(ctx, conn, api_version, kind, name, ns)
  return ctx:absent { type = "k8s:" .. kind:lower(), label = kind, name = (ns and (ns .. "/") or "") .. name,
    find = function() return M.get(conn, api_version, kind, name, ns) end,
    owned = owned, every = 5, timeout = 10 * 60,
    delete = function() assert(conn:delete(api_version, kind, name, { namespace = ns })) end }
end

return M
