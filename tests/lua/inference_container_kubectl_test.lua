-- The model pool and the Pending deploy judged by kubectl: the inference
-- tools called in this process against a `hypd sandbox --virtual-clock`
-- process's EKS cluster (two ml.g5.12xlarge nodes, 4 GPUs each); kubectl
-- then sees the Endpoints of the model's Service list exactly the assigned
-- pods, follow a release, and the scheduler's FailedScheduling event of a
-- deploy asking for more GPUs than a node has.
local t = require "hypd.tap"
local json = require "hypd.json"
local op = require "hypd.tool.operations"
local dispatch = require "hypd.tool.dispatch"
local S = dofile("tests/lua/sandbox_k8s_helpers.lua").new()
local kubectl = S.kubectl
t.cleanup(S.cleanup)
require("hypd.tool.loader").load()

local ADMIN = { name = "inference-kubectl", scope = "admin", front = "test" }
local EKS = "infk-eks"

local function run(name, args)
  args.cluster = EKS
  local acc, err = dispatch.call(name, args, ADMIN)
  if not acc then return nil, err end
  if not acc.operation_id then return acc end
  local v = op.wait(acc.operation_id)
  if v.status ~= "succeeded" then return nil, v.error end
  return v.result
end

-- addresses(svc) -> the sorted pod names kubectl's Endpoints list as ready
local function addresses(svc)
  local ep = S.get_json("get endpoints " .. svc)
  local out = {}
  for _, s in ipairs((ep or {}).subsets or {}) do
    for _, a in ipairs(s.addresses or {}) do out[#out + 1] = a.targetRef.name end
  end
  table.sort(out)
  return out
end

t.test("a sandbox EKS cluster with two GPU nodes", function()
  S.start(EKS, "infk-hp")
  if not S.ready then return end
  t.ok(S.until_ok(function()
    local nodes = S.get_json("get nodes")
    return nodes and #nodes.items == 2
  end), "two nodes")
end)

local assigned

t.test("kubectl get endpoints: the model's Service lists exactly the two assigned workers, then one", function()
  if not S.ready then return S.skip() end
  local r, err = run("inference_deploy_container", { name = "warm", engine = "vllm", instance_type = "ml.g5.12xlarge",
    gpus = 1, replicas = 3, service = "pool", storage_claim = "" })
  t.ok(r, err and err.message)
  if not r then return end
  t.eq(r.phase, "Ready")
  local rc, out = kubectl("get pods -l business=unassigned,deployment-type=model-pool -o name")
  t.eq(rc, 0)
  t.eq(select(2, out:gsub("pod/", "")), 3, "three warm workers: " .. out)
  local a
  a, err = run("inference_assign_pool_pod", { pool = "warm", model = "qwen", count = 2 })
  t.ok(a, err and err.message)
  if not a then return end
  assigned = { a.pods[1].name, a.pods[2].name }
  table.sort(assigned)
  t.ok(S.until_ok(function() return #addresses("qwen") == 2 end), "kubectl sees two addresses")
  t.eq(addresses("qwen"), assigned, "exactly the assigned pods")
  rc, out = kubectl("get endpoints qwen")
  t.eq(rc, 0)
  t.like(out, "qwen%s+[%d.]+:8000,[%d.]+:8000", "the table: two addresses on the pool's port")
  rc, out = kubectl("get pods -l business=qwen -o name")
  t.eq({ rc, select(2, out:gsub("pod/", "")) }, { 0, 2 })
  r, err = run("inference_release_pool_pod", { pods = { assigned[1] } })
  t.ok(r, err and err.message)
  t.ok(S.until_ok(function() return #addresses("qwen") == 1 end), "kubectl sees the release")
  t.eq(addresses("qwen"), { assigned[2] })
  local svc = S.get_json("get service qwen")
  t.eq(svc and svc.spec.selector, { business = "qwen" })
  -- the command line's door to the same read
  local crc, cout, cerr = S.kc.sh(S.H.hypd .. " call inference_get name=warm cluster=" .. EKS .. " tail_lines:=0")
  t.eq(crc, 0, cerr)
  local g = json.decode(cout)
  t.eq({ g and g.kind, g and g.unassigned, g and g.models[1].name, g and g.models[1].endpoints },
    { "pool", 2, "qwen", { assigned[2] } }, "hypd call inference_get")
end)

t.test("kubectl get events: the Pending deploy's FailedScheduling is the scheduler's message", function()
  if not S.ready then return S.skip() end
  local r, err = run("inference_deploy_container", { name = "huge", engine = "vllm", instance_type = "ml.g5.12xlarge",
    gpus = 8, storage_claim = "" })
  t.ok(r, err and err.message)
  if not r then return end
  t.eq(r.phase, "Pending")
  local want = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. preemption: 0/2 nodes are available: " ..
    "2 No preemption victims found for incoming pod."
  local ev = S.until_ok(function()
    local l = S.get_json("get events --field-selector reason=FailedScheduling")
    for _, e in ipairs((l or {}).items or {}) do
      if e.involvedObject.name:match("^huge%-") then return e end
    end
  end)
  t.eq(ev and ev.message, want)
  local g = assert(dispatch.call("inference_get", { name = "huge", cluster = EKS }, ADMIN))
  t.eq(g.pending_reason, want, "inference_get says the same")
  local rc, out = kubectl("get deployment huge -o jsonpath={.spec.template.spec.containers[0].resources.limits}")
  t.eq(rc, 0)
  t.eq(json.decode(out), { ["nvidia.com/gpu"] = "8" })
  t.ok(run("inference_delete", { name = "huge" }), "deleted")
  t.ok(run("inference_delete", { name = "warm", force = true }), "the pool deleted with force")
  rc, out = kubectl("get deployments,services -l app.kubernetes.io/managed-by=hypd -o name")
  t.eq({ rc, out }, { 0, "" }, "nothing of hypd's left")
end)

t.test("kubectl get services: an external deploy's NLB stays <pending> without the Load Balancer Controller", function()
  if not S.ready then return t.skip("no sandbox process") end
  t.ok(run("inference_deploy_container", { name = "pub", engine = "vllm", image = "vllm/vllm-openai:v0.8.5",
    instance_type = "ml.g5.12xlarge", gpus = 1, service = "external", storage_claim = "" }), "deployed")
  local rc, out = kubectl("get service pub --no-headers")
  t.eq(rc, 0)
  t.like(out, "^pub%s+LoadBalancer%s+10%.100%.[%d.]+%s+<pending>%s+8000:%d+/TCP", "EXTERNAL-IP <pending>")
  t.ok(run("inference_delete", { name = "pub" }), "deleted")
end)

t.test("kubectl get services: once cluster_configure_dependencies installs the Load Balancer Controller, the " ..
  "external deploy's EXTERNAL-IP is its NLB's hostname", function()
  if not S.ready then return S.skip() end
  local r, err = run("inference_deploy_container", { name = "pub", engine = "vllm", image = "vllm/vllm-openai:v0.8.5",
    instance_type = "ml.g5.12xlarge", gpus = 1, service = "external", storage_claim = "" })
  t.ok(r, err and err.message)
  t.like(json.encode(r and r.warnings or {}), "load_balancer_controller=true", "the warning gives the command")
  local d, derr = run("cluster_configure_dependencies", { load_balancer_controller = true })
  t.ok(d, json.encode(derr))
  local rc, out = kubectl("get deployment aws-load-balancer-controller -n kube-system --no-headers")
  t.eq(rc, 0, "kubectl sees the controller's Deployment")
  local line = S.until_ok(function()
    local _, o = kubectl("get service pub --no-headers")
    return o:find("elb.us-west-2.amazonaws.com", 1, true) and o
  end, 300)
  t.like(line or out, "^pub%s+LoadBalancer%s+10%.100%.[%d.]+%s+k8s%-default%-pub%-%x+%-%x+%.elb%.us%-west%-2%." ..
    "amazonaws%.com%s+8000:%d+/TCP", "EXTERNAL-IP is the NLB's hostname")
  -- boto3 sees the same NLB in Elastic Load Balancing v2, tagged as the controller tags it
  local host = line and line:match("(k8s%-%S+%.amazonaws%.com)")
  local py = "import boto3, json; c = boto3.client('elbv2'); " ..
    "lbs = c.describe_load_balancers()['LoadBalancers']; " ..
    "tags = c.describe_tags(ResourceArns=[l['LoadBalancerArn'] for l in lbs])['TagDescriptions'] if lbs else []; " ..
    "print(json.dumps({'lbs': [{k: l[k] for k in ('DNSName', 'Type', 'Scheme', 'LoadBalancerName')} for l in lbs], " ..
    "'tags': [{t['Key']: t['Value'] for t in d['Tags']} for d in tags]}))"
  local prc, pout, perr = S.kc.sh("python3 -c " .. S.H.quote(py))
  t.eq(prc, 0, perr)
  local seen = json.decode(pout or "") or {}
  local lb = (seen.lbs or {})[1] or {}
  t.eq({ lb.DNSName, lb.Type, lb.Scheme }, { host, "network", "internal" }, "DescribeLoadBalancers: " .. tostring(pout))
  t.eq(((seen.tags or {})[1] or {})["service.k8s.aws/stack"], "default/pub")
  t.eq(((seen.tags or {})[1] or {})["elbv2.k8s.aws/cluster"], EKS)
  t.ok(run("inference_delete", { name = "pub" }), "deleted")
  S.until_ok(function()
    local _, o = S.kc.sh("python3 -c " .. S.H.quote("import boto3; " ..
      "print(len(boto3.client('elbv2').describe_load_balancers()['LoadBalancers']))"))
    return o and o:match("^0") ~= nil
  end, 100)
  local _, n = S.kc.sh("python3 -c " .. S.H.quote("import boto3; " ..
    "print(len(boto3.client('elbv2').describe_load_balancers()['LoadBalancers']))"))
  t.like(n or "", "^0", "the NLB went with the Service")
end)

t.test("kubectl get services: a plain LoadBalancer Service shows its Classic Load Balancer's hostname", function()
  if not S.ready then return t.skip("no sandbox process") end
  local f = S.dir .. "/clb.json"
  local fh = assert(io.open(f, "w"))
  fh:write(json.encode { apiVersion = "v1", kind = "Service", metadata = { name = "clb", namespace = "default" },
    spec = { type = "LoadBalancer", selector = { app = "clb" }, ports = { { port = 80, targetPort = 8080 } } } })
  fh:close()
  local rc, out, err = kubectl("apply -f " .. f)
  t.eq(rc, 0, err)
  local line = S.until_ok(function()
    local _, o = kubectl("get service clb --no-headers")
    return o:find("elb.amazonaws.com", 1, true) and o
  end, 200)
  t.like(line or out, "^clb%s+LoadBalancer%s+10%.100%.[%d.]+%s+a%x+%-%d+%.us%-west%-2%.elb%.amazonaws%.com%s+80:%d+/TCP",
    "EXTERNAL-IP is the hostname")
  rc = kubectl("delete service clb")
  t.eq(rc, 0)
end)
