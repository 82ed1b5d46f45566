-- Teardown against the in-process sandbox (virtual clock): a cluster built
-- by the stage tools (cluster_create_eks, cluster_configure_dependencies,
-- hyperpod_create with one ml.m5.xlarge, storage_create_s3 with an object
-- in its bucket), then taken away under the IAM policy `hypd iam-policy`
-- prints for hyperpod_delete and cluster_delete (enforced by the sandbox):
-- hyperpod_delete's plan lists its deletes and sends nothing; its run,
-- stopped midway as a stopping host stops it and resumed, deletes each
-- thing once; a re-run sends nothing; cluster_delete keeps and reports the
-- data bucket and a security group someone else made in the VPC (and the
-- VPC with it), a re-run sends nothing, and with force (the foreign group
-- gone) everything goes.
local t = require "hypd.tap"
local json = require "hypd.json"
local op = require "hypd.tool.operations"
local dispatch = require "hypd.tool.dispatch"
local H = dofile("tests/lua/helpers.lua")
require("hypd.tool.loader").load()

H.sandbox_here()
local Hp = dofile("tests/lua/hyperpod_helpers.lua")
local E = Hp.E
local call, mark, since = E.call, E.mark, E.since
local function try(service, operation, params) return require("hypd.aws").try(service, operation, params, E.OPTS) end
local ADMIN = { name = "admin", scope = "admin", front = "test" }

local TAG, EKS, HP = "tdn", "hypd-tdn", "hypd-tdn-hp"
local DATA = "hypd-tdn-data-123456789012-us-west-2"
local LIFECYCLE = "hypd-tdn-lifecycle-" .. require("hypd.sys").digest("sha256", "123456789012/us-west-2", "hex"):sub(1, 8)
local ROLE = "hypd-tdn-hyperpod-exec"
local W = {} -- what the build made: vpc, subnet

local function run(name, params)
  local acc, err = dispatch.call(name, params, ADMIN)
  t.ok(acc, name .. " is accepted: " .. json.encode(err))
  t.eq(acc and acc.status_tool, "operation_get", name .. " names operation_get")
  return op.wait(acc.operation_id), acc
end

local function ok_run(name, params)
  local v = run(name, params)
  t.eq(v.status, "succeeded", name .. ": " .. json.encode(v.error))
  return v.result or {}, v
end

local function kept(r, typ, name)
  for _, k in ipairs(r.kept or {}) do
    if k.type == typ and (not name or k.name == name) then return k end
  end
end

local stop_at = E.stop_at

local function head(bucket) return try("s3", "HeadBucket", { Bucket = bucket }) end

t.test("a cluster made by the stage tools: EKS, dependencies, HyperPod (one ml.m5.xlarge), S3 storage with data",
  function()
  Hp.stage1(TAG)
  local v = op.wait(assert(dispatch.call("cluster_configure_dependencies", { cluster = EKS }, E.WHO)).operation_id)
  t.eq(v.status, "succeeded", "dependencies: " .. json.encode(v.error))
  v = Hp.run("hyperpod_create", { cluster = EKS, instance_type = "ml.m5.xlarge", instance_count = 1,
    availability_zone = "us-west-2a" })
  t.eq(v.status, "succeeded", "hyperpod_create: " .. json.encode(v.error))
  W.subnet, W.vpc = v.result.subnet_id, E.call("eks", "DescribeCluster", { name = EKS }).cluster.resourcesVpcConfig.vpcId
  local acc = assert(dispatch.call("storage_create_s3", { cluster = EKS }, E.WHO))
  v = op.wait(acc.operation_id)
  t.eq(v.status, "succeeded", "storage_create_s3: " .. json.encode(v.error))
  call("s3", "PutObject", { Bucket = DATA, Key = "datasets/a.bin", Body = "someone's data" })
  t.ok(head(LIFECYCLE) and head(DATA), "both buckets exist")
end)

t.test("the teardown runs under the IAM policy hypd iam-policy prints for hyperpod_delete and cluster_delete",
  function()
  local doc = assert(require("hypd.iam_policy").document { tools = { "hyperpod_delete", "cluster_delete" } })
  local actions = {}
  for _, a in ipairs(H.policy_actions(doc)) do actions[a] = true end
  t.ok(actions["sagemaker:DeleteCluster"] and actions["s3:DeleteBucket"] and actions["eks:DeleteCluster"],
    "it holds what the children (hyperpod_delete, storage_delete) do: cluster_delete's calls")
  local policy = require "sandbox.policy"
  assert(policy.set(doc))
  local _, denied = try("sagemaker", "CreateCluster", { ClusterName = "x" })
  t.like(denied and denied.code or "", "^AccessDenied", "the policy is enforced: what it does not allow is refused")
end)

