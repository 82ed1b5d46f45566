-- The differential harness of "plans are true" (plans_true_test.lua): what
-- a staged tool's plan says it will create, change and delete, and what
-- the sandbox recorded it did, both as sets of "action type key" rows
-- that compare equal when the plan was true:
--   action  "create", "change" or "delete" (and, on the sandbox's side,
--           "put": a call that creates or changes alike)
--   type    the plan's resource type ("ec2:subnet", "kubernetes:deployment")
--   key     the resource's name as the plan names it (for a part of a
--           resource, a route or an attachment, the name of the resource
--           it belongs to, the one thing both sides know)
-- The sandbox's side comes from its audit logs: "sandbox.audit" (every
-- mutating AWS call, with the id or name it targets) and
-- "sandbox.k8s.audit" (every Kubernetes write); an EC2 id is named by its
-- Name tag (snapshots taken before and after a run, so a deleted resource
-- keeps its name). A mutating call the mapping below does not know is an
-- error of the harness, listed in unmapped: a new operation cannot slip by.
local aws = require "hypd.aws"
local store = require "hypd.store"

local D = {}
local OPTS = { region = "us-west-2" }

function D.mark()
  local evs = store.events(0, 1000000) or {}
  return #evs > 0 and evs[#evs].seq or 0
end

-- names(into) -> {ec2 id = Name tag}: every EC2 resource's name now, added to into
function D.names(into)
  into = into or {}
  local token
  repeat
    local out = aws.call("ec2", "DescribeTags", { Filters = { { Name = "key", Values = { "Name" } } },
      NextToken = token }, OPTS)
    for _, tg in ipairs(out.Tags or {}) do into[tg.ResourceId] = tg.Value end
    token = out.NextToken
  until not token
  token = nil
  repeat -- FSx file systems, by their Name tag too
    local out = aws.call("fsx", "DescribeFileSystems", { NextToken = token }, OPTS)
    for _, fs in ipairs(out.FileSystems or {}) do
      for _, tg in ipairs(fs.Tags or {}) do
        if tg.Key == "Name" then into[fs.FileSystemId] = tg.Value end
      end
    end
    token = out.NextToken
  until not token
  return into
end

local function after(sep) return function(name) return name:match(sep .. "(.+)$") or name end end
local function before(sep) return function(name) return name:match("^(.-)" .. sep) or name end end

-- the plan's side: a key from an entry's name, by type (default: the name)
local PLAN_KEY = {
  ["ec2:route"] = after(" in "),
  ["ec2:route-table-association"] = before(" with "),
  ["ec2:internet-gateway-attachment"] = before(" to "),
  ["ec2:security-group-rule"] = function(name) return name:match(" within (.+)$") or name:match(" to (.+)$") or name end,
  ["iam:role-policy-attachment"] = after(" on "),
  ["iam:role-policy"] = after(" on "),
  ["sagemaker:software-update"] = function(name) return name:match("^of (%S+)") or name end,
  ["sagemaker:instance-group"] = function(name) return name:match(" in (.+)$") or name:match(" of (.+)$") or name end,
  ["eks:access-entry"] = after(" on "),
  ["eks:access-policy-association"] = after(" on "),
  -- a planned cluster's provider is named for the cluster: its issuer is read once the run made it
  ["iam:oidc-provider"] = function(name)
    local c = name:match("^the issuer of (.+)$")
    if not c then return name end
    local out = aws.try("eks", "DescribeCluster", { name = c }, OPTS)
    local issuer = out and ((out.cluster.identity or {}).oidc or {}).issuer
    return issuer and issuer:gsub("^https://", "") or name
  end,
  -- the stages name an add-on "<addon> on <cluster>", the features "<addon>": a run touches one cluster
  ["eks:addon"] = function(name) return name:match("^(%S+) on %S+$") or name end,
}

