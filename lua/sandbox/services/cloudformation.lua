-- The simulated AWS CloudFormation API (regional): stacks of the resource
-- types cloudformation/resources.lua makes (the management environment of
-- deploy/cloudformation/hypd.yaml: a security group, an IAM role and
-- instance profile, an S3 bucket and its policy, an EC2 instance).
-- CreateStack checks the template (cloudformation/template.lua), its
-- parameters and the IAM capabilities, then answers at once while the
-- transition "step" makes one resource a step, dependencies first, each
-- through the sandbox's own services with the creator's permissions, with
-- CREATE_IN_PROGRESS and CREATE_COMPLETE events, and resolves the Outputs.
-- A resource that fails is CREATE_FAILED with the service's message, and
-- the stack rolls back (deletes what it made, newest first) to
-- ROLLBACK_COMPLETE, or stays CREATE_FAILED with OnFailure DO_NOTHING.
-- DeleteStack deletes newest first (DeletionPolicy Retain: DELETE_SKIPPED)
-- to DELETE_COMPLETE. DescribeStacks names a live stack by name, any by id;
-- ListStacks also lists deleted ones, as CloudFormation does for 90 days.
local json = require "hypd.json"
local resources = require "sandbox.services.cloudformation.resources"
local template = require "sandbox.services.cloudformation.template"

local M = { scope = "regional", operations = {}, transitions = {} }
local ops = M.operations
local STEP = 1 -- simulated seconds between two steps of a stack

local function invoke(ctx, svc, op, input)
  return require("sandbox").invoke(ctx, svc, op, input)
end

-- public(s) -> the Stack as DescribeStacks shows it
local function public(s)
  local out = {}
  for k, v in pairs(s) do
    if k:sub(1, 1) ~= "_" then out[k] = v end
  end
  return out
end

-- find(ctx, name) -> the stack named (live ones by name, any by id), or nil
local function find(ctx, name)
  local live
  for _, s in ipairs(ctx.state:list("stack")) do
    if s.StackId == name then return s end
    if s.StackName == name and s.StackStatus ~= "DELETE_COMPLETE" then live = s end
  end
  return live
end

local function need(ctx, name)
  local s = name and find(ctx, name)
  if not s then ctx.error("ValidationError", "Stack with id " .. tostring(name) .. " does not exist", 400) end
  return s
end

