-- The simulated AWS CloudFormation API (regional), its read side: the
-- sandbox deploys no templates, so the account has no stacks. ListStacks
-- answers an empty page; DescribeStacks answers every stack (none) when no
-- name is given, and of a named one ValidationError, as CloudFormation
-- answers for a stack that does not exist (the generic constraint checks
-- already refused a StackStatusFilter outside the enum).
local M = { scope = "regional", operations = {}, transitions = {} }
local ops = M.operations

-- stacks(ctx) -> the account's stacks in this region (none is ever made)
local function stacks(ctx) return ctx.state:list("stack") end

function ops.ListStacks(ctx, input)
  local out = {}
  local wanted = input.StackStatusFilter
  for _, s in ipairs(stacks(ctx)) do
    local keep = not wanted or #wanted == 0
    for _, st in ipairs(wanted or {}) do keep = keep or st == s.StackStatus end
    if keep then out[#out + 1] = s end
  end
  return { StackSummaries = out }
end

function ops.DescribeStacks(ctx, input)
  local name = input.StackName
  if name == nil or name == "" then return { Stacks = stacks(ctx) } end
  for _, s in ipairs(stacks(ctx)) do
    if s.StackName == name or s.StackId == name then return { Stacks = { s } } end
  end
  ctx.error("ValidationError", "Stack with id " .. name .. " does not exist", 400)
end

return M
