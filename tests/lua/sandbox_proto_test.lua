-- Kubernetes protobuf request bodies (issue 14): kubectl 1.32 and later
-- send their imperative creates as application/vnd.kubernetes.protobuf;
-- the sandbox decodes the built-in kinds from descriptors generated from
-- the upstream generated.proto files (mk/k8s_proto.py ->
-- sandbox.k8s.proto), answers JSON, and answers 415 for a body it cannot
-- decode. The decoder is checked on bytes made here; the API with the
-- machine's kubectl against a 1.34 and a 1.33 cluster.
local t = require "hypd.tap"
local json = require "hypd.json"
local proto = require "sandbox.k8s.protobuf"
local K = dofile("tests/lua/sandbox_kubectl_helpers.lua").new("pb")
t.cleanup(K.cleanup)

-- a protobuf writer, enough to make test bodies
local function varint(n)
  local out = {}
  repeat
    local b = n & 0x7f
    n = n >> 7
    if n ~= 0 then b = b | 0x80 end
    out[#out + 1] = string.char(b)
  until n == 0
  return table.concat(out)
end
local function f(num, v) -- v: an integer (varint), or bytes (length-delimited)
  if math.type(v) == "integer" then return varint(num << 3) .. varint(v) end
  return varint(num << 3 | 2) .. varint(#v) .. v
end
local function envelope(api_version, kind, raw)
  return "k8s\0" .. f(1, f(1, api_version) .. f(2, kind)) .. f(2, raw) .. f(3, "") .. f(4, "")
end

t.test("the decoder turns times, quantities, int-or-strings, bytes, inline fields and Go's omitempty into JSON", function()
  local deploy = f(1, f(1, "web") .. f(3, "") .. f(7, 0) .. f(8, f(1, 1700000000) .. f(2, 0))
    .. f(11, f(1, "app") .. f(2, "web")))
    .. f(2, f(1, 0) -- replicas 0: a pointer in Go, kept
      .. f(5, 0) -- minReadySeconds 0: omitempty, left out
      .. f(7, 0) -- paused false: left out
      .. f(4, f(1, "RollingUpdate") .. f(2, f(1, f(1, 0) .. f(2, 1)) .. f(2, f(1, 1) .. f(3, "25%"))))
      .. f(3, f(1, "") .. f(2, f(1, f(1, "data") .. f(2, f(2, f(1, "Memory"))))
        .. f(2, f(1, "c") .. f(8, f(1, f(1, "cpu") .. f(2, f(1, "500m")))) .. f(6, f(3, 80)) .. f(6, f(3, 81))))))
  local obj, why = proto.decode(envelope("apps/v1", "Deployment", deploy))
  t.ok(obj, why)
  t.eq(json.decode(json.encode(obj)), {
    apiVersion = "apps/v1", kind = "Deployment",
    metadata = { name = "web", creationTimestamp = "2023-11-14T22:13:20Z", labels = { app = "web" } },
    spec = { replicas = 0, strategy = { type = "RollingUpdate", rollingUpdate = { maxUnavailable = 1, maxSurge = "25%" } },
      template = { metadata = {}, spec = {
        volumes = { { name = "data", emptyDir = { medium = "Memory" } } },
        containers = { { name = "c", resources = { limits = { cpu = "500m" } },
          ports = { { containerPort = 80 }, { containerPort = 81 } } } } } } } })
  obj = assert(proto.decode(envelope("v1", "Secret", f(1, f(1, "s")) .. f(2, f(1, "pw") .. f(2, "x\0y")))))
  t.eq(obj.data, { pw = "eAB5" })
  t.eq({ proto.go_duration(3600000000000), proto.go_duration(1500000000), proto.go_duration(300000000),
    proto.go_duration(0) }, { "1h0m0s", "1.5s", "300ms", "0s" })
end)

t.test("a body that is not a built-in kind, or not protobuf at all, is refused by the decoder with the reason", function()
  local obj, why = proto.decode(envelope("sagemaker.amazonaws.com/v1", "HyperPodPyTorchJob", f(1, f(1, "j"))))
  t.eq(obj, nil)
  t.like(why, "no protobuf message for sagemaker.amazonaws.com/v1, Kind=HyperPodPyTorchJob")
  obj, why = proto.decode('{"kind":"Namespace"}')
  t.eq(obj, nil)
  t.like(why, "envelope")
  obj, why = proto.decode(envelope("v1", "Namespace", "\x0a\xff"))
  t.eq(obj, nil)
  t.like(why, "truncated")
end)

t.test("a sandbox with EKS clusters on Kubernetes 1.34 and 1.33, each with a kubeconfig", function()
  K.start { "1.34", "1.33" }
end)

-- kubectl create <args> (or "!<command>") -> the object it made, read back, and what must be in it
local CREATES = {
  { "namespace ns1", "namespace ns1", function(o) return o.status.phase == "Active" end },
  { "deployment web --image=nginx:1.27 --replicas=2 --port=80 -n ns1", "deployment web -n ns1", function(o)
    local c = o.spec.template.spec.containers[1]
    return o.spec.replicas == 2 and o.spec.selector.matchLabels.app == "web" and c.image == "nginx:1.27"
      and c.ports[1].containerPort == 80
  end },
  { "job pi --image=busybox -n ns1 -- echo hi", "job pi -n ns1", function(o)
    return o.spec.template.spec.containers[1].command[2] == "hi" and o.spec.template.spec.restartPolicy == "Never"
  end },
  { "configmap cm --from-literal=a=b -n ns1", "configmap cm -n ns1", function(o) return o.data.a == "b" end },
  { "secret generic s --from-literal=pw=hunter2 -n ns1", "secret s -n ns1", function(o)
    return o.data.pw == "aHVudGVyMg==" and o.type == "Opaque"
  end },
  { "service clusterip svc --tcp=80:8080 -n ns1", "service svc -n ns1", function(o)
    return o.spec.ports[1].port == 80 and o.spec.ports[1].targetPort == 8080 and o.spec.clusterIP:match("^10%.100%.")
  end },
  { "cronjob nightly --image=busybox --schedule='0 3 * * *' -n ns1 -- date", "cronjob nightly -n ns1", function(o)
    return o.spec.schedule == "0 3 * * *" and o.spec.jobTemplate.spec.template.spec.containers[1].command[1] == "date"
  end },
  { "serviceaccount bot -n ns1", "serviceaccount bot -n ns1", function(o) return o.metadata.name == "bot" end },
  { "role reader --verb=get,list --resource=pods -n ns1", "role reader -n ns1", function(o)
    return o.rules[1].verbs[2] == "list" and o.rules[1].resources[1] == "pods"
  end },
  { "rolebinding reader --role=reader --user=bob -n ns1", "rolebinding reader -n ns1", function(o)
    return o.roleRef.name == "reader" and o.subjects[1].name == "bob"
  end },
  { "clusterrole viewer --verb=get --resource=nodes", "clusterrole viewer", function(o)
    return o.rules[1].resources[1] == "nodes"
  end },
  { "clusterrolebinding viewer --clusterrole=viewer --group=ops", "clusterrolebinding viewer", function(o)
    return o.subjects[1].kind == "Group" and o.subjects[1].name == "ops"
  end },
  { "quota q --hard=pods=10,requests.cpu=4 -n ns1", "resourcequota q -n ns1", function(o)
    return o.spec.hard.pods == "10" and o.spec.hard["requests.cpu"] == "4"
  end },
  { "priorityclass high --value=1000 --description=urgent", "priorityclass high", function(o)
    return o.value == 1000 and o.description == "urgent"
  end },
  { "poddisruptionbudget pdb --selector=app=web --min-available=50% -n ns1", "pdb pdb -n ns1", function(o)
    return o.spec.minAvailable == "50%" and o.spec.selector.matchLabels.app == "web"
  end },
  { "ingress ing --rule=foo.com/bar=svc:80 -n ns1", "ingress ing -n ns1", function(o)
    local p = o.spec.rules[1].http.paths[1]
    return o.spec.rules[1].host == "foo.com" and p.path == "/bar" and p.backend.service.port.number == 80
  end },
  { "!autoscale deployment web --min=1 --max=3 --cpu-percent=70 -n ns1", "hpa web -n ns1", function(o)
    -- kubectl 1.32 writes autoscaling/v1, 1.33 autoscaling/v2 (the sandbox converts neither)
    local v2 = o.spec.metrics and o.spec.metrics[1].resource.target.averageUtilization
    return o.spec.maxReplicas == 3 and (v2 or o.spec.targetCPUUtilizationPercentage) == 70
  end },
}

for _, v in ipairs { "1.34", "1.33" } do
  t.test("every imperative kubectl create works on a " .. v .. " cluster, and the objects read back whole", function()
    if not K.ready then return K.skip() end
    for _, c in ipairs(CREATES) do
      local cmd = c[1]:match("^!(.*)") or "create " .. c[1] -- "!": not a create
      local rc, out, err = K.kubectl(v, cmd)
      t.eq(rc, 0, "kubectl " .. cmd .. ": " .. tostring(err))
      t.like(out, c[1]:match("^!") and "autoscaled\n$" or "created\n$", cmd)
      local o = K.get_json(v, "get " .. c[2])
      t.ok(o and c[3](o), "kubectl get " .. c[2] .. ": " .. json.encode(o))
    end
  end)
end

t.test("the kubectl on the dispatcher for 1.34 sends its creates as protobuf (so the test above tested the decoder)", function()
  if not K.ready then return K.skip() end
  local rc, _, err = K.kubectl("1.34", "create configmap traced --from-literal=x=y -v=8")
  t.eq(rc, 0, err)
  t.like(err, "Content%-Type: application/vnd%.kubernetes%.protobuf")
end)

t.test("a protobuf body of a custom resource, or one that is broken, is answered 415 UnsupportedMediaType", function()
  if not K.ready then return K.skip() end
  local conn = K.conn("1.34")
  local headers = { ["content-type"] = "application/vnd.kubernetes.protobuf" }
  local resp = assert(conn:request("POST", "/apis/keda.sh/v1alpha1/namespaces/default/scaledobjects",
    { headers = headers, body = envelope("keda.sh/v1alpha1", "ScaledObject", f(1, f(1, "so"))) }))
  t.eq(resp.status, 415)
  local st = json.decode(resp.body)
  t.eq({ st.kind, st.reason, st.code }, { "Status", "UnsupportedMediaType", 415 })
  resp = assert(conn:request("POST", "/api/v1/namespaces", { headers = headers, body = "not protobuf" }))
  t.eq(resp.status, 415)
end)

t.test("a request that accepts protobuf first is answered in JSON, which kubectl reads", function()
  if not K.ready then return K.skip() end
  local resp = assert(K.conn("1.34"):request("GET", "/api/v1/namespaces/default",
    { headers = { accept = "application/vnd.kubernetes.protobuf,application/json" } }))
  t.eq(resp.status, 200)
  t.like(resp.headers["content-type"], "application/json")
  t.eq(json.decode(resp.body).metadata.name, "default")
end)

t.test("kubectl create token (a protobuf TokenRequest) answers a service account token of a new namespace's default", function()
  if not K.ready then return K.skip() end
  local sys = require "hypd.sys"
  local rc, _, err = K.kubectl("1.34", "create namespace tokens")
  t.eq(rc, 0, err)
  local out
  rc, out, err = K.kubectl("1.34", "create token default -n tokens --duration=2h --audience=sts.amazonaws.com")
  t.eq(rc, 0, err)
  local payload = out:match("^[%w_-]+%.([%w_-]+)%.[%w_-]+%s*$")
  t.ok(payload, "a JWT: " .. out)
  local claims = json.decode(sys.b64decode((payload or ""):gsub("-", "+"):gsub("_", "/") ..
    string.rep("=", (4 - #(payload or "") % 4) % 4)) or "")
  t.eq({ claims and claims.sub, claims and claims.aud, claims and claims.exp - claims.iat },
    { "system:serviceaccount:tokens:default", { "sts.amazonaws.com" }, 7200 })
  rc, _, err = K.kubectl("1.34", "create token nobody -n tokens")
  t.eq(rc, 1)
  t.like(err, 'serviceaccounts "nobody" not found')
end)

t.test("kubectl get prints the API server's columns for the kinds the creates above made", function()
  if not K.ready then return K.skip() end
  local want = {
    pdb = "^NAME +MIN AVAILABLE +MAX UNAVAILABLE +ALLOWED DISRUPTIONS +AGE\npdb +50%% +<none> +0 ",
    quota = "^NAME +AGE +REQUEST +LIMIT\nq +%S+ +pods: %d+/10, requests%.cpu: 0/4 ",
    priorityclass = "^NAME +VALUE +GLOBAL%-DEFAULT +AGE +PREEMPTIONPOLICY\n.*high +1000 +false ",
    ingress = "^NAME +CLASS +HOSTS +ADDRESS +PORTS +AGE\ning +<none> +foo%.com +80 ",
    hpa = "^NAME +REFERENCE +TARGETS +MINPODS +MAXPODS +REPLICAS +AGE\nweb +Deployment/web +cpu: <unknown>/70%% +1 +3 +0 ",
  }
  for kind, pattern in pairs(want) do
    local rc, out, err = K.kubectl("1.33", "get " .. kind .. (kind == "priorityclass" and "" or " -n ns1"))
    t.eq(rc, 0, err)
    t.like(out, pattern, kind)
  end
end)
