-- What kubectl needs of the sandbox's Kubernetes API beyond get/apply/delete
-- (issue 14, "What the sandbox must add"): the scale subresource of
-- Deployments, ReplicaSets and StatefulSets; a Job's generated selector and
-- controller-uid labels; Services with ClusterIPs, the `kubernetes` Service,
-- Endpoints and EndpointSlices; the "all" category; SelfSubjectAccessReview
-- and SelfSubjectReview. A `hypd sandbox --virtual-clock` process with a
-- HyperPod-ready EKS cluster, judged by kubectl and by hypd's own
-- Kubernetes client (hypd.k8s from the kubeconfig `hypd kubeconfig` writes).
local t = require "hypd.tap"
local json = require "hypd.json"
local S = dofile("tests/lua/sandbox_k8s_helpers.lua").new()
local H, dir, kc, kubectl = S.H, S.dir, S.kc, S.kubectl
local until_ok, get_json, skip = S.until_ok, S.get_json, S.skip
local names = S.names
local conn -- hypd's client, once the first test has made the cluster

t.test("a sandbox with a HyperPod-ready EKS cluster, a kubeconfig, and hypd's client on it", function()
  S.start("gaps-eks", "gaps-hp")
  conn = S.conn
end)

local DEPLOY = [[
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {app: web}}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: web, image: "nginx:1.27", ports: [{name: http, containerPort: 80}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  replicas: 1
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers:
      - {name: db, image: "postgres:16"}
]]

