-- sandbox.k8s.auth: what EKS checks before a Kubernetes request: the
-- bearer token (a presigned STS GetCallerIdentity URL for this cluster's
-- name, at most 15 minutes old, signed by a key the account knows) and the
-- principal's access entry with its access policies.
local awsauth = require "sandbox.auth"
local core = require "hypd.core"
local state = require "sandbox.state"
local sys = require "hypd.sys"

local M = {}
M.WINDOW = 15 * 60

local PARAMS = { action = true, version = true, ["x-amz-algorithm"] = true, ["x-amz-credential"] = true,
  ["x-amz-date"] = true, ["x-amz-expires"] = true, ["x-amz-security-token"] = true, ["x-amz-signature"] = true,
  ["x-amz-signedheaders"] = true }

-- the STS hosts a token may name: AWS's and the sandbox's own endpoint
M.sts_hosts = {}

local function b64url_decode(s)
  s = s:gsub("-", "+"):gsub("_", "/")
  s = s .. string.rep("=", (4 - #s % 4) % 4)
  return sys.b64decode(s)
end

local function reject(why) return nil, why end

-- token(bearer, cluster) -> principal {arn, user_id} | nil, why
function M.token(bearer, cluster)
  local tok = (bearer or ""):match("^[Bb]earer%s+(%S+)$")
  if not tok then return reject("no bearer token") end
  if tok:sub(1, 11) ~= "k8s-aws-v1." then return reject("not an EKS token") end
  if #tok > 4096 then return reject("token too long") end
  local url = b64url_decode(tok:sub(12))
  if not url then return reject("token is not base64url") end
  local scheme, host, path, query = url:match("^(https?)://([^/?]+)(/?[^?]*)%??(.*)$")
  if not scheme then return reject("token is not a URL") end
  local aws_host = host == "sts.amazonaws.com" or host:match("^sts%.[%w-]+%.amazonaws%.com$")
  if not (aws_host and scheme == "https") and not M.sts_hosts[host] then
    return reject("unexpected STS host " .. host)
  end
  local seen = {}
  for pair in query:gmatch("[^&]+") do
    local k = pair:match("^([^=]*)"):lower()
    if not PARAMS[k] then return reject("unexpected parameter " .. k) end
    seen[k] = pair:match("=(.*)$")
  end
  if seen.action ~= "GetCallerIdentity" then return reject("not GetCallerIdentity") end
  local when = awsauth.parse_date(seen["x-amz-date"])
  if not when then return reject("no X-Amz-Date") end
  -- under the virtual clock a token may be signed by the wall clock (another
  -- process) or by this one's: current by either is current
  local function current(now) return now - when <= M.WINDOW and when - now <= M.WINDOW end
  if not current(core.now()) and not (core.virtual() and current(core.wall())) then
    return reject("token expired")
  end
  local signed = (seen["x-amz-signedheaders"] or ""):gsub("%%3[Bb]", ";")
  if not (";" .. signed .. ";"):find(";x-k8s-aws-id;", 1, true) then
    return reject("x-k8s-aws-id is not signed")
  end
  local principal, err = awsauth.verify({ method = "GET", path = path == "" and "/" or path, query = query,
    headers = { host = host, ["x-k8s-aws-id"] = cluster }, body = "" }, "query")
  if not principal then return reject(err.message) end
  return principal
end

local ALL = { get = true, list = true, watch = true, create = true, update = true, patch = true, delete = true,
  deletecollection = true }
local VIEW = { get = true, list = true, watch = true }
local POLICY = "arn:aws:eks::aws:cluster%-access%-policy/(.+)$"

-- principal_arn(arn): an assumed-role session maps to its role
local function principal_arn(arn)
  local acct, role = arn:match("^arn:aws:sts::(%d+):assumed%-role/([^/]+)/")
  if acct then return string.format("arn:aws:iam::%s:role/%s", acct, role) end
  return arn
end

-- user(cluster, region, principal) -> {name, uid, groups, extra, can(verb, r, ns)} | nil (no access entry)
function M.user(cluster, region, principal)
  local arn = principal_arn(principal.arn)
  local e = state.view(region, "eks"):get("access_entry", cluster .. "/" .. arn)
  if not e then return nil end
  local name = (e.username or arn):gsub("{{SessionName}}", principal.arn:match("assumed%-role/[^/]+/(.+)$") or "")
  local masters = false
  local groups = {}
  for _, g in ipairs(e.kubernetesGroups or {}) do
    masters = masters or g == "system:masters"
    groups[#groups + 1] = g
  end
  groups[#groups + 1] = "system:authenticated"
  -- what EKS's authenticator adds to the user it reports (SelfSubjectReview)
  local extra = { arn = { principal.arn }, canonicalArn = { arn },
    principalId = { principal.user_id and principal.user_id:match("^([^:]+)") or "" },
    sessionName = { principal.arn:match("assumed%-role/[^/]+/(.+)$") or "" },
    accessKeyId = principal.access_key and { principal.access_key } or nil }
  local account = arn:match("^arn:aws:iam::(%d+):") or ""
  return { name = name, groups = groups, extra = extra,
    uid = "aws-iam-authenticator:" .. account .. ":" .. (extra.principalId[1] or ""), can = function(verb, r, ns)
    if masters then return true end
    for parn, p in pairs(e.policies or {}) do
      local policy = parn:match(POLICY)
      local scope = p.accessScope or {}
      local in_scope = scope.type ~= "namespace"
      if not in_scope and ns then
        for _, n in ipairs(scope.namespaces or {}) do in_scope = in_scope or n == ns end
      end
      if policy == "AmazonEKSClusterAdminPolicy" then return true end
      if in_scope and (policy == "AmazonEKSAdminPolicy" or policy == "AmazonEKSEditPolicy") and ALL[verb] then
        return true
      end
      -- the view role reads no secrets and reaches no workload (no proxy)
      if in_scope and policy == "AmazonEKSViewPolicy" and VIEW[verb] and r.resource ~= "secrets"
          and r.sub ~= "proxy" then
        return true
      end
    end
    return false
  end }
end

return M
