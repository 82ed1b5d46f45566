-- hyperpod_update_software: UpdateClusterSoftware on a HyperPod cluster
-- (every group, or the named ones), then wait until it is done. The call
-- has no idempotency token: before sending, the step looks for an update
-- already in progress on those groups (its own, sent before a crash, or
-- someone else's) and follows that one instead of starting another.
local P = require "_params"
local cap = require "_capacity"

local WAIT_EVERY, WAIT_LIMIT = 60, 6 * 3600
-- DescribeCluster shows an update as soon as it is accepted (SystemUpdating,
-- InProgress); an update that was over before the first look shows as a
-- changed SoftwareUpdateStatus. When neither is seen, the cluster as it is
-- counts as done this long after sending.
local SETTLE = 2 * 60
local RUNNING = { InProgress = true, Pending = true, RollbackInProgress = true }

-- targeted(d, names) -> the DescribeCluster groups the update covers
local function targeted(d, names)
  if not names or #names == 0 then return d.InstanceGroups or {} end
  local want, out = {}, {}
  for _, n in ipairs(names) do want[n] = true end
  for _, g in ipairs(d.InstanceGroups or {}) do
    if want[g.InstanceGroupName] then out[#out + 1] = g end
  end
  return out
end

local function in_progress(d, names)
  if d.ClusterStatus == "SystemUpdating" then return true end
  for _, g in ipairs(targeted(d, names)) do
    if RUNNING[g.SoftwareUpdateStatus or ""] or g.Status == "SystemUpdating" then return true end
  end
  return false
end

return tool {
  name = "hyperpod_update_software",
  summary = "Update the platform software (AMI) of a HyperPod cluster's instance groups and wait until done",
  description = "Moves the instance groups of the active (or named) HyperPod cluster (all, or instance_groups) to the " ..
    "latest HyperPod image (or image_id). Nodes are patched in place and their workloads interrupted: " ..
    "plan it with the cluster's users. Follow it with hyperpod_list_instance_groups (operation_id, " ..
    "wait_seconds); plan = true shows what would be updated.",
  kind = "mutating",
  aws = cap.aws("sagemaker:UpdateClusterSoftware"),
  params = P.form({},
    { "image_id", "instance_groups", "cluster", "region" },
    {
    cluster = P.cluster, region = P.region,
    instance_groups = { type = "array", items = P.instance_group,
      description = "the instance groups to update (default: all of them)" },
    image_id = { type = "string", pattern = "^(ami-[0-9a-fA-F]{8,17}|default)$",
      pattern_help = "an AMI ID like ami-0123456789abcdef0, or default",
      description = "the image to move to: a HyperPod public or custom AMI ID, or default (default: the latest " ..
        "release of each group's image)" },
  }),
  status_tool = "hyperpod_list_instance_groups",
  target = function(p)
    local names = {}
    for i, n in ipairs(p.instance_groups or {}) do names[i] = n end
    table.sort(names)
    return cap.target(p, "software/" .. (#names > 0 and table.concat(names, ",") or "all"))
  end,
  steps = {
    { name = "check", run = function(ctx)
      local p = ctx.params
      local e, d = cap.cluster(ctx, p)
      local names = hypd.json.array()
      for i, n in ipairs(p.instance_groups or {}) do
        cap.group(d, n, "instance_groups[" .. (i - 1) .. "]")
        names[#names + 1] = n
      end
      local groups = {}
      for _, g in ipairs(targeted(d, names)) do
        groups[#groups + 1] = { name = g.InstanceGroupName, image = g.CurrentImageId,
          version_status = g.ImageVersionStatus, software_update_status = g.SoftwareUpdateStatus }
      end
      return { eks = e.name, region = e.region, hyperpod = d.ClusterName, groups = names, before = groups }
    end },
    { name = "update", run = function(ctx)
      local p, st = ctx.params, ctx.state
      local _, action = ctx:ensure {
        type = "sagemaker:software-update", label = "software update", name = "of " .. st.hyperpod .. " (" ..
          (#st.groups > 0 and table.concat(st.groups, ", ") or "all instance groups") .. ")",
        -- an update in progress on these groups (ours before a crash, or someone's) is the one to follow
        search = function()
          local d = cap.describe(ctx, st.hyperpod)
          if st.sent_at or in_progress(d, st.groups) then return { ClusterArn = d.ClusterArn } end
        end,
        fields = { InstanceGroups = #st.groups > 0 and st.groups or "all", ImageId = p.image_id or "latest release",
          groups = st.before },
        create = function()
          cap.in_service(cap.describe(ctx, st.hyperpod), "a software update")
          local req = { ClusterName = st.hyperpod, ImageId = p.image_id }
          if #st.groups > 0 then
            req.InstanceGroups = {}
            for i, n in ipairs(st.groups) do req.InstanceGroups[i] = { InstanceGroupName = n } end
          end
          local r = ctx:call("sagemaker", "UpdateClusterSoftware", req)
          st.sent_at = hypd.now()
          return { ClusterArn = r.ClusterArn }
        end,
      }
      return { started = action == "created", sent_at = st.sent_at or hypd.now() }
    end },
    { name = "wait", run = function(ctx)
      local st = ctx.state
      local seen = st.seen_progress
      local d = ctx:poll { what = "the software update of " .. st.hyperpod .. " to finish", every = WAIT_EVERY,
        timeout = WAIT_LIMIT, since = st.sent_at,
        check = function()
          local d = cap.describe(ctx, st.hyperpod)
          if in_progress(d, st.groups) then
            if not seen then seen = true; st.seen_progress = true; ctx:save() end
            local parts = {}
            for _, g in ipairs(targeted(d, st.groups)) do
              parts[#parts + 1] = g.InstanceGroupName .. " " .. tostring(g.SoftwareUpdateStatus or g.Status)
            end
            return false, "cluster " .. tostring(d.ClusterStatus) .. "; " .. table.concat(parts, ", ")
          end
          if not seen then
            local before = {}
            for _, b in ipairs(st.before or {}) do before[b.name] = b.software_update_status or "" end
            for _, g in ipairs(targeted(d, st.groups)) do
              if (g.SoftwareUpdateStatus or "") ~= before[g.InstanceGroupName] then seen = true end
            end
          end
          if not seen and hypd.now() - (st.sent_at or 0) < SETTLE then
            return false, "waiting for the update to show in DescribeCluster"
          end
          return d.ClusterStatus == "InService", "cluster " .. tostring(d.ClusterStatus), d
        end }
      if ctx.plan or not d then return end
      local groups, failed = hypd.json.array(), {}
      for _, g in ipairs(targeted(d, st.groups)) do
        groups[#groups + 1] = { name = g.InstanceGroupName, software_update_status = g.SoftwareUpdateStatus,
          image = g.CurrentImageId, version_status = g.ImageVersionStatus, status = g.Status }
        if g.SoftwareUpdateStatus == "Failed" or g.SoftwareUpdateStatus == "RollbackComplete" then
          failed[#failed + 1] = g.InstanceGroupName .. " " .. g.SoftwareUpdateStatus
        end
      end
      if #failed > 0 then
        hypd.errors.raise("FAILED", "the software update did not succeed: " .. table.concat(failed, ", ") ..
          (d.FailureMessage and (" (" .. d.FailureMessage .. ")") or ""))
      end
      st.result = { hyperpod_cluster = st.hyperpod, started = st.started, instance_groups = groups }
    end },
  },
}
