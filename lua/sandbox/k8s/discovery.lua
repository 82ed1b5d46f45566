-- sandbox.k8s.discovery: what clients read before they touch an object:
-- /version, /api, /apis, the per-group-version resource lists and the
-- OpenAPI v3 documents kubectl needs for server-side field validation.
local json = require "hypd.json"
local openapi = require "sandbox.k8s.openapi"
local sys = require "hypd.sys"

local M = {}

local PATCH = { ["1.28"] = 15, ["1.29"] = 14, ["1.30"] = 12, ["1.31"] = 9, ["1.32"] = 5, ["1.33"] = 3, ["1.34"] = 1 }

function M.version(k8s_version)
  local major, minor = tostring(k8s_version or "1.34"):match("^(%d+)%.(%d+)")
  local git = string.format("v%s.%s.%d-eks-%s", major, minor, PATCH[k8s_version] or 0,
    sys.digest("sha256", k8s_version or "", "hex"):sub(1, 7))
  return { major = major, minor = minor .. "+", gitVersion = git, emulationMajor = major, emulationMinor = minor,
    gitCommit = sys.digest("sha256", git, "hex"):sub(1, 40), gitTreeState = "clean", buildDate = "2026-10-01T00:00:00Z",
    goVersion = "go1.24.9", compiler = "gc", platform = "linux/amd64" }
end

function M.api()
  return { kind = "APIVersions", versions = { "v1" },
    serverAddressByClientCIDRs = { { clientCIDR = "0.0.0.0/0", serverAddress = "127.0.0.1:443" } } }
end

