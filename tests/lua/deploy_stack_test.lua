-- deploy/cloudformation/hypd.yaml deployed with the aws CLI against `hypd
-- sandbox` (virtual clock): create-stack, the stack's events, the resources
-- it made checked against the template through the aws CLI (no inbound
-- rule, IMDSv2 with hop limit 1, an encrypted root volume, the bucket's
-- encryption, versioning, public access block and TLS-only policy, the
-- role's policy being hypd iam-policy's), then delete-stack and what is
-- gone (the bucket is kept: DeletionPolicy Retain); a stack whose resource
-- fails rolls back.
local t = require "hypd.tap"
local json = require "hypd.json"
local H = dofile("tests/lua/helpers.lua")

local dir = H.tmpdir()
local env, pid = nil, nil
local TEMPLATE = "file://deploy/cloudformation/hypd.yaml"
local BUCKET = "hypd-shared-123456789012-us-west-2"
local ROLE = "hypdhost-us-west-2"
local have_aws = H.sh("command -v aws") == 0

-- aws(args) -> status, decoded JSON (or the text), stderr
local function aws(args)
  local rc, out, err = H.with_env(env, dir, "aws --output json " .. args)
  return rc, json.decode(out ~= "" and out or "null") or out, err
end

local function must(args)
  local rc, out, err = aws(args)
  assert(rc == 0, "aws " .. args .. " failed: " .. tostring(err))
  return out
end

-- stack_status(name) -> the stack's status once it is no longer IN_PROGRESS
local function settled(name)
  local s
  for _ = 1, 200 do
    local rc, out = aws("cloudformation describe-stacks --stack-name " .. H.quote(name))
    s = rc == 0 and out.Stacks[1] or nil
    if s and not s.StackStatus:match("_IN_PROGRESS$") then return s end
    os.execute("sleep 0.05")
  end
  return s
end

local function events(name)
  local out = must("cloudformation describe-stack-events --stack-name " .. H.quote(name)).StackEvents
  local list = {}
  for i = #out, 1, -1 do list[#list + 1] = out[i] end -- oldest first
  return list
end

local vpc, subnet, stack, outputs = nil, nil, nil, {}

t.test("the sandbox starts, with a VPC and a subnet for the host", function()
  if not have_aws then return t.skip("the aws CLI is absent") end
  env, pid = H.sandbox_process(dir, "--virtual-clock")
  t.cleanup(function() if pid then os.execute("kill " .. pid .. " 2>/dev/null") end end)
  t.ok(env, "the sandbox started: " .. tostring(H.read(dir .. "/sandbox.err")))
  vpc = must("ec2 create-vpc --cidr-block 10.40.0.0/16").Vpc.VpcId
  subnet = must("ec2 create-subnet --vpc-id " .. vpc .. " --cidr-block 10.40.1.0/24 --availability-zone us-west-2a")
    .Subnet.SubnetId
  t.like(subnet, "^subnet%-")
end)