t.test("kubectl scale of a Deployment and a StatefulSet: the scale subresource, and the controllers follow", function()
  if not S.ready then return skip() end
  H.write(dir .. "/work.yaml", DEPLOY)
  local rc, out, err = kubectl("apply -f " .. H.quote(dir .. "/work.yaml"))
  t.eq(rc, 0, err)
  t.eq(out, "deployment.apps/web created\nstatefulset.apps/db created\n")
  rc, out, err = kubectl("scale deployment/web --replicas=3")
  t.eq({ rc, out }, { 0, "deployment.apps/web scaled\n" }, err)
  local d = until_ok(function()
    local x = get_json("get deployment web")
    return x and (x.status or {}).readyReplicas == 3 and x
  end)
  t.eq(d and d.spec.replicas, 3, "spec.replicas follows the Scale")
  t.eq(d and d.status.readyReplicas, 3, "three ready pods")
  -- the Scale itself, as autoscaling/v1 with the selector as a string
  local sc = assert(conn:call("GET", "/apis/apps/v1/namespaces/default/deployments/web/scale"))
  t.eq({ sc.kind, sc.apiVersion, sc.spec.replicas, sc.status.replicas, sc.status.selector },
    { "Scale", "autoscaling/v1", 3, 3, "app=web" })
  -- a PUT with a stale resourceVersion is a Conflict, as ScaleREST answers
  local body = json.encode { kind = "Scale", apiVersion = "autoscaling/v1",
    metadata = { name = "web", namespace = "default", resourceVersion = "1" }, spec = { replicas = 2 } }
  local v, e = conn:call("PUT", "/apis/apps/v1/namespaces/default/deployments/web/scale",
    { body = body, headers = { ["content-type"] = "application/json" } })
  t.eq({ v, e and e.status }, { nil, 409 })
  -- a negative count is Invalid
  rc = kubectl("scale deployment/web --replicas=-1")
  t.ok(rc ~= 0, "a negative replica count is refused")
  -- the ReplicaSet has its own scale subresource
  local rs = get_json("get rs -l app=web")
  local rsname = rs and rs.items[1] and rs.items[1].metadata.name
  sc = assert(conn:call("GET", "/apis/apps/v1/namespaces/default/replicasets/" .. tostring(rsname) .. "/scale"))
  t.eq(sc.spec.replicas, 3, "the ReplicaSet's Scale")
  -- StatefulSet: pods db-0 .. db-2 in order, then down to db-0
  rc, out, err = kubectl("scale statefulset db --replicas=3")
  t.eq({ rc, out }, { 0, "statefulset.apps/db scaled\n" }, err)
  local pods = until_ok(function()
    local l = get_json("get pods -l app=db")
    return l and #l.items == 3 and l
  end)
  t.eq(pods and names(pods), { "db-0", "db-1", "db-2" })
  t.eq(pods and pods.items[1].metadata.labels["statefulset.kubernetes.io/pod-name"], "db-0")
  local s = until_ok(function()
    local x = get_json("get statefulset db")
    return x and (x.status or {}).readyReplicas == 3 and x
  end)
  t.eq(s and s.status.readyReplicas, 3)
  local _, table_out = kubectl("get statefulset db")
  t.like(table_out, "^NAME%s+READY%s+AGE\ndb%s+3/3%s+")
  rc, out, err = kubectl("scale sts/db --replicas=1")
  t.eq({ rc, out }, { 0, "statefulset.apps/db scaled\n" }, err)
  pods = until_ok(function()
    local l = get_json("get pods -l app=db")
    return l and #l.items == 1 and l
  end)
  t.eq(pods and names(pods), { "db-0" }, "scaled down from the highest ordinal")
  -- discovery names the subresources as the API server does
  local apps = assert(conn:call("GET", "/apis/apps/v1"))
  local subs = {}
  for _, r in ipairs(apps.resources) do
    if r.name:match("/scale$") then subs[#subs + 1] = r.name .. " " .. r.group .. "/" .. r.version .. " " .. r.kind end
  end
  table.sort(subs)
  t.eq(subs, { "deployments/scale autoscaling/v1 Scale", "replicasets/scale autoscaling/v1 Scale",
    "statefulsets/scale autoscaling/v1 Scale" })
end)

t.test("a Job gets its generated selector and controller-uid labels; kubectl logs job/NAME reads its own pod", function()
  if not S.ready then return skip() end
  -- (a manifest: `kubectl create job` sends protobuf, which the sandbox does not read yet)
  H.write(dir .. "/job.yaml", [[
apiVersion: batch/v1
kind: Job
metadata: {name: hello}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: "busybox:1.36", command: [echo, hi]}]
]])
  local rc, out, err = kubectl("create -f " .. H.quote(dir .. "/job.yaml"))
  t.eq({ rc, out }, { 0, "job.batch/hello created\n" }, err)
  local j = get_json("get job hello")
  local uid = j and j.metadata.uid
  t.eq(j and j.spec.selector, { matchLabels = { ["batch.kubernetes.io/controller-uid"] = uid } })
  t.eq(j and j.spec.template.metadata.labels, { ["batch.kubernetes.io/controller-uid"] = uid,
    ["batch.kubernetes.io/job-name"] = "hello", ["controller-uid"] = uid, ["job-name"] = "hello" })
  local pods = until_ok(function()
    local l = get_json("get pods -l job-name=hello")
    return l and #l.items == 1 and l
  end)
  local pod = pods and pods.items[1]
  t.eq(pod and pod.metadata.labels["batch.kubernetes.io/controller-uid"], uid)
  -- the Deployment's pods exist too; kubectl picks by the Job's selector
  until_ok(function()
    local p = get_json("get pod " .. (pod and pod.metadata.name or "none"))
    return p and p.status.phase ~= "Pending"
  end)
  local _, direct = kubectl("logs " .. (pod and pod.metadata.name or "none"))
  rc, out, err = kubectl("logs job/hello")
  t.eq(rc, 0, err)
  t.eq(out, direct, "the Job's own pod's log")
  t.ok(#out > 0, "it wrote something")
  t.like(err, "^$")
  -- a selector of one's own needs manualSelector, as the API server says
  H.write(dir .. "/badjob.yaml", [[
apiVersion: batch/v1
kind: Job
metadata: {name: picky}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      restartPolicy: Never
      containers: [{name: c, image: "busybox:1.36"}]
]])
  rc, _, err = kubectl("create -f " .. H.quote(dir .. "/badjob.yaml"))
  t.eq(rc, 1)
  t.like(err, 'The Job "picky" is invalid: spec.selector: Invalid value: .*`selector` will be auto%-generated')
end)

