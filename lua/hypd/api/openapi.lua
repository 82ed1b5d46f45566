-- hypd.api.openapi: the OpenAPI 3.1 document of the REST API, generated
-- from the tool registry (GET /api/v1/openapi.json). One path per tool,
-- POST /tools/{name}, with the tool's input schema as its request body and
-- its output schema (or the accepted operation, for staged tools) as its
-- answer; every error answer is the Error schema. Schemas are JSON Schema
-- 2020-12, the dialect OpenAPI 3.1 uses.
local config = require "hypd.config"
local json = require "hypd.json"
local tool = require "hypd.tool.registry"

local M = {}

local function ref(name) return { ["$ref"] = "#/components/schemas/" .. name } end
local function resp_ref(name) return { ["$ref"] = "#/components/responses/" .. name } end

local function json_content(schema) return { ["application/json"] = { schema = schema } } end

local ERRORS = {
  { "400", "BadRequest", "Invalid parameters (VALIDATION, with the fields and rules), JSON that does not " ..
    "parse, or a body that is not an object" },
  { "401", "Unauthorized", "No bearer token, or one that is not valid" },
  { "403", "Forbidden", "The token's scope does not allow this call" },
  { "404", "NotFound", "No such tool, operation or route" },
  { "409", "Conflict", "The call conflicts with the current state" },
  { "413", "TooLarge", "The request body is over 1 MiB" },
  { "415", "UnsupportedMediaType", "The request body is not application/json" },
  { "429", "TooManyRequests", "Too many failed authentications; see Retry-After" },
  { "500", "Internal", "A bug in hypd; the error code only (details are in the server log)" },
  { "502", "BadGateway", "AWS or Kubernetes failed (the error names the service, operation and request id)" },
}

local function error_responses(codes)
  local out = {}
  for _, e in ipairs(ERRORS) do
    if not codes or codes[e[1]] then out[e[1]] = resp_ref(e[2]) end
  end
  return out
end

local function components()
  local schemas = {
    Error = { type = "object", required = { "error" }, properties = { error = { type = "object",
      required = { "code", "message" }, properties = {
        code = { type = "string", description = "VALIDATION, UNAUTHORIZED, FORBIDDEN, NOT_FOUND, CONFLICT, " ..
          "THROTTLED, ... or the AWS error code (e.g. ResourceNotFoundException)" },
        message = { type = "string" },
        fields = { type = "array", items = { type = "object", properties = { field = { type = "string" },
          rule = { type = "string" }, message = { type = "string" } } } },
        service = { type = "string" }, operation = { type = "string" }, request_id = { type = "string" },
        status = { type = "integer" }, retry_after = { type = "integer" } } } } },
    Accepted = tool.ACCEPTED,
    Operation = { type = "object", properties = { operation_id = { type = "string" }, tool = { type = "string" },
      target = { type = "string" },
      status = { type = "string", enum = { "running", "succeeded", "failed", "cancelled" } },
      phase = { type = "string" }, steps = { type = "array" }, result = {}, error = {},
      created_at = { type = "number" }, updated_at = { type = "number" }, finished_at = { type = "number" },
      status_tool = { type = "string" } } },
    Tool = { type = "object", properties = { name = { type = "string" },
      kind = { type = "string", enum = { "read", "mutating", "destructive" } },
      scope = { type = "string", enum = { "read", "operate", "admin" } }, summary = { type = "string" },
      description = { type = "string" }, status_tool = { type = "string" }, staged = { type = "boolean" },
      input_schema = { type = "object" }, output_schema = { type = "object" } } },
  }
  local responses = {}
  for _, e in ipairs(ERRORS) do
    responses[e[2]] = { description = e[3], content = json_content(ref("Error")) }
  end
  responses.Unauthorized.headers = { ["WWW-Authenticate"] = { schema = { type = "string" } } }
  responses.TooManyRequests.headers = { ["Retry-After"] = { schema = { type = "integer" } } }
  return { schemas = schemas, responses = responses, securitySchemes = { bearer = { type = "http",
    scheme = "bearer", bearerFormat = "hypd_<43 characters>",
    description = "A token from `hypd token create --scope read|operate|admin --name NAME`" } } }
end

local function tool_path(def)
  local input = tool.input_schema(def)
  input["$schema"] = nil
  local ok
  if def.steps then
    ok = { ["202"] = { description = "Accepted: an operation runs (existing = true when the same call " ..
      "already runs); follow it with " .. tostring(def.status_tool) .. " or GET /operations/{id}",
      content = json_content(ref("Accepted")) } }
  else
    ok = { ["200"] = { description = "The result", content = json_content(tool.output_schema(def)) } }
  end
  for code, r in pairs(error_responses()) do ok[code] = r end
  local prefix = def.name:match("^([a-z]+)_")
  return { post = {
    operationId = def.name, summary = def.summary, description = def.description, tags = { prefix },
    requestBody = { required = false, content = json_content(input) },
    responses = ok,
    ["x-hypd-kind"] = def.kind, ["x-hypd-scope"] = tool.KINDS[def.kind], ["x-hypd-status-tool"] = def.status_tool,
  } }
