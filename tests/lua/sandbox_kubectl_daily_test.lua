-- What kubectl users do every day, against a `hypd sandbox --virtual-clock`
-- process's HyperPod-ready EKS cluster, each judged by the machine's
-- kubectl (the dispatcher picks the version for the cluster): events in the
-- API server's Table columns and sorted by --sort-by=.lastTimestamp (the
-- rows carry whole objects with includeObject=Object), repeated events
-- counted up; watches in Table form (`get -w`, `--output-watch-events`:
-- the first event carries the columnDefinitions, later ones none);
-- Deployment rollouts as the Deployment controller does them (revisions,
-- surge, Recreate, history, undo, restart, pause/resume, the progress
-- deadline), StatefulSet and DaemonSet rollouts (ControllerRevisions);
-- -o wide; kubectl describe of pods, deployments, nodes (their Leases),
-- jobs, services and namespaces.
local t = require "hypd.tap"
local json = require "hypd.json"
local S = dofile("tests/lua/sandbox_k8s_helpers.lua").new()
local H, dir, kubectl = S.H, S.dir, S.kubectl
local until_ok, get_json, skip = S.until_ok, S.get_json, S.skip

t.test("a sandbox with a HyperPod-ready EKS cluster and a Deployment running on it", function()
  S.start("daily-eks", "daily-hp")
  if not S.ready then return end
  local rc, _, err = kubectl("create deployment web --image=nginx:1.27 --replicas=2")
  t.eq(rc, 0, err)
  t.ok(until_ok(function()
    local d = get_json("get deployment web")
    return d and (d.status or {}).availableReplicas == 2
  end), "the Deployment becomes available")
end)

