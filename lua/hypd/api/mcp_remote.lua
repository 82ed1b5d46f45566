-- hypd.api.mcp_remote: the MCP backend of `hypd mcp --api URL`: the tools,
-- operations and resources of a hypd server, through its REST API
-- (hypd.api.rest) with Authorization: Bearer <token>.
--
--   new(url, token) -> backend (see hypd.api.mcp)
--
-- url is the server's base ("http://127.0.0.1:3099"; a trailing /api/v1 is
-- accepted). REST errors {error = {code, message, fields}} come back as the
-- same error tables dispatch.call returns, so MCP answers them with isError; a
-- server that cannot be reached is a CONNECT error naming the URL.
local errors = require "hypd.errors"
local http = require "hypd.http"
local json = require "hypd.json"

local M = {}

M.TIMEOUT = 300      -- seconds one REST call may take (read tools may wait on AWS)
M.LIST_TTL = 30      -- seconds the tool names are trusted before asking again

local function escape(s)
  return (s:gsub("[^%w%-._~]", function(c) return string.format("%%%02X", c:byte()) end))
end

function M.new(url, token)
  local base = tostring(url):gsub("/+$", ""):gsub("/api/v1$", "")
  local api = base .. "/api/v1"
  local names, listed_at = nil, nil
  local b = {}

  -- request(method, path [, body]) -> decoded JSON | nil, err
  local function request(method, path, body)
    local headers = { accept = "application/json" }
    if token and token ~= "" then headers.authorization = "Bearer " .. token end
    local text
    if body ~= nil then
      headers["content-type"] = "application/json"
      text = json.encode(body)
    end
    local resp, err = http.request { method = method, url = api .. path, headers = headers, body = text,
      timeout = M.TIMEOUT, connect_timeout = 10 }
    if not resp then
      return errors.fail(err.code or "CONNECT", "cannot reach hypd at " .. base .. ": " .. tostring(err.message))
    end
    local v = json.decode(resp.body or "")
    if resp.status >= 400 then
      local e = type(v) == "table" and type(v.error) == "table" and v.error or {}
      local msg = type(e.message) == "string" and e.message or ("hypd answered HTTP " .. resp.status)
      if resp.status == 401 then msg = msg .. " (set HYPD_TOKEN to a token of the server at " .. base .. ")" end
      -- the server's error view, whole (an AWS error keeps service, operation, request id and status)
      return errors.fail(type(e.code) == "string" and e.code or "HTTP", msg, { fields = e.fields,
        status = e.status or (not e.service and resp.status or nil), retry_after = e.retry_after,
        service = e.service, operation = e.operation, request_id = e.request_id })
    end
    if v == nil then return errors.fail("JSON", "hypd at " .. base .. " answered with something that is not JSON") end
    return v
  end
  b.request = request

  function b.tools()
    local v, err = request("GET", "/tools")
    if not v then return nil, err end
    local list = type(v.tools) == "table" and v.tools or {}
    names, listed_at = {}, os.time()
    for _, d in ipairs(list) do names[d.name] = d end
    return list
  end

  function b.has_tool(name)
    if not names or (not names[name] and os.time() - listed_at >= M.LIST_TTL) then
      if not b.tools() then return true end -- unreachable: let the call say so
    end
    return names[name] ~= nil
  end

  -- find(name) -> the server's description of the tool (its kind and toolsets) | nil
  function b.find(name)
    if not b.has_tool(name) then return nil end
    return names and type(names[name]) == "table" and names[name] or nil
  end

  function b.call(name, args)
    return request("POST", "/tools/" .. escape(name), args or json.object())
  end

  function b.operation(id)
    return request("GET", "/operations/" .. escape(id))
  end

  function b.operations(limit)
    local v, err = request("GET", "/operations?limit=" .. math.tointeger(limit or 20))
    if not v then return nil, err end
    return type(v.operations) == "table" and v.operations or {}
  end

  return b
end

return M
