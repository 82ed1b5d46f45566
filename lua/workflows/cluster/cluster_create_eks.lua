-- cluster_create_eks: stage 1 of a HyperPod cluster, the EKS cluster and
-- everything under it, for one cluster tag in one region (the network's
-- steps call cluster/_eks_network, the cluster's cluster/_eks_stage).
-- Steps:
--   vpc               VPC hypd-<tag>-vpc, DNS support and hostnames on
--   internet_gateway  internet gateway hypd-<tag>-igw, attached to the VPC
--   subnets           a public and a private subnet in each of the first
--                     two zones EKS supports (hypd-<tag>-public-<az>,
--                     hypd-<tag>-private-<az>)
--   nat_gateway       Elastic IP and NAT gateway hypd-<tag>-nat in the first
--                     public subnet (not waited for here)
--   public_routes     route table hypd-<tag>-public-rt, 0.0.0.0/0 -> the
--                     internet gateway, associated with the public subnets
--   security_group    hypd-<tag>-cluster, all traffic within the group
--   iam               role hypd-<tag>-eks-cluster-role with
--                     AmazonEKSClusterPolicy attached
--   cluster           EKS cluster hypd-<tag> (authentication mode API) in the
--                     private subnets
--   private_routes    waits for the NAT gateway; hypd-<tag>-private-rt,
--                     0.0.0.0/0 -> NAT, associated with the private subnets
--                     (after the cluster is asked for: the two waits overlap)
--   wait_active       until the cluster is ACTIVE
--   access            the caller as cluster admin (an access entry); the
--                     first cluster becomes the active one
local P = require "_params"
local net = require "cluster._eks_network"
local stage = require "cluster._eks_stage"

local OCTET = "(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)"
local CIDR = { type = "string", pattern = "^(" .. OCTET .. "\\.){3}" .. OCTET .. "/\\d{1,2}$",
  pattern_help = "an IPv4 CIDR like 10.192.0.0/20" }

-- the parameters (their defaults are the tool's: an operator who copies
-- this file into the playbook directory changes them here)
local params = {
  cluster_tag = P.with(P.cluster_tag, { required = true, decision = true, fixed = true,
    description = "Short lowercase name of this cluster (3 to 32 characters: a-z, 0-9, '-'). It names every " ..
      "resource: EKS cluster hypd-<tag>, VPC hypd-<tag>-vpc, subnets hypd-<tag>-public-<az> and " ..
      "hypd-<tag>-private-<az>, NAT gateway hypd-<tag>-nat, security group hypd-<tag>-cluster, IAM role " ..
      "hypd-<tag>-eks-cluster-role; all are tagged hypd:cluster-tag=<tag>. Ask the person; never invent it." }),
  region = P.region,
  kubernetes_version = { type = "string", enum = stage.VERSIONS, default = "1.34",
    description = "Kubernetes version of the EKS control plane (HyperPod supports 1.28 to 1.34)." },
  vpc_cidr = { type = "string", default = "10.192.0.0/16",
    pattern = "^((25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)\\.){3}(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)/(1[6-9]|2[0-4])$",
    pattern_help = "an IPv4 CIDR from /16 to /24, like 10.192.0.0/16",
    description = "IPv4 CIDR of the new VPC, /16 to /24. Four subnets of a sixteenth each are carved from it " ..
      "(a /16 gives /20s) unless public_subnet_cidrs and private_subnet_cidrs name them; the rest stays free " ..
      "for HyperPod compute subnets." },
  public_subnet_cidrs = { type = "array", items = CIDR,
    description = "The blocks of the two public subnets, first zone then second (e.g. [\"10.192.0.0/24\", " ..
      "\"10.192.1.0/24\"]): /16 to /28, inside vpc_cidr, overlapping no other subnet. Give private_subnet_cidrs " ..
      "too, or neither (then each subnet takes the next free sixteenth of the VPC)." },
  private_subnet_cidrs = { type = "array", items = CIDR,
    description = "The blocks of the two private (EKS) subnets, first zone then second: the same rules as " ..
      "public_subnet_cidrs, and given together with it." },
}

return tool {
  name = "cluster_create_eks",
  summary = "Stage 1: create (or reuse) the VPC, networking, IAM role and EKS cluster for a HyperPod cluster",
  description = "Creates (or reuses) the EKS stage of a cluster, named and tagged from cluster_tag: the VPC and its " ..
    "subnets, gateways and routes, the cluster role, and the EKS cluster hypd-<cluster_tag> with the " ..
    "caller as cluster admin. 8 to 12 minutes. The only decision is cluster_tag: ask the person. Follow " ..
    "it with cluster_get_creation_status; safe to call again; plan = true lists what it would create.",
  kind = "mutating",
  aws = { "pricing:GetProducts",
    "ec2:Describe*", "ec2:CreateVpc", "ec2:ModifyVpcAttribute", "ec2:CreateSubnet", "ec2:ModifySubnetAttribute",
    "ec2:CreateInternetGateway", "ec2:AttachInternetGateway", "ec2:AllocateAddress", "ec2:CreateNatGateway",
    "ec2:CreateRouteTable", "ec2:CreateRoute", "ec2:ReplaceRoute", "ec2:AssociateRouteTable",
    "ec2:CreateSecurityGroup", "ec2:AuthorizeSecurityGroupIngress", "ec2:CreateTags",
    "iam:GetRole", "iam:CreateRole", "iam:AttachRolePolicy", "iam:ListAttachedRolePolicies", "iam:PassRole",
    "eks:DescribeCluster", "eks:CreateCluster", "eks:DescribeAccessEntry", "eks:CreateAccessEntry",
    "eks:AssociateAccessPolicy", "eks:ListAssociatedAccessPolicies", "sts:GetCallerIdentity" },
  params = P.form({ "cluster_tag" },
    { "kubernetes_version", "private_subnet_cidrs", "public_subnet_cidrs", "vpc_cidr", "region" },
    params),
  status_tool = "cluster_get_creation_status",
  target = stage.target,
  validate = net.check_subnet_cidrs,
  steps = {
    { name = "vpc", run = net.vpc },
    { name = "internet_gateway", run = net.internet_gateway },
    { name = "subnets", run = net.subnets },
    { name = "nat_gateway", run = net.nat_gateway },
    { name = "public_routes", run = net.public_routes },
    { name = "security_group", run = net.security_group },
    { name = "iam", run = stage.iam },
    { name = "cluster", run = stage.cluster },
    { name = "private_routes", run = net.private_routes },
    { name = "wait_active", run = stage.wait_active },
    { name = "access", run = stage.access },
  },
}
