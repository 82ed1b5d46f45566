-- hypd.aws.classify: which AWS operation a signed request is, read from
-- the request itself (never from what its sender says it is), so the
-- guard (hypd.tool.guard_request) checks and audits what AWS will do:
--
--   * the service from the signing name (req.aws.service): the models
--     that sign as it ("sagemaker" is SageMaker and SageMaker Runtime);
--   * JSON protocol (SageMaker, FSx, SSM, Logs, Service Quotas): the
--     X-Amz-Target header, "<targetPrefix>.<Operation>";
--   * query and EC2 protocols (EC2, IAM, STS, CloudFormation): Action=
--     in the URL query and in the form body; two different Actions are
--     refused (which one AWS reads is not ours to guess);
--   * REST (EKS, S3, SageMaker Runtime): the method and path against the
--     model's requestUri templates, compiled once per service into a trie
--     of path segments (literal, {label}, greedy {Key+}), so matching costs
--     the path's length; the template's static query keys ("?tagging",
--     "?list-type=2") and the input's query and header members present
--     make the most specific match win (one whose required query or header
--     members are missing is another operation's); a tie of operations is
--     returned as every candidate (class: the highest among them), and the
--     guard needs one of them declared and the kind to allow that class;
--   * sagemaker-mlflow (no botocore model): method and path in REST_PATHS,
--     classed by REST_ACTIONS.
--
--   classify.request(req) -> { service, operation, class, candidates } | nil, why
--     service: the IAM prefix ("sagemaker" for SageMaker Runtime too);
--     candidates: { {service, operation, class}, ... } (one, or a tie);
--     why: the request maps to no modelled operation (a sentence)
--   classify.rest_action(service, method, path) -> the REST_PATHS action | nil
local M = {}

-- the MLflow REST API a managed MLflow tracking server serves, as the
-- IAM actions its calls need (sagemaker-mlflow:<Action>)
local MLFLOW = "/api/2.0/mlflow/"
M.REST_PATHS = {
  ["sagemaker-mlflow"] = {
    ["GET " .. MLFLOW .. "experiments/get"] = "GetExperiment",
    ["GET " .. MLFLOW .. "experiments/get-by-name"] = "GetExperimentByName",
    ["GET " .. MLFLOW .. "experiments/search"] = "SearchExperiments",
    ["POST " .. MLFLOW .. "experiments/search"] = "SearchExperiments",
    ["POST " .. MLFLOW .. "experiments/create"] = "CreateExperiment",
    ["GET " .. MLFLOW .. "runs/get"] = "GetRun",
    ["POST " .. MLFLOW .. "runs/search"] = "SearchRuns",
    ["GET " .. MLFLOW .. "metrics/get-history"] = "GetMetricHistory",
    ["POST " .. MLFLOW .. "runs/create"] = "CreateRun",
    ["POST " .. MLFLOW .. "runs/update"] = "UpdateRun",
    ["POST " .. MLFLOW .. "runs/log-metric"] = "LogMetric",
    ["POST " .. MLFLOW .. "runs/log-batch"] = "LogBatch",
    ["POST " .. MLFLOW .. "runs/log-parameter"] = "LogParam",
    ["POST " .. MLFLOW .. "runs/set-tag"] = "SetTag",
  },
}

-- services hypd calls by REST without a botocore model (hypd.aws.signed):
-- the IAM actions it uses, each with its class (SageMaker managed MLflow's
-- MLflow API: IAM's Read and List actions are reads, Write ones mutate)
M.REST_ACTIONS = {
  ["sagemaker-mlflow"] = { GetExperiment = "read", GetExperimentByName = "read", SearchExperiments = "read",
    GetRun = "read", SearchRuns = "read", GetMetricHistory = "read", CreateExperiment = "mutating",
    CreateRun = "mutating", UpdateRun = "mutating", LogMetric = "mutating", LogBatch = "mutating",
    LogParam = "mutating", SetTag = "mutating" },
}

-- the models hypd has, each under the name requests sign with, and the
-- IAM prefix of its actions where that is not the model's name
local MODELS = { "sagemaker", "sagemaker-runtime", "eks", "ec2", "iam", "sts", "s3", "fsx", "ssm", "cloudformation",
  "logs", "servicequotas", "pricing" }
local IAM_PREFIX = { ["sagemaker-runtime"] = "sagemaker" }

local by_signing -- signing name -> { {id, model}, ... }
local function signers(name)
  if not by_signing then
    by_signing = {}
    for _, id in ipairs(MODELS) do
      local m = require("hypd.aws.models." .. id) -- the models, read once, when first classifying
      local s = m.metadata.signingName or m.metadata.endpointPrefix
      by_signing[s] = by_signing[s] or {}
      table.insert(by_signing[s], { id = id, model = m })
    end
  end
  return by_signing[name]
end

-- percent-decoding of a query key or value ("+" is a space in a form)
local function unescape(s)
  return (s:gsub("+", " "):gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end))
end

-- form(text, out): the decoded key=value pairs of a query or form body
local function form(text, out)
  for part in (text or ""):gmatch("[^&]+") do
    local k, v = part:match("^([^=]*)=?(.*)$")
    out[#out + 1] = { unescape(k), unescape(v) }
  end
  return out
end

-- a path segment with its unreserved escapes decoded ("%65" is "e"), so
-- "/clust%65rs" is "/clusters", as the service reads it; "%2F" stays
local function segment(s)
  return (s:gsub("%%(%x%x)", function(h)
    local c = string.char(tonumber(h, 16))
    if c:match("[%w%-%._~]") then return c end
  end))
end

-- split(path) -> its segments | nil when it has a "." or ".." segment
-- (which a client or proxy may rewrite after the check)
function M.segments(path)
  local segs = {}
  if path == "/" or path == "" then return segs end
  for s in (path:sub(2) .. "/"):gmatch("([^/]*)/") do
    s = segment(s)
    if s == "." or s == ".." then return nil end
    segs[#segs + 1] = s
  end
  return segs
end

-- the REST templates of a model as a trie per method:
--   node = { lit = { seg = node }, label = node, greedy = { t }, ops = { t } }
--   t = { name, op, statics = { {key, value|nil} }, literals, query = {wire names}, headers = {lower names} }
local tries = setmetatable({}, { __mode = "k" })
local function trie(model)
  local root = tries[model]
  if root then return root end
  root = {}
  local function node() return { lit = {}, ops = {}, greedy = {} } end
  for name, op in pairs(model.operations) do
    if op.uri and op.method then
      local path, static = op.uri:match("^([^?]*)%??(.*)$")
      local t = { name = name, op = op, statics = {}, literals = 0, query = {}, headers = {} }
      for part in static:gmatch("[^&]+") do
        local k, v = part:match("^([^=]*)=(.*)$")
        t.statics[#t.statics + 1] = k and { k, v } or { part }
      end
      local shape = op.input and model.shapes[op.input]
      local required = {}
      for _, r in ipairs(shape and shape.required or {}) do required[r] = true end
      t.need = {} -- required query and header members: without them it is another operation
      for _, m in ipairs(shape and shape[2] or {}) do
        if m.loc == "querystring" and m.name then t.query[#t.query + 1] = m.name end
        if m.loc == "header" and m.name then t.headers[#t.headers + 1] = m.name:lower() end
        if required[m[1]] and (m.loc == "querystring" or m.loc == "header") and m.name then
          t.need[#t.need + 1] = { m.loc, m.loc == "header" and m.name:lower() or m.name }
        end
      end
      root[op.method] = root[op.method] or node()
      local n = root[op.method]
      for seg in (path == "/" and "" or path:sub(2) .. "/"):gmatch("([^/]*)/") do
        if seg:match("^{.*%+}$") then
          n.greedy[#n.greedy + 1] = t
          n = nil
          break
        elseif seg:match("^{.*}$") then
          n.label = n.label or node()
          n = n.label
        else
          t.literals = t.literals + 1
          n.lit[seg] = n.lit[seg] or node()
          n = n.lit[seg]
        end
      end
      if n then n.ops[#n.ops + 1] = t end
    end
  end
  tries[model] = root
  return root
end

-- walk(n, segs, i, out): every template that matches segs from i on
local function walk(n, segs, i, out)
  if i > #segs then
    for _, t in ipairs(n.ops) do out[#out + 1] = t end
    return
  end
  if #n.greedy > 0 and segs[i] ~= "" then
    for _, t in ipairs(n.greedy) do out[#out + 1] = t end
  end
  local lit = n.lit[segs[i]]
  if lit then walk(lit, segs, i + 1, out) end
  if n.label and segs[i] ~= "" then walk(n.label, segs, i + 1, out) end
end

-- score(t, q, headers) -> how specifically t matches (nil: a static
-- query key, or a required query or header member, is missing)
local function score(t, q, headers)
  local s = t.literals * 10
  for _, st in ipairs(t.statics) do
    local v = q[st[1]]
    if v == nil or (st[2] ~= nil and v ~= st[2]) then return nil end
    s = s + 1000
  end
  for _, n in ipairs(t.need) do
    if (n[1] == "header" and headers or q)[n[2]] == nil then return nil end
  end
  for _, k in ipairs(t.query) do if q[k] ~= nil then s = s + 1 end end
  for _, k in ipairs(t.headers) do if headers[k] ~= nil then s = s + 1 end end
  return s
end

-- rest(model, method, segs, q, headers) -> the best templates (a tie: several)
local function rest(model, method, segs, q, headers)
  local root = trie(model)[method]
  if not root then return {} end
  local found, best, top = {}, {}, nil
  walk(root, segs, 1, found)
  for _, t in ipairs(found) do
    local s = score(t, q, headers)
    if s and (not top or s > top) then
      top, best = s, { t }
    elseif s and s == top then
      best[#best + 1] = t
    end
  end
  return best
end

-- parse(url) -> host, path, query text
local function parse(url)
  local host, rest_ = url:match("^[%a][%w+.-]*://([^/?#]*)(.*)$")
  if not host then return nil end
  local path, query = rest_:match("^([^?#]*)%??([^#]*)")
  if path == "" then path = "/" end
  return host:lower(), path, query
end

local function candidate(id, name, op)
  return { service = IAM_PREFIX[id] or id, model = id, operation = name, class = op.class or "deleting" }
end

function M.rest_action(service, method, path)
  local t = M.REST_PATHS[service]
  return t and t[method .. " " .. path]
end

-- virtual_bucket(host) -> true when an S3 host names a bucket in front of
-- the service's own name ("b.s3.us-west-2.amazonaws.com"); an IP, localhost
-- or a host that starts with "s3" is path style
local function virtual_bucket(host)
  local name = host:gsub(":%d+$", "")
  if name:match("^[%d.]+$") or name == "localhost" or name:find("^%[") or name:match("^s3[.-]") then return false end
  return name:find(".", 1, true) ~= nil
end

function M.request(req)
  local signing = req.aws.service
  local method = (req.method or "GET"):upper()
  local host, path, qtext = parse(req.url)
  if not host then return nil, "its url is not http(s)://host/path" end
  local headers = {}
  for k, v in pairs(req.headers or {}) do headers[k:lower()] = tostring(v) end
  local qpairs = form(qtext, {})
  local q = {}
  for _, p in ipairs(qpairs) do if q[p[1]] == nil then q[p[1]] = p[2] end end

  local rest_paths = M.REST_PATHS[signing]
  if rest_paths then
    local action = rest_paths[method .. " " .. path]
    if not action then
      return nil, string.format("%s %s is none of the %s API calls hypd knows", method, path, signing)
    end
    local class = M.REST_ACTIONS[signing][action] or "deleting"
    local c = { service = signing, model = signing, operation = action, class = class }
    c.candidates = { c }
    return c
  end
  local list = signers(signing)
  if not list then return nil, "it signs for '" .. tostring(signing) .. "', a service hypd has no model of" end

  local found, seen = {}, {}
  local function add(c)
    local key = c.service .. ":" .. c.operation
    if not seen[key] then seen[key] = true; found[#found + 1] = c end
  end
  for _, s in ipairs(list) do
    local model, proto = s.model, s.model.metadata.protocol
    if proto == "json" then
      local target = headers["x-amz-target"]
      local prefix, name = (target or ""):match("^(.*)%.([^.]+)$")
      local op = prefix == model.metadata.targetPrefix and model.operations[name]
      if op then add(candidate(s.id, name, op)) end
    elseif proto == "query" or proto == "ec2" then
      local actions, distinct = {}, {}
      for _, p in ipairs(form(req.body, form(qtext, {}))) do
        -- any spelling of the key: which one a front end reads is not ours to guess
        if p[1]:lower() == "action" and not actions[p[2]] then actions[p[2]] = true; distinct[#distinct + 1] = p[2] end
      end
      if #distinct > 1 then
        return nil, "it names more than one Action (" .. table.concat(distinct, ", ") .. ")"
      end
      local op = distinct[1] and model.operations[distinct[1]]
      if op then add(candidate(s.id, distinct[1], op)) end
    else
      -- a virtual-hosted S3 request's bucket is in its host: read its path
      -- as the template's, with the bucket in front
      if s.id == "s3" and virtual_bucket(host) then path = "/bucket" .. (path == "/" and "" or path) end
      local segs = M.segments(path)
      if not segs then return nil, "its path has a '.' or '..' segment" end
      local best = rest(model, method, segs, q, headers)
      for _, t in ipairs(best) do add(candidate(s.id, t.name, t.op)) end
    end
  end
  if #found == 0 then
    return nil, string.format("%s %s signed for %s is no operation of its model", method, path, signing)
  end
  table.sort(found, function(a, b) return a.operation < b.operation end)
  local RANK = { read = 1, mutating = 2, deleting = 3 }
  local top = found[1]
  for _, c in ipairs(found) do if (RANK[c.class] or 3) > (RANK[top.class] or 3) then top = c end end
  top.candidates = found
  return top
end

return M
