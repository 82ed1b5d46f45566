-- The whole pipeline against the in-process sandbox under the virtual
-- clock: cluster_create --plan on an empty account lists every resource of
-- the five stages and sends nothing; a bad decision of any stage is
-- refused by cluster_create before anything is made; an agent takes an
-- empty account to an InService HyperPod cluster with S3 storage and the
-- training operator through MCP tool calls only, following each stage
-- with wait_seconds; cluster_create through REST does the same for a
-- second tag, its stages visible in cluster_get_creation_status; then
-- every stage re-run sends no mutating AWS call.
local t = require "hypd.tap"
local auth = require "hypd.api.auth"
local http = require "hypd.http"
local json = require "hypd.json"
local mcp = require "hypd.api.mcp"
local op = require "hypd.tool.operations"
local rest = require "hypd.api.rest"
local serve = require "hypd.api.gateway"
local server = require "hypd.http_server"
local dispatch = require "hypd.tool.dispatch"
local H = dofile("tests/lua/helpers.lua")
require("hypd.tool.loader").load()

local sandbox_srv = H.sandbox_here() -- kept: the server stops when collected
local E = dofile("tests/lua/eks_helpers.lua")
local mark, since = E.mark, E.since

local HP = { instance_type = "ml.g5.12xlarge", instance_count = 2, availability_zone = "us-west-2a" }
local function with(a, b)
  local out = {}
  for k, v in pairs(a) do out[k] = v end
  for k, v in pairs(b or {}) do out[k] = v end
  return out
end

-- rows(plan) -> {"create ec2:vpc", ...}: what a plan would do, by action and type
local function kinds(plan)
  local out = {}
  for _, e in ipairs(plan.plan or {}) do out[e.action .. " " .. e.type] = (out[e.action .. " " .. e.type] or 0) + 1 end
  return out
end

t.test("cluster_create --plan on an empty account lists every resource of the five stages and sends nothing",
  function()
    local m = mark()
    local p, err = dispatch.call("cluster_create", with(HP, { cluster_tag = "plan", plan = true,
      features = { training_operator = true } }), E.WHO)
    t.ok(p, json.encode(err))
    local k = kinds(p)
    for _, want in ipairs { "create ec2:vpc", "create ec2:nat-gateway", "create eks:cluster", "create iam:role",
      "create eks:addon", "create s3:bucket", "create ec2:subnet", "create sagemaker:cluster" } do
      t.ok(k[want], want .. " is planned: " .. json.encode(k))
    end
    local named = {}
    for _, e in ipairs(p.plan) do named[e.type .. " " .. e.name] = true end
    t.ok(named["eks:cluster hypd-plan"], "stage 1's cluster")
    t.ok(named["sagemaker:cluster hypd-plan-hp"], "stage 4's cluster")
    t.ok(named["iam:role hypd-plan-hyperpod-exec"], "the execution role")
    local pv, pvc = false, false
    for key in pairs(named) do
      pv = pv or key:match("persistentvolume s3%-pv") ~= nil
      pvc = pvc or key:match("persistentvolumeclaim .*s3%-claim") ~= nil
    end
    t.ok(pv and pvc, "stage 5's volume and claim: " .. json.encode(named))
    t.ok(p.create >= 25, "every resource: " .. p.create)
    local _, n = since(m)
    t.eq(n, 0, "no mutation")
  end)