-- params([subnet [, source]]) -> the --parameters words (the test's VPC and subnet by default)
local function params(sub, source)
  return string.format("--parameters ParameterKey=VpcId,ParameterValue=%s ParameterKey=SubnetId,ParameterValue=%s " ..
    "ParameterKey=HypdSource,ParameterValue=%s", vpc, sub or subnet, source or "https://example.com/hypd.git")
end

t.test("create-stack without CAPABILITY_NAMED_IAM is refused, naming the capability", function()
  if not env then return t.skip("no sandbox") end
  local rc, _, err = aws("cloudformation create-stack --stack-name hypd --template-body " .. TEMPLATE .. " " .. params())
  t.ok(rc ~= 0, "refused")
  t.like(err, "InsufficientCapabilitiesException")
  t.like(err, "Requires capabilities : %[CAPABILITY_NAMED_IAM%]")
  t.eq(must("cloudformation list-stacks").StackSummaries, {}, "no stack was made")
end)

t.test("parameters are checked: a source outside its pattern, a subnet that does not exist", function()
  if not env then return t.skip("no sandbox") end
  local base = "cloudformation create-stack --stack-name hypd --capabilities CAPABILITY_NAMED_IAM --template-body " ..
    TEMPLATE .. " "
  local rc, _, err = aws(base .. params(nil, "http://example.com/hypd.git"))
  t.ok(rc ~= 0 and err:find("ValidationError", 1, true), err)
  t.like(err, "Parameter 'HypdSource' must match pattern")
  rc, _, err = aws(base .. params("subnet-0123456789abcdef0"))
  t.ok(rc ~= 0, "refused")
  t.like(err, "Parameter value subnet%-0123456789abcdef0 for parameter name SubnetId does not exist")
  t.eq(must("cloudformation list-stacks").StackSummaries, {}, "no stack was made")
end)

t.test("create-stack makes every resource, dependencies first, to CREATE_COMPLETE", function()
  if not env then return t.skip("no sandbox") end
  local out = must("cloudformation create-stack --stack-name hypd --template-body " .. TEMPLATE ..
    " --capabilities CAPABILITY_NAMED_IAM " .. params())
  t.like(out.StackId, "^arn:aws:cloudformation:us%-west%-2:123456789012:stack/hypd/")
  stack = settled("hypd")
  t.eq(stack.StackStatus, "CREATE_COMPLETE", json.encode(stack))
  local seen, first_done, order = {}, {}, {}
  for _, e in ipairs(events("hypd")) do
    if e.LogicalResourceId ~= "hypd" then
      seen[e.LogicalResourceId] = (seen[e.LogicalResourceId] or "") .. e.ResourceStatus .. ";"
      if e.ResourceStatus == "CREATE_COMPLETE" and not first_done[e.LogicalResourceId] then
        first_done[e.LogicalResourceId] = true
        order[#order + 1] = e.LogicalResourceId
      end
    end
  end
  for _, r in ipairs { "HostSecurityGroup", "HostRole", "HostInstanceProfile", "SharedBucket", "SharedBucketPolicy",
    "Host" } do
    t.eq(seen[r], "CREATE_IN_PROGRESS;CREATE_IN_PROGRESS;CREATE_COMPLETE;", r .. "'s events")
  end
  local at = {}
  for i, r in ipairs(order) do at[r] = i end
  t.ok(at.HostRole < at.HostInstanceProfile and at.HostInstanceProfile < at.Host and
    at.HostSecurityGroup < at.Host and at.SharedBucket < at.SharedBucketPolicy, table.concat(order, " "))
  for _, o in ipairs(stack.Outputs or {}) do outputs[o.OutputKey] = o.OutputValue end
end)

t.test("the outputs hold the SSM port-forwarding command for the host, and no token", function()
  if not stack then return t.skip("no stack") end
  t.like(outputs.InstanceId, "^i%-%x+$")
  t.eq(outputs.PortForwardCommand, "aws ssm start-session --target " .. outputs.InstanceId ..
    " --document-name AWS-StartPortForwardingSession --parameters '{\"portNumber\":[\"3099\"],\"localPortNumber\":" ..
    "[\"3099\"]}' --region us-west-2")
  t.ok(not json.encode(stack.Outputs):find("hypd_", 1, true), "no hypd token in the outputs")
  t.like(outputs.FirstAdminToken, "/root/hypd%-admin%-token")
end)

t.test("the host: its security group has no inbound rule, IMDSv2 is required (hop 1), its root volume encrypted",
  function()
  if not stack then return t.skip("no stack") end
  local i = must("ec2 describe-instances --instance-ids " .. outputs.InstanceId).Reservations[1].Instances[1]
  t.eq(i.State.Name, "running")
  t.eq({ i.MetadataOptions.HttpTokens, i.MetadataOptions.HttpPutResponseHopLimit }, { "required", 1 })
  t.eq(i.IamInstanceProfile.Arn, "arn:aws:iam::123456789012:instance-profile/" .. ROLE)
  t.eq(#i.SecurityGroups, 1)
  local g = must("ec2 describe-security-groups --group-ids " .. i.SecurityGroups[1].GroupId).SecurityGroups[1]
  t.eq(g.IpPermissions, {}, "no inbound rule")
  t.eq(#g.IpPermissionsEgress, 2, "egress: HTTPS and HTTP only")
  local vols = must("ec2 describe-volumes --filters Name=attachment.instance-id,Values=" .. outputs.InstanceId).Volumes
  t.eq(#vols, 1)
  t.eq({ vols[1].Attachments[1].Device, vols[1].Encrypted, vols[1].Size }, { "/dev/xvda", true, 20 })
end)

t.test("the shared bucket: encrypted, versioned, public access blocked, TLS only", function()
  if not stack then return t.skip("no stack") end
  t.eq(outputs.SharedBucketName, BUCKET)
  local enc = must("s3api get-bucket-encryption --bucket " .. BUCKET).ServerSideEncryptionConfiguration.Rules[1]
  t.eq(enc.ApplyServerSideEncryptionByDefault.SSEAlgorithm, "AES256")
  t.eq(must("s3api get-bucket-versioning --bucket " .. BUCKET).Status, "Enabled")
  t.eq(must("s3api get-public-access-block --bucket " .. BUCKET).PublicAccessBlockConfiguration,
    { BlockPublicAcls = true, IgnorePublicAcls = true, BlockPublicPolicy = true, RestrictPublicBuckets = true })
  local pol = json.decode(must("s3api get-bucket-policy --bucket " .. BUCKET).Policy)
  local st = pol.Statement[1]
  t.eq({ st.Effect, st.Principal, st.Action }, { "Deny", "*", "s3:*" })
  t.eq(st.Condition, { Bool = { ["aws:SecureTransport"] = "false" } })
  t.eq(st.Resource, { "arn:aws:s3:::" .. BUCKET, "arn:aws:s3:::" .. BUCKET .. "/*" })
end)

t.test("the host's role carries hypd iam-policy's policy and AmazonSSMManagedInstanceCore", function()
  if not stack then return t.skip("no stack") end
  local rc, want = H.sh(H.hypd .. " iam-policy 2>/dev/null")
  t.eq(rc, 0)
  local got = must("iam get-role-policy --role-name " .. ROLE .. " --policy-name hypd").PolicyDocument
  t.eq(got, json.decode(want))
  local attached = must("iam list-attached-role-policies --role-name " .. ROLE).AttachedPolicies
  t.eq(attached, { { PolicyName = "AmazonSSMManagedInstanceCore",
    PolicyArn = "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore" } })
end)

t.test("a stack whose resource fails rolls back what it made, to ROLLBACK_COMPLETE", function()
  if not stack then return t.skip("no stack") end
  local body = dir .. "/clash.yaml"
  H.write(body, string.format([[
Resources:
  Group:
    Type: AWS::EC2::SecurityGroup
    Properties:
      GroupDescription: made, then rolled back
      VpcId: %s
  Clash:
    Type: AWS::S3::Bucket
    DependsOn: Group
    Properties:
      BucketName: %s
]], vpc, BUCKET))
  must("cloudformation create-stack --stack-name clash --template-body file://" .. body)
  local s = settled("clash")
  t.eq(s.StackStatus, "ROLLBACK_COMPLETE")
  local failed, group, rollback
  for _, e in ipairs(events("clash")) do
    if e.ResourceStatus == "CREATE_FAILED" then failed = e end
    if e.ResourceStatus == "ROLLBACK_IN_PROGRESS" then rollback = e end
    if e.LogicalResourceId == "Group" and e.ResourceStatus == "DELETE_COMPLETE" then group = e.PhysicalResourceId end
  end
  t.like(failed and failed.ResourceStatusReason, "BucketAlreadyOwnedByYou")
  t.like(rollback and rollback.ResourceStatusReason, "The following resource%(s%) failed to create: %[Clash%]")
  t.like(group, "^sg%-")
  local rc, _, err = aws("ec2 describe-security-groups --group-ids " .. tostring(group))
  t.ok(rc ~= 0 and err:find("InvalidGroup.NotFound", 1, true), "the rolled-back group is gone: " .. err)
end)

t.test("delete-stack deletes newest first to DELETE_COMPLETE; the bucket is kept (DeletionPolicy Retain)", function()
  if not stack then return t.skip("no stack") end
  must("cloudformation delete-stack --stack-name hypd")
  local s = settled(stack.StackId)
  t.eq(s.StackStatus, "DELETE_COMPLETE")
  local rc, _, err = aws("cloudformation describe-stacks --stack-name hypd")
  t.ok(rc ~= 0 and err:find("Stack with id hypd does not exist", 1, true), err)
  local statuses = {}
  for _, e in ipairs(events(stack.StackId)) do
    if e.ResourceStatus:match("^DELETE") then statuses[e.LogicalResourceId] = e.ResourceStatus end
  end
  t.eq(statuses.SharedBucket, "DELETE_SKIPPED")
  t.eq(statuses.Host, "DELETE_COMPLETE")
  local i = must("ec2 describe-instances --instance-ids " .. outputs.InstanceId).Reservations[1].Instances[1]
  t.eq(i.State.Name, "terminated")
  rc, _, err = aws("iam get-role --role-name " .. ROLE)
  t.ok(rc ~= 0 and err:find("NoSuchEntity", 1, true), "the role is gone")
  rc, _, err = aws("iam get-instance-profile --instance-profile-name " .. ROLE)
  t.ok(rc ~= 0 and err:find("NoSuchEntity", 1, true), "the instance profile is gone")
  t.eq(must("ec2 describe-volumes --filters Name=attachment.instance-id,Values=" .. outputs.InstanceId).Volumes, {})
  t.eq(must("s3api get-bucket-versioning --bucket " .. BUCKET).Status, "Enabled", "the bucket is kept")
  rc, _, err = aws("s3api get-bucket-policy --bucket " .. BUCKET)
  t.ok(rc ~= 0 and err:find("NoSuchBucketPolicy", 1, true), "its stack-made policy is deleted: " .. err)
end)
