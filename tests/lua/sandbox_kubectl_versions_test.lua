-- Every kubectl on this machine (1.27 to 1.33) against a sandbox cluster
-- of its version (issue 14): imperative create, apply (create, unchanged,
-- configured), get, strict field validation, explain, delete. kubectl 1.27
-- and 1.28 read OpenAPI v2 for apply, in protobuf; 1.32 and 1.33 send
-- their creates as protobuf. The sandbox's EKS offers 1.28 at the oldest,
-- so kubectl 1.27 runs against 1.28 (inside kubectl's supported skew of one
-- minor version). A kubectl the machine lacks is a skip.
local t = require "hypd.tap"
local K = dofile("tests/lua/sandbox_kubectl_helpers.lua").new("kv")
local H = K.H
t.cleanup(K.cleanup)

local CLUSTERS = { "1.28", "1.29", "1.30", "1.31", "1.32", "1.33" }

local DEPLOY = [[
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {app: web}}
spec:
  replicas: REPLICAS
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: web, image: "nginx:1.27", ports: [{name: http, containerPort: 80}]}
]]

t.test("a sandbox with EKS clusters on Kubernetes 1.28 to 1.33, each with a kubeconfig", function()
  K.start(CLUSTERS)
  H.write(K.dir .. "/web1.yaml", (DEPLOY:gsub("REPLICAS", "1")))
  H.write(K.dir .. "/web2.yaml", (DEPLOY:gsub("REPLICAS", "2")))
  H.write(K.dir .. "/typo.yaml", (DEPLOY:gsub("REPLICAS", "2"):gsub("replicas:", "replicass:")))
end)

for minor = 27, 33 do
  local v = "1." .. minor
  local cluster = minor == 27 and "1.28" or v
  t.test("kubectl " .. v .. " against a " .. cluster .. " cluster: create, apply, get, explain and delete work", function()
    if not K.ready then return K.skip() end
    local bin = K.binary(v)
    if not bin then return t.skip("no kubectl " .. v .. " on this machine") end
    local ns = "v" .. minor
    local function k(args) return K.kubectl(cluster, args, bin) end
    local _, out, err = k("version --client -o json")
    local rc
    t.like(out, '"gitVersion": "v' .. v:gsub("%.", "%%.") .. "%.", err)
    rc, out, err = k("create namespace " .. ns)
    t.eq({ rc, out }, { 0, "namespace/" .. ns .. " created\n" }, err)
    rc, out, err = k("create deployment imperative --image=nginx:1.27 -n " .. ns)
    t.eq({ rc, out }, { 0, "deployment.apps/imperative created\n" }, err)
    -- apply: -v=6 logs the requests, so the OpenAPI v2 fetch of the older kubectls shows
    rc, out, err = k("apply -v=6 -n " .. ns .. " -f " .. H.quote(K.dir .. "/web1.yaml"))
    t.eq({ rc, out:match("deployment%.apps/web %a+") }, { 0, "deployment.apps/web created" }, err)
    if minor <= 28 then t.like(err, "GET https://[^ ]+/openapi/v2%?timeout=%d+s 200 OK") end
    t.ok(not err:match("/openapi/[^ ]* 40%d"), "OpenAPI refused: " .. err)
    rc, out, err = k("apply -n " .. ns .. " -f " .. H.quote(K.dir .. "/web1.yaml"))
    t.eq({ rc, out }, { 0, "deployment.apps/web unchanged\n" }, err)
    rc, out, err = k("apply -n " .. ns .. " -f " .. H.quote(K.dir .. "/web2.yaml"))
    t.eq({ rc, out }, { 0, "deployment.apps/web configured\n" }, err)
    local d = K.get_json(cluster, "get deployment web -n " .. ns, bin)
    t.eq(d and d.spec.replicas, 2)
    rc, out, err = k("get deployments -n " .. ns)
    t.eq(rc, 0, err)
    t.like(out, "^NAME +READY +UP%-TO%-DATE +AVAILABLE +AGE\n")
    t.like(out, "\nimperative ")
    t.like(out, "\nweb ")
    -- every version sends fieldValidation=Strict: a misspelled field is refused
    rc, _, err = k("apply -n " .. ns .. " -f " .. H.quote(K.dir .. "/typo.yaml"))
    t.eq(rc, 1)
    t.like(err, 'strict decoding error: unknown field "spec%.replicass"')
    rc, out, err = k("explain deployment.spec.replicas")
    t.eq(rc, 0, err)
    t.like(out, "Number of desired pods%.")
    rc, out, err = k("delete deployment web imperative -n " .. ns)
    t.eq({ rc, out }, { 0, 'deployment.apps "web" deleted\ndeployment.apps "imperative" deleted\n' }, err)
    rc, out, err = k("delete namespace " .. ns)
    t.eq({ rc, out }, { 0, 'namespace "' .. ns .. '" deleted\n' }, err)
  end)
end
