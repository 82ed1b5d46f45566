-- Server-side dry runs (dryRun=All) change nothing, for every verb. First
-- the machine's kubectl against a sandbox EKS cluster (as in
-- k8s_kubectl_test.lua): apply, apply --server-side, the three patch types,
-- replace, diff and delete with --dry-run=server each print what they print
-- against a real cluster, and the live object keeps its content and its
-- resourceVersion, a dry delete leaves it (and its dependents) in place, and
-- no watch sees any of it. Then the API called directly, for what kubectl
-- cannot send: PUT with a stale resourceVersion, deletecollection, CRDs,
-- the controllers' hooks, and an invalid dryRun value (422, as the real API
-- server answers: ValidateDryRun's field error through NewInvalid).
local t = require "hypd.tap"
local api = require "sandbox.k8s.api"
local json = require "hypd.json"
local objects = require "sandbox.k8s.objects"
local resources = require "sandbox.k8s.resources"
local H = dofile("tests/lua/helpers.lua")

local dir = H.tmpdir()
local kc = H.kubectl_harness(dir)
local env, pid = {}, nil
local KC = kc.kc
local ready = false

local with_env, kubectl = kc.sh, kc.kubectl
local absent -- why the first test could not make the cluster (nil: it tried)
local function skip() return t.skip(absent or "no cluster: the first test failed to make it") end

local function file(name, text) return H.quote(H.write(dir .. "/" .. name, text)) end

-- live(kind_name) -> the object as the server has it now | nil
local function live(what)
  local rc, out = kubectl("get " .. what .. " -o json")
  if rc ~= 0 then return nil end
  return json.decode(out)
end

local CM = [[
apiVersion: v1
kind: ConfigMap
metadata:
  name: dry
  labels:
    app: dry
data:
  k: v
]]
local CM2 = CM:gsub("k: v", "k: v2"):gsub("app: dry", "app: dry\n    tier: two")

local DEPLOY = [[
apiVersion: apps/v1
kind: Deployment
metadata:
  name: drydep
spec:
  replicas: 2
  selector:
    matchLabels:
      app: drydep
  template:
    metadata:
      labels:
        app: drydep
    spec:
      containers:
      - name: web
        image: nginx:1.27
]]

local base -- the ConfigMap as created
local base_list_rv -- the ConfigMap list's resourceVersion right after

-- unchanged(what): the ConfigMap is exactly as created
local function unchanged(what)
  local now = live("configmap dry")
  t.ok(now, what .. ": the ConfigMap still exists")
  t.eq(now.metadata.resourceVersion, base.metadata.resourceVersion, what .. ": resourceVersion")
  t.eq(now, base, what .. ": content")
end

t.test("a sandbox cluster with a ConfigMap and a Deployment created by kubectl apply", function()
  env, pid, absent = H.kubectl_sandbox(dir, kc)
  if absent then return skip() end
  t.ok(env.AWS_ENDPOINT_URL, "the sandbox started")
  local rc, _, err = with_env("python3 tests/tools/hyperpod_cluster.py dry-demo hp-dry ml.g5.12xlarge 1")
  t.eq(rc, 0, err)
  rc, _, err = with_env(H.hypd .. " kubeconfig --cluster dry-demo --write " .. H.quote(KC))
  t.eq(rc, 0, err)
  local out
  rc, out, err = kubectl("apply -f " .. file("cm.yaml", CM))
  t.eq({ rc, out }, { 0, "configmap/dry created\n" }, err)
  rc, out, err = kubectl("apply -f " .. file("deploy.yaml", DEPLOY))
  t.eq({ rc, out }, { 0, "deployment.apps/drydep created\n" }, err)
  rc, _, err = kubectl("rollout status deployment/drydep --timeout=30s")
  t.eq(rc, 0, err)
  base = live("configmap dry")
  t.eq(base.data, { k = "v" })
  local _, l = kubectl("get --raw /api/v1/namespaces/default/configmaps")
  base_list_rv = json.decode(l).metadata.resourceVersion
  ready = rc == 0 and base ~= nil
end)

t.test("kubectl apply --dry-run=server: configured (server dry run), the object keeps its content and version", function()
  if not ready then return skip() end
  local rc, out, err = kubectl("apply --dry-run=server -f " .. file("cm2.yaml", CM2) .. " -o json")
  t.eq(rc, 0, err)
  local would = json.decode(out)
  t.eq(would.data, { k = "v2" }, "the answer is the object as it would be")
  t.eq(would.metadata.labels.tier, "two")
  rc, out, err = kubectl("apply --dry-run=server -f " .. H.quote(dir .. "/cm2.yaml"))
  t.eq({ rc, out }, { 0, "configmap/dry configured (server dry run)\n" }, err)
  unchanged("apply --dry-run=server")
end)

