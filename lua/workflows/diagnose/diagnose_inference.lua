-- diagnose_inference: why an inference endpoint does not serve, from what
-- the cluster says of it: the InferenceEndpointConfig's or JumpStartModel's
-- state and conditions (or hypd's container / pool / router Deployment),
-- the Deployment's available replicas, its pods (image pulls, crash loops,
-- OOM kills, Pending for GPUs, readiness probes failing), the Service and
-- its Endpoints (ready addresses), the load balancer or Ingress in front
-- of it, a router's workers, Warning events and the nodes. Read-only: what would change
-- something is a suggested call (diagnose._findings).
local P = require "_params"
local F = require "diagnose._findings"
local WL = require "diagnose._workloads"
local I = require "_inference"
local hp = require "_hyperpod"

local function inspect(s, d)
  return WL.list(
    WL.step("inspect", "inference_get", s, { name = d.name, namespace = d.namespace },
      "replicas, pods, Service and events now"),
    WL.step("inspect", "job_get_logs", s, { kind = "inference", name = d.name, namespace = d.namespace, tail = 200 },
      "the model servers' last lines"))
end

local with = WL.with

-- object(r, d, steps): the operator's state of a managed or JumpStart endpoint
local function object(r, d, steps)
  local o = d.object
  if o.kind ~= "InferenceEndpointConfig" and o.kind ~= "JumpStartModel" then return end
  local st = o.status or {}
  local src = o.kind .. "/" .. d.name
  local state = st.state
  if state == "DeploymentFailed" then
    local c = WL.cond(o, "DeploymentFailed") or {}
    r:add { severity = "critical", code = "ENDPOINT_FAILED", subject = o.kind .. " " .. d.name,
      summary = "the inference operator could not deploy the endpoint", evidence = {
        F.evidence(src .. " status.state", state),
        F.evidence(src .. " condition DeploymentFailed", tostring(c.reason) .. ": " .. tostring(c.message),
          c.lastTransitionTime) },
      explanation = "The HyperPod inference operator gave up on the endpoint for the reason quoted (a model or " ..
        "version not in the hub, an instance type the model does not support, a gated model whose EULA is " ..
        "not accepted, or replicas not available within maxDeployTimeInSeconds).", next = steps }
  elseif state ~= "DeploymentComplete" then
    local c = WL.cond(o, "DeploymentInProgress") or {}
    r:add { severity = "warning", code = "ENDPOINT_DEPLOYING", subject = o.kind .. " " .. d.name,
      summary = "the endpoint is not deployed yet", evidence = {
        F.evidence(src .. " status.state", tostring(state or "(none)")),
        F.evidence(src .. " condition DeploymentInProgress", tostring(c.message or "(none)"), c.lastTransitionTime) },
      explanation = "The operator is still bringing the replicas up; the pod findings say what holds them.",
      next = steps }
  end
  local sm = (st.endpoints or {}).sagemaker
  if sm and sm.state == "Failed" then
    r:add { severity = "critical", code = "SAGEMAKER_ENDPOINT_FAILED", subject = o.kind .. " " .. d.name,
      summary = "the SageMaker endpoint registration failed",
      evidence = { F.evidence(src .. " status.endpoints.sagemaker", sm) },
      explanation = "The operator could not register the endpoint in SageMaker (the endpoint name is taken, " ..
        "or the operator's role may not create it).", next = steps }
  end
  r:checked("endpoint object", src .. ": " .. tostring(state or "no state"))
end

