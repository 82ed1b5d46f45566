-- The size of MCP tools/list per toolset (tests/bench/mcp_bench.lua and
-- tests/lua/toolsets_test.lua share it): the JSON text of the tools/list
-- result a session with only that set gets, and tokens estimated as
-- bytes / 4 (rounded up).
local json = require "hypd.json"
local mcp = require "hypd.api.mcp"
local toolsets = require "hypd.tool.toolsets"

local M = {}

M.TARGET = 25000 -- tokens: the default set's budget

function M.measure_set(name)
  local s = mcp.session { caller = { name = "size", scope = "admin", front = "test" },
    toolsets = assert(toolsets.parse(name)) }
  local r = assert(mcp.handle(s, { jsonrpc = "2.0", id = 1, method = "tools/list" }).result)
  local bytes = #json.encode(r)
  return { set = name, tools = #r.tools, bytes = bytes, tokens = (bytes + 3) // 4 }
end

function M.measure()
  local out = {}
  for i, n in ipairs(toolsets.NAMES) do out[i] = M.measure_set(n) end
  return out
end

return M
