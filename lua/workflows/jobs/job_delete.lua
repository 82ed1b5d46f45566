-- job_delete: a batch/v1 Job hypd made (a model download), deleted with
-- its pods and what it owns (the download's token Secret), and waited for
-- until gone; a Job not labelled app.kubernetes.io/managed-by=hypd is
-- refused. The files a download wrote stay in the storage.
local P = require "_params"
local B = require "_batch"
local K = require "_k8s_objects"
local hp = require "_hyperpod"
local O = require "_ownership"

local function run(ctx)
  local p, st = ctx.params, ctx.state
  local e = hp.eks(ctx, p)
  local conn = ctx:k8s(e.name)
  local job = B.find(conn, p.name, p.namespace)
  if not job then
    st.result = { cluster = e.name, region = e.region, name = p.name, namespace = p.namespace, action = "absent" }
    return
  end
  job.kind = job.kind or "Job"
  -- only what model_download made (_ownership)
  O.check(job, "download", { cluster = e.name, by = "job_delete" })
  local phase = B.phase(job)
  local action = K.absent(ctx, conn, B.API, "Job", p.name, p.namespace)
  st.result = { cluster = e.name, region = e.region, name = p.name, namespace = p.namespace, phase = phase,
    kind = (job.metadata.labels or {})[B.KIND_LABEL], action = action }
end

return tool {
  name = "job_delete",
  summary = "Delete a Kubernetes Job hypd made (a model download): its pods and token Secret go with it",
  description = "Deletes the batch/v1 Job of that name on the active (or named) cluster (propagation " ..
    "Background: its pods, and a model download's token Secret, which the Job owns, go with it) and waits " ..
    "until it is gone. Only a Job labelled app.kubernetes.io/managed-by=hypd is deleted; any other is refused. " ..
    "The files a download wrote stay in the storage. A Job already gone answers action absent. Use it to " ..
    "retry a failed download with other parameters under the same name (model_download).",
  kind = "destructive",
  aws = { "eks:DescribeCluster" },
  k8s = { "get", "list", "delete" },
  params = P.form({ "name" },
    { "namespace", "cluster", "region" },
    { cluster = P.cluster, region = P.region, name = P.with(B.NAME, { required = true }),
    namespace = B.NAMESPACE }, { name = "Job" }),
  status_tool = "job_list",
  target = function(p)
    local region, cluster = P.where(p)
    return "jobs/" .. region .. "/" .. cluster .. "/" .. tostring(p.namespace or "default") .. "/" .. tostring(p.name)
  end,
  steps = { { name = "delete", run = run } },
}
