-- cluster_delete: everything hypd made for a cluster tag, taken away in the
-- reverse order of its making (cluster/_teardown), and nothing else.
local P = require "_params"
local td = require "cluster._teardown"

local function eks_name(tag) return "hypd-" .. tag end

return tool {
  name = "cluster_delete",
  summary = "Delete everything hypd made for a cluster tag, in reverse order; report what was kept and why",
  description = "Deletes, in the reverse order of creation, what hypd made for cluster_tag (everything carrying " ..
    "the tag hypd:cluster-tag=<tag>) and nothing else: the HyperPod cluster (hyperpod_delete), the storage, " ..
    "the EKS cluster hypd-<tag> with its add-ons, the IAM roles, policies and OIDC provider, then the network " ..
    "(endpoints, NAT gateway, Elastic IP, route tables, internet gateway, subnets, security groups, VPC). It " ..
    "waits for each deletion and reports what was kept and why (a bucket holding data unless force, a " ..
    "resource someone else made, the default route table and security group that go with their VPC). It " ..
    "answers with an operation; follow it with operation_get. plan = true lists what it would delete.",
  kind = "destructive",
  status_tool = "operation_get",
  aws = { "ec2:Describe*", "ec2:DeleteVpcEndpoints", "ec2:DeleteNatGateway", "ec2:ReleaseAddress",
    "ec2:DisassociateRouteTable", "ec2:DeleteRouteTable", "ec2:DetachInternetGateway",
    "ec2:DeleteInternetGateway", "ec2:DeleteSubnet", "ec2:DeleteSecurityGroup", "ec2:DeleteVpc",
    "eks:DescribeCluster", "eks:DeleteCluster", "eks:ListNodegroups", "eks:DescribeNodegroup",
    "iam:ListRoles", "iam:GetRole", "iam:ListAttachedRolePolicies", "iam:DetachRolePolicy", "iam:ListRolePolicies",
    "iam:DeleteRolePolicy", "iam:ListInstanceProfilesForRole", "iam:RemoveRoleFromInstanceProfile",
    "iam:DeleteRole", "iam:ListPolicies", "iam:GetPolicy", "iam:ListPolicyVersions", "iam:DeletePolicyVersion",
    "iam:DeletePolicy", "iam:ListOpenIDConnectProviders", "iam:GetOpenIDConnectProvider",
    "iam:DeleteOpenIDConnectProvider", "sagemaker:ListClusters", "sagemaker:DescribeCluster" },
  params = {
    cluster_tag = P.with(P.cluster_tag, { required = true, decision = true,
      description = "the tag of the cluster to delete: everything tagged hypd:cluster-tag=<tag> goes" }),
    region = P.region,
    force = { type = "boolean", default = false,
      description = "also delete storage that holds data (an S3 bucket with objects); without it, kept and reported" },
  },
  target = function(p) return "delete/" .. (p.region or hypd.aws.region()) .. "/" .. p.cluster_tag end,
  steps = {
    { name = "hyperpod", run = function(ctx)
      local c = ctx:try("eks", "DescribeCluster", { name = eks_name(ctx.params.cluster_tag) })
      ctx.state.oidc_issuer = c and c.cluster.identity and c.cluster.identity.oidc and c.cluster.identity.oidc.issuer
      if c and hypd.tools.exists("hyperpod_delete") then
        hypd.tools.call("hyperpod_delete", { cluster = c.cluster.name, region = ctx:aws_region(),
          force = ctx.params.force })
      end
    end },
    { name = "storage", run = function(ctx)
      if hypd.tools.exists("storage_delete") then
        hypd.tools.call("storage_delete", { cluster_tag = ctx.params.cluster_tag, region = ctx:aws_region(),
          all = true, delete_data = true, force = ctx.params.force })
      end
    end },
    { name = "eks_cluster", run = function(ctx)
      local name = eks_name(ctx.params.cluster_tag)
      local ngs = ctx:try("eks", "ListNodegroups", { clusterName = name })
      local left = ngs and ngs.nodegroups or {}
      if #left > 0 and not ctx.plan then
        hypd.errors.raise("CONFLICT", string.format("EKS cluster %s still has node groups hypd did not make (%s): " ..
          "delete them first (cluster_delete_node_group), then call cluster_delete again", name,
          table.concat(left, ", ")), { field = "cluster_tag" })
      end
      td.eks_cluster(ctx, name, ctx.params.cluster_tag)
    end },
    { name = "iam", run = function(ctx) td.iam_sweep(ctx, ctx.params.cluster_tag, ctx.state.oidc_issuer) end },
    { name = "network", run = function(ctx) td.ec2_sweep(ctx, ctx.params.cluster_tag) end },
    { name = "forget", run = function(ctx)
      local name = eks_name(ctx.params.cluster_tag)
      if not ctx.plan then hypd.clusters.forget(name, ctx:aws_region()) end
      ctx.state.result = { cluster_tag = ctx.params.cluster_tag, kept = ctx.state.kept or hypd.json.array() }
    end },
  },
}
