-- training_delete_job: a training job hypd submitted, deleted (its pods go
-- with it) and waited for until gone; one not labelled
-- app.kubernetes.io/managed-by=hypd is refused.
local P = require "_params"
local J = require "_training_jobs"
local K = require "_k8s_objects"
local cap = require "_capacity"
local hp = require "_hyperpod"
local O = require "_ownership"

local DNS = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"

local function run(ctx)
  local p, st = ctx.params, ctx.state
  local e = hp.eks(ctx, p)
  local conn = ctx:k8s(e.name)
  local job = J.find(conn, p.name, p.namespace)
  if not job then
    st.result = { cluster = e.name, name = p.name, namespace = p.namespace, action = "absent" }
    return
  end
  -- only what training_submit made (_ownership)
  O.check(job, "training", { cluster = e.name, by = "training_delete_job" })
  local action = K.absent(ctx, conn, J.KINDS[job.kind].api, job.kind, p.name, p.namespace)
  st.result = { cluster = e.name, region = e.region, name = p.name, namespace = p.namespace, kind = job.kind,
    action = action }
end

return tool {
  name = "training_delete_job",
  summary = "Delete a training job hypd submitted (its pods go with it)",
  description = "Deletes the HyperPodPyTorchJob or RayJob of that name on the active (or named) cluster and " ..
    "waits until it is gone; its pods stop and go with it. Only a job labelled " ..
    "app.kubernetes.io/managed-by=hypd is deleted; any other is refused. Checkpoints and outputs under /s3 " ..
    "stay. A job already gone answers action absent.",
  kind = "destructive",
  aws = { "eks:DescribeCluster" },
  k8s = { "get", "list", "delete" },
  params = P.form({ "name" },
    { "namespace", "cluster", "region" },
    { cluster = P.cluster, region = P.region,
    name = { type = "string", required = true, pattern = DNS, max_length = 63, pattern_help = "a Kubernetes name",
      description = "the job's name" },
    namespace = { type = "string", default = "default", pattern = DNS, max_length = 63,
      pattern_help = "a Kubernetes namespace name", description = "the job's namespace" } }, { name = "Job" }),
  status_tool = "training_list_jobs",
  target = function(p) return (cap.target(p, p.namespace .. "/" .. p.name):gsub("^hyperpod/", "training/")) end,
  steps = { { name = "delete", run = run } },
}
