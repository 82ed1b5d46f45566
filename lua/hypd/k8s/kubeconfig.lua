-- hypd.k8s.kubeconfig: cluster access from a kubeconfig file, for clusters
-- hypd did not create. The file is read as kubectl reads it: JSON, or any
-- YAML (hypd.yaml: anchors, aliases and `<<` merges, flow style, block
-- scalars, comments; the first document of several). Two differences, both
-- refusals rather than guesses: a key written twice in one mapping (kubectl
-- keeps the last) and a key set before a `<<` merge that sets it too.
-- kubectl's YAML 1.1 booleans (yes/on/y...) are read for the one boolean
-- field hypd looks at, insecure-skip-tls-verify.
--
-- An exec plugin that makes EKS tokens (`aws eks get-token`, `hypd
-- eks-token`, `aws-iam-authenticator token`) is not run: hypd makes the same
-- token itself. Other plugins, client certificates and skipped TLS
-- verification are refused by name.
local core = require "hypd.core"
local errors = require "hypd.errors"
local json = require "hypd.json"
local sys = require "hypd.sys"
local yaml = require "hypd.yaml"

local M = {}

-- tbl(v) -> v when it is a table, else {} (absent, null, or not a mapping)
local function tbl(v) return type(v) == "table" and v or {} end

-- str(v, field, file) -> v as a string, nil when absent or null; kubectl
-- refuses other types in its string fields, and so does hypd
local function str(v, field, file)
  if v == nil or v == json.null then return nil end
  if type(v) ~= "string" then
    errors.raise("VALIDATION", string.format("%s: %s must be a string, not %s %s (quote it)", file, field,
      math.type(v) or type(v), tostring(v)), { field = field })
  end
  return v
end

-- kubectl's booleans (go-yaml v2 reads YAML 1.1's yes/no/on/off/y/n too)
local TRUE = { y = true, Y = true, yes = true, Yes = true, YES = true, on = true, On = true, ON = true }
local FALSE = { n = true, N = true, no = true, No = true, NO = true, off = true, Off = true, OFF = true }
local function boolean(v, field, file)
  if v == nil or v == json.null or v == false or FALSE[v] then return false end
  if v == true or TRUE[v] then return true end
  errors.raise("VALIDATION", string.format("%s: %s must be true or false", file, field), { field = field })
end

local function named(list, name, what, file)
  for _, x in ipairs(tbl(list)) do
    if type(x) == "table" and x.name == name then return tbl(x[what]) end
  end
  errors.raise("NOT_FOUND", string.format("%s: no %s named '%s'", file, what, tostring(name)), { field = what })
end

-- arg(args, flag) -> the value after flag (or in flag=value)
local function arg(args, flag)
  for i, a in ipairs(args or {}) do
    if a == flag then return args[i + 1] end
    local v = type(a) == "string" and a:match("^" .. flag:gsub("%-", "%%-") .. "=(.*)$")
    if v then return v end
  end
end

local function exec_env(exec, name)
  for _, e in ipairs(tbl(exec.env)) do
    if type(e) == "table" and e.name == name then return e.value end
  end
end

-- eks_of(exec) -> {cluster, region, profile} for the EKS token plugins
local function eks_of(exec)
  local cmd = tostring(exec.command or ""):match("([^/]+)$") or ""
  local args = {}
  for i, a in ipairs(tbl(exec.args)) do args[i] = tostring(a) end
  local cluster, region
  if cmd == "aws" and (table.concat(args, " "):find("eks get%-token")) then
    cluster = arg(args, "--cluster-name") or arg(args, "--cluster-id")
    region = arg(args, "--region")
  elseif cmd == "hypd" and args[1] == "eks-token" then
    cluster, region = arg(args, "--cluster"), arg(args, "--region")
  elseif cmd == "aws-iam-authenticator" and args[1] == "token" then
    cluster, region = arg(args, "-i") or arg(args, "--cluster-id"), arg(args, "--region")
  end
  if not cluster then return nil end
  return { cluster = cluster, region = region or exec_env(exec, "AWS_REGION"),
    profile = arg(args, "--profile") or exec_env(exec, "AWS_PROFILE") }
end

-- parse(text, file [, context]) -> access {server, ca_pem|ca_file, token|eks, cluster_name, context}
function M.parse(text, file, context)
  file = file or "kubeconfig"
  local doc, err
  if text:match("^%s*{") then doc, err = json.decode(text) else doc, err = yaml.decode(text) end
  if doc == json.null then doc = {} end -- an empty file, as kubectl reads it
  if type(doc) ~= "table" then
    errors.raise("VALIDATION", file .. ": not a kubeconfig: " .. tostring(err and err.message or err),
      { field = "kubeconfig" })
  end
  context = context or str(doc["current-context"], "current-context", file)
  if type(context) ~= "string" or context == "" then
    errors.raise("VALIDATION", file .. ": no current-context and no context given", { field = "context" })
  end
  local ctx = named(doc.contexts, context, "context", file)
  local cluster = named(doc.clusters, str(ctx.cluster, "cluster", file), "cluster", file)
  local user_name = str(ctx.user, "user", file)
  local user = user_name and named(doc.users, user_name, "user", file) or {}
  local out = { server = str(cluster.server, "server", file), context = context,
    namespace = str(ctx.namespace, "namespace", file) }
  if not out.server or not out.server:match("^https?://") then
    errors.raise("VALIDATION", file .. ": cluster '" .. tostring(ctx.cluster) .. "' has no https server URL",
      { field = "server" })
  end
  out.server = out.server:gsub("/+$", "")
  local ca_data = str(cluster["certificate-authority-data"], "certificate-authority-data", file)
  if ca_data then
    out.ca_pem = sys.b64decode((ca_data:gsub("[\r\n]", ""))) -- line breaks are ignored, as in Go
    if not out.ca_pem then
      errors.raise("VALIDATION", file .. ": certificate-authority-data is not base64",
        { field = "certificate-authority-data" })
    end
  else
    out.ca_file = str(cluster["certificate-authority"], "certificate-authority", file)
  end
  if boolean(cluster["insecure-skip-tls-verify"], "insecure-skip-tls-verify", file) then
    errors.raise("VALIDATION", file .. ": insecure-skip-tls-verify is not supported; give the cluster's CA",
      { field = "insecure-skip-tls-verify" })
  end
  if user["client-certificate-data"] or user["client-certificate"] then
    errors.raise("VALIDATION", file .. ": client certificates are not supported; use a token or an EKS exec plugin",
      { field = "client-certificate" })
  end
  local token = str(user.token, "token", file)
  if token then
    out.token = token
    core.add_secret(token)
  elseif type(user.exec) == "table" then
    out.eks = eks_of(user.exec)
    if not out.eks then
      errors.raise("VALIDATION", string.format("%s: the exec plugin '%s' is not one hypd understands (aws eks " ..
        "get-token, hypd eks-token, aws-iam-authenticator token)", file, tostring(user.exec.command)),
        { field = "exec" })
    end
  end
  return out
end

-- load(path [, context]) -> access (see parse)
function M.load(path, context)
  local f, err = io.open(path, "rb")
  if not f then
    errors.raise("NOT_FOUND", "cannot read kubeconfig " .. path .. ": " .. tostring(err), { field = "kubeconfig" })
  end
  local text = f:read("a")
  f:close()
  return M.parse(text, path, context)
end

return M
