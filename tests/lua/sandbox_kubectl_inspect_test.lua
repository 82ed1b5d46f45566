-- What a kubectl user inspects on a `hypd sandbox --virtual-clock`
-- process's HyperPod-ready EKS cluster is there, as on EKS (issue 23):
-- storage.k8s.io (the default gp2 StorageClass, the CSIDrivers of the CSI
-- add-ons installed, a CSINode per node), container log timestamps from
-- the sandbox's clock, and node heartbeats (Leases renewed as simulated
-- time passes).
local t = require "hypd.tap"
local S = dofile("tests/lua/sandbox_k8s_helpers.lua").new()
local H, kubectl = S.H, S.kubectl
local until_ok, get_json, skip = S.until_ok, S.get_json, S.skip

local function lines(text)
  local out = {}
  for l in (text or ""):gmatch("[^\n]+") do out[#out + 1] = l end
  return out
end

local function epoch(ts) return require("sandbox.k8s.table").epoch(ts) end

-- the sandbox's clock now: the creationTimestamp of a new object
local function sandbox_now(name)
  local rc, _, err = kubectl("create configmap " .. name)
  t.eq(rc, 0, err)
  local cm = get_json("get configmap " .. name) or { metadata = {} }
  return epoch(cm.metadata.creationTimestamp)
end

t.test("a sandbox with a HyperPod-ready EKS cluster", function()
  S.start("inspect-eks", "inspect-hp")
end)

t.test("storage.k8s.io/v1 is discovered with its kinds", function()
  if not S.ready then return skip() end
  local rc, out, err = kubectl("api-resources --api-group=storage.k8s.io --no-headers")
  t.eq(rc, 0, err)
  for _, name in ipairs { "csidrivers", "csinodes", "storageclasses", "volumeattachments" } do
    t.like(out, "\n?" .. name .. "%s", name .. " is listed")
  end
  t.like(out, "storageclasses%s+sc%s+storage%.k8s%.io/v1%s+false%s+StorageClass", "sc, cluster-scoped")
end)

t.test("kubectl get storageclass shows the gp2 class EKS makes (the default one below Kubernetes 1.30)", function()
  if not S.ready then return skip() end
  local v = get_json("version") or {}
  local minor = tonumber(((v.serverVersion or {}).minor or ""):match("%d+"))
  t.ok(minor, "the server's minor version: " .. tostring((v.serverVersion or {}).minor))
  local default = minor and minor < 30
  local rc, out, err = kubectl("get storageclass")
  t.eq(rc, 0, err)
  local l = lines(out)
  t.like(l[1] or "", "^NAME%s+PROVISIONER%s+RECLAIMPOLICY%s+VOLUMEBINDINGMODE%s+ALLOWVOLUMEEXPANSION%s+AGE$")
  t.like(l[2] or "", "^gp2" .. (default and " %(default%)" or "") .. "%s+kubernetes%.io/aws%-ebs%s+Delete%s+" ..
    "WaitForFirstConsumer%s+false%s+%S+$")
  local sc = get_json("get sc gp2") or {}
  t.eq(((sc.metadata or {}).annotations or {})["storageclass.kubernetes.io/is-default-class"], default and "true" or nil)
  t.eq(sc.provisioner, "kubernetes.io/aws-ebs")
  t.eq((sc.parameters or {}).type, "gp2")
  t.eq((sc.parameters or {}).fsType, "ext4")
  t.eq(sc.reclaimPolicy, "Delete")
  t.eq(sc.volumeBindingMode, "WaitForFirstConsumer")
end)

t.test("a StorageClass a user applies gets the API server's defaults; one with no provisioner is refused", function()
  if not S.ready then return skip() end
  local f = S.dir .. "/sc.yaml"
  H.write(f, "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: fast\nprovisioner: fsx.csi.aws.com\n")
  local rc, _, err = kubectl("apply -f " .. H.quote(f))
  t.eq(rc, 0, err)
  local sc = get_json("get sc fast") or {}
  t.eq(sc.reclaimPolicy, "Delete")
  t.eq(sc.volumeBindingMode, "Immediate")
  H.write(f, "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata:\n  name: broken\n")
  local out
  rc, out, err = kubectl("apply -f " .. H.quote(f))
  t.ok(rc ~= 0, "refused")
  t.like((out or "") .. (err or ""), "provisioner: Required value")
  rc, _, err = kubectl("delete sc fast")
  t.eq(rc, 0, err)
end)

t.test("a StorageClass's provisioner, parameters, reclaimPolicy and volumeBindingMode cannot change; its labels can",
  function()
  if not S.ready then return skip() end
  local rc, out, err = kubectl("patch sc gp2 -p " .. H.quote('{"reclaimPolicy":"Retain"}'))
  t.ok(rc ~= 0, "refused")
  t.like((out or "") .. (err or ""), 'The StorageClass "gp2" is invalid: reclaimPolicy: Forbidden: ' ..
    "updates to reclaimPolicy are forbidden%.")
  rc, out, err = kubectl("patch sc gp2 --type=merge -p " .. H.quote('{"parameters":{"type":"gp3"}}'))
  t.ok(rc ~= 0, "refused")
  t.like((out or "") .. (err or ""), "parameters: Forbidden: updates to parameters are forbidden%.")
  rc, out, err = kubectl("patch sc gp2 --type=merge -p " .. H.quote('{"volumeBindingMode":"Immediate"}'))
  t.ok(rc ~= 0, "refused")
  t.like((out or "") .. (err or ""), 'volumeBindingMode: Invalid value: "Immediate": field is immutable')
  rc, out, err = kubectl("label sc gp2 team=ml")
  t.eq(rc, 0, (out or "") .. (err or ""))
  local sc = get_json("get sc gp2") or {}
  t.eq(sc.reclaimPolicy, "Delete")
  t.eq((sc.parameters or {}).type, "gp2")
end)

t.test("a claim of the gp2 class waits for its first consumer, as the PersistentVolume controller says", function()
  if not S.ready then return skip() end
  local f = S.dir .. "/pvc.yaml"
  H.write(f, "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\nspec:\n  storageClassName: gp2\n" ..
    "  accessModes: [ReadWriteOnce]\n  resources:\n    requests:\n      storage: 1Gi\n")
  local rc, out, err = kubectl("apply -f " .. H.quote(f))
  t.eq(rc, 0, err)
  t.ok(until_ok(function()
    rc, out = kubectl("get events --field-selector involvedObject.name=data")
    return rc == 0 and out:find("WaitForFirstConsumer", 1, true)
  end), "the claim's event")
  t.like(out, "Normal%s+WaitForFirstConsumer%s+persistentvolumeclaim/data%s+waiting for first consumer to be " ..
    "created before binding")
  t.eq(((get_json("get pvc data") or {}).status or {}).phase, "Pending")
  rc, out, err = kubectl("delete pvc data")
  t.eq(rc, 0, (out or "") .. (err or ""))
end)

t.test("the CSI add-ons' drivers are CSIDriver objects, and every node has a CSINode", function()
  if not S.ready then return skip() end
  local rc, _, err = S.kc.sh([[python3 -c '
import boto3
eks = boto3.client("eks")
for a in ("aws-fsx-csi-driver", "aws-mountpoint-s3-csi-driver"):
    eks.create_addon(clusterName="inspect-eks", addonName=a)
    eks.get_waiter("addon_active").wait(clusterName="inspect-eks", addonName=a,
                                        WaiterConfig={"Delay": 1, "MaxAttempts": 120})
']])
  t.eq(rc, 0, err)
  local out
  t.ok(until_ok(function()
    rc, out = kubectl("get csidrivers")
    return rc == 0 and out:find("s3.csi.aws.com", 1, true) and out:find("fsx.csi.aws.com", 1, true)
  end), "both drivers appear")
  local l = lines(out)
  t.like(l[1] or "", "^NAME%s+ATTACHREQUIRED%s+PODINFOONMOUNT%s+STORAGECAPACITY%s+TOKENREQUESTS%s+REQUIRESREPUBLISH" ..
    "%s+MODES%s+AGE$")
  t.like(out, "\nfsx%.csi%.aws%.com%s+false%s+false%s+false%s+<unset>%s+false%s+Persistent%s+%S+")
  t.like(out, "\ns3%.csi%.aws%.com%s+false%s+true%s+false%s+<unset>%s+false%s+Persistent%s+%S+")
  local d = get_json("get csidriver fsx.csi.aws.com") or { metadata = {} }
  t.eq((d.metadata.labels or {})["app.kubernetes.io/managed-by"], "EKS")
  local nodes = get_json("get nodes") or { items = {} }
  t.eq(#nodes.items, 2, "two nodes")
  local csinodes
  t.ok(until_ok(function()
    csinodes = get_json("get csinodes") or { items = {} }
    if #csinodes.items ~= #nodes.items then return false end
    for _, c in ipairs(csinodes.items) do
      local names = {}
      for _, x in ipairs((c.spec or {}).drivers or {}) do names[x.name] = x.nodeID end
      if not names["fsx.csi.aws.com"] or not names["s3.csi.aws.com"] then return false end
    end
    return true
  end), "a CSINode per node lists both drivers")
  t.eq(table.concat(S.names(csinodes), ","), table.concat(S.names(nodes), ","))
  rc, out = kubectl("get csinodes")
  t.like(lines(out)[1] or "", "^NAME%s+DRIVERS%s+AGE$")
  t.like(out, "\n%S+%s+2%s+%S+")
  rc, _, err = S.kc.sh([[python3 -c '
import boto3
eks = boto3.client("eks")
eks.delete_addon(clusterName="inspect-eks", addonName="aws-fsx-csi-driver")
eks.get_waiter("addon_deleted").wait(clusterName="inspect-eks", addonName="aws-fsx-csi-driver",
                                     WaiterConfig={"Delay": 1, "MaxAttempts": 120})
']])
  t.eq(rc, 0, err)
  t.ok(until_ok(function()
    rc, out = kubectl("get csidrivers")
    return rc == 0 and not out:find("fsx.csi.aws.com", 1, true) and out:find("s3.csi.aws.com", 1, true)
  end), "the driver of a deleted add-on goes")
end)

t.test("kubectl logs --timestamps prints RFC3339Nano times from the sandbox's clock; --since-time filters on them",
  function()
  if not S.ready then return skip() end
  local rc, _, err = kubectl("run stamps --image=busybox:1.36 --restart=Never -- sh -c " ..
    H.quote("echo one; echo two; echo three"))
  t.eq(rc, 0, err)
  local pod
  t.ok(until_ok(function()
    pod = get_json("get pod stamps")
    local cs = pod and ((pod.status or {}).containerStatuses or {})[1]
    return cs and cs.state and (cs.state.running or cs.state.terminated)
  end), "the pod started")
  local cs = pod.status.containerStatuses[1]
  local started = epoch((cs.state.running or cs.state.terminated).startedAt)
  local out
  rc, out, err = kubectl("logs stamps --timestamps")
  t.eq(rc, 0, err)
  local l = lines(out)
  t.eq(#l, 3, out)
  for i, want in ipairs { "one", "two", "three" } do
    local ts, text = (l[i] or ""):match("^(%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%d%.%d%d%d%d%d%d%d%d%dZ) (.*)$")
    t.eq(text, want, l[i])
    local at = epoch(ts)
    t.ok(at and started and math.abs(at - started) <= 1, "line " .. i .. " at the container's start: " ..
      tostring(ts) .. " vs " .. tostring(cs.state))
  end
  -- the clock runs on: a since-time after the lines finds none, one before finds all
  local now = sandbox_now("stamps-now")
  t.ok(now and started and now >= started, "the sandbox's clock moves forward")
  local function rfc(e) return os.date("!%Y-%m-%dT%H:%M:%SZ", e) end
  rc, out, err = kubectl("logs stamps --since-time=" .. rfc(math.floor(started) - 1))
  t.eq(rc, 0, err)
  t.eq(#lines(out), 3)
  rc, out, err = kubectl("logs stamps --since-time=" .. rfc(math.floor(started) + 2))
  t.eq(rc, 0, err)
  t.eq(#lines(out), 0, out)
end)

t.test("node Leases are renewed every 10 s and Ready heartbeats posted every 5 min as simulated time passes", function()
  if not S.ready then return skip() end
  local nodes = get_json("get nodes") or { items = {} }
  t.ok(#nodes.items > 0)
  local first = {}
  for _, n in ipairs(nodes.items) do
    local l = get_json("get lease -n kube-node-lease " .. n.metadata.name) or { spec = {} }
    first[n.metadata.name] = epoch(l.spec.renewTime)
  end
  -- a container that sleeps in steps moves the simulated clock on past 5 min
  local rc0, _, err0 = kubectl("run ticker --image=busybox:1.36 --restart=Never -- sh -c " ..
    H.quote('for i in $(seq 1 40); do echo "tick $i"; sleep 10; done'))
  t.eq(rc0, 0, err0)
  t.ok(until_ok(function()
    local _, o = kubectl("logs ticker")
    return (o or ""):find("tick 33", 1, true)
  end, 300), "the ticker runs 5 simulated minutes")
  local now = sandbox_now("leases-now")
  local rc, out, err = kubectl("get leases -n kube-node-lease -o json")
  t.eq(rc, 0, err)
  local list = require("hypd.json").decode(out) or { items = {} }
  t.eq(#list.items, #nodes.items, "a Lease per node")
  for _, l in ipairs(list.items) do
    local name = l.metadata.name
    local renew = epoch(l.spec.renewTime)
    -- the node joined long enough ago that its kubelet has renewed since
    t.ok(now - (epoch(l.metadata.creationTimestamp) or now) > 20, name .. ": the Lease is older than 20 s")
    t.ok(renew and now and now - renew <= 11 and renew >= (first[name] or math.huge),
      name .. ": renewed in the last 10 s: " .. tostring(l.spec.renewTime) .. ", first " .. tostring(first[name]) ..
      ", now " .. tostring(now))
    t.like(l.spec.renewTime, "^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%d%.%d%d%d%d%d%dZ$", "a MicroTime")
  end
  -- a get of the node (what kubectl describe node does) shows its kubelet's last status report
  for _, listed in ipairs(nodes.items) do
    local n = get_json("get node " .. listed.metadata.name) or { metadata = {}, status = {} }
    local seen = 0
    for _, c in ipairs(n.status.conditions or {}) do
      if c.type == "Ready" or c.type == "MemoryPressure" or c.type == "DiskPressure" or c.type == "PIDPressure" then
        seen = seen + 1
        local hb = epoch(c.lastHeartbeatTime)
        t.ok(hb and now - hb <= 301 and hb >= epoch(c.lastTransitionTime),
          n.metadata.name .. ": " .. c.type .. " heartbeat in the last 5 min: " .. tostring(c.lastHeartbeatTime) ..
            ", now " .. tostring(now))
      end
    end
    t.eq(seen, 4, "the kubelet's four conditions")
  end
end)

t.test("cleanup", function() S.cleanup() end)
