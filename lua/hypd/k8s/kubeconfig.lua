-- hypd.k8s.kubeconfig: cluster access from a kubeconfig file (JSON, or the
-- YAML that `aws eks update-kubeconfig` and kubectl write), for clusters
-- hypd did not create. An exec plugin that makes EKS tokens (`aws eks
-- get-token`, `hypd eks-token`, `aws-iam-authenticator token`) is not run:
-- hypd makes the same token itself. Other plugins and client certificates
-- are refused by name.
local core = require "hypd.core"
local errors = require "hypd.errors"
local json = require "hypd.json"
local yaml = require "hypd.k8s.yaml"

local M = {}

local function named(list, name, what, file)
  for _, x in ipairs(list or {}) do
    if x.name == name then return x[what] or {} end
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
  for _, e in ipairs(exec.env or {}) do
    if e.name == name then return e.value end
  end
end

-- eks_of(exec) -> {cluster, region, profile} for the EKS token plugins
local function eks_of(exec)
  local cmd = tostring(exec.command or ""):match("([^/]+)$") or ""
  local args = exec.args or {}
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
  if type(doc) ~= "table" then
    errors.raise("VALIDATION", file .. ": not a kubeconfig: " .. tostring(err and err.message or err))
  end
  context = context or doc["current-context"]
  if type(context) ~= "string" or context == "" then
    errors.raise("VALIDATION", file .. ": no current-context and no context given", { field = "context" })
  end
  local ctx = named(doc.contexts, context, "context", file)
  local cluster = named(doc.clusters, ctx.cluster, "cluster", file)
  local user = ctx.user and named(doc.users, ctx.user, "user", file) or {}
  local out = { server = cluster.server, context = context, namespace = ctx.namespace }
  if type(out.server) ~= "string" or not out.server:match("^https?://") then
    errors.raise("VALIDATION", file .. ": cluster '" .. tostring(ctx.cluster) .. "' has no https server URL",
      { field = "server" })
  end
  out.server = out.server:gsub("/+$", "")
  if cluster["certificate-authority-data"] then
    out.ca_pem = core.b64decode(cluster["certificate-authority-data"])
    if not out.ca_pem then
      errors.raise("VALIDATION", file .. ": certificate-authority-data is not base64",
        { field = "certificate-authority-data" })
    end
  elseif cluster["certificate-authority"] then
    out.ca_file = cluster["certificate-authority"]
  end
  if cluster["insecure-skip-tls-verify"] == true then
    errors.raise("VALIDATION", file .. ": insecure-skip-tls-verify is not supported; give the cluster's CA",
      { field = "insecure-skip-tls-verify" })
  end
  if user["client-certificate-data"] or user["client-certificate"] then
    errors.raise("VALIDATION", file .. ": client certificates are not supported; use a token or an EKS exec plugin",
      { field = "client-certificate" })
  end
  if user.token then
    out.token = user.token
    core.add_secret(user.token)
  elseif user.exec then
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
