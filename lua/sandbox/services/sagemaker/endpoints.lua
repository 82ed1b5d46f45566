-- SageMaker endpoints as the HyperPod inference operator registers them
-- (an InferenceEndpointConfig's spec.endpointName, a JumpStartModel's
-- spec.sageMakerEndpoint.name): the operator, not a client, creates them,
-- so there is no CreateEndpoint here; sandbox.k8s.controllers.inference
-- calls register/deregister. DescribeEndpoint, ListEndpoints and
-- DescribeEndpointConfig answer them. Records: "endpoint" (id EndpointName),
-- "endpoint_config" (id EndpointConfigName).
-- SageMaker Runtime's InvokeEndpoint is sandbox.services.sagemaker-runtime.
-- Not simulated: DeleteEndpoint by a client, endpoints outside HyperPod.
local D = require "sandbox.services.eks.deps"
local json = require "hypd.json"

local M = { operations = {}, transitions = {} }
local ops = M.operations

local function source_id(src)
  return type(src) == "table" and table.concat({ tostring(src.cluster), tostring(src.kind), tostring(src.namespace),
    tostring(src.name) }, "/") or nil
end

-- register(ctx, {name, model, instance_type, replicas, ready, image, source})
-- -> the endpoint record (created Creating, InService once ready; changed
-- only where it differs) | nil, message when another source registered it.
-- source = {kind, namespace, name, cluster}: the object that registers it
-- (SageMaker Runtime sends its requests to that object's pods)
function M.register(ctx, o)
  local now = math.floor(ctx.now())
  local cfg_name = o.name .. "-config"
  local e = ctx.state:get("endpoint", o.name)
  if e and source_id(e.source) ~= source_id(o.source) then
    return nil, "Cannot create already existing endpoint \"" .. e.EndpointArn .. "\"."
  end
  local status = o.ready and "InService" or "Creating"
  local variant = { VariantName = "AllTraffic", CurrentWeight = 1.0, DesiredWeight = 1.0,
    CurrentInstanceCount = o.ready_replicas or 0, DesiredInstanceCount = o.replicas or 1,
    DeployedImages = json.array { { SpecifiedImage = o.image, ResolvedImage = o.image, ResolutionTime = now } } }
  if not e then
    e = { EndpointName = o.name, EndpointArn = ctx:arn("endpoint/" .. o.name:lower(), "sagemaker"),
      EndpointConfigName = cfg_name, CreationTime = now, LastModifiedTime = now, source = o.source }
    ctx.state:put("endpoint_config", cfg_name, { EndpointConfigName = cfg_name,
      EndpointConfigArn = ctx:arn("endpoint-config/" .. cfg_name:lower(), "sagemaker"), CreationTime = now,
      ProductionVariants = json.array { { VariantName = "AllTraffic", ModelName = o.model,
        InitialInstanceCount = o.replicas or 1, InstanceType = o.instance_type, InitialVariantWeight = 1.0 } },
      EnableNetworkIsolation = false })
  end
  local pv = (e.ProductionVariants or {})[1]
  local changed = e.EndpointStatus ~= status or not pv or pv.CurrentInstanceCount ~= variant.CurrentInstanceCount
    or pv.DesiredInstanceCount ~= variant.DesiredInstanceCount
  if changed then
    e.EndpointStatus, e.LastModifiedTime = status, now
    variant.VariantStatus = not o.ready and json.array { { Status = "Creating", StartTime = e.CreationTime,
      StatusMessage = "The HyperPod inference operator is deploying the model." } } or json.array()
    e.ProductionVariants = json.array { variant }
    ctx.state:put("endpoint", o.name, e)
  end
  return e
end

-- deregister(ctx, name): the endpoint and its configuration go
function M.deregister(ctx, name)
  local e = ctx.state:get("endpoint", name)
  if not e then return end
  ctx.state:delete("endpoint_config", e.EndpointConfigName)
  ctx.state:delete("endpoint", name)
end

-- deregister_source(ctx, source): every endpoint that source registered goes
function M.deregister_source(ctx, src)
  local want = source_id(src)
  for _, e in ipairs(ctx.state:list("endpoint")) do
    if source_id(e.source) == want then M.deregister(ctx, e.EndpointName) end
  end
end

local function public(e)
  local out = D.copy(e)
  out.source = nil
  return out
end

function ops.DescribeEndpoint(ctx, input)
  local e = ctx.state:get("endpoint", tostring(input.EndpointName))
  if not e then
    ctx.error("ValidationException", "Could not find endpoint \"" .. tostring(input.EndpointName) .. "\".")
  end
  return public(e)
end

function ops.DescribeEndpointConfig(ctx, input)
  local c = ctx.state:get("endpoint_config", tostring(input.EndpointConfigName))
  if not c then
    ctx.error("ValidationException", "Could not find endpoint configuration \"" ..
      tostring(input.EndpointConfigName) .. "\".")
  end
  return D.copy(c)
end

function ops.ListEndpoints(ctx, input)
  local all = {}
  local needle = input.NameContains and tostring(input.NameContains):lower()
  for _, e in ipairs(ctx.state:list("endpoint")) do
    if (not needle or e.EndpointName:lower():find(needle, 1, true))
      and (not input.StatusEquals or e.EndpointStatus == input.StatusEquals) then
      all[#all + 1] = { EndpointName = e.EndpointName, EndpointArn = e.EndpointArn, CreationTime = e.CreationTime,
        LastModifiedTime = e.LastModifiedTime, EndpointStatus = e.EndpointStatus }
    end
  end
  local by = input.SortBy == "Name" and "EndpointName" or input.SortBy == "Status" and "EndpointStatus" or "CreationTime"
  local desc = input.SortOrder ~= "Ascending"
  table.sort(all, function(a, b)
    local x, y = a[by], b[by]
    if x == y then x, y = a.EndpointName, b.EndpointName end
    if desc then return x > y end
    return x < y
  end)
  local page, nxt = D.page(ctx, all, input.MaxResults, input.NextToken, 100, "ValidationException")
  return { Endpoints = page, NextToken = nxt }
end

return M
