-- diagnose_cluster_creation against the sandbox in this process (virtual
-- clock): healthy on a cluster made well; each fault of a creation gives its
-- finding with its code, severity and quoted evidence: a lifecycle script
-- that fails (the lifecycle_failure fault: its log lines in CloudWatch
-- Logs, HyperPod's FailureMessage), no capacity (insufficient_capacity), an
-- unhealthy add-on (addon_unhealthy), and what real API calls break: an
-- access entry deleted, a quota lowered, an execution role's trust and an
-- IRSA role's trust made wrong; a failed creation operation. Nothing is
-- mutated while it runs; every suggested call validates.
local t = require "hypd.tap"
local json = require "hypd.json"
local task = require "hypd.task"
local faults = require "sandbox.faults"
local k8s = require "hypd.k8s"
local dispatch = require "hypd.tool.dispatch"
local C = dofile("tests/lua/capacity_helpers.lua")
local D = dofile("tests/lua/diag_helpers.lua")
local H = dofile("tests/lua/helpers.lua")

local S
local function skip() return t.skip("no cluster: the first test failed to make it") end

-- hyperpod(eks, hp, octet, o) -> the DescribeCluster of a HyperPod cluster
-- on a new EKS cluster once it left Creating (o.count nodes of ml.m5.xlarge
-- in group workers, NodeProvisioningMode o.mode)
local function hyperpod(eks, hp, octet, o)
  local call = S.call
  local cl = H.eks_cluster(call, eks, octet, { security_group = true })
  call("s3", "CreateBucket", { Bucket = eks .. "-lcc", CreateBucketConfiguration = { LocationConstraint = "us-west-2" } })
  call("s3", "PutObject", { Bucket = eks .. "-lcc", Key = "lcc/on_create.sh", Body = "#!/bin/bash\n" })
  call("sagemaker", "CreateCluster", { ClusterName = hp, Orchestrator = { Eks = { ClusterArn = cl.arn } },
    VpcConfig = { SecurityGroupIds = { cl.sg }, Subnets = { cl.subnets[1] } }, NodeRecovery = "None",
    NodeProvisioningMode = o.mode, InstanceGroups = { { InstanceGroupName = "workers", InstanceType = "ml.m5.xlarge",
      InstanceCount = o.count or 2, ExecutionRole = S.info.role,
      LifeCycleConfig = { SourceS3Uri = "s3://" .. eks .. "-lcc/lcc/", OnCreate = "on_create.sh" } } } })
  local d
  repeat
    task.sleep(30)
    d = call("sagemaker", "DescribeCluster", { ClusterName = hp })
  until d.ClusterStatus ~= "Creating"
  return d
end

t.test("a sandbox with an EKS cluster and a HyperPod cluster of three nodes", function()
  S = C.here()
  t.cleanup(function() faults.configure {} end)
  S.build("diag-create", "hp-create")
end)

t.test("a cluster made well is healthy; the answer says what was checked", function()
  if not S then return skip() end
  local r = D.run("diagnose_cluster_creation", {})
  t.eq(r.healthy, true, json.encode(r.findings))
  local looked = {}
  for _, c in ipairs(r.checked) do looked[#looked + 1] = c.what end
  t.eq(looked, { "operation", "EKS cluster", "EKS add-ons", "access entries", "HyperPod cluster", "HyperPod nodes",
    "lifecycle script logs", "service quotas", "execution roles", "IRSA roles" })
end)

t.test("bad input names the field: an unknown operation, an operation that is no creation, an unknown cluster",
  function()
  if not S then return skip() end
  local out, err = dispatch.call("diagnose_cluster_creation", { operation_id = "op-0123456789abcdef" }, D.OPER)
  t.fails(out, err, "NOT_FOUND")
  t.eq(err.fields[1].field, "operation_id")
  out, err = dispatch.call("diagnose_cluster_creation", { operation_id = "nope" }, D.OPER)
  t.fails(out, err, "VALIDATION")
  out, err = dispatch.call("diagnose_cluster_creation", { cluster = "nobody-here" }, D.OPER)
  t.fails(out, err, "NOT_FOUND")
  t.eq(err.fields[1].field, "cluster")
end)

t.test("every node writes its lifecycle log stream, which the aws CLI's calls read", function()
  if not S then return skip() end
  local arn = S.call("sagemaker", "DescribeCluster", { ClusterName = S.hp }).ClusterArn
  local group = "/aws/sagemaker/Clusters/" .. S.hp .. "/" .. arn:match("([^/]+)$")
  local streams = S.call("logs", "DescribeLogStreams", { logGroupName = group }).logStreams
  t.eq(#streams, 3, "one stream a node")
  t.like(streams[1].logStreamName, "^LifecycleConfig/cpu/i%-%x+$")
  local ev = S.call("logs", "GetLogEvents", { logGroupName = group, logStreamName = streams[1].logStreamName,
    startFromHead = true }).events
  t.like(ev[#ev].message, "on_create.sh completed successfully")
  local ok, err = pcall(S.call, "logs", "DescribeLogStreams", { logGroupName = "/aws/sagemaker/Clusters/none" })
  t.eq({ ok, type(err) == "table" and err.code }, { false, "ResourceNotFoundException" })
end)

t.test("an add-on EKS reports unhealthy (addon_unhealthy): ADDON_UNHEALTHY quoting status and health issue",
  function()
  if not S then return skip() end
  S.call("eks", "CreateAddon", { clusterName = S.eks, addonName = "eks-pod-identity-agent" })
  task.sleep(300)
  t.eq(D.run("diagnose_cluster_creation", {}).healthy, true, "healthy with the add-on ACTIVE")
  assert(faults.configure { addon_unhealthy = { { cluster = S.eks, addon = "eks-pod-identity-agent",
    code = "InsufficientNumberOfReplicas", message = "The add-on is unhealthy because it doesn't have the desired " ..
    "number of replicas." } } })
  local r = D.run("diagnose_cluster_creation", {})
  local f = D.find(r, "ADDON_UNHEALTHY")
  t.ok(f, json.encode(D.codes(r)))
  if f then
    t.eq(f.severity, "critical")
    t.eq(f.evidence[1].quote, "DEGRADED")
    t.eq(f.evidence[2].quote, "InsufficientNumberOfReplicas: The add-on is unhealthy because it doesn't have the " ..
      "desired number of replicas.")
  end
  faults.configure {}
end)

t.test("the caller's access entry deleted: ACCESS_ENTRY_MISSING quoting the entries there are", function()
  if not S then return skip() end
  local me = S.call("sts", "GetCallerIdentity", {}).Arn
  local entries = S.call("eks", "ListAccessEntries", { clusterName = S.eks }).accessEntries
  local mine
  for _, e in ipairs(entries) do if e == me or e:match("role/") then mine = mine or e end end
  t.ok(mine, "the creator has an access entry: " .. json.encode(entries) .. " caller " .. me)
  if not mine then return end
  S.call("eks", "DeleteAccessEntry", { clusterName = S.eks, principalArn = mine })
  local r = D.run("diagnose_cluster_creation", {})
  local f = D.find(r, "ACCESS_ENTRY_MISSING")
  t.ok(f, json.encode(D.codes(r)))
  if f then
    t.eq(f.severity, "critical")
    t.eq(f.subject, "access entry for " .. mine)
    t.like(f.evidence[1].source, "ListAccessEntries")
    t.like(f.explanation, "aws eks create%-access%-entry")
  end
  S.call("eks", "CreateAccessEntry", { clusterName = S.eks, principalArn = mine })
  local after = D.run("diagnose_cluster_creation", {})
  local p = D.find(after, "ACCESS_POLICY_MISSING")
  t.ok(p, "an entry without the admin policy: " .. json.encode(D.codes(after)))
  if p then t.eq(p.evidence[1].quote, "(none)") end
  S.call("eks", "AssociateAccessPolicy", { clusterName = S.eks, principalArn = mine,
    policyArn = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy", accessScope = { type = "cluster" } })
  t.eq(D.run("diagnose_cluster_creation", {}).healthy, true, "healthy again")
end)

t.test("a quota below a group's count: QUOTA_TOO_LOW quoting the quota's value and the target", function()
  if not S then return skip() end
  local sq = require "sandbox.services.servicequotas"
  assert(sq.set("us-west-2", "ml.g6e.24xlarge for cluster usage", 1, "sagemaker"))
  local r = D.run("diagnose_cluster_creation", {})
  local f = D.find(r, "QUOTA_TOO_LOW")
  t.ok(f, json.encode(D.codes(r)))
  if f then
    t.eq({ f.evidence[1].quote, f.evidence[2].quote }, { "1", "2" })
    t.like(f.summary, "allows 1 ml.g6e.24xlarge, the cluster asks 2")
  end
  assert(sq.set("us-west-2", "ml.g6e.24xlarge for cluster usage", 16, "sagemaker"))
end)

t.test("the execution role's trust without sagemaker.amazonaws.com: EXECUTION_ROLE_TRUST quoting the policy",
  function()
  if not S then return skip() end
  local name = S.info.role:match("role/(.+)$")
  S.call("iam", "UpdateAssumeRolePolicy", { RoleName = name, PolicyDocument = json.encode { Version = "2012-10-17",
    Statement = { { Effect = "Allow", Principal = { Service = "ec2.amazonaws.com" }, Action = "sts:AssumeRole" } } } })
  local r = D.run("diagnose_cluster_creation", {})
  local f = D.find(r, "EXECUTION_ROLE_TRUST")
  t.ok(f, json.encode(D.codes(r)))
  if f then
    t.eq(f.subject, "IAM role " .. name)
    t.like(f.evidence[1].quote, "ec2%.amazonaws%.com")
  end
  S.call("iam", "UpdateAssumeRolePolicy", { RoleName = name, PolicyDocument = json.encode { Version = "2012-10-17",
    Statement = { { Effect = "Allow", Principal = { Service = { "eks.amazonaws.com", "sagemaker.amazonaws.com" } },
      Action = "sts:AssumeRole" } } } })
end)

t.test("a service account's IRSA role trusting another cluster's provider or another account: IRSA_TRUST_MISMATCH",
  function()
  if not S then return skip() end
  local c = S.call("eks", "DescribeCluster", { name = S.eks }).cluster
  local host = c.identity.oidc.issuer:gsub("^https://", "")
  local acct = c.arn:match(":(%d+):cluster/")
  local function role(name, fed_host, sub)
    return S.call("iam", "CreateRole", { RoleName = name, AssumeRolePolicyDocument = json.encode {
      Version = "2012-10-17", Statement = { { Effect = "Allow",
        Principal = { Federated = "arn:aws:iam::" .. acct .. ":oidc-provider/" .. fed_host },
        Action = "sts:AssumeRoleWithWebIdentity",
        Condition = { StringEquals = { [fed_host .. ":sub"] = sub, [fed_host .. ":aud"] = "sts.amazonaws.com" } } } } }
    }).Role.Arn
  end
  for _, h in ipairs { host, "oidc.eks.us-west-2.amazonaws.com/id/0000OTHER" } do
    pcall(S.call, "iam", "CreateOpenIDConnectProvider", { Url = "https://" .. h, ClientIDList = { "sts.amazonaws.com" },
      ThumbprintList = { string.rep("a", 40) } })
  end
  local good = role("diag-good-irsa", host, "system:serviceaccount:default:good")
  local other = role("diag-other-irsa", "oidc.eks.us-west-2.amazonaws.com/id/0000OTHER", "system:serviceaccount:default:bad")
  local wrong_sa = role("diag-sa-irsa", host, "system:serviceaccount:kube-system:someone-else")
  local conn = k8s.connect { cluster = S.eks, region = "us-west-2" }
  for name, arn in pairs { good = good, bad = other, wrongsa = wrong_sa } do
    assert(conn:create { apiVersion = "v1", kind = "ServiceAccount", metadata = { name = name, namespace = "default",
      annotations = { ["eks.amazonaws.com/role-arn"] = arn } } })
  end
  local r = D.run("diagnose_cluster_creation", {})
  local bad = D.find(r, "IRSA_TRUST_MISMATCH", "default/bad")
  local sa = D.find(r, "IRSA_TRUST_MISMATCH", "default/wrongsa")
  t.ok(bad and sa, json.encode(D.codes(r)))
  t.eq(D.find(r, "IRSA_TRUST_MISMATCH", "default/good"), nil, "the role made right is not named")
  if bad and sa then
    t.eq(bad.summary, "the role's trust does not name the cluster's OIDC provider")
    t.eq(sa.summary, "the role's trust does not name the service account")
    t.eq(bad.evidence[1].quote, other)
    t.like(bad.evidence[3].quote, "0000OTHER")
  end
  for _, name in ipairs { "bad", "wrongsa" } do conn:delete("v1", "ServiceAccount", name, { namespace = "default" }) end
end)

t.test("a lifecycle script that fails (lifecycle_failure): HYPERPOD_CREATION_FAILED with FailureMessage and " ..
  "LIFECYCLE_SCRIPT_ERROR quoting the script's error line from CloudWatch Logs", function()
  if not S then return skip() end
  assert(faults.configure { lifecycle_failure = { { cluster = "hp-lcc", instance_group = "workers",
    message = "mount.lustre: mount fs-0abc@tcp:/fsx at /fsx failed: No such file or directory" } } })
  local d = hyperpod("diag-lcc", "hp-lcc", 45, {})
  t.eq(d.ClusterStatus, "Failed")
  t.like(d.FailureMessage, "^Lifecycle scripts did not run successfully on 1 instance")
  local r = D.run("diagnose_cluster_creation", { cluster = "diag-lcc" })
  local hpf, lcc = D.find(r, "HYPERPOD_CREATION_FAILED"), D.find(r, "LIFECYCLE_SCRIPT_ERROR")
  t.ok(hpf and lcc, json.encode(D.codes(r)))
  if hpf and lcc then
    t.eq(hpf.evidence[2].quote, d.FailureMessage)
    t.eq(lcc.evidence[1].quote, "ERROR: mount.lustre: mount fs-0abc@tcp:/fsx at /fsx failed: No such file or directory")
    t.like(lcc.evidence[1].source, "^CloudWatch Logs /aws/sagemaker/Clusters/hp%-lcc/%w+ LifecycleConfig/workers/i%-")
    t.like(lcc.evidence[2].quote, "on_create.sh failed with exit code 1")
    t.like(lcc.subject, "%(workers%)$")
  end
  faults.configure {}
end)

t.test("no capacity for the type (insufficient_capacity): CAPACITY_INSUFFICIENT quoting HyperPod's message", function()
  if not S then return skip() end
  assert(faults.configure { insufficient_capacity = { { instance_type = "ml.m5.xlarge" } } })
  local d = hyperpod("diag-cap", "hp-cap", 46, {})
  t.eq(d.ClusterStatus, "Failed")
  local r = D.run("diagnose_cluster_creation", { cluster = "diag-cap" })
  local f = D.find(r, "CAPACITY_INSUFFICIENT")
  t.ok(f and D.find(r, "HYPERPOD_CREATION_FAILED"), json.encode(D.codes(r)))
  if f then
    t.like(f.evidence[1].quote, "^InsufficientCapacity: We currently do not have sufficient capacity")
    t.like(f.evidence[1].source, "FailureMessage")
    t.eq(D.actions(f), { "inspect aws_get_availability_zones", "inspect aws_get_instance_types" })
  end
  faults.configure {}
end)

t.test("an EKS cluster whose creation fails (eks_failure): EKS_CLUSTER_FAILED and EKS_HEALTH_ISSUE quoting " ..
  "the issue; one with authenticationMode CONFIG_MAP: AUTH_MODE_CONFIG_MAP", function()
  if not S then return skip() end
  assert(faults.configure { eks_failure = { { cluster = "diag-eksfail", code = "Ec2SubnetNotFound",
    message = "The subnet ID 'subnet-0abc' does not exist" } } })
  H.eks_cluster(S.call, "diag-eksfail", 48, { wait = false })
  repeat task.sleep(30) until S.call("eks", "DescribeCluster", { name = "diag-eksfail" }).cluster.status ~= "CREATING"
  faults.configure {}
  local r = D.run("diagnose_cluster_creation", { cluster = "diag-eksfail" })
  local failed, issue = D.find(r, "EKS_CLUSTER_FAILED"), D.find(r, "EKS_HEALTH_ISSUE")
  t.ok(failed and issue, json.encode(D.codes(r)))
  if failed and issue then
    t.eq(failed.evidence[1], { source = "eks DescribeCluster cluster.status", quote = "FAILED" })
    t.eq(issue.evidence[1].quote, "Ec2SubnetNotFound: The subnet ID 'subnet-0abc' does not exist")
  end
  H.eks_cluster(S.call, "diag-cm", 49, { mode = "CONFIG_MAP" })
  r = D.run("diagnose_cluster_creation", { cluster = "diag-cm" })
  local cm = D.find(r, "AUTH_MODE_CONFIG_MAP")
  t.ok(cm, json.encode(D.codes(r)))
  if cm then
    t.eq(cm.evidence[1], { source = "eks DescribeCluster cluster.accessConfig.authenticationMode", quote = "CONFIG_MAP" })
  end
end)

t.test("a hyperpod_create that fails (the VPC has no NAT gateway): OPERATION_FAILED quoting the operation's " ..
  "error and the failed step, found as the cluster's latest creation and by operation_id", function()
  if not S then return skip() end
  local op = require "hypd.tool.operations"
  H.eks_cluster(S.call, "diag-op", 47, { security_group = true })
  local acc, err = dispatch.call("hyperpod_create", { cluster = "diag-op", instance_type = "ml.g5.12xlarge",
    instance_count = 1, availability_zone = "us-west-2a" }, C.ADMIN)
  t.ok(acc, json.encode(err))
  if not acc then return end
  local v = op.wait(acc.operation_id)
  t.eq(v.status, "failed", json.encode(v.error))
  local r = D.run("diagnose_cluster_creation", { cluster = "diag-op" })
  local f = D.find(r, "OPERATION_FAILED")
  t.ok(f, json.encode(D.codes(r)))
  if f then
    t.eq({ f.severity, f.subject }, { "critical", "operation " .. acc.operation_id .. " (hyperpod_create)" })
    t.like(f.evidence[1].quote, "^CONFLICT: VPC vpc%-%x+ has no available NAT gateway")
    t.eq(f.evidence[2], { source = "operation " .. acc.operation_id .. " steps", quote = "subnet: failed" })
    t.eq(f.next[1].call, "operation_get operation_id=" .. acc.operation_id)
  end
  local by_id = D.run("diagnose_cluster_creation", { operation_id = acc.operation_id })
  t.eq(D.codes(by_id), D.codes(r), "the same findings by operation_id")
end)

t.test("a lifecycle script failing on a node added later (continuous provisioning keeps the cluster): " ..
  "HYPERPOD_NODES_FAILED and LIFECYCLE_SCRIPT_ERROR on an InService cluster", function()
  if not S then return skip() end
  assert(faults.configure { lifecycle_failure = { { cluster = S.hp, instance_group = "late",
    message = "apt-get: E: Unable to locate package nvidia-fabricmanager-535" } } })
  S.call("sagemaker", "UpdateCluster", { ClusterName = S.hp, InstanceGroups = { { InstanceGroupName = "late",
    InstanceType = "ml.m5.xlarge", InstanceCount = 1, ExecutionRole = S.info.role,
    LifeCycleConfig = { SourceS3Uri = "s3://" .. S.eks .. "-lcc/lcc/", OnCreate = "on_create.sh" } } } })
  repeat task.sleep(30) until S.call("sagemaker", "DescribeCluster", { ClusterName = S.hp }).ClusterStatus == "InService"
  faults.configure {}
  local r = D.run("diagnose_cluster_creation", {})
  local nodes, lcc = D.find(r, "HYPERPOD_NODES_FAILED"), D.find(r, "LIFECYCLE_SCRIPT_ERROR", "(late)")
  t.ok(nodes and lcc, json.encode(D.codes(r)))
  t.eq(D.find(r, "HYPERPOD_CREATION_FAILED"), nil, "the cluster itself did not fail")
  if nodes and lcc then
    t.like(nodes.evidence[1].quote, "^Failure: Lifecycle script on_create.sh failed on the instance")
    t.eq(lcc.evidence[1].quote, "ERROR: apt-get: E: Unable to locate package nvidia-fabricmanager-535")
    t.eq(nodes.next[2] and nodes.next[2].tool, "diagnose_node_health")
  end
end)
