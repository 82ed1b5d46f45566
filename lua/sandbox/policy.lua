-- sandbox.policy: an IAM identity-based policy on the sandbox's caller.
--
--   local ok, err = policy.set(doc)   -- doc: a policy document (table), or nil / json.null to remove it
--   policy.get() -> doc | nil
--   local err = policy.authorize(ctx, service, operation, input, protocol)
--   -- nil: allowed; else the AWS error to answer { code, status, message,
--   -- type, action, resource, explicit }
--
-- With a policy set, every signed request (static keys, and the sessions
-- STS issues, whoever they stand for) is evaluated as IAM evaluates an
-- identity-based policy: an explicit Deny wins; otherwise some Allow must
-- match; nothing matching is an implicit deny. A statement matches when its
-- Action (or NotAction) matches the request's action and its Resource (or
-- NotResource) matches the request's resource.
--
-- Evaluated:
--   Effect Allow | Deny; Action and NotAction, a string or a list, "*" or
--   "service:Pattern" with * and ? wildcards, case-insensitive as IAM
--   matches actions; Resource and NotResource, "*" or ARN patterns with *
--   and ?, each of the ARN's six colon-separated parts matched on its own
--   (a wildcard does not span parts), case-sensitive. A request with no resource ARN (below) is matched only
--   by Resource "*".
-- Not evaluated (said here, never silently pretended):
--   Condition blocks are ignored (a statement with a Condition applies as if
--   it had none); policy variables (${aws:username}) are matched literally;
--   no resource-based policies, permission boundaries, SCPs or session
--   policies; an assumed-role session is held to this policy, not to its
--   role's policies.
-- Always allowed, as in AWS: sts:GetCallerIdentity and sts:GetSessionToken
-- ("no permissions are required"). Unsigned requests (operations AWS takes
-- without a signature) and the sandbox's /_sandbox/* routes are not subject
-- to the policy.
--
-- The action is service:Operation (the IAM prefix is the service name),
-- except S3, where IAM's names differ (ListObjectsV2 is s3:ListBucket,
-- HeadObject and GetObject s3:GetObject, UploadPart s3:PutObject, ...).
-- The resource ARN, where the operation names one clearly:
--   iam   the role (RoleName, with its path when the role exists), the
--         instance profile (InstanceProfileName, before RoleName), the policy
--         (PolicyArn; CreatePolicy: Path and PolicyName), the OIDC provider
--   sts   AssumeRole: RoleArn
--   ec2   Create<Type> and AllocateAddress: "<type>/*" (vpc/*, subnet/*,
--         security-group/*, ...); otherwise the resource an id names
--         (RouteTableId, GroupId, InternetGatewayId, NatGatewayId, SubnetId,
--         VpcId, AllocationId, VpcEndpointId, in that order; CreateTags and
--         DeleteTags: every id of Resources, by its prefix); Describe*: none
--   eks   cluster/<name> for operations on a cluster (name; Create*/List* of
--         its add-ons, access entries, pod identity associations and node
--         groups by clusterName); an add-on, access entry, pod identity
--         association or node group by the ARN of its record (none when it
--         does not exist);
--         resourceArn for tag operations
--   sagemaker  cluster/* for CreateCluster; the cluster's ARN (ClusterName
--         as an ARN, or the record's) otherwise; mlflow-tracking-server/<name>,
--         training-plan/<name>; ResourceArn for tag operations
--   s3    arn:aws:s3:::bucket, or bucket/key for object operations;
--         DeleteObjects: every key; CopyObject: s3:PutObject on the target
--         and s3:GetObject on the source
--   fsx   file-system/* for CreateFileSystem, file-system/<id>, ResourceARN
-- Every other request has no resource (only Resource "*" matches it, and
-- the message names none).
--
-- iam:PassRole, as AWS checks it: eks CreateCluster (roleArn),
-- CreatePodIdentityAssociation (roleArn) and CreateNodegroup (nodeRole), sagemaker CreateCluster and
-- UpdateCluster (every InstanceGroups[].ExecutionRole, and ClusterRole) and
-- CreateMlflowTrackingServer (RoleArn) also need iam:PassRole on each role
-- ARN, checked after the operation's own action.
local errors = require "hypd.errors"
local json = require "hypd.json"
local sys = require "hypd.sys"

local M = {}

local current -- the policy document in force, or nil

-- a JSON array, or a Lua sequence (a table built in Lua carries no mark)
local function is_list(v)
  return type(v) == "table" and (json.is_array(v) or (not json.is_object(v) and (v[1] ~= nil or next(v) == nil)))
end

local function as_list(v)
  if v == nil or v == json.null then return {} end
  if is_list(v) then return v end
  return { v }
end

-- --- the document -------------------------------------------------------------

local STATEMENT_KEYS = { Sid = true, Effect = true, Action = true, NotAction = true, Resource = true,
  NotResource = true, Condition = true }

local function bad(message) return errors.fail("VALIDATION", "policy: " .. message, { field = "policy" }) end

local function strings(st, key, i, check)
  local v = st[key]
  local list = as_list(v)
  if #list == 0 then return bad(string.format("Statement %d: %s must be a string or a non-empty list", i, key)) end
  for _, s in ipairs(list) do
    if type(s) ~= "string" or s == "" then
      return bad(string.format("Statement %d: %s must hold strings", i, key))
    end
    local ok, msg = check(s)
    if not ok then return bad(string.format("Statement %d: %s", i, msg)) end
  end
  return true
end

local function check_action(s)
  if s == "*" or s:match("^[%w%-]+:[%w%*%?]*$") then return true end
  return false, "the action '" .. s .. "' must be \"*\" or \"service:Action\" (wildcards * and ?)"
end

local function check_resource(s)
  if s == "*" or s:sub(1, 4) == "arn:" then return true end
  return false, "the resource '" .. s .. "' must be \"*\" or an ARN"
end

-- validate(doc) -> true | nil, VALIDATION err: what IAM would reject as a
-- MalformedPolicyDocument, for an identity-based policy
local function validate(doc)
  if type(doc) ~= "table" or is_list(doc) then return bad("expected a policy document (a JSON object)") end
  if doc.Version ~= nil and doc.Version ~= "2012-10-17" and doc.Version ~= "2008-10-17" then
    return bad("Version must be 2012-10-17 (or 2008-10-17)")
  end
  local list = as_list(doc.Statement)
  if #list == 0 then return bad("Statement must be an object or a non-empty list of objects") end
  for i, st in ipairs(list) do
    if type(st) ~= "table" or is_list(st) then return bad("Statement " .. i .. " must be an object") end
    if st.Principal ~= nil or st.NotPrincipal ~= nil then
      return bad("Statement " .. i .. ": an identity-based policy should not specify a principal")
    end
    for k in pairs(st) do
      if not STATEMENT_KEYS[k] then return bad("Statement " .. i .. ": unknown field " .. tostring(k)) end
    end
    if st.Effect ~= "Allow" and st.Effect ~= "Deny" then
      return bad("Statement " .. i .. ": Effect must be Allow or Deny")
    end
    if (st.Action == nil) == (st.NotAction == nil) then
      return bad("Statement " .. i .. ": give exactly one of Action and NotAction")
    end
    if (st.Resource == nil) == (st.NotResource == nil) then
      return bad("Statement " .. i .. ": give exactly one of Resource and NotResource")
    end
    local ok, err = strings(st, st.Action ~= nil and "Action" or "NotAction", i, check_action)
    if not ok then return nil, err end
    ok, err = strings(st, st.Resource ~= nil and "Resource" or "NotResource", i, check_resource)
    if not ok then return nil, err end
  end
  return true
end
M.validate = validate

-- set(doc) -> true | nil, err: the policy in force from now on; nil or
-- json.null removes it (every request allowed again)
function M.set(doc)
  if doc == nil or doc == json.null then
    current = nil
    return true
  end
  local ok, err = validate(doc)
  if not ok then return nil, err end
  current = doc
  return true
end

function M.get() return current end

-- load(path) -> doc | nil, err: a policy document from a JSON file
function M.load(path)
  local f, oerr = io.open(path, "rb")
  if not f then return errors.fail("VALIDATION", "policy: cannot read " .. tostring(path) .. ": " .. tostring(oerr),
    { field = "policy" }) end
  local text = f:read("a")
  f:close()
  local doc = json.decode(text)
  if type(doc) ~= "table" then
    return errors.fail("VALIDATION", "policy: " .. path .. " does not hold a JSON policy document", { field = "policy" })
  end
  return doc
end

-- --- matching ----------------------------------------------------------------

-- glob(pattern, s): IAM's * (any run) and ? (one character)
local function glob(pattern, s)
  local lp = pattern:gsub("[%^%$%(%)%%%.%[%]%+%-]", "%%%0"):gsub("%*", ".*"):gsub("%?", ".")
  return s:match("^" .. lp .. "$") ~= nil
end
M.glob = glob

-- the six parts of an ARN: arn, partition, service, region, account, resource
local function arn_parts(s)
  local a, p, svc, r, acct, res = s:match("^([^:]*):([^:]*):([^:]*):([^:]*):([^:]*):(.*)$")
  if not a then return nil end
  return { a, p, svc, r, acct, res }
end

local function resource_matches(pattern, resource)
  if pattern == "*" then return true end
  if resource == nil then return false end
  local pp, rp = arn_parts(pattern), arn_parts(resource)
  -- "a wildcard can't span segments": a pattern of fewer parts matches no ARN
  if not pp then return false end
  if not rp then return glob(pattern, resource) end
  for i = 1, 6 do
    if not glob(pp[i], rp[i]) then return false end
  end
  return true
end

local function action_matches(pattern, action)
  return glob(pattern:lower(), action:lower())
end

local function any(list, fn, x)
  for _, p in ipairs(as_list(list)) do
    if fn(p, x) then return true end
  end
  return false
end

local function applies(st, action, resource)
  local a
  if st.Action ~= nil then a = any(st.Action, action_matches, action)
  else a = not any(st.NotAction, action_matches, action) end
  if not a then return false end
  if st.Resource ~= nil then return any(st.Resource, resource_matches, resource) end
  return not any(st.NotResource, resource_matches, resource)
end

-- evaluate(doc, action, resource) -> "allow" | "deny" (explicit) | "implicit"
function M.evaluate(doc, action, resource)
  local allowed = false
  for _, st in ipairs(as_list(doc.Statement)) do
    if applies(st, action, resource) then
      if st.Effect == "Deny" then return "deny" end
      allowed = true
    end
  end
  return allowed and "allow" or "implicit"
end

-- --- what a request asks for -------------------------------------------------------

-- S3 operations whose IAM action has another name
local S3_ACTIONS = {
  ListObjects = "ListBucket", ListObjectsV2 = "ListBucket", HeadBucket = "ListBucket",
  ListObjectVersions = "ListBucketVersions", ListBuckets = "ListAllMyBuckets",
  HeadObject = "GetObject", CreateMultipartUpload = "PutObject", UploadPart = "PutObject",
  UploadPartCopy = "PutObject", CompleteMultipartUpload = "PutObject", CopyObject = "PutObject",
  DeleteObjects = "DeleteObject", ListParts = "ListMultipartUploadParts",
  ListMultipartUploads = "ListBucketMultipartUploads",
  GetBucketEncryption = "GetEncryptionConfiguration", PutBucketEncryption = "PutEncryptionConfiguration",
  DeleteBucketEncryption = "PutEncryptionConfiguration",
  GetPublicAccessBlock = "GetBucketPublicAccessBlock", PutPublicAccessBlock = "PutBucketPublicAccessBlock",
  DeletePublicAccessBlock = "PutBucketPublicAccessBlock", DeleteBucketTagging = "PutBucketTagging",
  GetBucketLifecycleConfiguration = "GetLifecycleConfiguration",
  PutBucketLifecycleConfiguration = "PutLifecycleConfiguration", DeleteBucketLifecycle = "PutLifecycleConfiguration",
  DeleteObjectTagging = "DeleteObjectTagging",
}

-- action(service, operation) -> the IAM action a request needs
function M.action(service, operation)
  if service == "s3" then return "s3:" .. (S3_ACTIONS[operation] or operation) end
  if service == "sagemaker-runtime" then return "sagemaker:" .. operation end -- IAM's prefix for both
  return service .. ":" .. operation
end

local function str(v) return type(v) == "string" and v ~= "" and v or nil end

-- ec2: what an id names, by its prefix
local EC2_ID = { vpc = "vpc", subnet = "subnet", sg = "security-group", rtb = "route-table",
  igw = "internet-gateway", nat = "natgateway", eipalloc = "elastic-ip", vpce = "vpc-endpoint", i = "instance",
  eni = "network-interface", vol = "volume", lt = "launch-template", sgr = "security-group-rule" }
local EC2_CREATE = { CreateVpc = "vpc", CreateSubnet = "subnet", CreateSecurityGroup = "security-group",
  CreateRouteTable = "route-table", CreateInternetGateway = "internet-gateway", CreateNatGateway = "natgateway",
  CreateVpcEndpoint = "vpc-endpoint", AllocateAddress = "elastic-ip", CreateNetworkInterface = "network-interface",
  CreateVolume = "volume", CreateLaunchTemplate = "launch-template" }
local EC2_IDS = { "RouteTableId", "GroupId", "InternetGatewayId", "NatGatewayId", "SubnetId", "VpcId", "AllocationId",
  "VpcEndpointId", "InstanceId", "NetworkInterfaceId", "VolumeId" }
local EC2_ID_LISTS = { CreateTags = "Resources", DeleteTags = "Resources", DeleteVpcEndpoints = "VpcEndpointIds",
  TerminateInstances = "InstanceIds", StopInstances = "InstanceIds", StartInstances = "InstanceIds" }

local function ec2_arn(ctx, id)
  local kind = EC2_ID[id:match("^(%w+)%-") or ""]
  return kind and ctx:arn(kind .. "/" .. id, "ec2") or nil
end

local function ec2(ctx, op, input)
  if op:match("^Describe") then return {} end
  if EC2_CREATE[op] then return { ctx:arn(EC2_CREATE[op] .. "/*", "ec2") } end
  local list = EC2_ID_LISTS[op]
  if list then
    local out = {}
    for _, id in ipairs(as_list(input[list])) do
      if type(id) == "string" then out[#out + 1] = ec2_arn(ctx, id) end
    end
    return out
  end
  for _, k in ipairs(EC2_IDS) do
    local id = str(input[k])
    if id then return { ec2_arn(ctx, id) } end
  end
  return {}
end

local function iam(ctx, op, input)
  local view = ctx:view("iam")
  local function path(p) return str(p) or "/" end
  if str(input.InstanceProfileName) then
    local p = view:get("instance_profile", input.InstanceProfileName)
    return { p and p.Arn or ctx:arn("instance-profile" .. path(input.Path) .. input.InstanceProfileName, "iam") }
  end
  if str(input.RoleName) then
    local r = op ~= "CreateRole" and view:get("role", input.RoleName)
    return { r and r.Arn or ctx:arn("role" .. path(input.Path) .. input.RoleName, "iam") }
  end
  if str(input.PolicyArn) then return { input.PolicyArn } end
  if op == "CreatePolicy" and str(input.PolicyName) then
    return { ctx:arn("policy" .. path(input.Path) .. input.PolicyName, "iam") }
  end
  if str(input.OpenIDConnectProviderArn) then return { input.OpenIDConnectProviderArn } end
  if op == "CreateOpenIDConnectProvider" and str(input.Url) then
    return { ctx:arn("oidc-provider/" .. input.Url:gsub("^https://", ""):gsub("/$", ""), "iam") }
  end
  if str(input.UserName) then return { ctx:arn("user" .. path(input.Path) .. input.UserName, "iam") } end
  return {}
end

local function eks(ctx, op, input)
  if str(input.resourceArn) then return { input.resourceArn } end
  local view = ctx:view("eks")
  local cluster = str(input.clusterName)
  if str(input.name) and not cluster then return { ctx:arn("cluster/" .. input.name, "eks") } end
  if not cluster then return {} end
  if op:match("^Create") or op:match("^List[A-Z]%l+s$") or op == "ListPodIdentityAssociations"
      or op == "ListAccessEntries" then
    return { ctx:arn("cluster/" .. cluster, "eks") }
  end
  local rec, field
  if str(input.addonName) then
    rec, field = view:get("addon", cluster .. "/" .. input.addonName), "addonArn"
  elseif str(input.principalArn) then
    rec, field = view:get("access_entry", cluster .. "/" .. input.principalArn), "accessEntryArn"
  elseif str(input.associationId) then
    rec, field = view:get("pod_identity", cluster .. "/" .. input.associationId), "associationArn"
  elseif str(input.nodegroupName) then
    rec, field = view:get("nodegroup", cluster .. "/" .. input.nodegroupName), "nodegroupArn"
  else
    return { ctx:arn("cluster/" .. cluster, "eks") }
  end
  return { rec and rec[field] or nil }
end

local function sagemaker(ctx, op, input)
  if str(input.ResourceArn) then return { input.ResourceArn } end
  local name = str(input.ClusterName)
  if name then
    if op == "CreateCluster" then return { ctx:arn("cluster/*", "sagemaker") } end
    if name:sub(1, 4) == "arn:" then return { name } end
    local c = ctx:view("sagemaker"):get("cluster", name)
    return { c and c.ClusterArn or nil }
  end
  if str(input.TrackingServerName) then
    return { ctx:arn("mlflow-tracking-server/" .. input.TrackingServerName, "sagemaker") }
  end
  if str(input.TrainingPlanName) then return { ctx:arn("training-plan/" .. input.TrainingPlanName, "sagemaker") } end
  return {}
end

local function s3_arn(bucket, key) return "arn:aws:s3:::" .. bucket .. (key and "/" .. key or "") end

local function unescape(s) return (s:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end)) end

-- s3(ctx, op, input) -> resources, plus extra { action, resource } checks
local function s3(_, op, input)
  local bucket = str(input.Bucket)
  if not bucket then return {} end
  if op == "DeleteObjects" then
    local out = {}
    for _, o in ipairs(as_list((input.Delete or {}).Objects)) do
      if type(o) == "table" and str(o.Key) then out[#out + 1] = s3_arn(bucket, o.Key) end
    end
    return out
  end
  if op == "CopyObject" and str(input.CopySource) then
    local src = unescape(input.CopySource:gsub("%?versionId=.*$", ""))
    local sb, sk = src:match("^/?([^/]+)/(.+)$")
    return { s3_arn(bucket, str(input.Key)) }, sb and { { "s3:GetObject", s3_arn(sb, sk) } } or nil
  end
  return { s3_arn(bucket, str(input.Key)) }
end

local function fsx(ctx, op, input)
  if str(input.ResourceARN) then return { input.ResourceARN } end
  if op == "CreateFileSystem" then return { ctx:arn("file-system/*", "fsx") } end
  if str(input.FileSystemId) then return { ctx:arn("file-system/" .. input.FileSystemId, "fsx") } end
  return {}
end

local function sts(_, op, input)
  if op == "AssumeRole" and str(input.RoleArn) then return { input.RoleArn } end
  return {}
end

local RESOURCES = { ec2 = ec2, iam = iam, eks = eks, sagemaker = sagemaker, s3 = s3, fsx = fsx, sts = sts }

-- the roles an operation hands to a service: iam:PassRole on each
local function passed_roles(service, op, input)
  local roles = {}
  local function add(v) if str(v) then roles[#roles + 1] = v end end
  if service == "eks" and (op == "CreateCluster" or op == "CreatePodIdentityAssociation") then
    add(input.roleArn)
  elseif service == "eks" and op == "CreateNodegroup" then
    add(input.nodeRole)
  elseif service == "sagemaker" and (op == "CreateCluster" or op == "UpdateCluster") then
    for _, g in ipairs(as_list(input.InstanceGroups)) do
      if type(g) == "table" then add(g.ExecutionRole) end
    end
    add(input.ClusterRole)
  elseif service == "sagemaker" and op == "CreateMlflowTrackingServer" then
    add(input.RoleArn)
  end
  local seen, out = {}, {}
  for _, r in ipairs(roles) do
    if not seen[r] then seen[r], out[#out + 1] = true, r end
  end
  return out
end

-- checks(ctx, service, operation, input) -> list of { action, resource|nil }
-- that must all be allowed, in the order AWS checks them
function M.checks(ctx, service, operation, input)
  input = type(input) == "table" and input or {}
  local action = M.action(service, operation)
  local fn = RESOURCES[service]
  local resources, extra = {}, nil
  if fn then resources, extra = fn(ctx, operation, input) end
  local out = {}
  if #resources == 0 then out[1] = { action } end
  for _, r in ipairs(resources) do out[#out + 1] = { action, r } end
  for _, c in ipairs(extra or {}) do out[#out + 1] = c end
  for _, role in ipairs(passed_roles(service, operation, input)) do out[#out + 1] = { "iam:PassRole", role } end
  return out
end

-- --- the refusal -------------------------------------------------------------------

-- per protocol: the code and HTTP status of an authorization failure
local DENIED = { ec2 = { "UnauthorizedOperation", 403 }, query = { "AccessDenied", 403 },
  json = { "AccessDeniedException", 400 }, ["rest-json"] = { "AccessDeniedException", 403 },
  ["rest-xml"] = { "AccessDenied", 403 } }

M.ENCODED_PREFIX = "hypd-sandbox:"

-- encoded(...) -> EC2's "encoded authorization failure message": here a
-- base64 JSON that the sandbox's sts:DecodeAuthorizationMessage reads back
local function encoded(principal, action, resource, explicit)
  return sys.b64encode(M.ENCODED_PREFIX .. json.encode {
    allowed = false, explicitDeny = explicit,
    matchedStatements = { items = json.array() }, failures = { items = json.array() },
    context = { principal = { id = principal.user_id, arn = principal.arn }, action = action,
      resource = resource or "*", conditions = { items = json.array() } },
  })
end

-- decode(blob) -> the JSON text an encoded message carries, or nil
function M.decode(blob)
  local ok, text = pcall(sys.b64decode, tostring(blob))
  if not ok or type(text) ~= "string" or text:sub(1, #M.ENCODED_PREFIX) ~= M.ENCODED_PREFIX then return nil end
  return text:sub(#M.ENCODED_PREFIX + 1)
end

local function message(protocol, principal, action, resource, explicit)
  local on = ""
  if resource then
    on = " on resource: " .. (protocol == "rest-xml" and '"' .. resource .. '"' or resource)
  end
  local why = explicit and " with an explicit deny in an identity-based policy"
    or " because no identity-based policy allows the " .. action .. " action"
  local m = "User: " .. principal.arn .. " is not authorized to perform: " .. action .. on .. why
  if protocol == "ec2" then
    m = "You are not authorized to perform this operation. " .. m .. ". Encoded authorization failure message: " ..
      encoded(principal, action, resource, explicit)
  end
  return m
end

-- exempt: no permission is needed, and a Deny does not stop them
local EXEMPT = { ["sts:GetCallerIdentity"] = true, ["sts:GetSessionToken"] = true }

-- authorize(ctx, service, operation, input, protocol) -> nil when the
-- policy (if any) allows the request, else the AWS error to answer
function M.authorize(ctx, service, operation, input, protocol)
  local doc = current
  if not doc then return nil end
  if EXEMPT[M.action(service, operation)] then return nil end
  for _, c in ipairs(M.checks(ctx, service, operation, input)) do
    local action, resource = c[1], c[2]
    local verdict = M.evaluate(doc, action, resource)
    if verdict ~= "allow" then
      local d = DENIED[protocol] or DENIED.query
      local explicit = verdict == "deny"
      return { code = d[1], status = d[2], type = "Sender", action = action, resource = resource,
        explicit = explicit, message = message(protocol, ctx.principal, action, resource, explicit) }
    end
  end
  return nil
end

return M
