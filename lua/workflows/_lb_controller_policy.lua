-- _lb_controller_policy: the IAM policy of the AWS Load Balancer Controller
-- (its iam_policy.json), the same for the controller
-- cluster_configure_dependencies installs and for the HyperPod inference
-- operator's own copy of it (hyperpod/_feat_inference), kept in one place.
local M = {}

function M.policy()
  return { Version = "2012-10-17", Statement = {
    { Effect = "Allow", Action = { "iam:CreateServiceLinkedRole" }, Resource = "*",
      Condition = { StringEquals = { ["iam:AWSServiceName"] = "elasticloadbalancing.amazonaws.com" } } },
    { Effect = "Allow", Action = { "ec2:Describe*", "ec2:GetCoipPoolUsage", "elasticloadbalancing:Describe*",
      "acm:ListCertificates", "acm:DescribeCertificate", "wafv2:GetWebACL", "wafv2:GetWebACLForResource",
      "shield:GetSubscriptionState", "cognito-idp:DescribeUserPoolClient" }, Resource = "*" },
    { Effect = "Allow", Action = { "ec2:AuthorizeSecurityGroupIngress", "ec2:RevokeSecurityGroupIngress",
      "ec2:CreateSecurityGroup", "ec2:DeleteSecurityGroup", "ec2:CreateTags", "ec2:DeleteTags" }, Resource = "*" },
    { Effect = "Allow", Action = { "elasticloadbalancing:CreateLoadBalancer", "elasticloadbalancing:CreateTargetGroup",
      "elasticloadbalancing:CreateListener", "elasticloadbalancing:DeleteListener", "elasticloadbalancing:CreateRule",
      "elasticloadbalancing:DeleteRule", "elasticloadbalancing:ModifyLoadBalancerAttributes",
      "elasticloadbalancing:SetIpAddressType", "elasticloadbalancing:SetSecurityGroups",
      "elasticloadbalancing:SetSubnets", "elasticloadbalancing:DeleteLoadBalancer",
      "elasticloadbalancing:ModifyTargetGroup", "elasticloadbalancing:ModifyTargetGroupAttributes",
      "elasticloadbalancing:DeleteTargetGroup", "elasticloadbalancing:RegisterTargets",
      "elasticloadbalancing:DeregisterTargets", "elasticloadbalancing:ModifyListener",
      "elasticloadbalancing:AddListenerCertificates", "elasticloadbalancing:RemoveListenerCertificates",
      "elasticloadbalancing:ModifyRule", "elasticloadbalancing:AddTags", "elasticloadbalancing:RemoveTags",
      "elasticloadbalancing:SetWebAcl" }, Resource = "*" } } }
end

return M
