-- The AWS Load Balancer Controller as a dependency (issue 19, "Self-managed
-- inference gaps"), against the in-process sandbox under the virtual
-- clock, through the registry and hypd.tool.operations:
--   * without it, inference_deploy_container service=external and
--     inference_assign_pool_pod service=external warn with the real cause
--     (no controller runs) and the complete command that installs it, and
--     the Service gets no address however long one waits;
--   * cluster_configure_dependencies load_balancer_controller=true plans it
--     (its IRSA role, its objects) and installs it: the role trusting
--     exactly kube-system/aws-load-balancer-controller with the
--     controller's ELB permissions, the service account carrying it, the
--     webhook certificate issued by cert-manager, the Deployment ready;
--     cluster_get_dependency_status shows it present; a re-run writes
--     nothing;
--   * then the Service gets its NLB's hostname, and a new external deploy
--     is not warned.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
require("hypd.tool.loader").load()
local srv, OPTS = H.sandbox_here()
local FH = dofile("tests/lua/features_helpers.lua")
local call = FH.aws(OPTS)
local json, op = require "hypd.json", require "hypd.tool.operations"
local dispatch = require "hypd.tool.dispatch"
local task = require "hypd.task"
local sys = require "hypd.sys"
local ADMIN = { name = "admin-tester", scope = "admin", front = "test" }
local EKS = "lbc"
local K

local function run(name, args)
  args.cluster = EKS
  local acc, err = dispatch.call(name, args, ADMIN)
  if not acc then return nil, err end
  if not acc.operation_id then return acc end
  local v = op.wait(acc.operation_id)
  if v.status ~= "succeeded" then return nil, v.error end
  return v.result
end

local function deploy(name)
  return run("inference_deploy_container", { name = name, engine = "vllm", image = "vllm/vllm-openai:v0.8.5",
    instance_type = "ml.g5.12xlarge", gpus = 1, service = "external", storage_claim = "" })
end

local function hostname(name)
  local s = K:get("v1", "Service", name, { namespace = "default" })
  return ((((s or {}).status or {}).loadBalancer or {}).ingress or {})[1] and s.status.loadBalancer.ingress[1].hostname
end

local COMMAND = "hypd call cluster_configure_dependencies cluster=" .. EKS ..
  " region=us-west-2 load_balancer_controller=true"

t.test("an EKS cluster with two GPU nodes and its IAM OIDC provider", function()
  K = FH.gpu_cluster(call, EKS, EKS .. "-hp", 75, 2)
  assert(dispatch.call("cluster_import", { cluster = EKS }, ADMIN))
  t.ok(K:get("v1", "Namespace", "kube-system"), "the cluster answers")
end)

t.test("without the controller, an external deploy is warned with the cause and the command, and stays pending",
  function()
    local r, err = deploy("pub")
    t.ok(r, err and err.message)
    local said = json.encode(r and r.warnings or {})
    t.like(said, "no AWS Load Balancer Controller runs on EKS cluster " .. EKS)
    t.ok(said:find(COMMAND, 1, true), "the complete command: " .. said)
    t.eq(said:find("inference_operator", 1, true), nil, "no word of the inference operator")
    task.sleep(1800)
    t.eq(hostname("pub"), nil, "no address after 30 minutes: <pending>")
    -- a pool's model Service of type external: the same warning
    t.ok(run("inference_deploy_container", { name = "warm", engine = "vllm", image = "vllm/vllm-openai:v0.8.5",
      instance_type = "ml.g5.12xlarge", gpus = 1, replicas = 1, service = "pool", storage_claim = "" }), "a pool")
    local a, aerr = run("inference_assign_pool_pod", { pool = "warm", model = "chat", count = 1, service = "external" })
    t.ok(a, aerr and aerr.message)
    t.ok(json.encode(a and a.warnings or {}):find(COMMAND, 1, true), "inference_assign_pool_pod says it too")
  end)

t.test("a plan lists the controller's role and objects and sends nothing", function()
  local m = FH.mark()
  local out = assert(dispatch.call("cluster_configure_dependencies", { cluster = EKS, load_balancer_controller = true,
    plan = true }, ADMIN))
  local rows = {}
  for _, e in ipairs(out.plan) do rows[e.action .. " " .. e.type .. " " .. e.name] = true end
  for _, want in ipairs { "create iam:role hypd-lbc-lb-controller",
    "create iam:role-policy hypd-aws-load-balancer-controller on hypd-lbc-lb-controller",
    "create kubernetes:serviceaccount kube-system/aws-load-balancer-controller",
    "create kubernetes:certificate kube-system/aws-load-balancer-serving-cert",
    "create kubernetes:deployment kube-system/aws-load-balancer-controller" } do
    t.ok(rows[want], want .. " in " .. json.encode(out.plan))
  end
  local _, n = FH.since(m)
  t.eq(n, 0, "no AWS mutation")
end)

t.test("cluster_configure_dependencies load_balancer_controller=true installs it, with its IRSA role", function()
  local r, err = run("cluster_configure_dependencies", { load_balancer_controller = true })
  t.ok(r, json.encode(err))
  local role = call("iam", "GetRole", { RoleName = "hypd-lbc-lb-controller" }).Role
  local function doc(text)
    return json.decode((text:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end)))
  end
  local trust = doc(role.AssumeRolePolicyDocument)
  local cond = trust.Statement[1].Condition.StringEquals
  local sub
  for k, v in pairs(cond) do if k:match(":sub$") then sub = v end end
  t.eq(sub, "system:serviceaccount:kube-system:aws-load-balancer-controller",
    "trusts exactly the controller's service account")
  local pol = doc(call("iam", "GetRolePolicy", { RoleName = role.RoleName,
    PolicyName = "hypd-aws-load-balancer-controller" }).PolicyDocument)
  t.like(json.encode(pol), "elasticloadbalancing:CreateLoadBalancer", "the controller's ELB permissions")
  local sa = assert(K:get("v1", "ServiceAccount", "aws-load-balancer-controller", { namespace = "kube-system" }))
  t.eq(sa.metadata.annotations["eks.amazonaws.com/role-arn"], role.Arn)
  -- hypd does not wait for it (at stage 3 a new cluster has no node to run it yet): the test does
  local dep
  FH.wait(function()
    dep = K:get("apps/v1", "Deployment", "aws-load-balancer-controller", { namespace = "kube-system" })
    return dep and (dep.status or {}).readyReplicas == 2
  end, 600, 5)
  local tls = K:get("v1", "Secret", "aws-load-balancer-tls", { namespace = "kube-system" })
  t.eq(tls and tls.type, "kubernetes.io/tls", "cert-manager issued the webhook's certificate")
  t.like(tls and sys.b64decode(tls.data["tls.crt"]) or "", "BEGIN CERTIFICATE")
  t.eq((dep.status or {}).readyReplicas, 2, "the controller runs")
  t.like(table.concat(dep.spec.template.spec.containers[1].args, " "), "%-%-cluster%-name=" .. EKS)
  local st = assert(dispatch.call("cluster_get_dependency_status", { cluster = EKS }, ADMIN))
  local item
  for _, i in ipairs(st.items) do if i.item == "aws-load-balancer-controller" then item = i end end
  t.eq(item and item.state, "present", json.encode(item))
  local ritem
  for _, i in ipairs(st.items) do if i.item == "iam-role:lb-controller" then ritem = i end end
  t.eq({ ritem and ritem.state, ritem and ritem.arn }, { "present", role.Arn }, "its role is an item too")
  t.eq(st.configured, true, json.encode(st.counts))
  t.eq(st.load_balancer_controller, true)
  local m = FH.mark()
  r = run("cluster_configure_dependencies", { load_balancer_controller = true })
  t.ok(r, "again")
  local _, n = FH.since(m)
  t.eq(n, 0, "a re-run sends no AWS mutation")
  t.eq(#FH.k8s_writes(m), 0, "and no Kubernetes write")
  -- the role's policy deleted by hand: reported drifted, and the next call puts it back alone
  call("iam", "DeleteRolePolicy", { RoleName = role.RoleName, PolicyName = "hypd-aws-load-balancer-controller" })
  st = assert(dispatch.call("cluster_get_dependency_status", { cluster = EKS }, ADMIN))
  for _, i in ipairs(st.items) do if i.item == "iam-role:lb-controller" then ritem = i end end
  t.eq(ritem.state, "drifted")
  t.eq(ritem.differs and ritem.differs[1].field, "inline policy hypd-aws-load-balancer-controller")
  m = FH.mark()
  t.ok(run("cluster_configure_dependencies", { load_balancer_controller = true }), "again")
  local counts = FH.since(m)
  t.eq(counts, { ["iam PutRolePolicy"] = 1 }, "only the policy is put back")
end)

t.test("then the external Service gets its NLB's hostname, and a new external deploy is not warned", function()
  local got
  for _ = 1, 60 do
    got = hostname("pub")
    if got then break end
    task.sleep(5)
  end
  t.like(got or "", "^k8s%-default%-pub%-%x+%-%x+%.elb%.us%-west%-2%.amazonaws%.com$")
  local r = assert(deploy("pub2"))
  t.eq(json.encode(r.warnings or {}):find("Load Balancer Controller", 1, true), nil, json.encode(r.warnings))
end)

t.test("a controller already running under another name is kept: hypd adds neither a second one nor its role",
  function()
    local k2 = FH.gpu_cluster(call, "lbc2", "lbc2-hp", 76, 1)
    assert(dispatch.call("cluster_import", { cluster = "lbc2" }, ADMIN))
    local cl = require("sandbox.k8s").cluster("us-west-2", "lbc2")
    local helm = { ["app.kubernetes.io/managed-by"] = "Helm" }
    assert(cl:create(cl.reg:find("", "v1", "namespaces"), { metadata = { name = "ingress", labels = helm } }))
    assert(cl:create(cl.reg:find("apps", "v1", "deployments"), { metadata = { name = "alb", namespace = "ingress",
      labels = { ["app.kubernetes.io/managed-by"] = "Helm", ["app.kubernetes.io/name"] = "aws-load-balancer-controller" } },
      spec = { replicas = 1, selector = { matchLabels = { app = "alb" } },
        template = { metadata = { labels = { app = "alb" } }, spec = { containers = { { name = "c",
          image = "public.ecr.aws/eks/aws-load-balancer-controller:v2.12.0" } } } } } }))
    local acc = assert(dispatch.call("cluster_configure_dependencies", { cluster = "lbc2", load_balancer_controller = true },
      ADMIN))
    local v = op.wait(acc.operation_id)
    t.eq(v.status, "succeeded", json.encode(v.error))
    local action
    for _, i in ipairs(v.result.items) do if i.item == "aws-load-balancer-controller" then action = i.action end end
    t.eq(action, "kept")
    local _, err = require("hypd.aws").try("iam", "GetRole", { RoleName = "hypd-lbc2-lb-controller" }, OPTS)
    t.eq(err and err.code, "NoSuchEntity", "no role made for a controller hypd does not run")
    t.eq(k2:get("apps/v1", "Deployment", "aws-load-balancer-controller", { namespace = "kube-system" }), nil,
      "no second controller")
    -- that controller runs with no IAM role: an external deploy is told so, and its Service stays pending
    FH.wait(function()
      local d = k2:get("apps/v1", "Deployment", "alb", { namespace = "ingress" })
      return d and ((d.status or {}).readyReplicas or 0) > 0
    end, 600, 5)
    local acc2 = assert(dispatch.call("inference_deploy_container", { cluster = "lbc2", name = "pub3", engine = "vllm",
      image = "vllm/vllm-openai:v0.8.5", instance_type = "ml.g5.12xlarge", gpus = 1, service = "external",
      storage_claim = "" }, ADMIN))
    local r = op.wait(acc2.operation_id)
    t.eq(r.status, "succeeded", json.encode(r.error))
    local said = json.encode(r.result and r.result.warnings or {})
    t.like(said, "runs with no IAM role for its service account ingress/default")
    t.ok(said:find("cluster_configure_dependencies cluster=lbc2", 1, true), said)
    task.sleep(300)
    local svc = k2:get("v1", "Service", "pub3", { namespace = "default" })
    t.eq(((svc.status or {}).loadBalancer or {}).ingress, nil, "no NLB for a controller AWS refuses")
  end)

t.cleanup(function() srv:stop() end)