t.test("kubectl apply --server-side --dry-run=server: serverside-applied (server dry run), nothing changes", function()
  if not ready then return skip() end
  local rc, out, err = kubectl("apply --server-side --dry-run=server -f " .. H.quote(dir .. "/cm2.yaml") .. " -o json")
  t.eq(rc, 0, err)
  t.eq(json.decode(out).data, { k = "v2" })
  rc, out, err = kubectl("apply --server-side --dry-run=server -f " .. H.quote(dir .. "/cm2.yaml"))
  t.eq({ rc, out }, { 0, "configmap/dry serverside-applied (server dry run)\n" }, err)
  unchanged("apply --server-side --dry-run=server")
end)

t.test("kubectl patch --type=merge|strategic|json --dry-run=server answers the patched object and keeps the live one", function()
  if not ready then return skip() end
  local cases = {
    { "merge", '{"data":{"k":"merged"}}', { k = "merged" } },
    { "strategic", '{"data":{"extra":"s"}}', { k = "v", extra = "s" } },
    { "json", '[{"op":"replace","path":"/data/k","value":"json"}]', { k = "json" } },
  }
  for _, c in ipairs(cases) do
    local rc, out, err = kubectl("patch configmap dry --dry-run=server --type=" .. c[1] .. " -p " .. H.quote(c[2]) ..
      " -o json")
    t.eq(rc, 0, err)
    t.eq(json.decode(out).data, c[3], c[1] .. " patch: the answer")
    rc, out, err = kubectl("patch configmap dry --dry-run=server --type=" .. c[1] .. " -p " .. H.quote(c[2]))
    -- kubectl patch prints no "(server dry run)": its printer drops the suffix
    t.eq({ rc, out }, { 0, "configmap/dry patched\n" }, err)
    unchanged("patch --type=" .. c[1])
  end
end)

t.test("kubectl replace --dry-run=server: replaced (server dry run), nothing changes", function()
  if not ready then return skip() end
  local rc, out, err = kubectl("replace --dry-run=server -f " .. H.quote(dir .. "/cm2.yaml") .. " -o json")
  t.eq(rc, 0, err)
  t.eq(json.decode(out).data, { k = "v2" })
  rc, out, err = kubectl("replace --dry-run=server -f " .. H.quote(dir .. "/cm2.yaml"))
  t.eq({ rc, out }, { 0, "configmap/dry replaced (server dry run)\n" }, err)
  unchanged("replace --dry-run=server")
end)

t.test("kubectl diff shows the change and leaves the live object alone, client-side and --server-side", function()
  if not ready then return skip() end
  for _, flags in ipairs { "", "--server-side " } do
    local rc, out, err = kubectl("diff " .. flags .. "-f " .. H.quote(dir .. "/cm2.yaml"))
    t.eq(rc, 1, "kubectl diff exits 1 when there are differences: " .. tostring(err))
    t.like(out, "\n%-  k: v\n")
    t.like(out, "\n%+  k: v2\n")
    t.like(out, "\n%+    tier: two\n")
    unchanged("diff " .. flags)
  end
  local rc, out, err = kubectl("diff -f " .. H.quote(dir .. "/cm.yaml"))
  t.eq({ rc, out }, { 0, "" }, "no differences against the manifest it was made from: " .. tostring(err))
end)

t.test("kubectl diff and apply --dry-run=server of a new object create nothing", function()
  if not ready then return skip() end
  local fresh = file("fresh.yaml", CM:gsub("name: dry", "name: fresh"))
  local rc, out, err = kubectl("diff -f " .. fresh)
  t.eq(rc, 1, err)
  t.like(out, "\n%+  name: fresh\n")
  rc, out, err = kubectl("apply --dry-run=server -f " .. fresh)
  t.eq({ rc, out }, { 0, "configmap/fresh created (server dry run)\n" }, err)
  rc, out, err = kubectl("apply --server-side --dry-run=server -f " .. fresh)
  t.eq({ rc, out }, { 0, "configmap/fresh serverside-applied (server dry run)\n" }, err)
  rc, out, err = kubectl("get configmap fresh")
  t.eq({ rc, out }, { 1, "" })
  t.like(err, 'configmaps "fresh" not found')
end)

