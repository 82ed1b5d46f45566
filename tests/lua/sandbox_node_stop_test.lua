-- A node whose EC2 instance stops goes NotReady as on EKS: in a `hypd
-- sandbox --virtual-clock` process, an EKS managed node group's instance
-- stopped with boto3 stops its kubelet; the node stays Ready until the
-- node-monitor grace period (40 s below Kubernetes 1.32, 50 s from 1.32)
-- has passed since its last heartbeat, then kubectl shows it NotReady:
-- Ready Unknown (NodeStatusUnknown), tainted unreachable, its Lease no
-- longer renewed. Started again, it is Ready without the taints. EC2 shows
-- stopping, stopped, pending, running with AWS's codes and reasons. A pod
-- on the node stays Running (nothing evicts it within the test), its Ready
-- condition False once the node is Unknown.
-- Simulated time is moved on by pods that sleep on the other node.
local t = require "hypd.tap"
local json = require "hypd.json"
local K = dofile("tests/lua/sandbox_kubectl_helpers.lua").new("nodestop")
local H = K.H

local VERSIONS = { "1.31", "1.32" }
local GRACE = { ["1.31"] = 40, ["1.32"] = 50 }
local KUBELET = { "Ready", "MemoryPressure", "DiskPressure", "PIDPressure" }
local UNREACHABLE = "node.kubernetes.io/unreachable"

local function epoch(ts) return require("sandbox.k8s.table").epoch(ts) end
local function cluster(v) return "nodestop-" .. v:gsub("%.", "-") end

-- ec2(method, params) -> the boto3 answer | nil, {code, message}
local function ec2(method, params)
  local cases = json.encode(json.array { { case = method, service = "ec2", method = method, params = params } })
  local rc, out, err = H.with_env(K.env, K.dir, "python3 tests/tools/sandbox_calls.py " .. H.quote(cases))
  local ok, v = pcall(json.decode, out or "")
  if rc ~= 0 or not ok or type(v) ~= "table" then return nil, { code = "(client)", message = tostring(err) } end
  if v.ok then return v.result end
  return nil, v
end

local function instance(id)
  local out = ec2("describe_instances", { InstanceIds = { id } }) or { Reservations = {} }
  return ((out.Reservations[1] or {}).Instances or {})[1] or { State = {} }
end

local function condition(node, ctype)
  for _, c in ipairs((node.status or {}).conditions or {}) do
    if c.type == ctype then return c end
  end
  return {}
end

local function unreachable(node)
  local out = {}
  for _, x in ipairs((node.spec or {}).taints or {}) do
    if x.key == UNREACHABLE then out[x.effect] = x end
  end
  return out
end

-- per version: { stopped = node name, other = node name, id = instance id, ... }
local S = {}
local seq = 0

-- now(v) -> the sandbox's clock: the creationTimestamp of a new ConfigMap
local function now(v)
  seq = seq + 1
  local name = "now-" .. seq
  local rc, _, err = K.kubectl(v, "create configmap " .. name)
  t.eq(rc, 0, err)
  return epoch(((K.get_json(v, "get configmap " .. name) or {}).metadata or {}).creationTimestamp)
end

-- pass(v, seconds): a pod on the node that runs sleeps that long (the
-- virtual clock moves on with it)
local function pass(v, seconds)
  seq = seq + 1
  local name = "sleeper-" .. seq
  local spec = json.encode { apiVersion = "v1", spec = { nodeName = S[v].other } }
  local rc, _, err = K.kubectl(v, "run " .. name .. " --image=busybox:1.36 --restart=Never --overrides=" ..
    H.quote(spec) .. " -- sh -c " .. H.quote("for i in $(seq 1 " .. seconds .. "); do sleep 1; done; echo slept"))
  t.eq(rc, 0, err)
  local deadline = os.time() + 120
  repeat
    local _, out = K.kubectl(v, "logs " .. name)
    if (out or ""):find("slept", 1, true) then return true end
    os.execute("sleep 0.2")
  until os.time() > deadline
  t.ok(false, name .. " slept " .. seconds .. " s")
