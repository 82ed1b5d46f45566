-- The sandbox's STS, IAM and S3, driven by hypd's own AWS client over
-- loopback exactly as a workflow would call them: resources, their error
-- answers (code and HTTP status), pagination, sessions issued by STS and
-- used to sign requests, and S3 objects in path and virtual-hosted style.
local t = require "hypd.tap"
local aws = require "hypd.aws"
local core = require "hypd.core"
local sys = require "hypd.sys"
local http = require "hypd.http"
local json = require "hypd.json"
local protocol = require "hypd.aws.protocol"
local S = require "hypd.aws.shape"
local sandbox = require "sandbox"
local sigv4 = require "hypd.sigv4"
local task = require "hypd.task"

local srv = assert(sandbox.start { listen = "127.0.0.1:0",
  credentials = { [os.getenv("AWS_ACCESS_KEY_ID")] = os.getenv("AWS_SECRET_ACCESS_KEY") } })
local port = srv.port
-- (check_constraints = false: what the sandbox refuses is under test, not the client)
local OPTS = { endpoint_url = "http://127.0.0.1:" .. port, region = "us-west-2", check_constraints = false }
core.virtual(true)

local function call(service, op, params) return aws.call(service, op, params or {}, OPTS) end
local function try(service, op, params) return aws.try(service, op, params or {}, OPTS) end

-- refused(service, op, params, code, status) -> err, checking the code and status
local function refused(service, op, params, code, status)
  local out, err = try(service, op, params)
  t.fails(out, err, code, service .. " " .. op)
  if status then t.eq(err.status, status, op .. " answers HTTP " .. status) end
  return err
end

local function trust(principal, extra)
  local st = { Effect = "Allow", Principal = principal, Action = "sts:AssumeRole" }
  for k, v in pairs(extra or {}) do st[k] = v end
  return json.encode { Version = "2012-10-17", Statement = { st } }
end
local EC2_TRUST = trust { Service = "ec2.amazonaws.com" }
local ACCOUNT_TRUST = trust { AWS = "arn:aws:iam::123456789012:root" }
local S3_READ = json.encode { Version = "2012-10-17",
  Statement = { { Effect = "Allow", Action = { "s3:GetObject" }, Resource = "arn:aws:s3:::data/*" } } }

local function unescape(s) return (s:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end)) end

local function epoch(v) return (S.to_epoch(v)) end

-- send_raw(service, op, params, creds, opts) -> the HTTP response to a
-- request signed with credentials hypd's client would not use (STS sessions)
local function send_raw(service, op, params, creds, opts)
  opts = opts or {}
  local model = aws.model(service)
  local req = assert(protocol.build(model, op, params))
  local host = opts.host or ("127.0.0.1:" .. port)
  local when = math.floor(core.now())
  local headers = { host = host }
  for k, v in pairs(req.headers or {}) do headers[k:lower()] = v end
  local s = assert(sigv4.sign { method = req.method, path = req.path, query = req.query, headers = headers,
    body = req.body, access_key = creds.AccessKeyId, secret_key = creds.SecretAccessKey,
    session_token = creds.SessionToken, region = opts.region or "us-west-2", service = service, when = when,
    normalize = service ~= "s3", sign_body = service == "s3" })
  headers.authorization = s.authorization
  headers["x-amz-date"] = os.date("!%Y%m%dT%H%M%SZ", when)
  if creds.SessionToken then headers["x-amz-security-token"] = creds.SessionToken end
  if service == "s3" then headers["x-amz-content-sha256"] = sys.digest("sha256", req.body or "", "hex") end
  local url = "http://127.0.0.1:" .. port .. req.path .. (req.query and req.query ~= "" and "?" .. req.query or "")
  return assert(http.request { method = req.method, url = url, headers = headers, body = req.body })
end

local STATIC = { AccessKeyId = os.getenv("AWS_ACCESS_KEY_ID"), SecretAccessKey = os.getenv("AWS_SECRET_ACCESS_KEY") }

