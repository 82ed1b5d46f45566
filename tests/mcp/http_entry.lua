-- The MCP endpoint alone on loopback, for the node clients of tests/mcp
-- (run.sh): `hypd test tests/mcp/http_entry.lua` prints "mcp-port N" once
-- listening, then serves until SIGTERM. No authentication: every request
-- is the read-scope caller "mcp-test" (the conformance suite cannot send a
-- token; hypd serve puts a bearer token in front of /mcp).
--
-- One conformance fixture is added on the MCP side only (it is not a hypd
-- tool and cannot be: the registry takes only hypd's prefixes):
-- test_error_handling, the name the suite's tools-call-error scenario
-- calls, fails with an ordinary error table, so that scenario checks the
-- real path of a failing tool call (isError with the message).
local errors = require "hypd.errors"
local json = require "hypd.json"
local mcp = require "hypd.api.mcp"
local mcp_http = require "hypd.api.mcp_http"
local server = require "hypd.http_server"
local task = require "hypd.task"
require("hypd.tool.loader").load()

local FIXTURE = { name = "test_error_handling", kind = "read", summary = "Conformance fixture: always fails",
  description = "A fixture of the MCP conformance suite (tools-call-error): every call fails.",
  input_schema = { type = "object", properties = json.object() } }

local backend = mcp.local_backend()
local tools, has_tool, call = backend.tools, backend.has_tool, backend.call
function backend.tools()
  local list = tools()
  list[#list + 1] = FIXTURE
  return list
end
function backend.has_tool(name) return name == FIXTURE.name or has_tool(name) end
function backend.call(name, args, caller)
  if name == FIXTURE.name then
    return errors.fail("FAILED", "This tool intentionally returns an error for testing")
  end
  return call(name, args, caller)
end
mcp_http.backend = backend

local CALLER = { name = "mcp-test", scope = "read" }
local srv = assert(server.start { listen = "127.0.0.1:0", handler = function(req)
  if req.path == "/mcp" then return mcp_http.handle(req, CALLER) end
  return { status = 404, headers = { ["content-type"] = "text/plain" }, body = "not found\n" }
end })
io.stdout:write("mcp-port ", srv.port, "\n")
io.stdout:flush()
while true do task.sleep(3600) end
