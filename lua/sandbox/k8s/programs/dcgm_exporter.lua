-- sandbox.k8s.programs.dcgm_exporter: NVIDIA's DCGM exporter (image
-- nvcr.io/nvidia/k8s/dcgm-exporter), one pod per GPU node as its DaemonSet
-- runs. It listens on :9400 (or the --address / -a it is given) and answers
-- GET /metrics with the Prometheus text the exporter gives:
-- DCGM_FI_DEV_GPU_UTIL (percent) per GPU of its node, labelled gpu, UUID,
-- device, modelName and Hostname (the node), and, as its Kubernetes mode
-- does, the namespace, pod and container of the pod holding the GPU. The
-- node's GPUs are nvidia.com/gpu of its capacity; the Running pods bound to
-- the node hold them in name order, each its nvidia.com/gpu request; a
-- held GPU is busy (a steady 90-99 %), a free one idle (0).
local M = {}

local function repo(c) return tostring(c.image or ""):lower():gsub("[:@].*$", "") end

function M.match(_, c) return repo(c):match("/dcgm%-exporter$") ~= nil or repo(c) == "dcgm-exporter" end

function M.ports(_, c)
  local argv = require("sandbox.k8s.programs").argv(c)
  for i, w in ipairs(argv) do
    local p = w:match("^%-%-address=.-:(%d+)$") or ((w == "-a" or w == "--address") and argv[i + 1] and
      argv[i + 1]:match(":(%d+)$"))
    if p then return { tonumber(p) } end
  end
  return { 9400 }
end

function M.lines() return { "Starting dcgm-exporter", "DCGM successfully initialized!",
  "Collecting DCP Metrics", "Starting webserver" } end

local function gpus_of(pod)
  local n = 0
  for _, c in ipairs((pod.spec or {}).containers or {}) do
    local r = (c.resources or {}).requests or (c.resources or {}).limits or {}
    n = n + (tonumber(r["nvidia.com/gpu"]) or 0)
  end
  return n
end

-- holders(cl, node) -> the pods holding the node's GPUs, one entry per GPU
local function holders(cl, node)
  local pods = {}
  for _, p in ipairs(cl:list(cl.reg:find("", "v1", "pods"))) do
    if (p.spec or {}).nodeName == node and (p.status or {}).phase == "Running" and gpus_of(p) > 0 then
      pods[#pods + 1] = p
    end
  end
  table.sort(pods, function(a, b) return a.metadata.namespace .. "/" .. a.metadata.name <
    b.metadata.namespace .. "/" .. b.metadata.name end)
  local out = {}
  for _, p in ipairs(pods) do
    local c = p.spec.containers[1]
    for _ = 1, gpus_of(p) do out[#out + 1] = { ns = p.metadata.namespace, pod = p.metadata.name, container = c.name } end
  end
  return out
end

function M.http(env, req)
  if req.path:gsub("/+$", "") ~= "/metrics" then
    return { status = 404, headers = { ["content-type"] = "text/plain" }, body = "404 page not found\n" }
  end
  local cl, name = env.cl, (env.pod.spec or {}).nodeName
  local node = name and cl:get(cl.reg:find("", "v1", "nodes"), nil, name)
  local count = node and tonumber(((node.status or {}).capacity or {})["nvidia.com/gpu"]) or 0
  local itype = node and (node.metadata.labels or {})["node.kubernetes.io/instance-type"]
  local types = require "sandbox.data.instance_types"
  local spec = itype and (types[itype] or types["ml." .. itype])
  local acc = spec and spec.accelerators and spec.accelerators[1]
  local model = acc and ("NVIDIA " .. acc.name) or "NVIDIA GPU"
  local held = node and holders(cl, name) or {}
  local lines = { "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).", "# TYPE DCGM_FI_DEV_GPU_UTIL gauge" }
  for i = 0, count - 1 do
    local h = held[i + 1]
    local uuid = string.format("GPU-%08x-%04x-%04x", (#name * 2654435761 + i) & 0xffffffff, i, #name)
    lines[#lines + 1] = string.format('DCGM_FI_DEV_GPU_UTIL{gpu="%d",UUID="%s",device="nvidia%d",modelName="%s",' ..
      'Hostname="%s",container="%s",namespace="%s",pod="%s"} %d', i, uuid, i, model, name,
      h and h.container or "", h and h.ns or "", h and h.pod or "", h and (90 + (i * 7) % 10) or 0)
  end
  return { status = 200, headers = { ["content-type"] = "text/plain; version=0.0.4" }, body = table.concat(lines, "\n") .. "\n" }
end

return M
