-- sandbox.k8s: a Kubernetes API server for every ACTIVE simulated EKS
-- cluster, over HTTPS on loopback with a CA generated for that cluster.
-- DescribeCluster returns its endpoint and CA; each request needs a valid
-- EKS token for the cluster and an access entry (sandbox.k8s.auth).
--
-- The TLS material and the port are kept in the store, so a restarted
-- sandbox serves each cluster again on the same endpoint with the same CA.
local api = require "sandbox.k8s.api"
local audit = require "sandbox.k8s.audit"
local json = require "hypd.json"
local kauth = require "sandbox.k8s.auth"
local log = require "hypd.log"
local objects = require "sandbox.k8s.objects"
local resources = require "sandbox.k8s.resources"
local server = require "hypd.http_server"
local store = require "hypd.store"
local sys = require "hypd.sys"

local M = {}

local running = {} -- "region/name" -> server
M.controllers = {} -- fn(cl, region, cluster_record) run once per served cluster

local function tls_key(region, name) return string.format("sandbox-k8s/%s/%s/_tls", region, name) end

local function material(region, name)
  local k = tls_key(region, name)
  local m = store.get(k)
  if m then return m end
  local ca_cert, ca_key = assert(sys.tls_cert { cn = "kubernetes", ca = true })
  local cert, key = assert(sys.tls_cert { cn = "kube-apiserver", issuer_cert_pem = ca_cert, issuer_key_pem = ca_key,
    ips = { "127.0.0.1" }, dns = { "localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc" } })
  m = { ca_cert = ca_cert, ca_key = ca_key, cert = cert, key = key, port = 0 }
  assert(store.put(k, m))
  return m
end

local UNAUTHORIZED = json.encode(objects.status(401, "Unauthorized", "Unauthorized"))

local function handler(region, name)
  return function(req)
    local cl = objects.cluster(region, name)
    local principal, why = kauth.token(req.headers.authorization, name)
    local user = principal and kauth.user(name, region, principal)
    if not user then
      log.debug("sandbox", "k8s %s: 401 for %s %s: %s", name, req.method, req.path,
        why or "no access entry for " .. tostring(principal and principal.arn))
      return { status = 401, headers = { ["content-type"] = "application/json" }, body = UNAUTHORIZED }
    end
    local resp = api.handle(cl, req, user)
    audit.record(name, region, req, resp, user)
    return resp
  end
end

-- the kubernetes Service's endpoints, kept by the API servers themselves
-- (no selector: the endpoints controllers leave them alone): on EKS the
-- control plane's interfaces in the cluster's subnets, port 443
local function apiserver_endpoints(cl, region, c)
  local ips = require("sandbox.services.ec2.managed_enis").eks_addresses(region, c)
  if #ips == 0 then return end
  local er = cl.reg:find("", "v1", "endpoints")
  local esr = cl.reg:find("discovery.k8s.io", "v1", "endpointslices")
  local port = { name = "https", port = 443, protocol = "TCP" }
  local addresses, eps = {}, {}
  for i, ip in ipairs(ips) do
    addresses[i] = { ip = ip }
    eps[i] = { addresses = { ip }, conditions = { ready = true, serving = true, terminating = false } }
  end
  if not cl:get(er, "default", "kubernetes") then
    cl:create(er, { metadata = { name = "kubernetes", namespace = "default",
      labels = { ["endpointslice.kubernetes.io/skip-mirror"] = "true" } },
      subsets = { { addresses = addresses, ports = { port } } } })
  end
  if not cl:get(esr, "default", "kubernetes") then
    cl:create(esr, { apiVersion = "discovery.k8s.io/v1", kind = "EndpointSlice", metadata = { name = "kubernetes",
      namespace = "default", labels = { ["kubernetes.io/service-name"] = "kubernetes" } },
      addressType = "IPv4", endpoints = eps, ports = { port } })
  end
end

