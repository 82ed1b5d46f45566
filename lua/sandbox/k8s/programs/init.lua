-- sandbox.k8s.programs: what a simulated container does beyond the first
-- lines the kubelet prints for it. A program is a module
-- sandbox.k8s.programs.<name> returning a table:
--
--   match(pod, container) -> true when this program is what the container runs
--   start(env)            called once when the container starts running;
--                         env = {ctl, cl, pod, container, log = function(line)}
--                         (it may spawn tasks that write lines or objects later)
--   run_seconds(pod, container) -> how long the container runs before it exits
--                         (optional; nil: the kubelet's own rule)
--   exit_code(pod, container) -> how it ends (optional; nil: 0 or the annotation)
--   lines(pod, container) -> the lines it prints as it starts (optional; nil:
--                         the kubelet's own, from its image and command)
--   http(env, req) -> {status, headers, body}: an answer on one of its ports
--                         (optional; env as for start, req = {method, path,
--                         query, headers, body, port}); nil: not listening
--                         yet (the proxy answers connection refused)
--   ports(pod, container) -> the port numbers it listens on (with http;
--                         sandbox.k8s.proxy dials only these; default: the
--                         container's declared containerPorts)
--
-- NAMES lists the programs in the order they are tried; the first match wins.
local logs = require "sandbox.k8s.logs"

local M = {}
M.NAMES = {
  "hf_download",   -- Hugging Face downloads into a mounted bucket
  "ray",           -- Ray nodes and RayJob submitters
  "seq_loop",      -- a shell `for i in $(seq ...)` loop printing numbered lines over its run time
  "model_server",  -- vLLM, SGLang, TGI, LMI, TEI, OpenAI-style servers
  "sglang_router", -- the SGLang router in front of SGLang workers
  "prometheus",    -- a Prometheus server scraping annotated pods
  "dcgm_exporter", -- NVIDIA's DCGM exporter: its node's GPU utilisation
}

local loaded = {}
local function program(name)
  local p = loaded[name]
  if not p then
    p = require("sandbox.k8s.programs." .. name)
    loaded[name] = p
  end
  return p
end

-- argv(c) -> the container's command then args, as strings;
-- command_line(c) -> the same joined by spaces (what programs match on)
function M.argv(c)
  local out = {}
  for _, list in ipairs { c.command or {}, c.args or {} } do
    for _, w in ipairs(list) do out[#out + 1] = tostring(w) end
  end
  return out
end
function M.command_line(c) return table.concat(M.argv(c), " ") end

-- find(pod, container) -> the program the container runs, or nil
function M.find(pod, c)
  for _, name in ipairs(M.NAMES) do
    local p = program(name)
    if p.match(pod, c) then return p end
  end
end

-- env(ctl, pod, c) -> what a program's functions get
function M.env(ctl, pod, c)
  local ns, name = pod.metadata.namespace, pod.metadata.name
  return { ctl = ctl, cl = ctl.cl, pod = pod, container = c,
    log = function(line) logs.append(ctl.cl, ns, name, c.name, line) end }
end

-- started(ctl, pod): the kubelet started the pod's containers
function M.started(ctl, pod)
  for _, c in ipairs(pod.spec.containers or {}) do
    local p = M.find(pod, c)
    if p and p.start then p.start(M.env(ctl, pod, c)) end
  end
end

-- ports(p, pod, c) -> the ports program p listens on in container c
function M.ports(p, pod, c)
  if p.ports then return p.ports(pod, c) or {} end
  local out = {}
  for _, cp in ipairs(c.ports or {}) do out[#out + 1] = tonumber(cp.containerPort) end
  return out
end

-- run_seconds(pod) / exit_code(pod) -> the first program's answer, or nil
local function first(pod, fn)
  for _, c in ipairs(pod.spec.containers or {}) do
    local p = M.find(pod, c)
    if p and p[fn] then
      local v = p[fn](pod, c)
      if v ~= nil then return v end
    end
  end
end
-- lines(pod, c) -> the program's start lines, or nil
function M.lines(pod, c)
  local p = M.find(pod, c)
  if p and p.lines then return p.lines(pod, c) end
end

function M.run_seconds(pod) return first(pod, "run_seconds") end
function M.exit_code(pod) return first(pod, "exit_code") end

return M