end

t.test("a sandbox with EKS clusters 1.31 and 1.32, each with a managed node group of two nodes", function()
  K.start(VERSIONS)
  if not K.ready then return end
  local script = H.write(K.dir .. "/nodegroup.py", [[
import boto3, json, sys, time
iam, eks = boto3.client("iam"), boto3.client("eks")
trust = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
  "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]})
try:
  role = iam.create_role(RoleName="nodestop-node", AssumeRolePolicyDocument=trust)["Role"]["Arn"]
except iam.exceptions.EntityAlreadyExistsException:
  role = iam.get_role(RoleName="nodestop-node")["Role"]["Arn"]
name = sys.argv[1]
c = eks.describe_cluster(name=name)["cluster"]
eks.create_nodegroup(clusterName=name, nodegroupName="ng", nodeRole=role, instanceTypes=["m5.large"],
  subnets=c["resourcesVpcConfig"]["subnetIds"], scalingConfig={"minSize": 1, "maxSize": 2, "desiredSize": 2})
eks.get_waiter("nodegroup_active").wait(clusterName=name, nodegroupName="ng",
  WaiterConfig={"Delay": 1, "MaxAttempts": 600})
print("ok")
]])
  for _, v in ipairs(VERSIONS) do
    local rc, _, err = H.with_env(K.env, K.dir, "python3 " .. H.quote(script) .. " " .. cluster(v))
    t.eq(rc, 0, err)
    local nodes = K.get_json(v, "get nodes") or { items = {} }
    t.eq(#nodes.items, 2, v .. ": two nodes")
    local a, b = nodes.items[1] or { spec = {}, metadata = {} }, nodes.items[2] or { metadata = {} }
    S[v] = { stopped = a.metadata.name, other = b.metadata.name,
      id = tostring(a.spec.providerID):match("(i%-%x+)$") }
    t.ok(S[v].id, v .. ": the node's instance from its providerID: " .. tostring(a.spec.providerID))
  end
end)

t.test("StopInstances answers stopping; unknown, malformed and stopping instances are refused as EC2 does", function()
  if not K.ready then return K.skip() end
  -- a pod on each node to be stopped
  for _, v in ipairs(VERSIONS) do
    local spec = json.encode { apiVersion = "v1", spec = { nodeName = S[v].stopped } }
    local rc, _, err = K.kubectl(v, "run web --image=nginx:1.27 --overrides=" .. H.quote(spec))
    t.eq(rc, 0, err)
  end
  -- the kubelets have been renewing their Leases: the last renewal is what the grace counts from
  pass(VERSIONS[1], 12)
  for _, v in ipairs(VERSIONS) do
    local p = K.get_json(v, "get pod web") or { status = {} }
    t.eq({ p.status.phase, condition(p, "Ready").status }, { "Running", "True" }, v .. ": the pod runs")
  end
  for _, v in ipairs(VERSIONS) do
    local s = S[v]
    local lease = K.get_json(v, "get lease -n kube-node-lease " .. s.stopped) or { spec = {} }
    s.renewed = lease.spec.renewTime
    local out, err = ec2("stop_instances", { InstanceIds = { s.id } })
    t.eq(out and out.StoppingInstances, { { InstanceId = s.id, CurrentState = { Code = 64, Name = "stopping" },
      PreviousState = { Code = 16, Name = "running" } } }, json.encode(err or {}))
    s.stopped_at = now(v)
    local i = instance(s.id)
    t.eq(i.State, { Code = 64, Name = "stopping" })
    t.eq(i.StateReason, { Code = "Client.UserInitiatedShutdown",
      Message = "Client.UserInitiatedShutdown: User initiated shutdown" })
    t.like(i.StateTransitionReason or "", "^User initiated %(%d%d%d%d%-%d%d%-%d%d %d%d:%d%d:%d%d GMT%)$")
    -- stopping it again changes nothing; starting a stopping instance is refused
    out = ec2("stop_instances", { InstanceIds = { s.id } })
    t.eq(out and out.StoppingInstances[1].PreviousState.Name, "stopping")
    local _, e = ec2("start_instances", { InstanceIds = { s.id } })
    t.eq({ e and e.code, e and e.message }, { "IncorrectInstanceState",
      "The instance '" .. s.id .. "' is not in a state from which it can be started." })
  end
  local _, e = ec2("stop_instances", { InstanceIds = { "i-0123456789abcdef0", "i-0123456789abcdef1" } })
  t.eq({ e and e.code, e and e.message }, { "InvalidInstanceID.NotFound",
    "The instance IDs 'i-0123456789abcdef0, i-0123456789abcdef1' do not exist" })
  _, e = ec2("stop_instances", { InstanceIds = { "vol-0123" } })
  t.eq({ e and e.code, e and e.message }, { "InvalidInstanceID.Malformed", 'Invalid id: "vol-0123"' })
  _, e = ec2("stop_instances", { InstanceIds = { S["1.32"].id }, Hibernate = true })
  t.eq(e and e.code, "UnsupportedHibernationConfiguration")
end)

t.test("before the grace period ends the stopped instance's node is still Ready", function()
  if not K.ready then return K.skip() end
  for _, v in ipairs(VERSIONS) do
    local s = S[v]
    pass(v, 10)
    local n = K.get_json(v, "get node " .. s.stopped) or {}
    local at = now(v)
    local last = epoch(condition(n, "Ready").lastHeartbeatTime)
    local renewed = epoch(s.renewed)
    t.ok(at and renewed and at < math.max(last or 0, renewed) + GRACE[v],
      v .. ": still within the grace: now " .. tostring(at) .. ", last renewal " .. tostring(s.renewed))
    t.eq({ condition(n, "Ready").status, condition(n, "Ready").reason }, { "True", "KubeletReady" }, v)
    t.eq(unreachable(n), {}, v .. ": no unreachable taint yet")
  end
end)

t.test("after the grace period the node is Ready Unknown, tainted unreachable, its Lease no longer renewed", function()
  if not K.ready then return K.skip() end
  for _, v in ipairs(VERSIONS) do
    local s = S[v]
    local before = K.get_json(v, "get lease -n kube-node-lease " .. s.stopped) or { spec = {} }
    pass(v, 60)
    local at = now(v)
    local rc, out, err = K.kubectl(v, "get nodes --no-headers")
    t.eq(rc, 0, err)
    t.like(out, s.stopped:gsub("%p", "%%%0") .. "%s+NotReady%s", v .. ": kubectl shows it NotReady")
    t.like(out, s.other:gsub("%p", "%%%0") .. "%s+Ready%s", v .. ": the other node is Ready")
    local n = K.get_json(v, "get node " .. s.stopped) or {}
    local lease = K.get_json(v, "get lease -n kube-node-lease " .. s.stopped) or { spec = {} }
    t.eq(lease.spec.renewTime, before.spec.renewTime, v .. ": the Lease is not renewed")
    t.ok(epoch(lease.spec.renewTime) <= s.stopped_at, v .. ": its last renewal is before the stop")
    local beat = epoch(lease.spec.renewTime)
    for _, ctype in ipairs(KUBELET) do
      local c = condition(n, ctype)
      t.eq({ c.status, c.reason, c.message }, { "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status." },
        v .. " " .. ctype)
      if epoch(c.lastHeartbeatTime) > beat then beat = epoch(c.lastHeartbeatTime) end
    end
    local ready = condition(n, "Ready")
    t.ok(epoch(ready.lastHeartbeatTime) <= s.stopped_at, v .. ": the heartbeat is the last one before the stop")
    t.eq(epoch(ready.lastTransitionTime), beat + GRACE[v], v .. ": Unknown from the end of the grace period")
    t.ok(at >= beat + GRACE[v], v .. ": the clock has passed it")
    local taints = unreachable(n)
    t.ok(taints.NoSchedule and not taints.NoSchedule.timeAdded, v .. ": unreachable:NoSchedule")
    t.eq(taints.NoExecute and taints.NoExecute.timeAdded, ready.lastTransitionTime, v .. ": unreachable:NoExecute")
    local p = K.get_json(v, "get pod web") or { status = {} }
    t.eq({ p.status.phase, condition(p, "Ready").status, condition(p, "Ready").lastTransitionTime },
      { "Running", "False", ready.lastTransitionTime }, v .. ": the pod is left Running, not Ready")
    local i = instance(s.id)
    t.eq(i.State, { Code = 80, Name = "stopped" })
    t.eq(i.StateReason and i.StateReason.Code, "Client.UserInitiatedShutdown")
    t.like(i.StateTransitionReason or "", "^User initiated %(")
    out = ec2("describe_instances", { Filters = { { Name = "instance-state-name", Values = { "stopped" } } } })
    t.eq(#((out or {}).Reservations or {}), 2, v .. ": the two stopped instances")
    out = ec2("describe_instances", { Filters = { { Name = "instance-state-name", Values = { "running" } } } })
    t.eq(#((out or {}).Reservations or {}), 2, "the two others run")
  end
end)

t.test("StartInstances answers pending; once running the node is Ready again without the taints", function()
  if not K.ready then return K.skip() end
  for _, v in ipairs(VERSIONS) do
    local s = S[v]
    local out, err = ec2("start_instances", { InstanceIds = { s.id } })
    t.eq(out and out.StartingInstances, { { InstanceId = s.id, CurrentState = { Code = 0, Name = "pending" },
      PreviousState = { Code = 80, Name = "stopped" } } }, json.encode(err or {}))
    t.eq(instance(s.id).State, { Code = 0, Name = "pending" })
    local old = K.get_json(v, "get lease -n kube-node-lease " .. s.stopped) or { spec = {} }
    pass(v, 30)
    local i = instance(s.id)
    t.eq({ i.State, i.StateReason, i.StateTransitionReason }, { { Code = 16, Name = "running" }, nil, "" })
    local n = K.get_json(v, "get node " .. s.stopped) or {}
    local at = now(v)
    local ready = condition(n, "Ready")
    t.eq({ ready.status, ready.reason }, { "True", "KubeletReady" }, v)
    for _, ctype in ipairs { "MemoryPressure", "DiskPressure", "PIDPressure" } do
      t.eq(condition(n, ctype).status, "False", v .. " " .. ctype)
    end
    t.eq(unreachable(n), {}, v .. ": the unreachable taints are gone")
    -- the pod's container went with the machine: the kubelet starts it again
    local p = K.get_json(v, "get pod web") or { status = {} }
    t.eq({ p.status.phase, condition(p, "Ready").status }, { "Running", "True" }, v .. ": the pod was not lost")
    local cs = (p.status.containerStatuses or {})[1] or {}
    t.eq(cs.restartCount, 1, v .. ": its container restarted")
    local last = (cs.lastState or {}).terminated or {}
    t.eq({ last.exitCode, last.reason }, { 255, "Unknown" }, v .. ": ended with the machine")
    t.ok(epoch(last.finishedAt) == s.stopped_at or epoch(last.finishedAt) == s.stopped_at - 1,
      v .. ": at the stop: " .. tostring(last.finishedAt))
    local rc, lines = K.kubectl(v, "get nodes --no-headers")
    t.eq(rc, 0)
    t.like(lines, s.stopped:gsub("%p", "%%%0") .. "%s+Ready%s", v .. ": kubectl shows it Ready")
    local lease = K.get_json(v, "get lease -n kube-node-lease " .. s.stopped) or { spec = {} }
    local renew = epoch(lease.spec.renewTime)
    t.ok(renew > epoch(old.spec.renewTime) and at - renew <= 10, v .. ": the Lease is renewed again: " ..
      tostring(lease.spec.renewTime) .. ", now " .. tostring(at))
  end
end)

t.test("cleanup", function() K.cleanup() end)
