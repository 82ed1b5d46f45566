-- sandbox.policy_values: how an IAM policy's values read, one place for
-- the policy modules (policy, policy_conditions, policy_context,
-- policy_resources, policy_trust): a value is one item or a list of them.
--   is_list(v) -> a JSON array, or a Lua sequence (a table built in Lua
--     carries no mark; an empty table counts as an empty list)
--   as_list(v) -> v as a list: {} for nil or null, {v} for one item
local json = require "hypd.json"

local M = {}

function M.is_list(v)
  return type(v) == "table" and (json.is_array(v) or (not json.is_object(v) and (v[1] ~= nil or next(v) == nil)))
end

function M.as_list(v)
  if v == nil or v == json.null then return {} end
  if M.is_list(v) then return v end
  return { v }
end

return M
