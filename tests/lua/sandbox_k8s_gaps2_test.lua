-- More of what kubectl and the aws CLI need of the sandbox (issue 14, "What
-- the sandbox must add"): exec, attach and cp refused with a
-- Status that says so (never NotFound); S3 presigned URLs (SigV4 query
-- signing; SigV2 refused as S3 refuses it); metrics.k8s.io for kubectl top
-- when the metrics-server add-on is active; server-side apply ownership
-- across --force-conflicts. A `hypd sandbox --virtual-clock` process with a
-- HyperPod-ready EKS cluster, judged by kubectl, the aws CLI, boto3 and curl.
local t = require "hypd.tap"
local json = require "hypd.json"
local S = dofile("tests/lua/sandbox_k8s_helpers.lua").new()
local H, dir, kc, kubectl = S.H, S.dir, S.kc, S.kubectl
local until_ok, get_json, skip = S.until_ok, S.get_json, S.skip
local conn -- hypd's client, once the first test has made the cluster

t.test("a sandbox with a HyperPod-ready EKS cluster, a kubeconfig, and hypd's client on it", function()
  S.start("gaps2-eks", "gaps2-hp")
  conn = S.conn
end)

local POD = [[
apiVersion: v1
kind: Pod
metadata: {name: box, labels: {app: box}}
spec:
  containers:
  - name: box
    image: "busybox:1.36"
    resources: {requests: {cpu: 250m, memory: 64Mi}}
]]

t.test("kubectl exec, cp and attach are refused with a Status that says the sandbox does not offer them", function()
  if not S.ready then return skip() end
  H.write(dir .. "/pod.yaml", POD)
  local rc, _, err = kubectl("apply -f " .. H.quote(dir .. "/pod.yaml"))
  t.eq(rc, 0, err)
  local p = until_ok(function()
    local x = get_json("get pod box")
    return x and (x.status or {}).phase == "Running" and x
  end)
  t.eq(p and p.status.phase, "Running")
  local out
  rc, out, err = kubectl("exec box -- echo hi")
  t.ok(rc ~= 0, "exec fails")
  t.like(err, "Error from server %(BadRequest%): exec is not offered by the hypd sandbox", out)
  t.ok(not err:match("NotFound"), "never NotFound")
  rc, out, err = kubectl("cp box:/etc/hostname " .. H.quote(dir .. "/hostname"))
  t.ok(rc ~= 0, "cp fails")
  t.like(err, "exec is not offered by the hypd sandbox", out)
  rc, out, err = kubectl("attach box")
  t.ok(rc ~= 0, "attach fails")
  t.like(err, "attach is not offered by the hypd sandbox", out)
  -- port-forward is served (inference_serving_test); a request that is not its WebSocket is refused as the API
  -- server refuses it
  local _, e = conn:call("POST", "/api/v1/namespaces/default/pods/box/portforward")
  t.eq({ e and e.status, e and e.message }, { 400, "Upgrade request required" })
  -- the API itself: GET (the WebSocket upgrade) and POST (SPDY) both answer the Status
  for _, m in ipairs { "GET", "POST" } do
    local v, ee = conn:call(m, "/api/v1/namespaces/default/pods/box/exec?command=echo&stdout=true")
    t.eq({ v, ee and ee.status, ee and ee.code }, { nil, 400, "BadRequest" }, m .. " pods/exec")
    t.like(ee and ee.message or "", "exec is not offered by the hypd sandbox")
  end
  -- a pod that does not exist is NotFound as the pod, and discovery lists the subresources
  _, e = conn:call("POST", "/api/v1/namespaces/default/pods/nope/exec?command=echo")
  t.eq(e and e.status, 404)
  local l = assert(conn:call("GET", "/api/v1"))
  local subs = {}
  for _, r in ipairs(l.resources) do if r.name:match("^pods/") then subs[#subs + 1] = r.name end end
  table.sort(subs)
  t.eq(subs, { "pods/attach", "pods/eviction", "pods/exec", "pods/log", "pods/portforward", "pods/proxy",
    "pods/status" })
end)

-- curl(args) -> rc, body, http status of a curl run
local function curl(args)
  local rc, out = kc.sh("curl -s -w '\\n%{http_code}' " .. args)
  local body, code = (out or ""):match("^(.*)\n(%d+)$")
  return rc, body or out, tonumber(code)
end

t.test("S3 presigned URLs: aws s3 presign and boto3's generate_presigned_url, GET and PUT, path and virtual-host style",
function()
  if not S.ready then return skip() end
  H.write(dir .. "/hello.txt", "hello\n")
  local rc, _, err = kc.sh("aws s3 mb s3://gaps2-presign >/dev/null && aws s3 cp " .. H.quote(dir .. "/hello.txt") ..
    " s3://gaps2-presign/hello.txt")
  t.eq(rc, 0, err)
  -- the CLI signs presigned URLs with SigV4 when the config says s3v4
  H.write(dir .. "/s3v4.cfg", "[default]\ns3 =\n    signature_version = s3v4\n")
  local out
  rc, out, err = kc.sh("AWS_CONFIG_FILE=" .. H.quote(dir .. "/s3v4.cfg") ..
    " aws s3 presign s3://gaps2-presign/hello.txt --region us-west-2 --expires-in 300")
  t.eq(rc, 0, err)
  local url = out:match("^(%S+)")
  t.like(url or "", "X%-Amz%-Algorithm=AWS4%-HMAC%-SHA256&X%-Amz%-Credential=.*&X%-Amz%-Signature=%x+$")
  local code, body
  _, body, code = curl(H.quote(url))
  t.eq({ code, body }, { 200, "hello\n" }, "GET with the CLI's presigned URL")
  -- a tampered signature or key is refused
  _, body, code = curl(H.quote(url:gsub("hello%.txt", "other.txt", 1)))
  t.eq(code, 403)
  t.like(body, "<Code>SignatureDoesNotMatch</Code>")
  -- boto3: GET and PUT, path style and virtual-host style (bucket.localhost)
  H.write(dir .. "/presign.py", [[
import boto3, os, sys
from botocore.config import Config
ep = os.environ["AWS_ENDPOINT_URL"].replace("127.0.0.1", "localhost")
for style in ("path", "virtual"):
    s3 = boto3.client("s3", region_name="us-west-2", endpoint_url=ep,
                      config=Config(signature_version="s3v4", s3={"addressing_style": style}))
    print(s3.generate_presigned_url("get_object", Params={"Bucket": "gaps2-presign", "Key": "hello.txt"}, ExpiresIn=300))
    print(s3.generate_presigned_url("put_object", Params={"Bucket": "gaps2-presign", "Key": "put-" + style + ".txt"},
                                    ExpiresIn=300))
print(s3.generate_presigned_url("get_object", Params={"Bucket": "gaps2-presign", "Key": "hello.txt"}, ExpiresIn=1))
]])
  rc, out, err = kc.sh("python3 " .. H.quote(dir .. "/presign.py"))
  t.eq(rc, 0, err)
  local urls = {}
  for u in (out or ""):gmatch("[^\n]+") do urls[#urls + 1] = u end
  t.eq(#urls, 5)
  t.like(urls[3] or "", "^http://gaps2%-presign%.localhost:%d+/hello%.txt%?", "virtual-host style")
  for i, style in ipairs { "path", "virtual" } do
    _, body, code = curl(H.quote(urls[2 * i - 1] or ""))
    t.eq({ code, body }, { 200, "hello\n" }, "boto3 GET, " .. style)
    H.write(dir .. "/put.txt", "put " .. style .. "\n")
    _, body, code = curl("-X PUT --data-binary @" .. H.quote(dir .. "/put.txt") .. " " .. H.quote(urls[2 * i] or ""))
    t.eq(code, 200, "boto3 PUT, " .. style .. ": " .. tostring(body))
    rc, out = kc.sh("aws s3 cp s3://gaps2-presign/put-" .. style .. ".txt -")
    t.eq({ rc, out }, { 0, "put " .. style .. "\n" }, "the PUT object is there")
  end
  -- expiry is honoured to the second (by both the wall and the virtual clock)
  os.execute("sleep 2.2")
  _, body, code = curl(H.quote(urls[5] or ""))
  t.eq(code, 403)
  t.like(body, "<Code>AccessDenied</Code><Message>Request has expired</Message>")
  t.like(body, "<X%-Amz%-Expires>1</X%-Amz%-Expires>")
  -- more than a week is refused as S3 refuses it
  _, body, code = curl(H.quote((url:gsub("X%-Amz%-Expires=%d+", "X-Amz-Expires=604801"))))
  t.eq(code, 400)
  t.like(body, "<Code>AuthorizationQueryParametersError</Code><Message>X%-Amz%-Expires must be less than a week")
  -- SigV2 (the CLI's default for presign): S3's answer for a bucket that takes SigV4 only
  rc, out, err = kc.sh("aws s3 presign s3://gaps2-presign/hello.txt --region us-west-2")
  t.eq(rc, 0, err)
  t.like(out, "AWSAccessKeyId=.*Signature=.*Expires=%d+")
  _, body, code = curl(H.quote(out:match("^(%S+)") or ""))
  t.eq(code, 400)
  t.like(body, "<Code>InvalidRequest</Code><Message>The authorization mechanism you have provided is not supported. " ..
    "Please use AWS4%-HMAC%-SHA256.</Message>")
end)

t.test("metrics.k8s.io is served only while the metrics-server add-on is ACTIVE; kubectl top nodes and top pods work", function()
  if not S.ready then return skip() end
  -- before the add-on: no group in discovery, and kubectl top says the Metrics API is not available
  local _, e = conn:call("GET", "/apis/metrics.k8s.io/v1beta1/nodes")
  t.eq(e and e.status, 404, "no metrics API without metrics-server")
  local groups = assert(conn:call("GET", "/apis"))
  local has = false
  for _, g in ipairs(groups.groups) do if g.name == "metrics.k8s.io" then has = true end end
  t.eq(has, false, "not in discovery")
  local rc, out, err = kubectl("top nodes --cache-dir " .. H.quote(dir .. "/cache-before"))
  t.ok(rc ~= 0, "kubectl top fails")
  t.like(err, "Metrics API not available", out)
  H.write(dir .. "/addon.py", [[
import boto3, time
eks = boto3.client("eks")
eks.create_addon(clusterName="gaps2-eks", addonName="metrics-server")
for _ in range(600):
    if eks.describe_addon(clusterName="gaps2-eks", addonName="metrics-server")["addon"]["status"] == "ACTIVE":
        print("ACTIVE")
        break
    time.sleep(0.1)
]])
  rc, out, err = kc.sh("python3 " .. H.quote(dir .. "/addon.py"))
  t.eq({ rc, out }, { 0, "ACTIVE\n" }, err)
  groups = until_ok(function()
    local g = conn:call("GET", "/apis/metrics.k8s.io")
    return g and g
  end)
  t.eq(groups and groups.preferredVersion.groupVersion, "metrics.k8s.io/v1beta1", "the group in discovery")
  local l = assert(conn:call("GET", "/apis/metrics.k8s.io/v1beta1"))
  local rs = {}
  for _, r in ipairs(l.resources) do rs[#rs + 1] = r.name .. ":" .. r.kind .. ":" .. table.concat(r.verbs, ",") end
  table.sort(rs)
  t.eq(rs, { "nodes:NodeMetrics:get,list", "pods:PodMetrics:get,list" })
  -- NodeMetrics: one per node, with the usage as metrics-server writes it
  local nm = assert(conn:call("GET", "/apis/metrics.k8s.io/v1beta1/nodes"))
  local nodes = assert(conn:call("GET", "/api/v1/nodes"))
  t.eq({ nm.kind, nm.apiVersion, #nm.items }, { "NodeMetricsList", "metrics.k8s.io/v1beta1", #nodes.items })
  local n1 = nm.items[1] or { usage = {}, metadata = {} }
  t.like(n1.usage.cpu or "", "^%d+n$")
  t.like(n1.usage.memory or "", "^%d+Ki$")
  t.eq(n1.window, "20.031s")
  local one = assert(conn:call("GET", "/apis/metrics.k8s.io/v1beta1/nodes/" .. n1.metadata.name))
  t.eq({ one.kind, one.metadata.name, one.usage.memory }, { "NodeMetrics", n1.metadata.name, n1.usage.memory },
    "get, the same usage as the list (deterministic)")
  -- PodMetrics of the running pod box, from its requests (250m, 64Mi): between 20% and 60%, 30% and 70%
  local pm = assert(conn:call("GET", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/box"))
  t.eq({ pm.kind, pm.metadata.name, pm.containers[1].name }, { "PodMetrics", "box", "box" })
  local cpu = tonumber(pm.containers[1].usage.cpu:match("^(%d+)n$")) / 1e6
  local mem = tonumber(pm.containers[1].usage.memory:match("^(%d+)Ki$")) / 1024
  t.ok(cpu >= 50 and cpu < 150, "cpu " .. cpu .. "m from a 250m request")
  t.ok(mem >= 19 and mem < 45, "memory " .. mem .. "Mi from a 64Mi request")
  _, e = conn:call("GET", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/nope")
  t.eq(e and e.status, 404)
  _, e = conn:call("DELETE", "/apis/metrics.k8s.io/v1beta1/nodes/" .. n1.metadata.name)
  t.eq(e and e.status, 405, "metrics are read-only")
  -- kubectl top
  rc, out, err = kubectl("top nodes")
  t.eq(rc, 0, err)
  t.like(out, "^NAME%s+CPU%(cores%)%s+CPU%(%%%)%s+MEMORY%(bytes%)%s+MEMORY%(%%%)%s*\n")
  t.like(out, "\n" .. n1.metadata.name:gsub("%p", "%%%0") .. "%s+%d+m%s+%d+%%%s+%d+Mi%s+%d+%%")
  rc, out, err = kubectl("top pods -A")
  t.eq(rc, 0, err)
  t.like(out, "^NAMESPACE%s+NAME%s+CPU%(cores%)%s+MEMORY%(bytes%)")
  t.like(out, "\ndefault%s+box%s+%d+m%s+%d+Mi")
  t.like(out, "\nkube%-system%s+metrics%-server%-")
  rc, out, err = kubectl("top pod box --containers")
  t.eq(rc, 0, err)
  t.like(out, "\nbox%s+box%s+%d+m%s+%d+Mi")
  -- the add-on deleted: the API goes away
  rc, _, err = kc.sh("aws eks delete-addon --cluster-name gaps2-eks --addon-name metrics-server >/dev/null")
  t.eq(rc, 0, err)
  local gone = until_ok(function()
    local _, e2 = conn:call("GET", "/apis/metrics.k8s.io/v1beta1/nodes")
    return e2 and e2.status == 404
  end, 300)
  t.ok(gone, "no metrics API once the add-on is deleted")
end)

local SSA_ALICE = [[
apiVersion: apps/v1
kind: Deployment
metadata: {name: ssa, labels: {app: ssa}}
spec:
  replicas: 1
  selector: {matchLabels: {app: ssa}}
  template:
    metadata: {labels: {app: ssa}}
    spec:
      containers:
      - {name: web, image: "nginx:1.27"}
]]
local SSA_BOB = [[
apiVersion: apps/v1
kind: Deployment
metadata: {name: ssa}
spec:
  replicas: 3
  template:
    spec:
      containers:
      - {name: web, image: "nginx:1.28"}
]]

-- owners(obj, path...) -> the sorted managers whose fieldsV1 hold the path
local function owners(obj, ...)
  local out = {}
  for _, m in ipairs(obj.metadata.managedFields or {}) do
    local v = m.fieldsV1
    for _, seg in ipairs { ... } do v = type(v) == "table" and v[seg] or nil end
    if v then out[#out + 1] = m.manager .. "/" .. m.operation end
  end
  table.sort(out)
  return out
end

t.test("server-side apply: a conflict names the fields; --force-conflicts moves their ownership to the new manager", function()
  if not S.ready then return skip() end
  H.write(dir .. "/alice.yaml", SSA_ALICE)
  H.write(dir .. "/bob.yaml", SSA_BOB)
  local _
  local rc, out, err = kubectl("apply --server-side --field-manager=alice -f " .. H.quote(dir .. "/alice.yaml"))
  t.eq({ rc, out }, { 0, "deployment.apps/ssa serverside-applied\n" }, err)
  -- the same manager again: no conflict with itself, nothing changes
  rc, out, err = kubectl("apply --server-side --field-manager=alice -f " .. H.quote(dir .. "/alice.yaml"))
  t.eq({ rc, out }, { 0, "deployment.apps/ssa serverside-applied\n" }, err)
  -- bob sets two fields alice owns to other values: the conflict names both, as the API server words it
  rc, out, err = kubectl("apply --server-side --field-manager=bob -f " .. H.quote(dir .. "/bob.yaml"))
  t.ok(rc ~= 0, "a conflict without --force-conflicts")
  t.like(err, 'Apply failed with 2 conflicts: conflicts with "alice":\n', out)
  t.like(err, '\n%- %.spec%.replicas\n')
  t.like(err, '\n%- %.spec%.template%.spec%.containers%[name="web"%]%.image\n')
  t.ok(not err:find(".metadata", 1, true), "no conflict on .metadata: " .. err)
  -- the Status's causes carry each field
  local body = json.encode { apiVersion = "apps/v1", kind = "Deployment", metadata = { name = "ssa" },
    spec = { replicas = 5 } }
  local v, e = conn:call("PATCH", "/apis/apps/v1/namespaces/default/deployments/ssa?fieldManager=carol",
    { body = body, headers = { ["content-type"] = "application/apply-patch+yaml" } })
  t.eq({ v, e and e.status }, { nil, 409 })
  t.eq(e and e.message, 'Apply failed with 1 conflict: conflict with "alice": .spec.replicas')
  t.eq(e and e.fields, { { field = ".spec.replicas", reason = "FieldManagerConflict", message = 'conflict with "alice"' } })
  -- the same value is no conflict: ownership is shared
  body = json.encode { apiVersion = "apps/v1", kind = "Deployment", metadata = { name = "ssa", labels = { app = "ssa" } } }
  v = assert(conn:call("PATCH", "/apis/apps/v1/namespaces/default/deployments/ssa?fieldManager=dave",
    { body = body, headers = { ["content-type"] = "application/apply-patch+yaml" } }))
  t.eq(owners(v, "f:metadata", "f:labels", "f:app"), { "alice/Apply", "dave/Apply" }, "shared ownership")
  -- forced: bob owns the fields, alice no longer does, and alice keeps the rest
  rc, out, err = kubectl("apply --server-side --force-conflicts --field-manager=bob -f " .. H.quote(dir .. "/bob.yaml"))
  t.eq({ rc, out }, { 0, "deployment.apps/ssa serverside-applied\n" }, err)
  local d = get_json("get deployment ssa --show-managed-fields")
  t.eq(d and { d.spec.replicas, d.spec.template.spec.containers[1].image }, { 3, "nginx:1.28" })
  d = d or { metadata = {} }
  t.eq(owners(d, "f:spec", "f:replicas"), { "bob/Apply" }, "bob owns .spec.replicas")
  local img = { "f:spec", "f:template", "f:spec", "f:containers", 'k:{"name":"web"}', "f:image" }
  t.eq(owners(d, table.unpack(img)), { "bob/Apply" }, "bob owns the image")
  t.eq(owners(d, "f:spec", "f:selector"), { "alice/Apply" }, "alice keeps the selector")
  for _, m in ipairs(d.metadata.managedFields or {}) do
    if m.manager == "alice" then
      t.eq(m.fieldsV1["f:spec"]["f:replicas"], nil, "alice's entry lost .spec.replicas")
    end
  end
  -- alice, now in conflict with bob, is told so
  rc, out, err = kubectl("apply --server-side --field-manager=alice -f " .. H.quote(dir .. "/alice.yaml"))
  t.ok(rc ~= 0)
  t.like(err, 'conflicts with "bob":\n%- %.spec%.replicas\n', out)
  -- an Update manager is named with its apiVersion, as the API server does
  rc, _, err = kubectl("scale deployment/ssa --replicas=4")
  t.eq(rc, 0, err)
  rc, out, err = kubectl("apply --server-side --field-manager=bob -f " .. H.quote(dir .. "/bob.yaml"))
  t.ok(rc ~= 0)
  t.like(err, 'Apply failed with 1 conflict: conflict with "kubectl" using apps/v1: %.spec%.replicas', out)
  -- two managers whose metadata is only the name do not conflict on .metadata
  H.write(dir .. "/cm-erin.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: shared}\ndata: {a: '1'}\n")
  H.write(dir .. "/cm-frank.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: shared}\ndata: {b: '2'}\n")
  rc, _, err = kubectl("apply --server-side --field-manager=erin -f " .. H.quote(dir .. "/cm-erin.yaml"))
  t.eq(rc, 0, err)
  rc, out, err = kubectl("apply --server-side --field-manager=frank -f " .. H.quote(dir .. "/cm-frank.yaml"))
  t.eq({ rc, out }, { 0, "configmap/shared serverside-applied\n" }, err)
  local cm = get_json("get configmap shared --show-managed-fields") or { metadata = {} }
  t.eq(cm.data, { a = "1", b = "2" })
  t.eq({ owners(cm, "f:data", "f:a"), owners(cm, "f:data", "f:b"), owners(cm, "f:metadata") },
    { { "erin/Apply" }, { "frank/Apply" }, {} }, "no one owns a bare .metadata")
end)

t.cleanup(S.cleanup)
