-- kubectl drain against the sandbox (issue 14, found with kubectl): the
-- pods/eviction subresource (a policy/v1 Eviction) deletes the pod unless a
-- PodDisruptionBudget selecting it would fall below what it allows (429
-- TooManyRequests, which kubectl drain retries until its timeout). A
-- `hypd sandbox --virtual-clock` process with a HyperPod-ready EKS cluster
-- of two nodes. ResourceQuota usage (the quota controller) rides along.
local t = require "hypd.tap"
local S = dofile("tests/lua/sandbox_k8s_helpers.lua").new()
local kubectl, get_json, until_ok, skip = S.kubectl, S.get_json, S.until_ok, S.skip
t.cleanup(S.cleanup)

t.test("a sandbox with a HyperPod-ready EKS cluster of two nodes", function() S.start("drain-eks", "drain-hp") end)

local function running(label, n)
  return until_ok(function()
    local l = get_json("get pods -l " .. label)
    local ok = {}
    for _, p in ipairs(l and l.items or {}) do
      if (p.status or {}).phase == "Running" and not p.metadata.deletionTimestamp then ok[#ok + 1] = p end
    end
    return #ok == n and ok
  end)
end

t.test("kubectl drain evicts a node's pods within their disruption budget and cordons it", function()
  if not S.ready then return skip() end
  local rc, _, err = kubectl("create deployment web --image=nginx:1.27 --replicas=2")
  t.eq(rc, 0, err)
  rc, _, err = kubectl("create poddisruptionbudget web --selector=app=web --min-available=1")
  t.eq(rc, 0, err)
  local pods = running("app=web", 2)
  t.ok(pods, "two web pods run")
  if not pods then return end
  local node = pods[1].spec.nodeName
  local out
  rc, out, err = kubectl("drain " .. node .. " --ignore-daemonsets --delete-emptydir-data --timeout=60s")
  t.eq(rc, 0, err)
  t.like(out, "pod/" .. pods[1].metadata.name:gsub("%-", "%%-") .. " evicted\n")
  t.like(out, "node/" .. node:gsub("%-", "%%-") .. " drained\n")
  t.eq(get_json("get node " .. node).spec.unschedulable, true)
  local after = running("app=web", 2)
  t.ok(after, "the Deployment has two pods again")
  for _, p in ipairs(after or {}) do t.ok(p.spec.nodeName ~= node, p.metadata.name .. " is not on the drained node") end
  -- kubectl events --for selects on involvedObject.apiVersion too
  rc, out, err = kubectl("events --for deployment/web")
  t.eq(rc, 0, err)
  t.like(out, "ScalingReplicaSet +Deployment/web ")
end)

t.test("an eviction that would break a disruption budget is refused with 429, and drain gives up at its timeout", function()
  if not S.ready then return skip() end
  local rc, _, err = kubectl("create deployment solo --image=nginx:1.27 --replicas=1")
  t.eq(rc, 0, err)
  rc, _, err = kubectl("create poddisruptionbudget solo --selector=app=solo --min-available=1")
  t.eq(rc, 0, err)
  local pods = running("app=solo", 1)
  t.ok(pods, "the solo pod runs")
  if not pods then return end
  local pdb = until_ok(function()
    local p = get_json("get pdb solo")
    return p and (p.status or {}).currentHealthy == 1 and p
  end)
  t.eq(pdb and { pdb.status.expectedPods, pdb.status.desiredHealthy, pdb.status.disruptionsAllowed }, { 1, 1, 0 })
  local _, out = kubectl("get pdb web")
  t.like(out, "\nweb +1 +<none> +1 ", "web's budget allows one disruption")
  rc, _, err = kubectl("drain " .. pods[1].spec.nodeName .. " --ignore-daemonsets --pod-selector=app=solo --timeout=6s")
  t.eq(rc, 1)
  t.like(err, "Cannot evict pod as it would violate the pod's disruption budget")
  t.ok(running("app=solo", 1), "the pod is still there")
  local conn = S.conn
  local resp = assert(conn:request("POST", "/api/v1/namespaces/default/pods/nobody/eviction", {
    headers = { ["content-type"] = "application/json" },
    body = '{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"nobody","namespace":"default"}}' }))
  t.eq(resp.status, 404)
end)

t.test("a ResourceQuota's status shows what its namespace uses of each hard limit", function()
  if not S.ready then return skip() end
  local rc, _, err = kubectl("create quota q --hard=count/deployments.apps=5,pods=20,services=9")
  t.eq(rc, 0, err)
  local q = until_ok(function()
    local x = get_json("get quota q")
    return x and ((x.status or {}).used or {})["count/deployments.apps"] == "2" and x
  end)
  t.eq(q and q.status.hard, { ["count/deployments.apps"] = "5", pods = "20", services = "9" })
  t.eq(q and q.status.used.services, "1", "the kubernetes Service")
  t.like(q and q.status.used.pods or "", "^%d+$")
end)
