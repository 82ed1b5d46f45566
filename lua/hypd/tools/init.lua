-- hypd.tools: the built-in tools. require("hypd.tools").load() registers
-- every one of them with hypd.tool (idempotent), then the playbook
-- directory's tools (same guardrails).
local M = {}

M.MODULES = { "hypd.tools.operations", "hypd.tools.aws_info", "hypd.tools.clusters" }

local loaded = false
function M.load()
  if loaded then return end
  loaded = true
  for _, name in ipairs(M.MODULES) do require(name) end
end

return M