t.test("hyperpod_delete's plan lists the deletes in reverse order of creation and sends nothing", function()
  local m = mark()
  local p = assert(dispatch.call("hyperpod_delete", { cluster = EKS, plan = true }, ADMIN))
  local _, total = since(m)
  t.eq(total, 0, "the audit log is unchanged")
  t.eq(E.rows(p), {
    "delete sagemaker:cluster " .. HP,
    "delete ec2:vpc-endpoint hypd-tdn-s3 (" .. p.plan[2].id .. ")",
    "delete ec2:route-table hp-compute-us-west-2a-rt (" .. p.plan[3].id .. ")",
    "delete ec2:subnet hp-compute-us-west-2a (" .. W.subnet .. ")",
    "delete s3:bucket " .. LIFECYCLE,
    "delete iam:role " .. ROLE,
  })
end)

t.test("hyperpod_delete, stopped midway and resumed, deletes each thing once, waiting for the cluster to go",
  function()
  local m = mark()
  local t0 = require("hypd.core").now()
  stop_at("deleting subnet", "hyperpod-delete/")
  local acc = assert(dispatch.call("hyperpod_delete", { cluster = EKS }, ADMIN))
  local v = op.wait(acc.operation_id)
  t.eq(v.status, "running", "stopped, left running: " .. tostring(v.phase))
  v = E.resume(acc.operation_id)
  t.eq(v.status, "succeeded", json.encode(v.error))
  t.ok(require("hypd.core").now() - t0 >= 240, "the HyperPod cluster took minutes to go (simulated)")
  t.eq(since(m), { ["sagemaker DeleteCluster"] = 1, ["ec2 DeleteVpcEndpoints"] = 1,
    ["ec2 DisassociateRouteTable"] = 1, ["ec2 DeleteRouteTable"] = 1, ["ec2 DeleteSubnet"] = 1,
    ["s3 DeleteObjects"] = 1, ["s3 DeleteBucket"] = 1, ["iam DetachRolePolicy"] = 1, ["iam DeleteRolePolicy"] = 1,
    ["iam DeleteRole"] = 1 }, "each deletion once")
  t.eq(try("sagemaker", "DescribeCluster", { ClusterName = HP }), nil, "the HyperPod cluster is gone")
  t.eq(head(LIFECYCLE), nil, "the lifecycle bucket is gone")
  t.eq(try("iam", "GetRole", { RoleName = ROLE }), nil, "the execution role is gone")
  t.eq(#call("ec2", "DescribeSubnets", { Filters = { { Name = "subnet-id", Values = { W.subnet } } } }).Subnets, 0,
    "the compute subnet is gone")
  t.ok(head(DATA), "the storage bucket stays (hyperpod_delete leaves storage)")
  t.eq(call("eks", "DescribeCluster", { name = EKS }).cluster.status, "ACTIVE", "the EKS cluster stays")
  t.eq(#v.result.deleted, 6)
  t.eq(require("hypd.clusters").get(EKS, "us-west-2").hyperpod, false, "the registry forgets the HyperPod cluster")
end)

t.test("hyperpod_delete again sends no mutating call", function()
  local m = mark()
  local r = ok_run("hyperpod_delete", { cluster = EKS })
  local _, total = since(m)
  t.eq(total, 0, "nothing sent")
  t.eq(#r.deleted, 0)
end)

t.test("cluster_delete keeps the bucket holding data and a security group someone else made, and the VPC with it",
  function()
  local policy = require "sandbox.policy"
  policy.set(nil) -- someone else, with their own rights
  local sg = call("ec2", "CreateSecurityGroup", { GroupName = "someone-elses", Description = "not hypd's",
    VpcId = W.vpc }).GroupId
  assert(policy.set(assert(require("hypd.iam_policy").document { tools = { "hyperpod_delete", "cluster_delete" } })))
  W.foreign_sg = sg
  local r, v = ok_run("cluster_delete", { cluster_tag = TAG })
  print("# kept: " .. json.encode(r.kept))
  local b = kept(r, "s3:bucket", DATA)
  t.ok(b, "the data bucket is kept: " .. json.encode(r.kept))
  t.like(b and b.why or "", "holds data")
  local g = kept(r, "ec2:security-group", "someone-elses")
  t.like(g and g.why or "", "^not hypd's", "the foreign group is kept, saying why")
  local vpc = kept(r, "ec2:vpc")
  E.has(vpc and vpc.why or "", sg, "the VPC is kept, naming what it holds")
  t.ok(head(DATA), "the data bucket is there")
  t.eq(call("s3", "ListObjectsV2", { Bucket = DATA }).KeyCount, 1, "with its data")
  t.eq(try("eks", "DescribeCluster", { name = EKS }), nil, "the EKS cluster is gone")
  local roles = call("iam", "ListRoles", {}).Roles
  for _, role in ipairs(roles) do
    t.ok(not role.RoleName:find("^hypd%-tdn"), "no hypd-tdn role left: " .. role.RoleName)
  end
  t.eq(#call("ec2", "DescribeSubnets", { Filters = E.by_tag(TAG) }).Subnets, 0, "no tagged subnet left")
  t.eq(#call("ec2", "DescribeNatGateways", { Filter = { { Name = "tag:hypd:cluster-tag", Values = { TAG } },
    { Name = "state", Values = { "available", "pending", "deleting" } } } }).NatGateways, 0, "no NAT gateway left")
  t.ok(v.result.kept, "one kept list")
end)

