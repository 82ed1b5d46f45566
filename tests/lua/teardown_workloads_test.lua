-- cluster_delete and the workloads in its way (issue 19): with an inference
-- deployment (inference_deploy_container, service=external: a LoadBalancer
-- Service, the S3 claim mounted) and a Deployment and a Job someone made
-- with kubectl mounting the S3 claim, the plan is not refused: it lists
-- each workload, why it is in the way and the call that removes it; the run
-- without force refuses naming them and deletes nothing; with force the
-- plan lists their deletion first and the run deletes them, then the rest
-- (an EKS node group with the tag before the EKS cluster), leaving nothing
-- with the tag.
local t = require "hypd.tap"
local json = require "hypd.json"
local op = require "hypd.tool.operations"
local dispatch = require "hypd.tool.dispatch"
local H = dofile("tests/lua/helpers.lua")
require("hypd.tool.loader").load()

H.sandbox_here()
local TD = dofile("tests/lua/teardown_helpers.lua")
local E = dofile("tests/lua/eks_helpers.lua")
local ADMIN = { name = "admin", scope = "admin", front = "test" }

local TAG, EKS = "twl", "hypd-twl"

local function with_claim(name, kind)
  local pod = { containers = { { name = "main", image = "busybox", command = { "sleep", "3600" },
    volumeMounts = { { name = "data", mountPath = "/data" } } } },
    volumes = { { name = "data", persistentVolumeClaim = { claimName = "s3-claim" } } } }
  if kind == "Job" then
    pod.restartPolicy = "Never"
    return { apiVersion = "batch/v1", kind = "Job", metadata = { name = name, namespace = "default" },
      spec = { template = { spec = pod } } }
  end
  return { apiVersion = "apps/v1", kind = "Deployment", metadata = { name = name, namespace = "default" },
    spec = { replicas = 1, selector = { matchLabels = { app = name } },
      template = { metadata = { labels = { app = name } }, spec = pod } } }
end

local function entry(p, typ, name)
  for _, e in ipairs(p.plan or {}) do if e.type == typ and e.name == name then return e end end
end