-- lines(text) -> its lines
local function lines(text)
  local out = {}
  for l in (text or ""):gmatch("[^\n]+") do out[#out + 1] = l end
  return out
end

-- watching(args, name, change, done) -> the output of `kubectl args` (a
-- watch, for at most 6 s) once done(output) holds, the kubectl command
-- `change` having run a moment after the watch began
local function watching(args, name, change, done)
  local out = dir .. "/" .. name .. ".out"
  S.kc.sh(string.format("timeout 6 kubectl --kubeconfig %s --cache-dir %s %s >%s 2>&1 &",
    H.quote(S.kc.kc), H.quote(dir .. "/cache"), args, H.quote(out)))
  os.execute("sleep 1")
  local rc, _, err = kubectl(change)
  t.eq(rc, 0, err)
  return until_ok(function()
    local x = H.read(out) or ""
    return done(x) and x
  end, 60) or H.read(out) or ""
end

t.test("kubectl get events prints the API server's columns (LAST SEEN, TYPE, REASON, OBJECT, MESSAGE)", function()
  if not S.ready then return skip() end
  local rc, out, err = kubectl("get events")
  t.eq(rc, 0, err)
  local l = lines(out)
  t.like(l[1] or "", "^LAST SEEN%s+TYPE%s+REASON%s+OBJECT%s+MESSAGE$")
  t.like(out, "\n%S+%s+Normal%s+ScalingReplicaSet%s+deployment/web%s+Scaled up replica set web%-%w+ from 0 to 2\n")
  rc, out, err = kubectl("get events -o wide")
  t.eq(rc, 0, err)
  t.like(lines(out)[1] or "", "^LAST SEEN%s+TYPE%s+REASON%s+OBJECT%s+SUBOBJECT%s+SOURCE%s+MESSAGE%s+FIRST SEEN%s+COUNT%s+NAME$")
  t.like(out, "%s+Started%s+pod/web%-%w+%-%w+%s+spec%.containers{nginx}%s+kubelet, hyperpod%-i%-%x+%s+" ..
    "Started container nginx%s+%S+%s+1%s+web%-")
  -- kubectl events (client-side printing) lists the same events
  rc, out, err = kubectl("events --for deployment/web")
  t.eq(rc, 0, err)
  t.like(out, "ScalingReplicaSet%s+Deployment/web%s+Scaled up replica set web%-%w+ from 0 to 2")
end)

t.test("kubectl get events --sort-by=.lastTimestamp lists every event, oldest first", function()
  if not S.ready then return skip() end
  local all = get_json("get events")
  local rc, out, err = kubectl("get events --sort-by=.lastTimestamp")
  t.eq(rc, 0, err)
  local l = lines(out)
  t.like(l[1] or "", "^LAST SEEN%s+TYPE")
  t.eq(#l - 1, #(all and all.items or {}), "a row for every event")
  rc, out, err = kubectl("get events --sort-by=.lastTimestamp -o custom-columns=T:.lastTimestamp --no-headers")
  t.eq(rc, 0, err)
  local stamps = lines(out)
  local sorted = { table.unpack(stamps) }
  table.sort(sorted)
  t.eq(stamps, sorted, "in lastTimestamp order")
  t.ok(#stamps > 0 and stamps[1]:match("^%d+%-%d+%-%d+T"), "the stamps are read from the events")
end)

t.test("a watch in Table form: the first event carries the columnDefinitions, later ones none", function()
  if not S.ready then return skip() end
  local s, err = S.conn:open_stream("/api/v1/namespaces/default/pods?watch=true&resourceVersion=0",
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json", 30)
  t.ok(s, tostring(err))
  if not s then return end
  local evs = {}
  for line in s:lines() do
    evs[#evs + 1] = json.decode(line)
    if #evs == 2 then break end
  end
  s:close()
  t.eq(#evs, 2)
  local a, b = evs[1] or {}, evs[2] or {}
  t.eq({ a.type, a.object and a.object.kind, b.type, b.object and b.object.kind }, { "ADDED", "Table", "ADDED", "Table" })
  local names = {}
  for _, c in ipairs((a.object or {}).columnDefinitions or {}) do names[#names + 1] = c.name end
  t.eq(table.concat(names, ","), "Name,Ready,Status,Restarts,Age,IP,Node,Nominated Node,Readiness Gates")
  t.eq(b.object and b.object.columnDefinitions, json.null, "no columns after the first event")
  local row = ((b.object or {}).rows or {})[1] or {}
  t.eq({ row.cells and row.cells[2], row.cells and row.cells[3], row.object and row.object.kind },
    { "1/1", "Running", "PartialObjectMetadata" })
end)

t.test("kubectl get pods -w prints each change as a row in the server's columns", function()
  if not S.ready then return skip() end
  local text = watching("get pods -l app=web -w", "watch-pods", "scale deployment web --replicas=3", function(x)
    local n = 0
    for _ in x:gmatch("\n%S+%s+1/1%s+Running%s+0%s+%S+") do n = n + 1 end
    return n >= 3
  end)
  local l = lines(text)
  t.like(l[1] or "", "^NAME%s+READY%s+STATUS%s+RESTARTS%s+AGE$")
  local headers = 0
  for _, x in ipairs(l) do if x:match("^NAME") then headers = headers + 1 end end
  t.eq(headers, 1, "one header line")
  t.like(text, "\nweb%-%w+%-%w+%s+0/1%s+Pending%s+0%s+%S+\n", "the new pod while it is pending")
  t.like(text, "\nweb%-%w+%-%w+%s+0/1%s+ContainerCreating%s+0%s+%S+\n", "then while its node sets it up")
  t.ok(not text:find("Unable to decode", 1, true), text)
end)

t.test("kubectl get deploy -w --output-watch-events prints EVENT and the Deployment's columns", function()
  if not S.ready then return skip() end
  local text = watching("get deploy web -w --output-watch-events", "watch-deploy", "scale deployment web --replicas=2",
    function(x) return x:find("\nMODIFIED%s+web%s+2/2%s+2%s+2%s+%S+\n") end)
  local l = lines(text)
  t.like(l[1] or "", "^EVENT%s+NAME%s+READY%s+UP%-TO%-DATE%s+AVAILABLE%s+AGE$")
  t.like(l[2] or "", "^ADDED%s+web%s+3/3%s+3%s+3%s+%S+$")
  t.like(text, "\nMODIFIED%s+web%s+%d/2%s+")
end)

-- rs_of(app) -> { [revision] = ReplicaSet } of the Deployment app, and the list
local function rs_of(app)
  local l = get_json("get rs -l app=" .. app) or { items = {} }
  local by = {}
  for _, rs in ipairs(l.items) do by[tonumber(rs.metadata.annotations["deployment.kubernetes.io/revision"])] = rs end
  return by, l.items
end

local function rolled(app)
  local rc, out, err = kubectl("rollout status deployment/" .. app .. " --timeout=60s")
  t.eq(rc, 0, err)
  t.like(out, 'deployment "' .. app .. '" successfully rolled out\n$')
end

t.test("a rolling update makes revision 2 within maxSurge/maxUnavailable; rollout status, history and undo follow it", function()
  if not S.ready then return skip() end
  local rc, out, err = kubectl("create deployment roll --image=nginx:1.26 --replicas=4")
  t.eq(out, "deployment.apps/roll created\n")
  t.eq(rc, 0, err)
  rolled("roll")
  local d = get_json("get deployment roll")
  t.eq({ d.spec.strategy.type, d.spec.strategy.rollingUpdate.maxSurge, d.spec.strategy.rollingUpdate.maxUnavailable,
    d.spec.revisionHistoryLimit, d.spec.progressDeadlineSeconds }, { "RollingUpdate", "25%", "25%", 10, 600 },
    "the API server's defaults")
  rc, out, err = kubectl("annotate deployment roll kubernetes.io/change-cause=first")
  t.eq({ rc, out }, { 0, "deployment.apps/roll annotated\n" }, err)
  rc, out, err = kubectl("set image deployment/roll nginx=nginx:1.27")
  t.eq({ rc, out }, { 0, "deployment.apps/roll image updated\n" }, err)
  rolled("roll")
  local by, all = rs_of("roll")
  t.eq(#all, 2, "one ReplicaSet per template")
  t.eq({ by[1] and by[1].spec.replicas, by[2] and by[2].spec.replicas }, { 0, 4 }, "the old one kept at 0")
  t.eq({ by[2].metadata.annotations["deployment.kubernetes.io/desired-replicas"],
    by[2].metadata.annotations["deployment.kubernetes.io/max-replicas"] }, { "4", "5" })
  d = get_json("get deployment roll")
  t.eq(d.metadata.annotations["deployment.kubernetes.io/revision"], "2")
  t.eq(d.status.observedGeneration, d.metadata.generation)
  local conds = {}
  for _, c in ipairs(d.status.conditions) do conds[c.type] = c.status .. "/" .. c.reason end
  t.eq(conds, { Available = "True/MinimumReplicasAvailable", Progressing = "True/NewReplicaSetAvailable" })
  -- never more than 4 + 1 pods, never fewer than 4 - 1 available: the
  -- ScalingReplicaSet events, in the order they were made
  local evs = S.conn:list("v1", "Event", { namespace = "default", fields = { ["involvedObject.name"] = "roll",
    ["involvedObject.kind"] = "Deployment" } }) or {}
  table.sort(evs, function(a, b) return tonumber(a.metadata.resourceVersion) < tonumber(b.metadata.resourceVersion) end)
  local size, steps = {}, {}
  for _, e in ipairs(evs) do
    local rs, to = e.message:match("^Scaled %a+ replica set (%S+) from %d+ to (%d+)$")
    if rs then
      size[rs] = tonumber(to)
      local n = 0
      for _, v in pairs(size) do n = n + v end
      steps[#steps + 1] = n
    end
  end
  t.ok(#steps >= 4, "the rollout went in steps: " .. table.concat(steps, ","))
  for _, n in ipairs(steps) do t.ok(n <= 5 and n >= 3, "4 replicas +1 surge -1 unavailable: " .. table.concat(steps, ",")) end
  rc, out, err = kubectl("rollout history deployment/roll")
  t.eq(rc, 0, err)
  t.like(out, "\n1%s+first\n2%s+first\n")
  -- undo: the revision-1 ReplicaSet comes back as revision 3
  rc, out, err = kubectl("rollout undo deployment/roll")
  t.eq({ rc, out }, { 0, "deployment.apps/roll rolled back\n" }, err)
  rolled("roll")
  by, all = rs_of("roll")
  t.eq(#all, 2, "the old ReplicaSet is reused")
  t.eq({ by[3] and by[3].spec.template.spec.containers[1].image, by[3] and by[3].spec.replicas,
    by[2] and by[2].spec.replicas }, { "nginx:1.26", 4, 0 })
  t.eq(by[3] and by[3].metadata.annotations["deployment.kubernetes.io/revision-history"], "1")
  t.eq(get_json("get deployment roll").metadata.annotations["deployment.kubernetes.io/revision"], "3")
end)

t.test("rollout restart makes a new revision; pause holds a template change until resume", function()
  if not S.ready then return skip() end
  local rc, out, err = kubectl("rollout restart deployment/roll")
  t.eq({ rc, out }, { 0, "deployment.apps/roll restarted\n" }, err)
  rolled("roll")
  local by = rs_of("roll")
  t.ok(by[4] and by[4].spec.template.metadata.annotations["kubectl.kubernetes.io/restartedAt"], "revision 4 restarted")
  rc, out, err = kubectl("rollout pause deployment/roll")
  t.eq({ rc, out }, { 0, "deployment.apps/roll paused\n" }, err)
  rc, out, err = kubectl("set image deployment/roll nginx=nginx:1.28")
  t.eq({ rc, out }, { 0, "deployment.apps/roll image updated\n" }, err)
  local d = until_ok(function()
    local x = get_json("get deployment roll")
    return x and x.status.observedGeneration == x.metadata.generation and x
  end)
  local prog
  for _, c in ipairs(d.status.conditions) do if c.type == "Progressing" then prog = c end end
  t.eq({ prog and prog.status, prog and prog.reason }, { "Unknown", "DeploymentPaused" })
  local _, all = rs_of("roll")
  t.eq(#all, 3, "no new ReplicaSet while paused")
  local rc2, _, err2 = kubectl("rollout undo deployment/roll")
  t.eq(rc2, 1, "no undo of a paused Deployment")
  t.like(err2, "you cannot rollback a paused deployment")
  rc, _, err = kubectl("rollout resume deployment/roll")
  t.eq(rc, 0, err)
  rolled("roll")
  by = rs_of("roll")
  t.eq(by[5] and by[5].spec.template.spec.containers[1].image, "nginx:1.28")
end)

t.test("Recreate stops every old pod before the new ones start; revisionHistoryLimit keeps that many old ReplicaSets", function()
  if not S.ready then return skip() end
  H.write(dir .. "/rec.yaml", [[
apiVersion: apps/v1
kind: Deployment
metadata: {name: rec}
spec:
  replicas: 3
  revisionHistoryLimit: 1
  strategy: {type: Recreate}
  selector: {matchLabels: {app: rec}}
  template:
    metadata: {labels: {app: rec}}
    spec:
      containers: [{name: c, image: "busybox:1.36", command: [sleep, "3600"]}]
]])
  local rc, _, err = kubectl("apply -f " .. H.quote(dir .. "/rec.yaml"))
  t.eq(rc, 0, err)
  rolled("rec")
  for _, v in ipairs { "1.35", "1.34", "1.33" } do
    rc, _, err = kubectl("set image deployment/rec c=busybox:" .. v)
    t.eq(rc, 0, err)
    rolled("rec")
  end
  local by, all = rs_of("rec")
  t.eq(#all, 2, "the new ReplicaSet and one old one")
  t.eq({ by[4] and by[4].spec.replicas, by[3] and by[3].spec.replicas }, { 3, 0 })
  -- in the order the controller made them: each scale-down to 0 before the next scale-up
  local evs = S.conn:list("v1", "Event", { namespace = "default", fields = { ["involvedObject.name"] = "rec" } }) or {}
  table.sort(evs, function(a, b) return tonumber(a.metadata.resourceVersion) < tonumber(b.metadata.resourceVersion) end)
  local seq = {}
  for _, e in ipairs(evs) do
    local dir_, to = e.message:match("^Scaled (%a+) replica set %S+ from %d+ to (%d+)$")
    if dir_ then seq[#seq + 1] = dir_ .. to end
  end
  t.eq(table.concat(seq, ","), "up3,down0,up3,down0,up3,down0,up3")
end)

t.test("a Deployment that cannot progress times out: rollout status fails with its progress deadline", function()
  if not S.ready then return skip() end
  H.write(dir .. "/big.yaml", [[
apiVersion: apps/v1
kind: Deployment
metadata: {name: big}
spec:
  replicas: 1
  progressDeadlineSeconds: 120
  selector: {matchLabels: {app: big}}
  template:
    metadata: {labels: {app: big}}
    spec:
      containers: [{name: c, image: "nginx:1.27", resources: {limits: {nvidia.com/gpu: 99}}}]
]])
  local rc, _, err = kubectl("apply -f " .. H.quote(dir .. "/big.yaml"))
  t.eq(rc, 0, err)
  local out
  rc, out, err = kubectl("rollout status deployment/big --timeout=60s")
  t.eq(rc, 1, out)
  t.like(err, 'error: deployment "big" exceeded its progress deadline')
  local d = get_json("get deployment big")
  local prog
  for _, c in ipairs(d and d.status.conditions or {}) do if c.type == "Progressing" then prog = c end end
  t.eq({ prog and prog.status, prog and prog.reason }, { "False", "ProgressDeadlineExceeded" })
  t.like(prog and prog.message or "", '^ReplicaSet "big%-%w+" has timed out progressing%.$')
  -- its pod: the requests default to the limits; the scheduler says why it waits
  local pods = get_json("get pods -l app=big") or { items = {} }
  rc, out, err = kubectl("describe pod " .. (pods.items[1] and pods.items[1].metadata.name or "none"))
  t.eq(rc, 0, err)
  t.like(out, "\n%s+Limits:\n%s+nvidia%.com/gpu:%s+99\n%s+Requests:\n%s+nvidia%.com/gpu:%s+99\n")
  t.like(out, "\n%s+Warning%s+FailedScheduling%s+.-default%-scheduler%s+0/2 nodes are available: " ..
    "2 Insufficient nvidia%.com/gpu%.")
  rc, _, err = kubectl("delete deployment big")
  t.eq(rc, 0, err)
end)

t.test("kubectl describe pod and deployment: the controller, strategy, ReplicaSets and events", function()
  if not S.ready then return skip() end
  local pods = get_json("get pods -l app=web") or { items = {} }
  local pod = pods.items[1] and pods.items[1].metadata.name or "none"
  local rc, out, err = kubectl("describe pod " .. pod)
  t.eq(rc, 0, err)
  t.like(out, "\nControlled By:%s+ReplicaSet/web%-%w+\n")
  t.like(out, "\nEvents:\n%s+Type%s+Reason%s+Age%s+From%s+Message\n")
  t.like(out, "\n%s+Normal%s+Scheduled%s+%S+%s+default%-scheduler%s+Successfully assigned default/" .. pod:gsub("%-", "%%-"))
  t.like(out, "\n%s+Normal%s+Created%s+%S+%s+kubelet%s+Created container: nginx\n")
  t.like(out, "\n%s+Normal%s+Started%s+%S+%s+kubelet%s+Started container nginx\n")
  rc, out, err = kubectl("describe deployment roll")
  t.eq(rc, 0, err)
  t.like(out, "\nStrategyType:%s+RollingUpdate\n")
  t.like(out, "\nRollingUpdateStrategy:%s+25%% max unavailable, 25%% max surge\n")
  t.like(out, "\nReplicas:%s+4 desired | 4 updated | 4 total | 4 available | 0 unavailable\n")
  t.like(out, "\n%s+Progressing%s+True%s+NewReplicaSetAvailable\n")
  t.like(out, "\nNewReplicaSet:%s+roll%-%w+ %(4/4 replicas created%)\n")
  t.like(out, "\n%s+Normal%s+ScalingReplicaSet%s+%S+%s+deployment%-controller%s+Scaled up replica set roll%-")
end)

t.test("kubectl get -o wide shows the workloads' CONTAINERS, IMAGES and SELECTOR", function()
  if not S.ready then return skip() end
  local rc, out, err = kubectl("get deployment roll -o wide")
  t.eq(rc, 0, err)
  t.like(out, "^NAME%s+READY%s+UP%-TO%-DATE%s+AVAILABLE%s+AGE%s+CONTAINERS%s+IMAGES%s+SELECTOR\n" ..
    "roll%s+4/4%s+4%s+4%s+%S+%s+nginx%s+nginx:1%.28%s+app=roll\n$")
  rc, out, err = kubectl("get rs -l app=roll -o wide")
  t.eq(rc, 0, err)
  t.like(out, "\nroll%-%w+%s+4%s+4%s+4%s+%S+%s+nginx%s+nginx:1%.28%s+app=roll,pod%-template%-hash=%w+\n")
  rc, out, err = kubectl("get service kubernetes -o wide")
  t.eq(rc, 0, err)
  t.like(out, "^NAME%s+TYPE%s+CLUSTER%-IP%s+EXTERNAL%-IP%s+PORT%(S%)%s+AGE%s+SELECTOR\n")
end)

t.test("kubectl describe node shows its Lease; describe job and service print whole", function()
  if not S.ready then return skip() end
  local nodes = get_json("get nodes") or { items = {} }
  local node = nodes.items[1] and nodes.items[1].metadata.name or "none"
  local rc, out, err = kubectl("describe node " .. node)
  t.eq(rc, 0, err)
  t.like(out, "\nLease:\n%s+HolderIdentity:%s+" .. node:gsub("%-", "%%-") .. "\n%s+AcquireTime:%s+<unset>\n%s+RenewTime:%s+%a+, ")
  t.ok(not out:find("Failed to get lease", 1, true), "the Lease is found")
  t.like(out, "\nNon%-terminated Pods:%s+%(%d+ in total%)\n")
  local out2
  rc, out2, err = kubectl("create job once --image=busybox:1.36 -- echo hi")
  t.eq({ rc, out2 }, { 0, "job.batch/once created\n" }, err)
  t.ok(until_ok(function()
    local j = get_json("get job once")
    return j and (j.status or {}).succeeded == 1
  end), "the Job completes")
  rc, out, err = kubectl("describe job once")
  t.eq(rc, 0, err)
  t.like(out, "\nLabels:%s+batch%.kubernetes%.io/controller%-uid=[%x%-]+\n%s+batch%.kubernetes%.io/job%-name=once\n")
  t.like(out, "\nCompletions:%s+1\n")
  t.like(out, "\nPods Statuses:%s+0 Active %(0 Ready%) / 1 Succeeded / 0 Failed\n")
  t.like(out, "\n%s+Normal%s+SuccessfulCreate%s+%S+%s+job%-controller%s+Created pod: once%-%w+\n")
  rc, out2, err = kubectl("expose deployment web --port=80")
  t.eq({ rc, out2 }, { 0, "service/web exposed\n" }, err)
  local svc = until_ok(function()
    local x, o = kubectl("describe service web")
    return x == 0 and o:find("\nEndpoints:%s+10%.") and o
  end)
  rc, out, err = kubectl("describe service web")
  t.eq(rc, 0, err)
  t.ok(svc, out .. (err or ""))
  t.like(out, "\nPort:%s+<unset>%s+80/TCP\nTargetPort:%s+80/TCP\nEndpoints:%s+[%d%.]+:80")
end)

t.test("kubectl describe namespace: the name label the API server sets, no quota, no LimitRange", function()
  if not S.ready then return skip() end
  local rc, out, err = kubectl("create namespace team-a")
  t.eq({ rc, out }, { 0, "namespace/team-a created\n" }, err)
  rc, out, err = kubectl("describe namespace team-a")
  t.eq(rc, 0, err)
  t.eq(out, "Name:         team-a\nLabels:       kubernetes.io/metadata.name=team-a\nAnnotations:  <none>\n" ..
    "Status:       Active\n\nNo resource quota.\n\nNo LimitRange resource.\n")
  rc, out, err = kubectl("label namespace team-a kubernetes.io/metadata.name-")
  t.eq({ rc, out }, { 0, "namespace/team-a unlabeled\n" }, err)
  t.eq(((get_json("get namespace team-a") or {}).metadata or {}).labels, { ["kubernetes.io/metadata.name"] = "team-a" },
    "the label cannot be taken away")
  rc, out, err = kubectl("get limitranges -n team-a")
  t.eq({ rc, err }, { 0, "No resources found in team-a namespace.\n" }, out)
end)

t.test("StatefulSet and DaemonSet rollouts: status, a rolling update from the highest ordinal, history and undo", function()
  if not S.ready then return skip() end
  H.write(dir .. "/sets.yaml", [[
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  replicas: 2
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: db, image: "postgres:16"}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers: [{name: a, image: "busybox:1.36", command: [sleep, "3600"]}]
]])
  local rc, out, err = kubectl("apply -f " .. H.quote(dir .. "/sets.yaml"))
  t.eq({ rc, out }, { 0, "statefulset.apps/db created\ndaemonset.apps/agent created\n" }, err)
  rc, out, err = kubectl("rollout status statefulset/db --timeout=60s")
  t.eq(rc, 0, err)
  t.like(out, "partitioned roll out complete: 2 new pods have been updated%.%.%.\n$")
  rc, out, err = kubectl("rollout status daemonset/agent --timeout=60s")
  t.eq(rc, 0, err)
  t.like(out, 'daemon set "agent" successfully rolled out\n$')
  local set = get_json("get statefulset db")
  t.eq({ set.spec.updateStrategy.type, set.spec.updateStrategy.rollingUpdate.partition, set.spec.podManagementPolicy,
    set.spec.revisionHistoryLimit }, { "RollingUpdate", 0, "OrderedReady", 10 }, "the API server's defaults")
  rc, out, err = kubectl("set image statefulset/db db=postgres:17")
  t.eq({ rc, out }, { 0, "statefulset.apps/db image updated\n" }, err)
  rc, out, err = kubectl("rollout status statefulset/db --timeout=60s")
  t.eq(rc, 0, err)
  t.like(out, "partitioned roll out complete: 2 new pods have been updated%.%.%.\n$")
  set = get_json("get statefulset db")
  t.eq({ set.status.updatedReplicas, set.status.currentRevision == set.status.updateRevision }, { 2, true })
  local pods = get_json("get pods -l app=db") or { items = {} }
  local images = {}
  for _, p in ipairs(pods.items) do
    images[p.metadata.name] = p.spec.containers[1].image
    t.eq(p.metadata.labels["controller-revision-hash"], set.status.updateRevision)
  end
  t.eq(images, { ["db-0"] = "postgres:17", ["db-1"] = "postgres:17" })
  -- db-1 went first: the SuccessfulDelete events, in the order they were made
  local evs = S.conn:list("v1", "Event", { namespace = "default", fields = { ["involvedObject.name"] = "db",
    ["reason"] = "SuccessfulDelete" } }) or {}
  table.sort(evs, function(a, b) return tonumber(a.metadata.resourceVersion) < tonumber(b.metadata.resourceVersion) end)
  local order = {}
  for _, e in ipairs(evs) do order[#order + 1] = e.message:match("^delete Pod (%S+)") end
  t.eq(order, { "db-1", "db-0" })
  rc, out, err = kubectl("rollout history statefulset/db")
  t.eq(rc, 0, err)
  t.like(out, "REVISION%s+CHANGE%-CAUSE\n1%s+<none>\n2%s+<none>\n")
  rc, out, err = kubectl("rollout undo statefulset/db")
  t.eq({ rc, out }, { 0, "statefulset.apps/db rolled back\n" }, err)
  rc, out, err = kubectl("rollout status statefulset/db --timeout=60s")
  t.eq(rc, 0, err)
  t.like(out, "partitioned roll out complete: 2 new pods have been updated%.%.%.\n$")
  t.eq(get_json("get statefulset db").spec.template.spec.containers[1].image, "postgres:16")
  rc, out, err = kubectl("rollout history statefulset/db")
  t.eq(rc, 0, err)
  t.like(out, "REVISION%s+CHANGE%-CAUSE\n2%s+<none>\n3%s+<none>\n")
  rc, out, err = kubectl("get controllerrevisions -l app=db")
  t.eq(rc, 0, err)
  t.like(out, "^NAME%s+CONTROLLER%s+REVISION%s+AGE\ndb%-%w+%s+statefulset%.apps/db%s+2%s+")
  -- the DaemonSet: restart makes revision 2, every pod replaced
  rc, out, err = kubectl("rollout restart daemonset/agent")
  t.eq({ rc, out }, { 0, "daemonset.apps/agent restarted\n" }, err)
  rc, out, err = kubectl("rollout status daemonset/agent --timeout=60s")
  t.eq(rc, 0, err)
  t.like(out, 'daemon set "agent" successfully rolled out\n$')
  rc, out, err = kubectl("rollout history daemonset/agent")
  t.eq(rc, 0, err)
  t.like(out, "REVISION%s+CHANGE%-CAUSE\n1%s+<none>\n2%s+<none>\n")
end)

t.test("the same event again counts up (count, lastTimestamp) and kubectl describe shows it as (x2 over ...)", function()
  if not S.ready then return skip() end
  H.write(dir .. "/twice.yaml", [[
apiVersion: apps/v1
kind: Deployment
metadata: {name: twice}
spec:
  replicas: 1
  selector: {matchLabels: {app: twice}}
  template:
    metadata: {labels: {app: twice}}
    spec:
      containers: [{name: c, image: "nginx:1.27"}]
]])
  local rc, _, err = kubectl("apply -f " .. H.quote(dir .. "/twice.yaml"))
  t.eq(rc, 0, err)
  rolled("twice")
  for _, n in ipairs { 2, 1, 2 } do
    rc, _, err = kubectl("scale deployment twice --replicas=" .. n)
    t.eq(rc, 0, err)
    rolled("twice")
  end
  local evs = S.conn:list("v1", "Event", { namespace = "default", fields = { ["involvedObject.name"] = "twice" } }) or {}
  local counts = {}
  for _, e in ipairs(evs) do
    local m = e.message:match("^Scaled %a+ replica set twice%-%w+ (from %d to %d)$")
    if m then counts[m] = (counts[m] or 0) + e.count end
  end
  t.eq(counts, { ["from 0 to 1"] = 1, ["from 1 to 2"] = 2, ["from 2 to 1"] = 1 })
  local n = 0
  for _, e in ipairs(evs) do if e.message:match("from 1 to 2$") then n = n + 1 end end
  t.eq(n, 1, "one Event for both")
  local out
  rc, out, err = kubectl("describe deployment twice")
  t.eq(rc, 0, err)
  t.like(out, "Normal%s+ScalingReplicaSet%s+%S+ %(x2 over %S+%)%s+deployment%-controller%s+" ..
    "Scaled up replica set twice%-%w+ from 1 to 2\n")
end)

t.cleanup(S.cleanup)
