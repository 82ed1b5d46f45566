-- More of what kubectl and the aws CLI need of the sandbox (issue 14, "What
-- the sandbox must add"): exec, attach, cp and port-forward refused with a
-- Status that says so (never NotFound); S3 presigned URLs (SigV4 query
-- signing; SigV2 refused as S3 refuses it); metrics.k8s.io for kubectl top
-- when the metrics-server add-on is active; server-side apply ownership
-- across --force-conflicts. A `hypd sandbox --virtual-clock` process with a
-- HyperPod-ready EKS cluster, judged by kubectl, the aws CLI, boto3 and curl.
local t = require "hypd.tap"
local core = require "hypd.core"
local json = require "hypd.json"
local H = dofile("tests/lua/helpers.lua")

local dir = H.tmpdir()
local kc = H.kubectl_harness(dir)
local env, pid, absent = {}, nil, nil
local ready, conn = false, nil
local kubectl = kc.kubectl
local function skip() return t.skip(absent or "no cluster: the first test failed to make it") end

-- until_ok(fn [, tries]) -> fn's last answer once it is truthy
local function until_ok(fn, tries)
  local v
  for _ = 1, tries or 100 do
    v = fn()
    if v then return v end
    os.execute("sleep 0.1")
  end
  return v
end

local function get_json(args)
  local rc, out = kubectl(args .. " -o json")
  return rc == 0 and json.decode(out) or nil
end

t.test("a sandbox with a HyperPod-ready EKS cluster, a kubeconfig, and hypd's client on it", function()
  env, pid, absent = H.kubectl_sandbox(dir, kc)
  if absent then return skip() end
  local rc, _, err = kc.sh("python3 tests/tools/hyperpod_cluster.py gaps2-eks gaps2-hp ml.g5.12xlarge 2")
  t.eq(rc, 0, err)
  rc, _, err = kc.sh(H.hypd .. " kubeconfig --cluster gaps2-eks --write " .. H.quote(kc.kc))
  t.eq(rc, 0, err)
  for k, v in pairs(env) do core.setenv(k, v) end
  core.setenv("AWS_PROFILE")
  core.setenv("AWS_SESSION_TOKEN")
  conn = require("hypd.k8s").from_kubeconfig { path = kc.kc }
  ready = rc == 0 and conn ~= nil
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

t.test("kubectl exec, cp, attach and port-forward are refused with a Status that says the sandbox does not offer them", function()
  if not ready then return skip() end
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
  rc, out, err = kubectl("port-forward pod/box 18080:80")
  t.ok(rc ~= 0, "port-forward fails")
  t.like(err, "port%-forward is not offered by the hypd sandbox", out)
  -- the API itself: GET (the WebSocket upgrade) and POST (SPDY) both answer the Status
  for _, m in ipairs { "GET", "POST" } do
    local v, e = conn:call(m, "/api/v1/namespaces/default/pods/box/exec?command=echo&stdout=true")
    t.eq({ v, e and e.status, e and e.code }, { nil, 400, "BadRequest" }, m .. " pods/exec")
    t.like(e and e.message or "", "exec is not offered by the hypd sandbox")
  end
  -- a pod that does not exist is NotFound as the pod, and discovery lists the subresources
  local _, e = conn:call("POST", "/api/v1/namespaces/default/pods/nope/exec?command=echo")
  t.eq(e and e.status, 404)
  local l = assert(conn:call("GET", "/api/v1"))
  local subs = {}
  for _, r in ipairs(l.resources) do if r.name:match("^pods/") then subs[#subs + 1] = r.name end end
  table.sort(subs)
  t.eq(subs, { "pods/attach", "pods/exec", "pods/log", "pods/portforward", "pods/status" })
end)

t.cleanup(function()
  if pid then os.execute("kill " .. tostring(pid) .. " 2>/dev/null") end
  os.execute("rm -rf " .. H.quote(dir))
end)
