-- kubectl (the machine's, a dispatcher that picks the kubectl matching the
-- server's /version) against a sandbox EKS cluster through the kubeconfig
-- `hypd kubeconfig` writes, with `hypd eks-token` as its exec plugin. What
-- it prints is what it prints against a real cluster.
local t = require "hypd.tap"
local json = require "hypd.json"
local H = dofile("tests/lua/helpers.lua")

local dir = H.tmpdir()
local kc = H.kubectl_harness(dir)
local env, pid = {}, nil
local KC = kc.kc
local ready = false

local with_env, kubectl = kc.sh, kc.kubectl
local absent -- why the first test could not make the cluster (nil: it tried)
local function skip() return t.skip(absent or "no cluster: the first test failed to make it") end

t.test("a sandbox with a HyperPod-ready EKS cluster and a kubeconfig from hypd kubeconfig", function()
  env, pid, absent = H.kubectl_sandbox(dir, kc)
  if absent then return skip() end
  t.ok(env.AWS_ENDPOINT_URL, "the sandbox started")
  local rc, out, err = with_env("python3 tests/tools/hyperpod_cluster.py kc-demo hp-demo ml.g5.12xlarge 2")
  t.eq(rc, 0, err)
  t.like(out, "^https://127%.0%.0%.1:%d+")
  rc, out, err = with_env(H.hypd .. " kubeconfig --cluster kc-demo --write " .. H.quote(KC))
  t.eq({ rc, out }, { 0, "" }, err)
  ready = rc == 0
end)

t.test("kubectl version names the cluster's Kubernetes version", function()
  if not ready then return skip() end
  local rc, out, err = kubectl("version -o json")
  t.eq(rc, 0, err)
  local v = json.decode(out)
  t.like(v.serverVersion.gitVersion, "^v1%.34%.%d+%-eks%-")
end)

t.test("kubectl get nodes -o json: the HyperPod nodes with their labels and GPUs", function()
  if not ready then return skip() end
  local rc, out, err = kubectl("get nodes -o json")
  t.eq(rc, 0, err)
  local l = json.decode(out)
  t.eq(l.kind, "List")
  t.eq(#l.items, 2)
  local n = l.items[1]
  t.eq(n.metadata.labels["sagemaker.amazonaws.com/compute-type"], "hyperpod")
  t.eq(n.metadata.labels["node.kubernetes.io/instance-type"], "ml.g5.12xlarge")
  t.eq(n.metadata.labels["sagemaker.amazonaws.com/instance-group-name"], "workers")
  t.eq(n.status.capacity["nvidia.com/gpu"], "4")
  local _, table_out = kubectl("get nodes")
  t.like(table_out, "^NAME%s+STATUS%s+ROLES%s+AGE%s+VERSION\n")
  t.like(table_out, "\nhyperpod%-i%-%x+%s+Ready%s+<none>%s+%S+%s+v1%.34")
end)

t.test("kubectl get pods -A prints every namespace's pods as kubectl does", function()
  if not ready then return skip() end
  local rc, out, err = kubectl("get pods -A")
  t.eq(rc, 0, err)
  t.like(out, "^NAMESPACE%s+NAME%s+READY%s+STATUS%s+RESTARTS%s+AGE\n")
  t.like(out, "\ncert%-manager%s+cert%-manager%-%S+%s+1/1%s+Running%s+0%s+")
end)

local DEPLOY = [[
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels:
    app: web
spec:
  replicas: 2
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: web
        image: nginx:1.27
        ports:
        - containerPort: 80
]]

local HPJ = [[
apiVersion: sagemaker.amazonaws.com/v1
kind: HyperPodPyTorchJob
metadata:
  name: llama-ft
spec:
  nprocPerNode: "4"
  replicaSpecs:
  - name: pods
    replicas: 2
    template:
      spec:
        containers:
        - name: pytorch
          image: 123456789012.dkr.ecr.us-west-2.amazonaws.com/train:latest
          resources:
            limits:
              nvidia.com/gpu: 4
  runPolicy:
    jobMaxRetryCount: 3
    cleanPodPolicy: None
]]

t.test("kubectl apply -f: created, then unchanged; apply --server-side: serverside-applied", function()
  if not ready then return skip() end
  H.write(dir .. "/deploy.yaml", DEPLOY)
  local rc, out, err = kubectl("apply -f " .. H.quote(dir .. "/deploy.yaml"))
  t.eq(rc, 0, err)
  t.eq(out, "deployment.apps/web created\n")
  rc, out, err = kubectl("apply -f " .. H.quote(dir .. "/deploy.yaml"))
  t.eq(rc, 0, err)
  t.eq(out, "deployment.apps/web unchanged\n")
  rc, out, err = kubectl("apply --server-side -f " .. H.quote(dir .. "/deploy.yaml"))
  t.eq(rc, 0, err)
  t.eq(out, "deployment.apps/web serverside-applied\n")
  t.eq(err, "", "no warnings")
  rc, out = kubectl("get deployment web")
  t.eq(rc, 0)
  t.like(out, "^NAME%s+READY%s+UP%-TO%-DATE%s+AVAILABLE%s+AGE\nweb%s+2/2%s+2%s+2%s+")
end)

t.test("kubectl apply of a HyperPodPyTorchJob, client-side and server-side, and get hyperpodpytorchjobs", function()
  if not ready then return skip() end
  H.write(dir .. "/hpj.yaml", HPJ)
  local rc, out, err = kubectl("apply -f " .. H.quote(dir .. "/hpj.yaml"))
  t.eq(rc, 0, err)
  t.eq(out, "hyperpodpytorchjob.sagemaker.amazonaws.com/llama-ft created\n")
  H.write(dir .. "/hpj2.yaml", HPJ:gsub("llama%-ft", "llama-ft2"))
  rc, out, err = kubectl("apply --server-side -f " .. H.quote(dir .. "/hpj2.yaml"))
  t.eq(rc, 0, err)
  t.eq(out, "hyperpodpytorchjob.sagemaker.amazonaws.com/llama-ft2 serverside-applied\n")
  rc, out, err = kubectl("get hyperpodpytorchjobs")
  t.eq(rc, 0, err)
  t.like(out, "^NAME%s")
  t.like(out, "\nllama%-ft%s")
  t.like(out, "\nllama%-ft2%s")
end)

t.test("kubectl logs of a pod prints what its container wrote", function()
  if not ready then return skip() end
  local rc, out, err = kubectl("get pods -l app=web -o json")
  t.eq(rc, 0, err)
  local pod = json.decode(out).items[1].metadata.name
  rc, out, err = kubectl("logs " .. pod)
  t.eq(rc, 0, err)
  t.ok(#out > 0, "the pod has log lines")
end)

t.test("kubectl delete -f waits until the objects are gone", function()
  if not ready then return skip() end
  local rc, out, err = kubectl("delete -f " .. H.quote(dir .. "/deploy.yaml"))
  t.eq(rc, 0, err)
  t.eq(out, 'deployment.apps "web" deleted\n')
  rc, out, err = kubectl("get deployment web")
  t.eq({ rc, out }, { 1, "" })
  t.like(err, 'Error from server %(NotFound%): deployments.apps "web" not found')
  local _, pods = kubectl("get pods -l app=web -o json")
  t.eq(#json.decode(pods).items, 0, "garbage collection took the ReplicaSet's pods")
end)

t.test("a node failed through the sandbox's admin call is replaced (NodeRecovery Automatic)", function()
  if not ready then return skip() end
  local _, out = kubectl("get nodes -o json")
  local name = json.decode(out).items[1].metadata.name
  local rc, said = H.sh("curl -s -X POST -d " .. H.quote(json.encode { cluster = "hp-demo",
    node_id = name:match("^hyperpod%-(.+)$") }) .. " " .. env.AWS_ENDPOINT_URL .. "/_sandbox/nodes/fail")
  t.eq({ rc, said }, { 0, "ok" })
  -- under the sandbox's virtual clock the 10 to 15 minutes of recovery pass at once
  local names = {}
  for _ = 1, 50 do
    local _, now = kubectl("get nodes -o json")
    names = {}
    for _, n in ipairs(json.decode(now).items) do names[#names + 1] = n.metadata.name end
    if #names == 2 and names[1] ~= name and names[2] ~= name then break end
    os.execute("sleep 0.1")
  end
  t.eq(#names, 2)
  t.ok(names[1] ~= name and names[2] ~= name, "the failed node " .. name .. " was replaced")
end)

t.test("kubectl with a token for another cluster is Unauthorized", function()
  if not ready then return skip() end
  local other = H.read(KC):gsub("%- kc%-demo\n", "- kc-other\n")
  H.write(dir .. "/other.kubeconfig", other)
  local rc, _, err = with_env("kubectl --kubeconfig " .. H.quote(dir .. "/other.kubeconfig") .. " --cache-dir " ..
    H.quote(dir .. "/cache2") .. " get pods")
  t.eq(rc, 1)
  -- what kubectl prints for a real EKS cluster that refuses the token
  t.like(err, "error: You must be logged in to the server %(the server has asked for the client to provide credentials%)")
end)

t.cleanup(function()
  if pid then os.execute("kill " .. tostring(pid) .. " 2>/dev/null") end
  os.execute("rm -rf " .. H.quote(dir))
end)