t.test("cluster_delete again sends no mutating call", function()
  local m = mark()
  local r = ok_run("cluster_delete", { cluster_tag = TAG })
  local _, total = since(m)
  t.eq(total, 0, "nothing sent: " .. json.encode((since(m))))
  t.ok(kept(r, "s3:bucket", DATA), "still reported")
end)

t.test("with force and the foreign group gone, cluster_delete deletes the data bucket and the VPC", function()
  require("sandbox.policy").set(nil)
  call("ec2", "DeleteSecurityGroup", { GroupId = W.foreign_sg })
  local doc = assert(require("hypd.iam_policy").document { tools = { "hyperpod_delete", "cluster_delete" } })
  assert(require("sandbox.policy").set(doc))
  t.cleanup(function() require("sandbox.policy").set(nil) end)
  local m = mark()
  local r = ok_run("cluster_delete", { cluster_tag = TAG, force = true })
  t.eq(head(DATA), nil, "the data bucket is gone")
  t.eq(#call("ec2", "DescribeVpcs", { VpcIds = nil, Filters = E.by_tag(TAG) }).Vpcs, 0, "the VPC is gone")
  local counts = since(m)
  t.eq({ counts["s3 DeleteBucket"], counts["ec2 DeleteVpc"] }, { 1, 1 })
  t.eq(kept(r, "s3:bucket"), nil, "nothing of S3 kept")
  require("sandbox.policy").set(nil)
end)

t.test("cluster_delete, stopped while the EKS cluster goes and resumed, deletes each thing once", function()
  Hp.stage1("tdr")
  local m = mark()
  stop_at("waiting for EKS cluster hypd-tdr to be gone", "delete/us-west-2/tdr", true)
  local acc = assert(dispatch.call("cluster_delete", { cluster_tag = "tdr" }, ADMIN))
  local v = op.wait(acc.operation_id)
  t.eq(v.status, "running", "stopped, left running: " .. tostring(v.phase))
  v = E.resume(acc.operation_id)
  t.eq(v.status, "succeeded", json.encode(v.error))
  local counts = since(m)
  t.eq({ counts["eks DeleteCluster"], counts["ec2 DeleteNatGateway"], counts["ec2 ReleaseAddress"],
    counts["ec2 DeleteInternetGateway"], counts["ec2 DeleteSubnet"], counts["ec2 DeleteVpc"], counts["iam DeleteRole"] },
    { 1, 1, 1, 1, 4, 1, 1 }, json.encode(counts))
  t.eq(#call("ec2", "DescribeVpcs", { Filters = E.by_tag("tdr") }).Vpcs, 0, "nothing left")
  t.eq(#v.result.kept, 0, "nothing kept: " .. json.encode(v.result.kept))
end)
