-- sandbox.k8s.api: the Kubernetes REST API of one simulated cluster:
-- discovery, OpenAPI v3, get/list/watch, create, update, the four patch
-- types, delete (with garbage collection), status subresources and pod
-- logs; every write also as a dry run (dryRun=All). handle(cl, req, user)
-- -> {status, headers, body} | {status, headers, stream = fn(w)};
-- authentication happens before (sandbox.k8s).
local discovery = require "sandbox.k8s.discovery"
local disruption = require "sandbox.k8s.controllers.disruption"
local heartbeats = require "sandbox.k8s.heartbeats"
local json = require "hypd.json"
local merge = require "sandbox.k8s.merge"
local metrics = require "sandbox.k8s.metrics"
local objects = require "sandbox.k8s.objects"
local pods = require "sandbox.k8s.logs"
local protobuf = require "sandbox.k8s.protobuf"
local portforward = require "sandbox.k8s.portforward"
local proxy = require "sandbox.k8s.proxy"
local resources = require "sandbox.k8s.resources"
local select = require "sandbox.k8s.select"
local tbl = require "sandbox.k8s.table"
local field_rules = require "sandbox.k8s.field_rules"
local structural = require "sandbox.k8s.structural"
local typed = require "sandbox.k8s.typed"
local validate = require "sandbox.k8s.validate"
local core = require "hypd.core"
local sys = require "hypd.sys"

local M = {}
local STREAMS, refuse_stream, rules_review, token_request, evict

local JSON = { ["content-type"] = "application/json" }
M.BOOKMARK_EVERY = 60 -- seconds between BOOKMARK events on a quiet watch, as the API server paces them

local function reply(code, obj) return { status = code, headers = JSON, body = json.encode(obj) } end

-- warned(resp, warnings) -> resp with a Warning header (RFC 7234, code 299,
-- as the API server sends them; kubectl prints each as "Warning: ...")
local function warned(resp, warnings)
  if #warnings == 0 then return resp end
  local parts = {}
  for i, w in ipairs(warnings) do parts[i] = '299 - "' .. w:gsub('[\\"]', "\\%0") .. '"' end
  local h = {}
  for k, v in pairs(resp.headers) do h[k] = v end
  h.warning = table.concat(parts, ", ")
  resp.headers = h
  return resp
end
local function failure(st) return reply(st.code, st) end
local function fail(code, reason, message, details)
  return failure(objects.status(code, reason, message, details))
end