t.test("kubectl delete --dry-run=server: deleted (server dry run), and the object is still there", function()
  if not ready then return skip() end
  local rc, out, err = kubectl("delete configmap dry --dry-run=server")
  t.eq({ rc, out }, { 0, 'configmap "dry" deleted (server dry run)\n' }, err)
  rc, out, err = kubectl("delete -f " .. H.quote(dir .. "/cm.yaml") .. " --dry-run=server")
  t.eq({ rc, out }, { 0, 'configmap "dry" deleted (server dry run)\n' }, err)
  unchanged("delete --dry-run=server")
end)

t.test("a dry-run scale and delete of a Deployment: no controller reacts, no garbage collection", function()
  if not ready then return skip() end
  local function state()
    local _, out = kubectl("get deployments,replicasets,pods -l app=drydep -o json")
    local s = {}
    local _, d = kubectl("get deployment drydep -o json")
    d = json.decode(d or "")
    if d then s["Deployment/drydep"] = d.metadata.resourceVersion end
    for _, o in ipairs((json.decode(out or "") or { items = {} }).items) do
      s[o.kind .. "/" .. o.metadata.name] = o.metadata.resourceVersion
    end
    return s
  end
  local before = state()
  local pods = 0
  for k in pairs(before) do if k:match("^Pod/") then pods = pods + 1 end end
  t.eq(pods, 2, "two pods run")
  local rc, out, err = kubectl("patch deployment drydep --dry-run=server --type=merge -p '{\"spec\":{\"replicas\":4}}'")
  t.eq({ rc, out }, { 0, "deployment.apps/drydep patched\n" }, err)
  rc, out, err = kubectl("delete deployment drydep --dry-run=server")
  t.eq({ rc, out }, { 0, 'deployment.apps "drydep" deleted (server dry run)\n' }, err)
  rc, out, err = kubectl("delete deployment drydep --dry-run=server --cascade=foreground")
  t.eq({ rc, out }, { 0, 'deployment.apps "drydep" deleted (server dry run)\n' }, err)
  os.execute("sleep 0.3") -- time for a controller that (wrongly) saw a change
  t.eq(state(), before, "the Deployment, its ReplicaSet and its pods, with their resourceVersions")
end)

t.test("an invalid dryRun value is refused (422 Invalid) and changes nothing", function()
  if not ready then return skip() end
  local rc, out, err = kubectl("delete --raw " .. H.quote("/api/v1/namespaces/default/configmaps/dry?dryRun=Some"))
  t.eq({ rc, out }, { 1, "" })
  -- what kubectl prints for the 422 a real API server gives
  t.eq(err, 'The DeleteOptions "" is invalid: dryRun: Unsupported value: []string{"Some"}: supported values: "All"\n')
  rc, out, err = kubectl("create --raw " .. H.quote("/api/v1/namespaces/default/configmaps?dryRun=Some") ..
    " -f " .. file("raw.json", '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"raw"}}'))
  t.eq({ rc, out }, { 1, "" })
  t.eq(err, 'The CreateOptions "" is invalid: dryRun: Unsupported value: []string{"Some"}: supported values: "All"\n')
  t.eq(live("configmap raw"), nil)
  t.eq(live("configmap dry").metadata.resourceVersion, base.metadata.resourceVersion)
end)

