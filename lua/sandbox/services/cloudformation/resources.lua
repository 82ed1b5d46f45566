-- The resource types the sandbox's CloudFormation makes, each through the
-- sandbox's own services (sandbox.invoke, with the stack creator's
-- permissions): what CloudFormation's resource handler calls, the physical
-- id Ref gives, the attributes Fn::GetAtt reads, and how it is deleted.
--   create(ctx, props, r) -> physical, attrs [, wait]   (r: logical, stack)
--   delete(ctx, rec) [-> wait]                         (rec: physical, attrs)
-- wait: simulated seconds until the resource is COMPLETE (an instance
-- starting or terminating). A failed call raises {why = "<message> (Service:
-- X, Status Code: N, Error Code: Y)"}, CloudFormation's reason text; a
-- delete of something already gone succeeds.
local json = require "hypd.json"

local M = {}

local function invoke(ctx, svc, op, input)
  local out, err = require("sandbox").invoke(ctx, svc, op, input)
  if out then return out end
  error({ why = string.format("%s (Service: %s, Status Code: %d, Error Code: %s)", tostring(err.message),
    svc, err.status or 400, tostring(err.code)), code = err.code }, 0)
end

-- gone(fn): runs fn, treating a NotFound-style error as done
local function gone(fn)
  local ok, err = pcall(fn)
  if ok then return end
  local code = type(err) == "table" and tostring(err.code) or ""
  if code:match("NotFound") or code:match("NoSuch") or code == "InvalidGroup.NotFound" then return end
  error(err, 0)
end

