-- diagnose/_train_logs: what a training job's log lines say went wrong:
-- NCCL collective timeouts, NCCL WARN lines, EFA / libfabric provider
-- errors, CUDA errors and out-of-memory, GPU XID errors, and a step
-- counter that stopped. The lines are read with timestamps=true, so a
-- step line's age is the kubelet's time, not the job's.
--
--   local TL = require "diagnose._train_logs"
--   TL.scan(lines) -> { hits = {code = {{line, at}}}, last_step = {line, at, t}, steps = n, every = s,
--                       tputs = {{v, line, at}} (the step lines' throughput) }
--   TL.slowdown(tputs) -> early, late, first slow line, last line | nil
--   TL.PATTERNS: {code, severity, summary, explanation, plain substrings}
local WL = require "diagnose._workloads"

local M = {}

-- the first pattern a line matches decides its code (an EFA error printed
-- as an NCCL WARN line is an EFA error)
M.PATTERNS = {
  { code = "NCCL_TIMEOUT", severity = "critical", summary = "an NCCL collective timed out: a rank hangs",
    any = { "Watchdog caught collective operation timeout", "NCCL timeout", "NCCL communicator was aborted" },
    explanation = "A collective (all-reduce, all-gather, ...) did not complete within the process group's " ..
      "timeout: one rank stopped (a failed GPU or EFA device, a crashed process, a network partition) and the " ..
      "others waited for it. The ranks on other nodes only report the timeout; look for the rank that " ..
      "stopped first and its node." },
  { code = "EFA_ERROR", severity = "critical", summary = "the EFA / libfabric network provider failed",
    any = { "NET/OFI", "fi_getinfo", "Libfabric error", "libfabric error", "EFA error", "efa error" },
    need = { "fail", "error", "Error", "ERROR", "unavailable", "No such" },
    explanation = "NCCL's OFI plugin could not use the EFA devices (fi_getinfo found no provider, an " ..
      "endpoint or memory registration failed): the node's EFA device or driver is in a bad state, the pod " ..
      "did not get vpc.amazonaws.com/efa devices, or the security group does not allow the EFA traffic." },
  { code = "GPU_XID", severity = "critical", summary = "the GPU driver reported an XID error",
    any = { "NVRM: Xid" },
    explanation = "An XID is the NVIDIA driver's report of a GPU fault (e.g. 48 double-bit ECC, 79 fallen off " ..
      "the bus, 94/95 contained/uncontained ECC): the GPU of that node needs a reboot, and a replacement when " ..
      "it comes back." },
  { code = "CUDA_OOM", severity = "critical", summary = "CUDA ran out of GPU memory",
    any = { "CUDA out of memory", "OutOfMemoryError" },
    explanation = "The model, batch or sequence length needs more GPU memory than the GPUs have: lower the " ..
      "micro batch size or sequence length, or shard further (more GPUs, tensor or pipeline parallelism)." },
  { code = "CUDA_ERROR", severity = "critical", summary = "a CUDA error stopped the training",
    any = { "CUDA error:" },
    explanation = "A CUDA call failed (an illegal memory access, an uncorrectable ECC error, a launch " ..
      "failure): often a bad GPU when it repeats on one node, a bug when it follows the job everywhere." },
  { code = "NCCL_WARN", severity = "warning", summary = "NCCL printed warnings",
    any = { "NCCL WARN" },
    explanation = "NCCL warned about its setup or a transport (a fallback to sockets, a failed connection, " ..
      "a missing plugin); it often comes before a timeout." },
}

local function has_any(line, list)
  for _, s in ipairs(list) do if line:find(s, 1, true) then return true end end
  return false
end

-- classify(text) -> the pattern a line matches, or nil
function M.classify(text)
  for _, p in ipairs(M.PATTERNS) do
    if has_any(text, p.any) and (not p.need or has_any(text, p.need)) then return p end
  end
end

-- a training step line as the sandbox and the frameworks print it:
-- "[rank 0] step 10/20 loss=1.23 ...", {'loss': 1.23, ...}, "loss: 1.23"
local function is_step(text)
  return text:find("step %d+") ~= nil or text:find("loss=") ~= nil or text:find("'loss':") ~= nil or
    text:find("loss: %d") ~= nil
end

-- scan(lines) -> what the lines say (lines as read with timestamps=true)
function M.scan(lines)
  local out = { hits = {}, steps = 0, tputs = {} }
  local first_t, prev_t, gaps = nil, nil, {}
  for _, raw in ipairs(lines) do
    local ts, text = raw:match("^(%d%d%d%d%-%d%d%-%d%dT[%d:%.]+Z) (.*)$")
    if not ts then text = raw end
    local t = ts and WL.epoch(ts)
    first_t = first_t or t
    local p = M.classify(text)
    if p then
      out.hits[p.code] = out.hits[p.code] or {}
      local h = out.hits[p.code]
      h[#h + 1] = { line = text, at = ts }
    end
    if is_step(text) then
      local tp = text:match("throughput=([%d%.]+)") or text:match("'throughput': ([%d%.]+)") or
        text:match("train_speed%(iter/s%)': ([%d%.]+)")
      if tonumber(tp) then out.tputs[#out.tputs + 1] = { v = tonumber(tp), line = text, at = ts } end
      out.steps = out.steps + 1
      if prev_t and t then gaps[#gaps + 1] = t - prev_t end
      prev_t = t or prev_t
      out.last_step = { line = text, at = ts, t = t }
    end
    out.last = { line = text, at = ts, t = t }
  end
  out.first_t = first_t
  if #gaps > 0 then
    table.sort(gaps)
    out.every = gaps[(#gaps + 1) // 2]
  end
  return out
end

local function median(list, i, j)
  local xs = {}
  for k = i, j do xs[#xs + 1] = list[k].v end
  table.sort(xs)
  return xs[(#xs + 1) // 2]
end

-- slowdown(tputs) -> early, late, first, last when the latest throughput
-- (median of the last RECENT step lines) is under SLOW of the early one
-- (median of the first third), else nil
M.SLOW, M.RECENT = 0.5, 5
function M.slowdown(tputs)
  local n = #tputs
  if n < 3 * M.RECENT then return nil end
  local early, late = median(tputs, 1, n // 3), median(tputs, n - M.RECENT + 1, n)
  if early > 0 and late < M.SLOW * early then
    -- the first line of the slow stretch: the last one still at the early pace, plus one
    local k = n
    while k > 1 and tputs[k - 1].v < M.SLOW * early do k = k - 1 end
    return early, late, tputs[k], tputs[n]
  end
end

return M
