-- job_list: the batch/v1 Jobs hypd made (labelled
-- app.kubernetes.io/managed-by=hypd) in one namespace or all, with their
-- kind (model-download, ...), phase, counts and age.
local P = require "_params"
local R = require "_running"
local B = require "_batch"
local hp = require "_hyperpod"

return tool {
  name = "job_list",
  summary = "The Kubernetes Jobs hypd made (model downloads, ...): name, kind, phase, counts, age",
  description = "Lists the batch/v1 Jobs labelled app.kubernetes.io/managed-by=hypd on the active (or named) " ..
    "cluster, in one namespace or in all (namespace absent), newest first, each with its kind (hypd.io/job-kind, " ..
    "e.g. model-download), phase (Pending, Running, Succeeded, Failed) and the reason it ended, " ..
    "active/succeeded/failed pod counts, age, and for a model download its model_id. job_get_status gives one " ..
    "Job in detail.",
  kind = "read",
  aws = { "eks:DescribeCluster" },
  k8s = { "list" },
  params = P.form({},
    { "namespace", "cluster", "region" },
    { cluster = P.cluster, region = P.region,
    namespace = { type = "string", pattern = B.NAMESPACE.pattern, max_length = 63,
      pattern_help = B.NAMESPACE.pattern_help, description = "only this namespace (default: all)" } }),
  run = function(ctx, p)
    local e = hp.eks(ctx, p)
    local conn = ctx:k8s(e.name)
    local items = assert(conn:list(B.API, "Job", { namespace = p.namespace or "default",
      all_namespaces = p.namespace == nil, labels = { [B.MANAGED_BY] = "hypd" } }))
    local jobs = hypd.json.array()
    for _, j in ipairs(items) do jobs[#jobs + 1] = B.summary(j) end
    table.sort(jobs, function(a, b)
      if a.created ~= b.created then return tostring(a.created) > tostring(b.created) end
      return a.namespace .. "/" .. a.name < b.namespace .. "/" .. b.name
    end)
    return { cluster = e.name, region = e.region, namespace = p.namespace, jobs = jobs,
      -- the operations at work on the cluster's Jobs (a delete going on among them)
      operations = R.all("jobs/" .. e.region .. "/" .. e.name) }
  end,
}
