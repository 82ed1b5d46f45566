-- sandbox.k8s.merge: the three ways the API server changes an object from a
-- patch: JSON merge patch (RFC 7386), strategic merge patch (lists of
-- named items merge by name) and server-side apply (field ownership per
-- manager, recorded as managedFields in the FieldsV1 format).
local json = require "hypd.json"

local M = {}

-- decoded JSON is marked; tables built in Lua count as lists when they have [1]
local function is_list(v)
  return type(v) == "table" and (json.is_array(v) or (not json.is_object(v) and v[1] ~= nil))
end
local function is_map(v) return type(v) == "table" and not is_list(v) end
M.is_list, M.is_map = is_list, is_map

function M.copy(v)
  if type(v) ~= "table" then return v end
  local out = {}
  for k, x in pairs(v) do out[k] = M.copy(x) end
  return setmetatable(out, getmetatable(v))
end

function M.equal(a, b)
  if type(a) ~= type(b) then return false end
  if type(a) ~= "table" then return a == b end
  if is_list(a) ~= is_list(b) then return false end
  for k, v in pairs(a) do
    if not M.equal(v, b[k]) then return false end
  end
  for k in pairs(b) do
    if a[k] == nil then return false end
  end
  return true
end

-- RFC 7386: maps merge, null deletes, everything else replaces
function M.merge_patch(target, patch)
  if not is_map(patch) then return M.copy(patch) end
  local out = is_map(target) and M.copy(target) or json.object()
  for k, v in pairs(patch) do
    if v == json.null then
      out[k] = nil
    else
      out[k] = M.merge_patch(out[k], v)
    end
  end
  return out
end

-- the patch merge keys of the Kubernetes types, by field name (lists of
-- other maps with a `name` merge by name; the rest are atomic)
local MERGE_KEYS = { ports = "containerPort", volumeMounts = "mountPath", volumeDevices = "devicePath",
  hostAliases = "ip", conditions = "type", imagePullSecrets = "name", containers = "name",
  initContainers = "name", ephemeralContainers = "name", volumes = "name", env = "name" }
M.MERGE_KEYS = MERGE_KEYS

-- key_of(field, list) -> the merge key of a list field, or nil (atomic).
-- Service ports have no containerPort: they merge by port.
local function key_of(field, list)
  if not is_list(list) or #list == 0 then return nil end
  local key = MERGE_KEYS[field]
  if key == "containerPort" and is_map(list[1]) and list[1].containerPort == nil then key = "port" end
  key = key or "name"
  for _, x in ipairs(list) do
    if not is_map(x) or x[key] == nil or type(x[key]) == "table" then return nil end
  end
  return key
end
M.key_of = key_of

