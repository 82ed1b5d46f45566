-- hyperpod_scale_instance_group: change how many instances a HyperPod
-- instance group has (and its minimum), keeping everything else the group
-- has: UpdateCluster is sent with that one group, carried forward from
-- DescribeCluster through _hyperpod's update_group. Steps:
--   check   the group exists; the fixed parameters the caller gave
--           match the group (else refused, naming the field and the rule);
--           the counts are consistent
--   scale   ctx:ensure of the group's TargetCount (and MinCount): nothing is
--           sent when it already holds (a re-run, a resumed operation)
--   wait    until DescribeCluster shows the count InService and Kubernetes
--           has that many Ready nodes of the group (or the removed ones gone)
local P = require "_params"
local cap = require "_capacity"
local hp = require "_hyperpod"

local WAIT_EVERY, WAIT_LIMIT = 30, 120 * 60

-- fixed(spec, text) -> a fixed copy of spec, with no default (a
-- default would always be "given")
local function fixed(spec, text)
  local s = P.with(spec, { fixed = true, description = text .. " Fixed when the group is created: " ..
    "give it only to assert the group's value; a different one is refused (rule fixed_at_create) before " ..
    "anything changes." })
  s.default = nil
  return s
end

local params = {
  cluster = P.cluster, region = P.region,
  instance_group = P.with(P.instance_group, { required = true,
    description = "the instance group to scale (hyperpod_list_instance_groups lists them)" }),
  instance_count = P.with(P.instance_count, { required = true, decision = true,
    description = "how many instances the group should have; 0 keeps the group with no instances (ask the " ..
      "person: instances cost money, and removing them stops the work on them)",
    help = "Each instance is billed while it runs; 0 keeps the group with no instances. Removing instances " ..
      "stops the work on them." }),
  min_instance_count = P.with(P.instance_count, { description = "the group's MinInstanceCount: how many " ..
    "instances must be up for the group to be InService (default: the group's current minimum, kept)",
    help = "How many instances must be up for the group to count as ready (empty: kept as it is)." }),
  capacity_type = fixed(P.capacity_type, "The group's capacity type (on-demand, spot or training-plan)."),
  training_plan = fixed(P.training_plan, "The training plan (name or ARN) whose reservation the group uses."),
  efa_only = { type = "boolean", fixed = true, description = "Whether the group's instances have an " ..
    "efa-only network interface. Fixed when the group is created: give it only to assert the group's value; " ..
    "a different one is refused (rule fixed_at_create) before anything changes." },
  subnet_id = { type = "string", pattern = "^subnet-[0-9a-f]{8,17}$", pattern_help = "a subnet ID like subnet-0abc1234",
    fixed = true, description = "A subnet the group's instances are placed in. Fixed when the group " ..
      "is created: give it only to assert the group's placement; another subnet is refused (rule " ..
      "fixed_at_create) before anything changes." },
  availability_zone = fixed(P.availability_zone, "The Availability Zone (name or ID) of the group's subnets."),
}

local function st_describe(ctx) return cap.describe(ctx, ctx.state.hyperpod) end

