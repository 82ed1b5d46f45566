-- cluster_create_eks: stage 1 of a HyperPod cluster, the EKS cluster and
-- everything under it (the steps are in cluster/_eks_stage).
local stage = require "cluster._eks_stage"

return tool {
  name = "cluster_create_eks",
  summary = "Stage 1: create (or reuse) the VPC, networking, IAM role and EKS cluster for a HyperPod cluster",
  description = "Creates, or finds again and reuses, everything the EKS stage needs, named and tagged from " ..
    "cluster_tag (tag hypd:cluster-tag): a VPC with two public subnets, an internet gateway, a NAT gateway, " ..
    "two private subnets for EKS, route tables and a security group; the EKS cluster role; the EKS cluster " ..
    "hypd-<cluster_tag> with API authentication and the caller as cluster admin (access entry). Waits until " ..
    "ACTIVE (8 to 12 minutes on AWS). The only decision is cluster_tag: ask the person for it. It answers at " ..
    "once with an operation; follow it with cluster_get_creation_status. Calling it again with the same tag " ..
    "returns the running operation, or changes nothing once done; plan = true lists what it would create.",
  kind = "mutating",
  aws = { "ec2:Describe*", "ec2:CreateVpc", "ec2:ModifyVpcAttribute", "ec2:CreateSubnet", "ec2:ModifySubnetAttribute",
    "ec2:CreateInternetGateway", "ec2:AttachInternetGateway", "ec2:AllocateAddress", "ec2:CreateNatGateway",
    "ec2:CreateRouteTable", "ec2:CreateRoute", "ec2:ReplaceRoute", "ec2:AssociateRouteTable",
    "ec2:CreateSecurityGroup", "ec2:AuthorizeSecurityGroupIngress", "ec2:CreateTags",
    "iam:GetRole", "iam:CreateRole", "iam:AttachRolePolicy", "iam:ListAttachedRolePolicies", "iam:PassRole",
    "eks:DescribeCluster", "eks:CreateCluster", "eks:DescribeAccessEntry", "eks:CreateAccessEntry",
    "eks:AssociateAccessPolicy", "eks:ListAssociatedAccessPolicies", "sts:GetCallerIdentity" },
  params = stage.params,
  status_tool = "cluster_get_creation_status",
  target = stage.target,
  steps = stage.steps,
}
