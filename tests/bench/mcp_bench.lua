-- make bench: what an agent pays to load hypd's tools. The bytes of the MCP
-- tools/list answer and its estimated tokens (bytes / 4, the usual rule of
-- thumb for JSON; a tokenizer gives within about 20% of it) for the default
-- set, each toolset and all tools, beside the target for the default set.
local t = require "hypd.tap"
local sizes = dofile("tests/lua/toolsets_sizes.lua")
require("hypd.tool.loader").load()

t.test("tools/list bytes and tokens per toolset", function()
  for _, row in ipairs(sizes.measure()) do
    print(string.format("# bench tools/list %-10s %3d tools %8d bytes %7d tokens%s", row.set .. ":", row.tools,
      row.bytes, row.tokens, row.set == "default" and string.format(" (target < %d)", sizes.TARGET) or ""))
  end
  local d = sizes.measure_set("default")
  t.ok(d.tokens < sizes.TARGET, "the default set is under " .. sizes.TARGET .. " tokens: " .. d.tokens)
end)