local function strategic(target, patch)
  if not is_map(patch) then return M.copy(patch) end
  if patch["$patch"] == "replace" then
    local out = M.copy(patch)
    out["$patch"] = nil
    return out
  end
  local out = is_map(target) and M.copy(target) or json.object()
  for k, v in pairs(patch) do
    if type(k) == "string" and k:sub(1, 1) == "$" then
      -- directives ($setElementOrder/..., $retainKeys, $deleteFromPrimitiveList/...) change order only
      local field = k:match("^%$deleteFromPrimitiveList/(.+)$")
      if field and is_list(out[field]) then
        local drop, kept = {}, json.array()
        for _, x in ipairs(v) do drop[x] = true end
        for _, x in ipairs(out[field]) do if not drop[x] then kept[#kept + 1] = x end end
        out[field] = kept
      end
    elseif v == json.null then
      out[k] = nil
    elseif is_list(v) and is_list(out[k]) and (key_of(k, v) or key_of(k, out[k])) then
      local key = key_of(k, v) or key_of(k, out[k])
      local merged, index = json.array(), {}
      for i, x in ipairs(out[k]) do merged[i] = M.copy(x); index[x[key]] = i end
      for _, x in ipairs(v) do
        local i = index[x[key]]
        if x["$patch"] == "delete" then
          if i then merged[i] = false end
        elseif i then
          merged[i] = strategic(merged[i], x)
        else
          merged[#merged + 1] = strategic(nil, x)
          index[x[key]] = #merged
        end
      end
      local kept = json.array()
      for _, x in ipairs(merged) do if x then kept[#kept + 1] = x end end
      out[k] = kept
    else
      out[k] = strategic(out[k], v)
    end
  end
  return out
end
M.strategic = strategic

-- server-side apply --------------------------------------------------------

local SKIP_TOP = { apiVersion = true, kind = true, status = true }
local SKIP_META = { name = true, namespace = true, managedFields = true, resourceVersion = true, uid = true,
  creationTimestamp = true, generation = true, deletionTimestamp = true }

-- fieldset(obj) -> FieldsV1 tree of what obj sets
local function fieldset(v, top, meta)
  local out = json.object()
  for k, x in pairs(v) do
    if not (top and SKIP_TOP[k]) and not (meta and SKIP_META[k]) then
      local key = "f:" .. k
      if is_map(x) and next(x) ~= nil then
        -- a map left with nothing to own (metadata with only its name) is
        -- no field of the set, as in the API server's field sets
        local sub = fieldset(x, false, top and k == "metadata")
        if next(sub) ~= nil then out[key] = sub end
      elseif key_of(k, x) then
        local mk = key_of(k, x)
        local items = json.object()
        for _, item in ipairs(x) do
          local sub = fieldset(item, false, false)
          sub["."] = json.object()
          items["k:" .. json.encode { [mk] = item[mk] }] = sub
        end
        out[key] = items
      else
        out[key] = json.object()
      end
    end
  end
  return out
end
M.fieldset = function(obj) return fieldset(obj, true, false) end

-- leaves(tree) -> set of "/"-joined paths of owned leaves
local function leaves(tree, prefix, out)
  out = out or {}
  for k, sub in pairs(tree or {}) do
    if k ~= "." then
      local p = prefix and (prefix .. "\0" .. k) or k
      local n = 0
      for kk in pairs(sub) do if kk ~= "." then n = n + 1 end end
      if n == 0 then out[p] = true else leaves(sub, p, out) end
    end
  end
  return out
end

-- item_matches(x, seg) -> true when list item x is the one "k:{...}" names
local function item_matches(x, seg)
  local want = json.decode(seg:sub(3))
  if type(x) ~= "table" or type(want) ~= "table" then return false end
  for k, v in pairs(want) do
    if x[k] ~= v then return false end
  end
  return true
end

local function get_path(obj, path)
  local v = obj
  for seg in (path .. "\0"):gmatch("(.-)%z") do
    if type(v) ~= "table" then return nil end
    local f = seg:match("^f:(.*)$")
    if f then
      v = v[f]
    else
      local found
      for _, x in ipairs(v) do if item_matches(x, seg) then found = x end end
      v = found
    end
  end
  return v
end

-- removes the leaf at path (and the list item, for a keyed item's leaf)
local function remove_path(obj, path)
  local segs = {}
  for seg in (path .. "\0"):gmatch("(.-)%z") do segs[#segs + 1] = seg end
  local v = obj
  for i = 1, #segs - 1 do
    v = get_path(v, segs[i])
    if type(v) ~= "table" then return end
  end
  local last = segs[#segs]
  local f = last:match("^f:(.*)$")
  if f then
    v[f] = nil
  elseif is_list(v) then
    for i, x in ipairs(v) do
      if item_matches(x, last) then table.remove(v, i) break end
    end
  end
end

-- drop_field(tree, path) -> true when tree is left empty: removes a leaf
-- from a FieldsV1 tree, with the parents it leaves empty
local function drop_field(tree, path)
  local seg, rest = path:match("^(.-)%z(.*)$")
  seg = seg or path
  local sub = tree[seg]
  if type(sub) ~= "table" then return next(tree) == nil end
  if not rest or drop_field(sub, rest) then tree[seg] = nil end
  return next(tree) == nil
end

-- item_gone(path, kept, owned) -> the path of the keyed list item
-- ("k:{...}") holding path when no leaf of it is applied now (kept) or
-- owned by another manager: the item goes whole, its key fields with it
-- (leaf by leaf, an item would lose its key and keep the rest)
local function item_gone(path, kept, owned)
  local prefix
  for seg in (path .. "\0"):gmatch("(.-)%z") do
    prefix = prefix and (prefix .. "\0" .. seg) or seg
    if seg:sub(1, 2) == "k:" then
      local held = false
      for _, set in ipairs { kept, owned } do
        for q in pairs(set) do
          if q == prefix or q:sub(1, #prefix + 1) == prefix .. "\0" then held = true break end
        end
        if held then break end
      end
      if not held then return prefix end
    end
  end
end

local function managers(obj)
  return (obj and obj.metadata and obj.metadata.managedFields) or json.array()
end

-- csa_owned(live) -> set of the leaves kubectl's client-side apply last
-- applied (its annotation) that still hold the applied value: the fields a
-- switch to `kubectl apply --server-side` takes over without a conflict,
-- as the API server's lastAppliedManager allows
local LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
local function csa_owned(live)
  local text = live.metadata and live.metadata.annotations and live.metadata.annotations[LAST_APPLIED]
  local last = type(text) == "string" and json.decode(text)
  if type(last) ~= "table" then return {} end
  local owned = {}
  for p in pairs(leaves(M.fieldset(last))) do
    if M.equal(get_path(last, p), get_path(live, p)) then owned[p] = true end
  end
  return owned
end

-- path_string(path) -> a field path as structured-merge-diff prints it:
-- .spec.replicas, .spec.containers[name="web"].image, .spec.args[="x"]
function M.path_string(p)
  local out = {}
  for seg in (p .. "\0"):gmatch("(.-)%z") do
    local f, k, v = seg:match("^f:(.*)$"), seg:match("^k:(.*)$"), seg:match("^v:(.*)$")
    if f then
      out[#out + 1] = "." .. f
    elseif k then
      local key = json.decode(k)
      local names, parts = {}, {}
      for name in pairs(type(key) == "table" and key or {}) do names[#names + 1] = name end
      table.sort(names)
      for _, name in ipairs(names) do parts[#parts + 1] = name .. "=" .. json.encode(key[name]) end
      out[#out + 1] = "[" .. table.concat(parts, ",") .. "]"
    elseif v then
      out[#out + 1] = "[=" .. v .. "]"
    else
      out[#out + 1] = "." .. seg
    end
  end
  return table.concat(out)
end

-- apply(live|nil, applied, manager, force, now_text) -> new object | nil, conflicts
-- (the result carries updated managedFields; callers compare it with live)
function M.apply(live, applied, manager, force, now_text)
  local mine = M.fieldset(applied)
  local new_leaves = leaves(mine)
  local prev, others = nil, {}
  for _, m in ipairs(managers(live)) do
    if m.manager == manager and m.operation == "Apply" then
      prev = m
    else
      others[#others + 1] = m
    end
  end
  -- a conflict: a field another manager owns that this apply sets to another value
  local conflicts = {}
  for i, m in ipairs(live and others or {}) do
    for p in pairs(leaves(m.fieldsV1)) do
      if new_leaves[p] and not M.equal(get_path(live, p), get_path(applied, p)) then
        conflicts[#conflicts + 1] = { manager = m.manager, field = M.path_string(p), path = p, owner = i,
          who = m.operation == "Apply" and string.format("%q", m.manager)
            or string.format("%q using %s", m.manager, m.apiVersion or "v1") }
      end
    end
  end
  if #conflicts > 0 and not force then
    -- kubectl taking over from its own client-side apply forces the fields
    -- it applied before; any other conflict stands
    local left = {}
    local owned = manager == "kubectl" and csa_owned(live) or {}
    for _, c in ipairs(conflicts) do
      if not owned[c.path] then left[#left + 1] = c end
    end
    if #left > 0 then return nil, left end
  end
  local out = strategic(live or json.object(), applied)
  -- fields this manager set before and no longer sets go, unless another owns them
  if prev then
    local owned = {}
    for _, m in ipairs(others) do for p in pairs(leaves(m.fieldsV1)) do owned[p] = true end end
    for p in pairs(leaves(prev.fieldsV1)) do
      if not new_leaves[p] and not owned[p] then remove_path(out, item_gone(p, new_leaves, owned) or p) end
    end
  end
  -- the fields taken over (forced) leave their earlier owners, and an owner
  -- left with nothing leaves managedFields; live's entries are not touched
  local taken = {}
  for _, c in ipairs(conflicts) do
    taken[c.owner] = taken[c.owner] or { }
    taken[c.owner][#taken[c.owner] + 1] = c.path
  end
  local kept = json.array()
  for i, m in ipairs(others) do
    if taken[i] then
      m = M.copy(m)
      for _, p in ipairs(taken[i]) do drop_field(m.fieldsV1, p) end
    end
    if next(m.fieldsV1 or {}) ~= nil then kept[#kept + 1] = m end
  end
  local entry = { manager = manager, operation = "Apply", apiVersion = applied.apiVersion,
    time = now_text, fieldsType = "FieldsV1", fieldsV1 = mine }
  if prev and M.equal(prev.fieldsV1, mine) then entry.time = prev.time end
  kept[#kept + 1] = entry
  out.metadata = out.metadata or json.object()
  out.metadata.managedFields = kept
  return out
end

-- track(old|nil, new, manager, operation, now_text): records an Update
-- manager's fields on new (the API server does this for create, update
-- and patch)
function M.track(old, new, manager, operation, now_text)
  new.metadata = new.metadata or json.object()
  local list = json.array()
  local mine = M.fieldset(new)
  local found = false
  for _, m in ipairs(managers(old)) do
    if m.manager == manager and m.operation == operation then
      found = true
      local fields = M.merge_patch(m.fieldsV1, mine)
      list[#list + 1] = { manager = manager, operation = operation, apiVersion = new.apiVersion,
        time = M.equal(fields, m.fieldsV1) and m.time or now_text, fieldsType = "FieldsV1", fieldsV1 = fields }
    else
      list[#list + 1] = m
    end
  end
  if not found then
    list[#list + 1] = { manager = manager, operation = operation, apiVersion = new.apiVersion, time = now_text,
      fieldsType = "FieldsV1", fieldsV1 = mine }
  end
  new.metadata.managedFields = list
end

return M
