-- training_list_jobs: the training jobs hypd submitted (labelled
-- app.kubernetes.io/managed-by=hypd), of both kinds, with phase and restarts.
local P = require "_params"
local R = require "_running"
local J = require "_training_jobs"
local hp = require "_hyperpod"

return tool {
  name = "training_list_jobs",
  summary = "The training jobs hypd submitted: name, kind, recipe, phase, replicas, restarts of the budget",
  description = "Lists the HyperPodPyTorchJobs and RayJobs labelled app.kubernetes.io/managed-by=hypd on the " ..
    "active (or named) cluster, in one namespace or all (namespace absent), each with its recipe, phase, " ..
    "replicas and restarts used of its budget (runPolicy.jobMaxRetryCount). A kind whose operator is not " ..
    "enabled is skipped and named in not_served. training_get_job gives one job in detail.",
  kind = "read",
  aws = { "eks:DescribeCluster" },
  k8s = { "get", "list" },
  params = P.form({},
    { "namespace", "cluster", "region" },
    { cluster = P.cluster, region = P.region,
    namespace = { type = "string", pattern = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length = 63,
      pattern_help = "a Kubernetes namespace name", description = "only this namespace (default: all)" } }),
  run = function(ctx, p)
    local e = hp.eks(ctx, p)
    local conn = ctx:k8s(e.name)
    local jobs, not_served = hypd.json.array(), hypd.json.array()
    for _, kind in ipairs(J.ORDER) do
      if J.served(conn, kind) then
        local items = assert(conn:list(J.KINDS[kind].api, kind, { namespace = p.namespace or "default",
          all_namespaces = p.namespace == nil, labels = { [J.MANAGED_BY] = "hypd" } }))
        for _, o in ipairs(items) do
          o.kind = o.kind or kind
          jobs[#jobs + 1] = J.summary(o)
        end
      else
        not_served[#not_served + 1] = kind
      end
    end
    table.sort(jobs, function(a, b) return a.namespace .. "/" .. a.name < b.namespace .. "/" .. b.name end)
    return { cluster = e.name, region = e.region, jobs = jobs, not_served = not_served,
      -- the operations at work on the cluster's training jobs (a delete going on among them)
      operations = R.all("training/" .. e.region .. "/" .. e.name) }
  end,
}
