-- hyperpod/_karpenter_groups: which instance groups managed Karpenter
-- covers (a group is covered when hypd's NodePool <ig>-nodepool points at
-- its HyperpodNodeClass <ig>-nodeclass), which ones a call puts under it,
-- and the sentence that says, per group, what that does to it.
--
-- The rule. Karpenter removes a covered group's idle nodes (down to its
-- MinCount), so covering a group that has nodes shrinks it: a sized group
-- is put under Karpenter only when karpenter.instance_groups names it.
-- Without instance_groups, the groups at zero nodes are covered (they can
-- only grow by autoscaling; covering them takes nothing away) and those
-- covered already stay covered. A NodePool is never deleted by the update
-- tool (Karpenter deletes a NodePool's nodes with it): a covered group
-- left out of instance_groups stays covered, and is said so.
local M = {}

function M.class_name(ig) return ig .. "-nodeclass" end
function M.pool_name(ig) return ig .. "-nodepool" end

local function count_of(g) return g.TargetCount or g.CurrentCount or 0 end

-- rows(env, covered) -> [{instance_group, instance_type, count, min_count,
-- autoscaling, nodepool}] for every group of the HyperPod cluster;
-- covered = {[ig] = true}
function M.rows(env, covered)
  local out = hypd.json.array()
  for _, g in ipairs((env.hyperpod or {}).InstanceGroups or {}) do
    local ig = g.InstanceGroupName
    out[#out + 1] = { instance_group = ig, instance_type = g.InstanceType, count = count_of(g),
      min_count = g.MinCount or 0, autoscaling = covered[ig] == true,
      nodepool = covered[ig] and M.pool_name(ig) or nil }
  end
  return out
end

-- check(env, want): a name in want.instance_groups that is no group of the
-- cluster is refused, naming the field
function M.check(env, want)
  if type(want) ~= "table" or want.instance_groups == nil then return end
  if #want.instance_groups == 0 then
    hypd.errors.refuse("karpenter.instance_groups", "min_items", "karpenter.instance_groups: name at least one " ..
      "instance group (leave it out for the default: the groups at 0 nodes)",
      { field_message = "karpenter.instance_groups: empty" })
  end
  local have, names = {}, {}
  for _, g in ipairs((env.hyperpod or {}).InstanceGroups or {}) do
    have[g.InstanceGroupName] = true
    names[#names + 1] = g.InstanceGroupName
  end
  for i, ig in ipairs(want.instance_groups) do
    if not have[ig] then
      hypd.errors.refuse("karpenter.instance_groups", "exists", string.format("karpenter.instance_groups[%d]: " ..
        "HyperPod cluster %s has no instance group %s (it has: %s)", i - 1, tostring(env.hp_name), ig, table.concat(names, ", ")),
        { field_message = "karpenter.instance_groups: no instance group " .. ig })
    end
  end
end

-- choose(rows, want) -> {[ig] = true}: the groups the call puts (or keeps)
-- under Karpenter
function M.choose(rows, want)
  local out = {}
  if want.instance_groups then
    for _, ig in ipairs(want.instance_groups) do out[ig] = true end
    return out
  end
  for _, r in ipairs(rows) do
    if r.autoscaling or r.count == 0 then out[r.instance_group] = true end
  end
  return out
end

-- how(row, chosen, want, after) -> what the call does to the group, said
-- for a person: after = the NodePools' consolidateAfter
function M.how(r, chosen, want, after)
  local ig, n = r.instance_group, r.count
  local idle = after == "Never" and "never removed when idle (consolidate_after Never)" or
    ("removed once idle for " .. after .. ", never below MinCount " .. r.min_count)
  if chosen[r.instance_group] and r.autoscaling then
    return "keep", ig .. ": under Karpenter already (NodePool " .. M.pool_name(ig) .. "): " .. n ..
      " node(s) now; nodes added for pods no node can take, " .. idle
  elseif chosen[ig] and n == 0 then
    return "change", ig .. ": put under Karpenter (NodePool " .. M.pool_name(ig) .. "): at 0 nodes now; a node " ..
      "is added for a pod no node can take and " .. idle
  elseif chosen[ig] then
    return "change", ig .. ": put under Karpenter (NodePool " .. M.pool_name(ig) .. ", named in " ..
      "karpenter.instance_groups): its " .. n .. " node(s) are " .. idle
  elseif r.autoscaling then
    return "keep", ig .. ": stays under Karpenter (NodePool " .. M.pool_name(ig) .. " from an earlier call, not " ..
      "in karpenter.instance_groups): hypd deletes no NodePool here, Karpenter would delete its nodes with it " ..
      "(hyperpod_disable_advanced_features karpenter removes them all)"
  elseif want.instance_groups then
    return "keep", ig .. ": not under Karpenter (karpenter.instance_groups does not name it): keeps its " .. n ..
      " node(s), scaled only by hyperpod_scale_instance_group"
  end
  return "keep", ig .. ": not under Karpenter: keeps its " .. n .. " node(s) (a group with nodes is put under " ..
    "Karpenter only when karpenter.instance_groups names it, since Karpenter would remove its idle nodes)"
end

-- coverage(row, after) -> the group's autoscaling, as a status says it
function M.coverage(r, after)
  local ig = r.instance_group
  if r.autoscaling then
    return "under Karpenter (NodePool " .. M.pool_name(ig) .. "): nodes are added for pods no node can take and " ..
      (after == "Never" and "never removed when idle" or ("removed once idle for " .. tostring(after) ..
      ", never below MinCount " .. r.min_count))
  end
  return "not under Karpenter: its " .. r.count .. " node(s) are what its count says; " ..
    "hyperpod_update_advanced_features karpenter:={\"enabled\":true,\"instance_groups\":[\"" .. ig ..
    "\"]} puts it under" .. (r.count == 0 and " (so does karpenter=true: a group at 0 nodes is covered by default)"
    or "")
end

-- later(ig, count) -> what a group added while autoscaling is on gets
function M.later(ig, count)
  return ig .. " is not under Karpenter: HyperPod autoscales this cluster, but only the groups with a NodePool, " ..
    "and hypd makes none for a new group; hyperpod_update_advanced_features " ..
    "karpenter:={\"enabled\":true,\"instance_groups\":[\"" .. ig .. "\"]} puts it under" .. (count == 0 and
    " (so does karpenter=true: a group at 0 nodes is covered by default)" or
    " (Karpenter then removes its idle nodes)")
end

-- entry(ctx, action, hp, ig, how): in a plan, one group's fate as an entry
-- (type hyperpod:autoscaling, action change or keep, how)
function M.entry(ctx, action, hp, ig, how)
  if not ctx.plan then return end
  ctx.planned = ctx.planned or hypd.json.array()
  ctx.planned[#ctx.planned + 1] = { action = action, type = "hyperpod:autoscaling", name = ig .. " in " ..
    tostring(hp), how = how }
end

-- say(ctx, action, hp, ig, how): the entry, and the same as progress
function M.say(ctx, action, hp, ig, how)
  M.entry(ctx, action, hp, ig, how)
  ctx:progress("autoscaling of instance group " .. how)
end

return M
