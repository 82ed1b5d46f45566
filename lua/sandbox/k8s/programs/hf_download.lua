-- sandbox.k8s.programs.hf_download: a container that runs `hf download`
-- (or `huggingface-cli download`) of a Hugging Face model, as a download
-- Job's pod does: pip installing the CLI when its script does, fetching the
-- repository's files with tqdm progress lines over a simulated time (about
-- 120 MB/s, as hf_transfer gets), and copying them where the script's `cp`
-- puts them. When the files land on a Mountpoint for S3 volume (a claim
-- bound to a PersistentVolume of driver s3.csi.aws.com, as
-- storage_create_s3 makes), they are written into that simulated bucket
-- (its volumeAttributes.bucketName, under the mount's prefix option and
-- the volumeMount's subPath) just before the container exits, so S3 lists
-- them afterwards.
--
-- The Hub is sandbox.data.hf_models: an unknown repository fails with the
-- Hub's RepositoryNotFoundError (404), a gated one without a token with
-- GatedRepoError (401), a token that is not an hf_ token with 401 Invalid
-- credentials, a revision that is neither main nor the repository's commit
-- with RevisionNotFoundError. The token comes from --token or HF_TOKEN
-- (a value, or a secretKeyRef read from the pod's namespace).
local core = require "hypd.core"
local ctl_ = require "sandbox.k8s.controllers._ctl"
local hub = require "sandbox.data.hf_models"
local json = require "hypd.json"
local sys = require "hypd.sys"
local task = require "hypd.task"

local M = {}

M.HUB = hub
M.PIP_SECONDS = 9          -- pip install of huggingface_hub[cli,hf_transfer]
M.DOWNLOAD_RATE = 120e6    -- bytes per second from the Hub (hf_transfer)
M.COPY_RATE = 250e6        -- bytes per second into Mountpoint for S3
M.SMALL = 64 * 1024        -- files up to this size get generated content
M.PART = 8 * 1024 * 1024   -- Mountpoint's multipart part size (the ETag's part count)
M.S3_DRIVER = "s3.csi.aws.com"

local plans = {} -- pod uid -> the run worked out when the container started

local script_of = require("sandbox.k8s.programs").command_line

function M.match(_, c)
  local s = script_of(c)
  return s:find("%f[%w]hf%s+download%s") ~= nil or s:find("huggingface%-cli%s+download%s") ~= nil
end

-- the container's environment: values, and secretKeyRefs read from the
-- cluster (cl may be nil: then a reference counts as set)
local function environment(cl, pod, c)
  local env = {}
  for _, e in ipairs(c.env or {}) do
    if e.value ~= nil then
      env[e.name] = tostring(e.value)
    elseif e.valueFrom and e.valueFrom.secretKeyRef then
      local ref = e.valueFrom.secretKeyRef
      if cl then
        local s = cl:get(cl.reg:find("", "v1", "secrets"), pod.metadata.namespace, ref.name)
        local v = s and s.data and s.data[ref.key]
        if v then env[e.name] = sys.b64decode(v) or "" end
      else
        env[e.name] = "(from secret " .. tostring(ref.name) .. ")"
      end
    end
  end
  return env
end

-- words(text) -> the shell words of one command (quotes removed)
local function words(text)
  local out, cur, i, quote = {}, nil, 1, nil
  while i <= #text do
    local ch = text:sub(i, i)
    if quote then
      if ch == quote then quote = nil else cur = (cur or "") .. ch end
    elseif ch == '"' or ch == "'" then
      quote, cur = ch, cur or ""
    elseif ch:match("%s") then
      if cur then out[#out + 1] = cur; cur = nil end
    else
      cur = (cur or "") .. ch
    end
    i = i + 1
  end
  if cur then out[#out + 1] = cur end
  return out
end

local function expand(s, env)
  s = s:gsub("%${([%w_]+)}", function(n) return env[n] or "" end)
  return (s:gsub("%$([%a_][%w_]*)", function(n) return env[n] or "" end))
end

-- commands(script, env) -> {{word, ...}, ...}: the script's simple commands, expanded
local function commands(script, env)
  local out = {}
  for line in (script .. "\n"):gmatch("([^\n]*)\n") do
    for part in (line:gsub("&&", ";") .. ";"):gmatch("([^;]*);") do
      local w = words(part)
      if w[1] == "sh" or w[1] == "bash" then w = {} end
      if #w > 0 then
        for i, x in ipairs(w) do w[i] = expand(x, env) end
        out[#out + 1] = w
      end
    end
  end
  return out
end

local function flag(w, name, from)
  for i = from or 1, #w do
    if w[i] == name then return w[i + 1] end
    local v = w[i]:match("^" .. name:gsub("%-", "%%-") .. "=(.*)$")
    if v then return v end
  end
end

local function norm(path)
  local out = {}
  for seg in tostring(path):gmatch("[^/]+") do
    if seg == ".." then out[#out] = nil elseif seg ~= "." then out[#out + 1] = seg end
  end
  return "/" .. table.concat(out, "/")
end

-- parse(script, env) -> {pip, repo, revision, token, local_dir, dest}
local function parse(script, env)
  local r = {}
  for _, w in ipairs(commands(script, env)) do
    local i
    if w[1] == "pip" or w[1] == "pip3" or (w[1]:match("python") and w[2] == "-m" and w[3] == "pip") then
      r.pip = true
    end
    if w[1] == "hf" and w[2] == "download" then i = 3 end
    if w[1] == "huggingface-cli" and w[2] == "download" then i = 3 end
    if i and not r.repo then
      r.repo = w[i]
      r.revision = flag(w, "--revision", i + 1) or "main"
      r.token = flag(w, "--token", i + 1)
      r.local_dir = flag(w, "--local-dir", i + 1)
    elseif w[1] == "cp" and r.local_dir then
      local args = {}
      for k = 2, #w do if w[k]:sub(1, 1) ~= "-" then args[#args + 1] = w[k] end end
      local src, dst = args[1], args[#args]
      if src and dst and #args >= 2 and norm(src:gsub("/%*$", "")) == norm(r.local_dir) then
        -- cp -r D/. T and cp -r D/* T put D's files in T; cp -r D T makes T/<basename D>
        if src:match("/%.$") or src:match("/%*$") then r.dest = norm(dst)
        else r.dest = norm(dst) .. "/" .. (norm(src):match("([^/]+)$") or "") end
      end
    end
  end
  r.token = r.token or env.HF_TOKEN or env.HUGGING_FACE_HUB_TOKEN
  r.local_dir = r.local_dir and norm(r.local_dir)
  r.dest = r.dest or r.local_dir
  return r
end

-- tqdm's unit_scale sizes: 659, 4.92k, 7.03M, 988M, 1.50G
local function size_text(n)
  if n < 1000 then return tostring(math.floor(n)) end
  for _, u in ipairs { { 1e12, "T" }, { 1e9, "G" }, { 1e6, "M" }, { 1e3, "k" } } do
    if n >= u[1] then
      local v = n / u[1]
      if v >= 99.95 then return string.format("%.0f%s", v, u[2]) end
      if v >= 9.995 then return string.format("%.1f%s", v, u[2]) end
      return string.format("%.2f%s", v, u[2])
    end
  end
end

local function clock(s)
  s = math.floor(s + 0.5)
  return string.format("%02d:%02d", s // 60, s % 60)
end

local function bar(frac)
  local n = math.floor(frac * 10 + 0.5)
  return string.rep("\u{2588}", n) .. string.rep(" ", 10 - n)
end

local function request_id(seed)
  local h = ctl_.hash(seed, 24)
  return "Root=1-" .. string.format("%08x", math.floor(core.now()) & 0xffffffff) .. "-" ..
    (h:gsub(".", function(ch) return string.format("%x", ch:byte() % 16) end))
end

local PIP = {
  "Collecting huggingface_hub[cli,hf_transfer]",
  "  Downloading huggingface_hub-0.35.3-py3-none-any.whl.metadata (14 kB)",
  "Collecting filelock (from huggingface_hub[cli,hf_transfer])",
  "Collecting fsspec>=2023.5.0 (from huggingface_hub[cli,hf_transfer])",
  "Collecting requests (from huggingface_hub[cli,hf_transfer])",
  "Collecting tqdm>=4.42.1 (from huggingface_hub[cli,hf_transfer])",
  "Collecting hf-xet<2.0.0,>=1.1.3 (from huggingface_hub[cli,hf_transfer])",
  "Collecting hf_transfer>=0.1.4 (from huggingface_hub[cli,hf_transfer])",
  "  Downloading hf_transfer-0.1.9-cp38-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl.metadata (1.7 kB)",
  "Downloading huggingface_hub-0.35.3-py3-none-any.whl (564 kB)",
  "Downloading hf_transfer-0.1.9-cp38-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl (3.6 MB)",
  "Installing collected packages: urllib3, typing-extensions, tqdm, pyyaml, packaging, idna, hf-xet, hf_transfer, " ..
    "fsspec, filelock, charset_normalizer, certifi, requests, huggingface_hub",
  "Successfully installed certifi-2025.10.5 charset_normalizer-3.4.4 filelock-3.20.0 fsspec-2025.9.0 " ..
    "hf-xet-1.1.10 hf_transfer-0.1.9 huggingface_hub-0.35.3 idna-3.11 packaging-25.0 pyyaml-6.0.3 " ..
    "requests-2.32.5 tqdm-4.67.1 typing-extensions-4.15.0 urllib3-2.5.0",
}

local function failure(out, t, kind, status, lines)
  local id = request_id(kind .. t)
  out.steps[#out.steps + 1] = { at = t, line = "Traceback (most recent call last):" }
  out.steps[#out.steps + 1] = { at = t, line = '  File "/usr/local/bin/hf", line 8, in <module>' }
  out.steps[#out.steps + 1] = { at = t, line = "    sys.exit(main())" }
  out.steps[#out.steps + 1] = { at = t, line = string.format("huggingface_hub.errors.%s: %d Client Error. " ..
    "(Request ID: %s)", kind, status, id) }
  out.steps[#out.steps + 1] = { at = t, line = "" }
  for _, l in ipairs(lines) do out.steps[#out.steps + 1] = { at = t, line = l } end
  out.seconds, out.code = t + 0.5, 1
  return out
end

-- plan(cl, pod, c) -> {seconds, code, steps = {{at, line} | {at, write = files}}, files, repo}
local function plan(cl, pod, c)
  local env = environment(cl, pod, c)
  local r = parse(script_of(c), env)
  local out = { steps = {}, repo = r.repo, revision = r.revision }
  local t = 0.5
  if r.pip then
    for i, l in ipairs(PIP) do out.steps[#out.steps + 1] = { at = t + (i - 1) * M.PIP_SECONDS / #PIP, line = l } end
    t = t + M.PIP_SECONDS + 0.5
  end
  local repo = r.repo and hub[r.repo]
  local token = r.token ~= nil and r.token ~= ""
  local url = "https://huggingface.co/api/models/" .. tostring(r.repo) .. "/revision/" .. tostring(r.revision)
  if not repo then
    return failure(out, t + 0.5, "RepositoryNotFoundError", token and 404 or 401, {
      "Repository Not Found for url: " .. url .. ".",
      "Please make sure you specified the correct `repo_id` and `repo_type`.",
      "If you are trying to access a private or gated repo, make sure you are authenticated. For more details, " ..
        "see https://huggingface.co/docs/huggingface_hub/authentication" })
  end
  if token and not tostring(r.token):match("^hf_[%w]+$") and not tostring(r.token):match("^%(from secret") then
    return failure(out, t + 0.5, "HfHubHTTPError", 401, { "Invalid credentials in Authorization header" })
  end
  if repo.gated and not token then
    return failure(out, t + 0.5, "GatedRepoError", 401, {
      "Cannot access gated repo for url https://huggingface.co/" .. r.repo .. "/resolve/" .. r.revision ..
        "/config.json.",
      "Access to model " .. r.repo .. " is restricted. You must have access to it and be authenticated to " ..
        "access it. Please log in." })
  end
  if r.revision ~= "main" and r.revision ~= repo.sha then
    return failure(out, t + 0.5, "RevisionNotFoundError", 404, {
      "Revision Not Found for url: " .. url .. ".", "Invalid rev id: " .. r.revision })
  end
  -- the files, one after another, with tqdm's lines
  local total, n = 0, #repo.files
  local start = t
  for i, f in ipairs(repo.files) do
    local name, size = f[1], f[2]
    local secs = math.max(0.2, size / M.DOWNLOAD_RATE)
    if size > 100e6 then
      for _, frac in ipairs { 0.25, 0.5, 0.75 } do
        local at = t + secs * frac
        out.steps[#out.steps + 1] = { at = at, line = string.format("%s: %3d%%|%s| %s/%s [%s<%s, %sB/s]", name,
          math.floor(frac * 100), bar(frac), size_text(size * frac), size_text(size), clock(secs * frac),
          clock(secs * (1 - frac)), size_text(M.DOWNLOAD_RATE)) }
      end
    end
    t = t + secs
    out.steps[#out.steps + 1] = { at = t, line = string.format("%s: 100%%|%s| %s/%s [%s<00:00, %sB/s]", name,
      bar(1), size_text(size), size_text(size), clock(secs), size_text(size / secs)) }
    out.steps[#out.steps + 1] = { at = t, line = string.format("Fetching %d files: %3d%%|%s| %d/%d [%s<%s, %.2fit/s]",
      n, math.floor(i * 100 / n), bar(i / n), i, n, clock(t - start), clock((t - start) / i * (n - i)),
      i / math.max(t - start, 0.01)) }
    total = total + size
  end
  out.steps[#out.steps + 1] = { at = t, line = tostring(r.local_dir or ("/root/.cache/huggingface/hub/models--" ..
    r.repo:gsub("/", "--") .. "/snapshots/" .. repo.sha)) }
  -- the copy (when the script copies) ends with the files in place
  if r.dest and r.dest ~= r.local_dir then t = t + math.max(1, total / M.COPY_RATE) end
  out.steps[#out.steps + 1] = { at = t, write = true }
  out.files, out.dest, out.total, out.model = repo.files, r.dest, total, repo
  out.seconds, out.code = t + 0.5, 0
  return out
end

-- where(cl, pod, c, dir) -> bucket, key prefix | nil, why: the S3 place a
-- directory of the container is on
local function where(cl, pod, c, dir)
  local best
  for _, m in ipairs(c.volumeMounts or {}) do
    local mp = norm(m.mountPath)
    if (dir == mp or dir:sub(1, #mp + 1) == mp .. "/" or mp == "/") and (not best or #mp > #norm(best.mountPath)) then
      best = m
    end
  end
  if not best then return nil, "not on a volume" end
  local vol
  for _, v in ipairs(pod.spec.volumes or {}) do if v.name == best.name then vol = v end end
  local claim = vol and vol.persistentVolumeClaim and vol.persistentVolumeClaim.claimName
  if not claim then return nil, "not on a persistent volume" end
  if best.readOnly then return nil, "Read-only file system" end
  local pvc = cl:get(cl.reg:find("", "v1", "persistentvolumeclaims"), pod.metadata.namespace, claim)
  local pv = pvc and pvc.spec.volumeName and cl:get(cl.reg:find("", "v1", "persistentvolumes"), nil, pvc.spec.volumeName)
  local csi = pv and pv.spec.csi
  if not csi or csi.driver ~= M.S3_DRIVER then return nil, "not a Mountpoint for S3 volume" end
  local prefix = ""
  for _, o in ipairs(pv.spec.mountOptions or {}) do
    local p = o:match("^prefix[ =](.+)$")
    if p then prefix = p end
  end
  local rel = dir:sub(#norm(best.mountPath) + 1):gsub("^/", "")
  if best.subPath and best.subPath ~= "" then rel = best.subPath:gsub("/$", "") .. (rel ~= "" and "/" .. rel or "") end
  local key = prefix .. (rel ~= "" and rel .. "/" or "")
  return (csi.volumeAttributes or {}).bucketName, key
end

local function content(model, repo, name, size)
  local text
  if name == "config.json" then
    text = json.encode(model.config or {})
  elseif name:match("%.json$") then
    text = json.encode { _name_or_path = repo }
  else
    text = "# " .. repo .. " (" .. name .. ")\n"
  end
  if #text < size then text = text .. string.rep(" ", size - #text - 1) .. "\n" end
  return text
end

-- write(ctl, pod, c, p) -> n, where | nil, why: the model's files into the bucket
local function write(ctl, pod, c, p)
  local bucket, prefix = where(ctl.cl, pod, c, p.dest or "/")
  if not bucket then return nil, prefix end
  local aws_ = require "sandbox.k8s.controllers._aws"
  local objects = require "sandbox.services.s3.objects"
  local ctx = aws_.ctx(ctl.region, "s3", "PutObject")
  local b = ctx.state:get("bucket", bucket)
  if not b then return nil, "Transport endpoint is not connected (bucket " .. bucket .. " does not exist)" end
  for _, f in ipairs(p.files) do
    local name, size = f[1], f[2]
    local key = prefix .. name
    local meta = { ContentType = "binary/octet-stream" }
    if size <= M.SMALL then
      objects.store(ctx, b, key, content(p.model, p.repo, name, size), meta)
    else
      local parts = (size + M.PART - 1) // M.PART
      local etag = '"' .. sys.digest("md5", key .. ":" .. size, "hex") .. "-" .. parts .. '"'
      objects.store_filled(ctx, b, key, size, meta, etag)
    end
  end
  return #p.files, "s3://" .. bucket .. "/" .. prefix
end

local function alive(ctl, pod)
  local now = ctl.cl:get(ctl:r("", "v1", "pods"), pod.metadata.namespace, pod.metadata.name)
  return now and now.metadata.uid == pod.metadata.uid and (now.status or {}).phase == "Running"
end

-- lines(pod, c) -> nothing: the container prints only what the run prints
function M.lines() return {} end

-- step(p, s): one step of the run: a line printed, or the files written
-- (a failed write fails the run, with cp's message)
local function step(p, s)
  if s.write then
    local n, why = write(p.ctl, p.pod, p.container, p)
    if not n then
      p.log(string.format("cp: cannot create regular file '%s/%s': %s", tostring(p.dest),
        tostring(p.files[1] and p.files[1][1]), tostring(why)))
      p.code = 1
    end
  elseif s.line then
    p.log(s.line)
  end
end

-- the lines come out over the run time from a task; whatever it has not
-- reached when the kubelet ends the container (a clock running fast, a
-- busy engine) is done by exit_code, so the files are always in place
-- before the pod reports Succeeded
function M.start(env)
  local ctl, pod, c = env.ctl, env.pod, env.container
  local p = plan(ctl.cl, pod, c)
  p.ctl, p.pod, p.container, p.log, p.next = ctl, pod, c, env.log, 1
  plans[pod.metadata.uid] = p
  local speed = ctl_.speed()
  task.spawn(function()
    local t0 = core.now()
    while p.steps[p.next] do
      local s = p.steps[p.next]
      local wait = t0 + s.at / speed - core.now()
      if wait > 0 then task.sleep(wait) end
      if p.ended or not alive(ctl, pod) then return end
      if p.steps[p.next] == s then
        p.next = p.next + 1
        step(p, s)
      end
    end
  end, { daemon = true, name = "sandbox hf download " .. pod.metadata.namespace .. "/" .. pod.metadata.name })
end

local function plan_of(pod, c)
  local p = plans[pod.metadata.uid]
  if not p then
    p = plan(nil, pod, c)
    plans[pod.metadata.uid] = p
  end
  return p
end

function M.run_seconds(pod, c) return plan_of(pod, c).seconds end

function M.exit_code(pod, c)
  local p = plan_of(pod, c)
  plans[pod.metadata.uid] = nil
  p.ended = true
  if p.next then
    while p.steps[p.next] do
      local s = p.steps[p.next]
      p.next = p.next + 1
      step(p, s)
    end
  end
  return p.code
end

return M
