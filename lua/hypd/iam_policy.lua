-- hypd.iam_policy: the least-privilege IAM policy of the management host,
-- generated from what the tools declare (their `aws` lists: operations,
-- turned into IAM actions by hypd.aws.iam_actions), never written by
-- hand. `hypd iam-policy [--tools a,b] [--kind read|mutating|destructive]`.
--
--   iam_policy.document{tools = {names}, kind = k} -> policy | nil, err
--     tools: only these tools (each must exist) and the tools they call
--     (a tool's calls list, for its hypd.tools.call); kind: the tools of this
--     kind and the milder ones (read: read tools; mutating: read and
--     mutating; destructive, the default: all)
local errors = require "hypd.errors"
local json = require "hypd.json"
local tool = require "hypd.tool.registry"
local guard = require "hypd.tool.guard"
local aws = require "hypd.aws"
local loader = require "hypd.tool.loader"
local iam_actions = require "hypd.aws.iam_actions"

local M = {}

local RANK = { read = 1, mutating = 2, destructive = 3 }

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
  table.sort(kept, function(a, b) return a:lower() < b:lower() end)
  table.sort(from)
  local doc = { Version = "2012-10-17", Statement = json.array() }
  if #kept > 0 then
    doc.Statement[1] = { Sid = "HypdTools", Effect = "Allow", Action = json.array(kept), Resource = "*" }
  end
  return doc, from
end

return M
