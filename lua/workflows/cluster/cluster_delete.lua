-- cluster_delete: everything hypd made for a cluster tag, taken away in the
-- reverse order of its making (cluster/_teardown), and nothing else.
local Names = require "_names"
local P = require "_params"
local td = require "cluster._teardown"
local W = require "cluster._teardown_workloads"
local S = require "_storage"

-- merge(ctx, kept): a child's kept list into this operation's (once each)
local function merge(ctx, list)
  local st = ctx.state
  st.kept = st.kept or hypd.json.array()
  for _, k in ipairs(list or {}) do
    local seen = false
    for _, e in ipairs(st.kept) do seen = seen or (e.type == k.type and e.name == k.name) end
    if not seen then st.kept[#st.kept + 1] = k end
  end
end

return tool {
  name = "cluster_delete",
  summary = "Delete everything hypd made for a cluster tag, in reverse order; report what was kept and why",
  description = "Deletes everything hypd made for cluster_tag (what carries the tag hypd:cluster-tag=<tag>), in the " ..
    "reverse order of creation: storage, the HyperPod cluster, the EKS cluster with its add-ons and node " ..
    "groups, IAM roles and the network; anything else is kept and reported in kept with the reason. " ..
    "Workloads in the way and buckets or file systems holding data are refused, each named, unless force " ..
    "= true (then their data is lost). Follow it with operation_get (wait_seconds); plan = true lists " ..
    "what it would delete and keep.",
  kind = "destructive",
  status_tool = "operation_get",
  calls = { "storage_list", "storage_delete", "hyperpod_delete", "inference_delete" },
  k8s = { "get", "list", "delete" },
  aws = { "pricing:GetProducts", "ec2:Describe*", "ec2:DeleteVpcEndpoints", "ec2:DeleteNatGateway", "ec2:ReleaseAddress",
    "ec2:DisassociateRouteTable", "ec2:DeleteRouteTable", "ec2:DetachInternetGateway",
    "ec2:DeleteInternetGateway", "ec2:DeleteSubnet", "ec2:DeleteSecurityGroup", "ec2:DeleteVpc",
    "eks:DescribeCluster", "eks:DeleteCluster", "eks:ListNodegroups", "eks:DescribeNodegroup", "eks:DeleteNodegroup",
    "iam:ListRoles", "iam:GetRole", "iam:ListAttachedRolePolicies", "iam:DetachRolePolicy", "iam:ListRolePolicies",
    "iam:DeleteRolePolicy", "iam:ListInstanceProfilesForRole", "iam:RemoveRoleFromInstanceProfile",
    "iam:DeleteRole", "iam:ListPolicies", "iam:GetPolicy", "iam:ListPolicyVersions", "iam:DeletePolicyVersion",
    "iam:DeletePolicy", "iam:ListOpenIDConnectProviders", "iam:GetOpenIDConnectProvider",
    "iam:DeleteOpenIDConnectProvider", "fsx:DescribeFileSystems", "fsx:DeleteFileSystem", "s3:ListBuckets", "s3:HeadBucket",
    "s3:GetBucketTagging", "s3:ListObjectVersions", "s3:DeleteObjects", "s3:DeleteBucket",
    "sagemaker:DescribeCluster" },
  params = P.form({ "cluster_tag" },
    { "force", "region" },
    {
    cluster_tag = P.with(P.cluster_tag, { required = true, decision = true,
      description = "the tag of the cluster to delete: everything tagged hypd:cluster-tag=<tag> goes" }),
    region = P.region,
    force = { type = "boolean", default = false,
      description = "also delete storage that holds data (an S3 bucket with objects); without it, kept and reported" },
  }),
  target = function(p) return "delete/" .. (p.region or hypd.aws.region()) .. "/" .. p.cluster_tag end,
  steps = {
    { name = "check", run = function(ctx)
      -- refused before anything is deleted: EKS does not delete a cluster
      -- that still has managed node groups, and hypd deletes only its own
      local name = Names.eks(ctx.params.cluster_tag)
      local c = ctx:try("eks", "DescribeCluster", { name = name })
      ctx.state.oidc_issuer = c and c.cluster.identity and c.cluster.identity.oidc and c.cluster.identity.oidc.issuer
      ctx.state.eks_exists = c ~= nil and c.cluster.status ~= "DELETING"
      if c and c.cluster.status ~= "DELETING" then
        local foreign = {}
        for _, ng in ipairs(hypd.aws.all("eks", "ListNodegroups", { clusterName = name }, ctx:aws_opts())) do
          local d = ctx:try("eks", "DescribeNodegroup", { clusterName = name, nodegroupName = ng })
          if d and (d.nodegroup.tags or {})[Names.TAG] ~= ctx.params.cluster_tag then foreign[#foreign + 1] = ng end
        end
        if #foreign > 0 then
          hypd.errors.refuse("cluster_tag", "own_node_groups", string.format("EKS cluster %s has node groups hypd did " ..
            "not make (%s): nothing was deleted; delete them first (cluster_delete_node_group), then call cluster_delete again",
            name, table.concat(foreign, ", ")),
            { code = "CONFLICT", field_message = "node groups hypd did not make: " .. table.concat(foreign, ", ") })
        end
      end
    end },
    { name = "workloads", run = function(ctx)
      -- what stands in the way: workloads mounting the storage's claims
      -- (storage_delete refuses a mounted claim) and Services of type
      -- LoadBalancer (their load balancers stay in the VPC when the EKS
      -- cluster goes). Without force the run refuses, naming each and the
      -- call that removes it, before anything is deleted; with force they go
      -- first. The plan lists them either way.
      if not ctx.state.eks_exists then return end
      local name = Names.eks(ctx.params.cluster_tag)
      local list = hypd.tools.call("storage_list", { cluster = name, region = ctx:aws_region() })
      local claims = {}
      for _, s in ipairs(list.storages or {}) do
        if s.managed_by_hypd and s.claim then
          claims[#claims + 1] = { namespace = s.namespace or "default", claim = s.claim }
        end
      end
      local conn = ctx:k8s(name)
      local found = W.find(ctx, conn, name, claims)
      if #found == 0 then return end
      local force = ctx.params.force
      if ctx.plan then
        ctx.planned = ctx.planned or hypd.json.array()
        for _, e in ipairs(found) do
          local entry = { action = force and "delete" or "keep", type = "kubernetes:" .. e.kind:lower(),
            name = e.namespace .. "/" .. e.name, id = e.namespace .. "/" .. e.name,
            why = "in the way: " .. e.why .. (force and "; force = true deletes it first" or
              ("; the run refuses while it is there: remove it (" .. e.remove .. ") or force = true deletes it first")) }
          ctx.planned[#ctx.planned + 1] = entry
          for _, pod in ipairs(force and e.pods or {}) do -- they go with it (storage_delete's plan sees them gone)
            ctx.planned[#ctx.planned + 1] = { action = "delete", type = "kubernetes:pod", name = pod, id = pod,
              why = "a pod of " .. e.kind .. " " .. entry.name }
          end
        end
        ctx.state.blocked = not force
        return
      end
      if not force then
        local parts = {}
        for _, e in ipairs(found) do
          parts[#parts + 1] = string.format("%s %s/%s (%s; remove it: %s)", e.kind, e.namespace, e.name, e.why, e.remove)
        end
        hypd.errors.refuse("force", "workloads", string.format("workloads stand in the way of deleting %s: %s. Nothing was " ..
          "deleted: remove them, or call cluster_delete again with force = true (it deletes them first)", name,
          table.concat(parts, "; ")), { code = "CONFLICT", field_message = #found .. " workload(s) in the way: " .. parts[1] })
      end
      W.remove(ctx, conn, found)
      for _, e in ipairs(found) do
        ctx:progress(string.format("%s %s/%s deleted (it was in the way: %s)", e.kind, e.namespace, e.name, e.why))
      end
    end },
    { name = "storage", run = function(ctx)
      -- stage 5 first (the reverse order): each storage of the cluster, its
      -- bucket or file system with it; one that holds data is kept unless force
      if not ctx.state.eks_exists then return end
      local name = Names.eks(ctx.params.cluster_tag)
      local list = hypd.tools.call("storage_list", { cluster = name, region = ctx:aws_region() })
      for _, s in ipairs(list.storages or {}) do
        local mounted = ctx.state.blocked and #S.claim_users(ctx:k8s(name), s.namespace or "default", s.claim or "") > 0
        if mounted then
          -- a plan the run would refuse (the workloads above): the claim stays until they are gone
          ctx.planned[#ctx.planned + 1] = { action = "keep", type = "kubernetes:persistentvolumeclaim",
            name = (s.namespace or "default") .. "/" .. s.claim, why = "mounted by the workloads in the way " ..
            "(above): storage_delete runs once they are gone" }
        elseif s.managed_by_hypd and s.claim then
          local r = hypd.tools.call("storage_delete", { cluster = name, region = ctx:aws_region(),
            claim_name = s.claim, namespace = s.namespace or "default", delete_bucket = true,
            delete_file_system = true, force = ctx.params.force })
          merge(ctx, r.kept)
        end
      end
    end },
    { name = "file_systems", run = function(ctx)
      -- the FSx file systems with the tag no storage_delete took (a run
      -- again, with force, after the EKS cluster went): before HyperPod's
      -- subnet, which a file system's interfaces hold
      td.file_systems(ctx, ctx.params.cluster_tag, ctx.params.force)
    end },
    { name = "hyperpod", run = function(ctx)
      if not ctx.state.eks_exists then return end
      local r = hypd.tools.call("hyperpod_delete", { cluster = Names.eks(ctx.params.cluster_tag),
        region = ctx:aws_region(), force = ctx.params.force })
      merge(ctx, r.kept)
    end },
    { name = "eks_cluster", run = function(ctx)
      td.node_groups(ctx, Names.eks(ctx.params.cluster_tag), ctx.params.cluster_tag)
      td.eks_cluster(ctx, Names.eks(ctx.params.cluster_tag), ctx.params.cluster_tag)
    end },
    { name = "buckets", run = function(ctx)
      -- what is left with the tag: a managed feature's bucket (the inference
      -- TLS bucket), a bucket an earlier run kept
      td.buckets(ctx, ctx.params.cluster_tag, ctx.params.force)
    end },
    { name = "iam", run = function(ctx) td.iam_sweep(ctx, ctx.params.cluster_tag, ctx.state.oidc_issuer) end },
    { name = "network", run = function(ctx) td.ec2_sweep(ctx, ctx.params.cluster_tag) end },
    { name = "forget", run = function(ctx)
      local name = Names.eks(ctx.params.cluster_tag)
      if not ctx.plan then hypd.clusters.forget(name, ctx:aws_region()) end
      local kept = ctx.state.kept or hypd.json.array()
      ctx.state.result = { cluster_tag = ctx.params.cluster_tag, kept = kept }
      -- what stays costs this much an hour and a month (or why that is not known)
      if not ctx.plan then
        ctx.state.result.kept_cost, ctx.state.result.kept_cost_error = require("_kept_cost").of(kept, ctx:aws_region())
      end
    end },
  },
}
