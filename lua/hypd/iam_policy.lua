-- hypd.iam_policy: the least-privilege IAM policy of the management host,
-- generated from what the tools declare (their `aws` lists: operations,
-- turned into IAM actions by hypd.aws.iam_actions) and scoped by resource
-- to what hypd names and tags (workflows' _iam_scopes), never written by
-- hand. `hypd iam-policy [--tools a,b] [--kind read|mutating|destructive]`.
--
--   iam_policy.document{tools = {names}, kind = k} -> policy | nil, err
--     tools: only these tools (each must exist) and the tools they call
--     (a tool's calls list, for its hypd.tools.call); kind: the tools of this
--     kind and the milder ones (read: read tools; mutating: read and
--     mutating; destructive, the default: all); resources: ARNs hypd did
--     not make that the tools may use (an imported EKS cluster with its
--     node groups and add-ons, a HyperPod cluster, a bucket with its objects)
--   iam_policy.scoped(actions) -> policy: the statements of those actions,
--     each scoped to hypd's names and tag (workflows' _iam_scopes)
--   iam_policy.unscoped(policy) -> {{sid, actions, why}}: what stays on
--     Resource "*", and why
local errors = require "hypd.errors"
local json = require "hypd.json"
local tool = require "hypd.tool.registry"
local guard = require "hypd.tool.guard"
local aws = require "hypd.aws"
local loader = require "hypd.tool.loader"
local iam_actions = require "hypd.aws.iam_actions"
local playbook = require "hypd.playbook"

local M = {}

local RANK = { read = 1, mutating = 2, destructive = 3 }
local UNSCOPED = { "Unscoped", why = "no scope rule of _iam_scopes names these actions (a playbook declared them): " ..
  "add one" }

-- covered(actions, a) -> true when a wildcard already in actions covers a
local function covered(list, a)
  for _, other in ipairs(list) do
    if other ~= a and other:find("*", 1, true) and guard.matches({ other }, a) then return true end
  end
  return false
end

-- what a tool of each kind may call (hypd.tool.guard): a declared action its
-- kind forbids is never called, so the policy leaves it out
local CEILING = { read = 1, mutating = 2, destructive = 3 }
local CLASS = { read = 1, mutating = 2, deleting = 3 }
local PERMISSIONS = { ["iam:passrole"] = 2 } -- checked by AWS inside another (mutating) call

local function usable(def, action)
  local perm = PERMISSIONS[action:lower()]
  if perm then return perm <= CEILING[def.kind] end
  if action:find("[%*%?]") then return true end -- a wildcard: the guard decides call by call
  local service, op = action:match("^([%w-]+):(.+)$")
  local ok, class = pcall(aws.class, service, op)
  return ok and CLASS[class] <= CEILING[def.kind]
end

-- the resources a Resource pattern of a service and type also names: an
-- EKS cluster's node groups, add-ons, access entries and pod identity
-- associations; a bucket's objects
local function with_children(arn)
  local head, name = arn:match("^(arn:[^:]+:eks:[^:]*:[^:]*:)cluster/([^/]+)$")
  if head then
    return { arn, head .. "nodegroup/" .. name .. "/*/*", head .. "addon/" .. name .. "/*/*",
      head .. "access-entry/" .. name .. "/*", head .. "podidentityassociation/" .. name .. "/*" }
  end
  if arn:match("^arn:[^:]+:s3:::[^/]+$") then return { arn, arn .. "/*" } end
  return { arn }
end

-- extra(doc, arns): the resources hypd did not make that the tools may use
-- (an imported cluster, a bucket of the user's), each granted the scoped
-- actions of its service in a statement of their own, with no condition
local function extra(doc, arns)
  local by = {}
  for i, arn in ipairs(arns) do
    local service = type(arn) == "string" and arn:match("^arn:aws[%w-]*:([%w-]+):[^:]*:[^:]*:.+")
    if not service then
      return errors.fail("VALIDATION", "resources[" .. i .. "]: an ARN (arn:aws:<service>:...), got " ..
        errors.echo(arn), { field = "resources" })
    end
    by[service] = by[service] or {}
    for _, r in ipairs(with_children(arn)) do table.insert(by[service], r) end
  end
  local services = {}
  for service in pairs(by) do services[#services + 1] = service end
  table.sort(services)
  for _, service in ipairs(services) do
    local actions, seen = json.array(), {}
    for _, st in ipairs(doc.Statement) do
      if st.Resource ~= "*" or st.Condition then
        for _, a in ipairs(st.Action) do
          if a:match("^([%w-]+):") == service and not seen[a] then seen[a], actions[#actions + 1] = true, a end
        end
      end
    end
    if #actions == 0 then
      return errors.fail("VALIDATION", "resources: the tools call no scoped " .. service .. " action, so " ..
        "no " .. service .. " resource can be added", { field = "resources" })
    end
    table.sort(actions, function(a, b) return a:lower() < b:lower() end)
    doc.Statement[#doc.Statement + 1] = { Sid = "Given" .. service:gsub("%W", ""):gsub("^%l", string.upper),
      Effect = "Allow", Action = actions, Resource = json.array(by[service]) }
  end
  return true
end

function M.document(opts)
  opts = opts or {}
  loader.load()
  local kind = opts.kind or "destructive"
  if not RANK[kind] then
    return errors.fail("VALIDATION", "kind: one of read, mutating, destructive; got " .. errors.echo(kind),
      { field = "kind" })
  end
  local defs = {}
  if opts.tools and #opts.tools > 0 then
    for _, name in ipairs(opts.tools) do
      local def = tool.get(name)
      if not def then
        return errors.fail("NOT_FOUND", "no tool named '" .. errors.echo(name, 64) .. "' (hypd tools lists them)",
          { field = "tools" })
      end
      defs[#defs + 1] = def
    end
  else
    defs = tool.list()
  end
  -- the tools a tool calls (its calls list: hypd.tools.call) are part of what it does
  local have, i = {}, 1
  for _, def in ipairs(defs) do have[def.name] = true end
  while i <= #defs do
    for _, name in ipairs(defs[i].calls or {}) do
      local c = tool.get(name)
      if c and not have[name] then have[name], defs[#defs + 1] = true, c end
    end
    i = i + 1
  end
  local seen, actions, from = {}, {}, {}
  for _, def in ipairs(defs) do
    if RANK[def.kind] <= RANK[kind] then
      from[#from + 1] = def.name
      for _, declared in ipairs(def.aws or {}) do
        if usable(def, declared) then
          -- the operation's IAM actions (S3 names some otherwise: hypd.aws.iam_actions)
          for _, a in ipairs(iam_actions.of(declared)) do
            if not seen[a] then seen[a], actions[#actions + 1] = true, a end
          end
        end
      end
    end
  end
  local kept = {}
  for _, a in ipairs(actions) do
    if not covered(actions, a) then kept[#kept + 1] = a end
  end
  table.sort(from)
  local doc = M.scoped(kept)
  local ok, err = extra(doc, opts.resources or {})
  if not ok then return nil, err end
  return doc, from
end

-- scoped(actions) -> the policy: one statement per scope rule (workflows'
-- _iam_scopes: the resources and conditions of hypd's names and tag), in
-- the rules' order, each rule's actions sorted; an action no rule scopes
-- goes on Resource "*" in the statement Unscoped (an operator's playbook
-- declared an action hypd's rules do not know)
function M.scoped(actions)
  local scopes = playbook.load("_iam_scopes")
  local by, order = {}, {}
  for _, a in ipairs(actions) do
    local rule = scopes.of(a) or UNSCOPED
    if not by[rule] then by[rule], order[#order + 1] = {}, rule end
    table.insert(by[rule], a)
  end
  local rank = {}
  for i, rule in ipairs(scopes.RULES) do rank[rule] = i end
  table.sort(order, function(a, b) return (rank[a] or math.huge) < (rank[b] or math.huge) end)
  local doc = { Version = "2012-10-17", Statement = json.array() }
  for _, rule in ipairs(order) do
    local list = by[rule]
    table.sort(list, function(a, b) return a:lower() < b:lower() end)
    doc.Statement[#doc.Statement + 1] = { Sid = rule[1], Effect = "Allow", Action = json.array(list),
      Resource = rule.resources and (#rule.resources == 1 and rule.resources[1] or json.array(rule.resources)) or "*",
      Condition = rule.condition }
  end
  return doc
end

-- unscoped(doc) -> {{sid, actions, why}}: the statements left on Resource
-- "*", each with the reason
function M.unscoped(doc)
  local scopes = playbook.load("_iam_scopes")
  local why = { [UNSCOPED[1]] = UNSCOPED.why }
  for _, rule in ipairs(scopes.RULES) do why[rule[1]] = rule.why end
  local out = {}
  for _, st in ipairs(doc.Statement or {}) do
    if st.Resource == "*" and not st.Condition then
      out[#out + 1] = { sid = st.Sid, actions = st.Action, why = why[st.Sid] or "(no reason recorded)" }
    end
  end
  return out
end

return M
