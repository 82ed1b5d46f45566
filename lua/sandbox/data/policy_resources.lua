-- The resources an IAM action is authorized on, per the Service
-- Authorization Reference ("Actions, resources, and condition keys for
-- <service>"), for the actions hypd calls whose resources the generic rules
-- of sandbox.policy_resources would get wrong or leave out. Read by
-- sandbox.policy_resources.
--
-- arns["service:Action"] = { template, ... }: each template is the
-- resource part of an ARN in the action's service (the request's region and
-- account), or a whole ARN ("arn:..."; {:region} the request's region);
-- "{Member}" stands for the request's member Member (each element when it
-- is a list and the template names no other member); a template whose
-- member the request lacks names no resource. Every resource named must be allowed, as IAM requires
-- for an action on several resource types (EC2's CreateSubnet is
-- authorized on the new subnet and on the VPC it goes in).
--
-- passed[service .. ":" .. operation] = { members = { path, ... }, to =
-- service principal }: the roles the operation hands to a service
-- (iam:PassRole on each, after the action itself), and the value of
-- iam:PassedToService in that check. A path is a member name, or
-- "List[].Member" for a member of every element of a list.
local M = {}

M.arns = {
  ["ec2:AllocateAddress"] = { "elastic-ip/*" },
  ["ec2:AssociateRouteTable"] = { "route-table/{RouteTableId}", "subnet/{SubnetId}", "internet-gateway/{GatewayId}" },
  ["ec2:AssociateVpcCidrBlock"] = { "vpc/{VpcId}" },
  ["ec2:AttachInternetGateway"] = { "internet-gateway/{InternetGatewayId}", "vpc/{VpcId}" },
  ["ec2:DetachInternetGateway"] = { "internet-gateway/{InternetGatewayId}", "vpc/{VpcId}" },
  ["ec2:AuthorizeSecurityGroupIngress"] = { "security-group/{GroupId}" },
  ["ec2:RevokeSecurityGroupIngress"] = { "security-group/{GroupId}" },
  ["ec2:CreateInternetGateway"] = { "internet-gateway/*" },
  ["ec2:CreateNatGateway"] = { "natgateway/*", "subnet/{SubnetId}", "elastic-ip/{AllocationId}" },
  ["ec2:CreateRoute"] = { "route-table/{RouteTableId}" },
  ["ec2:ReplaceRoute"] = { "route-table/{RouteTableId}" },
  ["ec2:DeleteRoute"] = { "route-table/{RouteTableId}" },
  ["ec2:CreateRouteTable"] = { "route-table/*", "vpc/{VpcId}" },
  ["ec2:CreateSecurityGroup"] = { "security-group/*", "vpc/{VpcId}" },
  ["ec2:CreateSubnet"] = { "subnet/*", "vpc/{VpcId}" },
  ["ec2:CreateVpc"] = { "vpc/*" },
  ["ec2:CreateVpcEndpoint"] = { "vpc-endpoint/*", "vpc/{VpcId}", "route-table/{RouteTableIds}",
    "subnet/{SubnetIds}", "security-group/{SecurityGroupIds}" },
  ["ec2:ModifyVpcEndpoint"] = { "vpc-endpoint/{VpcEndpointId}", "route-table/{AddRouteTableIds}",
    "subnet/{AddSubnetIds}", "security-group/{AddSecurityGroupIds}" },
  ["ec2:DeleteInternetGateway"] = { "internet-gateway/{InternetGatewayId}" },
  ["ec2:DeleteNatGateway"] = { "natgateway/{NatGatewayId}" },
  ["ec2:DeleteRouteTable"] = { "route-table/{RouteTableId}" },
  ["ec2:DeleteSecurityGroup"] = { "security-group/{GroupId}" },
  ["ec2:DeleteSubnet"] = { "subnet/{SubnetId}" },
  ["ec2:DeleteVpc"] = { "vpc/{VpcId}" },
  ["ec2:DeleteVpcEndpoints"] = { "vpc-endpoint/{VpcEndpointIds}" },
  ["ec2:ModifySubnetAttribute"] = { "subnet/{SubnetId}" },
  ["ec2:ModifyVpcAttribute"] = { "vpc/{VpcId}" },
  ["ec2:ReleaseAddress"] = { "elastic-ip/{AllocationId}" },
  ["sagemaker:DescribeEndpoint"] = { "endpoint/{EndpointName}" },
  -- SageMaker's public hub belongs to the account "aws"
  ["sagemaker:DescribeHubContent"] = {
    "arn:aws:sagemaker:{:region}:aws:hub-content/{HubName}/{HubContentType}/{HubContentName}" },
  ["sagemaker:ListHubContents"] = { "arn:aws:sagemaker:{:region}:aws:hub/{HubName}" },
  ["sagemaker:ListHubContentVersions"] = { "arn:aws:sagemaker:{:region}:aws:hub/{HubName}" },
  ["logs:FilterLogEvents"] = { "log-group:{logGroupName}" },
  ["logs:GetLogEvents"] = { "log-group:{logGroupName}" },
  ["logs:DescribeLogStreams"] = { "log-group:{logGroupName}" },
}

M.passed = {
  ["eks:CreateCluster"] = { members = { "roleArn" }, to = "eks.amazonaws.com" },
  ["eks:CreateNodegroup"] = { members = { "nodeRole" }, to = "eks.amazonaws.com" },
  ["eks:CreatePodIdentityAssociation"] = { members = { "roleArn" }, to = "pods.eks.amazonaws.com" },
  ["sagemaker:CreateCluster"] = { members = { "InstanceGroups[].ExecutionRole", "ClusterRole" },
    to = "sagemaker.amazonaws.com" },
  ["sagemaker:UpdateCluster"] = { members = { "InstanceGroups[].ExecutionRole", "ClusterRole" },
    to = "sagemaker.amazonaws.com" },
  ["sagemaker:CreateMlflowTrackingServer"] = { members = { "RoleArn" }, to = "sagemaker.amazonaws.com" },
}

return M