-- event(ctx, s, logical, status [, reason]): one stack event (the stack's
-- own when logical is the stack's name)
local function event(ctx, s, logical, status, reason)
  local r = s._resources[logical]
  local own = logical == s.StackName and not r
  s._events[#s._events + 1] = {
    StackId = s.StackId, StackName = s.StackName, EventId = own and ctx.id("ev"):sub(4) or
      (logical .. "-" .. status .. "-" .. ctx.hex(8)),
    LogicalResourceId = logical, PhysicalResourceId = own and s.StackId or (r and r.physical) or "",
    ResourceType = own and "AWS::CloudFormation::Stack" or s._template.Resources[logical].Type,
    Timestamp = ctx.now(), ResourceStatus = status, ResourceStatusReason = reason,
  }
  if r then r.status, r.reason, r.at = status, reason, ctx.now() end
end

local function stack_status(ctx, s, status, reason)
  s.StackStatus, s.StackStatusReason = status, reason
  event(ctx, s, s.StackName, status, reason)
end

local function save_and_step(ctx, s, after)
  ctx.state:put("stack", s.StackId, s)
  ctx:later(after or STEP, "step", { stack = s.StackId })
end

function ops.CreateStack(ctx, input)
  local name = input.StackName
  if type(name) ~= "string" or not name:match("^%a[%w-]*$") or #name > 128 then
    ctx.error("ValidationError", "1 validation error detected: Value '" .. tostring(name) .. "' at 'stackName' " ..
      "failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z][-a-zA-Z0-9]*", 400)
  end
  if find(ctx, name) then ctx.error("AlreadyExistsException", "Stack [" .. name .. "] already exists", 400) end
  if input.TemplateURL then ctx.error("ValidationError", "The hypd sandbox takes a TemplateBody, not a TemplateURL") end
  local tpl = template.parse(ctx, input.TemplateBody)
  local unknown = {}
  for logical, r in pairs(tpl.Resources) do
    if not resources[r.Type] then unknown[#unknown + 1] = r.Type .. " (" .. logical .. ")" end
  end
  if #unknown > 0 then
    table.sort(unknown)
    ctx.error("ValidationError", "Template format error: the hypd sandbox does not create these resource types: " ..
      table.concat(unknown, ", "))
  end
  local order = template.order(ctx, tpl)
  local cap = template.capability(tpl)
  if cap then
    local has = {}
    for _, c in ipairs(input.Capabilities or {}) do has[c] = true end
    if not has.CAPABILITY_NAMED_IAM and (cap == "CAPABILITY_NAMED_IAM" or not has.CAPABILITY_IAM) then
      ctx.error("InsufficientCapabilitiesException", "Requires capabilities : [" .. cap .. "]", 400)
    end
  end
  local values, listed = template.parameters(ctx, tpl, input.Parameters, invoke)
  local id = string.format("arn:aws:cloudformation:%s:%s:stack/%s/%s-%s-%s-%s-%s", ctx.region, ctx.account, name,
    ctx.hex(8), ctx.hex(4), ctx.hex(4), ctx.hex(4), ctx.hex(12))
  local s = {
    StackId = id, StackName = name, Description = tpl.Description, Parameters = listed,
    CreationTime = ctx.now(), StackStatus = "CREATE_IN_PROGRESS", StackStatusReason = "User Initiated",
    Capabilities = input.Capabilities, Tags = input.Tags or json.array(), DisableRollback = input.DisableRollback == true,
    EnableTerminationProtection = input.EnableTerminationProtection == true, NotificationARNs = json.array(),
    DriftInformation = { StackDriftStatus = "NOT_CHECKED" },
    _template = tpl, _params = values, _order = order, _cursor = 0, _phase = "create", _resources = {},
    _events = {}, _principal = ctx.principal,
    _on_failure = input.OnFailure or (input.DisableRollback and "DO_NOTHING" or "ROLLBACK"),
  }
  event(ctx, s, name, "CREATE_IN_PROGRESS", "User Initiated")
  ctx.target = name
  save_and_step(ctx, s)
  return { StackId = id }
end

-- env(ctx, s) -> what template.resolve reads for stack s
local function env(ctx, s)
  local res = {}
  for logical, r in pairs(s._resources) do res[logical] = { physical = r.physical, attrs = r.attrs } end
  local zones = json.array()
  for _, z in ipairs(ctx:view("ec2"):list("zone")) do zones[#zones + 1] = z.ZoneName end
  return { params = s._params, resources = res, zones = zones, pseudo = {
    ["AWS::Region"] = ctx.region, ["AWS::AccountId"] = ctx.account, ["AWS::StackName"] = s.StackName,
    ["AWS::StackId"] = s.StackId, ["AWS::Partition"] = "aws", ["AWS::URLSuffix"] = "amazonaws.com",
    ["AWS::NotificationARNs"] = json.array() } }
end

-- failed(ctx, s, logical, why): the resource failed to create; the stack
-- rolls back, or stops there with OnFailure DO_NOTHING
local function failed(ctx, s, logical, why)
  event(ctx, s, logical, "CREATE_FAILED", why)
  local reason = "The following resource(s) failed to create: [" .. logical .. "]. "
  if s._on_failure == "DO_NOTHING" then
    stack_status(ctx, s, "CREATE_FAILED", reason)
    ctx.state:put("stack", s.StackId, s)
    return
  end
  stack_status(ctx, s, "ROLLBACK_IN_PROGRESS", reason .. "Rollback requested by user.")
  s._phase, s._queue = "rollback", {}
  for i = s._cursor, 1, -1 do
    local l = s._order[i]
    if s._resources[l] and s._resources[l].physical then s._queue[#s._queue + 1] = l end
  end
  save_and_step(ctx, s)
end

local function create_next(ctx, s)
  local i = s._cursor + 1
  if i > #s._order then
    local outs = json.array()
    for key, o in pairs(s._template.Outputs or {}) do
      local v, why = template.resolve(o.Value, env(ctx, s))
      if v == nil then
        stack_status(ctx, s, "ROLLBACK_IN_PROGRESS", "Output " .. key .. ": " .. tostring(why))
        s._phase, s._queue = "rollback", {}
        for j = #s._order, 1, -1 do s._queue[#s._queue + 1] = s._order[j] end
        return save_and_step(ctx, s)
      end
      outs[#outs + 1] = { OutputKey = key, OutputValue = tostring(v), Description = o.Description }
    end
    table.sort(outs, function(a, b) return a.OutputKey < b.OutputKey end)
    s.Outputs = outs
    stack_status(ctx, s, "CREATE_COMPLETE")
    ctx.state:put("stack", s.StackId, s)
    return
  end
  local logical = s._order[i]
  local decl = s._template.Resources[logical]
  s._cursor = i
  s._resources[logical] = { type = decl.Type }
  event(ctx, s, logical, "CREATE_IN_PROGRESS")
  local props, why = template.resolve(decl.Properties or json.object(), env(ctx, s))
  if props == nil then return failed(ctx, s, logical, why) end
  local ok, physical, attrs, wait = pcall(resources[decl.Type].create, ctx, props,
    { logical = logical, stack = s.StackName })
  if not ok then
    if type(physical) ~= "table" or not physical.why then error(physical, 0) end
    return failed(ctx, s, logical, physical.why)
  end
  local r = s._resources[logical]
  r.physical, r.attrs = physical, attrs
  event(ctx, s, logical, "CREATE_IN_PROGRESS", "Resource creation Initiated")
  s._pending = logical
  save_and_step(ctx, s, wait)
end

local function delete_next(ctx, s)
  local logical = table.remove(s._queue, 1)
  if not logical then
    if s._phase == "rollback" and s._on_failure ~= "DELETE" then
      stack_status(ctx, s, "ROLLBACK_COMPLETE")
    else
      stack_status(ctx, s, "DELETE_COMPLETE")
      s.DeletionTime = ctx.now()
    end
    ctx.state:put("stack", s.StackId, s)
    return
  end
  local r = s._resources[logical]
  local decl = s._template.Resources[logical]
  if s._phase == "delete" and decl.DeletionPolicy == "Retain" then
    event(ctx, s, logical, "DELETE_SKIPPED")
    return save_and_step(ctx, s)
  end
  event(ctx, s, logical, "DELETE_IN_PROGRESS")
  local ok, wait = pcall(resources[decl.Type].delete, ctx, { physical = r.physical, attrs = r.attrs })
  if not ok then
    if type(wait) ~= "table" or not wait.why then error(wait, 0) end
    event(ctx, s, logical, "DELETE_FAILED", wait.why)
    stack_status(ctx, s, s._phase == "rollback" and "ROLLBACK_FAILED" or "DELETE_FAILED",
      "The following resource(s) failed to delete: [" .. logical .. "]. ")
    ctx.state:put("stack", s.StackId, s)
    return
  end
  s._pending = logical
  save_and_step(ctx, s, wait)
end

-- step{stack}: finishes the resource in progress, then starts the next one
function M.transitions.step(ctx, args)
  local s = ctx.state:get("stack", args.stack)
  if not s then return end
  ctx.principal = s._principal or ctx.principal
  if s._pending then
    event(ctx, s, s._pending, s._phase == "create" and "CREATE_COMPLETE" or "DELETE_COMPLETE")
    s._pending = nil
  end
  if s._phase == "create" then return create_next(ctx, s) end
  return delete_next(ctx, s)
end

function ops.DeleteStack(ctx, input)
  local s = find(ctx, input.StackName)
  -- a stack that does not exist (or is deleted) deletes without error
  if not s or s.StackStatus == "DELETE_COMPLETE" or s.StackStatus == "DELETE_IN_PROGRESS" then return {} end
  if s.EnableTerminationProtection then
    ctx.error("ValidationError", "Stack [" .. s.StackName .. "] cannot be deleted while TerminationProtection is " ..
      "enabled", 400)
  end
  if s.StackStatus:match("_IN_PROGRESS$") then
    ctx.error("ValidationError", "Stack [" .. s.StackName .. "] is in " .. s.StackStatus .. " state and can not " ..
      "be deleted", 400)
  end
  stack_status(ctx, s, "DELETE_IN_PROGRESS", "User Initiated")
  s._phase, s._queue = "delete", {}
  for i = #s._order, 1, -1 do
    local l = s._order[i]
    local r = s._resources[l]
    if r and r.physical and r.status ~= "DELETE_COMPLETE" then s._queue[#s._queue + 1] = l end
  end
  ctx.target = s.StackName
  save_and_step(ctx, s)
  return {}
end

function ops.ListStacks(ctx, input)
  local out = json.array()
  local wanted = input.StackStatusFilter
  for _, s in ipairs(ctx.state:list("stack")) do
    local keep = not wanted or #wanted == 0
    for _, st in ipairs(wanted or {}) do keep = keep or st == s.StackStatus end
    if keep then
      out[#out + 1] = { StackId = s.StackId, StackName = s.StackName, TemplateDescription = s.Description,
        CreationTime = s.CreationTime, DeletionTime = s.DeletionTime, StackStatus = s.StackStatus,
        StackStatusReason = s.StackStatusReason, DriftInformation = { StackDriftStatus = "NOT_CHECKED" } }
    end
  end
  return { StackSummaries = out }
end

function ops.DescribeStacks(ctx, input)
  local name = input.StackName
  if name == nil or name == "" then
    local out = json.array()
    for _, s in ipairs(ctx.state:list("stack")) do
      if s.StackStatus ~= "DELETE_COMPLETE" then out[#out + 1] = public(s) end
    end
    return { Stacks = out }
  end
  return { Stacks = { public(need(ctx, name)) } }
end

function ops.DescribeStackEvents(ctx, input)
  local s = need(ctx, input.StackName)
  local out = json.array()
  for i = #s._events, 1, -1 do out[#out + 1] = s._events[i] end
  return { StackEvents = out }
end

-- the stack's resources as DescribeStackResources and ListStackResources show them
local function stack_resources(s, summary)
  local out = json.array()
  for _, l in ipairs(s._order) do
    local r = s._resources[l]
    if r then
      out[#out + 1] = { StackName = not summary and s.StackName or nil, StackId = not summary and s.StackId or nil,
        LogicalResourceId = l, PhysicalResourceId = r.physical, ResourceType = r.type,
        [summary and "LastUpdatedTimestamp" or "Timestamp"] = r.at, ResourceStatus = r.status,
        ResourceStatusReason = r.reason, DriftInformation = { StackResourceDriftStatus = "NOT_CHECKED" } }
    end
  end
  return out
end

function ops.DescribeStackResources(ctx, input)
  local s = need(ctx, input.StackName)
  local out = json.array()
  for _, r in ipairs(stack_resources(s)) do
    if not input.LogicalResourceId or input.LogicalResourceId == r.LogicalResourceId then out[#out + 1] = r end
  end
  return { StackResources = out }
end

function ops.ListStackResources(ctx, input)
  return { StackResourceSummaries = stack_resources(need(ctx, input.StackName), true) }
end

return M
