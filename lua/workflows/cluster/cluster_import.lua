-- cluster_import: stage 2, adopting an EKS cluster hypd did not create (and
-- the HyperPod cluster it orchestrates, if any), so the later stages and
-- cluster_switch work on it as on one cluster_create_eks made.
--
-- Before anything is recorded it proves that hypd reaches the cluster's
-- Kubernetes API with a real Kubernetes call (a get of the kube-system
-- namespace, with the EKS token of hypd's own AWS principal), then whether
-- it may also write there (a server-side dry run, which changes nothing).
-- When it cannot read, it says exactly what is missing: the cluster is not
-- ACTIVE; its authenticationMode is CONFIG_MAP, which takes no access
-- entries; there is no access entry for the principal; or the entry's
-- access policies do not allow it. Nothing in the cluster or in AWS is
-- changed: the import only records what it found (hypd.clusters.record
-- with imported = true and hyperpod = {name, arn}); the first cluster hypd
-- knows becomes the active one.
local Names = require "_names"
local P = require "_params"
local access_ = require "cluster._access"
local hp = require "_hyperpod"


return tool {
  name = "cluster_import",
  summary = "Stage 2: adopt an existing EKS cluster (and its HyperPod cluster) after checking hypd reaches its API",
  description = "Adopts an EKS cluster hypd did not create (and its HyperPod cluster) so the other tools work on it. " ..
    "It checks that hypd can reach its Kubernetes API and, when not, says what is missing and how to fix " ..
    "it. It changes nothing in AWS or the cluster; calling it again refreshes the record.",
  kind = "mutating",
  status_tool = "cluster_get_status",
  aws = { "eks:DescribeCluster", "eks:DescribeAccessEntry", "eks:ListAssociatedAccessPolicies",
    "sts:GetCallerIdentity", "sagemaker:ListClusters", "sagemaker:DescribeCluster" },
  k8s = { "get", "apply" },
  params = P.form({ "cluster" },
    { "region" },
    {
    cluster = P.with(P.cluster, { required = true, decision = true,
      description = "Name of the EKS cluster to adopt (cluster_list shows the region's clusters)" }),
    region = P.region,
  }),
  result = { type = "object", properties = { cluster = { type = "string" }, region = { type = "string" },
    arn = { type = "string" }, version = { type = "string" }, authentication_mode = { type = "string" },
    principal = { type = "string" }, kubernetes_access = { type = "string" }, hyperpod = { type = "object" },
    active = { type = "boolean" }, created_by_hypd = { type = "boolean" }, notes = { type = "array" } } },
  run = function(ctx, p)
    local region = ctx:aws_region()
    local out, err = ctx:try("eks", "DescribeCluster", { name = p.cluster })
    if not out then
      if err.code == "ResourceNotFoundException" then
        hypd.errors.refuse("cluster", "exists", string.format("no EKS cluster named %s in %s (cluster_list shows the " ..
          "region's clusters)", p.cluster, region),
          { code = "NOT_FOUND", field_message = "cluster: no such EKS cluster in " .. region })
      end
      error(err, 0)
    end
    local c = out.cluster
    if c.status ~= "ACTIVE" then
      hypd.errors.refuse("cluster", "conflict", string.format("EKS cluster %s is %s, not ACTIVE: hypd imports a cluster " ..
        "whose Kubernetes API serves; call again once it is ACTIVE", c.name, tostring(c.status)), { code = "CONFLICT",
        reason = "not_active", status = c.status })
    end
    local a = access_.check(ctx, c)
    local principal, access = a.principal, a.access
    local notes = hypd.json.array()
    if access == "read-only" then
      notes[#notes + 1] = string.format("%s may read but not write in the cluster; cluster_configure_dependencies " ..
        "needs %s (aws eks associate-access-policy ... --policy-arn arn:aws:eks::aws:cluster-access-policy/%s " ..
        "--access-scope type=cluster)", principal, access_.ADMIN, access_.ADMIN)
    end
    local h = hp.find(ctx, c.arn)
    local hyperpod = h and { name = h.ClusterName, arn = h.ClusterArn, status = h.ClusterStatus } or nil
    local before = hypd.clusters.get(c.name, region) or {}
    local vpc = c.resourcesVpcConfig or {}
    local tag = (c.tags or {})[Names.TAG]
    hypd.clusters.record { name = c.name, region = region, arn = c.arn, tag = tag, version = c.version,
      vpc_id = vpc.vpcId, subnet_ids = vpc.subnetIds, security_group_id = (vpc.securityGroupIds or {})[1] or
        vpc.clusterSecurityGroupId, cluster_security_group_id = vpc.clusterSecurityGroupId,
      authentication_mode = (c.accessConfig or {}).authenticationMode, oidc_issuer = ((c.identity or {}).oidc or {}).issuer,
      imported = not before.created, imported_at = before.imported_at or hypd.now(), principal_arn = principal,
      kubernetes_access = access, hyperpod = hyperpod or false }
    if before.created then notes[#notes + 1] = "hypd created this cluster (cluster_create_eks); its record is refreshed" end
    if not hyperpod then notes[#notes + 1] = "no SageMaker HyperPod cluster is orchestrated by it yet" end
    local act = hypd.clusters.active()
    if not act then
      hypd.clusters.set_active { name = c.name, region = region, arn = c.arn }
      act = { name = c.name, region = region }
    end
    return { cluster = c.name, region = region, arn = c.arn, version = c.version,
      authentication_mode = (c.accessConfig or {}).authenticationMode, principal = principal,
      kubernetes_access = access, hyperpod = hyperpod or hypd.json.null, created_by_hypd = before.created == true,
      active = act.name == c.name and act.region == region, notes = notes }
  end,
}
