-- The simulated cluster's Kubernetes API, called directly (no transport):
-- create/get/list with selectors and pages, the four patch types,
-- server-side apply field ownership, status subresources, garbage
-- collection, watches from a resourceVersion (and 410 Gone), Table output.
local t = require "hypd.tap"
local api = require "sandbox.k8s.api"
local json = require "hypd.json"
local objects = require "sandbox.k8s.objects"
local resources = require "sandbox.k8s.resources"

local cl = objects.cluster("us-west-2", "apitest-" .. os.time())
local admin = { name = "admin", can = function() return true end }
local viewer = { name = "viewer", can = function(verb) return verb == "get" or verb == "list" end }

local function call(method, path, body, opts)
  opts = opts or {}
  local path_only, query = path:match("^([^?]*)%??(.*)$")
  local resp = api.handle(cl, { method = method, path = path_only, query = query,
    headers = { ["content-type"] = opts.ctype or "application/json", accept = opts.accept,
      ["user-agent"] = "kubectl/v1.33.1 (linux/amd64)" },
    body = type(body) == "table" and json.encode(body) or body }, opts.user or admin)
  if resp.stream then return resp end
  return resp.status, json.decode(resp.body) or resp.body, resp
end

t.test("namespaces first: a namespaced object in a missing namespace is NotFound", function()
  for _, n in ipairs { "default", "kube-system" } do
    local st = call("POST", "/api/v1/namespaces", { apiVersion = "v1", kind = "Namespace", metadata = { name = n } })
    t.eq(st, 201)
  end
  local st, body = call("POST", "/api/v1/namespaces/nope/configmaps", { metadata = { name = "x" } })
  t.eq(st, 404)
  t.eq(body.reason, "NotFound")
  t.eq(body.message, 'namespaces "nope" not found')
end)

t.test("create sets uid, resourceVersion, generation and creationTimestamp; a second create is AlreadyExists", function()
  local st, obj = call("POST", "/api/v1/namespaces/default/configmaps",
    { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "cfg", labels = { app = "a" } }, data = { k = "v" } })
  t.eq(st, 201)
  t.like(obj.metadata.uid, "^%x+%-%x+%-4%x+%-")
  t.like(obj.metadata.resourceVersion, "^%d+$")
  t.like(obj.metadata.creationTimestamp, "^%d+%-%d+%-%d+T")
  t.eq(obj.metadata.namespace, "default")
  local st2, dup = call("POST", "/api/v1/namespaces/default/configmaps", { metadata = { name = "cfg" } })
  t.eq(st2, 409)
  t.eq(dup.reason, "AlreadyExists")
  t.eq(dup.message, 'configmaps "cfg" already exists')
  local st3, bad = call("POST", "/api/v1/namespaces/default/configmaps", { metadata = { name = "Bad_Name" } })
  t.eq(st3, 422)
  t.eq(bad.reason, "Invalid")
  t.eq(bad.details.causes[1].field, "metadata.name")
end)

t.test("get of a missing object is a 404 Status; an unknown resource is 404 too", function()
  local st, body = call("GET", "/api/v1/namespaces/default/pods/none")
  t.eq(st, 404)
  t.eq(body.kind, "Status")
  t.eq(body.message, 'pods "none" not found')
  t.eq(body.details, { name = "none", kind = "pods" })
  t.eq((call("GET", "/apis/nope.io/v1/things")), 404)
end)