t.test("no watch saw the dry runs: from the first resourceVersion the only event is a real change", function()
  if not ready then return skip() end
  local rc, out, err = kubectl("label configmap dry real=yes")
  t.eq({ rc, out }, { 0, "configmap/dry labeled\n" }, err)
  -- the watch has no end of its own under the virtual clock: timeout ends it
  local _, events = kubectl("get --raw " .. H.quote("/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=" ..
    base_list_rv .. "&fieldSelector=metadata.name%3Ddry"), "timeout 2 ")
  local seen = {}
  for line in (events or ""):gmatch("[^\n]+") do
    local e = json.decode(line)
    seen[#seen + 1] = e and (e.type .. " " .. tostring(e.object.metadata.labels and e.object.metadata.labels.real))
  end
  t.eq(seen, { "MODIFIED yes" })
end)

t.cleanup(function()
  if pid then os.execute("kill " .. tostring(pid) .. " 2>/dev/null") end
  os.execute("rm -rf " .. H.quote(dir))
end)

-- The API called directly, in this process ------------------------------

local cl = objects.cluster("us-west-2", "drytest-" .. os.time())
local admin = { name = "admin", can = function() return true end }
local hooked = 0
cl:hook(function() hooked = hooked + 1 end)

local function call(method, path, body, ctype)
  local path_only, query = path:match("^([^?]*)%??(.*)$")
  local resp = api.handle(cl, { method = method, path = path_only, query = query,
    headers = { ["content-type"] = ctype or "application/json", ["user-agent"] = "kubectl/v1.33.1 (linux/amd64)" },
    body = type(body) == "table" and json.encode(body) or body }, admin)
  return resp.status, json.decode(resp.body) or resp.body
end

-- quiet(fn): fn's calls write nothing: no resourceVersion, no event, no hook
local function quiet(what, fn)
  local rv, ring, hooks = cl.rv, cl.ring_last, hooked
  fn()
  t.eq({ cl.rv, cl.ring_last, hooked }, { rv, ring, hooks }, what .. ": resourceVersion, events, controller hooks")
end

local CMS = "/api/v1/namespaces/default/configmaps"

t.test("direct: setup", function()
  local ns = cl.reg:find("", "v1", "namespaces")
  assert(cl:create(ns, { metadata = { name = "default" } }))
  local st = call("POST", CMS, { metadata = { name = "a", labels = { app = "x" } }, data = { k = "v" } })
  t.eq(st, 201)
  st = call("POST", CMS, { metadata = { name = "b", labels = { app = "x" } }, data = { k = "v" } })
  t.eq(st, 201)
end)

t.test("direct: a dry create validates as a create does, fills uid and creationTimestamp, stores nothing", function()
  quiet("dry create", function()
    local st, o = call("POST", CMS .. "?dryRun=All", { metadata = { name = "new" }, data = { k = "v" } })
    t.eq(st, 201)
    t.like(o.metadata.uid, "^%x+%-")
    t.like(o.metadata.creationTimestamp, "^%d+%-")
    t.eq(o.metadata.resourceVersion, nil)
    t.eq((call("GET", CMS .. "/new")), 404)
    st, o = call("POST", "/api/v1/namespaces/nope/configmaps?dryRun=All", { metadata = { name = "new" } })
    t.eq({ st, o.message }, { 404, 'namespaces "nope" not found' })
    st, o = call("POST", CMS .. "?dryRun=All", { metadata = { name = "Bad_Name" } })
    t.eq({ st, o.reason }, { 422, "Invalid" })
    st, o = call("POST", CMS .. "?dryRun=All", { metadata = { name = "a" } })
    t.eq({ st, o.reason }, { 409, "AlreadyExists" })
    st = call("POST", "/api/v1/namespaces?dryRun=All", { metadata = { name = "dryns" } })
    t.eq(st, 201)
    t.eq((call("GET", "/api/v1/namespaces/dryns")), 404)
  end)
end)

t.test("direct: PUT with dryRun answers the new object, a stale resourceVersion is still a Conflict", function()
  local _, a = call("GET", CMS .. "/a")
  quiet("dry update", function()
    local new = json.decode(json.encode(a))
    new.data.k = "put"
    local st, o = call("PUT", CMS .. "/a?dryRun=All", new)
    t.eq({ st, o.data.k, o.metadata.resourceVersion }, { 200, "put", a.metadata.resourceVersion })
    new.metadata.resourceVersion = "1"
    st, o = call("PUT", CMS .. "/a?dryRun=All", new)
    t.eq({ st, o.reason }, { 409, "Conflict" })
  end)
  local _, now = call("GET", CMS .. "/a")
  t.eq(now, a)
end)

t.test("direct: every patch type with dryRun, server-side apply creating and updating, write nothing", function()
  local _, a = call("GET", CMS .. "/a")
  quiet("dry patches", function()
    local cases = {
      { "application/merge-patch+json", { data = { k = "m" } } },
      { "application/strategic-merge-patch+json", { data = { k = "s" } } },
      { "application/json-patch+json", { { op = "replace", path = "/data/k", value = "j" } } },
      { "application/apply-patch+yaml", { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "a" },
        data = { k = "ssa" } } },
    }
    for _, c in ipairs(cases) do
      -- force: the apply takes data.k over from the manager that created it
      local st, o = call("PATCH", CMS .. "/a?fieldManager=t&force=true&dryRun=All", c[2], c[1])
      t.eq(st, 200, c[1])
      t.ok(o.data.k ~= "v", c[1] .. ": the answer carries the change")
    end
    local st = call("PATCH", CMS .. "/ssa-new?fieldManager=t&dryRun=All",
      { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "ssa-new" } }, "application/apply-patch+yaml")
    t.eq(st, 201)
    t.eq((call("GET", CMS .. "/ssa-new")), 404)
  end)
  local _, now = call("GET", CMS .. "/a")
  t.eq(now, a)