t.test("Services get ClusterIPs from 10.100.0.0/16; `kubernetes` is in default; Endpoints and EndpointSlices " ..
  "follow ready pods", function()
  if not S.ready then return skip() end
  local k = get_json("get service kubernetes -n default")
  t.eq(k and { k.spec.clusterIP, k.spec.type, k.spec.ports[1].port, k.spec.ports[1].name },
    { "10.100.0.1", "ClusterIP", 443, "https" })
  H.write(dir .. "/svc.yaml", [[
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{name: http, port: 8080, targetPort: http}]
---
apiVersion: v1
kind: Service
metadata: {name: taken}
spec:
  clusterIP: 10.100.0.1
  ports: [{port: 80}]
]])
  local rc, out, err = kubectl("create -f " .. H.quote(dir .. "/svc.yaml"))
  t.eq(rc, 1)
  t.eq(out, "service/web created\n")
  t.like(err, "spec%.clusterIPs: Invalid value: %[%]string{\"10%.100%.0%.1\"}: failed to allocate IP 10%.100%.0%.1: " ..
    "provided IP is already allocated")
  local svc = get_json("get service web")
  local ip = svc and svc.spec.clusterIP
  t.like(ip, "^10%.100%.%d+%.%d+$")
  t.eq(svc and { svc.spec.clusterIPs, svc.spec.ipFamilies, svc.spec.ipFamilyPolicy, svc.spec.sessionAffinity,
    svc.spec.ports[1].protocol }, { { ip }, { "IPv4" }, "SingleStack", "None", "TCP" })
  local _, table_out = kubectl("get service web")
  t.like(table_out, "\nweb%s+ClusterIP%s+" .. ip:gsub("%.", "%%.") .. "%s+<none>%s+8080/TCP%s+")
  -- the Deployment from before runs 3 ready pods: all of them, on containerPort 80 (the port named http)
  local ep = until_ok(function()
    local e = get_json("get endpoints web")
    return e and e.subsets and #(e.subsets[1].addresses or {}) == 3 and e
  end)
  t.eq(ep and #ep.subsets[1].addresses, 3)
  t.eq(ep and ep.subsets[1].ports, { { name = "http", port = 80, protocol = "TCP" } })
  local pods = get_json("get pods -l app=web")
  local ips = {}
  for _, p in ipairs(pods and pods.items or {}) do ips[#ips + 1] = p.status.podIP end
  local got = {}
  for _, a in ipairs(ep and ep.subsets[1].addresses or {}) do got[#got + 1] = a.ip end
  table.sort(ips)
  table.sort(got)
  t.eq(got, ips, "the ready pods' IPs")
  local slices = get_json("get endpointslices.discovery.k8s.io -l kubernetes.io/service-name=web")
  local sl = slices and slices.items[1]
  t.eq(slices and #slices.items, 1)
  t.eq(sl and { sl.addressType, #sl.endpoints, sl.endpoints[1].conditions.ready, sl.ports[1].port },
    { "IPv4", 3, true, 80 })
  t.eq(sl and sl.metadata.ownerReferences[1].name, "web")
  -- scaled to 1, the Endpoints follow
  rc, _, err = kubectl("scale deployment web --replicas=1")
  t.eq(rc, 0, err)
  ep = until_ok(function()
    local e = get_json("get endpoints web")
    return e and e.subsets and #(e.subsets[1].addresses or {}) == 1 and e
  end)
  t.eq(ep and #ep.subsets[1].addresses, 1)
  -- kubectl's tables show them as the API server's printer does
  local _, ep_table = kubectl("get endpoints web")
  t.like(ep_table, "^NAME%s+ENDPOINTS%s+AGE\nweb%s+[%d.]+:80%s+")
  local _, sl_table = kubectl("get endpointslices -l kubernetes.io/service-name=web")
  t.like(sl_table, "^NAME%s+ADDRESSTYPE%s+PORTS%s+ENDPOINTS%s+AGE\nweb%-%S+%s+IPv4%s+80%s+[%d.]+%s+")
  -- the Service gone, its Endpoints and slices go too
  rc, _, err = kubectl("delete service web")
  t.eq(rc, 0, err)
  local gone = until_ok(function()
    local l = get_json("get endpoints")
    local s2 = get_json("get endpointslices -l kubernetes.io/service-name=web")
    return l and s2 and #names(s2) == 0 and not (table.concat(names(l), ","):find("web")) and true
  end)
  t.ok(gone, "no Endpoints or EndpointSlice of web left")
end)

t.test("kubectl get all: the all category as the API server has it", function()
  if not S.ready then return skip() end
  local want = { pods = true, services = true, deployments = true, replicasets = true, statefulsets = true,
    daemonsets = true, jobs = true, cronjobs = true }
  local got = {}
  for _, gv in ipairs { "/api/v1", "/apis/apps/v1", "/apis/batch/v1" } do
    for _, r in ipairs(assert(conn:call("GET", gv)).resources) do
      for _, c in ipairs(r.categories or {}) do if c == "all" then got[r.name] = true end end
    end
  end
  t.eq(got, want)
  local rc, out, err = kubectl("get all -A -o json")
  t.eq(rc, 0, err)
  local kinds = {}
  for _, o in ipairs(json.decode(out).items) do kinds[o.kind] = true end
  for _, k in ipairs { "Namespace", "Node", "ConfigMap", "Secret", "Event", "ServiceAccount" } do
    t.eq(kinds[k], nil, k .. " is not in all")
  end
  t.ok(kinds.Pod and kinds.Service and kinds.Deployment and kinds.ReplicaSet and kinds.StatefulSet and kinds.Job,
    "pods, services, deployments, replicasets, statefulsets and jobs are")
  local _, text = kubectl("get all")
  t.like(text, "\nservice/kubernetes%s+ClusterIP%s+10%.100%.0%.1%s")
  t.like(text, "\ndeployment%.apps/web%s+1/1%s")
  t.like(text, "\nstatefulset%.apps/db%s+1/1%s")
end)

t.test("kubectl auth can-i and auth whoami: SelfSubjectAccessReview and SelfSubjectReview from the access entry", function()
  if not S.ready then return skip() end
  local rc, out, err = kubectl("auth can-i create pods")
  t.eq({ rc, out }, { 0, "yes\n" }, err)
  rc, out, err = kubectl("auth can-i delete deployments.apps -n kube-system")
  t.eq({ rc, out }, { 0, "yes\n" }, err)
  rc, out, err = kubectl("auth whoami -o json")
  t.eq(rc, 0, err)
  local who = json.decode(out) or {}
  t.eq({ who.kind, who.apiVersion }, { "SelfSubjectReview", "authentication.k8s.io/v1" })
  local ui = (who.status or {}).userInfo or {}
  t.like(ui.extra and ui.extra.arn and ui.extra.arn[1], "^arn:aws:")
  t.ok(#(ui.groups or {}) > 0 and ui.groups[#ui.groups] == "system:authenticated", "system:authenticated")
  rc, out, err = kubectl("auth whoami")
  t.eq(rc, 0, err)
  t.like(out, "^ATTRIBUTE%s+VALUE\nUsername%s+" .. tostring(ui.username):gsub("%p", "%%%0") .. "\n")
  -- a view-only principal: reads yes, writes no (exit 1), secrets no
  local v = assert(conn:call("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", {
    body = json.encode { apiVersion = "authorization.k8s.io/v1", kind = "SelfSubjectAccessReview",
      spec = { resourceAttributes = { verb = "list", resource = "pods", namespace = "default" } } },
    headers = { ["content-type"] = "application/json" } }))
  t.eq({ v.kind, v.status.allowed, v.spec.resourceAttributes.verb }, { "SelfSubjectAccessReview", true, "list" })
  local _, e = conn:call("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", {
    body = json.encode { apiVersion = "authorization.k8s.io/v1", kind = "SelfSubjectAccessReview", spec = {} },
    headers = { ["content-type"] = "application/json" } })
  t.eq(e and e.status, 422, "a review with no attributes is Invalid")
  _, e = conn:call("GET", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")
  t.eq(e and e.status, 405, "reviews are only created")
end)

t.test("a view-only access entry: kubectl auth can-i says no to writes and to secrets", function()
  if not S.ready then return skip() end
  local rc, out, err = kc.sh("python3 tests/tools/eks_viewer.py gaps-eks gaps-viewer")
  t.eq(rc, 0, err)
  local akid, secret, session = out:match("^(%S+) (%S+) (%S+)")
  if not akid then return end
  local as = "AWS_ACCESS_KEY_ID=" .. akid .. " AWS_SECRET_ACCESS_KEY=" .. H.quote(secret) ..
    " AWS_SESSION_TOKEN=" .. H.quote(session) .. " "
  rc, out = kubectl("auth can-i list pods", "env " .. as)
  t.eq({ rc, out }, { 0, "yes\n" })
  rc, out = kubectl("auth can-i create pods", "env " .. as)
  t.eq({ rc, out }, { 1, "no\n" })
  rc, out = kubectl("auth can-i get secrets", "env " .. as)
  t.eq({ rc, out }, { 1, "no\n" })
  rc, out, err = kubectl("auth whoami", "env " .. as)
  t.eq(rc, 0, err)
  t.like(out, "\nUsername%s+viewer\n")
end)

t.cleanup(S.cleanup)