t.test("list with label and field selectors, paged with limit and continue", function()
  local pods = cl.reg:find("", "v1", "pods")
  for i = 1, 25 do
    assert(cl:create(pods, { metadata = { name = string.format("p%03d", i), namespace = "default",
      labels = { app = i % 2 == 0 and "even" or "odd", idx = tostring(i) } },
      spec = { containers = { { name = "c", image = "busybox" } }, nodeName = i <= 5 and "node-a" or nil },
      status = { phase = "Pending" } }))
  end
  local st, l = call("GET", "/api/v1/namespaces/default/pods?labelSelector=app%3Deven")
  t.eq(st, 200)
  t.eq(l.kind, "PodList")
  t.eq(#l.items, 12)
  local _, l2 = call("GET", "/api/v1/pods?labelSelector=app+in+(odd),idx!%3D1&fieldSelector=spec.nodeName%3Dnode-a")
  t.eq(#l2.items, 2, "odd pods 3 and 5 on node-a")
  local names, cont, pages = {}, nil, 0
  repeat
    local _, page = call("GET", "/api/v1/namespaces/default/pods?limit=10" .. (cont and "&continue=" .. cont or ""))
    pages = pages + 1
    for _, p in ipairs(page.items) do names[#names + 1] = p.metadata.name end
    cont = page.metadata.continue
    if cont then t.eq(page.metadata.remainingItemCount, 25 - #names) end
  until not cont
  t.eq(pages, 3)
  t.eq(#names, 25)
  t.eq(names[1], "p001")
  t.eq(names[25], "p025")
  local bst, bad = call("GET", "/api/v1/pods?fieldSelector=spec.nope%3Dx")
  t.eq(bst, 400)
  t.like(bad.message, "field label not supported")
end)

t.test("merge, strategic and JSON patches; an unchanged patch keeps resourceVersion", function()
  local st, d = call("POST", "/apis/apps/v1/namespaces/default/deployments", { apiVersion = "apps/v1", kind = "Deployment",
    metadata = { name = "web" }, spec = { replicas = 1, selector = { matchLabels = { app = "web" } },
      template = { metadata = { labels = { app = "web" } }, spec = { containers = {
        { name = "web", image = "nginx:1" }, { name = "side", image = "busybox" } } } } } })
  t.eq(st, 201)
  local _, m = call("PATCH", "/apis/apps/v1/namespaces/default/deployments/web", { spec = { replicas = 3 } },
    { ctype = "application/merge-patch+json" })
  t.eq(m.spec.replicas, 3)
  t.eq(m.metadata.generation, 2)
  local _, s = call("PATCH", "/apis/apps/v1/namespaces/default/deployments/web",
    { spec = { template = { spec = { containers = { { name = "web", image = "nginx:2" } } } } } },
    { ctype = "application/strategic-merge-patch+json" })
  local cs = s.spec.template.spec.containers
  t.eq(#cs, 2, "strategic merge keeps the other container")
  t.eq(cs[1].image, "nginx:2")
  local _, j = call("PATCH", "/apis/apps/v1/namespaces/default/deployments/web",
    { { op = "replace", path = "/spec/replicas", value = 2 } }, { ctype = "application/json-patch+json" })
  t.eq(j.spec.replicas, 2)
  local _, again = call("PATCH", "/apis/apps/v1/namespaces/default/deployments/web", { spec = { replicas = 2 } },
    { ctype = "application/merge-patch+json" })
  t.eq(again.metadata.resourceVersion, j.metadata.resourceVersion)
  t.eq(d.metadata.uid, again.metadata.uid)
end)

t.test("lists merge by their Kubernetes patch merge keys: ports, volumeMounts, env; others are atomic", function()
  local merge = require "sandbox.k8s.merge"
  local live = { spec = { containers = { { name = "c", image = "a",
    ports = { { containerPort = 80, name = "http" }, { containerPort = 443 } },
    volumeMounts = { { name = "data", mountPath = "/a" }, { name = "data", mountPath = "/b" } },
    env = { { name = "A", value = "1" } }, args = { "x", "y" } } } } }
  local out = merge.strategic(live, { spec = { containers = { { name = "c",
    ports = { { containerPort = 443, protocol = "TCP" } },
    volumeMounts = { { name = "data", mountPath = "/b", readOnly = true } },
    env = { { name = "B", value = "2" } }, args = { "z" } } } } })
  local c = out.spec.containers[1]
  t.eq(#c.ports, 2, "ports merge by containerPort")
  t.eq(c.ports[2], { containerPort = 443, protocol = "TCP" })
  t.eq(#c.volumeMounts, 2, "two mounts of one volume stay two (merge key mountPath)")
  t.eq(c.volumeMounts[2].readOnly, true)
  t.eq(#c.env, 2)
  t.eq(c.args, { "z" }, "a list without a merge key is replaced")
  local svc = merge.strategic({ spec = { ports = { { port = 80, targetPort = 8080 } } } },
    { spec = { ports = { { port = 443, targetPort = 8443 } } } })
  t.eq(#svc.spec.ports, 2, "Service ports merge by port")
  local fs = merge.fieldset { spec = { ports = { { containerPort = 80 } } } }
  t.ok(fs["f:spec"]["f:ports"]['k:{"containerPort":80}'], "managedFields name the item by its merge key")
end)

t.test("server-side apply: create, idempotent re-apply, removal of dropped fields, conflicts and force", function()
  local cfg = { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "ssa", labels = { a = "1", b = "2" } },
    data = { x = "1", y = "2" } }
  local path = "/api/v1/namespaces/default/configmaps/ssa?fieldManager=hypd"
  local apply = { ctype = "application/apply-patch+yaml" }
  local st, o1 = call("PATCH", path, cfg, apply)
  t.eq(st, 201)
  t.eq(o1.metadata.managedFields[1].manager, "hypd")
  t.eq(o1.metadata.managedFields[1].operation, "Apply")
  t.ok(o1.metadata.managedFields[1].fieldsV1["f:data"]["f:x"], "fieldsV1 records f:data.f:x")
  local st2, o2 = call("PATCH", path, cfg, apply)
  t.eq(st2, 200)
  t.eq(o2.metadata.resourceVersion, o1.metadata.resourceVersion, "a second apply changes nothing")
  cfg.data.y, cfg.metadata.labels.b = nil, nil
  local _, o3 = call("PATCH", path, cfg, apply)
  t.eq(o3.data, { x = "1" }, "a field the manager stopped applying goes")
  t.eq(o3.metadata.labels, { a = "1" })
  local cst, conflict = call("PATCH", "/api/v1/namespaces/default/configmaps/ssa?fieldManager=other",
    { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "ssa" }, data = { x = "9" } }, apply)
  t.eq(cst, 409)
  t.eq(conflict.reason, "Conflict")
  t.like(conflict.message, 'conflict')
  t.like(conflict.message, "hypd")
  local fst, forced = call("PATCH", "/api/v1/namespaces/default/configmaps/ssa?fieldManager=other&force=true",
    { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "ssa" }, data = { x = "9" } }, apply)
  t.eq(fst, 200)
  t.eq(forced.data.x, "9")
  local nst, nofm = call("PATCH", "/api/v1/namespaces/default/configmaps/ssa", cfg, apply)
  t.eq(nst, 422)
  t.like(nofm.message, "fieldManager: Required value")
end)

t.test("kubectl apply --server-side takes over what client-side apply applied; other owners still conflict", function()
  local cms = "/api/v1/namespaces/default/configmaps"
  local SSA = { ctype = "application/apply-patch+yaml" }
  local la = json.encode { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "csa", namespace = "default" },
    data = { k = "v" } }
  local st = call("POST", cms .. "?fieldManager=kubectl-client-side-apply", { metadata = { name = "csa",
    annotations = { ["kubectl.kubernetes.io/last-applied-configuration"] = la } }, data = { k = "v" } })
  t.eq(st, 201)
  local applied = { apiVersion = "v1", kind = "ConfigMap", metadata = { name = "csa" }, data = { k = "v2" } }
  local o
  st, o = call("PATCH", cms .. "/csa?fieldManager=other", applied, SSA)
  t.eq({ st, o.reason }, { 409, "Conflict" }, "only the manager kubectl takes over")
  st, o = call("PATCH", cms .. "/csa?fieldManager=kubectl", applied, SSA)
  t.eq({ st, o.data.k }, { 200, "v2" })
  local owners = {}
  for _, m in ipairs(o.metadata.managedFields) do
    if m.fieldsV1["f:data"] then owners[#owners + 1] = m.manager end
  end
  t.eq(owners, { "kubectl" }, "data.k moved to kubectl")
  st = call("PATCH", cms .. "/csa?fieldManager=kubectl-edit", { data = { k = "edited" } },
    { ctype = "application/merge-patch+json" })
  t.eq(st, 200)
  applied.data.k = "v3"
  st, o = call("PATCH", cms .. "/csa?fieldManager=kubectl", applied, SSA)
  t.eq({ st, o.reason }, { 409, "Conflict" }, "a field another manager changed since is a conflict")
end)

t.test("status is a subresource: the main resource ignores status and the status endpoint ignores spec", function()
  local _, p = call("GET", "/api/v1/namespaces/default/pods/p001")
  p.status = { phase = "Running" }
  p.spec.nodeName = "node-z"
  local _, u = call("PUT", "/api/v1/namespaces/default/pods/p001", p)
  t.eq(u.status.phase, "Pending", "PUT on the pod keeps its status")
  t.eq(u.spec.nodeName, "node-z")
  local _, s = call("PATCH", "/api/v1/namespaces/default/pods/p001/status", { status = { phase = "Running" },
    spec = { nodeName = "elsewhere" } }, { ctype = "application/merge-patch+json" })
  t.eq(s.status.phase, "Running")
  t.eq(s.spec.nodeName, "node-z")
  local stale = json.decode(json.encode(p))
  stale.metadata.resourceVersion = "1"
  local cst, c = call("PUT", "/api/v1/namespaces/default/pods/p001", stale)
  t.eq(cst, 409)
  t.eq(c.reason, "Conflict")
end)

t.test("deleting an owner deletes its dependents; Orphan keeps them without the reference", function()
  local cms = cl.reg:find("", "v1", "configmaps")
  local owner = assert(cl:create(cms, { metadata = { name = "owner", namespace = "default" } }))
  local ref = { { apiVersion = "v1", kind = "ConfigMap", name = "owner", uid = owner.metadata.uid } }
  assert(cl:create(cms, { metadata = { name = "dep1", namespace = "default", ownerReferences = ref } }))
  local st = call("DELETE", "/api/v1/namespaces/default/configmaps/owner")
  t.eq(st, 200)
  t.eq((call("GET", "/api/v1/namespaces/default/configmaps/dep1")), 404)
  local owner2 = assert(cl:create(cms, { metadata = { name = "owner2", namespace = "default" } }))
  ref[1].uid, ref[1].name = owner2.metadata.uid, "owner2"
  assert(cl:create(cms, { metadata = { name = "dep2", namespace = "default", ownerReferences = ref } }))
  call("DELETE", "/api/v1/namespaces/default/configmaps/owner2", { propagationPolicy = "Orphan" })
  local gst, dep = call("GET", "/api/v1/namespaces/default/configmaps/dep2")
  t.eq(gst, 200)
  t.eq(dep.metadata.ownerReferences, nil)
end)

local function writer()
  local w = { lines = {} }
  function w:write(s)
    for line in s:gmatch("[^\n]+") do self.lines[#self.lines + 1] = json.decode(line) end
    return #self.lines < (self.max or 1e9)
  end
  return w
end

t.test("a watch from a resourceVersion sees later changes; one from before the ring gets 410 Expired", function()
  local _, l = call("GET", "/api/v1/namespaces/default/configmaps")
  local rv = l.metadata.resourceVersion
  local cms = cl.reg:find("", "v1", "configmaps")
  assert(cl:create(cms, { metadata = { name = "w1", namespace = "default", labels = { w = "yes" } } }))
  assert(cl:create(cms, { metadata = { name = "w2", namespace = "default" } }))
  cl:delete(cms, "default", "w1")
  local resp = call("GET", "/api/v1/namespaces/default/configmaps?watch=true&labelSelector=w%3Dyes&resourceVersion=" .. rv)
  local w = writer()
  w.max = 2
  resp.stream(w)
  t.eq(#w.lines, 2)
  t.eq(w.lines[1].type, "ADDED")
  t.eq(w.lines[1].object.metadata.name, "w1")
  t.eq(w.lines[2].type, "DELETED")
  local saved = objects.RING
  objects.RING = 3
  for i = 1, 5 do assert(cl:create(cms, { metadata = { name = "ring" .. i, namespace = "default" } })) end
  objects.RING = saved
  local gone = call("GET", "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=" .. rv)
  local w2 = writer()
  gone.stream(w2)
  t.eq(w2.lines[1].type, "ERROR")
  t.eq(w2.lines[1].object.code, 410)
  t.eq(w2.lines[1].object.reason, "Expired")
end)

t.test("kubectl's Table: pods print READY, STATUS, RESTARTS and AGE", function()
  local st, tab = call("GET", "/api/v1/namespaces/default/pods?limit=500", nil,
    { accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json" })
  t.eq(st, 200)
  t.eq(tab.kind, "Table")
  local names = {}
  for i, c in ipairs(tab.columnDefinitions) do names[i] = c.name end
  t.eq({ table.unpack(names, 1, 5) }, { "Name", "Ready", "Status", "Restarts", "Age" })
  t.eq(tab.rows[1].cells[1], "p001")
  t.eq(tab.rows[1].cells[2], "0/1")
  t.eq(tab.rows[1].object.metadata.namespace, "default")
end)

t.test("discovery lists the resources with their verbs and status and log subresources", function()
  local _, core_v1 = call("GET", "/api/v1")
  local byname = {}
  for _, r in ipairs(core_v1.resources) do byname[r.name] = r end
  t.ok(byname.pods and byname.pods.namespaced, "pods")
  t.eq(byname["pods/log"].verbs, { "get" })
  t.ok(byname["pods/status"], "pods/status")
  t.eq(byname.nodes.namespaced, false)
  local _, groups = call("GET", "/apis")
  local g = {}
  for _, x in ipairs(groups.groups) do g[x.name] = x.preferredVersion.groupVersion end
  t.eq(g.apps, "apps/v1")
  t.eq(g.batch, "batch/v1")
  local _, idx = call("GET", "/openapi/v3")
  t.like(idx.paths["apis/apps/v1"].serverRelativeURL, "^/openapi/v3/apis/apps/v1%?hash=")
  local _, doc = call("GET", "/openapi/v3/apis/apps/v1")
  local p = doc.paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"].patch
  t.eq(p["x-kubernetes-group-version-kind"].kind, "Deployment")
  t.eq(p.parameters[1].name, "fieldValidation")
end)

t.test("a CRD serves its custom resources; deleting it removes them", function()
  local crd = resources.crd(resources.CRDS[1])
  local st = call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
  t.eq(st, 201)
  local _, l = call("GET", "/apis/sagemaker.amazonaws.com/v1")
  t.eq(l.resources[1].name, "hyperpodpytorchjobs")
  local cst, job = call("POST", "/apis/sagemaker.amazonaws.com/v1/namespaces/default/hyperpodpytorchjobs",
    { apiVersion = "sagemaker.amazonaws.com/v1", kind = "HyperPodPyTorchJob", metadata = { name = "train" },
      spec = { nprocPerNode = "8" } })
  t.eq(cst, 201)
  t.eq(job.kind, "HyperPodPyTorchJob")
  call("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/hyperpodpytorchjobs.sagemaker.amazonaws.com")
  t.eq((call("GET", "/apis/sagemaker.amazonaws.com/v1/namespaces/default/hyperpodpytorchjobs/train")), 404)
end)

t.test("a user without the verb gets 403 Forbidden naming the user, verb and resource", function()
  local st, body = call("DELETE", "/api/v1/namespaces/default/configmaps/cfg", nil, { user = viewer })
  t.eq(st, 403)
  t.eq(body.reason, "Forbidden")
  t.eq(body.message, 'configmaps "cfg" is forbidden: User "viewer" cannot delete resource "configmaps" in API ' ..
    'group "" in the namespace "default"')
end)

t.test("the objects survive a reload from the store", function()
  local name = cl.name
  local rv = cl.rv
  objects.forget_memory = true
  package.loaded["sandbox.k8s.objects"] = nil
  local fresh = require("sandbox.k8s.objects").cluster("us-west-2", name)
  t.eq(fresh.rv, rv)
  t.ok(fresh:get(fresh.reg:find("", "v1", "configmaps"), "default", "cfg"), "cfg is back")
  package.loaded["sandbox.k8s.objects"] = objects
end)
