-- job_label_nodes: a staged tool, the shape of an operator's own workflow.
-- It gives every node of the active cluster the label hypd.io/team=<label>
-- with ctx:ensure (each node found, changed only when its label differs:
-- a re-run changes nothing, and plan = true lists the nodes it would
-- change), then waits with ctx:poll until the API shows them all.
--   hypd --playbooks examples/playbooks call job_label_nodes label=team-a --plan
--   hypd --playbooks examples/playbooks call job_label_nodes label=team-a --wait
local KEY = "hypd.io/team"

local function label_of(node) return ((node.metadata or {}).labels or {})[KEY] end

return tool {
  name = "job_label_nodes",
  summary = "Label every node of the active cluster with a team",
  description = "Sets the label hypd.io/team on every node of the active cluster, changing only the nodes " ..
    "whose label differs, then waits until the API server shows all of them. It answers with an operation; " ..
    "follow it with operation_get.",
  kind = "mutating",
  status_tool = "operation_get",
  aws = { "eks:DescribeCluster" },
  k8s = { "get", "list", "patch", "watch" },
  params = { label = { type = "string", required = true, decision = true, pattern = "^[a-z0-9][a-z0-9-]{0,62}$",
    pattern_help = "a label value: up to 63 lowercase letters, digits and '-'", description = "the team name" } },
  target = function(p) return "nodes/" .. p.label end,
  steps = {
    { name = "label", run = function(ctx)
      local k = ctx:k8s()
      for _, node in ipairs(assert(k:list("v1", "Node"))) do
        local name = node.metadata.name
        ctx:ensure {
          type = "kubernetes:node-label", name = name .. " " .. KEY,
          find = function() return node end, search = function() return node end,
          create = function() hypd.errors.raise("NOT_FOUND", "node " .. name .. " is gone") end,
          desired = { team = ctx.params.label },
          current = function(n) return { team = label_of(n) } end,
          update = function(_, changes)
            return assert(k:patch("v1", "Node", name, { metadata = { labels = { [KEY] = changes.team.to } } }))
          end,
        }
      end
    end },
    { name = "verify", run = function(ctx)
      local k = ctx:k8s()
      ctx:poll { what = "every node labelled " .. KEY .. "=" .. ctx.params.label, every = 5, timeout = 300,
        check = function()
          local left = 0
          for _, n in ipairs(assert(k:list("v1", "Node"))) do
            if label_of(n) ~= ctx.params.label then left = left + 1 end
          end
          return left == 0, left .. " node(s) still without it"
        end }
      ctx.state.result = { label = ctx.params.label }
    end },
  },
}