local function unescape(s)
  return (s:gsub("+", " "):gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
end

local function parse_query(q)
  local out = {}
  for pair in (q or ""):gmatch("[^&]+") do
    local k, v = pair:match("^([^=]*)=?(.*)$")
    out[unescape(k)] = unescape(v)
  end
  return out
end

local function truthy(v) return v == "true" or v == "1" end

-- values(query, key) -> every value of a repeated query parameter, in order
local function values(query, key)
  local out = {}
  for pair in (query or ""):gmatch("[^&]+") do
    local k, v = pair:match("^([^=]*)=?(.*)$")
    if unescape(k) == key then out[#out + 1] = unescape(v) end
  end
  return out
end

local function go_quote(s)
  return '"' .. s:gsub('[\\"]', "\\%0"):gsub("%c", function(c) return string.format("\\x%02x", c:byte()) end) .. '"'
end

-- dry_run(list, kind) -> true | false | nil, Status: the dryRun option of a
-- write (CreateOptions, UpdateOptions, PatchOptions, DeleteOptions). "All"
-- is the only value there is; anything else is refused before the request
-- touches an object, as the API server's ValidateDryRun does (422 Invalid)
local function dry_run(list, kind)
  if #list == 0 then return false end
  for _, v in ipairs(list) do
    if v ~= "All" then
      local quoted = {}
      for i, x in ipairs(list) do quoted[i] = go_quote(x) end
      local why = "Unsupported value: []string{" .. table.concat(quoted, ", ") .. "}: supported values: \"All\""
      return nil, objects.status(422, "Invalid", kind .. '.meta.k8s.io "" is invalid: dryRun: ' .. why,
        { group = "meta.k8s.io", kind = kind, causes = { { reason = "FieldValueNotSupported", message = why,
          field = "dryRun" } } })
    end
  end
  return true
end

-- route(path) -> {group, version, ns, resource, name, sub} | {discovery = ...}
local function route(path)
  local segs = {}
  for s in path:gmatch("[^/]+") do segs[#segs + 1] = unescape(s) end
  local group, version, i
  if segs[1] == "api" then
    if #segs == 1 then return { discovery = "api" } end
    group, version, i = "", segs[2], 3
  elseif segs[1] == "apis" then
    if #segs == 1 then return { discovery = "apis" } end
    if #segs == 2 then return { discovery = "group", group = segs[2] } end
    group, version, i = segs[2], segs[3], 4
  else
    return nil
  end
  if not segs[i] then return { discovery = "resources", group = group, version = version } end
  local rt = { group = group, version = version }
  if segs[i] == "namespaces" and (segs[i + 2] == "status" or segs[i + 2] == "finalize") and not segs[i + 3] then
    rt.resource, rt.name, rt.sub = "namespaces", segs[i + 1], segs[i + 2]
    return rt
  end
  if segs[i] == "namespaces" and segs[i + 2] then
    rt.ns, i = segs[i + 1], i + 2
  end
  rt.resource, rt.name, rt.sub = segs[i], segs[i + 1], segs[i + 2]
  if segs[i + 3] then return nil end
  return rt
end

local PROTOBUF = "application/vnd.kubernetes.protobuf"

-- decode_body(req) -> the request's object | nil, Status: JSON (or YAML's
-- JSON subset) and, for the built-in kinds, Kubernetes protobuf
-- (sandbox.k8s.protobuf); a protobuf body it cannot decode (a custom
-- resource, a kind without a descriptor) is 415, as the API server answers
-- for a media type a resource does not take
local function decode_body(req)
  local ctype = (req.headers["content-type"] or ""):match("^([^;%s]+)") or ""
  if ctype == PROTOBUF then
    local obj, why = protobuf.decode(req.body or "")
    if not obj then
      return nil, objects.status(415, "UnsupportedMediaType", "the body of the request was in an unknown format - " ..
        "accepted media types include: application/json, application/yaml (" .. tostring(why) .. ")")
    end
    return obj
  end
  local obj, err = json.decode(req.body or "")
  if type(obj) ~= "table" then
    return nil, objects.status(400, "BadRequest", "the body of the request was in an unknown format - accepted " ..
      "media types include: application/json, application/yaml (" .. tostring(err and err.message or err) .. ")")
  end
  return obj
end

local function manager(req, q)
  if q.fieldManager and q.fieldManager ~= "" then return q.fieldManager end
  local ua = req.headers["user-agent"] or "unknown"
  return ua:match("^([^/]+)") or ua
end

local function list_kind(r) return r.kind .. "List" end

-- the objects a list or watch selects
local function selector(r, q)
  local ls, lerr = select.labels(q.labelSelector)
  if not ls then return nil, objects.status(400, "BadRequest", "unable to parse requirement: " .. lerr) end
  local fs, ferr = select.fields(q.fieldSelector, r.kind)
  if not fs then return nil, objects.status(400, "BadRequest", ferr) end
  return function(obj)
    return select.match_labels(ls, obj.metadata.labels) and select.match_fields(fs, obj)
  end
end

-- first_after(all, ns, name) -> the index of the first object of the sorted
-- array all that sorts after (ns, name) (binary search)
local function first_after(all, ns, name)
  local lo, hi = 1, #all + 1
  while lo < hi do
    local mid = (lo + hi) // 2
    local m = all[mid].metadata
    local mns = m.namespace or ""
    if mns < ns or (mns == ns and m.name <= name) then lo = mid + 1 else hi = mid end
  end
  return lo
end

-- list: a page of the objects in namespace and name order. The objects are
-- the store's one sorted array (cl:sorted) and each one's text is the one
-- its commit encoded (cl:text), so a page costs its selection and a
-- concatenation, not a sort and an encode of every object
local function list(cl, r, rt, q, req)
  local match, err = selector(r, q)
  if not match then return failure(err) end
  local all = cl:sorted(r)
  local start, stop = 1, #all
  if rt.ns and r.namespaced then
    start, stop = first_after(all, rt.ns, ""), first_after(all, rt.ns, "\255") - 1
  end
  if q.continue and q.continue ~= "" then
    local tok = json.decode(sys.b64decode(q.continue) or "")
    if type(tok) ~= "table" or type(tok.after) ~= "string" then
      return fail(400, "BadRequest", "continue key is not valid: invalid continue token")
    end
    local ns, name = tok.after:match("^([^/]*)/(.*)$")
    if not ns then return fail(400, "BadRequest", "continue key is not valid: invalid continue token") end
    start = math.max(start, first_after(all, ns, name))
  end
  local limit = tonumber(q.limit) or 0
  local items, cont, remaining = json.array(), nil, nil
  -- remainingItemCount only without a selector, as the API server gives it
  -- (so a page costs its own objects, not a count of every later one)
  local selected = (q.labelSelector or "") ~= "" or (q.fieldSelector or "") ~= ""
  local i = start
  while i <= stop do
    local o = all[i]
    if not selected or match(o) then
      if limit > 0 and #items >= limit then
        local last = items[#items]
        cont = sys.b64encode(json.encode { rv = cl.rv, after = (last.metadata.namespace or "") .. "/" .. last.metadata.name })
        if not selected then remaining = stop - i + 1 end
        break
      end
      items[#items + 1] = o
    end
    i = i + 1
  end
  if tbl.wants_table(req.headers.accept) then
    local include, why = tbl.include_object(q)
    if not include then return fail(400, "BadRequest", why) end
    return reply(200, tbl.table(r, items, tostring(cl.rv), cont, { include = include }))
  end
  local texts = {}
  for n, o in ipairs(items) do texts[n] = cl:text(o) end
  local head = json.encode { kind = list_kind(r), apiVersion = resources.gv(r),
    metadata = { resourceVersion = tostring(cl.rv), continue = cont, remainingItemCount = remaining } }
  return { status = 200, headers = JSON, body = head:sub(1, -2) .. ',"items":[' .. table.concat(texts, ",") .. "]}" }
end

local function watch_line(etype, text)
  return '{"type":"' .. etype .. '","object":' .. text .. "}\n"
end

local function watch(cl, r, rt, q, req)
  local match, err = selector(r, q)
  if not match then return failure(err) end
  -- in Table form (kubectl get -w) each event's object is a Table of its
  -- one row; only the first carries the columnDefinitions
  local as_table, headers = tbl.wants_table(req.headers.accept), true
  local include, why = tbl.include_object(q)
  if as_table and not include then return fail(400, "BadRequest", why) end
  local function line(etype, obj, text)
    if as_table and (etype == "ADDED" or etype == "MODIFIED" or etype == "DELETED") then
      if text then obj = json.decode(text) end -- the object as it was then, not as it is now
      local t = tbl.table(r, { obj }, obj.metadata.resourceVersion, nil, { include = include, headers = headers })
      headers = false
      return watch_line(etype, json.encode(t))
    end
    return watch_line(etype, text or json.encode(obj))
  end
  local from = tonumber(q.resourceVersion)
  local gr = r.group .. "/" .. r.resource
  local deadline = tonumber(q.timeoutSeconds) and core.now() + tonumber(q.timeoutSeconds)
  return { status = 200, headers = { ["content-type"] = "application/json", ["transfer-encoding"] = "chunked" },
    stream = function(w)
      local cursor = cl.rv
      local last_bookmark = core.now()
      if not from or from == 0 then
        -- no resourceVersion: the current state first, as ADDED events
        for _, o in ipairs(cl:list(r, rt.ns)) do
          if match(o) and not w:write(line("ADDED", o, cl:text(o))) then return end
        end
      else
        cursor = from
      end
      while not cl.gone do
        local it = cl:events_after(cursor)
        if not it then
          local st = objects.status(410, "Expired", string.format("too old resource version: %d (%d)", cursor, cl.ring_floor))
          w:write(watch_line("ERROR", json.encode(st)))
          return
        end
        for e in it do
          cursor = e.rv
          if e.gr == gr and (not rt.ns or e.ns == rt.ns) and match(e.obj) then
            if not w:write(line(e.type, e.obj, e.text)) then return end
          end
        end
        if deadline and core.now() >= deadline then return end
        -- wait for the next change; on the real clock wake every few seconds
        -- to notice a client that left, and end at timeoutSeconds. Under the
        -- virtual clock no timer at all: one would run the clock forward for
        -- ever (a departed client is noticed at the next event instead)
        local wait
        if not core.virtual() then
          wait = 5
          if deadline then wait = math.max(0.01, math.min(wait, deadline - core.now())) end
        end
        if not cl.sig:wait(wait) then
          if truthy(q.allowWatchBookmarks) and core.now() - last_bookmark >= M.BOOKMARK_EVERY then
            last_bookmark = core.now()
            local mark = { kind = r.kind, apiVersion = resources.gv(r),
              metadata = { resourceVersion = tostring(cursor) } }
            if not w:write(watch_line("BOOKMARK", json.encode(mark))) then
              return
            end
          elseif not w:write("") then
            return
          end
        end
      end
    end }
end

local function get(cl, r, rt, req)
  local obj = cl:get(r, rt.ns, rt.name)
  if not obj then
    return failure(objects.not_found(r, rt.name))
  end
  if tbl.wants_table(req.headers.accept) then
    local include, why = tbl.include_object(parse_query(req.query))
    if not include then return fail(400, "BadRequest", why) end
    return reply(200, tbl.table(r, { obj }, obj.metadata.resourceVersion, nil, { include = include }))
  end
  return reply(200, obj)
end

local function check_identity(r, rt, obj)
  local gv = resources.gv(r)
  if obj.apiVersion and obj.apiVersion ~= gv or obj.kind and obj.kind ~= r.kind then
    return objects.status(400, "BadRequest", string.format("the API version in the data (%s) does not match the " ..
      "expected API version (%s)", tostring(obj.apiVersion), gv))
  end
  obj.metadata = obj.metadata or json.object()
  if r.namespaced and obj.metadata.namespace and rt.ns and obj.metadata.namespace ~= rt.ns then
    return objects.status(400, "BadRequest", "the namespace of the provided object does not match the namespace " ..
      "sent on the request")
  end
  if rt.name and obj.metadata.name and obj.metadata.name ~= rt.name then
    return objects.status(400, "BadRequest", "the name of the object (" .. obj.metadata.name ..
      ") does not match the name on the URL (" .. rt.name .. ")")
  end
  obj.metadata.namespace = r.namespaced and (rt.ns or obj.metadata.namespace) or nil
  obj.metadata.name = obj.metadata.name or rt.name
  return nil
end

-- object(r, rt, req, q) -> obj, warnings | nil, nil, the answer: the
-- request's object, decoded, named as the URL names it and validated
local function object(r, rt, req, q)
  local obj, err = decode_body(req)
  if not obj then return nil, nil, failure(err) end
  err = check_identity(r, rt, obj)
  if err then return nil, nil, failure(err) end
  -- decoding into the built-in kind's types, then strict decoding, then
  -- a custom resource's schema (after its unknown fields are pruned)
  local refused = typed.check(r, obj)
  if refused then return nil, nil, failure(refused) end
  local warnings
  refused, warnings = validate.check(r, obj, q.fieldValidation, "decode")
  if refused then return nil, nil, failure(refused) end
  refused = structural.check(r, obj) or rt.sub ~= "status" and field_rules.check(r, obj)
  if refused then return nil, nil, failure(refused) end
  return obj, warnings
end

-- patched(r, out, sub) -> nil | the answer: a patched object the API
-- server cannot decode into the built-in kind's types (422, the patch is
-- invalid, as the patcher words it), or that its validation (a custom
-- resource's schema, a built-in kind's field rules) refuses
local function patched(r, out, sub, live)
  local err = typed.error(r, out)
  if err then
    local why = string.format("Invalid value: %q: %s", json.encode(out), err)
    return fail(422, "Invalid", ' "" is invalid: patch: ' .. why,
      { causes = { { reason = "FieldValueInvalid", message = why, field = "patch" } } })
  end
  local refused = structural.check(r, out) or sub ~= "status" and (field_rules.check(r, out) or
    field_rules.check_update(r, live, out))
  if refused then return failure(refused) end
  return nil
end

-- create, update, patch and delete take dry: under dryRun=All the answer is
-- what the API server would answer, and nothing is written (no
-- resourceVersion, no watch event, no controller, no garbage collection)
local function create(cl, r, rt, req, q, dry)
  local obj, warnings, answer = object(r, rt, req, q)
  if not obj then return answer end
  local out, st = cl:create(r, obj, { manager = manager(req, q), dry = dry })
  if not out then return failure(st) end
  return warned(reply(201, out), warnings)
end

local function replace(cl, r, rt, req, q, dry)
  local obj, warnings, answer = object(r, rt, req, q)
  if not obj then return answer end
  local refused = rt.sub ~= "status" and field_rules.check_update(r, cl:get(r, rt.ns, rt.name), obj)
  if refused then return failure(refused) end
  local out, st = cl:update(r, obj, { manager = manager(req, q), subresource = rt.sub, check_rv = true, dry = dry })
  if not out then return failure(st) end
  return warned(reply(200, out), warnings)
end

-- RFC 6902 JSON patch, on paths like /metadata/labels/app
local function json_patch(doc, ops)
  local function walk(path)
    local parts = {}
    for p in path:gmatch("/([^/]*)") do parts[#parts + 1] = p:gsub("~1", "/"):gsub("~0", "~") end
    local parent = doc
    for i = 1, #parts - 1 do
      local k = parts[i]
      parent = parent[merge.is_list(parent) and tonumber(k) + 1 or k]
      if type(parent) ~= "table" then return nil end
    end
    local last = parts[#parts]
    if merge.is_list(parent) then last = last == "-" and #parent + 1 or tonumber(last) + 1 end
    return parent, last
  end
  for _, op in ipairs(ops) do
    local parent, key = walk(op.path or "")
    if not parent then return nil, "path " .. tostring(op.path) .. " does not exist" end
    if op.op == "add" and merge.is_list(parent) then
      table.insert(parent, key, op.value)
    elseif op.op == "add" or op.op == "replace" then
      if op.op == "replace" and parent[key] == nil then return nil, "replace of a missing path " .. op.path end
      parent[key] = op.value
    elseif op.op == "remove" then
      if parent[key] == nil then return nil, "remove of a missing path " .. op.path end
      if merge.is_list(parent) then table.remove(parent, key) else parent[key] = nil end
    elseif op.op == "test" then
      if not merge.equal(parent[key], op.value) then return nil, "test failed at " .. op.path end
    else
      return nil, "unsupported JSON patch operation " .. tostring(op.op)
    end
  end
  return doc
end

local function patch(cl, r, rt, req, q, dry)
  local ctype = (req.headers["content-type"] or ""):match("^([^;%s]+)") or ""
  local body, err = decode_body(req)
  if not body then return failure(err) end
  local live = cl:get(r, rt.ns, rt.name)
  local mgr = manager(req, q)
  if ctype == "application/apply-patch+yaml" or ctype == "application/apply-patch+json" then
    if not q.fieldManager or q.fieldManager == "" then
      return fail(422, "Invalid", "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is " ..
        "required for apply patch")
    end
    err = check_identity(r, rt, body)
    if err then return failure(err) end
    local typed_err = typed.apply_error(r, body)
    if typed_err then
      return fail(400, "BadRequest", string.format("failed to create typed patch object (%s; %s, Kind=%s): %s",
        (rt.ns and rt.ns .. "/" or "") .. rt.name, resources.gv(r), r.kind, typed_err))
    end
    local refused, warnings = validate.check(r, body, q.fieldValidation, "apply",
      (rt.ns and rt.ns .. "/" or "") .. rt.name)
    if refused then return failure(refused) end
    if rt.sub == "status" and not live then
      return failure(objects.not_found(r, rt.name))
    end
    local out, conflicts = merge.apply(live, body, mgr, truthy(q.force), cl:now())
    if not out then
      -- worded as the API server words it (structured-merge-diff's
      -- Conflicts.Error): one conflict on a line, more grouped by manager
      local causes, by, whos = json.array(), {}, {}
      table.sort(conflicts, function(a, b) return a.field < b.field end)
      for _, c in ipairs(conflicts) do
        causes[#causes + 1] = { reason = "FieldManagerConflict", message = "conflict with " .. c.who, field = c.field }
        if not by[c.who] then by[c.who] = {}; whos[#whos + 1] = c.who end
        table.insert(by[c.who], c.field)
      end
      local text
      if #conflicts == 1 then
        text = "conflict with " .. conflicts[1].who .. ": " .. conflicts[1].field
      else
        table.sort(whos)
        local lines = {}
        for _, w in ipairs(whos) do
          lines[#lines + 1] = "conflicts with " .. w .. ":"
          for _, f in ipairs(by[w]) do lines[#lines + 1] = "- " .. f end
        end
        text = table.concat(lines, "\n")
      end
      local d = objects.details(r, rt.name)
      d.causes = causes
      return fail(409, "Conflict", "Apply failed with " .. #conflicts .. " conflict" .. (#conflicts > 1 and "s" or "") ..
        ": " .. text, d)
    end
    local invalid = structural.check(r, out) or rt.sub ~= "status" and (field_rules.check(r, out) or
      field_rules.check_update(r, live, out))
    if invalid then return failure(invalid) end
    if not live then
      local created, st = cl:create(r, out, { dry = dry })
      if not created then return failure(st) end
      return warned(reply(201, created), warnings)
    end
    local updated, st = cl:update(r, out, { subresource = rt.sub, dry = dry })
    if not updated then return failure(st) end
    return warned(reply(200, updated), warnings)
  end
  if not live then
    return failure(objects.not_found(r, rt.name))
  end
  -- a merge patch's fields are judged as an update's are (its nulls delete,
  -- whatever the field); a JSON patch's operations are not
  local warnings = {}
  if ctype == "application/merge-patch+json" or ctype == "application/strategic-merge-patch+json" then
    local refused
    refused, warnings = validate.check(r, body, q.fieldValidation, "decode", nil, true)
    if refused then return failure(refused) end
  end
  local out
  if ctype == "application/merge-patch+json" then
    out = merge.merge_patch(live, body)
  elseif ctype == "application/strategic-merge-patch+json" then
    if r.crd then
      return fail(415, "UnsupportedMediaType", "the body of the request was in an unknown format - accepted media " ..
        "types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml")
    end
    out = merge.strategic(live, body)
  elseif ctype == "application/json-patch+json" then
    local perr
    out, perr = json_patch(merge.copy(live), body)
    if not out then return fail(422, "Invalid", "the server rejected our request due to an error in our request: " .. perr) end
  else
    return fail(415, "UnsupportedMediaType", "the body of the request was in an unknown format - accepted media " ..
      "types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml")
  end
  local invalid = patched(r, out, rt.sub, live)
  if invalid then return invalid end
  out.metadata.resourceVersion = live.metadata.resourceVersion
  local updated, st = cl:update(r, out, { manager = mgr, subresource = rt.sub, dry = dry })
  if not updated then return failure(st) end
  return warned(reply(200, updated), warnings)
end

-- selector_string(sel) -> a LabelSelector as the string Scale.status.selector
-- carries (metav1.FormatLabelSelector: requirements sorted by key)
local function selector_string(sel)
  local reqs = {}
  for k, v in pairs((sel or {}).matchLabels or {}) do reqs[#reqs + 1] = { k, k .. "=" .. v } end
  for _, e in ipairs((sel or {}).matchExpressions or {}) do
    local vals = {}
    for i, v in ipairs(e.values or {}) do vals[i] = v end
    table.sort(vals)
    local op = e.operator
    local text = op == "Exists" and e.key or op == "DoesNotExist" and "!" .. e.key
      or e.key .. " " .. op:lower() .. " (" .. table.concat(vals, ",") .. ")"
    reqs[#reqs + 1] = { e.key, text }
  end
  table.sort(reqs, function(a, b) return a[1] < b[1] end)
  local out = {}
  for i, r in ipairs(reqs) do out[i] = r[2] end
  return table.concat(out, ",")
end

-- to_scale(obj) -> the autoscaling/v1 Scale of a Deployment, ReplicaSet or StatefulSet
local function to_scale(obj)
  local md = obj.metadata
  return { kind = "Scale", apiVersion = "autoscaling/v1",
    metadata = { name = md.name, namespace = md.namespace, uid = md.uid, resourceVersion = md.resourceVersion,
      creationTimestamp = md.creationTimestamp },
    spec = { replicas = (obj.spec or {}).replicas or 1 },
    status = { replicas = (obj.status or {}).replicas or 0, selector = selector_string((obj.spec or {}).selector) } }
end

-- scale(cl, r, rt, req, q, verb, dry): GET, PUT and PATCH of .../scale, as
-- the API server's ScaleREST: the Scale is read from and written to the
-- object's spec.replicas (a PUT's resourceVersion, when given, must be current)
local function scale(cl, r, rt, req, q, verb, dry)
  local live = cl:get(r, rt.ns, rt.name)
  if not live then return failure(objects.not_found(r, rt.name)) end
  local cur = to_scale(live)
  if verb == "get" then return reply(200, cur) end
  local body, err = decode_body(req)
  if not body then return failure(err) end
  local want
  if verb == "update" then
    want = body
    local md = body.metadata or {}
    if md.resourceVersion and md.resourceVersion ~= "" and md.resourceVersion ~= live.metadata.resourceVersion then
      return fail(409, "Conflict", string.format("Operation cannot be fulfilled on %s %q: the object has been " ..
        "modified; please apply your changes to the latest version and try again", objects.qualified(r), rt.name),
        objects.details(r, rt.name))
    end
  else
    local ctype = (req.headers["content-type"] or ""):match("^([^;%s]+)") or ""
    if ctype == "application/merge-patch+json" or ctype == "application/strategic-merge-patch+json" then
      want = merge.merge_patch(cur, body)
    elseif ctype == "application/json-patch+json" then
      local perr
      want, perr = json_patch(merge.copy(cur), body)
      if not want then return fail(422, "Invalid", "the server rejected our request due to an error in our request: " .. perr) end
    else
      return fail(415, "UnsupportedMediaType", "the body of the request was in an unknown format - accepted media " ..
        "types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json")
    end
  end
  local n = math.tointeger((want.spec or {}).replicas or 0)
  if not n or n < 0 then
    local why = "Invalid value: " .. tostring((want.spec or {}).replicas) .. ": must be greater than or equal to 0"
    return fail(422, "Invalid", string.format('Scale.autoscaling "%s" is invalid: spec.replicas: %s', rt.name, why),
      { name = rt.name, group = "autoscaling", kind = "Scale",
        causes = { { reason = "FieldValueInvalid", message = why, field = "spec.replicas" } } })
  end
  local obj = merge.copy(live)
  obj.spec = obj.spec or json.object()
  obj.spec.replicas = n
  local out, st = cl:update(r, obj, { manager = manager(req, q), dry = dry })
  if not out then return failure(st) end
  return reply(200, to_scale(out))
end

-- delete_options(req, q) -> {propagation, dry} | nil, Status: the
-- DeleteOptions in the body when there is one (kubectl sends them there),
-- else in the query, as the API server reads them
local function delete_options(req, q)
  local p, dry = q.propagationPolicy, values(req.query, "dryRun")
  if req.body and req.body:match("%S") then
    local opts, err = decode_body(req)
    if not opts then return nil, err end
    p = opts.propagationPolicy
    dry = type(opts.dryRun) == "table" and opts.dryRun or {}
  end
  local d, st = dry_run(dry, "DeleteOptions")
  if d == nil then return nil, st end
  return { propagation = p or "Background", dry = d }
end

local function delete(cl, r, rt, opts)
  local out, st = cl:delete(r, rt.ns, rt.name, opts)
  if not out then return failure(st) end
  return reply(200, out)
end

local function delete_collection(cl, r, rt, q, opts)
  local match, err = selector(r, q)
  if not match then return failure(err) end
  local items = json.array()
  for _, o in ipairs(cl:list(r, rt.ns)) do
    if match(o) then items[#items + 1] = cl:delete(r, o.metadata.namespace, o.metadata.name, opts) end
  end
  return reply(200, { kind = list_kind(r), apiVersion = resources.gv(r),
    metadata = { resourceVersion = tostring(cl.rv) }, items = items })
end

-- what every signed-in user may do (the system:basic-user,
-- system:discovery and system:public-info-viewer roles)
local BASIC = {
  { verbs = { "create" }, apiGroups = { "authorization.k8s.io" },
    resources = { "selfsubjectaccessreviews", "selfsubjectrulesreviews" } },
  { verbs = { "create" }, apiGroups = { "authentication.k8s.io" }, resources = { "selfsubjectreviews" } },
}
local BASIC_URLS = { { verbs = { "get" }, nonResourceURLs = { "/api", "/api/*", "/apis", "/apis/*", "/healthz",
  "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/" } } }

-- rules_review(cl, user, ns) -> the status of a SelfSubjectRulesReview:
-- the caller's rules in namespace ns, read from the same access decision
-- the requests get (user.can), grouped by API group and verbs
rules_review = function(cl, user, ns)
  local rules, urls = json.array(), json.array()
  local function copy(from)
    for _, x in ipairs(from) do
      local into = x.nonResourceURLs and urls or rules
      into[#into + 1] = merge.copy(x)
    end
  end
  -- every verb on a resource no API server has: everything is allowed
  if user.can("deletecollection", { group = "nothing.invalid", resource = "nothing", namespaced = false }, nil) then
    rules[1] = { verbs = { "*" }, apiGroups = { "*" }, resources = { "*" } }
    urls[1] = { verbs = { "*" }, nonResourceURLs = { "*" } }
  else
    local by = {} -- "group|verbs" -> rule
    local order = {}
    for _, x in ipairs(cl.reg.list) do
      if not x.review then
        local verbs = {}
        for _, v in ipairs(resources.ALL_VERBS) do
          if user.can(v, x, x.namespaced and ns or nil) then verbs[#verbs + 1] = v end
        end
        if #verbs > 0 then
          local k = x.group .. "|" .. table.concat(verbs, ",")
          if not by[k] then
            by[k] = { verbs = verbs, apiGroups = { x.group }, resources = json.array() }
            order[#order + 1] = k
          end
          table.insert(by[k].resources, x.resource)
        end
      end
    end
    for _, k in ipairs(order) do rules[#rules + 1] = by[k] end
  end
  copy(BASIC)
  copy(BASIC_URLS)
  return { resourceRules = rules, nonResourceRules = urls, incomplete = false }
end

-- review(cl, r, req, user): SelfSubjectAccessReview and SelfSubjectReview,
-- answered from the caller's access (its access entry and policies) and
-- never stored, as the API server's review endpoints do
local function review(cl, r, req, user)
  local body, err = decode_body(req)
  if not body then return failure(err) end
  local out = { kind = r.kind, apiVersion = resources.gv(r), metadata = json.object(), spec = body.spec,
    status = json.object() }
  if r.kind == "SelfSubjectReview" then
    local groups = json.array()
    for i, g in ipairs(user.groups or {}) do groups[i] = g end
    out.spec = nil
    out.status = { userInfo = { username = user.name, uid = user.uid, groups = groups, extra = user.extra } }
    return reply(201, out)
  end
  if r.kind == "SelfSubjectRulesReview" then
    out.status = rules_review(cl, user, (body.spec or {}).namespace)
    return reply(201, out)
  end
  local spec = body.spec or {}
  local ra, nra = spec.resourceAttributes, spec.nonResourceAttributes
  if type(ra) ~= "table" and type(nra) ~= "table" then
    local why = "Required value: exactly one of nonResourceAttributes or resourceAttributes must be specified"
    return fail(422, "Invalid", 'SelfSubjectAccessReview.authorization.k8s.io "" is invalid: spec.resourceAttributes: ' ..
      why, { group = "authorization.k8s.io", kind = "SelfSubjectAccessReview",
        causes = { { reason = "FieldValueRequired", message = why, field = "spec.resourceAttributes" } } })
  end
  local allowed
  if type(ra) == "table" then
    local group, resource = ra.group or "", ra.resource or ""
    local target
    for _, x in ipairs(cl.reg.list) do
      if x.group == group and x.resource == resource and (not ra.version or ra.version == "" or ra.version == "*"
          or x.version == ra.version) then target = x break end
    end
    target = target or { group = group, resource = resource, namespaced = (ra.namespace or "") ~= "" }
    local ns = (ra.namespace or "") ~= "" and ra.namespace or nil
    allowed = user.can(ra.verb or "", target, ns)
  else
    -- the non-resource URLs (/healthz, /version, /api...) any signed-in user may read; the rest needs an admin
    local path = nra.path or ""
    allowed = (nra.verb == "get" and (path:match("^/healthz") or path:match("^/livez") or path:match("^/readyz")
      or path:match("^/version") or path:match("^/api") or path:match("^/openapi"))) and true
      or user.can(nra.verb or "", { group = "", resource = "*" }, nil)
  end
  out.status = { allowed = allowed and true or false }
  return reply(201, out)
end

-- evict(cl, r, rt, req): POST pods/{name}/eviction (a policy/v1 Eviction,
-- JSON or protobuf; kubectl drain sends them): the pod is deleted unless a
-- PodDisruptionBudget selecting it allows no disruption now (429, as the
-- API server answers; sandbox.k8s.controllers.disruption counts); a pod
-- that is not Ready may always go
evict = function(cl, r, rt, req)
  local pod = cl:get(r, rt.ns, rt.name)
  if not pod then return failure(objects.not_found(r, rt.name)) end
  local body, err = decode_body(req)
  if not body then return failure(err) end
  if disruption.healthy(pod) then
    local pdbr = cl.reg:find("policy", "v1", "poddisruptionbudgets")
    for _, pdb in ipairs(pdbr and cl:list(pdbr, rt.ns) or {}) do
      local spec = pdb.spec or {}
      if spec.selector and select.match_selector(spec.selector, pod.metadata.labels) then
        local b = disruption.budget(cl, pdb)
        if b.allowed < 1 then
          local d = objects.details(r, rt.name)
          d.causes = { { reason = "DisruptionBudget", message = string.format("The disruption budget %s needs %d " ..
            "healthy pods and has %d currently", pdb.metadata.name, b.desired, b.healthy) } }
          return fail(429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget.", d)
        end
      end
    end
  end
  local _, st = cl:delete(r, rt.ns, rt.name, { propagation = "Background" })
  if st then return failure(st) end
  return reply(201, { kind = "Status", apiVersion = "v1", metadata = json.object(), status = "Success", code = 201 })
end

-- token_request(cl, r, rt, req): POST serviceaccounts/{name}/token, a
-- TokenRequest (JSON or protobuf, as kubectl create token sends it)
-- answered with a service account token: a JWT with the claims the API
-- server puts in one, signed by no key a client can check (the sandbox
-- authenticates by EKS tokens only)
token_request = function(cl, r, rt, req)
  local sa = cl:get(r, rt.ns, rt.name)
  if not sa then return failure(objects.not_found(r, rt.name)) end
  local body, err = decode_body(req)
  if not body then return failure(err) end
  local spec = body.spec or {}
  local audiences = type(spec.audiences) == "table" and #spec.audiences > 0 and spec.audiences
    or { "https://kubernetes.default.svc" }
  local seconds = math.tointeger(tonumber(spec.expirationSeconds) or 3600) or 3600
  if seconds < 600 then
    return fail(422, "Invalid", string.format('TokenRequest.authentication.k8s.io "%s" is invalid: ' ..
      "spec.expirationSeconds: Invalid value: %d: may not specify a duration less than 10 minutes", rt.name, seconds))
  end
  local now = math.floor(core.now())
  local function b64url(t) return sys.b64encode(json.encode(t), true) end
  local claims = { aud = audiences, iat = now, nbf = now, exp = now + seconds,
    iss = "https://oidc.eks." .. cl.region .. ".amazonaws.com/id/" ..
      sys.digest("sha256", cl.name, "hex"):sub(1, 32):upper(),
    sub = "system:serviceaccount:" .. rt.ns .. ":" .. rt.name,
    ["kubernetes.io"] = { namespace = rt.ns, serviceaccount = { name = rt.name, uid = sa.metadata.uid } } }
  local unsigned = b64url { alg = "RS256", kid = sys.digest("sha256", cl.name .. "/sa", "hex"):sub(1, 40) } ..
    "." .. b64url(claims)
  local token = unsigned .. "." .. sys.b64encode(sys.digest("sha256", unsigned, "raw"), true)
  return reply(201, { kind = "TokenRequest", apiVersion = "authentication.k8s.io/v1",
    metadata = { name = rt.name, namespace = rt.ns, creationTimestamp = objects.rfc3339(now) },
    spec = { audiences = audiences, expirationSeconds = seconds, boundObjectRef = spec.boundObjectRef },
    status = { token = token, expirationTimestamp = objects.rfc3339(now + seconds) } })
end

-- the pods' streaming subresources: port-forward reaches the programs
-- that listen in a pod (sandbox.k8s.portforward); the simulated containers
-- run no processes, so exec and attach are refused with a Status (400
-- BadRequest, as the API server answers when the kubelet cannot serve
-- one) that kubectl prints, after the pod itself is found
STREAMS = { exec = "exec", attach = "attach", portforward = "port-forward" }

refuse_stream = function(cl, r, rt, what)
  local pod = cl:get(r, rt.ns, rt.name)
  if not pod then return fail(404, "NotFound", string.format('pods "%s" not found', rt.name), objects.details(r, rt.name)) end
  return fail(400, "BadRequest", string.format('%s is not offered by the hypd sandbox: the containers of pod "%s" ' ..
    "are simulated and run no processes; read their output with kubectl logs", what, rt.name))
end

local VERB = { GET = "get", POST = "create", PUT = "update", PATCH = "patch", DELETE = "delete" }
-- the writes with a body, and the options kind their query parameters are
local WRITES = { create = { fn = create, options = "CreateOptions" }, update = { fn = replace, options = "UpdateOptions" },
  patch = { fn = patch, options = "PatchOptions" } }

local function serve_discovery(cl, rt)
  if rt.discovery == "api" then return reply(200, discovery.api()) end
  if rt.discovery == "apis" then return reply(200, discovery.apis(cl.reg)) end
  if rt.discovery == "group" then
    local g = discovery.group(cl.reg, rt.group)
    if g then return reply(200, g) end
  else
    local l = discovery.resource_list(cl.reg, rt.group, rt.version)
    if l then return reply(200, l) end
  end
  return fail(404, "NotFound", "the server could not find the requested resource")
end

-- handle(cl, req, user) where user = {name, can(verb, r, ns) -> bool}
function M.handle(cl, req, user)
  local path = req.path
  if path == "/version" or path == "/version/" then return reply(200, discovery.version(cl.version)) end
  if path == "/healthz" or path == "/livez" or path == "/readyz" then
    return { status = 200, headers = { ["content-type"] = "text/plain" }, body = "ok" }
  end
  if path == "/openapi/v2" then
    local body, ctype = discovery.openapi_v2(cl.version, req.headers.accept)
    return { status = 200, headers = { ["content-type"] = ctype }, body = body }
  end
  if path == "/openapi/v3" then return reply(200, discovery.openapi_index(cl.reg)) end
  local gvp = path:match("^/openapi/v3/(.+)$")
  if gvp then
    local doc = discovery.openapi_gv(cl.reg, gvp)
    if doc then return reply(200, doc) end
    return fail(404, "NotFound", "the server could not find the requested resource")
  end
  local proxied = proxy.handle(cl, req, user) -- services/proxy and pods/proxy
  if proxied then return proxied end
  local rt = route(path)
  if not rt then return fail(404, "NotFound", "the server could not find the requested resource") end
  if rt.discovery then
    if req.method ~= "GET" then return fail(405, "MethodNotAllowed", "the server does not allow this method") end
    return serve_discovery(cl, rt)
  end
  local r = cl.reg:find(rt.group, rt.version, rt.resource)
  if not r or (rt.ns and not r.namespaced) then
    return fail(404, "NotFound", "the server could not find the requested resource")
  end
  local stream = rt.sub and r.log and STREAMS[rt.sub]
  if rt.sub and not ((rt.sub == "status" and r.status) or (rt.sub == "log" and r.log)
      or (rt.sub == "scale" and r.scale) or (rt.sub == "token" and r.token) or (rt.sub == "eviction" and r.log)
      or stream) then
    return fail(404, "NotFound", "the server could not find the requested resource")
  end
  if r.review then
    if req.method ~= "POST" or rt.name or rt.sub then
      return fail(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
    end
    return review(cl, r, req, user)
  end
  local q = parse_query(req.query)
  local verb = VERB[req.method]
  if not verb then return fail(405, "MethodNotAllowed", "the server does not allow this method on the requested resource") end
  -- a stream is created, whether by a SPDY POST or a WebSocket GET (the
  -- API server asks create of a WebSocket upgrade since 1.30)
  if stream and req.method == "GET" then verb = "create" end
  if not rt.name then
    if verb == "get" then verb = truthy(q.watch) and "watch" or "list" end
    if verb == "delete" then verb = "deletecollection" end
  end
  if not user.can(verb, r, rt.ns) then
    local where = rt.ns and (" in the namespace \"" .. rt.ns .. "\"") or " at the cluster scope"
    return fail(403, "Forbidden", string.format("%s%s is forbidden: User %q cannot %s resource %q in API group %q%s",
      objects.qualified(r), rt.name and (" \"" .. rt.name .. "\"") or "", user.name, verb,
      r.resource .. (rt.sub and "/" .. rt.sub or ""), r.group, where),
      objects.details(r, rt.name))
  end
  if r.metrics then return metrics.serve(cl, r, rt, q, verb) end
  if stream then
    if req.method ~= "GET" and req.method ~= "POST" then
      return fail(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
    end
    if stream == "port-forward" then
      local pod = cl:get(r, rt.ns, rt.name)
      if not pod then return fail(404, "NotFound", string.format('pods "%s" not found', rt.name), objects.details(r, rt.name)) end
      return portforward.serve(cl, pod, req)
    end
    return refuse_stream(cl, r, rt, stream)
  end
  if rt.sub == "log" then
    if req.method ~= "GET" then return fail(405, "MethodNotAllowed", "the server does not allow this method") end
    return pods.serve(cl, r, rt, q)
  end
  if rt.sub == "eviction" then
    if verb ~= "create" then
      return fail(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
    end
    return evict(cl, r, rt, req)
  end
  if rt.sub == "token" then
    if verb ~= "create" then
      return fail(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
    end
    return token_request(cl, r, rt, req)
  end
  if rt.sub == "scale" then
    if verb ~= "get" and verb ~= "update" and verb ~= "patch" then
      return fail(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
    end
    local dry, st = dry_run(values(req.query, "dryRun"), verb == "get" and "GetOptions" or WRITES[verb].options)
    if dry == nil then return failure(st) end
    return scale(cl, r, rt, req, q, verb, dry)
  end
  if verb == "list" or verb == "watch" or verb == "get" then heartbeats.refresh(cl, r, rt.ns, rt.name) end
  if verb == "list" then return list(cl, r, rt, q, req) end
  if verb == "watch" then return watch(cl, r, rt, q, req) end
  if verb == "get" then return get(cl, r, rt, req) end
  if verb == "delete" or verb == "deletecollection" then
    local opts, st = delete_options(req, q)
    if not opts then return failure(st) end
    if verb == "delete" then return delete(cl, r, rt, opts) end
    return delete_collection(cl, r, rt, q, opts)
  end
  if verb == "create" and rt.name then
    return fail(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
  end
  local write = WRITES[verb]
  if write then
    local dry, st = dry_run(values(req.query, "dryRun"), write.options)
    if dry == nil then return failure(st) end
    return write.fn(cl, r, rt, req, q, dry)
  end
  return fail(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
end

M.route = route
M.parse_query = parse_query -- a query string (or a form body) as a table, percent- and +-decoded
return M
