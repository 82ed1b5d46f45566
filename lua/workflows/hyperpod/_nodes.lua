-- hyperpod/_nodes: what the node operations share (hyperpod_node_reboot,
-- hyperpod_node_replace, hyperpod_node_delete): the nodes parameter (EC2
-- instance ids or Kubernetes node names hyperpod-i-...), and one Batch*
-- call per chunk with every node's outcome. The three APIs report a failed
-- node differently: BatchDeleteClusterNodes with `Code`, BatchReboot- and
-- BatchReplaceClusterNodes with `ErrorCode` (the API model); both come out
-- as `code`.
local P = require "_params"
local cap = require "_capacity"

local M = {}

M.ID = "^(hyperpod-)?i-[a-f0-9]{8}([a-f0-9]{9})?$"
M.MAX = 100

-- params(text [, decision [, help]]) -> a node tool's parameters: cluster,
-- region, and nodes (described by text for an agent and by help for a
-- person; a decision for the destructive ones)
function M.params(text, decision, help)
  return { cluster = P.cluster, region = P.region,
    nodes = { type = "array", required = true, decision = decision or nil, help = help,
      items = { type = "string", pattern = M.ID, pattern_help = "an instance id like i-0123456789abcdef0 or a " ..
        "Kubernetes node name like hyperpod-i-0123456789abcdef0" },
      description = text .. " One to " .. M.MAX .. " nodes, each an instance id (i-...) or its Kubernetes node " ..
        "name (hyperpod-i-...); hyperpod_list_nodes lists them." } }
end

M.RESULT = { type = "object", properties = { hyperpod_cluster = { type = "string" }, requested = { type = "integer" },
  succeeded = { type = "array" }, failed = { type = "array" }, ok = { type = "boolean" },
  status_tool = { type = "string" } } }

-- ids(nodes) -> the instance ids, each once, in the order given
function M.ids(nodes)
  if #nodes == 0 or #nodes > M.MAX then
    local msg = "nodes: give 1 to " .. M.MAX .. " nodes; got " .. #nodes
    hypd.errors.refuse("nodes", #nodes == 0 and "min_items" or
      "max_items", msg)
  end
  local out, seen = {}, {}
  for _, n in ipairs(nodes) do
    local id = n:gsub("^hyperpod%-", "")
    if not seen[id] then out[#out + 1], seen[id] = id, true end
  end
  return out
end

-- call(ctx, p, operation, chunk, field) -> what a node tool answers: every
-- node that succeeded and every node that failed with its code and message
-- (field: the member the operation's failures carry it in)
local function call(ctx, p, operation, chunk, field)
  local ids = M.ids(p.nodes)
  local e = cap.cluster(ctx, p)
  local ok, failed = hypd.json.array(), hypd.json.array()
  for i = 1, #ids, chunk do
    local part = {}
    for j = i, math.min(#ids, i + chunk - 1) do part[#part + 1] = ids[j] end
    local r = ctx:call("sagemaker", operation, { ClusterName = e.hyperpod, NodeIds = part })
    for _, id in ipairs(r.Successful or {}) do ok[#ok + 1] = { instance_id = id, node_name = "hyperpod-" .. id } end
    for _, f in ipairs(r.Failed or {}) do
      failed[#failed + 1] = { instance_id = f.NodeId, node_name = f.NodeId and ("hyperpod-" .. f.NodeId),
        code = f[field], message = f.Message }
    end
  end
  return { hyperpod_cluster = e.hyperpod, requested = #ids, succeeded = ok, failed = failed, ok = #failed == 0 }
end

-- runner(operation, chunk, field) -> a node tool's run: the nodes sent to
-- operation, chunk at a time
function M.runner(operation, chunk, field)
  return function(ctx, p) return call(ctx, p, operation, chunk, field) end
end

return M
