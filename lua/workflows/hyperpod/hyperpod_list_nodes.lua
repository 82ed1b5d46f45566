-- hyperpod_list_nodes: one page of a HyperPod cluster's nodes, each with its
-- instance status (ListClusterNodes) and its Kubernetes side (the Node
-- hyperpod-<instance id>: readiness and the HyperPod health label); the
-- status tool of the node operations.
local P = require "_params"
local R = require "_running"
local W = require "_wait"
local cap = require "_capacity"

local WAIT_EVERY = 15

local function node_name(id) return "hyperpod-" .. id end

-- page(ctx, e, p) -> nodes, next token, kubernetes error (or nil)
local function page(ctx, e, p)
  local r = ctx:call("sagemaker", "ListClusterNodes", { ClusterName = e.hyperpod, MaxResults = p.page_size,
    NextToken = p.page_token, InstanceGroupNameContains = p.instance_group, IncludeNodeLogicalIds = true })
  local k8s, kerr = cap.k8s_nodes(ctx, e)
  local out = hypd.json.array()
  for _, s in ipairs(r.ClusterNodeSummaries or {}) do
    if not p.instance_group or s.InstanceGroupName == p.instance_group then
      local name = node_name(s.InstanceId)
      local k = k8s and k8s[name]
      local st = s.InstanceStatus or {}
      out[#out + 1] = { instance_id = s.InstanceId, node_name = name, instance_group = s.InstanceGroupName,
        instance_type = s.InstanceType, instance_status = st.Status, status_message = st.Message,
        launch_time = s.LaunchTime, node_logical_id = s.NodeLogicalId, private_dns = s.PrivateDnsHostname,
        image_version_status = s.ImageVersionStatus,
        health_status = k and k.health or nil,
        kubernetes = k8s and { joined = k ~= nil, ready = k and k.ready or false } or nil }
    end
  end
  return out, r.NextToken, not k8s and tostring(kerr and kerr.message or kerr) or nil
end

local function fingerprint(nodes)
  local parts = {}
  for i, n in ipairs(nodes) do
    parts[i] = n.instance_id .. "=" .. tostring(n.instance_status) .. "/" .. tostring(n.health_status) .. "/" ..
      tostring(n.kubernetes and n.kubernetes.ready)
  end
  return table.concat(parts, ",")
end

return tool {
  name = "hyperpod_list_nodes",
  summary = "A page of the HyperPod cluster's nodes: instance status, group, Kubernetes node, readiness, health",
  description = "Lists the nodes of the HyperPod cluster of the active (or named) EKS cluster, a page at a time: " ..
    "instance id, Kubernetes node name, group, type, SageMaker status, Ready and the health label. The " ..
    "status tool of hyperpod_node_reboot, hyperpod_node_replace and hyperpod_node_delete: with " ..
    "wait_seconds it answers at the first change of a node's status.",
  kind = "read",
  aws = cap.aws("sagemaker:ListClusterNodes"),
  k8s = { "get", "list" },
  params = P.form({},
    { "instance_group", "page_size", "page_token", "cluster", "region", "wait_seconds" },
    {
    cluster = P.cluster, region = P.region,
    instance_group = P.with(P.instance_group, { description = "only the nodes of this instance group" }),
    page_size = { type = "integer", minimum = 1, maximum = 100, default = 50, description = "nodes per page (1 to 100)" },
    page_token = { type = "string", max_length = 8192,
      description = "next_page_token of the previous page (absent: the first page)" },
    wait_seconds = P.wait_seconds,
  }),
  result = { type = "object", properties = { nodes = { type = "array" }, next_page_token = { type = "string" },
    hyperpod_cluster = { type = "string" }, kubernetes_error = { type = "string" }, changed = { type = "boolean" },
    operation = { type = "object" }, waited = { type = "object" } } },
  run = function(ctx, p)
    local e = cap.cluster(ctx, p)
    local prefix = cap.target({ cluster = e.name, region = e.region })
    -- read() -> the page now and the operation at work on the cluster's
    -- capacity (hyperpod_create, a scale, an added group), if any
    local function read()
      local nodes, nxt, kerr = page(ctx, e, p)
      return { hyperpod_cluster = e.hyperpod, cluster = e.name, nodes = nodes, next_page_token = nxt,
        kubernetes_error = kerr, operation = R.on(prefix) }
    end
    local out, waited = W.follow(p.wait_seconds, { read = read, every = WAIT_EVERY,
      quick = function() return R.fingerprint(prefix) end,
      signature = function(x) return fingerprint(x.nodes) .. " " .. R.signature(x.operation) end,
      -- settled: nothing at work, every node Running and, where Kubernetes answered, Ready
      settled = function(x)
        if x.operation then return false end
        for _, n in ipairs(x.nodes) do
          if W.moving(n.instance_status) or (n.kubernetes and n.instance_status == "Running" and
            not n.kubernetes.ready) then return false end
        end
        return true
      end })
    if waited then out.waited, out.changed = waited, waited.ended == "changed" end
    return out
  end,
}
