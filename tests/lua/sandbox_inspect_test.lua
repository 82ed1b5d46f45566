-- What a user inspects with the aws CLI and boto3 against `hypd sandbox`:
-- CloudFormation stacks, the EKS optimized AMI parameters in SSM, SageMaker
-- lists of what the account never makes, EKS updates of a cluster. Each
-- case runs the real client against a sandbox process and reads its answer,
-- the error cases included.
local t = require "hypd.tap"
local json = require "hypd.json"
local H = dofile("tests/lua/helpers.lua")

local dir = H.tmpdir()
local env, pid = H.sandbox_process(dir, "--virtual-clock")

local function have_cli() return H.sh("command -v aws") == 0 end
local function have_boto3() return H.sh("python3 -c 'import boto3'") == 0 end

-- aws(args) -> rc, decoded answer (or nil), stderr
local function aws(args)
  local rc, out, err = H.with_env(env, dir, "aws " .. args .. " --output json")
  local ok, v = pcall(json.decode, out)
  return rc, ok and v or nil, err
end

local AMI = "/aws/service/eks/optimized-ami/"

t.test("the sandbox started", function()
  t.ok(env, "the sandbox printed its environment: " .. tostring(H.read(dir .. "/sandbox.err")))
end)

t.test("cloudformation list-stacks and describe-stacks see no stacks; a named one does not exist", function()
  if not have_cli() then return t.skip("no aws CLI") end
  local rc, v, err = aws("cloudformation list-stacks")
  t.eq({ rc, v }, { 0, { StackSummaries = {} } }, err)
  rc, v, err = aws("cloudformation list-stacks --stack-status-filter CREATE_COMPLETE")
  t.eq({ rc, v }, { 0, { StackSummaries = {} } }, err)
  rc, v, err = aws("cloudformation describe-stacks")
  t.eq({ rc, v }, { 0, { Stacks = {} } }, err)
  local _
  rc, _, err = aws("cloudformation describe-stacks --stack-name hypd-host")
  t.ok(rc ~= 0, "the CLI fails")
  t.like(err, "%(ValidationError%) when calling the DescribeStacks operation: Stack with id hypd%-host does not exist")
end)

t.test("ssm get-parameter answers the EKS optimized AMI parameters, ParameterNotFound otherwise", function()
  if not have_cli() then return t.skip("no aws CLI") end
  local base = AMI .. "1.31/amazon-linux-2023/x86_64/standard/recommended"
  local rc, v, err = aws("ssm get-parameter --name " .. base .. "/image_id")
  t.eq(rc, 0, err)
  local p = v and v.Parameter or {}
  t.eq({ p.Name, p.Type, p.DataType }, { base .. "/image_id", "String", "text" })
  t.like(p.Value, "^ami%-0%x+$")
  t.eq(p.ARN, "arn:aws:ssm:us-west-2::parameter" .. base .. "/image_id")
  rc, v, err = aws("ssm get-parameter --name " .. base)
  t.eq(rc, 0, err)
  local doc = json.decode(v.Parameter.Value)
  t.eq({ doc.image_id, doc.release_version, doc.image_name },
    { p.Value, "1.31.10-20251103", "amazon-eks-node-al2023-x86_64-standard-1.31-v20251103" })
  rc, v = aws("ssm get-parameter --name " .. base .. "/release_version")
  t.eq({ rc, v and v.Parameter.Value }, { 0, "1.31.10-20251103" })
  -- another AMI type has another image; Amazon Linux 2 is not published past 1.32
  rc, v = aws("ssm get-parameter --name " .. AMI .. "1.31/amazon-linux-2023/x86_64/nvidia/recommended/image_id")
  t.eq(rc, 0)
  t.ok(v and v.Parameter.Value ~= p.Value, "the NVIDIA AMI is another image")
  local _
  rc, _, err = aws("ssm get-parameter --name " .. AMI .. "1.33/amazon-linux-2/recommended/image_id")
  t.ok(rc ~= 0, "the CLI fails")
  t.like(err, "%(ParameterNotFound%) when calling the GetParameter operation")
  for _, name in ipairs { "/hypd/none", AMI .. "1.99/amazon-linux-2023/x86_64/standard/recommended/image_id",
    base .. "/kernel" } do
    rc, _, err = aws("ssm get-parameter --name " .. name)
    t.ok(rc ~= 0, name)
    t.like(err, "%(ParameterNotFound%) when calling the GetParameter operation")
  end
end)