return tool {
  name = "hyperpod_scale_instance_group",
  summary = "Scale a HyperPod instance group to a new instance count, keeping all its other settings",
  description = "Sets how many instances an instance group of the active (or named) HyperPod cluster has (and its " ..
    "minimum when asked), keeping every other setting of the group. Waits until that many instances are " ..
    "InService and Ready in Kubernetes. Capacity type, training plan, efa-only and subnets are fixed: a " ..
    "different value is refused. Follow it with hyperpod_list_instance_groups (operation_id, " ..
    "wait_seconds); plan = true shows the change.",
  kind = "mutating",
  aws = cap.aws("pricing:GetProducts", "sagemaker:UpdateCluster", "ec2:DescribeSubnets", "iam:PassRole"),
  k8s = { "get", "list" },
  params = P.form({ "instance_group", "instance_count" },
    { "min_instance_count", "capacity_type", "training_plan", "availability_zone", "subnet_id", "efa_only", "cluster",
      "region" },
    params),
  status_tool = "hyperpod_list_instance_groups",
  target = function(p) return cap.target(p, "group/" .. p.instance_group) end,
  steps = {
    { name = "check", on_call = true, run = function(ctx) -- refused on the call (hypd.tool.operations): reads only
      local p = ctx.params
      local e, d = cap.cluster(ctx, p)
      local g = cap.group(d, p.instance_group)
      cap.refuse_fixed(ctx, ctx.tool, p, d, g)
      if p.min_instance_count and p.min_instance_count > p.instance_count then
        hypd.errors.refuse("min_instance_count", "maximum", "min_instance_count: must be at most instance_count (" ..
          p.instance_count .. "); got " .. p.min_instance_count,
          { field_message = "min_instance_count: must be at most instance_count (" .. p.instance_count .. ")" })
      end
      if not p.min_instance_count and g.MinCount and g.MinCount > p.instance_count then
        local msg = string.format("instance_count: %d is below the group's MinInstanceCount %d; pass " ..
          "min_instance_count (at most %d) too", p.instance_count, g.MinCount, p.instance_count)
        hypd.errors.refuse("instance_count", "min_count", msg)
      end
      return { eks = e.name, region = e.region, hyperpod = d.ClusterName, from_count = g.TargetCount }
    end },
    { name = "scale", run = function(ctx)
      local p, st = ctx.params, ctx.state
      local desired = { TargetCount = p.instance_count }
      if p.min_instance_count then desired.MinCount = p.min_instance_count end
      local _, action = ctx:ensure {
        type = "sagemaker:instance-group", label = "instance group", name = p.instance_group .. " of " .. st.hyperpod,
        search = function() return hp.group(st_describe(ctx), p.instance_group) end,
        create = function()
          hypd.errors.raise("NOT_FOUND", "instance group " .. p.instance_group .. " of " .. st.hyperpod .. " is gone")
        end,
        desired = desired,
        current = function(g) return { TargetCount = g.TargetCount, MinCount = g.MinCount } end,
        update = function()
          local d = st_describe(ctx)
          cap.in_service(d, "a scaling change")
          local spec = hp.update_group(cap.group(d, p.instance_group))
          spec.InstanceCount = p.instance_count
          if p.min_instance_count then spec.MinInstanceCount = p.min_instance_count end
          ctx:call("sagemaker", "UpdateCluster", { ClusterName = st.hyperpod, InstanceGroups = { spec } })
          st.sent_at = hypd.now()
        end,
      }
      -- sent_at: this operation sent the change (before a stop, if it resumed)
      return { changed = action ~= "unchanged" or st.sent_at ~= nil }
    end },
    { name = "wait", run = function(ctx)
      local p, st = ctx.params, ctx.state
      local e = { name = st.eks, hyperpod = st.hyperpod }
      local n, k8s_note = p.instance_count, nil
      local final = ctx:poll { what = "instance group " .. p.instance_group .. " to have " .. n .. " instances " ..
        "InService and in Kubernetes", every = WAIT_EVERY, timeout = WAIT_LIMIT, since = st.sent_at,
        check = function()
          local d = st_describe(ctx)
          local g = cap.group(d, p.instance_group)
          if d.ClusterStatus == "Failed" or g.Status == "Failed" then
            hypd.errors.raise("FAILED", "scaling " .. p.instance_group .. " failed: " ..
              tostring(d.FailureMessage or g.Status))
          end
          if d.ClusterStatus == "InService" and g.TargetCount ~= n then
            hypd.errors.raise("FAILED", string.format("SageMaker did not keep instance group %s at %d instances " ..
              "(its target is %s again)%s", p.instance_group, n, tostring(g.TargetCount),
              d.FailureMessage and (": " .. d.FailureMessage) or ""))
          end
          local aws_done = d.ClusterStatus == "InService" and g.Status == "InService" and g.CurrentCount == n
          local nodes, kerr = cap.k8s_nodes(ctx, e)
          local ready, total = cap.group_nodes(nodes, p.instance_group)
          local note = string.format("%s of %d instances running (group %s, cluster %s); %d Ready node(s) in " ..
            "Kubernetes of %d", tostring(g.CurrentCount), n, tostring(g.Status), tostring(d.ClusterStatus), ready, total)
          if not nodes then
            k8s_note = "the Kubernetes API could not be read: " .. tostring(kerr and kerr.message or kerr)
            return aws_done, note .. " (" .. k8s_note .. ")", { d = d, g = g }
          end
          k8s_note = nil
          return aws_done and ready == n and total == n, note, { d = d, g = g, ready = ready }
        end }
      if ctx.plan or not final then return end
      local v = cap.view(final.d, final.g)
      st.result = { hyperpod_cluster = st.hyperpod, instance_group = p.instance_group, from_count = st.from_count,
        instance_count = v.target_count, current_count = v.current_count, min_count = v.min_count,
        status = v.status, changed = st.changed, kubernetes_ready = final.ready, kubernetes = k8s_note,
        kept = { capacity_type = v.capacity_type, network_interface = v.network_interface,
          threads_per_core = v.threads_per_core, deep_health_checks = v.deep_health_checks, storage = v.storage,
          subnets = v.subnets } }
    end },
  },
}