-- send(service, op, params, creds, opts) -> result | nil, err (parsed by hypd's client)
local function send(service, op, params, creds, opts)
  return protocol.parse(aws.model(service), op, send_raw(service, op, params, creds, opts))
end

-- S3 answers GetBucketLocation with a bare <LocationConstraint> root
local function location(bucket, region)
  local out = assert(send("s3", "GetBucketLocation", { Bucket = bucket }, STATIC, { region = region }))
  return out.LocationConstraint
end

-- --- IAM roles --------------------------------------------------------------

t.test("a role is created with a generated id and read back with its trust policy URL-encoded", function()
  local out = call("iam", "CreateRole", { RoleName = "hp-exec", AssumeRolePolicyDocument = EC2_TRUST,
    Description = "HyperPod execution", Tags = { { Key = "team", Value = "ml" } } })
  t.like(out.Role.RoleId, "^AROA[A-Z0-9]+$")
  t.eq(#out.Role.RoleId, 21)
  t.eq(out.Role.Arn, "arn:aws:iam::123456789012:role/hp-exec")
  t.eq(out.Role.Path, "/")
  local got = call("iam", "GetRole", { RoleName = "hp-exec" }).Role
  t.eq(got.RoleId, out.Role.RoleId)
  t.eq(got.MaxSessionDuration, 3600)
  t.eq(got.Description, "HyperPod execution")
  t.eq(got.Tags, { { Key = "team", Value = "ml" } })
  t.like(got.AssumeRolePolicyDocument, "^%%7B%%22")
  t.eq(json.decode(unescape(got.AssumeRolePolicyDocument)), json.decode(EC2_TRUST))
  t.ok(epoch(got.CreateDate) > 1.7e9, "CreateDate is a time")
end)

t.test("creating a role that exists (in any letter case) answers EntityAlreadyExists with 409", function()
  call("iam", "CreateRole", { RoleName = "dup-role", AssumeRolePolicyDocument = EC2_TRUST })
  refused("iam", "CreateRole", { RoleName = "dup-role", AssumeRolePolicyDocument = EC2_TRUST },
    "EntityAlreadyExists", 409)
  refused("iam", "CreateRole", { RoleName = "DUP-ROLE", AssumeRolePolicyDocument = EC2_TRUST },
    "EntityAlreadyExists", 409)
end)

t.test("a trust policy that is not JSON, lacks a principal or names a resource is a MalformedPolicyDocument", function()
  local err = refused("iam", "CreateRole", { RoleName = "bad-trust", AssumeRolePolicyDocument = "{not json" },
    "MalformedPolicyDocument", 400)
  t.like(err.message, "invalid Json")
  refused("iam", "CreateRole", { RoleName = "bad-trust", AssumeRolePolicyDocument = json.encode {
    Version = "2012-10-17", Statement = { { Effect = "Allow", Action = "sts:AssumeRole" } } } },
    "MalformedPolicyDocument")
  refused("iam", "CreateRole", { RoleName = "bad-trust", AssumeRolePolicyDocument = trust(
    { Service = "ec2.amazonaws.com" }, { Resource = "*" }) }, "MalformedPolicyDocument")
  refused("iam", "CreateRole", { RoleName = "bad trust", AssumeRolePolicyDocument = EC2_TRUST }, "ValidationError", 400)
  refused("iam", "GetRole", { RoleName = "bad-trust" }, "NoSuchEntity", 404)
end)

t.test("GetRole of an unknown role answers NoSuchEntity with 404", function()
  local err = refused("iam", "GetRole", { RoleName = "nobody" }, "NoSuchEntity", 404)
  t.like(err.message, "The role with name nobody cannot be found")
end)

t.test("ListRoles pages with MaxItems and Marker, and aws.all gathers every role under a path", function()
  for i = 1, 5 do
    call("iam", "CreateRole", { RoleName = "paged-" .. i, Path = "/paged/", AssumeRolePolicyDocument = EC2_TRUST })
  end
  local first = call("iam", "ListRoles", { PathPrefix = "/paged/", MaxItems = 2 })
  t.eq(#first.Roles, 2)
  t.eq(first.IsTruncated, true)
  t.ok(first.Marker, "a marker for the next page")
  local second = call("iam", "ListRoles", { PathPrefix = "/paged/", MaxItems = 2, Marker = first.Marker })
  t.eq(second.Roles[1].RoleName, "paged-3")
  local all = aws.all("iam", "ListRoles", { PathPrefix = "/paged/", MaxItems = 2 }, OPTS)
  local names = {}
  for i, r in ipairs(all) do names[i] = r.RoleName end
  t.eq(names, { "paged-1", "paged-2", "paged-3", "paged-4", "paged-5" })
  t.eq(all[1].Arn, "arn:aws:iam::123456789012:role/paged/paged-1")
  local everything = aws.all("iam", "ListRoles", {}, OPTS)
  t.ok(#everything >= 7, "ListRoles without a prefix sees every role")
  refused("iam", "ListRoles", { MaxItems = 0 }, "ValidationError", 400)
end)

t.test("role tags are added, replaced, listed in key order and removed", function()
  call("iam", "CreateRole", { RoleName = "tagged", AssumeRolePolicyDocument = EC2_TRUST })
  call("iam", "TagRole", { RoleName = "tagged", Tags = { { Key = "b", Value = "1" }, { Key = "a", Value = "2" } } })
  call("iam", "TagRole", { RoleName = "tagged", Tags = { { Key = "b", Value = "3" } } })
  t.eq(call("iam", "ListRoleTags", { RoleName = "tagged" }).Tags,
    { { Key = "a", Value = "2" }, { Key = "b", Value = "3" } })
  call("iam", "UntagRole", { RoleName = "tagged", TagKeys = { "a" } })
  t.eq(call("iam", "ListRoleTags", { RoleName = "tagged" }).Tags, { { Key = "b", Value = "3" } })
  refused("iam", "TagRole", { RoleName = "untagged-nobody", Tags = { { Key = "x", Value = "y" } } }, "NoSuchEntity", 404)
end)

t.test("UpdateAssumeRolePolicy replaces the trust policy and validates the new one", function()
  call("iam", "CreateRole", { RoleName = "retrusted", AssumeRolePolicyDocument = EC2_TRUST })
  local pods = trust { Service = { "ec2.amazonaws.com", "pods.eks.amazonaws.com" } }
  call("iam", "UpdateAssumeRolePolicy", { RoleName = "retrusted", PolicyDocument = pods })
  local got = call("iam", "GetRole", { RoleName = "retrusted" }).Role
  t.eq(json.decode(unescape(got.AssumeRolePolicyDocument)), json.decode(pods))
  refused("iam", "UpdateAssumeRolePolicy", { RoleName = "retrusted", PolicyDocument = "[]" }, "MalformedPolicyDocument")
end)

-- --- IAM policies -----------------------------------------------------------

t.test("AWS-managed policies exist and attach; an unknown policy arn answers NoSuchEntity", function()
  call("iam", "CreateRole", { RoleName = "eks-cluster", AssumeRolePolicyDocument = EC2_TRUST })
  for _, name in ipairs { "AmazonEKSClusterPolicy", "AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy",
    "AmazonEC2ContainerRegistryReadOnly", "AmazonSageMakerClusterInstanceRolePolicy",
    "AmazonSSMManagedInstanceCore", "AmazonS3FullAccess", "AmazonEKSServicePolicy" } do
    local p = call("iam", "GetPolicy", { PolicyArn = "arn:aws:iam::aws:policy/" .. name }).Policy
    t.eq(p.PolicyName, name)
    t.like(p.PolicyId, "^ANPA[A-Z0-9]+$")
  end
  call("iam", "AttachRolePolicy", { RoleName = "eks-cluster", PolicyArn = "arn:aws:iam::aws:policy/AmazonEKSClusterPolicy" })
  call("iam", "AttachRolePolicy", { RoleName = "eks-cluster", PolicyArn = "arn:aws:iam::aws:policy/AmazonEKSClusterPolicy" })
  t.eq(call("iam", "ListAttachedRolePolicies", { RoleName = "eks-cluster" }).AttachedPolicies,
    { { PolicyName = "AmazonEKSClusterPolicy", PolicyArn = "arn:aws:iam::aws:policy/AmazonEKSClusterPolicy" } })
  refused("iam", "AttachRolePolicy", { RoleName = "eks-cluster", PolicyArn = "arn:aws:iam::aws:policy/NoSuchPolicy" },
    "NoSuchEntity", 404)
  refused("iam", "AttachRolePolicy", { RoleName = "nobody", PolicyArn = "arn:aws:iam::aws:policy/AmazonS3FullAccess" },
    "NoSuchEntity", 404)
  refused("iam", "DetachRolePolicy", { RoleName = "eks-cluster", PolicyArn = "arn:aws:iam::aws:policy/AmazonS3FullAccess" },
    "NoSuchEntity", 404)
  call("iam", "DetachRolePolicy", { RoleName = "eks-cluster", PolicyArn = "arn:aws:iam::aws:policy/AmazonEKSClusterPolicy" })
  t.eq(#call("iam", "ListAttachedRolePolicies", { RoleName = "eks-cluster" }).AttachedPolicies, 0)
end)

t.test("a customer policy is created, counted when attached, versioned, and not deleted while attached", function()
  local p = call("iam", "CreatePolicy", { PolicyName = "data-read", PolicyDocument = S3_READ, Path = "/hypd/" }).Policy
  t.eq(p.Arn, "arn:aws:iam::123456789012:policy/hypd/data-read")
  t.eq(p.DefaultVersionId, "v1")
  t.eq(p.AttachmentCount, 0)
  refused("iam", "CreatePolicy", { PolicyName = "data-read", PolicyDocument = S3_READ }, "EntityAlreadyExists", 409)
  refused("iam", "CreatePolicy", { PolicyName = "no-resource", PolicyDocument = json.encode {
    Version = "2012-10-17", Statement = { { Effect = "Allow", Action = "s3:*" } } } }, "MalformedPolicyDocument", 400)
  call("iam", "CreateRole", { RoleName = "reader", AssumeRolePolicyDocument = EC2_TRUST })
  call("iam", "AttachRolePolicy", { RoleName = "reader", PolicyArn = p.Arn })
  t.eq(call("iam", "GetPolicy", { PolicyArn = p.Arn }).Policy.AttachmentCount, 1)
  refused("iam", "DeletePolicy", { PolicyArn = p.Arn }, "DeleteConflict", 409)
  local v = call("iam", "GetPolicyVersion", { PolicyArn = p.Arn, VersionId = "v1" }).PolicyVersion
  t.eq(v.IsDefaultVersion, true)
  t.eq(json.decode(unescape(v.Document)), json.decode(S3_READ))
  local v2 = call("iam", "CreatePolicyVersion", { PolicyArn = p.Arn, PolicyDocument = S3_READ, SetAsDefault = true })
  t.eq(v2.PolicyVersion.VersionId, "v2")
  local versions = call("iam", "ListPolicyVersions", { PolicyArn = p.Arn }).Versions
  t.eq({ versions[1].VersionId, versions[1].IsDefaultVersion, versions[2].VersionId }, { "v2", true, "v1" })
  refused("iam", "GetPolicyVersion", { PolicyArn = p.Arn, VersionId = "v9" }, "NoSuchEntity", 404)
  call("iam", "DetachRolePolicy", { RoleName = "reader", PolicyArn = p.Arn })
  call("iam", "DeletePolicyVersion", { PolicyArn = p.Arn, VersionId = "v1" })
  call("iam", "DeletePolicy", { PolicyArn = p.Arn })
  refused("iam", "GetPolicy", { PolicyArn = p.Arn }, "NoSuchEntity", 404)
end)

t.test("ListPolicies filters by scope and by being attached", function()
  call("iam", "CreatePolicy", { PolicyName = "local-only", PolicyDocument = S3_READ })
  call("iam", "CreateRole", { RoleName = "lister", AssumeRolePolicyDocument = EC2_TRUST })
  call("iam", "AttachRolePolicy", { RoleName = "lister", PolicyArn = "arn:aws:iam::aws:policy/AmazonS3FullAccess" })
  local function names(params)
    local out = {}
    for _, p in ipairs(aws.all("iam", "ListPolicies", params, OPTS)) do out[p.PolicyName] = true end
    return out
  end
  local loc = names { Scope = "Local" }
  t.ok(loc["local-only"] and not loc.AmazonS3FullAccess, "Local lists the account's policies only")
  local awsp = names { Scope = "AWS" }
  t.ok(awsp.AmazonS3FullAccess and not awsp["local-only"], "AWS lists AWS-managed policies only")
  local attached = names { Scope = "AWS", OnlyAttached = true }
  t.ok(attached.AmazonS3FullAccess and not attached.AmazonEKSClusterPolicy, "OnlyAttached keeps attached ones")
  local all = names {}
  t.ok(all["local-only"] and all.AmazonEKSWorkerNodePolicy, "All lists both")
end)

t.test("inline policies are put, read back URL-encoded, listed and deleted", function()
  call("iam", "CreateRole", { RoleName = "inline", AssumeRolePolicyDocument = EC2_TRUST })
  call("iam", "PutRolePolicy", { RoleName = "inline", PolicyName = "SageMakerDescribeClusterNode", PolicyDocument =
    json.encode { Version = "2012-10-17", Statement = { { Effect = "Allow", Action = "sagemaker:DescribeClusterNode",
      Resource = "*" } } } })
  call("iam", "PutRolePolicy", { RoleName = "inline", PolicyName = "reads", PolicyDocument = S3_READ })
  local got = call("iam", "GetRolePolicy", { RoleName = "inline", PolicyName = "reads" })
  t.eq(got.RoleName, "inline")
  t.like(got.PolicyDocument, "^%%7B")
  t.eq(unescape(got.PolicyDocument), S3_READ)
  t.eq(call("iam", "ListRolePolicies", { RoleName = "inline" }).PolicyNames, { "SageMakerDescribeClusterNode", "reads" })
  refused("iam", "GetRolePolicy", { RoleName = "inline", PolicyName = "missing" }, "NoSuchEntity", 404)
  refused("iam", "PutRolePolicy", { RoleName = "inline", PolicyName = "bad", PolicyDocument = "nope" },
    "MalformedPolicyDocument", 400)
  call("iam", "DeleteRolePolicy", { RoleName = "inline", PolicyName = "reads" })
  t.eq(call("iam", "ListRolePolicies", { RoleName = "inline" }).PolicyNames, { "SageMakerDescribeClusterNode" })
end)

t.test("DeleteRole answers DeleteConflict while policies or an instance profile hold the role", function()
  call("iam", "CreateRole", { RoleName = "held", AssumeRolePolicyDocument = EC2_TRUST })
  local arn = "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"
  call("iam", "AttachRolePolicy", { RoleName = "held", PolicyArn = arn })
  t.like(refused("iam", "DeleteRole", { RoleName = "held" }, "DeleteConflict", 409).message, "detach all policies")
  call("iam", "DetachRolePolicy", { RoleName = "held", PolicyArn = arn })
  call("iam", "PutRolePolicy", { RoleName = "held", PolicyName = "p", PolicyDocument = S3_READ })
  t.like(refused("iam", "DeleteRole", { RoleName = "held" }, "DeleteConflict", 409).message, "delete policies")
  call("iam", "DeleteRolePolicy", { RoleName = "held", PolicyName = "p" })
  call("iam", "CreateInstanceProfile", { InstanceProfileName = "held-profile" })
  call("iam", "AddRoleToInstanceProfile", { InstanceProfileName = "held-profile", RoleName = "held" })
  t.like(refused("iam", "DeleteRole", { RoleName = "held" }, "DeleteConflict", 409).message, "instance profile")
  call("iam", "RemoveRoleFromInstanceProfile", { InstanceProfileName = "held-profile", RoleName = "held" })
  call("iam", "DeleteRole", { RoleName = "held" })
  refused("iam", "GetRole", { RoleName = "held" }, "NoSuchEntity", 404)
  refused("iam", "DeleteRole", { RoleName = "held" }, "NoSuchEntity", 404)
end)

t.test("an instance profile holds one role, lists for it, and is deleted once empty", function()
  call("iam", "CreateRole", { RoleName = "node", AssumeRolePolicyDocument = EC2_TRUST })
  call("iam", "CreateRole", { RoleName = "node2", AssumeRolePolicyDocument = EC2_TRUST })
  local ip = call("iam", "CreateInstanceProfile", { InstanceProfileName = "node-profile" }).InstanceProfile
  t.like(ip.InstanceProfileId, "^AIPA[A-Z0-9]+$")
  t.eq(ip.Arn, "arn:aws:iam::123456789012:instance-profile/node-profile")
  refused("iam", "CreateInstanceProfile", { InstanceProfileName = "node-profile" }, "EntityAlreadyExists", 409)
  call("iam", "AddRoleToInstanceProfile", { InstanceProfileName = "node-profile", RoleName = "node" })
  refused("iam", "AddRoleToInstanceProfile", { InstanceProfileName = "node-profile", RoleName = "node2" },
    "LimitExceeded", 409)
  local got = call("iam", "GetInstanceProfile", { InstanceProfileName = "node-profile" }).InstanceProfile
  t.eq(got.Roles[1].RoleName, "node")
  local listed = call("iam", "ListInstanceProfilesForRole", { RoleName = "node" }).InstanceProfiles
  t.eq(#listed, 1)
  t.eq(listed[1].InstanceProfileName, "node-profile")
  refused("iam", "DeleteInstanceProfile", { InstanceProfileName = "node-profile" }, "DeleteConflict", 409)
  call("iam", "RemoveRoleFromInstanceProfile", { InstanceProfileName = "node-profile", RoleName = "node" })
  call("iam", "DeleteInstanceProfile", { InstanceProfileName = "node-profile" })
  refused("iam", "GetInstanceProfile", { InstanceProfileName = "node-profile" }, "NoSuchEntity", 404)
end)

local ISSUER = "oidc.eks.us-west-2.amazonaws.com/id/0123456789ABCDEF0123456789ABCDEF"
local PROVIDER_ARN = "arn:aws:iam::123456789012:oidc-provider/" .. ISSUER

t.test("an OIDC provider is created, read, listed, refused twice and deleted", function()
  local out = call("iam", "CreateOpenIDConnectProvider", { Url = "https://oidc.eks.us-west-2.amazonaws.com/id/TEMP",
    ClientIDList = { "sts.amazonaws.com" }, ThumbprintList = { string.rep("9e", 20) } })
  local arn = "arn:aws:iam::123456789012:oidc-provider/oidc.eks.us-west-2.amazonaws.com/id/TEMP"
  t.eq(out.OpenIDConnectProviderArn, arn)
  local got = call("iam", "GetOpenIDConnectProvider", { OpenIDConnectProviderArn = arn })
  t.eq(got.Url, "oidc.eks.us-west-2.amazonaws.com/id/TEMP")
  t.eq(got.ClientIDList, { "sts.amazonaws.com" })
  t.eq(got.ThumbprintList, { string.rep("9e", 20) })
  local listed = call("iam", "ListOpenIDConnectProviders").OpenIDConnectProviderList
  local found = false
  for _, p in ipairs(listed) do found = found or p.Arn == arn end
  t.ok(found, "the provider is listed")
  refused("iam", "CreateOpenIDConnectProvider", { Url = "https://oidc.eks.us-west-2.amazonaws.com/id/TEMP",
    ClientIDList = { "sts.amazonaws.com" } }, "EntityAlreadyExists", 409)
  refused("iam", "CreateOpenIDConnectProvider", { Url = "http://insecure.example.com" }, "InvalidInput", 400)
  call("iam", "DeleteOpenIDConnectProvider", { OpenIDConnectProviderArn = arn })
  refused("iam", "GetOpenIDConnectProvider", { OpenIDConnectProviderArn = arn }, "NoSuchEntity", 404)
end)

-- --- STS ----------------------------------------------------------------

t.test("GetCallerIdentity names the sandbox account and user", function()
  local me = call("sts", "GetCallerIdentity")
  t.eq(me.Account, "123456789012")
  t.eq(me.Arn, "arn:aws:iam::123456789012:user/sandbox")
  t.ok(me.UserId, "a user id")
end)

t.test("AssumeRole and GetSessionToken issue session credentials that sign as their principal", function()
  local role = call("iam", "CreateRole", { RoleName = "admin-session", AssumeRolePolicyDocument = ACCOUNT_TRUST }).Role
  local out = call("sts", "AssumeRole", { RoleArn = role.Arn, RoleSessionName = "hypd-test" })
  local c = out.Credentials
  t.like(c.AccessKeyId, "^ASIA")
  t.ok(c.SecretAccessKey and c.SessionToken, "a secret and a token")
  local expires = epoch(c.Expiration)
  t.ok(expires > core.now() + 3500 and expires <= core.now() + 3601, "an hour by default")
  t.eq(out.AssumedRoleUser.Arn, "arn:aws:sts::123456789012:assumed-role/admin-session/hypd-test")
  t.eq(out.AssumedRoleUser.AssumedRoleId, role.RoleId .. ":hypd-test")
  local me = assert(send("sts", "GetCallerIdentity", {}, c))
  t.eq(me.Arn, "arn:aws:sts::123456789012:assumed-role/admin-session/hypd-test")
  t.eq(me.UserId, role.RoleId .. ":hypd-test")
  t.eq(me.Account, "123456789012")
  local r0, err0 = send("sts", "GetSessionToken", {}, c)
  t.fails(r0, err0, "AccessDenied", "no GetSessionToken with session credentials")
  local st = call("sts", "GetSessionToken", { DurationSeconds = 900 }).Credentials
  t.eq(assert(send("sts", "GetCallerIdentity", {}, st)).Arn, "arn:aws:iam::123456789012:user/sandbox")
  local bad = { AccessKeyId = c.AccessKeyId, SecretAccessKey = c.SecretAccessKey, SessionToken = "forged" }
  local r, err = send("sts", "GetCallerIdentity", {}, bad)
  t.fails(r, err, "InvalidClientTokenId")
end)

t.test("AssumeRole of an unknown role or of a role that does not trust the caller is AccessDenied (403)", function()
  refused("sts", "AssumeRole", { RoleArn = "arn:aws:iam::123456789012:role/ghost", RoleSessionName = "s1" },
    "AccessDenied", 403)
  local role = call("iam", "CreateRole", { RoleName = "service-only", AssumeRolePolicyDocument = EC2_TRUST }).Role
  local err = refused("sts", "AssumeRole", { RoleArn = role.Arn, RoleSessionName = "s1" }, "AccessDenied", 403)
  t.like(err.message, "is not authorized to perform: sts:AssumeRole on resource")
  refused("sts", "AssumeRole", { RoleArn = role.Arn, RoleSessionName = "x" }, "ValidationError", 400)
end)

t.test("DurationSeconds beyond the role's MaxSessionDuration is a ValidationError", function()
  local role = call("iam", "CreateRole", { RoleName = "short-session", AssumeRolePolicyDocument = ACCOUNT_TRUST }).Role
  local err = refused("sts", "AssumeRole", { RoleArn = role.Arn, RoleSessionName = "long", DurationSeconds = 7200 },
    "ValidationError", 400)
  t.like(err.message, "MaxSessionDuration")
  refused("sts", "AssumeRole", { RoleArn = role.Arn, RoleSessionName = "tiny", DurationSeconds = 60 }, "ValidationError")
end)

t.test("a session past its expiration answers ExpiredToken", function()
  local role = call("iam", "CreateRole", { RoleName = "expiring", AssumeRolePolicyDocument = ACCOUNT_TRUST }).Role
  local c = call("sts", "AssumeRole", { RoleArn = role.Arn, RoleSessionName = "brief", DurationSeconds = 900 })
    .Credentials
  t.ok(send("sts", "GetCallerIdentity", {}, c), "the fresh session works")
  task.sleep(901) -- virtual time
  local r, err = send("sts", "GetCallerIdentity", {}, c)
  t.fails(r, err, "ExpiredToken")
  t.eq(err.status, 400)
  t.eq(call("sts", "GetCallerIdentity").Account, "123456789012", "the static keys still work")
end)

local function b64url(s) return (sys.b64encode(s):gsub("+", "-"):gsub("/", "_"):gsub("=", "")) end
local function jwt(claims)
  return b64url(json.encode { alg = "RS256", kid = "k1" }) .. "." .. b64url(json.encode(claims)) .. "." ..
    b64url("signature")
end

t.test("AssumeRoleWithWebIdentity issues a session for a service account token of a registered provider", function()
  call("iam", "CreateOpenIDConnectProvider", { Url = "https://" .. ISSUER, ClientIDList = { "sts.amazonaws.com" } })
  local role = call("iam", "CreateRole", { RoleName = "irsa", AssumeRolePolicyDocument = json.encode {
    Version = "2012-10-17", Statement = { { Effect = "Allow", Principal = { Federated = PROVIDER_ARN },
      Action = "sts:AssumeRoleWithWebIdentity", Condition = { StringEquals = {
        [ISSUER .. ":sub"] = "system:serviceaccount:default:tiered-storage-sa",
        [ISSUER .. ":aud"] = "sts.amazonaws.com" } } } } } }).Role
  local token = jwt { iss = "https://" .. ISSUER, sub = "system:serviceaccount:default:tiered-storage-sa",
    aud = "sts.amazonaws.com", exp = math.floor(core.now()) + 3600 }
  -- unsigned, as AWS takes it: hypd's client does not sign auth = "none" operations
  local out = call("sts", "AssumeRoleWithWebIdentity", { RoleArn = role.Arn, RoleSessionName = "pod",
    WebIdentityToken = token })
  t.eq(out.SubjectFromWebIdentityToken, "system:serviceaccount:default:tiered-storage-sa")
  t.eq(out.Audience, "sts.amazonaws.com")
  t.eq(out.Provider, PROVIDER_ARN)
  t.eq(out.AssumedRoleUser.Arn, "arn:aws:sts::123456789012:assumed-role/irsa/pod")
  local me = assert(send("sts", "GetCallerIdentity", {}, out.Credentials))
  t.eq(me.Arn, "arn:aws:sts::123456789012:assumed-role/irsa/pod")
end)

t.test("AssumeRoleWithWebIdentity refuses bad tokens, unknown issuers, wrong audiences and untrusted subjects", function()
  local arn = "arn:aws:iam::123456789012:role/irsa"
  local function web(token) return try("sts", "AssumeRoleWithWebIdentity",
    { RoleArn = arn, RoleSessionName = "pod", WebIdentityToken = token }) end
  local exp = math.floor(core.now()) + 3600
  local r, err = web("not-a-jwt")
  t.fails(r, err, "InvalidIdentityToken")
  r, err = web(jwt { iss = "https://unknown.example.com", sub = "x", aud = "sts.amazonaws.com", exp = exp })
  t.fails(r, err, "InvalidIdentityToken")
  t.like(err.message, "No OpenIDConnect provider found")
  r, err = web(jwt { iss = "https://" .. ISSUER, sub = "system:serviceaccount:default:tiered-storage-sa",
    aud = "someone-else", exp = exp })
  t.fails(r, err, "InvalidIdentityToken")
  r, err = web(jwt { iss = "https://" .. ISSUER, sub = "system:serviceaccount:kube-system:other",
    aud = "sts.amazonaws.com", exp = exp })
  t.fails(r, err, "AccessDenied")
  t.eq(err.status, 403)
  r = send("sts", "AssumeRoleWithWebIdentity", { RoleArn = arn, RoleSessionName = "signed",
    WebIdentityToken = jwt { iss = "https://" .. ISSUER, sub = "system:serviceaccount:default:tiered-storage-sa",
      aud = "sts.amazonaws.com", exp = exp } }, STATIC)
  t.ok(r and r.Credentials, "a signed request is taken too")
  r, err = web(jwt { iss = "https://" .. ISSUER, sub = "system:serviceaccount:default:tiered-storage-sa",
    aud = "sts.amazonaws.com", exp = math.floor(core.now()) - 10 })
  t.fails(r, err, "ExpiredTokenException")
end)

-- --- S3 buckets -------------------------------------------------------------

t.test("a bucket is created in its region, headed, located and listed", function()
  local out = call("s3", "CreateBucket", { Bucket = "hypd-data", CreateBucketConfiguration = {
    LocationConstraint = "us-west-2" } })
  t.eq(out.Location, "http://hypd-data.s3.amazonaws.com/")
  t.eq(call("s3", "HeadBucket", { Bucket = "hypd-data" }).BucketRegion, "us-west-2")
  t.eq(location("hypd-data"), "us-west-2")
  local listed = call("s3", "ListBuckets")
  t.eq(listed.Buckets[1].Name, "hypd-data")
  t.eq(listed.Buckets[1].BucketRegion, "us-west-2")
  t.ok(epoch(listed.Buckets[1].CreationDate), "a creation date")
  t.ok(listed.Owner.ID, "an owner")
end)

t.test("CreateBucket refuses bad names, a missing or foreign location constraint and a bucket you own", function()
  for _, name in ipairs { "UPPER", "ab", "a..b", "192.168.1.1", "xn--bucket", "-dash", "bucket-s3alias" } do
    local err = refused("s3", "CreateBucket", { Bucket = name,
      CreateBucketConfiguration = { LocationConstraint = "us-west-2" } }, "InvalidBucketName", 400)
    t.eq(err.code, "InvalidBucketName", name)
  end
  refused("s3", "CreateBucket", { Bucket = "no-constraint" }, "IllegalLocationConstraintException", 400)
  refused("s3", "CreateBucket", { Bucket = "wrong-constraint",
    CreateBucketConfiguration = { LocationConstraint = "eu-west-1" } }, "IllegalLocationConstraintException", 400)
  refused("s3", "CreateBucket", { Bucket = "hypd-data",
    CreateBucketConfiguration = { LocationConstraint = "us-west-2" } }, "BucketAlreadyOwnedByYou", 409)
  local east = aws.call("s3", "CreateBucket", { Bucket = "hypd-east" }, { endpoint_url = OPTS.endpoint_url,
    region = "us-east-1" })
  t.eq(east.Location, "/hypd-east")
  aws.call("s3", "CreateBucket", { Bucket = "hypd-via-global", CreateBucketConfiguration = {
    LocationConstraint = "eu-west-1" } }, { endpoint_url = OPTS.endpoint_url, region = "us-east-1" })
  t.eq(location("hypd-via-global", "us-east-1"), "eu-west-1", "the global endpoint creates in any region")
  t.eq(location("hypd-east", "us-east-1"), "", "us-east-1 is the empty constraint")
end)

t.test("a request signed for another region than the bucket's names the bucket's region", function()
  local east = { endpoint_url = OPTS.endpoint_url, region = "us-east-1" }
  local _, err = aws.try("s3", "ListObjectsV2", { Bucket = "hypd-data" }, east)
  t.eq({ err.code, err.status }, { "AuthorizationHeaderMalformed", 400 })
  t.like(err.message, "expecting 'us%-west%-2'")
  t.eq(aws.call("s3", "HeadBucket", { Bucket = "hypd-data" }, east).BucketRegion, "us-west-2",
    "HeadBucket answers from any region")
end)

t.test("HeadBucket of a missing bucket answers 404 and other calls NoSuchBucket", function()
  local _, err = try("s3", "HeadBucket", { Bucket = "no-such-bucket-here" })
  t.eq(err.status, 404)
  t.ok(err.code == "NotFound" or err.code == "404", "NotFound, got " .. tostring(err.code))
  refused("s3", "GetBucketLocation", { Bucket = "no-such-bucket-here" }, "NoSuchBucket", 404)
  refused("s3", "DeleteBucket", { Bucket = "no-such-bucket-here" }, "NoSuchBucket", 404)
end)

t.test("a bucket policy is put, read and deleted; without one GetBucketPolicy answers NoSuchBucketPolicy", function()
  call("s3", "CreateBucket", { Bucket = "hypd-policy", CreateBucketConfiguration = { LocationConstraint = "us-west-2" } })
  refused("s3", "GetBucketPolicy", { Bucket = "hypd-policy" }, "NoSuchBucketPolicy", 404)
  local policy = json.encode { Version = "2012-10-17", Statement = { { Effect = "Allow",
    Principal = { AWS = "arn:aws:iam::123456789012:root" }, Action = "s3:GetObject",
    Resource = "arn:aws:s3:::hypd-policy/*" } } }
  call("s3", "PutBucketPolicy", { Bucket = "hypd-policy", Policy = policy })
  t.eq(call("s3", "GetBucketPolicy", { Bucket = "hypd-policy" }).Policy, policy)
  refused("s3", "PutBucketPolicy", { Bucket = "hypd-policy", Policy = "not json" }, "MalformedPolicy", 400)
  call("s3", "DeleteBucketPolicy", { Bucket = "hypd-policy" })
  refused("s3", "GetBucketPolicy", { Bucket = "hypd-policy" }, "NoSuchBucketPolicy", 404)
end)

t.test("versioning starts unset, is enabled, and default encryption is SSE-S3 until configured", function()
  call("s3", "CreateBucket", { Bucket = "hypd-config", CreateBucketConfiguration = { LocationConstraint = "us-west-2" } })
  t.eq(call("s3", "GetBucketVersioning", { Bucket = "hypd-config" }).Status, nil)
  call("s3", "PutBucketVersioning", { Bucket = "hypd-config", VersioningConfiguration = { Status = "Enabled" } })
  t.eq(call("s3", "GetBucketVersioning", { Bucket = "hypd-config" }).Status, "Enabled")
  local enc = call("s3", "GetBucketEncryption", { Bucket = "hypd-config" }).ServerSideEncryptionConfiguration
  t.eq(enc.Rules[1].ApplyServerSideEncryptionByDefault.SSEAlgorithm, "AES256")
  call("s3", "PutBucketEncryption", { Bucket = "hypd-config", ServerSideEncryptionConfiguration = { Rules = { {
    ApplyServerSideEncryptionByDefault = { SSEAlgorithm = "aws:kms", KMSMasterKeyID = "alias/hypd" },
    BucketKeyEnabled = true } } } })
  enc = call("s3", "GetBucketEncryption", { Bucket = "hypd-config" }).ServerSideEncryptionConfiguration
  t.eq(enc.Rules[1].ApplyServerSideEncryptionByDefault, { SSEAlgorithm = "aws:kms", KMSMasterKeyID = "alias/hypd" })
  t.eq(enc.Rules[1].BucketKeyEnabled, true)
  local r = call("s3", "PutObject", { Bucket = "hypd-config", Key = "v", Body = "1" })
  t.ok(r.VersionId, "a versioned bucket answers a version id")
  t.eq(r.ServerSideEncryption, "aws:kms")
end)

t.test("the public access block is on for new buckets, and once deleted answers NoSuchPublicAccessBlockConfiguration", function()
  call("s3", "CreateBucket", { Bucket = "hypd-pab", CreateBucketConfiguration = { LocationConstraint = "us-west-2" } })
  local pab = call("s3", "GetPublicAccessBlock", { Bucket = "hypd-pab" }).PublicAccessBlockConfiguration
  t.eq(pab, { BlockPublicAcls = true, IgnorePublicAcls = true, BlockPublicPolicy = true, RestrictPublicBuckets = true })
  call("s3", "DeletePublicAccessBlock", { Bucket = "hypd-pab" })
  refused("s3", "GetPublicAccessBlock", { Bucket = "hypd-pab" }, "NoSuchPublicAccessBlockConfiguration", 404)
  call("s3", "PutPublicAccessBlock", { Bucket = "hypd-pab", PublicAccessBlockConfiguration = {
    BlockPublicAcls = true, IgnorePublicAcls = false, BlockPublicPolicy = true, RestrictPublicBuckets = false } })
  pab = call("s3", "GetPublicAccessBlock", { Bucket = "hypd-pab" }).PublicAccessBlockConfiguration
  t.eq(pab.IgnorePublicAcls, false)
  t.eq(pab.BlockPublicPolicy, true)
end)

-- --- S3 objects -------------------------------------------------------------

t.test("an object is put with an md5 ETag, read whole or by range, headed, and deleted", function()
  local body = "hello sandbox\0with a NUL and \255 bytes"
  local put = call("s3", "PutObject", { Bucket = "hypd-data", Key = "dir/hello.txt", Body = body,
    ContentType = "text/plain", Metadata = { owner = "hypd" } })
  t.eq(put.ETag, '"' .. sys.digest("md5", body, "hex") .. '"')
  local got = call("s3", "GetObject", { Bucket = "hypd-data", Key = "dir/hello.txt" })
  t.eq(got.Body, body)
  t.eq(got.ETag, put.ETag)
  t.eq(got.ContentType, "text/plain")
  t.eq(got.ContentLength, #body)
  t.eq(got.Metadata, { owner = "hypd" })
  local part = call("s3", "GetObject", { Bucket = "hypd-data", Key = "dir/hello.txt", Range = "bytes=0-4" })
  t.eq(part.Body, "hello")
  t.eq(part.ContentRange, "bytes 0-4/" .. #body)
  t.eq(call("s3", "GetObject", { Bucket = "hypd-data", Key = "dir/hello.txt", Range = "bytes=-5" }).Body, body:sub(-5))
  refused("s3", "GetObject", { Bucket = "hypd-data", Key = "dir/hello.txt", Range = "bytes=999-" }, "InvalidRange", 416)
  local head = call("s3", "HeadObject", { Bucket = "hypd-data", Key = "dir/hello.txt" })
  t.eq(head.ETag, put.ETag)
  t.ok(epoch(head.LastModified), "a last-modified time")
  refused("s3", "GetObject", { Bucket = "hypd-data", Key = "dir/missing" }, "NoSuchKey", 404)
  local _, err = try("s3", "HeadObject", { Bucket = "hypd-data", Key = "dir/missing" })
  t.eq(err.status, 404)
  refused("s3", "PutObject", { Bucket = "no-such-bucket-here", Key = "k", Body = "x" }, "NoSuchBucket", 404)
  call("s3", "DeleteObject", { Bucket = "hypd-data", Key = "dir/hello.txt" })
  call("s3", "DeleteObject", { Bucket = "hypd-data", Key = "dir/hello.txt" })
  refused("s3", "GetObject", { Bucket = "hypd-data", Key = "dir/hello.txt" }, "NoSuchKey", 404)
end)

t.test("ListObjectsV2 filters by prefix, rolls up common prefixes and pages with continuation tokens", function()
  call("s3", "CreateBucket", { Bucket = "hypd-list", CreateBucketConfiguration = { LocationConstraint = "us-west-2" } })
  for _, k in ipairs { "a.txt", "logs/1", "logs/2", "models/x/1", "models/y/2", "models/z.bin", "z.txt" } do
    call("s3", "PutObject", { Bucket = "hypd-list", Key = k, Body = k })
  end
  local top = call("s3", "ListObjectsV2", { Bucket = "hypd-list", Delimiter = "/" })
  local keys, prefixes = {}, {}
  for i, o in ipairs(top.Contents) do keys[i] = o.Key end
  for i, p in ipairs(top.CommonPrefixes) do prefixes[i] = p.Prefix end
  t.eq(keys, { "a.txt", "z.txt" })
  t.eq(prefixes, { "logs/", "models/" })
  t.eq(top.KeyCount, 4)
  t.eq(top.IsTruncated, false)
  local models = call("s3", "ListObjectsV2", { Bucket = "hypd-list", Prefix = "models/", Delimiter = "/" })
  t.eq(#models.Contents, 1)
  t.eq(models.Contents[1].Key, "models/z.bin")
  t.eq(models.Contents[1].Size, #"models/z.bin")
  t.eq(#models.CommonPrefixes, 2)
  local page = call("s3", "ListObjectsV2", { Bucket = "hypd-list", MaxKeys = 3 })
  t.eq(page.IsTruncated, true)
  t.eq(page.KeyCount, 3)
  t.ok(page.NextContinuationToken, "a continuation token")
  local rest = call("s3", "ListObjectsV2", { Bucket = "hypd-list", MaxKeys = 3,
    ContinuationToken = page.NextContinuationToken })
  t.eq(rest.Contents[1].Key, "models/x/1")
  local all = aws.all("s3", "ListObjectsV2", { Bucket = "hypd-list", MaxKeys = 2 }, OPTS)
  t.eq(#all, 7)
  local rolled = {}
  for p in aws.pages("s3", "ListObjectsV2", { Bucket = "hypd-list", MaxKeys = 1, Delimiter = "/" }, OPTS) do
    for _, o in ipairs(p.Contents or {}) do rolled[#rolled + 1] = o.Key end
    for _, c in ipairs(p.CommonPrefixes or {}) do rolled[#rolled + 1] = c.Prefix end
  end
  t.eq(rolled, { "a.txt", "logs/", "models/", "z.txt" }, "a rolled-up prefix appears once across pages")
  local after = call("s3", "ListObjectsV2", { Bucket = "hypd-list", StartAfter = "models/z.bin" })
  t.eq(after.Contents[1].Key, "z.txt")
  refused("s3", "ListObjectsV2", { Bucket = "hypd-list", ContinuationToken = "garbage!" }, "InvalidArgument", 400)
end)

t.test("DeleteObjects empties a bucket that DeleteBucket refused as not empty", function()
  refused("s3", "DeleteBucket", { Bucket = "hypd-list" }, "BucketNotEmpty", 409)
  local objects = {}
  for _, o in ipairs(aws.all("s3", "ListObjectsV2", { Bucket = "hypd-list" }, OPTS)) do
    objects[#objects + 1] = { Key = o.Key }
  end
  local out = call("s3", "DeleteObjects", { Bucket = "hypd-list", Delete = { Objects = objects } })
  t.eq(#out.Deleted, 7)
  t.eq(call("s3", "ListObjectsV2", { Bucket = "hypd-list" }).KeyCount, 0)
  call("s3", "DeleteBucket", { Bucket = "hypd-list" })
  refused("s3", "HeadBucket", { Bucket = "hypd-list" }, nil, 404)
end)

t.test("CopyObject copies body and metadata, and refuses a copy onto itself without changes", function()
  call("s3", "PutObject", { Bucket = "hypd-data", Key = "src", Body = "payload", Metadata = { k = "v" } })
  local out = call("s3", "CopyObject", { Bucket = "hypd-data", Key = "dst", CopySource = "hypd-data/src" })
  t.eq(out.CopyObjectResult.ETag, '"' .. sys.digest("md5", "payload", "hex") .. '"')
  local got = call("s3", "GetObject", { Bucket = "hypd-data", Key = "dst" })
  t.eq(got.Body, "payload")
  t.eq(got.Metadata, { k = "v" })
  refused("s3", "CopyObject", { Bucket = "hypd-data", Key = "src", CopySource = "hypd-data/src" }, "InvalidRequest", 400)
  refused("s3", "CopyObject", { Bucket = "hypd-data", Key = "x", CopySource = "hypd-data/nothing" }, "NoSuchKey", 404)
end)

t.test("a multipart upload joins its parts under an md5-of-md5s ETag; small or unknown parts are refused", function()
  local up = call("s3", "CreateMultipartUpload", { Bucket = "hypd-data", Key = "big.bin", ContentType = "x/big" })
  t.ok(up.UploadId, "an upload id")
  local one, two = string.rep("a", 5 * 1024 * 1024), "tail"
  local e1 = call("s3", "UploadPart", { Bucket = "hypd-data", Key = "big.bin", UploadId = up.UploadId,
    PartNumber = 1, Body = one }).ETag
  local e2 = call("s3", "UploadPart", { Bucket = "hypd-data", Key = "big.bin", UploadId = up.UploadId,
    PartNumber = 2, Body = two }).ETag
  t.eq(#call("s3", "ListParts", { Bucket = "hypd-data", Key = "big.bin", UploadId = up.UploadId }).Parts, 2)
  refused("s3", "CompleteMultipartUpload", { Bucket = "hypd-data", Key = "big.bin", UploadId = up.UploadId,
    MultipartUpload = { Parts = { { PartNumber = 1, ETag = e1 }, { PartNumber = 3, ETag = e2 } } } }, "InvalidPart", 400)
  local done = call("s3", "CompleteMultipartUpload", { Bucket = "hypd-data", Key = "big.bin", UploadId = up.UploadId,
    MultipartUpload = { Parts = { { PartNumber = 1, ETag = e1 }, { PartNumber = 2, ETag = e2 } } } })
  local md5s = sys.digest("md5", one, "raw") .. sys.digest("md5", two, "raw")
  t.eq(done.ETag, '"' .. sys.digest("md5", md5s, "hex") .. '-2"')
  local got = call("s3", "GetObject", { Bucket = "hypd-data", Key = "big.bin", Range = "bytes=-6" })
  t.eq(got.Body, "aatail")
  t.eq(got.ContentType, "x/big")
  refused("s3", "ListParts", { Bucket = "hypd-data", Key = "big.bin", UploadId = up.UploadId }, "NoSuchUpload", 404)
  local small = call("s3", "CreateMultipartUpload", { Bucket = "hypd-data", Key = "small.bin" }).UploadId
  local s1 = call("s3", "UploadPart", { Bucket = "hypd-data", Key = "small.bin", UploadId = small, PartNumber = 1,
    Body = "tiny" }).ETag
  local s2 = call("s3", "UploadPart", { Bucket = "hypd-data", Key = "small.bin", UploadId = small, PartNumber = 2,
    Body = "tiny" }).ETag
  refused("s3", "CompleteMultipartUpload", { Bucket = "hypd-data", Key = "small.bin", UploadId = small,
    MultipartUpload = { Parts = { { PartNumber = 1, ETag = s1 }, { PartNumber = 2, ETag = s2 } } } },
    "EntityTooSmall", 400)
  call("s3", "AbortMultipartUpload", { Bucket = "hypd-data", Key = "small.bin", UploadId = small })
  refused("s3", "UploadPart", { Bucket = "hypd-data", Key = "small.bin", UploadId = small, PartNumber = 3,
    Body = "x" }, "NoSuchUpload", 404)
  refused("s3", "HeadObject", { Bucket = "hypd-data", Key = "small.bin" }, nil, 404)
end)

t.test("a virtual-hosted request reaches the same bucket as a path-style one", function()
  call("s3", "PutObject", { Bucket = "hypd-data", Key = "vhost.txt", Body = "via host" })
  local static = STATIC
  local model = aws.model("s3")
  local req = assert(protocol.build(model, "GetObject", { Bucket = "hypd-data", Key = "vhost.txt" }))
  local host = "hypd-data.s3.us-west-2.amazonaws.com"
  local path = req.path:gsub("^/hypd%-data", "")
  local when = math.floor(core.now())
  local headers = { host = host }
  local s = assert(sigv4.sign { method = "GET", path = path, headers = headers, access_key = static.AccessKeyId,
    secret_key = static.SecretAccessKey, region = "us-west-2", service = "s3", when = when, normalize = false,
    sign_body = true })
  headers.authorization = s.authorization
  headers["x-amz-date"] = os.date("!%Y%m%dT%H%M%SZ", when)
  headers["x-amz-content-sha256"] = sys.digest("sha256", "", "hex")
  local resp = assert(http.request { method = "GET", url = "http://127.0.0.1:" .. port .. path, headers = headers })
  t.eq(resp.status, 200)
  t.eq(resp.body, "via host")
end)

t.test("the audit log names the buckets and roles that changed", function()
  local resp = assert(http.request { url = OPTS.endpoint_url .. "/_sandbox/audit" })
  local seen = {}
  for _, e in ipairs(json.decode(resp.body)) do seen[e.service .. " " .. e.operation .. " " .. e.target] = true end
  t.ok(seen["iam CreateRole hp-exec"], "CreateRole is audited")
  t.ok(seen["s3 CreateBucket hypd-data"], "CreateBucket is audited")
  t.ok(seen["iam AttachRolePolicy eks-cluster"], "AttachRolePolicy names the role")
  t.ok(not seen["iam GetRole hp-exec"], "reads are not audited")
end)

t.cleanup(function()
  core.virtual(false)
  srv:stop()
end)

t.test("policy sizes as IAM counts them: 6,144 for a managed policy, 10,240 for a role's inline ones together", function()
  local function doc(n) -- a policy of about n characters (white space not counted)
    local actions = {}
    for i = 1, n // 22 do actions[i] = string.format("s3:GetObject%08d", i) end
    return json.encode { Version = "2012-10-17", Statement = { { Effect = "Allow", Action = actions, Resource = "*" } } }
  end
  call("iam", "CreateRole", { RoleName = "sizes", AssumeRolePolicyDocument = json.encode { Version = "2012-10-17",
    Statement = { { Effect = "Allow", Principal = { Service = "ec2.amazonaws.com" }, Action = "sts:AssumeRole" } } } })
  t.ok(try("iam", "PutRolePolicy", { RoleName = "sizes", PolicyName = "big", PolicyDocument = doc(8000) }),
    "an inline policy of 8,000 characters is taken")
  local e = refused("iam", "PutRolePolicy", { RoleName = "sizes", PolicyName = "more", PolicyDocument = doc(3000) },
    "LimitExceeded", 409)
  t.like(e.message, "Maximum policy size of 10240 bytes exceeded for role sizes")
  e = refused("iam", "CreatePolicy", { PolicyName = "big", PolicyDocument = doc(7000) }, "LimitExceeded", 409)
  t.like(e.message, "PolicySize: 6144")
  local spaced = doc(5800):gsub(",", ",        ")
  t.ok(#spaced > 6144 and try("iam", "CreatePolicy", { PolicyName = "spaced", PolicyDocument = spaced }),
    "white space is not counted: " .. #spaced .. " characters with it")
end)
