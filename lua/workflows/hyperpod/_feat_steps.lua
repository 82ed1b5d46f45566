-- hyperpod/_feat_steps: what the steps of hyperpod_update_advanced_features
-- (mode "enable") and hyperpod_disable_advanced_features ("disable") call:
--   check(ctx, wants, mode)   reads the actual state of every feature asked
--             for and of those that depend on them; refuses conflicts and
--             missing prerequisites before anything is changed; decides, per
--             feature, enable, disable or unchanged (already as asked:
--             nothing is sent for it), kept in the operation's state
--   disable_step(ctx)   the update tool's features asked off, through the
--             disable tool (its child operation)
--   feature(name, mode) -> the run of one feature's step: its chain built
--             (or removed) link by link, each link read back first
--   result(ctx)   the state of every feature asked for, read again
-- and, for hyperpod_get_advanced_features too: target, env, read.
local F = require "hyperpod._feat"

local M = {}

function M.target(p)
  local ok, region = pcall(hypd.aws.region, { region = p.region })
  if not ok then region = p.region or "default" end
  local target = hypd.clusters.target(p) -- nil when no cluster is given or active
  local name = p.cluster or p.hyperpod_cluster or (target and target.name) or "(active)"
  return "features/" .. region .. "/" .. name
end

-- env(ctx) -> the cluster of the operation (found in the check step)
function M.env(ctx)
  local e = ctx.state.env
  return F.env(ctx, { cluster = e.eks, region = e.region, hyperpod_cluster = e.hp_name })
end

-- read(ctx, env, name) -> the feature's state (errors reported, not raised)
function M.read(ctx, env, name)
  local ok, s = pcall(F.feature(name).read, ctx, env)
  if ok then return s end
  return { enabled = false, status = "unknown", error = tostring(type(s) == "table" and s.message or s) }
end

-- the features a feature's removal would break
local NEEDED_BY = {
  cert_manager = { "training_operator", "inference_operator" },
  fsx_csi_driver = { "inference_operator" },
}

-- conflicts(ctx, env, wants): refuses turning off what stays needed
local function conflicts(ctx, env, wants)
  for off, users in pairs(NEEDED_BY) do
    if wants[off] and wants[off].enabled == false then
      for _, u in ipairs(users) do
        local w = wants[u]
        if w and w.enabled then
          hypd.errors.refuse(off, "conflict", "cannot be turned off while " .. u .. " is turned on: " .. u .. " needs it",
            { prefix = "field" })
        end
        if not w then
          local s = M.read(ctx, env, u)
          if s.status ~= "disabled" and s.status ~= "unknown" then
            hypd.errors.refuse(off, "conflict", "cannot be turned off while " .. u .. " is " .. s.status .. " (it needs " ..
              off .. "); turn " .. u .. " off in the same call, or first", { prefix = "field" })
          end
        end
      end
    end
  end
end

-- check(ctx, wants, mode): the decisions; mode "enable" (the update tool)
-- or "disable" (the disable tool: every want is off)
function M.check(ctx, wants, mode)
  local p = ctx.params
  if next(wants) == nil then
    hypd.errors.refuse(mode == "enable" and "training_operator" or "features", "required",
      "name at least one feature to change (" .. table.concat(F.ORDER, ", ") .. ")", { prefix = "field" })
  end
  for name, w in pairs(wants) do
    if w.enabled == false then
      for k in pairs(w) do
        if k ~= "enabled" then
          hypd.errors.refuse(name .. "." .. k, "with_enabled", "is a setting of " .. name .. " when it is on; " ..
            "it cannot go with enabled false", { prefix = "field" })
        end
      end
    end
  end
  local env = F.env(ctx, p)
  ctx.state.env = { eks = env.eks, region = env.region, hp_name = env.hp_name, tag = env.tag }
  for _, name in ipairs(F.ORDER) do
    local w = wants[name]
    if w and w.enabled ~= false and F.feature(name).hyperpod then F.need_hyperpod(env, name) end
  end
  conflicts(ctx, env, wants)
  local todo, before, off = {}, {}, false
  for _, name in ipairs(F.ORDER) do
    local w = wants[name]
    if w then
      if w.enabled ~= false and F.feature(name).check_want then F.feature(name).check_want(env, w) end
      local s = M.read(ctx, env, name)
      if s.status == "unknown" then
        hypd.errors.raise("STATE", "cannot read the state of " .. name .. ": " .. tostring(s.error), { field = name })
      end
      before[name] = s.status
      if F.feature(name).matches(s, w) then
        todo[name] = "unchanged"
      elseif w.enabled == false then
        if s.source == "kubernetes" then
          todo[name] = "kept" -- installed some other way: hypd does not remove what it did not make
        else
          todo[name], off = "disable", true
        end
      else
        todo[name] = "enable"
        if name == "inference_operator" then F.feature(name).check(ctx, env) end
      end
    end
  end
  if off and mode == "enable" and ((ctx.caller or {}).scope or "admin") ~= "admin" then
    hypd.errors.raise("FORBIDDEN", "turning features off deletes their IAM roles, add-ons and Kubernetes objects: " ..
      "hyperpod_disable_advanced_features does it, a destructive tool, and this caller's scope is " ..
      tostring(ctx.caller.scope) .. " (it needs admin)")
  end
  ctx.state.todo, ctx.state.wants, ctx.state.before = todo, wants, before
end

-- feature(name, mode) -> the run of the step that builds (mode "enable")
-- or removes ("disable") one feature's chain, when the check decided so
function M.feature(name, mode)
  return function(ctx)
    local todo = (ctx.state.todo or {})[name]
    if todo ~= mode then return end
    local env = M.env(ctx)
    local f = F.feature(name)
    if mode == "enable" then
      ctx:phase("enabling " .. name)
      f.enable(ctx, env, ctx.state.wants[name])
    else
      ctx:phase("disabling " .. name)
      f.disable(ctx, env)
    end
  end
end

-- disable_step: the update tool's features asked off, through the
-- destructive tool (its child operation; in a plan, its plan)
function M.disable_step(ctx)
  local off = {}
  for _, name in ipairs(F.ORDER) do
    if (ctx.state.todo or {})[name] == "disable" then off[#off + 1] = name end
  end
  if #off == 0 then return end
  local e = ctx.state.env
  ctx:phase("disabling " .. table.concat(off, ", ") .. " (hyperpod_disable_advanced_features)")
  local r = hypd.tools.call("hyperpod_disable_advanced_features", { cluster = e.eks, region = e.region,
    features = off })
  ctx.state.disabled = r and r.features
end

-- result(ctx): what every feature asked for is now
function M.result(ctx)
  if ctx.plan then return end
  local env = M.env(ctx)
  local out = {}
  local ACTION = { enable = "enabled", disable = "disabled" }
  for _, name in ipairs(F.ORDER) do
    local todo = (ctx.state.todo or {})[name]
    if todo then
      local s = M.read(ctx, env, name)
      s.requested = ctx.state.wants[name]
      s.before = ctx.state.before[name]
      s.action = ACTION[todo] or todo
      if todo == "kept" then
        s.note = s.note or (name .. " was not made by hypd; hypd leaves it alone")
      end
      out[name] = s
    end
  end
  ctx.state.result = { cluster = env.eks, region = env.region, hyperpod_cluster = env.hp_name, features = out }
end

return M
