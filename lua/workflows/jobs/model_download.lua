-- model_download: a Hugging Face model into the S3 storage, as a CPU-only
-- Kubernetes Job (jobs/_download has the objects and where the files go),
-- with the token, when one is given, in a Kubernetes Secret the Job reads
-- (and owns, so it goes with the Job). It refuses before creating anything
-- when the storage claim is missing or not an S3 storage, or when the
-- cluster has no node without a GPU; a second call with the same
-- parameters makes no write and follows the same Job.
local P = require "_params"
local B = require "_batch"
local D = require "jobs._download"
local K = require "_k8s_objects"
local S = require "_storage"
local hp = require "_hyperpod"
local O = require "_ownership"

local FAMILY = "download"

local params = {
  cluster = P.cluster,
  region = P.region,
  namespace = P.with(B.NAMESPACE, { description = "the namespace of the Job and of the storage claim" }),
  model_id = { type = "string", required = true, decision = true, max_length = 96 * 2 + 1,
    pattern = "^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?/[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$",
    pattern_help = "a Hugging Face model id org/name, e.g. Qwen/Qwen2.5-0.5B-Instruct (letters, digits, '.', " ..
      "'_' and '-'; no '..' or '--')",
    description = "the Hugging Face Hub model to download, as org/name" },
  revision = { type = "string", default = "main", max_length = 255,
    pattern = "^[A-Za-z0-9]([A-Za-z0-9._/-]*[A-Za-z0-9])?$",
    pattern_help = "a branch, tag or commit of the model repository, e.g. main or a 40-digit commit hash",
    description = "the branch, tag or commit to download (default main)" },
  hf_token = { type = "string", secret = true, pattern = "^hf_[A-Za-z0-9]{8,}$",
    pattern_help = "a Hugging Face access token (hf_ followed by letters and digits)",
    description = "a Hugging Face access token, for gated or private models (e.g. meta-llama/*). Kept only in a " ..
      "Kubernetes Secret the Job reads (env HF_TOKEN); never stored by hypd, echoed or logged" },
  claim_name = P.with(S.claim_name, { default = S.DEFAULT_CLAIM.s3,
    description = "the S3 storage claim the files go into (default s3-claim, made by storage_create_s3), " ..
      "mounted at /s3 in the Job's pod" }),
  destination = { type = "string", max_length = 512,
    pattern = "^[A-Za-z0-9_]([A-Za-z0-9._-]*)(/[A-Za-z0-9_][A-Za-z0-9._-]*)*$",
    pattern_help = "a folder inside the storage like models/qwen2.5 (segments of letters, digits, '.', '_' " ..
      "and '-', not starting with '.'; no leading or trailing '/')",
    description = "the folder inside the storage the files go to (default models/<org>--<name>, i.e. " ..
      "/s3/models/<org>--<name> in pods and s3://<bucket>/models/<org>--<name>/)" },
  name = P.with(B.NAME, { description = "the Job's name (default hf-download-<model id in lowercase>)" }),
}

-- rules across fields, before any operation starts: no '..' or '--' in the
-- id (the Hub refuses them; '..' is a path), and no token in a field that
-- is not secret (it would be kept in records and shown)
local function validate(p)
  if p.model_id:find("..", 1, true) or p.model_id:find("--", 1, true) then
    hypd.errors.refuse("model_id", "pattern", "must be a Hugging Face model id org/name without '..' or '--'",
      { prefix = "field" })
  end
  if p.revision:find("..", 1, true) then
    hypd.errors.refuse("revision", "pattern", "must be a branch, tag or commit without '..'", { prefix = "field" })
  end
  if p.destination and p.destination:find("..", 1, true) then
    hypd.errors.refuse("destination", "pattern", "must be a folder without '..'", { prefix = "field" })
  end
  for _, k in ipairs { "model_id", "revision", "destination", "name", "claim_name", "namespace" } do
    if type(p[k]) == "string" and p[k]:find("hf_[A-Za-z0-9]+") and p[k]:match("hf_[A-Za-z0-9]+"):len() >= 23 then
      hypd.errors.refuse(k, "secret", "looks like a Hugging Face token; pass tokens only as hf_token (a secret " ..
        "parameter, never stored or shown)", { field_message = k .. ": looks like a Hugging Face token" })
    end
  end
