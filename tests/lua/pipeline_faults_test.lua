-- cluster_create under injected faults, against the in-process sandbox
-- under the virtual clock: with 30% of the requests to every AWS service
-- throttled and 5% answered with a server error, the pipeline completes in
-- its first run, making each resource once (the same mutations as a calm
-- run: a create whose answer was a 5xx is looked for again before it is
-- made again, chaos_5xx_test has the rates and the 500s after the work); a
-- stage refused once stops the pipeline and a re-run goes on from there;
-- with no capacity for the type in the first zone, it stops at the
-- HyperPod stage with INSUFFICIENT_CAPACITY saying what to do, the rest of
-- the pipeline done, and once capacity is back a re-run finishes it.
local t = require "hypd.tap"
local faults = require "sandbox.faults"
local json = require "hypd.json"
local op = require "hypd.tool.operations"
local dispatch = require "hypd.tool.dispatch"
local H = dofile("tests/lua/helpers.lua")
require("hypd.tool.loader").load()

local sandbox_srv = H.sandbox_here()
local E = dofile("tests/lua/eks_helpers.lua")
local mark, since = E.mark, E.since

local SERVICES = { "ec2", "eks", "iam", "s3", "sagemaker", "servicequotas", "sts" }
local function pipeline(tag)
  return { cluster_tag = tag, instance_type = "ml.g5.12xlarge", instance_count = 1, availability_zone = "us-west-2a",
    features = { training_operator = true } }
end

local function run(params)
  local acc, err = dispatch.call("cluster_create", params, E.WHO)
  assert(acc, json.encode(err))
  return op.wait(acc.operation_id)
end

-- creates(counts) -> the create-like mutations only (a stopped run's re-run
-- may read and wait more, never make more)
local function creates(counts)
  local out = {}
  for k, n in pairs(counts) do
    if k:match(" Create") or k:match(" Put") or k:match(" Allocate") or k:match(" Attach") or
      k:match(" Associate") then out[k] = n end
  end
  return out
end

local calm
t.test("a calm run of the pipeline succeeds (the counts to compare with)", function()
  local m = mark()
  local v = run(pipeline("calm"))
  t.eq(v.status, "succeeded", json.encode(v.error))
  calm = creates((since(m)))
end)

t.test("with 30% of the requests throttled and 5% failing, the pipeline completes in its first run and makes " ..
  "each resource once", function()
  local svc = {}
  for _, s in ipairs(SERVICES) do svc[s] = { throttle = 0.3, error5xx = 0.05 } end
  assert(faults.configure { seed = 12345, services = svc })
  t.cleanup(function() faults.configure {} end)
  local m = mark()
  local v = run(pipeline("storm"))
  faults.configure {}
  t.eq(v.status, "succeeded", json.encode(v.error))
  t.eq(creates((since(m))), calm, "the same resources as the calm run, each once")
end)

t.test("a re-run right after the EKS stage stopped with its cluster still CREATING goes on (the later stages " ..
  "are checked when they run), and makes nothing twice", function()
  local failed = false
  local restore = E.swap("ec2", "CreateRoute", function(original, ctx, input)
    if not failed and tostring(input.NatGatewayId):match("^nat%-") then
      failed = true -- (a refusal: a 500 is looked for again and made again, in the same run)
      ctx.error("InvalidParameterValue", "the private route was refused once (the test)", 400)
    end
    return original(ctx, input)
  end)
  local v = run(pipeline("early"))
  restore()
  t.eq(v.status, "failed")
  t.like(v.error.message, "cluster_create_eks")
  t.eq(E.call("eks", "DescribeCluster", { name = "hypd-early" }).cluster.status, "CREATING")
  local m = mark()
  v = run(pipeline("early"))
  t.eq(v.status, "succeeded", json.encode(v.error))
  local made = creates((since(m)))
  for _, k in ipairs { "eks CreateCluster", "ec2 CreateVpc", "ec2 CreateNatGateway", "ec2 CreateSubnet" } do
    t.ok((made[k] or 0) <= (k == "ec2 CreateSubnet" and 1 or 0), k .. " is not made again (the compute subnet " ..
      "is new): " .. json.encode(made))
  end
end)

t.test("a re-run after the dependencies stage stopped without the S3 CSI driver goes on: storage is checked when " ..
  "it runs, after the driver is installed", function()
  local failed = false
  local restore = E.swap("eks", "CreateAddon", function(original, ctx, input)
    if not failed and input.addonName == "aws-mountpoint-s3-csi-driver" then
      failed = true
      ctx.error("InvalidParameterException", "the add-on was refused once (the test)", 400)
    end
    return original(ctx, input)
  end)
  local v = run(pipeline("deps"))
  restore()
  t.eq(v.status, "failed")
  t.like(v.error.message, "cluster_configure_dependencies")
  v = run(pipeline("deps"))
  t.eq(v.status, "succeeded", json.encode(v.error))
  t.ok(E.call("s3", "HeadBucket", { Bucket = "hypd-deps-data-123456789012-us-west-2" }), "the storage was made")
end)

t.test("with no capacity in the first zone, the pipeline stops at the HyperPod stage saying what to do; once " ..
  "capacity is back a re-run finishes it", function()
  assert(faults.configure { insufficient_capacity = { { instance_type = "ml.g5.12xlarge", zone = "usw2-az2" } } })
  t.cleanup(function() faults.configure {} end)
  local v = run(pipeline("short"))
  t.eq(v.status, "failed")
  t.eq(v.error.code, "INSUFFICIENT_CAPACITY", json.encode(v.error))
  t.like(v.error.message, "InsufficientCapacity")
  t.like(v.error.message, "call this tool again later")
  t.like(v.error.message, "hyperpod_add_instance_group")
  local done = {}
  for _, s in ipairs(v.steps) do done[s.name] = s.status end
  t.eq({ done.eks, done.dependencies, done.hyperpod_and_storage }, { "done", "done", "failed" })
  local storage = E.call("s3", "HeadBucket", { Bucket = "hypd-short-data-123456789012-us-west-2" })
  t.ok(storage, "the storage beside it was made")
  faults.configure {}
  local m = mark()
  v = run(pipeline("short"))
  t.eq(v.status, "succeeded", json.encode(v.error))
  local made = creates((since(m)))
  t.eq(made["sagemaker CreateCluster"], nil, "the HyperPod cluster is not made again")
  t.eq(made["ec2 CreateVpc"], nil, "nor the network")
  t.ok(sandbox_srv.port > 0) -- (this reference keeps the sandbox's server from being collected)
end)
