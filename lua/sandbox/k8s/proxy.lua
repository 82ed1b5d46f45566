-- sandbox.k8s.proxy: the API server's proxy subresources of Services and
-- Pods, as kube-apiserver resolves them, reaching the simulated containers'
-- programs (sandbox.k8s.programs: a program's http and ports):
--
--   /api/v1/namespaces/{ns}/services/[scheme:]{name}[:{port}]/proxy/{path}
--   /api/v1/namespaces/{ns}/pods/[scheme:]{name}[:{port}]/proxy/{path}
--
-- Services (pkg/registry/core/service/storage ResourceLocation): a port
-- number is first turned into the Service port's name (the Service must
-- exist); the Endpoints of that name then give a ready address whose
-- subset has a port of that name, at random, as the API server picks; no
-- subsets: 503 `no endpoints available for service "x"`; none with a ready
-- address and that port: the same with the whole id ("x:8000"). Pods
-- (pkg/registry/core/pod ResourceLocation): the port given, else the first
-- container port; a pod without an IP is 400 "address not allowed". The
-- dial reaches the container whose program listens on that port; when none
-- does: 503 `error trying to reach service: dial tcp IP:PORT: connect:
-- connection refused` (k8s.io/apimachinery util/proxy transport). The
-- program's answer (status, headers, body) is passed through.
--
-- Authorization is the subresource's: GET is get, POST create, PUT update,
-- PATCH patch, DELETE delete on services/proxy or pods/proxy.
local json = require "hypd.json"
local objects = require "sandbox.k8s.objects"
local programs = require "sandbox.k8s.programs"

local M = {}

local JSON = { ["content-type"] = "application/json" }
local function fail(code, reason, message, details)
  return { status = code, headers = JSON, body = json.encode(objects.status(code, reason, message, details)) }
end

