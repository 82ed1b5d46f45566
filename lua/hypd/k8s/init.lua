-- hypd.k8s: the Kubernetes client hypd uses on EKS.
--
--   local k8s = require "hypd.k8s"
--   local c = k8s.connect { cluster = "demo", region = "us-west-2" }  -- from EKS itself
--   local c = k8s.from_kubeconfig { path = "~/.kube/config", context = "x" }
--   c:get("v1", "Pod", "web-0", { namespace = "default" })        -> obj | nil, err
--   c:list("v1", "Pod", { namespace, labels = "app=web" | {app = "web"},
--          fields = "status.phase=Running", limit = 500, keep, each }) -> items, {resourceVersion}
--          (keep: a json.decode projection of each item, only those fields decoded;
--          each(item): called per item as the pages come, and items stays empty)
--   c:create(obj [, {operation}])                                  -> obj
--   c:apply(obj [, {force, operation, field_manager, dry_run}])   -> obj (server-side apply;
--          dry_run: dryRun=All, the object as the apply would make it, nothing changed)
--   c:patch(api_version, kind, name, patch [, {namespace, type = "merge"|"strategic"|"json"}])
--   c:delete(api_version, kind, name [, {namespace, propagation, wait, timeout}]) -> true
--   c:wait(api_version, kind, name, predicate [, {namespace, timeout}]) -> obj
--   c:watch(api_version, kind, {namespace, labels, fields, resource_version}, fn(event)) -> rv
--   c:logs(pod [, {namespace, container, tail, since, since_time, limit_bytes, timestamps, follow,
--          on_line}]) -> text (since: seconds; since_time: RFC 3339)
--   c:log_stream(pod [, {namespace, container, tail, since_time, timestamps}]) -> an hypd.http
--          stream of the followed log (follow=true), or nil, err
--   k8s.log_line(line) -> time, text (a timestamps=true line); k8s.time_key(time) -> sortable text
--   c:proxy("Service"|"Pod", name, path [, {namespace, port, scheme, method, body, headers, query,
--          timeout}]) -> {status, headers, body} | nil, err: an HTTP request to a workload through
--          the API server's proxy subresource (services/[scheme:]name[:port]/proxy/path); the
--          workload's own answer, any status, comes back as it is; err is the API server's refusal
--
-- Failures are hypd errors whose code is the Kubernetes reason (NotFound,
-- AlreadyExists, Conflict, Forbidden, Invalid with `fields`, Unauthorized,
-- Expired, ...) and whose `status` is the HTTP status. Objects hypd creates
-- carry app.kubernetes.io/managed-by=hypd and, when an operation is given,
-- hypd.io/operation=<id>. The EKS token is made and attached in C (req.eks);
-- it never reaches Lua.
local aws = require "hypd.aws"
local config = require "hypd.config"
local core = require "hypd.core"
local errors = require "hypd.errors"
local guard = require "hypd.tool.guard"
local http = require "hypd.http"
local json = require "hypd.json"
local classify = require "hypd.k8s.classify"
local kubeconfig = require "hypd.k8s.kubeconfig"
local log = require "hypd.log"
local sys = require "hypd.sys"
local task = require "hypd.task"

local M = {}
M.FIELD_MANAGER = "hypd"
M.MANAGED_BY = "app.kubernetes.io/managed-by"
M.OPERATION = "hypd.io/operation"

-- (its __index a read-only view: conn.__index reaches no table every tool shares)
local Conn = require("hypd._readonly").class {}
local eks = require "hypd.aws.eks"

-- a kubeconfig's bearer token, by connection: kept out of the connection
-- table a playbook holds, so only http_req attaches it (and hypd.http then
-- passes the request through the guard: req.kubernetes)
local tokens = setmetatable({}, { __mode = "k" })

local function new(access)
  local c = setmetatable({ server = access.server, ca_pem = access.ca_pem, ca_file = access.ca_file,
    eks = access.eks, namespace = access.namespace or "default", kinds = {},
    timeout = access.timeout or 60 }, Conn)
  tokens[c] = access.token
  if access.eks then classify.server(access.eks, access.server) end -- its token may go there
  return c
end