-- deployment(r, d, s, steps, pods): the Deployment's available replicas
local function deployment(r, d, s, steps, pods)
  local dep = d.deployment
  if not dep then
    r:add { severity = "critical", code = "DEPLOYMENT_MISSING", subject = d.object.kind .. " " .. d.name,
      summary = "no Deployment runs the endpoint's model servers",
      evidence = { F.evidence("Deployment (owned by " .. d.object.kind .. "/" .. d.name .. ")", "not found") },
      explanation = "The inference operator has not made the Deployment (it failed before, or it is not " ..
        "running: the add-on amazon-sagemaker-hyperpod-inference).", next = steps }
    r:checked("deployment", "none")
    return
  end
  local desired, _ = I.replicas(d)
  local st = dep.status or {}
  local avail = math.tointeger(st.availableReplicas) or 0
  local src = "Deployment/" .. dep.metadata.name
  local ev = { F.evidence(src .. " status", string.format("availableReplicas %d of replicas %d (ready %d)", avail,
    math.tointeger((dep.spec or {}).replicas) or desired, math.tointeger(st.readyReplicas) or 0)) }
  for _, t in ipairs { "Available", "Progressing", "ReplicaFailure" } do
    local c = WL.cond(dep, t)
    if c and ((t ~= "ReplicaFailure" and c.status == "False") or (t == "ReplicaFailure" and c.status == "True")) then
      ev[#ev + 1] = F.evidence(src .. " condition " .. t, string.format("%s %s: %s", c.status, tostring(c.reason),
        tostring(c.message)), c.lastTransitionTime)
    end
  end
  local want = math.tointeger((dep.spec or {}).replicas) or 1
  if want == 0 then
    r:add { severity = "warning", code = "SCALED_TO_ZERO", subject = src, summary = "the endpoint has no replica",
      evidence = ev, explanation = "The Deployment is scaled to 0 replicas (by hand or by its autoscaler): " ..
        "nothing serves until it scales up.", next = with(steps, WL.list(WL.step("fix", "inference_scale", s,
        { name = d.name, namespace = d.namespace, replicas = 1 }, "one replica serves again"))) }
  elseif avail == 0 then
    r:add { severity = "critical", code = "DEPLOYMENT_UNAVAILABLE", subject = src,
      summary = "no replica of the endpoint is available", evidence = ev,
      explanation = "None of the model server pods is available: the pod findings say why.", next = steps }
  elseif avail < want then
    r:add { severity = "warning", code = "DEPLOYMENT_DEGRADED", subject = src,
      summary = string.format("%d of %d replicas available", avail, want), evidence = ev,
      explanation = "Some replicas serve; the others are held for the reasons the pod findings give.", next = steps }
  end
  r:checked("deployment", string.format("%s: %d of %d available, %d pods", src, avail, want, #pods))
end

-- endpoints(conn, ns, name) -> ready, not ready addresses (pod names or IPs)
local function addresses(conn, ns, name)
  local ep = conn:get("v1", "Endpoints", name, { namespace = ns })
  local ready, notready = {}, {}
  for _, sub in ipairs((ep or {}).subsets or {}) do
    for _, a in ipairs(sub.addresses or {}) do ready[#ready + 1] = (a.targetRef or {}).name or a.ip end
    for _, a in ipairs(sub.notReadyAddresses or {}) do notready[#notready + 1] = (a.targetRef or {}).name or a.ip end
  end
  return ready, notready, ep
end

-- services(r, conn, d, steps): the Service(s) and their Endpoints, the load
-- balancer or Ingress in front; returns {"Service/name" = true}
local function services(r, conn, d, steps)
  local mine = {}
  local list = d.kind == "pool" and d.services or { d.service }
  if d.kind ~= "pool" and not d.service then
    r:add { severity = "critical", code = "SERVICE_MISSING", subject = "endpoint " .. d.name,
      summary = "no Service sends traffic to the model servers",
      evidence = { F.evidence("Service (selecting the pods of " .. d.name .. ")", "none in namespace " .. d.namespace) },
      explanation = "Without a Service whose selector matches the pods' labels nothing inside the cluster can " ..
        "reach them by name.", next = steps }
    r:checked("service", "none")
    return mine
  end
  local ingresses = conn:list("networking.k8s.io/v1", "Ingress", { namespace = d.namespace }) or {}
  for _, svc in ipairs(list) do
    local name = svc.metadata.name
    mine["Service/" .. name] = true
    local ready, notready = addresses(conn, d.namespace, name)
    if #ready == 0 then
      r:add { severity = "critical", code = "NO_READY_ENDPOINTS", subject = "Service " .. name,
        summary = "the Service has no ready address: calls to it fail", evidence = {
          F.evidence("Endpoints/" .. name .. " subsets", string.format("0 ready addresses, %d not ready%s", #notready,
            #notready > 0 and " (" .. table.concat(notready, ", ") .. ")" or "")) },
        explanation = "Kubernetes only sends a Service's traffic to pods that are Ready; none is, so every call " ..
          "is refused or times out.", next = steps }
    end
    local sp = svc.spec or {}
    if sp.type == "LoadBalancer" then
      local ing = ((svc.status or {}).loadBalancer or {}).ingress
      if not ing or #ing == 0 then
        r:add { severity = "warning", code = "LOAD_BALANCER_PENDING", subject = "Service " .. name,
          summary = "the load balancer has no address yet", evidence = {
            F.evidence("Service/" .. name .. " status.loadBalancer", "no ingress address") },
          explanation = "The AWS Load Balancer Controller has not provisioned the NLB (it is not installed, its " ..
            "role lacks permissions, or the subnets lack the elb tags); its events on the Service say which.",
          next = steps }
      end
    end
    for _, ing in ipairs(ingresses) do
      local uses = false
      for _, rule in ipairs((ing.spec or {}).rules or {}) do
        for _, path in ipairs(((rule.http or {}).paths) or {}) do
          uses = uses or (((path.backend or {}).service or {}).name == name)
        end
      end
      uses = uses or ((((ing.spec or {}).defaultBackend or {}).service or {}).name == name)
      if uses then
        mine["Ingress/" .. ing.metadata.name] = true
        local addr = ((ing.status or {}).loadBalancer or {}).ingress
        if not addr or #addr == 0 then
          r:add { severity = "warning", code = "INGRESS_PENDING", subject = "Ingress " .. ing.metadata.name,
            summary = "the Ingress in front of the endpoint has no address yet", evidence = {
              F.evidence("Ingress/" .. ing.metadata.name .. " status.loadBalancer", "no ingress address") },
            explanation = "No ingress controller (the AWS Load Balancer Controller for an ALB) has given the " ..
              "Ingress an address; its events say why.", next = steps }
        end
      end
    end
    r:checked("service " .. name, string.format("%s, %d ready address(es)", tostring(sp.type or "ClusterIP"), #ready))
  end
  return mine
end

-- probes(r, events, steps): a readiness probe failing, as the kubelet's Unhealthy events say
local function probes(r, events, steps)
  local ev = {}
  for _, e in ipairs(events) do
    if e.reason == "Unhealthy" and tostring(e.message):find("Readiness probe failed", 1, true) and
      #ev < WL.MAX_EVIDENCE then ev[#ev + 1] = WL.event_evidence(e) end
  end
  if #ev == 0 then return end
  r:add { severity = "critical", code = "READINESS_PROBE_FAILING", subject = "the model servers' readiness probe",
    summary = "the readiness probe fails: the pods run but take no traffic", evidence = ev,
    explanation = "The model server does not answer its health path with 2xx/3xx: it is still loading the model " ..
      "(a large model takes minutes: raise initialDelaySeconds), it failed to load it (its logs say why), or the " ..
      "probe asks the wrong port or path.", next = steps }
end

-- router(r, conn, d, steps): a router (inference_deploy_router) with no
-- worker ready to take its requests: the workers it discovers by label
-- (--selector k=v ...) or the worker Services it is given (--worker-urls)
local function router(r, conn, d, steps)
  if d.kind ~= "router" or not d.deployment then return end
  local c = ((((d.deployment.spec or {}).template or {}).spec or {}).containers or {})[1] or {}
  local words = {}
  for _, list in ipairs { c.command or {}, c.args or {} } do
    for _, w in ipairs(list) do words[#words + 1] = tostring(w) end
  end
  local mode, selector, urls = nil, {}, {}
  for _, w in ipairs(words) do
    if w:sub(1, 2) == "--" then mode = w
    elseif mode == "--selector" then
      local k, v = w:match("^([^=]+)=(.*)$")
      if k then selector[k] = v end
    elseif mode == "--worker-urls" then urls[#urls + 1] = w end
  end
  local ready, total = 0, 0
  local what
  if next(selector) then
    local parts = {}
    for k, v in pairs(selector) do parts[#parts + 1] = k .. "=" .. v end
    table.sort(parts)
    what = "pods labelled " .. table.concat(parts, ",")
    for _, pod in ipairs(conn:list("v1", "Pod", { namespace = d.namespace, labels = selector }) or {}) do
      total = total + 1
      if I.ready(pod) then ready = ready + 1 end
    end
  elseif #urls > 0 then
    local names = {}
    for _, u in ipairs(urls) do
      local svc, ns = u:match("^https?://([^.:/]+)%.([^.:/]+)%.svc")
      svc, ns = svc or u:match("^https?://([^.:/]+)"), ns or d.namespace
      if svc then
        names[#names + 1] = svc
        local up, down = addresses(conn, ns, svc)
        total, ready = total + #up + #down, ready + #up
      end
    end
    what = "the worker Services " .. table.concat(names, ", ")
  else
    return
  end
  if ready == 0 then
    r:add { severity = "critical", code = "ROUTER_NO_WORKERS", subject = "router " .. d.name,
      summary = "the router has no ready worker to send requests to", evidence = {
        F.evidence("Deployment/" .. d.deployment.metadata.name .. " args", table.concat(words, " ")),
        F.evidence(what, string.format("%d ready of %d", ready, total)) },
      explanation = "The router answers, but every request it takes fails: none of its workers is ready. Run " ..
        "diagnose_inference on the worker deployments.", next = steps }
  end
  r:checked("router workers", string.format("%s: %d ready of %d", what, ready, total))
end

-- replicaset_objects(conn, d) -> {"ReplicaSet/name" = true} of the Deployment's
local function replicasets(conn, d, into)
  if not d.deployment then return into end
  into["Deployment/" .. d.deployment.metadata.name] = true
  for _, rs in ipairs(conn:list("apps/v1", "ReplicaSet", { namespace = d.namespace }) or {}) do
    for _, o in ipairs(rs.metadata.ownerReferences or {}) do
      if o.uid == d.deployment.metadata.uid then into["ReplicaSet/" .. rs.metadata.name] = true end
    end
  end
  return into
end

return tool {
  name = "diagnose_inference",
  summary = "Why an inference endpoint does not serve: findings with evidence and suggested calls",
  description = "Read-only diagnosis of an inference endpoint (InferenceEndpointConfig, JumpStartModel, or a " ..
    "hypd container, pool or router deployment): the operator's state, available replicas, pods (image " ..
    "pulls, crash loops, Pending for GPUs, readiness), the Service's ready endpoints, the load balancer, " ..
    "Warning events and nodes. Call it when calls to a model fail; it runs nothing: each finding suggests the " ..
    "exact calls, inspect first.",
  kind = "read",
  aws = { "eks:DescribeCluster" },
  k8s = { "get", "list" },
  params = P.form({ "name" },
    { "namespace", "cluster", "region" },
    { name = P.with(I.NAME_PARAM, { description = "the endpoint: InferenceEndpointConfig, JumpStartModel or " ..
      "hypd deployment name (inference_list)" }), namespace = I.NS_PARAM, cluster = P.cluster, region = P.region },
      { name = "Endpoint" }),
  result = F.RESULT,
  run = function(ctx, p)
    local e = hp.eks(ctx, p)
    local conn = ctx:k8s(e.name)
    local s = WL.scope(e)
    local d = I.find(conn, p.name, p.namespace)
    if not d then
      hypd.errors.refuse("name", "exists", string.format("no inference endpoint %s/%s on cluster %s (an " ..
        "InferenceEndpointConfig, JumpStartModel or hypd deployment; inference_list lists them)", p.namespace,
        p.name, e.name), { code = "NOT_FOUND", field_message = "name: no inference endpoint " .. p.name })
    end
    local r = F.new()
    local steps = inspect(s, d)
    local pods = d.pods or {}
    object(r, d, steps)
    deployment(r, d, s, steps, pods)
    local fix, more = WL.scale_fix(conn, s, pods)
    local desired = I.replicas(d)
    local pending = 0
    for _, pod in ipairs(pods) do if I.unschedulable(pod) then pending = pending + 1 end end
    if pending > 0 and desired - pending >= 1 and hypd.tools.exists("inference_scale") then
      fix.POD_PENDING_GPU = fix.POD_PENDING_GPU or {}
      table.insert(fix.POD_PENDING_GPU, 1, WL.step("fix", "inference_scale", s, { name = d.name,
        namespace = d.namespace, replicas = desired - pending }, "as many replicas as the free GPUs hold"))
    end
    WL.pods(r, pods, { inspect = steps, fix = fix, evidence = more, readiness_severity = "critical" })
    local objects = services(r, conn, d, steps)
    router(r, conn, d, steps)
    objects[d.object.kind .. "/" .. d.name] = true
    local events = WL.events(conn, p.namespace, replicasets(conn, d, objects), pods)
    probes(r, events, steps)
    WL.nodes(r, conn, pods, s)
    WL.other_events(r, events, {}, { inspect = steps })
    return r:result()
  end,
}
