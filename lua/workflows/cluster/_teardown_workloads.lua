-- cluster/_teardown_workloads: the workloads that stand in a teardown's
-- way on the EKS cluster, and how each is removed:
--   * what mounts a claim of the cluster's storage (storage_delete refuses
--     a mounted claim): each pod's top owner (a Deployment through its
--     ReplicaSet, a Job, a training job, an inference endpoint's CR);
--   * each Service of type LoadBalancer: its load balancer lives in the
--     VPC (network interfaces in the subnets, a security group) and stays
--     when the EKS cluster goes, which then holds the VPC.
--   find(ctx, conn, cluster, claims) -> {{api, kind, namespace, name, why,
--       remove, pods = {"ns/pod"}}}, claims: {{namespace, claim}}
--   remove(ctx, conn, list): deletes each (its pods go with it; an
--       inference deployment through inference_delete, its Services with it)
--       and waits until its pods and load balancers are gone
local M = {}

local function meta(o) return (o or {}).metadata or {} end

local function controller(o)
  for _, r in ipairs(meta(o).ownerReferences or {}) do
    if r.controller ~= false then return r end
  end
end

-- top(conn, o) -> the object at the top of o's owners (o itself when none)
local function top(conn, o)
  for _ = 1, 5 do
    local r = controller(o)
    if not r then return o end
    local up = conn:get(r.apiVersion, r.kind, r.name, { namespace = meta(o).namespace })
    if not up then return o end
    o = up
  end
  return o
end

-- remove_hint(cluster, o) -> the complete call (or kubectl line) that removes o
local function remove_hint(cluster, o)
  local m = meta(o)
  local where = " cluster=" .. cluster .. " name=" .. tostring(m.name) .. " namespace=" .. tostring(m.namespace)
  local inf = (m.labels or {})["hypd.io/inference"]
  if inf then
    return "hypd call inference_delete cluster=" .. cluster .. " name=" .. inf .. " namespace=" .. tostring(m.namespace)
  end
  if o.kind == "HyperPodPyTorchJob" or o.kind == "RayJob" then return "hypd call training_delete_job" .. where end
  if o.kind == "Job" then return "hypd call job_delete" .. where end
  return string.format("kubectl delete %s -n %s %s", o.kind:lower(), tostring(m.namespace), tostring(m.name))
end

local function phase(p) return ((p or {}).status or {}).phase end

function M.find(_, conn, cluster, claims)
  local by, out = {}, {}
  local function add(o, why, pod)
    local m = meta(o)
    local key = o.kind .. " " .. tostring(m.namespace) .. "/" .. tostring(m.name)
    local e = by[key]
    if not e then
      e = { api = o.apiVersion, kind = o.kind, namespace = m.namespace, name = m.name, why = {}, pods = {},
        remove = remove_hint(cluster, o) }
      local inf = (m.labels or {})["hypd.io/inference"]
      if inf then -- its Services and scaler go with it
        e.tool = { name = "inference_delete", params = { cluster = cluster, name = inf, namespace = m.namespace } }
      end
      by[key], out[#out + 1] = e, e
    end
    local seen = false
    for _, w in ipairs(e.why) do seen = seen or w == why end
    if not seen then e.why[#e.why + 1] = why end
    if pod then e.pods[#e.pods + 1] = pod end
  end
  for _, c in ipairs(claims) do
    for _, pod in ipairs(assert(conn:list("v1", "Pod", { namespace = c.namespace }))) do
      local ph = phase(pod)
      if ph ~= "Succeeded" and ph ~= "Failed" then
        for _, vol in ipairs((pod.spec or {}).volumes or {}) do
          if vol.persistentVolumeClaim and vol.persistentVolumeClaim.claimName == c.claim then
            add(top(conn, pod), "it mounts claim " .. c.namespace .. "/" .. c.claim, c.namespace .. "/" ..
              meta(pod).name)
          end
        end
      end
    end
  end
  for _, svc in ipairs(assert(conn:list("v1", "Service", { all_namespaces = true }))) do
    if (svc.spec or {}).type == "LoadBalancer" then
      local m = meta(svc)
      local inf = (m.labels or {})["hypd.io/inference"]
      local why = "its Service " .. m.namespace .. "/" .. m.name .. " of type LoadBalancer has a load balancer in " ..
        "the VPC, which stays when the EKS cluster goes"
      if inf then
        local d = conn:get("apps/v1", "Deployment", inf, { namespace = m.namespace })
        add(d and top(conn, d) or svc, why)
      else
        add(svc, why)
      end
    end
  end
  for _, e in ipairs(out) do e.why = table.concat(e.why, "; ") end
  table.sort(out, function(a, b) return a.kind .. a.namespace .. a.name < b.kind .. b.namespace .. b.name end)
  return out
end

function M.remove(ctx, conn, list)
  for _, e in ipairs(list) do
    ctx:phase("deleting " .. e.kind .. " " .. e.namespace .. "/" .. e.name)
    if e.tool then
      e.tool.params.region = ctx:aws_region()
      hypd.tools.call(e.tool.name, e.tool.params)
    else
      assert(conn:delete(e.api, e.kind, e.name, { namespace = e.namespace, propagation = "Background" }))
    end
  end
  ctx:poll { what = "the workloads in the way to be gone", every = 5, timeout = 10 * 60,
    check = function()
      local left = {}
      for _, e in ipairs(list) do
        if conn:get(e.api, e.kind, e.name, { namespace = e.namespace }) then
          left[#left + 1] = e.kind .. " " .. e.namespace .. "/" .. e.name
        end
        for _, p in ipairs(e.pods) do
          local ns, name = p:match("^([^/]+)/(.+)$")
          if conn:get("v1", "Pod", name, { namespace = ns }) then left[#left + 1] = "pod " .. p end
        end
      end
      for _, svc in ipairs(assert(conn:list("v1", "Service", { all_namespaces = true }))) do
        if (svc.spec or {}).type == "LoadBalancer" then left[#left + 1] = "Service " .. meta(svc).namespace .. "/" ..
          meta(svc).name end
      end
      return #left == 0, #left > 0 and ("still there: " .. table.concat(left, ", ")) or nil
    end }
end

return M