-- connect{cluster, region, profile, endpoint_url} -> a connection to an EKS
-- cluster (endpoint_url: the AWS endpoint for EKS and STS, as for aws.call)
function M.connect(args)
  if type(args) ~= "table" or type(args.cluster) ~= "string" or args.cluster == "" then
    errors.raise("VALIDATION", "cluster: the EKS cluster name is required", { field = "cluster" })
  end
  local profile = args.profile or config.profile
  local region = aws.region { region = args.region, profile = profile }
  local c = aws.call("eks", "DescribeCluster", { name = args.cluster },
    { region = region, profile = profile, endpoint_url = args.endpoint_url }).cluster
  local ca = c.certificateAuthority and c.certificateAuthority.data
  if not c.endpoint or not ca then
    errors.raise("STATE", string.format("cluster %s is %s and has no Kubernetes endpoint yet", args.cluster,
      tostring(c.status)))
  end
  local prep = eks.prepare { cluster = args.cluster, region = region, profile = profile,
    sts_endpoint_url = args.endpoint_url }
  return new { server = c.endpoint, ca_pem = sys.b64decode(ca),
    eks = { cluster = args.cluster, region = prep.region, profile = profile, sts_url = prep.sts_url } }
end

-- from_kubeconfig{path, context} -> a connection
function M.from_kubeconfig(args)
  local path = args.path or os.getenv("KUBECONFIG") or ((os.getenv("HOME") or "") .. "/.kube/config")
  path = path:gsub("^~", os.getenv("HOME") or "~")
  local access = kubeconfig.load(path, args.context)
  if access.eks then
    local e = access.eks
    local prep = eks.prepare { cluster = e.cluster, region = e.region, profile = e.profile }
    e.region, e.sts_url = prep.region, prep.sts_url
  end
  return new(access)
end

-- errors ---------------------------------------------------------------------

local REASON_BY_STATUS = { [400] = "BadRequest", [401] = "Unauthorized", [403] = "Forbidden", [404] = "NotFound",
  [405] = "MethodNotAllowed", [409] = "Conflict", [410] = "Expired", [415] = "UnsupportedMediaType",
  [422] = "Invalid", [429] = "TooManyRequests", [500] = "InternalError", [503] = "ServiceUnavailable",
  [504] = "Timeout" }

-- status_error(resp) -> the hypd error for a failed Kubernetes response
function M.status_error(status, body)
  local st = json.decode(body or "")
  local reason, message, fields = REASON_BY_STATUS[status] or "HTTP" .. status, nil, nil
  if type(st) == "table" and st.kind == "Status" then
    reason = st.reason ~= nil and st.reason ~= "" and st.reason or reason
    message = st.message
    local causes = st.details and st.details.causes
    if causes then
      fields = {}
      for _, c in ipairs(causes) do
        fields[#fields + 1] = { field = c.field, reason = c.reason, message = c.message }
      end
    end
  end
  message = message or (body ~= "" and body) or ("HTTP " .. status)
  return errors.new(reason, message, { status = status, fields = fields, retryable = status == 429 or status >= 500 })
end

-- transport -----------------------------------------------------------------

-- http_req(c, method, path, headers) -> an hypd.http request to the API
-- server, with the cluster's CA and its credentials (the EKS token is
-- attached in C). Not a method: the request holds a kubeconfig's token,
-- which a playbook holding the connection must not reach
local function http_req(self, method, path, headers)
  local h = { accept = "application/json", ["user-agent"] = "hypd/k8s" }
  for k, v in pairs(headers or {}) do h[k] = v end
  local token = tokens[self]
  if token then h.authorization = "Bearer " .. token end
  local req = { method = method, url = self.server .. path, headers = h, ca_pem = self.ca_pem,
    ca_file = self.ca_file }
  if self.eks then
    aws.credentials(self.eks.profile) -- resolved (and cached) before C signs the token
    req.eks = self.eks
  elseif token then
    req.kubernetes = true -- a credential: hypd.http passes it through the guard
  end
  return req
end