t.test("a bad decision of any stage is refused by cluster_create before anything is made", function()
  local cases = {
    { with(HP, { instance_type = "ml.nope.xlarge" }), "instance_type" },
    { with(HP, { instance_type = "ml.p5.48xlarge" }), "availability_zone" },
    { with(HP, { instance_type = "ml.g5.xlarge", efa_only = true }), "efa_only" },
    { with(HP, { instance_type = "ml.p5.48xlarge", capacity_type = "training-plan",
      training_plan = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/hypd-p5-2x-14d" }), "training_plan" },
    { with(HP, { instance_count = 500 }), "instance_count" },
    { with(HP, { eks = { vpc_cidr = "10.1.0.0/16", public_subnet_cidrs = { "10.1.0.0/20", "10.1.0.0/20" },
      private_subnet_cidrs = { "10.1.32.0/20", "10.1.48.0/20" } } }), "public_subnet_cidrs" },
  }
  for i, c in ipairs(cases) do
    local m = mark()
    local acc, err = dispatch.call("cluster_create", with(c[1], { cluster_tag = "bad" .. i }), E.WHO)
    local v = acc and op.wait(acc.operation_id)
    local e = v and v.error or err
    t.ok(e and (e.code == "VALIDATION" or e.code == "CONFLICT"), c[2] .. ": " .. json.encode(e))
    t.like(json.encode(e), c[2])
    local counts, n = since(m)
    t.eq(n, 0, c[2] .. ": no mutation " .. json.encode(counts))
  end
end)

-- MCP, as an agent calls it
local session = mcp.session { caller = { name = "agent", scope = "admin", front = "mcp" } }
local rid = 0
local function mcp_call(name, args)
  rid = rid + 1
  local r = mcp.handle(session, { jsonrpc = "2.0", id = rid, method = "tools/call",
    params = { name = name, arguments = args } })
  assert(r.result, name .. ": " .. json.encode(r.error))
  t.ok(not r.result.isError, name .. ": " .. tostring(r.result.content and r.result.content[1].text))
  return r.result.structuredContent or json.decode(r.result.content[1].text)
end

-- follow(status_tool, args, done) -> the last answer: the agent asks with
-- wait_seconds until done(answer); the number of calls is counted
local function follow(status_tool, args, done)
  local calls, last = 0
  repeat
    calls = calls + 1
    last = mcp_call(status_tool, with(args, { wait_seconds = 300 }))
  until done(last) or calls > 200
  return last, calls
end

local function finished(v) return v.status and v.status ~= "running" end

t.test("an agent takes an empty account to an InService HyperPod cluster with S3 storage and the training " ..
  "operator through MCP tool calls only, following each stage with wait_seconds", function()
  local a = mcp_call("cluster_create_eks", { cluster_tag = "agent" })
  local v, n = follow("cluster_get_creation_status", { operation_id = a.operation_id }, finished)
  t.eq(v.status, "succeeded", json.encode(v.error))
  t.ok(n < 40, "followed in " .. n .. " calls")
  mcp_call("cluster_switch", { cluster = "hypd-agent" })
  a = mcp_call("cluster_configure_dependencies", {})
  v = follow("cluster_get_dependency_status", { operation_id = a.operation_id },
    function(x) return finished(x.operation or x) end)
  t.eq((v.operation or v).status, "succeeded", json.encode(v))
  a = mcp_call("hyperpod_create", HP)
  v, n = follow("hyperpod_get_creation_status", { operation_id = a.operation_id },
    function(x) return finished(x.operation or x) end)
  t.eq((v.operation or v).status, "succeeded", json.encode((v.operation or v).error))
  t.ok(n < 60, "followed in " .. n .. " calls")
  a = mcp_call("storage_create_s3", {})
  v = follow("storage_list", { operation_id = a.operation_id },
    function(x) return finished(x.operation or x) end)
  t.eq((v.operation or v).status, "succeeded", json.encode(v))
  a = mcp_call("hyperpod_update_advanced_features", { training_operator = true })
  mcp_call("hyperpod_get_advanced_features", { operation_id = a.operation_id, wait_seconds = 1 })
  local done = op.wait(a.operation_id)
  t.eq(done.status, "succeeded", json.encode(done.error))
  v = mcp_call("hyperpod_get_advanced_features", {})
  t.eq(v.features.training_operator.enabled, true, json.encode(v.features.training_operator))
  local hp = E.call("sagemaker", "DescribeCluster", { ClusterName = "hypd-agent-hp" })
  t.eq(hp.ClusterStatus, "InService")
end)

-- REST
local srv = assert(server.start { listen = "127.0.0.1:0", handler = serve.handle, max_body = 2 * rest.MAX_BODY })
local BASE = "http://127.0.0.1:" .. srv.port
local TOKEN = auth.create { name = "script", scope = "admin" }
local function post(path, body)
  local r = assert(http.request { method = "POST", url = BASE .. path, body = json.encode(body),
    headers = { ["content-type"] = "application/json", authorization = "Bearer " .. TOKEN } })
  return r.status, json.decode(r.body)
end

local pipeline_id
t.test("cluster_create through REST runs the five stages as child operations, the independent work started " ..
  "while EKS creates, each stage visible in cluster_get_creation_status", function()
  local status, acc = post("/api/v1/tools/cluster_create", with(HP, { cluster_tag = "rest",
    features = { training_operator = true } }))
  t.eq(status, 202, json.encode(acc))
  pipeline_id = acc.operation_id
  local v = op.wait(pipeline_id)
  t.eq(v.status, "succeeded", json.encode(v.error))
  local s = assert(dispatch.call("cluster_get_creation_status", { cluster_tag = "rest" }, E.WHO))
  t.eq(s.tool, "cluster_create")
  local tools = {}
  for _, c in ipairs(s.children or {}) do tools[c.tool] = c.status end
  for _, want in ipairs { "cluster_create_eks", "cluster_configure_dependencies", "hyperpod_create",
    "storage_create_s3", "hyperpod_update_advanced_features" } do
    t.eq(tools[want], "succeeded", want)
  end
  t.eq(s.aws.eks_status, "ACTIVE")
  t.eq(s.aws.hyperpod_status, "InService")
  -- the execution role and both buckets were made while EKS was still creating
  local eks_op
  for _, c in ipairs(s.children) do if c.tool == "cluster_create_eks" then eks_op = op.view(op.get(c.operation_id)) end end
  t.ok(eks_op and eks_op.finished_at, "stage 1 ran as a child")
  local made = {}
  for _, e in ipairs(require("hypd.store").events(0, 1000000) or {}) do
    local a = e.kind == "sandbox.audit" and e.data
    if a and not a.refused and (a.operation == "CreateRole" or a.operation == "CreateBucket") and
      a.target:match("^hypd%-rest%-") then
      for _, name in ipairs { "hypd-rest-hyperpod-exec", "hypd-rest-lifecycle", "hypd-rest-data" } do
        if a.target:sub(1, #name) == name then made[name] = a.at end
      end
    end
  end
  for _, name in ipairs { "hypd-rest-hyperpod-exec", "hypd-rest-lifecycle", "hypd-rest-data" } do
    t.ok(made[name] and made[name] < eks_op.finished_at, name .. " made while EKS was creating: " .. json.encode(made))
  end
end)

t.test("every stage re-run, and cluster_create again, sends no mutating AWS call", function()
  local m = mark()
  local v = op.wait(assert(dispatch.call("cluster_create", with(HP, { cluster_tag = "rest",
    features = { training_operator = true } }), E.WHO)).operation_id)
  t.eq(v.status, "succeeded", json.encode(v.error))
  for _, c in ipairs {
    { "cluster_create_eks", { cluster_tag = "agent" } },
    { "cluster_configure_dependencies", { cluster = "hypd-agent" } },
    { "hyperpod_create", with(HP, { cluster = "hypd-agent" }) },
    { "storage_create_s3", { cluster = "hypd-agent" } },
    { "hyperpod_update_advanced_features", { cluster = "hypd-agent", training_operator = true } },
  } do
    local acc, err = dispatch.call(c[1], c[2], E.WHO)
    t.ok(acc, c[1] .. ": " .. json.encode(err))
    local r = op.wait(acc.operation_id)
    t.eq(r.status, "succeeded", c[1] .. ": " .. json.encode(r.error))
  end
  local counts, n = since(m)
  t.eq(n, 0, "no mutation: " .. json.encode(counts))
end)


t.test("cluster_get_status with wait_seconds answers at once on a settled cluster, and as soon as a cluster at " ..
  "work changes, not at the end of the wait", function()
    local core = require "hypd.core"
    local before = core.now()
    local s = mcp_call("cluster_get_status", { cluster = "hypd-agent", wait_seconds = 300 })
    t.eq({ (s.waited or {}).ended, core.now() - before < 1 }, { "settled", true },
      "nothing at work and nothing passing: at once, saying so: " .. json.encode(s.waited))
    -- a scaling at work on the cluster: the answer comes at its first change
    local acc = assert(dispatch.call("hyperpod_scale_instance_group", { cluster = "hypd-agent", instance_group = "agent-ig",
      instance_count = 3 }, E.WHO))
    local ends, changes = {}, 0
    for i = 1, 20 do
      before = core.now()
      s = mcp_call("cluster_get_status", { cluster = "hypd-agent", wait_seconds = 300 })
      local waited, ended = core.now() - before, (s.waited or {}).ended
      ends[#ends + 1] = tostring(ended) .. "@" .. waited
      if i == 1 then t.eq(#s.operations, 1, "the scaling is in the answer: " .. json.encode(s.operations)) end
      if ended == "changed" then
        changes = changes + 1
        -- a change seen at the check that falls on the deadline is still a change
        t.ok(waited > 0 and waited <= 300, "a change is answered when it comes: " .. json.encode(ends))
      elseif ended == "timeout" then
        t.ok(waited >= 300, "a timeout only at its end: " .. json.encode(ends))
      else
        t.eq(ended, "settled", json.encode(ends))
        break
      end
    end
    t.ok(changes >= 1, "the scaling's changes came as answers, then it settled: " .. json.encode(ends))
    local v = op.wait(acc.operation_id)
    t.eq(v.status, "succeeded", json.encode(v.error))
  end)

t.test("the IAM policy hypd iam-policy makes for every tool lets the whole pipeline and its teardown pass when " ..
  "the sandbox enforces it", function()
  local policy = require "sandbox.policy"
  local doc = assert(require("hypd.iam_policy").document {})
  assert(policy.set(doc))
  t.cleanup(function() policy.set(nil) end)
  local _, denied = require("hypd.aws").try("ec2", "TerminateInstances", { InstanceIds = { "i-0123456789abcdef0" } },
    E.OPTS)
  t.eq(denied and denied.code, "UnauthorizedOperation", "the policy is enforced: what it does not allow is refused")
  local m = mark()
  local v = op.wait(assert(dispatch.call("cluster_create", with(HP, { cluster_tag = "iam",
    features = { training_operator = true, cert_manager = true, kuberay_operator = true, fsx_csi_driver = true,
      inference_operator = true, tiered_checkpointing = true, karpenter = true } }), E.WHO)).operation_id)
  t.eq(v.status, "succeeded", json.encode(v.error))
  local refused = {}
  for _, e in ipairs(require("hypd.store").events(m, 1000000) or {}) do
    if e.kind == "sandbox.audit" and e.data.refused then refused[#refused + 1] = e.data.action end
  end
  t.eq(refused, {}, "nothing was refused")
  -- operate: a bucket of the user's mounted, and unmounted; the driver's role is granted it, then not
  policy.set(nil)
  E.call("s3", "CreateBucket", { Bucket = "their-datasets", CreateBucketConfiguration = { LocationConstraint =
    "us-west-2" } })
  assert(policy.set(require("hypd.iam_policy").document { resources = { "arn:aws:s3:::their-datasets" } }))
  local driver = E.call("eks", "DescribeAddon", { clusterName = "hypd-iam", addonName = "aws-mountpoint-s3-csi-driver" })
    .addon.serviceAccountRoleArn:match("([^/]+)$")
  local function granted()
    return require("hypd.aws").try("iam", "GetRolePolicy", { RoleName = driver, PolicyName = "hypd-s3-their-datasets" },
      E.OPTS) ~= nil
  end
  v = op.wait(assert(dispatch.call("storage_create_s3", { cluster = "hypd-iam", bucket = "their-datasets",
    claim_name = "theirs" }, E.WHO)).operation_id)
  t.eq(v.status, "succeeded", json.encode(v.error))
  t.ok(granted(), "the driver's role is granted the user's bucket (its own policy names only hypd's data bucket)")
  v = op.wait(assert(dispatch.call("storage_delete", { cluster = "hypd-iam", claim_name = "theirs" },
    { name = "boss", scope = "admin", front = "test" })).operation_id)
  t.eq(v.status, "succeeded", json.encode(v.error))
  t.ok(not granted(), "and the grant goes with its last volume")
  -- and the teardown of everything it made, under the same policy
  m = mark()
  v = op.wait(assert(dispatch.call("cluster_delete", { cluster_tag = "iam", force = true },
    { name = "boss", scope = "admin", front = "test" })).operation_id)
  t.eq(v.status, "succeeded", json.encode(v.error))
  refused = {}
  for _, e in ipairs(require("hypd.store").events(m, 1000000) or {}) do
    if e.kind == "sandbox.audit" and e.data.refused then refused[#refused + 1] = e.data.action end
  end
  t.eq(refused, {}, "nothing was refused in the teardown")
  policy.set(nil)
  local left = E.call("ec2", "DescribeVpcs", { Filters = { { Name = "tag:hypd:cluster-tag", Values = { "iam" } } } })
  t.eq(#left.Vpcs, 0, "the VPC is gone")
  local _, gone = require("hypd.aws").try("sagemaker", "DescribeCluster", { ClusterName = "hypd-iam-hp" }, E.OPTS)
  t.eq(gone and gone.code, "ResourceNotFound", "the HyperPod cluster is gone")
  _, gone = require("hypd.aws").try("eks", "DescribeCluster", { name = "hypd-iam" }, E.OPTS)
  t.eq(gone and gone.code, "ResourceNotFoundException", "the EKS cluster is gone")
  _, gone = require("hypd.aws").try("iam", "GetRole", { RoleName = "hypd-iam-hyperpod-exec" }, E.OPTS)
  t.eq(gone and gone.code, "NoSuchEntity", "the execution role is gone")
end)

t.test("the sandbox served the whole pipeline on one port", function()
  t.ok(sandbox_srv.port > 0 and srv.port > 0) -- (these references keep the servers from being collected)
end)
