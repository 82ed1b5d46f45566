-- hypd.tool.ctx: the context a tool's code gets, `ctx` in run(ctx, params) and
-- in each step's run(ctx). The same methods for every kind of tool; a
-- staged tool's operation (hypd.tool.operations) adds persistence: ctx.state is saved,
-- ctx:phase() is recorded, cancellation is seen.
--
--   ctx.params, ctx.tool (its definition), ctx.caller, ctx.plan (true when
--   the call only plans), ctx.region, ctx.state (scratch; saved for a staged
--   tool), ctx.op_id (a staged tool's operation)
--   ctx:call(service, operation, params) -> result (raises), ctx:try(...) ->
--     result | nil, err: hypd.aws in the tool's region (ctx:aws_region(),
--     ctx:aws_opts() for hypd.aws.pages and .all)
--   ctx:cluster([p]) -> {name, region, record, active}: the EKS cluster the
--     call works on (its cluster parameter, else the active cluster), or
--     NOT_FOUND
--   ctx:k8s([cluster]) -> a Kubernetes connection (ctx:cluster() unless
--     cluster is given)
--   ctx:phase(text), ctx:progress(text), ctx:sleep(seconds), ctx:check_cancel()
--   ctx:ensure{...}, ctx:absent{...}, ctx:poll{...}: the workflow kit (hypd.tool.kit)
local aws = require "hypd.aws"
local clusters = require "hypd.clusters"
local k8s = require "hypd.k8s"
local kit = require "hypd.tool.kit"
local readonly = require "hypd._readonly"
local task = require "hypd.task"

local M = {}

-- the class every tool's ctx shares: ctx.__index reaches only a read-only
-- view of it (hypd._readonly), so no tool changes another's methods
local Ctx = readonly.class {}
M.Ctx = Ctx
kit.install(Ctx)

-- shown(tool, caller) -> what ctx.tool and ctx.caller give: read-only views
-- of the registry's definition and of the caller (the guard reads both: a
-- tool that could change them could change its kind, actions or scope)
function M.shown(tool, caller)
  return tool and readonly.view(tool, "ctx.tool", true), caller and readonly.view(caller, "ctx.caller", true)
end

-- new{tool, params, caller, plan, progress} -> a context for a call that is
-- not an operation (a read tool, a quick mutation, a plan)
function M.new(o)
  local tool, caller = M.shown(o.tool, o.caller)
  return setmetatable({ tool = tool, params = o.params or {}, caller = caller, plan = o.plan or false,
    state = o.state or {}, notes = o.progress, region = o.region, planned = o.planned }, Ctx)
end

-- aws_region() -> the region the tool works in: its region parameter, else
-- the configured one (resolved once)
function Ctx:aws_region()
  if not self.region then self.region = aws.region { region = self.params and self.params.region } end
  return self.region
end

function Ctx:aws_opts() return { region = self:aws_region() } end

function Ctx:call(service, operation, params) return aws.call(service, operation, params or {}, self:aws_opts()) end
function Ctx:try(service, operation, params) return aws.try(service, operation, params or {}, self:aws_opts()) end

-- cluster([p]) -> {name, region, record, active}: the EKS cluster a call
-- with the parameters p (default: the tool's) works on: p.cluster, else the
-- active cluster (active = true), else NOT_FOUND (hypd.clusters.target);
-- region: p.region, else the active cluster's when it is that one, else
-- the tool's (ctx:aws_region()); record: what hypd recorded of it ({} when
-- nothing)
function Ctx:cluster(p)
  local c, err = clusters.target(p or self.params or {})
  if not c then error(err, 0) end
  c.region = c.region or self:aws_region()
  c.record = clusters.get(c.name, c.region) or {}
  return c
end

-- k8s([cluster]) -> connection, cached per cluster for the context's life
function Ctx:k8s(cluster)
  local name, region = cluster, nil
  if not name then
    local c = self:cluster()
    name, region = c.name, c.region
  end
  self.k8s_conns = self.k8s_conns or {}
  local c = self.k8s_conns[name]
  if not c then
    c = k8s.connect { cluster = name, region = region or self.region }
    self.k8s_conns[name] = c
  end
  return c
end

function Ctx:phase(text) self.current_phase = text end

function Ctx:progress(text)
  if self.notes then self.notes(tostring(text)) end
end

-- (a call that is not an operation: nothing to cancel or to save)
function Ctx.check_cancel() end
function Ctx.save() end

function Ctx:sleep(seconds)
  self:check_cancel()
  task.sleep(seconds)
  self:check_cancel()
end

return M