-- request(method, path, opts) -> response | nil, err. Reads are retried on
-- 429, 5xx and transport failures; a write only when nothing of it was
-- sent (CONNECT: no connection, or a TLS handshake that broke), as safe
-- again as the first try. Up to 4 tries, with a growing pause between.
function Conn:request(method, path, opts)
  opts = opts or {}
  local req = http_req(self, method, path, opts.headers)
  req.body, req.timeout = opts.body, opts.timeout or self.timeout
  local write = method ~= "GET"
  for attempt = 1, 4 do
    local resp, err = http.request(req)
    local again = resp and (resp.status >= 500 or resp.status == 429) or not resp
    if write then again = not resp and err.code == "CONNECT" end
    if attempt == 4 or not again then return resp, err end
    task.sleep(math.min(2, 0.1 * 2 ^ attempt) * (0.5 + math.random() / 2))
  end
end

-- open_stream(path, accept [, idle_timeout]) -> stream | nil, err: a
-- streaming GET (watch, log follow); a failure status comes back as the
-- Kubernetes error, with err.status
function Conn:open_stream(path, accept, idle_timeout)
  local req = http_req(self, "GET", path, { accept = accept })
  req.idle_timeout = idle_timeout
  local s, err = http.stream(req)
  if not s then return nil, err end
  local st, herr = s:headers()
  if not st then
    s:close()
    return nil, herr
  end
  if st >= 400 then
    local body = {}
    for chunk in function() return s:read() end do body[#body + 1] = chunk end
    s:close()
    return nil, M.status_error(st, table.concat(body))
  end
  return s
end

-- call(method, path, opts) -> decoded body | nil, err (opts.keep: a
-- json.decode projection of the body)
function Conn:call(method, path, opts)
  local resp, err = self:request(method, path, opts)
  if not resp then return nil, err end
  if resp.status >= 400 then return nil, M.status_error(resp.status, resp.body) end
  local obj, derr = json.decode(resp.body, opts and opts.keep and { keep = opts.keep } or nil)
  if obj == nil then return nil, errors.new("PROTOCOL", "the API server answered with bad JSON: " .. tostring(derr)) end
  return obj
end

-- discovery -------------------------------------------------------------------

local function gv_path(api_version)
  if api_version:find("/", 1, true) then return "/apis/" .. api_version end
  return "/api/" .. api_version
end

-- kind(api_version, kind) -> {resource, namespaced} | nil, err (cached; one
-- refresh on a miss, since a CRD may have arrived since)
function Conn:kind(api_version, kind)
  local key = api_version .. "/" .. kind
  if self.kinds[key] then return self.kinds[key] end
  local list, err = self:call("GET", gv_path(api_version))
  if not list then
    if err.code == "NotFound" then
      return nil, errors.new("NotFound", string.format("the server has no API %s (no %s)", api_version, kind),
        { status = 404 })
    end
    return nil, err
  end
  for _, r in ipairs(list.resources or {}) do
    if not r.name:find("/", 1, true) then
      self.kinds[api_version .. "/" .. r.kind] = { resource = r.name, namespaced = r.namespaced }
      classify.learn(api_version, r.name, r.kind) -- the guard and the audit log name it by its kind
    end
  end
  if not self.kinds[key] then
    return nil, errors.new("NotFound", string.format("the server doesn't have a resource type for %s in %s", kind,
      api_version), { status = 404 })
  end
  return self.kinds[key]
end

local function escape(s)
  return (tostring(s):gsub("[^%w%-%._~]", function(c) return string.format("%%%02X", c:byte()) end))
end

local function selector(v)
  if type(v) ~= "table" then return v end
  local keys = {}
  for k in pairs(v) do keys[#keys + 1] = k end
  table.sort(keys)
  local out = {}
  for _, k in ipairs(keys) do out[#out + 1] = k .. "=" .. v[k] end
  return table.concat(out, ",")
end

-- path(api_version, kind, name, ns, sub, query) -> url path | nil, err
function Conn:path(api_version, kind, name, ns, sub, query)
  local k, err = self:kind(api_version, kind)
  if not k then return nil, err end
  local p = gv_path(api_version)
  if k.namespaced then p = p .. "/namespaces/" .. escape(ns or self.namespace) end
  p = p .. "/" .. k.resource
  if name then p = p .. "/" .. escape(name) end
  if sub then p = p .. "/" .. sub end
  local q = {}
  for key, v in pairs(query or {}) do
    if v ~= nil and v ~= "" then q[#q + 1] = key .. "=" .. escape(v) end
  end
  table.sort(q)
  if #q > 0 then p = p .. "?" .. table.concat(q, "&") end
  return p
end


-- the running tool's guardrail (hypd.tool.guard): verb allowed, or the error
local function allow(verb, kind, name, dry)
  return guard.k8s(verb, tostring(kind) .. (name and ("/" .. tostring(name)) or ""), dry)
end

-- reads -------------------------------------------------------------------------

function Conn:get(api_version, kind, name, opts)
  opts = opts or {}
  local okg, gerr = allow("get", kind, name)
  if not okg then return nil, gerr end
  local p, err = self:path(api_version, kind, name, opts.namespace)
  if not p then return nil, err end
  return self:call("GET", p)
end

-- list(...) -> items, {resourceVersion} | nil, err: every page unless opts.limit
-- is given with opts.page (then one page and its continue token). With
-- opts.keep each page decodes only the projection (the metadata of the list
-- and keep of each item), so a list of 60,000 pods makes no Lua value for
-- what the caller does not read
function Conn:list(api_version, kind, opts)
  opts = opts or {}
  local okg, gerr = allow("list", kind)
  if not okg then return nil, gerr end
  local items, cont = json.array(), opts.continue
  local meta
  local keep = opts.keep and { metadata = true, items = opts.keep } or nil
  local each = opts.each
  repeat
    local p, err = self:path(api_version, kind, nil, opts.namespace, nil, { labelSelector = selector(opts.labels),
      fieldSelector = selector(opts.fields), limit = opts.limit or 500, continue = cont })
    if not p then return nil, err end
    if opts.all_namespaces then p = p:gsub("/namespaces/[^/]+/", "/", 1) end
    local l, lerr = self:call("GET", p, keep and { keep = keep })
    if not l then return nil, lerr end
    if each then
      for _, o in ipairs(l.items or {}) do each(o) end
    else
      for _, o in ipairs(l.items or {}) do items[#items + 1] = o end
    end
    meta = l.metadata or {}
    cont = meta.continue
    if cont == "" then cont = nil end
  until not cont or opts.page
  return items, { resourceVersion = meta.resourceVersion, continue = cont }
end

-- writes ------------------------------------------------------------------------

local function mark(obj, operation)
  obj.metadata = obj.metadata or json.object()
  local labels = obj.metadata.labels or json.object()
  labels[M.MANAGED_BY] = "hypd"
  if operation then labels[M.OPERATION] = tostring(operation) end
  obj.metadata.labels = labels
  return obj
end
M.mark = mark

local function identity(obj)
  if type(obj) ~= "table" or type(obj.apiVersion) ~= "string" or type(obj.kind) ~= "string" then
    return nil, errors.new("VALIDATION", "an object needs apiVersion and kind", { field = "apiVersion" })
  end
  if type(obj.metadata) ~= "table" or type(obj.metadata.name) ~= "string" then
    return nil, errors.new("VALIDATION", "an object needs metadata.name", { field = "metadata.name" })
  end
  return true
end

function Conn:create(obj, opts)
  opts = opts or {}
  if type(obj) ~= "table" or not obj.apiVersion or not obj.kind then
    return nil, errors.new("VALIDATION", "an object needs apiVersion and kind", { field = "apiVersion" })
  end
  local okg, gerr = allow("create", obj.kind, obj.metadata and obj.metadata.name)
  if not okg then return nil, gerr end
  mark(obj, opts.operation)
  local p, err = self:path(obj.apiVersion, obj.kind, nil, obj.metadata.namespace, nil,
    { fieldManager = opts.field_manager or M.FIELD_MANAGER })
  if not p then return nil, err end
  return self:call("POST", p, { body = json.encode(obj), headers = { ["content-type"] = "application/json" } })
end

-- apply(obj, opts) -> obj: server-side apply as field manager "hypd"; applying
-- the same object again changes nothing (same resourceVersion). With
-- opts.dry_run the API server answers what the apply would make (dryRun=All)
-- and keeps nothing: a read for the guardrail (a plan may send it) (audited as a read).
function Conn:apply(obj, opts)
  opts = opts or {}
  local ok, err = identity(obj)
  if not ok then return nil, err end
  local okg, gerr = allow("apply", obj.kind, obj.metadata.name, opts.dry_run)
  if not okg then return nil, gerr end
  mark(obj, opts.operation)
  local p, perr = self:path(obj.apiVersion, obj.kind, obj.metadata.name, obj.metadata.namespace, opts.subresource,
    { fieldManager = opts.field_manager or M.FIELD_MANAGER, force = opts.force and "true" or nil,
      dryRun = opts.dry_run and "All" or nil })
  if not p then return nil, perr end
  local req = { body = json.encode(obj), headers = { ["content-type"] = "application/apply-patch+yaml" } }
  return self:call("PATCH", p, req)
end

local PATCH_TYPES = { merge = "application/merge-patch+json", strategic = "application/strategic-merge-patch+json",
  json = "application/json-patch+json" }

function Conn:patch(api_version, kind, name, patch, opts)
  opts = opts or {}
  local ctype = PATCH_TYPES[opts.type or "merge"]
  if not ctype then
    return nil, errors.new("VALIDATION", "type: one of merge, strategic, json", { field = "type" })
  end
  local okg, gerr = allow("patch", kind, name)
  if not okg then return nil, gerr end
  local p, err = self:path(api_version, kind, name, opts.namespace, opts.subresource,
    { fieldManager = opts.field_manager or M.FIELD_MANAGER })
  if not p then return nil, err end
  return self:call("PATCH", p, { body = json.encode(patch), headers = { ["content-type"] = ctype } })
end

-- delete(...) -> true | nil, err. opts.propagation: Background (default),
-- Foreground, Orphan; opts.wait: until the object is gone (opts.timeout s).
-- Deleting what is already gone succeeds (deletes are retried by callers).
function Conn:delete(api_version, kind, name, opts)
  opts = opts or {}
  local okg, gerr = allow("delete", kind, name)
  if not okg then return nil, gerr end
  local p, err = self:path(api_version, kind, name, opts.namespace)
  if not p then return nil, err end
  local _, derr = self:call("DELETE", p, { body = json.encode { kind = "DeleteOptions",
    apiVersion = "v1", propagationPolicy = opts.propagation or "Background" },
    headers = { ["content-type"] = "application/json" } })
  if derr and derr.code ~= "NotFound" then return nil, derr end
  if opts.wait then
    local gone, werr = self:wait(api_version, kind, name, function(obj) return obj == nil end,
      { namespace = opts.namespace, timeout = opts.timeout })
    if not gone then return nil, werr end
  end
  return true
end

-- wait(api_version, kind, name, predicate(obj|nil) -> truthy, opts) ->
-- predicate's value | nil, TIMEOUT. Watches the one object (by
-- metadata.name) so it wakes on the change, not on a poll.
function Conn:wait(api_version, kind, name, predicate, opts)
  opts = opts or {}
  local timeout = opts.timeout or 300
  local deadline = core.now() + timeout
  local obj, err = self:get(api_version, kind, name, opts)
  if err and err.code ~= "NotFound" then return nil, err end
  local hit = predicate(obj)
  if hit then return hit end
  local rv
  local ok, werr = pcall(function()
    local items, meta = self:list(api_version, kind, { namespace = opts.namespace,
      fields = "metadata.name=" .. name })
    if not items then error(meta, 0) end
    hit = predicate(items[1])
    if hit then return end
    rv = meta.resourceVersion
    self:watch(api_version, kind, { namespace = opts.namespace, fields = "metadata.name=" .. name,
      resource_version = rv, deadline = deadline }, function(ev)
        hit = predicate(ev.type ~= "DELETED" and ev.object or nil)
        return not hit
      end)
  end)
  if not ok then return nil, werr end
  if hit then return hit end
  return nil, errors.new("TIMEOUT", string.format("%s %s did not reach the condition within %gs", kind, name, timeout))
end

-- watch(api_version, kind, opts, fn) -> last resourceVersion. Calls fn(event)
-- for ADDED/MODIFIED/DELETED events until fn returns false or opts.deadline
-- passes. Dropped connections and server timeouts resume from the last
-- resourceVersion seen; 410 Gone relists and replays the current objects as
-- ADDED events (as an informer resyncs), or, with opts.relist, calls
-- opts.relist() -> the resourceVersion to resume from (nil: stop), so the
-- caller replaces its set (what went during the gap goes). Without
-- opts.resource_version the watch starts with the current objects as ADDED
-- events. opts.keep: a json.decode projection of each event's object (it
-- must keep metadata.resourceVersion).
function Conn:watch(api_version, kind, opts, fn)
  opts = opts or {}
  assert(allow("watch", kind))
  local rv = opts.resource_version
  local failures = 0
  local ev_keep
  if opts.keep then
    local ok = { code = true, message = true, reason = true } -- an ERROR event's Status
    for k, v in pairs(opts.keep) do ok[k] = v end
    ev_keep = { keep = { type = true, object = ok } }
  end
  local function relist()
    local items, meta = self:list(api_version, kind, { namespace = opts.namespace, labels = opts.labels,
      fields = opts.fields })
    if not items then error(meta, 0) end
    for _, o in ipairs(items) do
      if fn { type = "ADDED", object = o } == false then return false end
    end
    rv = meta.resourceVersion
    return true
  end
  if not rv and not relist() then return rv end
  while true do
    local left = opts.deadline and opts.deadline - core.now()
    if left and left <= 0 then return rv end
    local p = assert(self:path(api_version, kind, nil, opts.namespace, nil, {
      watch = "true", resourceVersion = rv, allowWatchBookmarks = "true", labelSelector = selector(opts.labels),
      fieldSelector = selector(opts.fields),
      timeoutSeconds = tostring(math.max(1, math.floor(math.min(left or 300, 300)))) }))
    if opts.all_namespaces then p = p:gsub("/namespaces/[^/]+/", "/", 1) end
    local s, serr = self:open_stream(p, "application/json", 330)
    local gone, stop = false, false
    if s then
      failures = 0
      for line in s:lines() do
        local ev = json.decode(line, ev_keep)
        if type(ev) == "table" and ev.type == "ERROR" then
          if type(ev.object) == "table" and ev.object.code == 410 then gone = true break end
          error(M.status_error(ev.object and ev.object.code or 500, json.encode(ev.object)), 0)
        elseif type(ev) == "table" and ev.object and ev.object.metadata then
          rv = ev.object.metadata.resourceVersion or rv
          if ev.type ~= "BOOKMARK" and fn(ev) == false then stop = true break end
        end
      end
      s:close()
    elseif serr.status == 410 then
      gone = true -- the API server no longer has rv
    elseif serr.status then
      error(serr, 0) -- the API server refused the watch
    end
    if stop then return rv end
    if gone then
      log.debug("k8s", "watch %s %s: resourceVersion %s is gone; relisting", api_version, kind, tostring(rv))
      if opts.relist then
        rv = opts.relist()
        if not rv then return nil end
      elseif not relist() then
        return rv
      end
    elseif not s then
      failures = failures + 1
      log.debug("k8s", "watch %s %s dropped (%s); resuming from %s", api_version, kind, tostring(serr), tostring(rv))
      if failures > 8 then error(serr, 0) end
      task.sleep(math.min(5, 0.2 * 2 ^ failures))
    end
  end
end

-- log_line(line) -> time, text | nil: a line of a log read with
-- timestamps=true ("2026-01-01T00:00:00.123456789Z text")
function M.log_line(line)
  local ts, text = line:match("^(%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%d[%.%d]*Z) (.*)$")
  if not ts then
    ts = line:match("^(%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%d[%.%d]*Z)$")
    if ts then text = "" end
  end
  return ts, text
end

-- time_key(time) -> "YYYY-MM-DDTHH:MM:SS.nnnnnnnnn": the fraction padded to
-- 9 digits, so keys compare as the times do (RFC3339Nano drops trailing zeros)
function M.time_key(ts)
  local base, frac = tostring(ts):match("^([^%.Z]+)%.?(%d*)Z$")
  if not base then return tostring(ts) end
  return base .. "." .. (frac .. "000000000"):sub(1, 9)
end

-- log_stream(pod, opts) -> the open stream of pods/{pod}/log?follow=true
-- (read it with s:lines(), close it with s:close()) | nil, err
function Conn:log_stream(pod, opts)
  local o = {}
  for k, v in pairs(opts or {}) do o[k] = v end
  o.follow = true
  local p, err = self:log_path(pod, o)
  if not p then return nil, err end
  return self:open_stream(p, "text/plain", o.idle_timeout)
end

-- log_path(pod, opts) -> the path of pods/{pod}/log with opts' parameters |
-- nil, err (the guardrail's refusal among them)
function Conn:log_path(pod, opts)
  local okg, gerr = allow("logs", "Pod", pod)
  if not okg then return nil, gerr end
  return self:path("v1", "Pod", pod, opts.namespace, "log", { container = opts.container,
    tailLines = opts.tail and tostring(opts.tail), sinceSeconds = opts.since and tostring(opts.since),
    sinceTime = opts.since_time, limitBytes = opts.limit_bytes and tostring(opts.limit_bytes),
    timestamps = opts.timestamps and "true" or nil, follow = opts.follow and "true" or nil })
end

-- proxy(kind, name, path, opts) -> the workload's answer | nil, err. The
-- guardrail verb is "proxy" (a tool declares it); sent once, never retried:
-- a request to a workload is the caller's to repeat. A failure of the API
-- server itself (a Status: no endpoints, connection refused, Forbidden) is
-- err, with the Kubernetes reason as its code and err.status
local PROXIED = { Service = "services", Pod = "pods" }
function Conn:proxy(kind, name, path, opts)
  opts = opts or {}
  local res = PROXIED[kind]
  if not res then
    return nil, errors.new("VALIDATION", "kind: Service or Pod (the kinds with a proxy subresource)", { field = "kind" })
  end
  local id = (opts.scheme and (opts.scheme .. ":") or "") .. tostring(name) ..
    (opts.port and (":" .. tostring(opts.port)) or "")
  local okg, gerr = allow("proxy", kind, id)
  if not okg then return nil, gerr end
  path = tostring(path or "/")
  if path:sub(1, 1) ~= "/" then path = "/" .. path end
  local p = "/api/v1/namespaces/" .. escape(opts.namespace or self.namespace) .. "/" .. res .. "/" .. escape(id) ..
    "/proxy" .. path .. (opts.query and opts.query ~= "" and ("?" .. opts.query) or "")
  local h = { accept = "application/json, */*" }
  for k, v in pairs(opts.headers or {}) do h[k] = v end
  if opts.body ~= nil and not h["content-type"] then h["content-type"] = "application/json" end
  local req = http_req(self, opts.method or "GET", p, h)
  req.body, req.timeout = opts.body, opts.timeout or self.timeout
  local resp, err = http.request(req)
  if not resp then return nil, err end
  if resp.status >= 400 then
    local st = json.decode(resp.body or "")
    if type(st) == "table" and st.kind == "Status" and st.apiVersion == "v1" then
      return nil, M.status_error(resp.status, resp.body)
    end
  end
  return resp
end

-- logs(pod, opts) -> text (or, with follow, the lines go to opts.on_line
-- until the container stops, on_line returns false or opts.deadline passes)
function Conn:logs(pod, opts)
  opts = opts or {}
  local p, err = self:log_path(pod, opts)
  if not p then return nil, err end
  if not opts.follow then
    local resp, rerr = self:request("GET", p, { headers = { accept = "text/plain" } })
    if not resp then return nil, rerr end
    if resp.status >= 400 then return nil, M.status_error(resp.status, resp.body) end
    return resp.body
  end
  local s, serr = self:open_stream(p, "text/plain")
  if not s then return nil, serr end
  local n = 0
  for line in s:lines() do
    n = n + 1
    if opts.on_line and opts.on_line(line) == false then break end
    if opts.deadline and core.now() >= opts.deadline then break end
  end
  s:close()
  return n
end

return M
