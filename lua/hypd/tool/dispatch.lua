-- hypd.tool.dispatch: a call to a tool, the one entry every front end (REST,
-- MCP, /ws, the command line) and hypd.tools.call use. It sits above the
-- registry and the operations:
--
--   dispatch.call(name, args, caller) -> result | nil, err: the scope
--     (registry.allowed: a plan needs only read), the arguments (registry.validate), then the
--     work: a staged tool's plan or operation (hypd.tool.operations), a
--     read tool's or a quick mutation's run(ctx, params) under its guard;
--     a quick mutation that succeeds is a resource.changed event
--     {resource = "tool", tool, cluster} (hypd.tool.operations.changed)
--   dispatch.hooks: fn(name, def, result, err) after every call (metrics
--     observe calls this way)
--
-- caller = { name, scope = "read"|"operate"|"admin", front = "rest"|"mcp"|"cli"|... }.
local ctx = require "hypd.tool.ctx"
local errors = require "hypd.errors"
local guard = require "hypd.tool.guard"
local json = require "hypd.json"
local operations = require "hypd.tool.operations"
local registry = require "hypd.tool.registry"
local statelock = require "hypd.statelock"
local store = require "hypd.store"

local M = {}

M.hooks = {}

local function as_error(e)
  if errors.is(e) then return e end
  if type(e) == "table" and e.code then return setmetatable(e, errors.mt) end
  return errors.new("INTERNAL", tostring(e))
end

-- invoke(def, params, caller) -> result | nil, err: the call itself, after
-- the checks (a staged tool: its operation, or its plan)
local function invoke(def, params, caller)
  local plan = def.steps and params.plan
  if def.steps then params.plan = nil end
  if plan then return operations.plan(def, params, caller) end
  if def.kind ~= "read" then -- only the state directory's owner mutates (hypd.statelock)
    local held, lerr = statelock.check(def.name)
    if not held then return nil, lerr end
  end
  if def.steps then return operations.start(def, params, caller) end
  local c = ctx.new { tool = def, params = params, caller = caller, progress = caller and caller.progress }
  local okr, result = pcall(guard.with, guard.new { tool = def, caller = caller }, def.run, c, params)
  if not okr then return nil, as_error(result) end
  if def.status_tool and type(result) == "table" and not json.is_array(result) and result.status_tool == nil then
    result.status_tool = def.status_tool -- what to call to see what it did
  end
  if def.kind ~= "read" and def.audit ~= false then
    store.event("audit", nil, { tool = def.name, caller = caller and caller.name,
      front = caller and caller.front, params = registry.public(def, params) })
  end
  if def.kind ~= "read" then
    -- what a quick mutation changed no operation reports: a resource.changed
    -- event (the /ws topic state), so the lists a browser shows read again
    operations.changed("tool", { tool = def.name, cluster = type(params.cluster) == "string" and params.cluster or nil })
  end
  return result
end

-- call(name, args, caller) -> result | nil, err. The result is shaped by
-- the tool's output schema (empty lists are [], not {}), so every front
-- end sends the same JSON.
function M.call(name, args, caller)
  local def = registry.get(name)
  local result, err
  if not def then
    result, err = errors.fail("NOT_FOUND", "no tool named '" .. errors.echo(name, 64) .. "' (tool list: hypd tools)",
      { fields = { { field = "name", rule = "unknown", message = "no such tool" } } })
  else
    local ok, params
    -- a plan (plan = true to a staged tool) changes nothing: a read scope may ask for one
    ok, err = registry.allowed(def, caller, def.steps ~= nil and type(args) == "table" and args.plan == true)
    if ok then params, err = registry.validate(def, args) end
    if params then
      local planning = def.steps and params.plan
      result, err = invoke(def, params, caller)
      if result == nil and not err then result = json.object() end
      if result ~= nil then
        result = registry.shape(result, def.steps and (planning and registry.PLAN_RESULT or registry.ACCEPTED) or
          registry.output_schema(def))
      end
    end
  end
  for _, hook in ipairs(M.hooks) do pcall(hook, name, def, result, err) end
  return result, err
end

return M
