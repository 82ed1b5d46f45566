-- hypd.k8s.classify: which Kubernetes verb and resource a request to an
-- API server is, read from its method, path, query and content type
-- (never from what its sender says), for the guard (hypd.tool.guard_request):
--
--   GET an item -> get; GET a collection -> list; ?watch=true or the
--   legacy /watch/ prefix -> watch; GET pods/NAME/log -> logs; any method
--   on a proxy subresource -> proxy; POST -> create (exec, attach and
--   portforward too, whatever the method); PUT -> update; PATCH with
--   application/apply-patch+yaml -> apply, else patch; DELETE -> delete
--   (an item or a collection); dryRun=All: a server-side dry run, which
--   changes nothing (dry = true). GET of the discovery documents (/api,
--   /apis/GROUP/VERSION, /version, /openapi/...) -> discover.
--
--   classify.request(method, url, headers) -> { verb, dry, resource, kind,
--     group_version, namespace, name, sub, what } | nil, why
--     what: "Kind/name" as the guard and the audit log name it (the kind
--     once discovery has named the resource, else the resource)
--   classify.learn(api_version, resource, kind): discovery saw it (hypd.k8s)
--   classify.server(eks, url): url is that EKS cluster's API server (hypd.k8s)
--   classify.token_goes_to(eks, url) -> whether url is below one of them
local aws_classify = require "hypd.aws.classify"

local M = {}

local kinds = {} -- "group/version/resource" -> Kind, from discovery

function M.learn(api_version, resource, kind)
  kinds[api_version .. "/" .. resource] = kind
end

-- the API servers an EKS cluster's token may go to: the endpoint EKS named
-- for it (hypd.k8s.connect) or the kubeconfig the operator wrote
-- (hypd.k8s.from_kubeconfig); a token sent anywhere else is a credential
-- handed to whoever answers there
local servers = {} -- "cluster\0region" -> { server = true }

local function key(eks) return tostring(eks.cluster) .. "\0" .. tostring(eks.region) end

-- server(eks, url): url is the API server of eks.cluster in eks.region
function M.server(eks, url)
  local k = key(eks)
  servers[k] = servers[k] or {}
  servers[k][(url:gsub("/+$", ""))] = true
end

-- token_goes_to(eks, url) -> true when url is below a server recorded for that cluster
function M.token_goes_to(eks, url)
  for server in pairs(servers[key(eks)] or {}) do
    local rest = url:sub(#server + 1)
    if url:sub(1, #server) == server and (rest == "" or rest:match("^[/?]")) then return true end
  end
  return false
end

local NON_RESOURCE = { version = true, openapi = true, healthz = true, livez = true, readyz = true,
  [".well-known"] = true }
local CONNECT = { exec = "create", attach = "create", portforward = "create" }

local function query(text)
  local q = {}
  for part in (text or ""):gmatch("[^&]+") do
    local k, v = part:match("^([^=]*)=?(.*)$")
    k = k:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end)
    v = v:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end)
    if q[k] == nil then q[k] = v end
  end
  return q
end

function M.request(method, url, headers)
  method = (method or "GET"):upper()
  local path, qtext = url:match("^[%a][%w+.-]*://[^/?#]*([^?#]*)%??([^#]*)")
  if not path then return nil, "its url is not http(s)://host/path" end
  local segs = aws_classify.segments(path == "" and "/" or path)
  if not segs then return nil, "its path has a '.' or '..' segment" end
  local q = query(qtext)
  local read = method == "GET" or method == "HEAD"
  -- /api/v1/... or /apis/GROUP/VERSION/...
  local gv, i
  if segs[1] == "api" then
    gv, i = segs[2], 3
  elseif segs[1] == "apis" then
    gv, i = segs[2] and segs[3] and (segs[2] .. "/" .. segs[3]), 4
  end
  if not gv or segs[i] == nil then
    if read and (segs[1] == "api" or segs[1] == "apis" or NON_RESOURCE[segs[1] or ""] or #segs == 0) then
      return { verb = "discover", what = path }
    end
    return nil, method .. " " .. path .. " is no Kubernetes resource path"
  end
  local watch_prefix = segs[i] == "watch"
  if watch_prefix then i = i + 1 end
  if segs[i] == "proxy" then return nil, "the legacy /proxy/ paths are not sent (use the proxy subresource)" end
  local ns
  if segs[i] == "namespaces" and segs[i + 2] ~= nil and segs[i + 2] ~= "status" and segs[i + 2] ~= "finalize" then
    ns, i = segs[i + 1], i + 2
  end
  local resource, name = segs[i], segs[i + 1]
  local sub = segs[i + 2]
  if resource == nil or resource == "" then return nil, method .. " " .. path .. " names no resource" end
  local verb
  local ctype = tostring(headers and (headers["content-type"] or headers["Content-Type"]) or ""):lower()
  if sub == "proxy" then
    verb = "proxy"
  elseif sub and CONNECT[sub] then
    verb = CONNECT[sub]
  elseif read then
    if watch_prefix or q.watch == "true" or q.watch == "1" then
      verb = "watch"
    elseif sub == "log" then
      verb = "logs"
    elseif name then
      verb = "get"
    else
      verb = "list"
    end
  elseif method == "POST" then
    verb = "create"
  elseif method == "PUT" then
    verb = "update"
  elseif method == "PATCH" then
    verb = ctype:find("application/apply-patch", 1, true) and "apply" or "patch"
  elseif method == "DELETE" then
    verb = "delete"
  else
    return nil, "the method " .. method .. " is no Kubernetes verb"
  end
  if watch_prefix and verb ~= "watch" then return nil, "a /watch/ path is only read" end
  local kind = kinds[gv .. "/" .. resource] or resource
  local what = kind .. (name and ("/" .. name) or "")
  if sub and CONNECT[sub] then what = what .. "/" .. sub end
  return { verb = verb, dry = q.dryRun == "All" and not read, resource = resource, kind = kind, group_version = gv,
    namespace = ns, name = name, sub = sub, what = what }
end

return M
