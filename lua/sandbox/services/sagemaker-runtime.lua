-- The simulated Amazon SageMaker Runtime (regional): InvokeEndpoint on the
-- endpoints the HyperPod inference operator registered
-- (sandbox.services.sagemaker.endpoints). A request goes to a Ready pod of
-- the registering object's Deployment (round robin) on its model server's
-- port: POST /invocations for a JumpStartModel (the SageMaker container
-- contract), POST /<spec.invocationEndpoint> for an InferenceEndpointConfig.
-- The pod is dialled as in-cluster clients do (sandbox.k8s.proxy dial_ip: its program answers);
-- when none answers, or it answers an error, the call fails with
-- ModelError (424) as SageMaker does, naming the status and message the
-- container gave. It signs as "sagemaker"; sandbox._route tells it apart
-- by its /endpoints/ paths. Not simulated: InvokeEndpointAsync and
-- InvokeEndpointWithResponseStream.
local ctl_ = require "sandbox.k8s.controllers._ctl"
local proxy = require "sandbox.k8s.proxy"

local M = { scope = "regional", operations = {}, transitions = {} }

local next_pod = {} -- endpoint name -> how many requests it has had

local function model_error(ctx, e, status, message)
  ctx.error("ModelError", string.format("Received server error (%d) from primary with message \"%s\". See " ..
    "https://%s.console.aws.amazon.com/cloudwatch/home?region=%s#logEventViewer:group=/aws/sagemaker/Endpoints/%s " ..
    "in account %s for more information.", status, message, ctx.region, ctx.region, e.EndpointName, ctx.account),
    424, { OriginalStatusCode = status, OriginalMessage = message,
      LogStreamArn = string.format("arn:aws:logs:%s:%s:log-group:/aws/sagemaker/Endpoints/%s", ctx.region,
        ctx.account, e.EndpointName) })
end

-- target(ctx, e) -> ctl, pod, container, port, path of a Ready model server pod
local function target(ctx, e)
  local src = e.source or {}
  local ctl = src.cluster and ctl_.find(ctx.region, src.cluster)
  if not ctl then return nil end
  local r = ctl:r("inference.sagemaker.aws.amazon.com", "v1",
    src.kind == "JumpStartModel" and "jumpstartmodels" or "inferenceendpointconfigs")
  local obj = r and ctl.cl:get(r, src.namespace, src.name)
  if not obj then return nil end
  local path = "/invocations"
  if src.kind ~= "JumpStartModel" then
    path = "/" .. tostring((obj.spec or {}).invocationEndpoint or "invoke"):gsub("^/+", "")
  end
  local ready = {}
  for _, p in ipairs(ctl.cl:list(ctl:r("", "v1", "pods"), src.namespace)) do
    if (p.metadata.labels or {}).app == src.name and ctl_.owner(p, "ReplicaSet") and ctl_.pod_ready(p) then
      ready[#ready + 1] = p
    end
  end
  if #ready == 0 then return ctl end
  table.sort(ready, function(a, b) return a.metadata.name < b.metadata.name end)
  local n = (next_pod[e.EndpointName] or 0) + 1
  next_pod[e.EndpointName] = n
  local pod = ready[(n - 1) % #ready + 1]
  local c = (pod.spec.containers or {})[1]
  local port = c and c.ports and c.ports[1] and c.ports[1].containerPort
  return ctl, pod, c, port, path
end

function M.operations.InvokeEndpoint(ctx, input)
  local e = ctx:view("sagemaker"):get("endpoint", tostring(input.EndpointName))
  if not e then
    ctx.error("ValidationError", "Endpoint " .. tostring(input.EndpointName) .. " of account " .. ctx.account ..
      " not found.", 400)
  end
  if e.EndpointStatus ~= "InService" then
    ctx.error("ValidationError", "Endpoint " .. e.EndpointName .. " is not in service (" ..
      tostring(e.EndpointStatus) .. ").", 400)
  end
  local ctl, pod, _, port, path = target(ctx, e)
  if not pod then model_error(ctx, e, 503, "no model server replica is ready") end
  local headers = { ["content-type"] = input.ContentType or "application/json", accept = input.Accept }
  -- the operator's router dials the pod as any client in the cluster would
  local ok, res, why = pcall(proxy.dial_ip, ctl.cl, pod.status.podIP, port, { method = "POST", path = path,
    query = "", headers = headers, body = input.Body or "", port = port })
  if not ok then model_error(ctx, e, 500, "the model server failed: " .. tostring(res)) end
  if type(res) ~= "table" then
    model_error(ctx, e, 502, "pod " .. pod.metadata.name .. ": " .. tostring(why or "nothing answers on port " ..
      tostring(port)))
  end
  local status = tonumber(res.status) or 200
  if status >= 400 then model_error(ctx, e, status, tostring(res.body or "")) end
  local rh = res.headers or {}
  return { Body = res.body or "", ContentType = rh["content-type"] or rh["Content-Type"] or "application/json",
    InvokedProductionVariant = "AllTraffic" }
end

return M