end)

t.test("direct: DELETE with dryRun in the query or in DeleteOptions keeps the object and its dependents", function()
  local _, a = call("GET", CMS .. "/a")
  local cms = cl.reg:find("", "v1", "configmaps")
  assert(cl:create(cms, { metadata = { name = "dep", namespace = "default", ownerReferences = {
    { apiVersion = "v1", kind = "ConfigMap", name = "a", uid = a.metadata.uid } } } }))
  quiet("dry deletes", function()
    local st, o = call("DELETE", CMS .. "/a?dryRun=All")
    t.eq({ st, o.metadata.name }, { 200, "a" })
    t.ok(o.metadata.deletionTimestamp, "the answer is the object as deleted")
    st = call("DELETE", CMS .. "/a", { kind = "DeleteOptions", apiVersion = "v1", dryRun = { "All" },
      propagationPolicy = "Foreground" })
    t.eq(st, 200)
    st = call("DELETE", CMS .. "/a", { dryRun = { "All" }, propagationPolicy = "Orphan" })
    t.eq(st, 200)
    st = call("DELETE", CMS .. "/gone?dryRun=All")
    t.eq(st, 404)
  end)
  local _, now = call("GET", CMS .. "/a")
  t.eq(now, a)
  local _, dep = call("GET", CMS .. "/dep")
  t.eq(dep.metadata.ownerReferences[1].uid, a.metadata.uid)
end)

t.test("direct: deletecollection with dryRun lists what it would delete and deletes none", function()
  quiet("dry deletecollection", function()
    local st, l = call("DELETE", CMS .. "?labelSelector=app%3Dx&dryRun=All")
    t.eq(st, 200)
    t.eq(#l.items, 2)
  end)
  local _, l = call("GET", CMS .. "?labelSelector=app%3Dx")
  t.eq(#l.items, 2)
end)

t.test("direct: a dry-run CRD neither starts nor stops serving its resources", function()
  local crd = resources.crd(resources.CRDS[1])
  local path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
  quiet("dry CRD create", function()
    t.eq((call("POST", path .. "?dryRun=All", crd)), 201)
  end)
  t.eq((call("GET", "/apis/sagemaker.amazonaws.com/v1")), 404, "not served after a dry create")
  t.eq((call("POST", path, crd)), 201)
  local job = { apiVersion = "sagemaker.amazonaws.com/v1", kind = "HyperPodPyTorchJob", metadata = { name = "j" },
    spec = { nprocPerNode = "8" } }
  t.eq((call("POST", "/apis/sagemaker.amazonaws.com/v1/namespaces/default/hyperpodpytorchjobs", job)), 201)
  quiet("dry CRD delete", function()
    t.eq((call("DELETE", path .. "/" .. crd.metadata.name .. "?dryRun=All")), 200)
  end)
  t.eq((call("GET", "/apis/sagemaker.amazonaws.com/v1/namespaces/default/hyperpodpytorchjobs/j")), 200)
end)

t.test("direct: an invalid dryRun value is 422 Invalid for each verb, as the API server answers", function()
  quiet("invalid dryRun", function()
    local cases = {
      { "POST", CMS .. "?dryRun=Some", { metadata = { name = "z" } }, nil, "CreateOptions" },
      { "PUT", CMS .. "/a?dryRun=Some", { metadata = { name = "a" } }, nil, "UpdateOptions" },
      { "PATCH", CMS .. "/a?dryRun=Some", { data = { k = "x" } }, "application/merge-patch+json", "PatchOptions" },
      { "DELETE", CMS .. "/a?dryRun=Some", nil, nil, "DeleteOptions" },
      { "DELETE", CMS .. "/a", { dryRun = { "Some" } }, nil, "DeleteOptions" },
      { "DELETE", CMS .. "?dryRun=Some", nil, nil, "DeleteOptions" },
    }
    for _, c in ipairs(cases) do
      local st, o = call(c[1], c[2], c[3], c[4])
      t.eq(st, 422, c[1] .. " " .. c[2])
      t.eq(o.reason, "Invalid")
      t.eq(o.message, c[5] .. '.meta.k8s.io "" is invalid: dryRun: Unsupported value: []string{"Some"}: ' ..
        'supported values: "All"')
      t.eq(o.details, { group = "meta.k8s.io", kind = c[5], causes = { { reason = "FieldValueNotSupported",
        message = 'Unsupported value: []string{"Some"}: supported values: "All"', field = "dryRun" } } })
    end
  end)
  t.eq((call("GET", CMS .. "/a")), 200)
end)
