-- What an EKS API server holds from its first moment, as a user reads it:
-- the kubernetes Service's Endpoints and EndpointSlice (the control plane's
-- two interfaces in the cluster's subnets, port 443), the bootstrap RBAC
-- (cluster-admin; admin, edit and view aggregated from the
-- system:aggregate-to-* roles; the system: roles and their bindings), and
-- RBAC names as the API server takes them (path segments: "team:reader").
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
local _, OPTS = H.sandbox_here()
local aws = require "hypd.aws"

local function call(s, o, p) return aws.call(s, o, p or {}, OPTS) end
local C = {}

local function has(list, x)
  for _, v in ipairs(list or {}) do if v == x then return true end end
  return false
end

-- rules_allow(role, group, resource, verb) -> a rule of the role grants it
local function rules_allow(role, group, resource, verb)
  for _, r in ipairs(role.rules or {}) do
    if (has(r.apiGroups, group) or has(r.apiGroups, "*")) and (has(r.resources, resource) or has(r.resources, "*"))
        and (has(r.verbs, verb) or has(r.verbs, "*")) then
      return true
    end
  end
  return false
end

t.test("the kubernetes Service's endpoints are the control plane's interfaces, port 443", function()
  C.c = H.eks_cluster(call, "seed-a", 64, {})
  C.conn = require("hypd.k8s").connect { cluster = "seed-a", region = OPTS.region }
  local enis = call("ec2", "DescribeNetworkInterfaces", { Filters = { { Name = "description",
    Values = { "Amazon EKS seed-a" } } } }).NetworkInterfaces
  t.eq(#enis, 2, "EKS's two interfaces")
  local want = {}
  for _, e in ipairs(enis) do
    t.like(e.PrivateIpAddress or "", "^10%.64%.", "each has an address in the cluster's subnets")
    want[#want + 1] = e.PrivateIpAddress
  end
  table.sort(want)
  local ep = assert(C.conn:get("v1", "Endpoints", "kubernetes", { namespace = "default" }))
  local got = {}
  for _, a in ipairs(ep.subsets[1].addresses) do got[#got + 1] = a.ip end
  table.sort(got)
  t.eq(got, want, "the Endpoints list them")
  t.eq(ep.subsets[1].ports[1], { name = "https", port = 443, protocol = "TCP" })
  local s = assert(C.conn:get("discovery.k8s.io/v1", "EndpointSlice", "kubernetes", { namespace = "default" }))
  t.eq(s.addressType, "IPv4")
  t.eq(s.metadata.labels["kubernetes.io/service-name"], "kubernetes")
  t.eq(#s.endpoints, 2, "so does the EndpointSlice")
  t.eq(s.endpoints[1].conditions.ready, true)
  t.eq(s.ports[1].port, 443)
end)

t.test("the endpoints controllers leave the API server's own endpoints alone", function()
  assert(C.conn:create { apiVersion = "v1", kind = "Service", metadata = { name = "web", namespace = "default" },
    spec = { selector = { app = "web" }, ports = { { port = 80, targetPort = 8080 } } } })
  require("hypd.task").sleep(2)
  local ep = assert(C.conn:get("v1", "Endpoints", "kubernetes", { namespace = "default" }))
  t.eq(#ep.subsets[1].addresses, 2, "still the two addresses")
end)

t.test("bootstrap RBAC: cluster-admin, admin, edit and view aggregated, the system: roles and bindings", function()
  local function role(name) return assert(C.conn:get("rbac.authorization.k8s.io/v1", "ClusterRole", name)) end
  local admin, edit, view = role("admin"), role("edit"), role("view")
  t.ok(rules_allow(role("cluster-admin"), "apps", "deployments", "delete"), "cluster-admin may do anything")
  t.ok(rules_allow(view, "", "pods", "list") and rules_allow(view, "", "pods/log", "get"), "view reads pods and logs")
  t.ok(not rules_allow(view, "", "secrets", "get"), "view never reads secrets")
  t.ok(not rules_allow(view, "", "pods", "delete"), "nor deletes")
  t.ok(rules_allow(edit, "", "pods", "list") and rules_allow(edit, "apps", "deployments", "update"),
    "edit holds view's rules and writes workloads")
  t.ok(rules_allow(edit, "", "secrets", "get"), "edit reads secrets")
  t.ok(not rules_allow(edit, "rbac.authorization.k8s.io", "roles", "create"), "edit makes no roles")
  t.ok(rules_allow(admin, "rbac.authorization.k8s.io", "rolebindings", "create") and
    rules_allow(admin, "batch", "jobs", "create"), "admin holds edit's rules and makes roles")
  t.eq(view.aggregationRule.clusterRoleSelectors[1].matchLabels["rbac.authorization.k8s.io/aggregate-to-view"], "true")
  t.eq(view.metadata.labels["rbac.authorization.k8s.io/aggregate-to-edit"], "true", "view is aggregated into edit")
  local disc = role("system:discovery")
  t.ok(has(disc.rules[1].nonResourceURLs, "/version"), "system:discovery reads the discovery URLs")
  local b = assert(C.conn:get("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "cluster-admin"))
  t.eq(b.subjects[1], { apiGroup = "rbac.authorization.k8s.io", kind = "Group", name = "system:masters" })
  t.eq(b.roleRef.name, "cluster-admin")
  b = assert(C.conn:get("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "system:basic-user"))
  t.eq(b.subjects[1].name, "system:authenticated")
end)

t.test("RBAC names are path segments: a colon is taken, a slash refused; other kinds stay RFC 1123", function()
  local ok, err = C.conn:create { apiVersion = "rbac.authorization.k8s.io/v1", kind = "ClusterRole",
    metadata = { name = "team:reader" }, rules = { { apiGroups = { "" }, resources = { "pods" }, verbs = { "get" } } } }
  t.ok(ok, "team:reader is a ClusterRole name: " .. tostring(err and err.message))
  ok, err = C.conn:create { apiVersion = "rbac.authorization.k8s.io/v1", kind = "ClusterRole",
    metadata = { name = "team/reader" }, rules = require("hypd.json").array() }
  t.eq(ok, nil, "team/reader is refused")
  t.like(err and err.message or "", "metadata.name: Invalid value: \"team/reader\": may not contain '/'")
  ok, err = C.conn:create { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "team:reader", namespace = "default" } }
  t.eq(ok, nil, "a ConfigMap named team:reader is refused")
  t.like(err and err.message or "", "RFC 1123 subdomain")
end)