t.test("a cluster with S3 storage and workloads mounting its claim, one behind a LoadBalancer", function()
  TD.build(TAG)
  TD.run("inference_deploy_container", { cluster = EKS, name = "qwen", engine = "vllm",
    instance_type = "ml.m5.xlarge", gpus = 0, service = "external" })
  -- an EKS node group with the cluster's tag (EKS refuses to delete a cluster that has one)
  local c = E.call("eks", "DescribeCluster", { name = EKS }).cluster
  local trust = json.encode { Version = "2012-10-17", Statement = { { Effect = "Allow",
    Principal = { Service = "ec2.amazonaws.com" }, Action = "sts:AssumeRole" } } }
  local role = E.call("iam", "CreateRole", { RoleName = "hypd-twl-nodes", AssumeRolePolicyDocument = trust,
    Tags = { { Key = "hypd:cluster-tag", Value = TAG } } }).Role.Arn
  E.call("eks", "CreateNodegroup", { clusterName = EKS, nodegroupName = "cpu", nodeRole = role,
    subnets = c.resourcesVpcConfig.subnetIds, scalingConfig = { minSize = 1, maxSize = 2, desiredSize = 1 },
    tags = { ["hypd:cluster-tag"] = TAG } })
  while E.call("eks", "DescribeNodegroup", { clusterName = EKS, nodegroupName = "cpu" }).nodegroup.status ~=
    "ACTIVE" do require("hypd.task").sleep(15) end
  local conn = require("hypd.k8s").connect { cluster = EKS, region = "us-west-2" }
  assert(conn:create(with_claim("web", "Deployment")))
  assert(conn:create(with_claim("etl", "Job")))
  local ok = false
  for _ = 1, 120 do
    local pods = conn:list("v1", "Pod", { namespace = "default" }) or {}
    local names = {}
    for _, x in ipairs(pods) do names[#names + 1] = x.metadata.name end
    local s = table.concat(names, " ")
    ok = s:find("web%-") ~= nil and s:find("etl%-") ~= nil and s:find("qwen%-") ~= nil
    if ok then break end
    require("hypd.task").sleep(1)
  end
  t.ok(ok, "their pods exist")
end)

t.test("the plan is not refused: it lists each workload in the way, why, and the call that removes it", function()
  local m = E.mark()
  local p, err = dispatch.call("cluster_delete", { cluster_tag = TAG, plan = true }, ADMIN)
  t.ok(p, "the plan answers: " .. json.encode(err))
  local _, total = E.since(m)
  t.eq(total, 0, "no mutation")
  local dep = entry(p, "kubernetes:deployment", "default/web")
  t.eq(dep and dep.action, "keep", "the Deployment web is listed")
  t.like(dep and dep.why or "", "mounts claim default/s3%-claim")
  t.like(dep and dep.why or "", "kubectl delete deployment %-n default web", "with what removes it")
  local job = entry(p, "kubernetes:job", "default/etl")
  t.like(job and job.why or "", "hypd call job_delete cluster=hypd%-twl name=etl namespace=default")
  local inf = entry(p, "kubernetes:deployment", "default/qwen")
  t.like(inf and inf.why or "", "LoadBalancer", "the inference deployment: its load balancer")
  t.like(inf and inf.why or "", "hypd call inference_delete cluster=hypd%-twl name=qwen namespace=default")
  local claim = entry(p, "kubernetes:persistentvolumeclaim", "default/s3-claim")
  t.eq(claim and claim.action, "keep", "the claim stays while they mount it")
end)

t.test("without force the run refuses, naming each workload and its call, and deletes nothing", function()
  local m = E.mark()
  local acc = assert(dispatch.call("cluster_delete", { cluster_tag = TAG }, ADMIN))
  local v = op.wait(acc.operation_id)
  t.eq(v.status, "failed")
  t.eq(v.error and v.error.code, "CONFLICT")
  local msg = v.error and v.error.message or ""
  for _, want in ipairs { "Deployment default/web", "Job default/etl", "Deployment default/qwen",
    "kubectl delete deployment -n default web", "hypd call inference_delete cluster=hypd-twl name=qwen",
    "force = true" } do
    t.ok(msg:find(want, 1, true), "it names " .. want .. ": " .. msg)
  end
  local _, total = E.since(m)
  t.eq(total, 0, "nothing was deleted")
end)

t.test("with force the plan deletes them first, and the run does, then everything else", function()
  local p, err = dispatch.call("cluster_delete", { cluster_tag = TAG, force = true, plan = true }, ADMIN)
  t.ok(p, "the plan answers: " .. json.encode(err))
  local dep = entry(p, "kubernetes:deployment", "default/web")
  t.eq(dep and dep.action, "delete", "the Deployment is deleted first")
  t.like(dep and dep.why or "", "force = true deletes it first")
  t.eq((entry(p, "kubernetes:deployment", "default/qwen") or {}).action, "delete")
  t.eq((entry(p, "kubernetes:persistentvolumeclaim", "default/s3-claim") or {}).action, "delete",
    "then the claim (storage_delete)")
  t.eq(p.plan[1].type:match("^kubernetes:") and p.plan[1].action, "delete", "the workloads come first")
  t.eq((entry(p, "eks:nodegroup", EKS .. "/cpu") or {}).action, "delete", "the node group with the tag goes")
  local m = E.mark()
  local acc = assert(dispatch.call("cluster_delete", { cluster_tag = TAG, force = true }, ADMIN))
  local v = op.wait(acc.operation_id)
  t.eq(v.status, "succeeded", json.encode(v.error))
  local missing, extra = TD.compare(p, m)
  t.eq(missing, {}, "every AWS delete of the plan was sent")
  t.eq(extra, {}, "nothing was deleted that the plan did not list")
  t.eq(TD.tagged(TAG), {}, "nothing carries the tag")
  local notes = json.encode(E.notes_of(acc.operation_id))
  t.ok(notes:find("Deployment default/web deleted (it was in the way", 1, true), "it says what it removed: " ..
    notes:sub(1, 300))
end)