function M.apis(reg)
  local groups = json.array()
  for _, g in ipairs(reg:groups()) do
    if g.name ~= "" then
      local versions = json.array()
      for _, v in ipairs(g.versions) do versions[#versions + 1] = { groupVersion = g.name .. "/" .. v, version = v } end
      groups[#groups + 1] = { name = g.name, versions = versions, preferredVersion = versions[1] }
    end
  end
  return { kind = "APIGroupList", apiVersion = "v1", groups = groups }
end

function M.group(reg, name)
  for _, g in ipairs(reg:groups()) do
    if g.name == name and name ~= "" then
      local versions = json.array()
      for _, v in ipairs(g.versions) do versions[#versions + 1] = { groupVersion = name .. "/" .. v, version = v } end
      return { kind = "APIGroup", apiVersion = "v1", name = name, versions = versions, preferredVersion = versions[1] }
    end
  end
end

-- the proxy subresources (sandbox.k8s.proxy) and their options kinds
local PROXY = { services = "ServiceProxyOptions", pods = "PodProxyOptions" }

-- resource_list(reg, group, version) -> APIResourceList | nil
function M.resource_list(reg, group, version)
  local out = json.array()
  for _, r in ipairs(reg.list) do
    if r.group == group and r.version == version then
      local short = json.array()
      for i, s in ipairs(r.short) do short[i] = s end
      out[#out + 1] = { name = r.resource, singularName = r.singular, namespaced = r.namespaced, kind = r.kind,
        verbs = r.verbs, shortNames = #short > 0 and short or nil,
        categories = r.categories,
        storageVersionHash = sys.b64encode(sys.digest("sha256", r.group .. r.resource, "raw"):sub(1, 8)) }
      if r.status then
        out[#out + 1] = { name = r.resource .. "/status", singularName = "", namespaced = r.namespaced,
          kind = r.kind, verbs = { "get", "patch", "update" } }
      end
      if r.scale then
        out[#out + 1] = { name = r.resource .. "/scale", singularName = "", namespaced = r.namespaced,
          group = "autoscaling", version = "v1", kind = "Scale", verbs = { "get", "patch", "update" } }
      end
      if r.token then
        out[#out + 1] = { name = r.resource .. "/token", singularName = "", namespaced = true,
          group = "authentication.k8s.io", version = "v1", kind = "TokenRequest", verbs = { "create" } }
      end
      if r.group == "" and PROXY[r.resource] then
        out[#out + 1] = { name = r.resource .. "/proxy", singularName = "", namespaced = r.namespaced,
          kind = PROXY[r.resource], verbs = { "create", "delete", "get", "patch", "update" } }
      end
      if r.log then
        out[#out + 1] = { name = r.resource .. "/log", singularName = "", namespaced = true, kind = "Pod",
          verbs = { "get" } }
        -- the streaming subresources are listed as the API server lists
        -- them; the sandbox refuses them with a Status (sandbox.k8s.api)
        out[#out + 1] = { name = r.resource .. "/eviction", singularName = "", namespaced = true, group = "policy",
          version = "v1", kind = "Eviction", verbs = { "create" } }
        for _, sub in ipairs { "attach", "exec", "portforward" } do
          out[#out + 1] = { name = r.resource .. "/" .. sub, singularName = "", namespaced = true,
            kind = sub == "portforward" and "PodPortForwardOptions" or sub == "exec" and "PodExecOptions"
              or "PodAttachOptions", verbs = { "create", "get" } }
        end
      end
    end
  end
  if #out == 0 then return nil end
  return { kind = "APIResourceList", apiVersion = "v1", groupVersion = group == "" and version or group .. "/" .. version,
    resources = out }
end

local function gv_path(group, version)
  return group == "" and "api/" .. version or "apis/" .. group .. "/" .. version
end

-- openapi_index(reg) -> the /openapi/v3 document
function M.openapi_index(reg)
  local paths = json.object()
  local seen = {}
  for _, r in ipairs(reg.list) do
    local p = gv_path(r.group, r.version)
    if not seen[p] then
      seen[p] = true
      -- the hash changes with what the document holds: the resources, and the CRDs' schemas
      local parts = { p, #reg.list }
      for _, x in ipairs(reg.list) do
        if gv_path(x.group, x.version) == p and x.crd then parts[#parts + 1] = x.crd .. json.encode(x.schema or {}) end
      end
      local hash = sys.digest("sha256", table.concat(parts, "|"), "hex"):sub(1, 16):upper()
      paths[p] = { serverRelativeURL = "/" .. p .. "?hash=" .. hash }
      paths[p].serverRelativeURL = "/openapi/v3/" .. p .. "?hash=" .. hash
    end
  end
  return { paths = paths }
end

-- openapi_v2(k8s_version, accept) -> body, content type: /openapi/v2, the
-- Swagger 2.0 document kubectl before 1.29 reads for apply (it fetches it
-- as gnostic's OpenAPIv2 Document in protobuf). The sandbox serves it with
-- no definitions: kubectl then finds no schema for a kind and builds its
-- patches from the types compiled into it, and reads fields (explain,
-- validation) from OpenAPI v3
function M.openapi_v2(k8s_version, accept)
  local title, version = "Kubernetes", M.version(k8s_version).gitVersion
  if (accept or ""):match("protobuf") then
    local function field(num, s) -- a length-delimited field; the lengths here are < 128
      return string.char(num << 3 | 2, #s) .. s
    end
    -- Document { swagger = 1, info = 2 { title = 1, version = 2 } }
    return field(1, "2.0") .. field(2, field(1, title) .. field(2, version)),
      "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
  end
  return json.encode { swagger = "2.0", info = { title = title, version = version }, paths = json.object(),
    definitions = json.object() }, "application/json"
end

local FIELD_VALIDATION = { name = "fieldValidation", ["in"] = "query", uniqueItems = true,
  description = "fieldValidation instructs the server on how to handle objects in the request containing " ..
    "unknown or duplicate fields.", schema = { type = "string" } }

-- openapi_gv(reg, "api/v1" | "apis/<g>/<v>") -> an OpenAPI 3 document | nil
function M.openapi_gv(reg, path)
  local group, version
  if path:match("^api/[^/]+$") then
    group, version = "", path:match("^api/([^/]+)$")
  else
    group, version = path:match("^apis/([^/]+)/([^/]+)$")
  end
  if not version then return nil end
  local paths, schemas, any = json.object(), json.object(), false
  for _, r in ipairs(reg.list) do
    if r.group == group and r.version == version then
      any = true
      local gvk = { group = group, version = version, kind = r.kind }
      local base = "/" .. path .. (r.namespaced and "/namespaces/{namespace}/" or "/") .. r.resource
      local op = function(verb)
        return { operationId = verb .. r.kind, ["x-kubernetes-action"] = verb,
          ["x-kubernetes-group-version-kind"] = gvk, parameters = { FIELD_VALIDATION },
          responses = { ["200"] = { description = "OK" } } }
      end
      paths[base] = { post = op("post"), get = op("list") }
      paths[base .. "/{name}"] = { get = op("get"), put = op("put"), patch = op("patch"), delete = op("delete") }
    end
  end
  if not any then return nil end
  openapi.schemas(reg, group, version, schemas)
  return { openapi = "3.0.0", info = { title = "Kubernetes", version = "unversioned" }, paths = paths,
    components = { schemas = schemas } }
end

return M