-- generated(r, max, lower) -> CloudFormation's name for an unnamed
-- resource: stack-Logical-RANDOM, within max characters
local function generated(ctx, r, max, lower)
  local suffix = ctx.hex(12):upper()
  local name = (r.stack .. "-" .. r.logical):sub(1, max - #suffix - 1) .. "-" .. suffix
  return lower and name:lower() or name
end

local function tags(list)
  local out = json.array()
  for _, t in ipairs(list or {}) do out[#out + 1] = { Key = t.Key, Value = t.Value } end
  return out
end

-- CloudFormation's rule members -> EC2's IpPermissions
local function permissions(rules)
  local out = json.array()
  for _, r in ipairs(rules or {}) do
    local p = { IpProtocol = tostring(r.IpProtocol), FromPort = r.FromPort, ToPort = r.ToPort }
    if r.CidrIp then p.IpRanges = { { CidrIp = r.CidrIp, Description = r.Description } } end
    if r.CidrIpv6 then p.Ipv6Ranges = { { CidrIpv6 = r.CidrIpv6, Description = r.Description } } end
    local peer = r.SourceSecurityGroupId or r.DestinationSecurityGroupId
    if peer then p.UserIdGroupPairs = { { GroupId = peer, Description = r.Description } } end
    local pl = r.SourcePrefixListId or r.DestinationPrefixListId
    if pl then p.PrefixListIds = { { PrefixListId = pl, Description = r.Description } } end
    out[#out + 1] = p
  end
  return out
end

M["AWS::EC2::SecurityGroup"] = {
  create = function(ctx, p, r)
    local out = invoke(ctx, "ec2", "CreateSecurityGroup", { GroupName = p.GroupName or generated(ctx, r, 255),
      Description = p.GroupDescription, VpcId = p.VpcId,
      TagSpecifications = p.Tags and { { ResourceType = "security-group", Tags = tags(p.Tags) } } or nil })
    local id = out.GroupId
    local ok, err = pcall(function()
      if p.SecurityGroupEgress then
        -- the given egress replaces the default allow-all rule
        invoke(ctx, "ec2", "RevokeSecurityGroupEgress", { GroupId = id,
          IpPermissions = { { IpProtocol = "-1", IpRanges = { { CidrIp = "0.0.0.0/0" } } } } })
        if #p.SecurityGroupEgress > 0 then
          invoke(ctx, "ec2", "AuthorizeSecurityGroupEgress", { GroupId = id,
            IpPermissions = permissions(p.SecurityGroupEgress) })
        end
      end
      if p.SecurityGroupIngress and #p.SecurityGroupIngress > 0 then
        invoke(ctx, "ec2", "AuthorizeSecurityGroupIngress", { GroupId = id,
          IpPermissions = permissions(p.SecurityGroupIngress) })
      end
    end)
    if not ok then
      pcall(invoke, ctx, "ec2", "DeleteSecurityGroup", { GroupId = id })
      error(err, 0)
    end
    return id, { GroupId = id, VpcId = p.VpcId }
  end,
  delete = function(ctx, rec)
    gone(function() invoke(ctx, "ec2", "DeleteSecurityGroup", { GroupId = rec.physical }) end)
  end,
}

M["AWS::IAM::Role"] = {
  create = function(ctx, p, r)
    local name = p.RoleName or generated(ctx, r, 64)
    local out = invoke(ctx, "iam", "CreateRole", { RoleName = name, Path = p.Path,
      AssumeRolePolicyDocument = json.encode(p.AssumeRolePolicyDocument), Description = p.Description,
      MaxSessionDuration = p.MaxSessionDuration, Tags = p.Tags and tags(p.Tags) or nil })
    for _, arn in ipairs(p.ManagedPolicyArns or {}) do
      invoke(ctx, "iam", "AttachRolePolicy", { RoleName = name, PolicyArn = arn })
    end
    for _, pol in ipairs(p.Policies or {}) do
      invoke(ctx, "iam", "PutRolePolicy", { RoleName = name, PolicyName = pol.PolicyName,
        PolicyDocument = json.encode(pol.PolicyDocument) })
    end
    return name, { Arn = out.Role.Arn, RoleId = out.Role.RoleId }
  end,
  delete = function(ctx, rec)
    local name = rec.physical
    gone(function()
      for _, pn in ipairs(invoke(ctx, "iam", "ListRolePolicies", { RoleName = name }).PolicyNames or {}) do
        invoke(ctx, "iam", "DeleteRolePolicy", { RoleName = name, PolicyName = pn })
      end
      for _, a in ipairs(invoke(ctx, "iam", "ListAttachedRolePolicies", { RoleName = name }).AttachedPolicies or {}) do
        invoke(ctx, "iam", "DetachRolePolicy", { RoleName = name, PolicyArn = a.PolicyArn })
      end
      invoke(ctx, "iam", "DeleteRole", { RoleName = name })
    end)
  end,
}

M["AWS::IAM::InstanceProfile"] = {
  create = function(ctx, p, r)
    local name = p.InstanceProfileName or generated(ctx, r, 128)
    local out = invoke(ctx, "iam", "CreateInstanceProfile", { InstanceProfileName = name, Path = p.Path })
    for _, role in ipairs(p.Roles or {}) do
      invoke(ctx, "iam", "AddRoleToInstanceProfile", { InstanceProfileName = name, RoleName = role })
    end
    return name, { Arn = out.InstanceProfile.Arn }
  end,
  delete = function(ctx, rec)
    gone(function()
      local prof = invoke(ctx, "iam", "GetInstanceProfile", { InstanceProfileName = rec.physical }).InstanceProfile
      for _, role in ipairs(prof.Roles or {}) do
        invoke(ctx, "iam", "RemoveRoleFromInstanceProfile", { InstanceProfileName = rec.physical,
          RoleName = role.RoleName })
      end
      invoke(ctx, "iam", "DeleteInstanceProfile", { InstanceProfileName = rec.physical })
    end)
  end,
}

M["AWS::S3::Bucket"] = {
  create = function(ctx, p, r)
    local name = p.BucketName or generated(ctx, r, 63, true)
    local own = p.OwnershipControls and p.OwnershipControls.Rules and p.OwnershipControls.Rules[1]
    invoke(ctx, "s3", "CreateBucket", { Bucket = name, ObjectOwnership = own and own.ObjectOwnership,
      CreateBucketConfiguration = ctx.region ~= "us-east-1" and { LocationConstraint = ctx.region } or nil })
    local ok, err = pcall(function()
      local enc = p.BucketEncryption and p.BucketEncryption.ServerSideEncryptionConfiguration
      if enc then
        local rules = json.array()
        for _, rule in ipairs(enc) do
          rules[#rules + 1] = { ApplyServerSideEncryptionByDefault = rule.ServerSideEncryptionByDefault,
            BucketKeyEnabled = rule.BucketKeyEnabled }
        end
        invoke(ctx, "s3", "PutBucketEncryption", { Bucket = name,
          ServerSideEncryptionConfiguration = { Rules = rules } })
      end
      if p.VersioningConfiguration then
        invoke(ctx, "s3", "PutBucketVersioning", { Bucket = name,
          VersioningConfiguration = { Status = p.VersioningConfiguration.Status } })
      end
      if p.PublicAccessBlockConfiguration then
        invoke(ctx, "s3", "PutPublicAccessBlock", { Bucket = name,
          PublicAccessBlockConfiguration = p.PublicAccessBlockConfiguration })
      end
      if p.Tags then invoke(ctx, "s3", "PutBucketTagging", { Bucket = name, Tagging = { TagSet = tags(p.Tags) } }) end
    end)
    if not ok then
      pcall(invoke, ctx, "s3", "DeleteBucket", { Bucket = name })
      error(err, 0)
    end
    return name, { Arn = "arn:aws:s3:::" .. name, DomainName = name .. ".s3.amazonaws.com",
      RegionalDomainName = name .. ".s3." .. ctx.region .. ".amazonaws.com" }
  end,
  delete = function(ctx, rec)
    gone(function() invoke(ctx, "s3", "DeleteBucket", { Bucket = rec.physical }) end)
  end,
}

M["AWS::S3::BucketPolicy"] = {
  create = function(ctx, p)
    invoke(ctx, "s3", "PutBucketPolicy", { Bucket = p.Bucket, Policy = json.encode(p.PolicyDocument) })
    return p.Bucket, {}
  end,
  delete = function(ctx, rec)
    gone(function() invoke(ctx, "s3", "DeleteBucketPolicy", { Bucket = rec.physical }) end)
  end,
}

M["AWS::EC2::Instance"] = {
  create = function(ctx, p)
    local prof = p.IamInstanceProfile
    local out = invoke(ctx, "ec2", "RunInstances", { ImageId = p.ImageId, InstanceType = p.InstanceType or "m1.small",
      MinCount = 1, MaxCount = 1, SubnetId = p.SubnetId, SecurityGroupIds = p.SecurityGroupIds,
      IamInstanceProfile = prof and (tostring(prof):match("^arn:") and { Arn = prof } or { Name = prof }) or nil,
      MetadataOptions = p.MetadataOptions, BlockDeviceMappings = p.BlockDeviceMappings, UserData = p.UserData,
      EbsOptimized = p.EbsOptimized,
      TagSpecifications = p.Tags and { { ResourceType = "instance", Tags = tags(p.Tags) } } or nil })
    local i = out.Instances[1]
    return i.InstanceId, { PrivateIp = i.PrivateIpAddress, PrivateDnsName = i.PrivateDnsName,
      AvailabilityZone = i.Placement.AvailabilityZone, InstanceId = i.InstanceId }, 6
  end,
  delete = function(ctx, rec)
    gone(function() invoke(ctx, "ec2", "TerminateInstances", { InstanceIds = { rec.physical } }) end)
    return 6
  end,
}

return M