-- the objects every new cluster has
local function seed(cl, region, c)
  local ns = cl.reg:find("", "v1", "namespaces")
  for _, n in ipairs { "default", "kube-system", "kube-public", "kube-node-lease" } do
    if not cl:get(ns, nil, n) then cl:create(ns, { metadata = { name = n } }) end
  end
  for _, n in ipairs(cl:list(ns)) do cl:root_ca(n.metadata.name) end
  local crd = cl.reg:find("apiextensions.k8s.io", "v1", "customresourcedefinitions")
  for _, row in ipairs(resources.CRDS) do
    if row.always and not cl:get(crd, nil, row[3] .. "." .. row[1]) then cl:create(crd, resources.crd(row)) end
  end
  -- the API server's own Service, on the first IP of the service CIDR
  local svc = cl.reg:find("", "v1", "services")
  if not cl:get(svc, "default", "kubernetes") then
    cl:create(svc, { metadata = { name = "kubernetes", namespace = "default",
      labels = { component = "apiserver", provider = "kubernetes" } },
      spec = { clusterIP = require("sandbox.k8s.admit").KUBERNETES_IP,
        ports = { { name = "https", port = 443, protocol = "TCP", targetPort = 443 } } } })
  end
  apiserver_endpoints(cl, region, c)
  require("sandbox.k8s.bootstrap_rbac").seed(cl)
  -- the StorageClass EKS makes in every cluster (the in-tree EBS provisioner's gp2); the default one
  -- only below Kubernetes 1.30 (EKS no longer marks it default on clusters created at 1.30 or later)
  local sc = cl.reg:find("storage.k8s.io", "v1", "storageclasses")
  if not cl:get(sc, nil, "gp2") then
    local major, minor = tostring(cl.version or ""):match("^(%d+)%.(%d+)")
    local old = major and (tonumber(major) < 1 or tonumber(major) == 1 and tonumber(minor) < 30)
    cl:create(sc, { apiVersion = "storage.k8s.io/v1", kind = "StorageClass", metadata = { name = "gp2",
      annotations = old and { ["storageclass.kubernetes.io/is-default-class"] = "true" } or nil },
      provisioner = "kubernetes.io/aws-ebs", parameters = { type = "gp2", fsType = "ext4" },
      reclaimPolicy = "Delete", volumeBindingMode = "WaitForFirstConsumer" })
  end
  -- the API server's two system PriorityClasses (the add-ons' pods name system-cluster-critical)
  local pc = cl.reg:find("scheduling.k8s.io", "v1", "priorityclasses")
  for _, p in ipairs {
    { "system-node-critical", 2000001000, "Used for system critical pods that must not be moved from their current node." },
    { "system-cluster-critical", 2000000000,
      "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary." },
  } do
    if not cl:get(pc, nil, p[1]) then
      cl:create(pc, { apiVersion = "scheduling.k8s.io/v1", kind = "PriorityClass", metadata = { name = p[1] },
        value = p[2], globalDefault = false, preemptionPolicy = "PreemptLowerPriority", description = p[3] })
    end
  end
  local sa = cl.reg:find("", "v1", "serviceaccounts")
  for _, n in ipairs { "default", "kube-system", "kube-public", "kube-node-lease" } do
    if not cl:get(sa, n, "default") then cl:create(sa, { metadata = { name = "default", namespace = n } }) end
  end
end

-- serve(region, cluster_record) -> endpoint, ca_data: starts (or finds) the
-- cluster's API server
function M.serve(region, c)
  local id = region .. "/" .. c.name
  local m = material(region, c.name)
  if not running[id] then
    -- its clients (hypd, kubectl, the simulated nodes' watches) share one
    -- address: no per-client limit below the server's own; steady: sandbox.start says why
    local opts = { handler = handler(region, c.name), max_body = 8 << 20, steady = true, max_per_client = 1000,
      tls = { cert_pem = m.cert, key_pem = m.key } }
    opts.listen = "127.0.0.1:" .. (m.port or 0)
    local srv, err = server.start(opts)
    if not srv and m.port ~= 0 then
      log.warn("sandbox", "cluster %s: port %d is taken; serving on a new one", c.name, m.port)
      opts.listen = "127.0.0.1:0"
      srv, err = server.start(opts)
    end
    if not srv then error(err, 0) end
    running[id] = srv
    if m.port ~= srv.port then
      m.port = srv.port
      assert(store.put(tls_key(region, c.name), m))
    end
    local cl = objects.cluster(region, c.name)
    cl.version, cl.ca_pem = c.version, m.ca_cert
    seed(cl, region, c)
    for _, ctl in ipairs(M.controllers) do ctl(cl, region, c) end
    log.info("sandbox", "cluster %s: Kubernetes API on https://127.0.0.1:%d", c.name, srv.port)
  end
  return "https://127.0.0.1:" .. running[id].port, sys.b64encode(m.ca_cert)
end

-- stop(region, name [, forget]): the cluster's server stops; forget drops its
-- objects and keys too (the cluster was deleted)
function M.stop(region, name, forget)
  local id = region .. "/" .. name
  if running[id] then
    running[id]:stop()
    running[id] = nil
  end
  if forget then
    objects.forget(region, name)
    store.delete(tls_key(region, name))
  end
end

function M.stop_all()
  for id, srv in pairs(running) do srv:stop(); running[id] = nil end
end

-- resume(): serves every ACTIVE cluster again after a restart
function M.resume()
  local n = 0
  for key, c in pairs(assert(store.list("sandbox/"))) do
    local region = key:match("^sandbox/([^/]+)/eks/cluster/")
    if region and type(c) == "table" and c.status ~= "CREATING" and c.status ~= "FAILED" then
      local ok, err = pcall(M.serve, region, c)
      if ok then n = n + 1 else log.error("sandbox", "cluster %s: cannot serve its API: %s", c.name, tostring(err)) end
    end
  end
  return n
end

function M.cluster(region, name) return objects.cluster(region, name) end

-- the simulated controllers: nodes, scheduler, kubelet, workloads, operators, add-ons
M.controllers[#M.controllers + 1] = require("sandbox.k8s.controllers").start

return M