-- the sandbox's side: "service Operation" -> {type, action, key = fn(target, names)}
local function id(target, names) return names[target] or target end
local function plain(target) return target end
local function first(target) return (target:match("^([^/]+)")) end
local function issuer(arn) return (arn:match("oidc%-provider/(.+)$")) end -- the provider's ARN ends with it
local function addon(target) return target:match("^[^/]+/(.+)$") or target end
local function s3_object(target) return "s3://" .. target end
local function policy(target) return target:match("^arn:[^:]+:iam::%d+:policy/(.+)$") or target end -- by name
-- C: a call that creates; U: one that changes what exists (a change of
-- something the same run created is part of its create); P: one that
-- creates or changes alike (PutRolePolicy, PutObject, UpdateCluster): it
-- agrees with a plan's create or change of the same resource
local function C(ty, key) return { type = ty, action = "create", key = key or plain } end
local function U(ty, key) return { type = ty, action = "change", key = key or plain } end
local function P(ty, key) return { type = ty, action = "put", key = key or plain } end
local function X(ty, key) return { type = ty, action = "delete", key = key or plain } end
local MAP = {
  ["ec2 CreateVpc"] = C("ec2:vpc", id), ["ec2 ModifyVpcAttribute"] = U("ec2:vpc", id),
  ["ec2 DeleteVpc"] = X("ec2:vpc", id),
  ["ec2 AssociateVpcCidrBlock"] = C("ec2:vpc-cidr-block", id),
  ["ec2 CreateInternetGateway"] = C("ec2:internet-gateway", id),
  ["ec2 DeleteInternetGateway"] = X("ec2:internet-gateway", id),
  ["ec2 AttachInternetGateway"] = C("ec2:internet-gateway-attachment", id),
  ["ec2 DetachInternetGateway"] = X("ec2:internet-gateway-attachment", id),
  ["ec2 CreateSubnet"] = C("ec2:subnet", id), ["ec2 ModifySubnetAttribute"] = U("ec2:subnet", id),
  ["ec2 DeleteSubnet"] = X("ec2:subnet", id),
  ["ec2 AllocateAddress"] = C("ec2:elastic-ip", id), ["ec2 ReleaseAddress"] = X("ec2:elastic-ip", id),
  ["ec2 CreateNatGateway"] = C("ec2:nat-gateway", id), ["ec2 DeleteNatGateway"] = X("ec2:nat-gateway", id),
  ["ec2 CreateRouteTable"] = C("ec2:route-table", id), ["ec2 DeleteRouteTable"] = X("ec2:route-table", id),
  ["ec2 CreateRoute"] = C("ec2:route", id), ["ec2 ReplaceRoute"] = U("ec2:route", id),
  ["ec2 DeleteRoute"] = X("ec2:route", id),
  ["ec2 AssociateRouteTable"] = C("ec2:route-table-association", id),
  ["ec2 DisassociateRouteTable"] = X("ec2:route-table-association", id),
  ["ec2 CreateSecurityGroup"] = C("ec2:security-group", id), ["ec2 DeleteSecurityGroup"] = X("ec2:security-group", id),
  ["ec2 AuthorizeSecurityGroupIngress"] = C("ec2:security-group-rule", id),
  ["ec2 AuthorizeSecurityGroupEgress"] = C("ec2:security-group-rule", id),
  ["ec2 RevokeSecurityGroupIngress"] = X("ec2:security-group-rule", id),
  ["ec2 RevokeSecurityGroupEgress"] = X("ec2:security-group-rule", id),
  ["ec2 CreateVpcEndpoint"] = C("ec2:vpc-endpoint", id), ["ec2 ModifyVpcEndpoint"] = U("ec2:vpc-endpoint", id),
  ["ec2 DeleteVpcEndpoints"] = X("ec2:vpc-endpoint", id),
  ["iam CreateRole"] = C("iam:role"), ["iam UpdateAssumeRolePolicy"] = U("iam:role"),
  ["iam DeleteRole"] = X("iam:role"),
  ["iam AttachRolePolicy"] = C("iam:role-policy-attachment"),
  ["iam DetachRolePolicy"] = X("iam:role-policy-attachment"),
  ["iam PutRolePolicy"] = P("iam:role-policy"), ["iam DeleteRolePolicy"] = X("iam:role-policy"),
  ["iam CreatePolicy"] = C("iam:policy"), ["iam CreatePolicyVersion"] = U("iam:policy", policy),
  ["iam DeletePolicy"] = X("iam:policy", policy),
  ["iam CreateOpenIDConnectProvider"] = C("iam:oidc-provider", issuer),
  ["iam AddClientIDToOpenIDConnectProvider"] = U("iam:oidc-provider", issuer),
  ["iam DeleteOpenIDConnectProvider"] = X("iam:oidc-provider", issuer),
  ["eks CreateCluster"] = C("eks:cluster"), ["eks DeleteCluster"] = X("eks:cluster"),
  ["eks CreateAccessEntry"] = C("eks:access-entry"), ["eks DeleteAccessEntry"] = X("eks:access-entry"),
  ["eks AssociateAccessPolicy"] = C("eks:access-policy-association"),
  ["eks CreateAddon"] = C("eks:addon", addon), ["eks UpdateAddon"] = U("eks:addon", addon),
  ["eks DeleteAddon"] = X("eks:addon", addon),
  ["eks CreatePodIdentityAssociation"] = C("eks:pod-identity-association", first),
  ["eks DeletePodIdentityAssociation"] = X("eks:pod-identity-association", first),
  ["eks CreateNodegroup"] = C("eks:nodegroup"), ["eks DeleteNodegroup"] = X("eks:nodegroup"),
  ["eks UpdateNodegroupConfig"] = U("eks:nodegroup-scaling"),
  ["s3 CreateBucket"] = C("s3:bucket"), ["s3 DeleteBucket"] = X("s3:bucket"),
  -- a bucket's settings, sent as it is made or repaired: the bucket's entry
  ["s3 PutPublicAccessBlock"] = U("s3:bucket", first), ["s3 PutBucketTagging"] = U("s3:bucket", first),
  ["s3 PutBucketEncryption"] = U("s3:bucket", first), ["s3 PutBucketVersioning"] = U("s3:bucket", first),
  ["s3 PutBucketPolicy"] = U("s3:bucket", first), ["s3 PutBucketLifecycleConfiguration"] = U("s3:bucket", first),
  ["s3 PutObject"] = P("s3:object", s3_object), ["s3 DeleteObject"] = X("s3:object", s3_object),
  ["sagemaker CreateCluster"] = C("sagemaker:cluster"), ["sagemaker DeleteCluster"] = X("sagemaker:cluster"),
  ["fsx CreateFileSystem"] = C("fsx:file-system", id), ["fsx DeleteFileSystem"] = X("fsx:file-system", id),
  -- UpdateCluster adds, resizes and removes instance groups alike: the
  -- audit cannot tell which (D.compare lets it agree with a plan's delete too)
  ["sagemaker UpdateCluster"] = P("sagemaker:instance-group"),
  ["sagemaker UpdateClusterSoftware"] = P("sagemaker:software-update"),
  ["s3 DeleteObjects"] = X("s3:objects"),
  ["sagemaker CreateMlflowTrackingServer"] = C("sagemaker:mlflow-tracking-server"),
}
D.MAP = MAP

-- hypd applies server-side (a PATCH that creates or changes): a put
local K8S_VERB = { create = "create", update = "change", patch = "put", delete = "delete",
  deletecollection = "delete" }
local function kind_of(resource)
  if resource:find("ies$") then return resource:sub(1, -4) .. "y" end
  if resource:find("sses$") or resource:find("ches$") or resource:find("xes$") then return resource:sub(1, -3) end
  return (resource:gsub("s$", ""))
end

local function row(action, ty, key) return action .. " " .. ty .. " " .. tostring(key) end

-- fold(rows) -> rows without what a create or a deletion takes with it:
-- the changes of what the same run creates (a VPC's DNS attributes), the
-- parts a deletion takes with it: a role's
-- policies (IAM refuses to delete a role that has any), a bucket's objects
-- (S3 refuses to delete one that holds any), an internet gateway's
-- attachment, a route table's associations (EC2 refuses to delete either
-- while they hold); on both sides, so a plan may list them or not
local function fold(rows)
  for r in pairs(rows) do
    local made = r:match("^change (.+)$") or r:match("^put (.+)$")
    if made and rows["create " .. made] then rows[r] = nil end
    local key = r:match("^delete iam:role%-policy%-attachment (.+)$") or r:match("^delete iam:role%-policy (.+)$")
    if key and rows["delete iam:role " .. key] then rows[r] = nil end
    local bucket = r:match("^delete s3:objects (.+)$")
    if bucket and rows["delete s3:bucket " .. bucket] then rows[r] = nil end
    local igw = r:match("^delete ec2:internet%-gateway%-attachment (.+)$")
    if igw and rows["delete ec2:internet-gateway " .. igw] then rows[r] = nil end
    local rt = r:match("^delete ec2:route%-table%-association (.+)$")
    if rt and rows["delete ec2:route-table " .. rt] then rows[r] = nil end
  end
  return rows
end

-- done(m, names) -> {row = true}, unmapped: what the sandbox recorded after m
function D.done(m, names)
  local rows, unmapped = {}, {}
  for _, e in ipairs(store.events(m, 1000000) or {}) do
    local d = e.data
    if e.kind == "sandbox.audit" and not d.refused and aws.class(d.service, d.operation) ~= "read" then
      local k = d.service .. " " .. d.operation
      local mp = MAP[k]
      if mp then rows[row(mp.action, mp.type, mp.key(tostring(d.target), names))] = true
      else unmapped[#unmapped + 1] = k .. " " .. tostring(d.target) end
    elseif e.kind == "sandbox.k8s.audit" then
      local ty = "kubernetes:" .. kind_of(d.resource) .. (d.sub and ("/" .. d.sub) or "")
      local key = (d.namespace and (d.namespace .. "/") or "") .. tostring(d.name)
      rows[row(K8S_VERB[d.verb] or d.verb, ty, key)] = true
    end
  end
  return fold(rows), unmapped
end

-- planned(plan [, names]) -> {row = true}: what a plan says a run will do
-- (its keeps and its later entries are no mutation of this run); an entry
-- with the real id of an EC2 resource is keyed by that resource's name
-- (names, from D.names), whatever the plan calls it ("com.amazonaws.us-west-2.s3 in vpc-0abc")
function D.planned(p, names)
  local rows = {}
  for _, e in ipairs(p.plan or {}) do
    local ty = tostring(e.type):gsub("^k8s:", "kubernetes:")
    local action = (e.action == "create" or e.action == "change" or e.action == "delete") and e.action or nil
    -- a teardown names a resource with its id: "hypd-demo-nat (nat-0abc)"
    local name = tostring(e.name):gsub(" %([%w-]+%)$", "")
    if names and type(e.id) == "string" and names[e.id] and PLAN_KEY[ty] == nil then name = names[e.id] end
    if action then rows[row(action, ty, (PLAN_KEY[ty] or plain)(name))] = true end
  end
  return fold(rows)
end

-- compare(planned, done) -> {planned_not_done, done_not_planned}: sorted
-- rows; a put agrees with the plan's create or change of its resource (a
-- delete too, for the instance groups UpdateCluster removes)
function D.compare(planned, done)
  local d = {}
  for r in pairs(done) do
    local rest = r:match("^put (.+)$")
    if rest then
      local ty = rest:match("^(%S+)")
      r = planned["create " .. rest] and ("create " .. rest) or planned["change " .. rest] and ("change " .. rest) or
        (ty == "sagemaker:instance-group" and planned["delete " .. rest]) and ("delete " .. rest) or r
    end
    d[r] = true
  end
  return { planned_not_done = D.minus(planned, d), done_not_planned = D.minus(d, planned) }
end

-- minus(a, b) -> sorted rows of a not in b
function D.minus(a, b)
  local out = {}
  for r in pairs(a) do if not b[r] then out[#out + 1] = r end end
  table.sort(out)
  return out
end

-- once(p) -> the problems of a plan: a resource listed twice, or with two
-- actions, a keep without its reason, an action that is none of the five
function D.once(p)
  local seen, bad = {}, {}
  for i, e in ipairs(p.plan or {}) do
    local k = tostring(e.type) .. " " .. tostring(e.name)
    if seen[k] then
      bad[#bad + 1] = string.format("%s is listed twice (entries %d and %d: %s and %s)", k, seen[k].i, i,
        seen[k].action, tostring(e.action))
    else
      seen[k] = { i = i, action = tostring(e.action) }
    end
    if (e.action == "keep" or e.action == "later") and (type(e.why) ~= "string" or e.why == "") then
      bad[#bad + 1] = k .. " is " .. (e.action == "keep" and "kept" or "planned later") .. " without a reason"
    end
    if not ({ create = 1, change = 1, delete = 1, keep = 1, later = 1 })[e.action] then
      bad[#bad + 1] = k .. ": unknown action " .. tostring(e.action)
    end
  end
  -- names(text, word): word occurs in text as a whole name (eks:cluster
  -- hypd-x is not named by "security group hypd-x-fsx")
  local function names(text, word)
    if type(word) ~= "string" or word == "" then return false end
    local at = 1
    while true do
      local i, j = text:find(word, at, true)
      if not i then return false end
      local left, right = text:sub(i - 1, i - 1), text:sub(j + 1, j + 1)
      if not left:find("[%w%-_/.]") and not right:find("^[%w%-_/]") then return true end
      at = i + 1
    end
  end
  -- a reason agrees with the actions: a resource kept because of others
  -- (a VPC that holds kept subnets) names none that the plan deletes
  for _, e in ipairs(p.plan or {}) do
    if e.action == "keep" and type(e.why) == "string" then
      for _, o in ipairs(p.plan) do
        if o ~= e and o.action == "delete" then
          local named = names(e.why, o.id) or names(e.why, o.name)
          if named then
            bad[#bad + 1] = string.format("%s %s is kept because of %s %s, which the plan deletes (%s)",
              tostring(e.type), tostring(e.name), tostring(o.type), tostring(o.name), e.why)
          end
        end
      end
    end
  end
  return bad
end

return D
