-- What kubectl users do every day, against a `hypd sandbox --virtual-clock`
-- process's HyperPod-ready EKS cluster, each judged by the machine's
-- kubectl (the dispatcher picks the version for the cluster): events in the
-- API server's Table columns and sorted by --sort-by=.lastTimestamp (the
-- rows carry whole objects with includeObject=Object); watches in Table
-- form (`get -w`, `--output-watch-events`: the first event carries the
-- columnDefinitions, later ones none); Deployment rollouts as the
-- Deployment controller does them (revisions, surge, Recreate, history,
-- undo, restart, pause/resume); kubectl describe of pods, deployments,
-- nodes, jobs and services.
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

-- background(args, seconds) -> path: kubectl args running for that many
-- seconds, its output going to the file at path
local function background(args, seconds, name)
  local out = dir .. "/" .. name .. ".out"
  S.kc.sh(string.format("timeout %d kubectl --kubeconfig %s --cache-dir %s %s >%s 2>&1 &", seconds,
    H.quote(S.kc.kc), H.quote(dir .. "/cache"), args, H.quote(out)))
  return out
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
  t.like(out, "%s+kubelet, hyperpod%-i%-%x+%s+Started container nginx%s+%S+%s+1%s+web%-")
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
  local out = background("get pods -l app=web -w", 6, "watch-pods")
  os.execute("sleep 1")
  local rc, _, err = kubectl("scale deployment web --replicas=3")
  t.eq(rc, 0, err)
  local text = until_ok(function()
    local x = H.read(out) or ""
    local n = 0
    for _ in x:gmatch("\n%S+%s+1/1%s+Running%s+0%s+%S+") do n = n + 1 end
    return n >= 3 and x
  end, 60) or H.read(out)
  local l = lines(text)
  t.like(l[1] or "", "^NAME%s+READY%s+STATUS%s+RESTARTS%s+AGE$")
  local headers = 0
  for _, x in ipairs(l) do if x:match("^NAME") then headers = headers + 1 end end
  t.eq(headers, 1, "one header line")
  t.like(text, "\nweb%-%w+%-%w+%s+0/1%s+Pending%s+0%s+%S+\n", "the new pod while it is pending")
  t.ok(not text:find("Unable to decode", 1, true), text)
end)

t.test("kubectl get deploy -w --output-watch-events prints EVENT and the Deployment's columns", function()
  if not S.ready then return skip() end
  local out = background("get deploy web -w --output-watch-events", 6, "watch-deploy")
  os.execute("sleep 1")
  local rc, _, err = kubectl("scale deployment web --replicas=2")
  t.eq(rc, 0, err)
  local text = until_ok(function()
    local x = H.read(out) or ""
    return x:find("\nMODIFIED%s+web%s+2/2%s+2%s+2%s+%S+\n") and x
  end, 60) or H.read(out)
  local l = lines(text)
  t.like(l[1] or "", "^EVENT%s+NAME%s+READY%s+UP%-TO%-DATE%s+AVAILABLE%s+AGE$")
  t.like(l[2] or "", "^ADDED%s+web%s+3/3%s+3%s+3%s+%S+$")
  t.like(text, "\nMODIFIED%s+web%s+%d/2%s+")
end)

t.cleanup(S.cleanup)
