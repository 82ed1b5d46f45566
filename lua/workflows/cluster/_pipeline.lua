-- cluster/_pipeline: what cluster_create's steps call: stages 1 to 5 run
-- as child operations of the tools that own them (the same workflows a
-- caller runs one by one), with the work that needs no earlier stage
-- started early. A crash resumes at the step it was in; a child operation
-- that step started is found again and waited for (hypd.tools.call), never
-- started twice. In plan mode every child plans, and their plans are one
-- plan.
local Names = require "_names"
local create = require "_hyperpod_setup"
local s3 = require "_s3"

local M = {}

M.EKS_KEYS = { "kubernetes_version", "vpc_cidr", "public_subnet_cidrs", "private_subnet_cidrs" }
M.HYPERPOD_KEYS = { "instance_type", "instance_count", "instance_group", "node_recovery" }
for k in pairs(create.GROUP_PARAMS) do M.HYPERPOD_KEYS[#M.HYPERPOD_KEYS + 1] = k end
table.sort(M.HYPERPOD_KEYS)

-- the AWS actions of the early work, run in cluster_create's own operation
M.AWS = {}
for _, list in ipairs { create.AWS_ROLE, create.AWS_LIFECYCLE, s3.AWS } do
  for _, a in ipairs(list) do M.AWS[#M.AWS + 1] = a end
end

local function pick(p, keys, into)
  for _, k in ipairs(keys) do if p[k] ~= nil then into[k] = p[k] end end
  return into
end

-- the parameters of each stage's tool, from cluster_create's
function M.args(p, region, hp_zone)
  local eks = Names.eks(p.cluster_tag)
  local out = {
    cluster_create_eks = pick(p.eks or {}, M.EKS_KEYS, { cluster_tag = p.cluster_tag, region = region }),
    cluster_configure_dependencies = { cluster = eks, region = region, kuberay = p.kuberay },
    hyperpod_create = pick(p, M.HYPERPOD_KEYS, { cluster = eks, region = region }),
  }
  if p.s3_storage then
    out.storage_create_s3 = { cluster = eks, region = region, bucket = p.s3_bucket }
  end
  if p.fsx_storage then
    -- in the zone of the HyperPod compute subnet (known once stage 4 ran)
    local zone = hp_zone or p.availability_zone
    out.storage_create_fsx = { cluster = eks, region = region, availability_zone = zone }
  end
  if p.features and next(p.features) then
    local f = { cluster = eks, region = region }
    for k, v in pairs(p.features) do f[k] = v end
    out.hyperpod_update_advanced_features = f
  end
  return out
end

-- the order the stages run (and plan) in
M.ORDER = { "cluster_create_eks", "cluster_configure_dependencies", "hyperpod_create", "storage_create_s3",
  "storage_create_fsx", "hyperpod_update_advanced_features" }

local function args_of(ctx)
  local hp = (ctx.state.stages or {}).hyperpod_create
  return M.args(ctx.params, ctx:aws_region(), hp and hp.result and hp.result.availability_zone)
end

-- together(fns): runs each fn as its own task and waits for all of them;
-- the first error is raised once every one has stopped (none is left
-- running behind a failed step)
local function together(fns)
  local tasks = {}
  for i, fn in ipairs(fns) do tasks[i] = hypd.spawn(fn, { name = "cluster_create part " .. i }) end
  local first
  for _, t in ipairs(tasks) do
    local ok, err = t.wait()
    if not ok and first == nil then first = err end
  end
  if first ~= nil then error(first, 0) end
end

-- What each later stage waits for: a plan of it (the check step's, or a
-- plan of the whole pipeline) can be made only once what earlier stages
-- make is there. Until then its errors that say so are no refusal: the
-- stage is listed as "later". A bad decision (VALIDATION) of a stage that
-- needs only EKS is still refused: those plan against a planned EKS
-- cluster. The stages that need the HyperPod cluster are planned once it is
-- InService.
M.NEEDS = { cluster_configure_dependencies = "eks", storage_create_s3 = "eks", hyperpod_create = "eks",
  storage_create_fsx = "hyperpod", hyperpod_update_advanced_features = "hyperpod" }
local NOT_READY = { NOT_FOUND = true, CONFLICT = true, STATE = true }

-- ready(ctx, what) -> true when the EKS cluster is ACTIVE, or the HyperPod cluster InService
local function ready(ctx, what)
  local tag = ctx.params.cluster_tag
  if what == "eks" then
    local c = ctx:try("eks", "DescribeCluster", { name = Names.eks(tag) })
    return c ~= nil and c.cluster.status == "ACTIVE"
  end
  local c = ctx:try("sagemaker", "DescribeCluster", { ClusterName = Names.hyperpod(tag).cluster })
  return c ~= nil and c.ClusterStatus == "InService"
end

-- later(ctx, name, a, err) -> true when a plan of stage name cannot be made
-- yet (what it needs is not ready): a "later" entry is added to a plan
local function later(ctx, name, a, err)
  local needs = M.NEEDS[name]
  if not needs or type(err) ~= "table" then return false end
  if needs == "eks" then
    -- a bad decision is refused now; any other refusal says something an
    -- earlier stage makes is not there yet (the cluster, the CSI driver a
    -- stopped dependencies stage did not install): the stage itself checks
    -- again when it runs, and stops with its own error if it still holds
    if not NOT_READY[err.code] then return false end
  elseif ready(ctx, needs) then
    return false
  end
  if ctx.plan then
    ctx.planned = ctx.planned or hypd.json.array()
    local what = {}
    for k, v in pairs(a) do
      if k ~= "cluster" and k ~= "region" and k ~= "plan" then what[#what + 1] = k .. "=" .. tostring(v) end
    end
    table.sort(what)
    ctx.planned[#ctx.planned + 1] = { action = "later", type = "hypd:tool", name = name,
      why = string.format("%s (%s) plans once the %s is ready: %s", name, table.concat(what, ", "),
        needs == "eks" and "EKS cluster" or "HyperPod cluster", tostring(err.message)) }
  else
    ctx:progress(name .. " is checked when it runs: " .. tostring(err.message))
  end
  return true
end

-- stage(ctx, name) -> the child's result (nil when the stage is not asked for)
function M.stage(ctx, name)
  local a = args_of(ctx)[name]
  if not a then return nil end
  if ctx.plan then
    local ok, r = pcall(hypd.tools.call, name, a)
    if ok then return r end
    if later(ctx, name, a, r) then return nil end
    error(r, 0)
  end
  local r = hypd.tools.call(name, a)
  if not ctx.plan then
    ctx.state.stages = ctx.state.stages or {}
    ctx.state.stages[name] = { result = r }
    ctx:save()
  end
  return r
end

-- check: every stage planned (reads only); a bad decision of any stage is refused
function M.check(ctx)
  if ctx.plan then return end -- the plan is the whole run's
  local a = args_of(ctx)
  local counts = { create = 0, change = 0 }
  for _, name in ipairs(M.ORDER) do
    if a[name] then
      local args = {}
      for k, v in pairs(a[name]) do args[k] = v end
      args.plan = true
      local ok, r = pcall(hypd.tools.call, name, args)
      if not ok and not later(ctx, name, args, r) then error(r, 0) end
      if ok then counts.create, counts.change = counts.create + (r.create or 0), counts.change + (r.change or 0) end
    end
  end
  ctx:progress(string.format("planned: %d to create, %d to change", counts.create, counts.change))
  ctx.state.planned = counts
end

local function early(ctx)
  if ctx.plan then return end -- hyperpod_create and storage_create_s3 plan these
  local tag = ctx.params.cluster_tag
  create.ensure_role(ctx, tag)
  create.ensure_lifecycle(ctx, tag)
  if ctx.params.s3_storage then s3.ensure_bucket(ctx, tag, ctx.params.s3_bucket) end
end

-- eks: stage 1 with, beside it, what needs no EKS cluster
function M.eks(ctx)
  together { function() M.stage(ctx, "cluster_create_eks") end, function() early(ctx) end }
end

-- active: stage 2, the new cluster is the active one
function M.active(ctx)
  if ctx.plan then return end
  local eks_name = Names.eks(ctx.params.cluster_tag)
  local rec = hypd.clusters.get(eks_name, ctx:aws_region()) or {}
  hypd.clusters.set_active { name = eks_name, region = ctx:aws_region(), arn = rec.arn }
end

-- hyperpod_and_storage: stage 4 and, beside it, stage 5's S3 storage; the FSx storage after stage 4
function M.hyperpod_and_storage(ctx)
  together {
    function()
      M.stage(ctx, "hyperpod_create")
      M.stage(ctx, "storage_create_fsx") -- in the compute subnet stage 4 made
    end,
    function() M.stage(ctx, "storage_create_s3") end,
  }
end

-- result: what was made, with each stage's result
function M.result(ctx)
  local st, p = ctx.state, ctx.params
  local out = { cluster_tag = p.cluster_tag, region = ctx:aws_region(), cluster = Names.eks(p.cluster_tag),
    stages = hypd.json.object() }
  for name, s in pairs(st.stages or {}) do out.stages[name] = s.result end
  local hp = (st.stages or {}).hyperpod_create
  out.hyperpod_cluster = hp and hp.result and (hp.result.hyperpod_cluster or hp.result.cluster_name) or nil
  st.result = out
end

function M.target(p)
  local ok, region = pcall(hypd.aws.region, { region = p.region })
  return "pipeline/" .. (ok and region or tostring(p.region)) .. "/" .. tostring(p.cluster_tag)
end

return M
