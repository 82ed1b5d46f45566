-- hypd.tools: the built-in tools, and the tools playbooks declare.
-- require("hypd.tools").load() registers every built-in tool with
-- hypd.tool (once), then each playbook in the playbook directory that
-- returns a `tool` table:
--
--   return {
--     tool = { name = "monitor_gpu_usage", summary = "...", description = "...",
--              kind = "read", params = { ... }, result = { ... } },
--     main = function(params) return { ... } end,
--   }
--
-- A playbook tool goes through the same definition checks, validation,
-- scopes and (for mutating kinds) operation records as a built-in one, and
-- runs in the playbook sandbox (no io, no os.execute: no shell).
local config = require "hypd.config"
local core = require "hypd.core"
local json = require "hypd.json"
local log = require "hypd.log"
local playbook = require "hypd.playbook"
local tool = require "hypd.tool"

local M = {}

M.MODULES = { "hypd.tools.operations", "hypd.tools.aws_info", "hypd.tools.clusters" }
M.FIELDS = { name = true, summary = true, description = true, kind = true, params = true, result = true }

-- define_playbook(name, mod) -> def: a playbook's declared tool
function M.define_playbook(pname, mod)
  local spec = mod.tool
  for k in pairs(spec) do
    if not M.FIELDS[k] then error(string.format("playbook %s: tool.%s is not a tool field", pname, tostring(k)), 0) end
  end
  local def = { name = spec.name, summary = spec.summary, description = spec.description, kind = spec.kind,
    params = spec.params, result = spec.result, playbook = pname }
  if spec.kind == "read" then
    def.run = function(_, params) return mod.main(params) end
  else
    -- a mutating playbook runs as a one-step operation, one at a time per tool and arguments
    def.status_tool = "operation_get"
    def.target = function(params) return "playbook/" .. pname .. "/" .. json.encode(params) end
    def.steps = { { name = "run", run = function(ctx)
      ctx:phase("running playbook " .. pname)
      ctx.state.result = mod.main(ctx.params)
    end } }
  end
  return tool.define(def)
end

-- playbook tools from dir: every *.lua that returns {tool = ..., main = ...}
function M.load_playbooks(dir)
  local names = core.listdir(dir)
  if not names then return 0 end
  local n = 0
  for _, file in ipairs(names) do
    local pname = file:match("^([%w_%-]+)%.lua$")
    if pname then
      local ok, err = pcall(function()
        local mod = playbook.load(pname)
        if type(mod) == "table" and type(mod.tool) == "table" then
          if type(mod.main) ~= "function" then error("playbook " .. pname .. ": a tool needs main(params)", 0) end
          M.define_playbook(pname, mod)
          n = n + 1
        end
      end)
      if not ok then log.error("tools", "playbook %s declares no usable tool: %s", pname, tostring(err)) end
    end
  end
  return n
end

local loaded = false
function M.load()
  if loaded then return end
  loaded = true
  for _, name in ipairs(M.MODULES) do require(name) end
  if config.playbooks_dir then
    local n = M.load_playbooks(config.playbooks_dir)
    if n > 0 then log.info("tools", "%d tools from playbooks in %s", n, config.playbooks_dir) end
  end
end

return M