end

local function get(summary, schema, extra)
  local responses = { ["200"] = { description = "OK", content = json_content(schema) } }
  for code, r in pairs(error_responses { ["401"] = true, ["404"] = true, ["429"] = true, ["500"] = true }) do
    responses[code] = r
  end
  local o = { summary = summary, responses = responses }
  for k, v in pairs(extra or {}) do o[k] = v end
  return o
end

local ID = { name = "id", ["in"] = "path", required = true, schema = { type = "string", pattern = "^op-[0-9a-f]{16}$" } }

-- document() -> the OpenAPI 3.1 document (a table, ready for json.encode)
function M.document()
  local paths = {
    ["/health"] = { get = get("Liveness, version, number of tools and of running operations",
      { type = "object", properties = { ok = { type = "boolean" }, version = { type = "string" },
        tools = { type = "integer" }, operations_running = { type = "integer" } } },
      { security = json.array(), operationId = "health", tags = { "hypd" } }) },
    ["/tools"] = { get = get("The tool registry with input and output JSON Schemas",
      { type = "object", properties = { tools = { type = "array", items = ref("Tool") } } },
      { operationId = "tools_list", tags = { "hypd" } }) },
    ["/operations"] = { get = get("Operations, newest first (operation_list)",
      { type = "object", properties = { operations = { type = "array", items = ref("Operation") } } },
      { operationId = "operations_list", tags = { "hypd" }, parameters = {
        { name = "status", ["in"] = "query", schema = { type = "string",
          enum = { "running", "succeeded", "failed", "cancelled" } } },
        { name = "tool", ["in"] = "query", schema = { type = "string" } },
        { name = "limit", ["in"] = "query", schema = { type = "integer", minimum = 1, maximum = 500 } } } }) },
    ["/operations/{id}"] = { get = get("One operation: status, phase, steps, result or error (operation_get)",
      ref("Operation"), { operationId = "operations_get", tags = { "hypd" }, parameters = { ID,
        { name = "wait_seconds", ["in"] = "query", schema = { type = "integer", minimum = 0, maximum = 300 },
          description = "answer as soon as the phase or status changes, at the latest after this many seconds" } } })
    },
    ["/operations/{id}/events"] = { get = get("One operation's events after a cursor (operation_list_events)",
      tool.output_schema(tool.get("operation_list_events") or { result = { type = "object" } }),
      { operationId = "operations_events", tags = { "hypd" }, parameters = { ID,
        { name = "after", ["in"] = "query", schema = { type = "integer", minimum = 0 } },
        { name = "limit", ["in"] = "query", schema = { type = "integer", minimum = 1, maximum = 1000 } },
        { name = "wait_seconds", ["in"] = "query", schema = { type = "integer", minimum = 0, maximum = 300 } } } })
    },
    ["/operations/{id}/cancel"] = { post = { operationId = "operations_cancel", tags = { "hypd" },
      summary = "Cancel a running operation at its next step boundary (operation_cancel; scope operate)",
      parameters = { ID }, responses = (function()
        local r = error_responses()
        r["200"] = { description = "The operation, cancelled", content = json_content(ref("Operation")) }
        return r
      end)() } },
    ["/playbooks/reload"] = { post = { operationId = "playbooks_reload", tags = { "hypd" },
      summary = "Re-read the playbook directory (scope admin; SIGHUP does the same): a file that does not load " ..
        "is refused with its error and its tools keep their previous version",
      responses = (function()
        local r = error_responses()
        r["200"] = { description = "What was defined, restored to the built-in, removed, and refused",
          content = json_content({ type = "object", properties = { defined = { type = "array" },
            restored = { type = "array" }, removed = { type = "array" }, errors = { type = "array" } } }) }
        return r
      end)() } },
    ["/openapi.json"] = { get = get("This document", { type = "object" },
      { operationId = "openapi", tags = { "hypd" } }) },
  }
  for _, def in ipairs(tool.list()) do paths["/tools/" .. def.name] = tool_path(def) end
  return {
    openapi = "3.1.0",
    info = { title = "hypd", version = config.version,
      description = "The REST API of hypd, a control plane for SageMaker HyperPod on EKS. Every tool of " ..
        "the registry is POST /tools/{name}; staged (long) tools answer 202 with an operation to follow. " ..
        "Prometheus metrics are at /metrics (any token); MCP at /mcp." },
    servers = { { url = "/api/v1" } },
    security = { { bearer = json.array() } },
    tags = { { name = "hypd", description = "The API itself: health, registry, operations" } },
    paths = paths,
    components = components(),
  }
end

return M