local function unescape(s)
  return (s:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
end

-- match(path) -> ns, resource ("services" | "pods"), id, rest | nil
function M.match(path)
  local ns, res, id, rest = path:match("^/api/v1/namespaces/([^/]+)/([a-z]+)/([^/]+)/proxy(.*)$")
  if not ns or (res ~= "services" and res ~= "pods") then return nil end
  if rest ~= "" and rest:sub(1, 1) ~= "/" then return nil end
  return unescape(ns), res, unescape(id), rest
end

-- split(id) -> scheme, name, port | nil (utilnet.SplitSchemeNamePort)
local function split(id)
  local parts = {}
  for p in (id .. ":"):gmatch("([^:]*):") do parts[#parts + 1] = p end
  local scheme, name, port = "", parts[1], ""
  if #parts == 2 then port = parts[2]
  elseif #parts == 3 then scheme, name, port = parts[1], parts[2], parts[3]
  elseif #parts > 3 then return nil end
  if name == "" or (scheme ~= "" and scheme ~= "http" and scheme ~= "https") then return nil end
  return scheme == "" and "http" or scheme, name, port
end

local VERB = { GET = "get", HEAD = "get", POST = "create", PUT = "update", PATCH = "patch", DELETE = "delete",
  OPTIONS = "get" }

local function unreachable(why)
  return fail(503, "ServiceUnavailable", "error trying to reach service: " .. why)
end

-- listener(cl, pod, port) -> answer(req) -> {status, headers, body} | nil
-- (started, not yet listening), of the program that listens on port in a
-- running pod | nil when none does
function M.listener(cl, pod, port)
  local ctl = cl.controllers
  local running = (pod.status or {}).phase == "Running" and not pod.metadata.deletionTimestamp
  for _, c in ipairs(running and ctl and pod.spec.containers or {}) do
    local p = programs.find(pod, c)
    if p and p.http then
      for _, n in ipairs(programs.ports(p, pod, c)) do
        if n == port then
          return function(req)
            local out = p.http(programs.env(ctl, pod, c), req)
            if not out then return nil end
            local h = {}
            for k, v in pairs(out.headers or {}) do h[k:lower()] = v end
            h["content-type"] = h["content-type"] or "application/json"
            return { status = out.status or 200, headers = h, body = out.body or "" }
          end
        end
      end
    end
  end
end

-- reach(cl, pod, scheme, ip, port, req, rest) -> the answer of the program
-- that listens on port in pod | nil, the transport's error
local function reach(cl, pod, scheme, ip, port, req, rest)
  local answer = M.listener(cl, pod, port)
  if answer then
    if scheme == "https" then return nil, "tls: first record does not look like a TLS handshake" end
    local out = answer { method = req.method, path = rest == "" and "/" or rest, query = req.query,
      headers = req.headers or {}, body = req.body or "", port = port, peer = req.peer or "10.0.0.2" }
    if out then return out end
  end
  return nil, "dial tcp " .. ip .. ":" .. tostring(port) .. ": connect: connection refused"
end

-- the address the API server's proxy connects from (its ENI in the VPC)
M.API_SERVER_PEER = "10.0.0.2"

local function dial(cl, pod, scheme, ip, port, req, rest)
  local out, why = reach(cl, pod, scheme, ip, port, { method = req.method, query = req.query, headers = req.headers,
    body = req.body, peer = M.API_SERVER_PEER }, rest)
  if out then return out end
  return unreachable(why)
end

-- dial_ip(cl, ip, port, req) -> the answer of what listens at ip:port in the
-- cluster's pod network | nil, the dial's error (a pod dialling another)
function M.dial_ip(cl, ip, port, req)
  for _, pod in ipairs(cl:list(cl.reg:find("", "v1", "pods"))) do
    if (pod.status or {}).podIP == ip and (pod.status or {}).phase == "Running" then
      return reach(cl, pod, "http", ip, port, req, req.path or "/")
    end
  end
  return nil, "dial tcp " .. ip .. ":" .. tostring(port) .. ": connect: no route to host"
end

-- from_random(list) -> an iterator over the items of a non-empty list,
-- from a random one on, wrapping around (how a Service spreads its calls)
local function from_random(list)
  local n, start, i = #list, math.random(#list), -1
  return function()
    i = i + 1
    if i < n then return list[(start + i - 1) % n + 1] end
  end
end

-- backend(cl, pr, ns, addrs) -> pod, ip: of the endpoint addresses (from a
-- random one on), the first whose pod holds its IP, or nil
local function backend(cl, pr, ns, addrs)
  for a in from_random(addrs) do
    local ref = a.targetRef or {}
    local pod = ref.kind == "Pod" and cl:get(pr, ref.namespace or ns, ref.name)
    if pod and (pod.status or {}).podIP == a.ip then return pod, a.ip end
  end
end

local function service(cl, req, ns, id, rest)
  local scheme, name, port = split(id)
  if not scheme then return fail(400, "BadRequest", string.format("invalid service request %q", id)) end
  local sr, er, pr = cl.reg:find("", "v1", "services"), cl.reg:find("", "v1", "endpoints"), cl.reg:find("", "v1", "pods")
  if port:match("^%d+$") then
    local svc = cl:get(sr, ns, name)
    if not svc then return { status = 404, headers = JSON, body = json.encode(objects.not_found(sr, name)) } end
    local found
    for _, sp in ipairs((svc.spec or {}).ports or {}) do
      if tostring(sp.port) == port then found = sp.name or "" break end
    end
    if not found then
      return fail(503, "ServiceUnavailable", string.format("no service port %s found for service %q", port, name))
    end
    port = found
  end
  local ep = cl:get(er, ns, name)
  if not ep then return { status = 404, headers = JSON, body = json.encode(objects.not_found(er, name)) } end
  local subsets = ep.subsets or {}
  if #subsets == 0 then
    return fail(503, "ServiceUnavailable", string.format("no endpoints available for service %q", name))
  end
  for ss in from_random(subsets) do
    local addrs = ss.addresses or {}
    for _, ssp in ipairs(#addrs > 0 and ss.ports or {}) do
      if (ssp.name or "") == port then
        local pod, ip = backend(cl, pr, ns, addrs)
        if pod then return dial(cl, pod, scheme, ip, tonumber(ssp.port), req, rest) end
      end
    end
  end
  return fail(503, "ServiceUnavailable", string.format("no endpoints available for service %q", id))
end

local function pod_proxy(cl, req, ns, id, rest)
  local scheme, name, port = split(id)
  if not scheme then return fail(400, "BadRequest", string.format("invalid pod request %q", id)) end
  local pr = cl.reg:find("", "v1", "pods")
  local pod = cl:get(pr, ns, name)
  if not pod then return { status = 404, headers = JSON, body = json.encode(objects.not_found(pr, name)) } end
  if port == "" then
    for _, c in ipairs(pod.spec.containers or {}) do
      if c.ports and c.ports[1] then port = tostring(c.ports[1].containerPort) break end
    end
  end
  local ip = (pod.status or {}).podIP
  if not ip or ip == "" then return fail(400, "BadRequest", "address not allowed") end
  if port == "" then port = "80" end
  if not port:match("^%d+$") then
    return unreachable("dial tcp: lookup tcp/" .. port .. ": unknown port")
  end
  return dial(cl, pod, scheme, ip, tonumber(port), req, rest)
end

-- handle(cl, req, user) -> the proxied answer | nil (not a proxy path)
function M.handle(cl, req, user)
  local ns, res, id, rest = M.match(req.path)
  if not ns then return nil end
  local verb = VERB[req.method]
  if not verb then
    return fail(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
  end
  if not user.can(verb, { group = "", resource = res, sub = "proxy", namespaced = true }, ns) then
    return fail(403, "Forbidden", string.format('%s %q is forbidden: User %q cannot %s resource "%s/proxy" in ' ..
      'API group "" in the namespace "%s"', res, id, user.name, verb, res, ns),
      { name = id, kind = res })
  end
  if res == "services" then return service(cl, req, ns, id, rest) end
  return pod_proxy(cl, req, ns, id, rest)
end

return M
