-- The differential harness of "plans are true" (plans_true_test.lua): what
-- a staged tool's plan says it will create, change and delete, and what
-- the sandbox recorded it did, both as sets of "action type key" rows
-- that compare equal when the plan was true:
--   action  "write" (a plan's create or change) or "delete"
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
local function addon(target) return target:match("^[^/]+/(.+)$") or target end
local function s3_object(target) return "s3://" .. target end
local function W(ty, key) return { type = ty, action = "write", key = key or plain } end
local function X(ty, key) return { type = ty, action = "delete", key = key or plain } end
local MAP = {
  ["ec2 CreateVpc"] = W("ec2:vpc", id), ["ec2 ModifyVpcAttribute"] = W("ec2:vpc", id),
  ["ec2 DeleteVpc"] = X("ec2:vpc", id),
  ["ec2 AssociateVpcCidrBlock"] = W("ec2:vpc-cidr-block", id),
  ["ec2 CreateInternetGateway"] = W("ec2:internet-gateway", id),
  ["ec2 DeleteInternetGateway"] = X("ec2:internet-gateway", id),
  ["ec2 AttachInternetGateway"] = W("ec2:internet-gateway-attachment", id),
  ["ec2 DetachInternetGateway"] = X("ec2:internet-gateway-attachment", id),
  ["ec2 CreateSubnet"] = W("ec2:subnet", id), ["ec2 ModifySubnetAttribute"] = W("ec2:subnet", id),
  ["ec2 DeleteSubnet"] = X("ec2:subnet", id),
  ["ec2 AllocateAddress"] = W("ec2:elastic-ip", id), ["ec2 ReleaseAddress"] = X("ec2:elastic-ip", id),
  ["ec2 CreateNatGateway"] = W("ec2:nat-gateway", id), ["ec2 DeleteNatGateway"] = X("ec2:nat-gateway", id),
  ["ec2 CreateRouteTable"] = W("ec2:route-table", id), ["ec2 DeleteRouteTable"] = X("ec2:route-table", id),
  ["ec2 CreateRoute"] = W("ec2:route", id), ["ec2 ReplaceRoute"] = W("ec2:route", id),
  ["ec2 DeleteRoute"] = X("ec2:route", id),
  ["ec2 AssociateRouteTable"] = W("ec2:route-table-association", id),
  ["ec2 DisassociateRouteTable"] = X("ec2:route-table-association", id),
  ["ec2 CreateSecurityGroup"] = W("ec2:security-group", id), ["ec2 DeleteSecurityGroup"] = X("ec2:security-group", id),
  ["ec2 AuthorizeSecurityGroupIngress"] = W("ec2:security-group-rule", id),
  ["ec2 AuthorizeSecurityGroupEgress"] = W("ec2:security-group-rule", id),
  ["ec2 RevokeSecurityGroupIngress"] = X("ec2:security-group-rule", id),
  ["ec2 RevokeSecurityGroupEgress"] = X("ec2:security-group-rule", id),
  ["ec2 CreateVpcEndpoint"] = W("ec2:vpc-endpoint", id), ["ec2 ModifyVpcEndpoint"] = W("ec2:vpc-endpoint", id),
  ["ec2 DeleteVpcEndpoints"] = X("ec2:vpc-endpoint", id),
  ["iam CreateRole"] = W("iam:role"), ["iam UpdateAssumeRolePolicy"] = W("iam:role"),
  ["iam DeleteRole"] = X("iam:role"),
  ["iam AttachRolePolicy"] = W("iam:role-policy-attachment"),
  ["iam DetachRolePolicy"] = X("iam:role-policy-attachment"),
  ["iam PutRolePolicy"] = W("iam:role-policy"), ["iam DeleteRolePolicy"] = X("iam:role-policy"),
  ["iam CreatePolicy"] = W("iam:policy"), ["iam CreatePolicyVersion"] = W("iam:policy"),
  ["iam DeletePolicy"] = X("iam:policy"),
  ["iam CreateOpenIDConnectProvider"] = W("iam:oidc-provider", function(arn) return (arn:match("oidc%-provider/(.+)$")) end),
  ["iam AddClientIDToOpenIDConnectProvider"] = W("iam:oidc-provider", function(arn) return (arn:match("oidc%-provider/(.+)$")) end),
  ["iam DeleteOpenIDConnectProvider"] = X("iam:oidc-provider", function(arn) return (arn:match("oidc%-provider/(.+)$")) end),
  ["eks CreateCluster"] = W("eks:cluster"), ["eks DeleteCluster"] = X("eks:cluster"),
  ["eks CreateAccessEntry"] = W("eks:access-entry"), ["eks DeleteAccessEntry"] = X("eks:access-entry"),
  ["eks AssociateAccessPolicy"] = W("eks:access-policy-association"),
  ["eks CreateAddon"] = W("eks:addon", addon), ["eks UpdateAddon"] = W("eks:addon", addon),
  ["eks DeleteAddon"] = X("eks:addon", addon),
  ["eks CreatePodIdentityAssociation"] = W("eks:pod-identity-association", first),
  ["eks DeletePodIdentityAssociation"] = X("eks:pod-identity-association", first),
  ["eks CreateNodegroup"] = W("eks:nodegroup"), ["eks DeleteNodegroup"] = X("eks:nodegroup"),
  ["eks UpdateNodegroupConfig"] = W("eks:nodegroup-scaling"),
  ["s3 CreateBucket"] = W("s3:bucket"), ["s3 DeleteBucket"] = X("s3:bucket"),
  -- a bucket's settings, sent as it is made or repaired: the bucket's entry
  ["s3 PutPublicAccessBlock"] = W("s3:bucket", first), ["s3 PutBucketTagging"] = W("s3:bucket", first),
  ["s3 PutBucketEncryption"] = W("s3:bucket", first), ["s3 PutBucketVersioning"] = W("s3:bucket", first),
  ["s3 PutBucketPolicy"] = W("s3:bucket", first), ["s3 PutBucketLifecycleConfiguration"] = W("s3:bucket", first),
  ["s3 PutObject"] = W("s3:object", s3_object), ["s3 DeleteObject"] = X("s3:object", s3_object),
  ["sagemaker CreateCluster"] = W("sagemaker:cluster"), ["sagemaker DeleteCluster"] = X("sagemaker:cluster"),
  ["fsx CreateFileSystem"] = W("fsx:file-system", id), ["fsx DeleteFileSystem"] = X("fsx:file-system", id),
  -- UpdateCluster adds, resizes and removes instance groups alike: the
  -- audit cannot tell which, so both sides count it a write of the cluster's groups
  ["sagemaker UpdateCluster"] = W("sagemaker:instance-group"),
  ["sagemaker UpdateClusterSoftware"] = W("sagemaker:software-update"),
  ["s3 DeleteObjects"] = X("s3:objects"),
  ["sagemaker CreateMlflowTrackingServer"] = W("sagemaker:mlflow-tracking-server"),
}
D.MAP = MAP

local K8S_VERB = { create = "write", update = "write", patch = "write", delete = "delete",
  deletecollection = "delete" }
local function kind_of(resource)
  if resource:find("ies$") then return resource:sub(1, -4) .. "y" end
  if resource:find("sses$") or resource:find("ches$") or resource:find("xes$") then return resource:sub(1, -3) end
  return (resource:gsub("s$", ""))
end

local function row(action, ty, key) return action .. " " .. ty .. " " .. tostring(key) end

-- fold(rows) -> rows without the parts a deletion takes with it: a role's
-- policies (IAM refuses to delete a role that has any), a bucket's objects
-- (S3 refuses to delete one that holds any), an internet gateway's
-- attachment, a route table's associations (EC2 refuses to delete either
-- while they hold); on both sides, so a plan may list them or not
local function fold(rows)
  for r in pairs(rows) do
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
    local action = (e.action == "create" or e.action == "change") and "write" or e.action == "delete" and "delete"
    if ty == "sagemaker:instance-group" then action = action and "write" end -- see MAP's UpdateCluster
    -- a teardown names a resource with its id: "hypd-demo-nat (nat-0abc)"
    local name = tostring(e.name):gsub(" %([%w-]+%)$", "")
    if names and type(e.id) == "string" and names[e.id] and PLAN_KEY[ty] == nil then name = names[e.id] end
    if action then rows[row(action, ty, (PLAN_KEY[ty] or plain)(name))] = true end
  end
  return fold(rows)
end

-- diff(a, b) -> sorted rows of a not in b
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
    if e.action == "keep" and (type(e.why) ~= "string" or e.why == "") then
      bad[#bad + 1] = k .. " is kept without a reason"
    end
    if not ({ create = 1, change = 1, delete = 1, keep = 1, later = 1 })[e.action] then
      bad[#bad + 1] = k .. ": unknown action " .. tostring(e.action)
    end
  end
  -- a reason agrees with the actions: a resource kept because of others
  -- (a VPC that holds kept subnets) names none that the plan deletes
  for _, e in ipairs(p.plan or {}) do
    if e.action == "keep" and type(e.why) == "string" then
      for _, o in ipairs(p.plan) do
        if o ~= e and o.action == "delete" then
          local named = (type(o.id) == "string" and o.id ~= "" and e.why:find(o.id, 1, true)) or
            (type(o.name) == "string" and o.name ~= "" and e.why:find(o.name, 1, true))
          if named then
            bad[#bad + 1] = string.format("%s %s is kept because of %s %s, which the plan deletes", tostring(e.type),
              tostring(e.name), tostring(o.type), tostring(o.name))
          end
        end
      end
    end
  end
  return bad
end

return D