t.test("ssm get-parameters answers the known names and lists the others as invalid", function()
  if not have_cli() then return t.skip("no aws CLI") end
  local name = AMI .. "1.34/amazon-linux-2023/x86_64/nvidia/recommended/release_version"
  local rc, v, err = aws("ssm get-parameters --names /hypd/none " .. name)
  t.eq(rc, 0, err)
  t.eq(#v.Parameters, 1)
  t.eq({ v.Parameters[1].Name, v.Parameters[1].Value, v.InvalidParameters }, { name, "1.34.1-20251103", { "/hypd/none" } })
end)

t.test("sagemaker list-training-jobs, list-models and list-cluster-scheduler-configs answer empty lists", function()
  if not have_cli() then return t.skip("no aws CLI") end
  local rc, v, err = aws("sagemaker list-training-jobs")
  t.eq({ rc, v }, { 0, { TrainingJobSummaries = {} } }, err)
  rc, v, err = aws("sagemaker list-models")
  t.eq({ rc, v }, { 0, { Models = {} } }, err)
  rc, v, err = aws("sagemaker list-cluster-scheduler-configs")
  t.eq({ rc, v }, { 0, { ClusterSchedulerConfigSummaries = {} } }, err)
end)

t.test("eks list-updates and describe-update follow an UpdateClusterConfig to Successful", function()
  if not have_boto3() then return t.skip("boto3 is absent") end
  local rc, out, err = H.with_env(env, dir, [[python3 -c '
import boto3, json, time
iam, ec2, eks = boto3.client("iam"), boto3.client("ec2"), boto3.client("eks")
trust = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
  "Principal": {"Service": "eks.amazonaws.com"}, "Action": "sts:AssumeRole"}]})
role = iam.create_role(RoleName="inspect-eks", AssumeRolePolicyDocument=trust)["Role"]["Arn"]
vpc = ec2.create_vpc(CidrBlock="10.7.0.0/16")["Vpc"]["VpcId"]
subnets = [ec2.create_subnet(VpcId=vpc, CidrBlock="10.7.%d.0/24" % i, AvailabilityZone=az)["Subnet"]["SubnetId"]
  for i, az in ((1, "us-west-2a"), (2, "us-west-2b"))]
eks.create_cluster(name="inspect", roleArn=role, resourcesVpcConfig={"subnetIds": subnets},
  accessConfig={"authenticationMode": "API"})
while eks.describe_cluster(name="inspect")["cluster"]["status"] != "ACTIVE": time.sleep(0.1)
out = {"before": eks.list_updates(name="inspect")["updateIds"]}
u = eks.update_cluster_config(name="inspect", logging={"clusterLogging": [{"types": ["api"], "enabled": True}]})["update"]
out["started"] = u
out["listed"] = eks.list_updates(name="inspect")["updateIds"]
for _ in range(300):
  d = eks.describe_update(name="inspect", updateId=u["id"])["update"]
  if d["status"] != "InProgress": break
  time.sleep(0.1)
out["done"] = d
def code(f):
  try: f(); return "none"
  except eks.exceptions.ClientError as e: return e.response["Error"]["Code"] + ": " + e.response["Error"]["Message"]
out["no_cluster"] = code(lambda: eks.list_updates(name="nope"))
out["no_nodegroup"] = code(lambda: eks.list_updates(name="inspect", nodegroupName="ng"))
out["no_update"] = code(lambda: eks.describe_update(name="inspect", updateId="0b8e3a9c-0000-0000-0000-000000000000"))
print(json.dumps(out, default=str))
']])
  t.eq(rc, 0, err)
  local v = json.decode(out)
  t.eq(v.before, {})
  t.eq({ v.started.type, v.started.status }, { "LoggingUpdate", "InProgress" })
  t.eq(v.listed, { v.started.id })
  t.eq({ v.done.id, v.done.type, v.done.status }, { v.started.id, "LoggingUpdate", "Successful" })
  t.ok(v.done.createdAt and v.done.params and #v.done.params > 0, "the update has its createdAt and params")
  t.eq(v.no_cluster, "ResourceNotFoundException: No cluster found for name: nope.")
  t.eq(v.no_nodegroup, "ResourceNotFoundException: No node group found for name: ng.")
  t.like(v.no_update, "^ResourceNotFoundException: No update found for ID")
end)

t.test("ec2 describe-instances lists a managed node group's instances with the AMI SSM names, and no others", function()
  if not have_boto3() then return t.skip("boto3 is absent") end
  local rc, out, err = H.with_env(env, dir, [[python3 -c '
import boto3, json, time
iam, ec2, eks, ssm = boto3.client("iam"), boto3.client("ec2"), boto3.client("eks"), boto3.client("ssm")
def code(f):
  try: f(); return "none"
  except ec2.exceptions.ClientError as e: return e.response["Error"]["Code"] + ": " + e.response["Error"]["Message"]
out = {"before": ec2.describe_instances()["Reservations"]}
trust = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
  "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]})
role = iam.create_role(RoleName="inspect-node", AssumeRolePolicyDocument=trust)["Role"]["Arn"]
for p in ("AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryReadOnly"):
  iam.attach_role_policy(RoleName="inspect-node", PolicyArn="arn:aws:iam::aws:policy/" + p)
c = eks.describe_cluster(name="inspect")["cluster"]
eks.create_nodegroup(clusterName="inspect", nodegroupName="ng", nodeRole=role,
  subnets=c["resourcesVpcConfig"]["subnetIds"], scalingConfig={"minSize": 1, "maxSize": 3, "desiredSize": 2})
for _ in range(300):
  ng = eks.describe_nodegroup(clusterName="inspect", nodegroupName="ng")["nodegroup"]
  if ng["status"] != "CREATING": break
  time.sleep(0.1)
out["ng"] = {"status": ng["status"], "amiType": ng["amiType"], "releaseVersion": ng["releaseVersion"], "version": ng["version"]}
out["all"] = ec2.describe_instances()["Reservations"]
out["by_tag"] = ec2.describe_instances(Filters=[{"Name": "tag:eks:nodegroup-name", "Values": ["ng"]},
  {"Name": "instance-state-name", "Values": ["running"]}])["Reservations"]
out["stopped"] = ec2.describe_instances(Filters=[{"Name": "instance-state-name", "Values": ["stopped"]}])["Reservations"]
first = out["all"][0]["Instances"][0]["InstanceId"] if out["all"] else "i-0000000000000000f"
out["by_id"] = ec2.describe_instances(InstanceIds=[first])["Reservations"]
out["missing"] = code(lambda: ec2.describe_instances(InstanceIds=["i-0123456789abcdef0"]))
out["bad_filter"] = code(lambda: ec2.describe_instances(Filters=[{"Name": "flavour", "Values": ["x"]}]))
base = "/aws/service/eks/optimized-ami/%s/amazon-linux-2023/x86_64/standard/recommended/" % ng["version"]
out["ssm_image"] = ssm.get_parameter(Name=base + "image_id")["Parameter"]["Value"]
out["ssm_release"] = ssm.get_parameter(Name=base + "release_version")["Parameter"]["Value"]
eks.update_nodegroup_config(clusterName="inspect", nodegroupName="ng",
  scalingConfig={"minSize": 1, "maxSize": 3, "desiredSize": 3})
out["ng_updates"] = eks.list_updates(name="inspect", nodegroupName="ng")["updateIds"]
print(json.dumps(out, default=str))
']])
  t.eq(rc, 0, err)
  local v = json.decode(out)
  t.eq(v.before, {})
  t.eq({ v.ng.status, v.ng.amiType }, { "ACTIVE", "AL2023_x86_64_STANDARD" })
  t.eq(#v.all, 2)
  local x = v.all[1] and v.all[1].Instances[1] or {}
  t.like(x.InstanceId, "^i%-0%x+$")
  t.eq({ x.State and x.State.Name, x.InstanceType, v.all[1].OwnerId }, { "running", "t3.medium", "123456789012" })
  t.eq(x.ImageId, v.ssm_image)
  t.eq(v.ng.releaseVersion, v.ssm_release)
  t.eq(#v.by_tag, 2)
  t.eq(v.stopped, {})
  t.eq(#v.by_id, 1)
  t.eq(v.missing, "InvalidInstanceID.NotFound: The instance ID 'i-0123456789abcdef0' does not exist")
  t.eq(v.bad_filter, "InvalidParameterValue: The filter 'flavour' is invalid")
  t.eq(#v.ng_updates, 1)
end)

t.test("iam get-user answers the caller, NoSuchEntity for another name, ValidationError for a role session", function()
  if not have_boto3() then return t.skip("boto3 is absent") end
  local rc, out, err = H.with_env(env, dir, [[python3 -c '
import boto3, json
iam = boto3.client("iam")
def code(f):
  try: f(); return "none"
  except iam.exceptions.ClientError as e: return e.response["Error"]["Code"] + ": " + e.response["Error"]["Message"]
me = iam.get_user()["User"]
named = iam.get_user(UserName=me["UserName"])["User"]
trust = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
  "Principal": {"AWS": "arn:aws:iam::123456789012:root"}, "Action": "sts:AssumeRole"}]})
role = iam.create_role(RoleName="inspect-user", AssumeRolePolicyDocument=trust)["Role"]["Arn"]
c = boto3.client("sts").assume_role(RoleArn=role, RoleSessionName="inspect")["Credentials"]
as_role = boto3.client("iam", aws_access_key_id=c["AccessKeyId"], aws_secret_access_key=c["SecretAccessKey"],
  aws_session_token=c["SessionToken"])
print(json.dumps({"me": me, "named": named, "other": code(lambda: iam.get_user(UserName="nobody")),
  "session": code(lambda: as_role.get_user())}, default=str))
']])
  t.eq(rc, 0, err)
  local v = json.decode(out)
  t.eq({ v.me.UserName, v.me.Arn, v.me.UserId, v.me.Path }, { "sandbox", "arn:aws:iam::123456789012:user/sandbox",
    "AIDAHYPDSANDBOX00001", "/" })
  t.eq(v.named, v.me)
  t.eq(v.other, "NoSuchEntity: The user with name nobody cannot be found.")
  t.eq(v.session, "ValidationError: Must specify userName when calling with non-User credentials")
end)

t.test("iam simulate-principal-policy evaluates a role's inline and attached policies", function()
  if not have_boto3() then return t.skip("boto3 is absent") end
  local rc, out, err = H.with_env(env, dir, [==[python3 -c '
import boto3, json
iam = boto3.client("iam")
trust = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
  "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]})
arn = iam.create_role(RoleName="inspect-sim", AssumeRolePolicyDocument=trust)["Role"]["Arn"]
iam.put_role_policy(RoleName="inspect-sim", PolicyName="reads", PolicyDocument=json.dumps({"Version": "2012-10-17",
  "Statement": [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::b/*"},
                {"Effect": "Deny", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::b/secret/*"}]}))
iam.attach_role_policy(RoleName="inspect-sim", PolicyArn="arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy")
r = iam.simulate_principal_policy(PolicySourceArn=arn, ActionNames=["s3:GetObject", "s3:PutObject",
  "ec2:AssignPrivateIpAddresses"], ResourceArns=["arn:aws:s3:::b/x", "arn:aws:s3:::b/secret/k"])["EvaluationResults"]
def code(f):
  try: f(); return "none"
  except iam.exceptions.ClientError as e: return e.response["Error"]["Code"] + ": " + e.response["Error"]["Message"]
print(json.dumps({"results": [[e["EvalActionName"], e["EvalResourceName"], e["EvalDecision"],
  [m["SourcePolicyId"] + "/" + m["SourcePolicyType"] for m in e["MatchedStatements"]]] for e in r],
  "no_role": code(lambda: iam.simulate_principal_policy(PolicySourceArn=arn + "-gone", ActionNames=["s3:GetObject"]))}))
']==])
  t.eq(rc, 0, err)
  local v = json.decode(out)
  t.eq(v.results, {
    { "s3:GetObject", "arn:aws:s3:::b/x", "allowed", { "reads/role" } },
    { "s3:GetObject", "arn:aws:s3:::b/secret/k", "explicitDeny", { "reads/role" } },
    { "s3:PutObject", "arn:aws:s3:::b/x", "implicitDeny", {} },
    { "s3:PutObject", "arn:aws:s3:::b/secret/k", "implicitDeny", {} },
    { "ec2:AssignPrivateIpAddresses", "arn:aws:s3:::b/x", "allowed", { "AmazonEKS_CNI_Policy/aws-managed" } },
    { "ec2:AssignPrivateIpAddresses", "arn:aws:s3:::b/secret/k", "allowed", { "AmazonEKS_CNI_Policy/aws-managed" } },
  })
  t.eq(v.no_role, "NoSuchEntity: The role with name inspect-sim-gone cannot be found.")
end)

t.test("an S3 POST Object (browser form upload) answers 501 NotImplemented, not AccessDenied", function()
  if H.sh("python3 -c 'import boto3, requests'") ~= 0 then return t.skip("boto3 or requests is absent") end
  local rc, out, err = H.with_env(env, dir, [[python3 -c '
import boto3, requests
s3 = boto3.client("s3")
s3.create_bucket(Bucket="inspect-form", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
p = s3.generate_presigned_post("inspect-form", "upload.txt")
r = requests.post(p["url"], data=p["fields"], files={"file": ("upload.txt", b"hello")})
print(r.status_code, r.text)
']])
  t.eq(rc, 0, err)
  t.like(out, "^501 ")
  t.like(out, "<Code>NotImplemented</Code><Message>POST Object %(browser form upload%) is not simulated")
end)

t.test("hypd doctor lists only endpoints of services the sandbox serves", function()
  local rc, out = H.with_env(env, dir, H.hypd .. " doctor --json")
  t.eq(rc, 0, out)
  local served = {}
  for _, name in ipairs(require("sandbox").SERVICES) do served[name] = true end
  local listed = 0
  for name in pairs(json.decode(out).endpoints) do
    listed = listed + 1
    t.ok(served[name], "the sandbox serves " .. name)
  end
  t.ok(listed >= 10, "doctor listed the services hypd calls: " .. listed)
end)

t.test("the sandbox stops", function()
  if pid then os.execute("kill -TERM " .. pid .. " 2>/dev/null; sleep 0.3") end
  t.ok(pid, "it had a process id")
end)