end

local function describe(p)
  return { name = p.name or D.default_name(p.model_id), namespace = p.namespace, model_id = p.model_id,
    revision = p.revision, claim = p.claim_name, destination = p.destination or D.default_destination(p.model_id) }
end

-- identity(job) -> what makes a download Job the one a call asks for
local function identity(live)
  local a = (live.metadata or {}).annotations or {}
  local c = ((((live.spec or {}).template or {}).spec or {}).containers or {})[1] or {}
  local secret
  for _, e in ipairs(c.env or {}) do
    if e.name == "HF_TOKEN" and e.valueFrom and e.valueFrom.secretKeyRef then secret = e.valueFrom.secretKeyRef.name end
  end
  return { model_id = a[D.ANN.model], revision = a[D.ANN.revision], claim = a[D.ANN.claim],
    destination = a[D.ANN.destination], token_secret = secret }
end

-- same_job(conn, d): a Job of the download's name must be this download
-- (hypd's, same model, revision, claim and folder; a token only when it
-- reads one): a Job cannot change, so anything else is refused before any
-- write, naming the way out
local function same_job(conn, d, cluster)
  local live = B.find(conn, d.name, d.namespace)
  if not live then return end
  local phase = B.phase(live)
  live.kind = live.kind or "Job"
  O.check(live, FAMILY, { field = "name", cluster = cluster })
  local have, diff = identity(live), {}
  local want = { model_id = d.model_id, revision = d.revision, claim = d.claim, destination = d.destination,
    token_secret = d.secret }
  for _, k in ipairs { "model_id", "revision", "claim", "destination", "token_secret" } do
    if want[k] ~= nil and have[k] ~= want[k] then
      diff[#diff + 1] = string.format("%s %s, not %s", k, tostring(have[k] or "none"), tostring(want[k]))
    end
  end
  if #diff > 0 then
    local msg = string.format("Job %s/%s exists (%s) for another download (%s), and a Job cannot change: pass " ..
      "another name (e.g. name=%s-2)%s", d.namespace, d.name, phase, table.concat(diff, "; "), d.name:sub(1, 61),
      B.DONE[phase] and (", or delete it with job_delete name=" .. d.name .. " (its pods and token Secret go with it)")
      or "")
    hypd.errors.refuse("name", "same_download", msg, { code = "CONFLICT", field_message = "name: " .. msg:gsub(";.*$", "") })
  end
  return live
end

local function check_step(ctx)
  local p, st = ctx.params, ctx.state
  local conn, e = hp.k8s(ctx, p)
  local d = describe(p)
  local fix = string.format("storage_create_s3 claim_name=%s namespace=%s", p.claim_name, p.namespace)
  local pvc = S.get(conn, "v1", "PersistentVolumeClaim", p.claim_name, p.namespace)
  if not pvc then
    hypd.errors.refuse("claim_name", "exists", string.format("cluster %s has no storage claim %s/%s for the model's " ..
      "files: make it with %s (an S3 bucket mounted through Mountpoint for S3), then download again", e.name,
      p.namespace, p.claim_name, fix), { code = "STATE", prefix = "field", fix = fix })
  end
  local pv = pvc.spec.volumeName and S.get(conn, "v1", "PersistentVolume", pvc.spec.volumeName)
  if not pv or S.kind_of(pv) ~= "s3" then
    local msg = string.format("claim %s/%s is not an S3 storage (%s); the download needs one: make it with %s",
      p.namespace, p.claim_name, pv and "its volume's driver is " .. tostring((pv.spec.csi or {}).driver or "not CSI")
      or "it is not bound to a volume", fix)
    hypd.errors.refuse("claim_name", "s3", msg,
      { code = "STATE", field_message = "claim_name: " .. msg:gsub(";.*$", ""), fix = fix })
  end
  st.bucket = pv.spec.csi.volumeAttributes.bucketName
  st.bucket_region = S.mount_option(pv, "region")
  st.prefix = S.mount_option(pv, "prefix") or ""
  local nodes = conn:list("v1", "Node") or {}
  local affinity, where = D.placement(nodes)
  if where.cpu_nodes == 0 then
    -- the hint is a whole call (hypd.hints): the group's name hypd proposes,
    -- and the zone of the cluster's nodes (a placeholder when it has none)
    local zone
    for _, n in ipairs(nodes) do zone = zone or ((n.metadata or {}).labels or {})["topology.kubernetes.io/zone"] end
    local add = "hyperpod_add_instance_group cluster=" .. e.name .. " instance_group=system " ..
      "instance_type=ml.m5.2xlarge instance_count=1 availability_zone=" .. (zone or "<zone>")
    local msg = string.format("cluster %s has no node without a GPU: the download runs only on CPU nodes, so no " ..
      "GPU idles while files move; add a CPU instance group (%s) or an EKS node group, then download again", e.name, add)
    hypd.errors.refuse("cluster", "cpu_node", msg,
      { code = "STATE", field_message = "cluster: " .. msg:gsub(";.*$", ""), fix = add })
  end
  st.d, st.affinity, st.gpu_types = d, affinity, where.gpu_types
  if p.hf_token then d.secret = D.secret_name(d.name) end
  local live = same_job(conn, d, e.name)
  st.job_ref = live and { name = live.metadata.name, uid = live.metadata.uid } or nil
end

local function found(conn, kind, name, ns)
  local o = K.get(conn, kind == "Job" and "batch/v1" or "v1", kind, name, ns)
  if o then o.uid = o.metadata.uid end
  return o
end

local function apply(ctx, conn, obj, force)
  local o = assert(conn:apply(hypd.json.decode(hypd.json.encode(obj)), { operation = ctx.op_id, force = force }))
  o.uid = o.metadata.uid
  return o
end

local function owner_uid(o)
  for _, r in ipairs(((o or {}).metadata or {}).ownerReferences or {}) do
    if r.kind == "Job" then return r.uid end
  end
end

-- the token Secret as a kit resource: compared on the token's hash and its
-- owner, never on its data; its plan shows no value
-- (owner: {name, uid} of the Job, once it exists)
local function ensure_secret(ctx, conn, d, owner)
  local obj = D.secret { name = d.name, namespace = d.namespace, secret = d.secret, model_id = d.model_id,
    token = ctx.params.hf_token }
  if owner then
    obj.metadata.ownerReferences = { { apiVersion = "batch/v1", kind = "Job", name = owner.name, uid = owner.uid,
      controller = false, blockOwnerDeletion = false } }
  end
  local hash = obj.metadata.annotations[D.ANN.token]
  return ctx:ensure { type = "k8s:secret", label = "Secret", name = d.namespace .. "/" .. d.secret, id = "uid",
    owned = O.owned(FAMILY, { field = "name", cluster = ctx.state.eks }), field = "name",
    search = function() return found(conn, "Secret", d.secret, d.namespace) end,
    fields = { type = "Opaque", keys = { D.TOKEN_KEY }, labels = obj.metadata.labels },
    desired = { token_sha256 = hash, owner = owner and owner.uid or nil },
    current = function(live)
      return { token_sha256 = ((live.metadata or {}).annotations or {})[D.ANN.token], owner = owner_uid(live) }
    end,
    placeholder = function(id) return { uid = id, metadata = { name = d.secret, namespace = d.namespace } } end,
    create = function() return apply(ctx, conn, obj) end,
    update = function() return apply(ctx, conn, obj, true) end }
end

-- before the Job (its pods read it as they start); owned by the Job
-- already when the Job exists (a re-call)
local function secret_step(ctx)
  local st = ctx.state
  if not st.d.secret then return end
  ensure_secret(ctx, ctx:k8s(st.eks), st.d, st.job_ref)
end

-- the Job: found by name; a Job of that name for another model, revision or
-- place is a CONFLICT (a Job's pod template cannot change), never replaced
local function job_step(ctx)
  local st = ctx.state
  local d = st.d
  local conn = ctx:k8s(st.eks)
  local obj = D.job(d, st.affinity)
  local job, action = ctx:ensure { type = "k8s:job", label = "Job", name = d.namespace .. "/" .. d.name, id = "uid",
    owned = O.owned(FAMILY, { field = "name", cluster = ctx.state.eks }), field = "name",
    search = function() return found(conn, "Job", d.name, d.namespace) end,
    fields = { image = D.IMAGE, resources = D.RESOURCES, affinity = st.affinity, backoffLimit = D.BACKOFF,
      activeDeadlineSeconds = D.DEADLINE, ttlSecondsAfterFinished = D.TTL, claim = d.claim,
      token_secret = d.secret },
    desired = { model_id = d.model_id, revision = d.revision, claim = d.claim, destination = d.destination,
      token_secret = d.secret }, -- same_job refused any difference before the first write
    current = identity,
    placeholder = function(id) return { uid = id, metadata = { name = d.name, namespace = d.namespace, uid = id } } end,
    create = function() return apply(ctx, conn, obj) end,
    update = function(live, changes)
      local what = {}
      for k in pairs(changes) do what[#what + 1] = k end
      table.sort(what)
      local msg = string.format("Job %s/%s exists with another %s (a Job cannot change); pass another name, or " ..
        "wait for it to finish and delete it", d.namespace, live.metadata.name, table.concat(what, ", "))
      hypd.errors.refuse("name", "exists", msg, { code = "CONFLICT", field_message = "name: " .. msg:gsub(";.*$", "") })
    end }
  st.job_action = action
  if d.secret and not ctx.plan then
    -- the Secret goes with the Job (ttlSecondsAfterFinished): the token does not outlive the download
    ensure_secret(ctx, conn, d, { name = job.metadata.name, uid = job.metadata.uid })
  end
end

local function last_line(conn, pod)
  local lines = B.log_lines(conn, pod, 1)
  return lines and lines[#lines]
end

-- why(conn, job) -> the lines of the failed pod's log that say why (the Hub's error)
local function why(conn, job)
  local pods = B.pods(conn, job)
  local pod = pods[#pods]
  if not pod then return nil end
  local lines = B.log_lines(conn, pod, 12) or {}
  local out, from = {}, nil
  for i, l in ipairs(lines) do
    if l:match("Error") and not from then from = i end
  end
  for i = from or math.max(1, #lines - 3), #lines do
    if lines[i] ~= "" then out[#out + 1] = lines[i] end
  end
  return table.concat(out, " "), pod.metadata.name
end

local function hint(text)
  text = text or ""
  if text:find("GatedRepoError") then
    return "the model is gated: accept its terms on huggingface.co with your account and pass hf_token (a token " ..
      "of that account)"
  elseif text:find("RepositoryNotFoundError") then
    return "the Hub has no such model: check model_id (a private model needs hf_token)"
  elseif text:find("RevisionNotFoundError") then
    return "the model has no such revision: check revision"
  elseif text:find("Invalid credentials") then
    return "the Hub refused the token: pass a valid hf_token"
  end
end

local function wait_step(ctx)
  local st = ctx.state
  if ctx.plan then return end
  local conn = ctx:k8s(st.eks)
  local d = st.d
  local job = ctx:poll { what = "Job " .. d.namespace .. "/" .. d.name .. " to finish", every = 5,
    timeout = D.DEADLINE + 10 * 60,
    check = function()
      local j = B.find(conn, d.name, d.namespace)
      if not j then
        hypd.errors.raise("FAILED", string.format("Job %s/%s is gone (deleted while it was followed, or, long " ..
          "after it ended, by its ttlSecondsAfterFinished); storage_list_contents claim_name=%s prefix=%s/ shows " ..
          "what it wrote", d.namespace, d.name, d.claim, d.destination))
      end
      local phase = B.phase(j)
      if B.DONE[phase] then return true, "the Job " .. phase, j end
      local pods = B.pods(conn, j)
      local pod = pods[#pods]
      if not pod then return false, "the Job is " .. phase .. ": no pod yet" end
      local reason = B.pod_state(pod)
      local note = string.format("the Job is %s: pod %s %s%s", phase, pod.metadata.name,
        tostring((pod.status or {}).phase), pod.spec.nodeName and (" on " .. pod.spec.nodeName) or "")
      if (pod.status or {}).phase == "Running" then
        local l = last_line(conn, pod)
        if l then note = note .. ": " .. l end
      elseif reason then
        note = note .. " (" .. tostring(reason) .. ")"
      end
      return false, note
    end }
  local phase, cond = B.phase(job)
  st.phase = phase
  if phase == "Failed" then
    local text, pod = why(conn, job)
    local h = hint(text)
    hypd.errors.raise("FAILED", string.format("the download Job %s/%s failed (%s: %s)%s%s", d.namespace, d.name,
      tostring(cond and cond.reason), tostring(cond and cond.message), text and (": pod " .. pod .. ": " .. text) or "",
      h and ("; " .. h) or ""), { job = d.name, namespace = d.namespace })
  end
end

local function result_step(ctx)
  local st, p = ctx.state, ctx.params
  if ctx.plan then return end
  local d = st.d
  local key = st.prefix .. d.destination .. "/"
  local w = D.written(st.bucket, st.bucket_region, key)
  st.result = { cluster = st.eks, region = st.region, namespace = d.namespace, name = d.name, phase = st.phase,
    job = st.job_action, model_id = d.model_id, revision = d.revision, claim_name = d.claim,
    destination = d.destination, path = D.MOUNT .. "/" .. d.destination, s3_uri = "s3://" .. st.bucket .. "/" .. key,
    files = w.files, bytes = w.bytes, token_secret = d.secret, avoided_gpu_types = st.gpu_types,
    next = string.format("storage_list_contents claim_name=%s namespace=%s prefix=%s/", p.claim_name, d.namespace,
      d.destination) }
end

return tool {
  name = "model_download",
  summary = "Download a Hugging Face model into the S3 storage with a CPU-only Kubernetes Job",
  description = "Downloads a Hugging Face model (model_id, revision) into the cluster's S3 storage claim (default " ..
    "s3-claim) with a CPU-only Kubernetes Job, to /s3/<destination> (default models/<org>--<name>); " ..
    "hf_token goes only into a Kubernetes Secret. Refused first when the claim is missing or not S3 " ..
    "storage, or the cluster has no CPU node. Follows the Job to its end; the same call again makes no " ..
    "write. Follow it with job_get_status (wait_seconds); plan = true lists what it would create.",
  kind = "mutating",
  status_tool = "job_get_status",
  aws = { "eks:DescribeCluster", "s3:ListObjectsV2" },
  k8s = { "get", "list", "logs", "apply" },
  params = P.form({ "model_id" },
    { "name", "claim_name", "destination", "hf_token", "revision", "namespace", "cluster", "region" },
    params, { name = "Download job name", model_id = "Hugging Face model" }),
  validate = validate,
  target = function(p)
    local region, cluster = P.where(p)
    local name = p.name or (type(p.model_id) == "string" and D.default_name(p.model_id)) or "?"
    return "jobs/" .. region .. "/" .. cluster .. "/" .. tostring(p.namespace or "default") .. "/" .. name
  end,
  steps = {
    { name = "check", run = check_step, on_call = true }, -- refused on the call (hypd.tool.operations): reads only
    { name = "secret", run = secret_step },
    { name = "job", run = job_step },
    { name = "wait", run = wait_step },
    { name = "result", run = result_step },
  },
}
