-- A RayJob as kubectl sees it: a `hypd sandbox --virtual-clock` process
-- with a HyperPod-ready EKS cluster; KubeRay installed by kubectl apply of
-- the manifest cluster_configure_dependencies applies; a RayJob applied
-- with kubectl runs to Complete; kubectl get rayjob and raycluster print
-- KubeRay's columns, and kubectl logs job/NAME prints the entrypoint's
-- output (the submitter Job's pod).
local t = require "hypd.tap"
local S = dofile("tests/lua/sandbox_k8s_helpers.lua").new()
local H, dir, kubectl = S.H, S.dir, S.kubectl
local until_ok, get_json, skip = S.until_ok, S.get_json, S.skip
t.cleanup(S.cleanup)

t.test("a sandbox with a HyperPod-ready EKS cluster and a kubeconfig", function()
  S.start("rayk-eks", "rayk-hp")
end)

t.test("kubectl apply of the KubeRay manifest: the ray.io kinds are served and the operator runs", function()
  if not S.ready then return skip() end
  local rc, _, err = kubectl("apply -f lua/manifests/kuberay-operator.yaml")
  t.eq(rc, 0, err)
  local pod = until_ok(function()
    local l = get_json("get pods -n kuberay-operator")
    for _, p in ipairs(l and l.items or {}) do
      if (p.status or {}).phase == "Running" then return p end
    end
  end)
  t.ok(pod, "the operator's pod runs")
  local out
  rc, out, err = kubectl("api-resources --api-group=ray.io -o name")
  t.eq(rc, 0, err)
  t.like(out, "rayjobs%.ray%.io")
end)

local JOB = [[
apiVersion: ray.io/v1
kind: RayJob
metadata: {name: hello}
spec:
  entrypoint: python -c "print('hello from the ray driver')"
  shutdownAfterJobFinishes: true
  ttlSecondsAfterFinished: 60
  rayClusterSpec:
    rayVersion: "2.46.0"
    headGroupSpec:
      rayStartParams: {dashboard-host: "0.0.0.0"}
      template:
        spec:
          containers:
          - name: ray-head
            image: rayproject/ray:2.46.0
            resources: {requests: {cpu: "1", memory: 2Gi}}
    workerGroupSpecs:
    - groupName: small
      replicas: 1
      minReplicas: 1
      maxReplicas: 2
      rayStartParams: {}
      template:
        spec:
          containers:
          - name: ray-worker
            image: rayproject/ray:2.46.0
            resources: {requests: {cpu: "1", memory: 2Gi}}
]]

t.test("a RayJob applied with kubectl runs to Complete; kubectl get rayjob prints KubeRay's columns; logs job/NAME",
  function()
    if not S.ready then return skip() end
    H.write(dir .. "/rayjob.yaml", JOB)
    local rc, _, err = kubectl("apply -f " .. H.quote(dir .. "/rayjob.yaml"))
    t.eq(rc, 0, err)
    -- under the virtual clock the job passes Initializing and Running at once
    local done = until_ok(function()
      local j = get_json("get rayjob hello")
      return j and (j.status or {}).jobDeploymentStatus == "Complete" and j
    end, 60)
    t.eq(done and done.status.jobStatus, "SUCCEEDED")
    local cluster = done and done.status.rayClusterName or "?"
    t.eq(done and done.status.rayClusterStatus.desiredMemory, "4Gi", "quantities as the API server prints them")
    local out
    rc, out, err = kubectl("get rayjob hello")
    t.eq(rc, 0, err)
    t.like(out, "JOB STATUS%s+DEPLOYMENT STATUS%s+RAY CLUSTER NAME%s+START TIME%s+END TIME%s+AGE")
    t.like(out, "hello%s+SUCCEEDED%s+Complete%s+" .. cluster:gsub("%p", "%%%0"))
    rc, out, err = kubectl("logs job/hello")
    t.eq(rc, 0, err)
    t.like(out, "Job 'hello%-%w+' submitted successfully")
    t.like(out, "hello from the ray driver", "the entrypoint's output")
    t.like(out, "Job 'hello%-%w+' succeeded")
  end)

t.test("ttlSecondsAfterFinished later the job's RayCluster and its pods are gone; the submitter's logs stay",
  function()
    if not S.ready then return skip() end
    local gone = until_ok(function()
      local l = get_json("get raycluster -l ray.io/originated-from-cr-name=hello")
      return l and #(l.items or {}) == 0
    end, 60)
    t.ok(gone, "the job's cluster is deleted")
    local _, out = kubectl("get pods -l ray.io/node-type -o name")
    t.eq(out, "", "no Ray pods left")
    _, out = kubectl("logs job/hello")
    t.like(out or "", "hello from the ray driver")
  end)

local CLUSTER = [[
apiVersion: ray.io/v1
kind: RayCluster
metadata: {name: standing}
spec:
  rayVersion: "2.46.0"
  headGroupSpec:
    rayStartParams: {}
    template:
      spec:
        containers:
        - {name: ray-head, image: "rayproject/ray:2.46.0", resources: {requests: {cpu: 500m, memory: 1Gi}}}
  workerGroupSpecs:
  - groupName: cpu
    replicas: 2
    minReplicas: 1
    maxReplicas: 3
    rayStartParams: {}
    template:
      spec:
        containers:
        - {name: ray-worker, image: "rayproject/ray:2.46.0", resources: {requests: {cpu: "1", memory: 2Gi}}}
]]

t.test("a RayCluster applied with kubectl gets its head and workers; kubectl get raycluster prints its columns",
  function()
    if not S.ready then return skip() end
    H.write(dir .. "/raycluster.yaml", CLUSTER)
    local rc, _, err = kubectl("apply -f " .. H.quote(dir .. "/raycluster.yaml"))
    t.eq(rc, 0, err)
    local ready = until_ok(function()
      local c = get_json("get raycluster standing")
      return c and (c.status or {}).state == "ready" and c
    end, 60)
    t.ok(ready, "ready")
    local out
    rc, out, err = kubectl("get raycluster standing")
    t.eq(rc, 0, err)
    t.like(out, "DESIRED WORKERS%s+AVAILABLE WORKERS%s+CPUS%s+MEMORY%s+GPUS%s+STATUS%s+AGE")
    t.like(out, "standing%s+2%s+2%s+2500m%s+5Gi%s+0%s+ready")
    rc, out, err = kubectl("get pods -l ray.io/cluster=standing -L ray.io/node-type,ray.io/group")
    t.eq(rc, 0, err)
    t.like(out, "standing%-head%-%w+ .-head%s+headgroup")
    local _, n = out:gsub("standing%-cpu%-worker%-%w+", "")
    t.eq(n, 2, "two workers of group cpu")
  end)
