-- sandbox.mlflow.store: the tracking store of a simulated SageMaker managed
-- MLflow tracking server (experiments, runs, params, tags, metric
-- histories), kept in the sandbox state beside the server's record
-- (service sagemaker, kind "mlflow", id the server name):
--
--   mlflow-seq:<server>     id "seq"       {exp = last experiment id}
--   mlflow-exp:<server>     id <exp id>    an experiment (MLflow's JSON)
--   mlflow-run:<server>     id <run id>    {info, params, tags, latest}
--   mlflow-metric:<server>  id <run>/<key> {points = [{value, timestamp, step}]}
--
-- Every function takes (view, server record, input) and answers MLflow's
-- REST response object, or raises {mlflow = true, code, message, status}
-- with MLflow's error codes (RESOURCE_ALREADY_EXISTS 400,
-- RESOURCE_DOES_NOT_EXIST 404, INVALID_PARAMETER_VALUE 400). The HTTP front
-- (sandbox.mlflow.http) and the simulated trainers (sandbox.mlflow.report)
-- share it. Experiment "0" (Default) exists from the start, as on a new
-- server.
local core = require "hypd.core"
local json = require "hypd.json"
local sys = require "hypd.sys"

local M = {}

M.READY = { Created = true, Updated = true, Started = true }
M.STATUSES = { RUNNING = true, SCHEDULED = true, FINISHED = true, FAILED = true, KILLED = true }
M.MAX_RESULTS = 1000 -- SearchRuns' and SearchExperiments' largest page (and default)
M.HISTORY_MAX = 25000

local STATUS = { RESOURCE_ALREADY_EXISTS = 400, RESOURCE_DOES_NOT_EXIST = 404, INVALID_PARAMETER_VALUE = 400 }

local function fail(code, message)
  error({ mlflow = true, code = code, message = message, status = STATUS[code] or 400 }, 0)
end
M.fail = fail

local function ms() return math.floor(core.now() * 1000) end

local function hex(n)
  return (sys.random_bytes((n + 1) // 2):gsub(".", function(c) return string.format("%02x", c:byte()) end)):sub(1, n)
end

local function kinds(s)
  local n = s.TrackingServerName
  return "mlflow-exp:" .. n, "mlflow-run:" .. n, "mlflow-metric:" .. n, "mlflow-seq:" .. n
end

local function required(input, name, kind)
  local v = input[name]
  if v == nil or v == json.null or v == "" then
    fail("INVALID_PARAMETER_VALUE", "Missing value for required parameter '" .. name .. "'. See the API docs for " ..
      "more information about request parameters.")
  end
  if kind == "string" and type(v) ~= "string" then
    fail("INVALID_PARAMETER_VALUE", "Invalid value " .. json.encode(v) .. " for parameter '" .. name ..
      "' supplied: Value must be a string.")
  end
  return v
end

-- a metric, param or tag key: MLflow's rule for names
local function check_key(what, key)
  if type(key) ~= "string" or key == "" or #key > 250 or not key:match("^[%w_%-%. :/]+$") or key:find("%.%.")
      or key:sub(1, 1) == "/" then
    fail("INVALID_PARAMETER_VALUE", string.format("Invalid %s name: '%s'. Names may only contain alphanumerics, " ..
      "underscores (_), dashes (-), periods (.), spaces ( ), colon(:) and slashes (/).", what, tostring(key)))
  end
end

local function number(name, v, int)
  if type(v) == "string" and tonumber(v) then v = tonumber(v) end
  if type(v) ~= "number" or (int and math.type(v) ~= "integer" and v ~= math.floor(v)) then
    fail("INVALID_PARAMETER_VALUE", "Invalid value " .. json.encode(v == nil and json.null or v) ..
      " for parameter '" .. name .. "' supplied.")
  end
  return int and math.floor(v) or v
end

local function tags_array(map)
  local keys = {}
  for k in pairs(map or {}) do keys[#keys + 1] = k end
  table.sort(keys)
  local out = json.array()
  for i, k in ipairs(keys) do out[i] = { key = k, value = map[k] } end
  return out
end

-- the Default experiment, made the first time a server's store is read
local function seq(v, s)
  local ek, _, _, sk = kinds(s)
  local q = v:get(sk, "seq")
  if not q then
    q = { exp = 0 }
    v:put(sk, "seq", q)
    local t = math.floor((s.CreationTime or core.now()) * 1000)
    v:put(ek, "0", { experiment_id = "0", name = "Default", artifact_location = (s.ArtifactStoreUri or "") .. "/0",
      lifecycle_stage = "active", creation_time = t, last_update_time = t, tags = {} })
  end
  return q
end

local function exp_json(e)
  local out = { experiment_id = e.experiment_id, name = e.name, artifact_location = e.artifact_location,
    lifecycle_stage = e.lifecycle_stage, creation_time = e.creation_time, last_update_time = e.last_update_time }
  if next(e.tags or {}) then out.tags = tags_array(e.tags) end
  return out
end

local function experiment(v, s, id)
  seq(v, s)
  local ek = kinds(s)
  local e = v:get(ek, tostring(id))
  if not e then fail("RESOURCE_DOES_NOT_EXIST", "No Experiment with id=" .. tostring(id) .. " exists") end
  return e
end

local function by_name(v, s, name)
  seq(v, s)
  local ek = kinds(s)
  for _, e in ipairs(v:list(ek)) do
    if e.name == name then return e end
  end
end

local function run_of(v, s, id)
  local _, rk = kinds(s)
  local r = type(id) == "string" and v:get(rk, id)
  if not r then fail("RESOURCE_DOES_NOT_EXIST", "Run with id=" .. tostring(id) .. " not found") end
  return r
end

local function run_json(r)
  local metrics = json.array()
  local keys = {}
  for k in pairs(r.latest or {}) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local p = r.latest[k]
    metrics[#metrics + 1] = { key = k, value = p.value, timestamp = p.timestamp, step = p.step }
  end
  local data = json.object()
  if #metrics > 0 then data.metrics = metrics end
  if next(r.params or {}) then data.params = tags_array(r.params) end
  if next(r.tags or {}) then data.tags = tags_array(r.tags) end
  local info = {}
  for k, x in pairs(r.info) do info[k] = x end
  return { info = info, data = data, inputs = json.object() }
end

local function put_run(v, s, r)
  local _, rk = kinds(s)
  v:put(rk, r.info.run_id, r)
end

-- experiments ------------------------------------------------------------------

function M.create_experiment(v, s, input)
  local name = required(input, "name", "string")
  if by_name(v, s, name) then
    fail("RESOURCE_ALREADY_EXISTS", "Experiment '" .. name .. "' already exists.")
  end
  local q = seq(v, s)
  q.exp = q.exp + 1
  local ek, _, _, sk = kinds(s)
  v:put(sk, "seq", q)
  local id = tostring(q.exp)
  local tags = {}
  for _, t in ipairs(type(input.tags) == "table" and input.tags or {}) do
    check_key("tag", t.key)
    tags[t.key] = tostring(t.value or "")
  end
  local now = ms()
  v:put(ek, id, { experiment_id = id, name = name, lifecycle_stage = "active", creation_time = now,
    last_update_time = now, tags = tags,
    artifact_location = type(input.artifact_location) == "string" and input.artifact_location ~= "" and
      input.artifact_location or ((s.ArtifactStoreUri or "") .. "/" .. id) })
  return { experiment_id = id }
end

function M.get_experiment(v, s, input)
  return { experiment = exp_json(experiment(v, s, required(input, "experiment_id"))) }
end

function M.get_experiment_by_name(v, s, input)
  local name = required(input, "experiment_name", "string")
  local e = by_name(v, s, name)
  if not e then fail("RESOURCE_DOES_NOT_EXIST", "Could not find experiment with name '" .. name .. "'") end
  return { experiment = exp_json(e) }
end

-- offset page tokens, as MLflow's stores write them (base64 of {"offset": N})
local function page(list, input)
  local max = input.max_results == nil and M.MAX_RESULTS or number("max_results", input.max_results, true)
  if max < 1 or max > 50000 then
    fail("INVALID_PARAMETER_VALUE", "Invalid value " .. max .. " for parameter 'max_results' supplied. It must be " ..
      "a positive integer no greater than 50000")
  end
  local offset = 0
  if type(input.page_token) == "string" and input.page_token ~= "" then
    local ok, t = pcall(function() return json.decode(sys.b64decode(input.page_token)) end)
    offset = ok and type(t) == "table" and math.tointeger(t.offset) or nil
    if not offset or offset < 0 then fail("INVALID_PARAMETER_VALUE", "Invalid page token, could not base64-decode") end
  end
  local out = json.array()
  for i = offset + 1, math.min(#list, offset + max) do out[#out + 1] = list[i] end
  local nxt = offset + max < #list and sys.b64encode(json.encode { offset = offset + max }) or nil
  return out, nxt
end

-- filter(text) -> { {entity, key, op, value} }: MLflow's search syntax, the
-- comparisons joined by AND (=, !=, LIKE, ILIKE; numbers for metrics)
local function parse_filter(text)
  local out = {}
  if type(text) ~= "string" or text:match("^%s*$") then return out end
  local rest = text
  while true do
    local ident, op, val, tail
    ident, op, tail = rest:match("^%s*([%w_%.`\"%-:/]+)%s*([!<>=]=?)%s*(.*)$")
    if not ident then ident, op, tail = rest:match("^%s*([%w_%.`\"%-:/]+)%s+([Ii]?[Ll][Ii][Kk][Ee])%s+(.*)$") end
    if not ident then fail("INVALID_PARAMETER_VALUE", "Invalid filter '" .. text .. "'") end
    local quoted
    quoted, val = tail:match("^'([^']*)'(.*)$")
    if not quoted then quoted, val = tail:match('^"([^"]*)"(.*)$') end
    if not quoted then quoted, val = tail:match("^([%d%.eE+%-]+)(.*)$") end
    val, tail = quoted, val
    if not val then fail("INVALID_PARAMETER_VALUE", "Invalid filter '" .. text .. "': expected a quoted value") end
    ident = ident:gsub("[`\"]", "")
    local entity, key = ident:match("^([%w_]+)%.(.+)$")
    if not entity then entity, key = "attributes", ident end
    local ENT = { attribute = "attributes", attributes = "attributes", attr = "attributes", run = "attributes",
      metric = "metrics", metrics = "metrics", param = "params", params = "params", parameter = "params",
      tag = "tags", tags = "tags" }
    if not ENT[entity] then fail("INVALID_PARAMETER_VALUE", "Invalid entity type '" .. entity .. "'") end
    out[#out + 1] = { entity = ENT[entity], key = key, op = op:upper(), value = val }
    if tail:match("^%s*$") then break end
    rest = tail:match("^%s+[Aa][Nn][Dd]%s+(.*)$")
    if not rest then fail("INVALID_PARAMETER_VALUE", "Invalid filter '" .. text .. "': only AND joins comparisons") end
  end
  return out
end

local function like(s, pat, fold)
  if fold then s, pat = s:lower(), pat:lower() end
  local lp = "^" .. pat:gsub("[%^%$%(%)%.%[%]%*%+%-%?]", "%%%0"):gsub("%%%%", "\0"):gsub("%%", ".*"):gsub("_", ".")
    :gsub("%z", "%%%%") .. "$"
  return s:match(lp) ~= nil
end

local function compare(have, op, want)
  if have == nil then return false end
  if op == "LIKE" then return like(tostring(have), want) end
  if op == "ILIKE" then return like(tostring(have), want, true) end
  if type(have) == "number" then want = tonumber(want) if not want then return false end end
  if op == "=" then return have == want elseif op == "!=" then return have ~= want end
  if type(have) ~= type(want) then return false end
  if op == "<" then return have < want elseif op == "<=" then return have <= want
  elseif op == ">" then return have > want elseif op == ">=" then return have >= want end
  return false
end

function M.search_experiments(v, s, input)
  seq(v, s)
  local ek = kinds(s)
  local conds = parse_filter(input.filter)
  local all = {}
  for _, e in ipairs(v:list(ek)) do
    local ok = e.lifecycle_stage == "active" or input.view_type == "ALL" or input.view_type == "DELETED_ONLY"
    for _, c in ipairs(conds) do
      local have = c.entity == "tags" and (e.tags or {})[c.key] or e[c.key]
      if not compare(have, c.op, c.value) then ok = false end
    end
    if ok then all[#all + 1] = e end
  end
  table.sort(all, function(a, b)
    if a.last_update_time ~= b.last_update_time then return a.last_update_time > b.last_update_time end
    return tonumber(a.experiment_id) < tonumber(b.experiment_id)
  end)
  for i, e in ipairs(all) do all[i] = exp_json(e) end
  local list, nxt = page(all, input)
  return { experiments = list, next_page_token = nxt }
end

-- runs -------------------------------------------------------------------------

function M.create_run(v, s, input)
  local e = experiment(v, s, required(input, "experiment_id"))
  if e.lifecycle_stage ~= "active" then
    fail("INVALID_PARAMETER_VALUE", "The experiment " .. e.experiment_id .. " must be in the 'active' state.")
  end
  local id = hex(32)
  local tags = {}
  for _, t in ipairs(type(input.tags) == "table" and input.tags or {}) do
    check_key("tag", t.key)
    tags[t.key] = tostring(t.value or "")
  end
  local name = type(input.run_name) == "string" and input.run_name ~= "" and input.run_name or tags["mlflow.runName"]
    or ("run-" .. id:sub(1, 8))
  tags["mlflow.runName"] = name
  local r = { info = { run_id = id, run_uuid = id, run_name = name, experiment_id = e.experiment_id,
    user_id = type(input.user_id) == "string" and input.user_id or "", status = "RUNNING",
    start_time = input.start_time and number("start_time", input.start_time, true) or ms(),
    artifact_uri = e.artifact_location .. "/" .. id .. "/artifacts", lifecycle_stage = "active" },
    params = {}, tags = tags, latest = {} }
  put_run(v, s, r)
  return { run = run_json(r) }
end

function M.update_run(v, s, input)
  local r = run_of(v, s, required(input, "run_id", "string"))
  if input.status ~= nil then
    if not M.STATUSES[input.status] then
      fail("INVALID_PARAMETER_VALUE", "Invalid value " .. json.encode(input.status) .. " for parameter 'status' " ..
        "supplied.")
    end
    r.info.status = input.status
  end
  if input.end_time ~= nil then r.info.end_time = number("end_time", input.end_time, true) end
  if type(input.run_name) == "string" and input.run_name ~= "" then
    r.info.run_name = input.run_name
    r.tags["mlflow.runName"] = input.run_name
  end
  put_run(v, s, r)
  return { run_info = run_json(r).info }
end

function M.get_run(v, s, input)
  return { run = run_json(run_of(v, s, required(input, "run_id", "string"))) }
end

local function active(r)
  if r.info.lifecycle_stage ~= "active" then
    fail("INVALID_PARAMETER_VALUE", "The run " .. r.info.run_id .. " must be in the 'active' state. Current state " ..
      "is " .. r.info.lifecycle_stage .. ".")
  end
end

-- add_metrics(v, s, r, list): appends each {key, value, timestamp, step}
local function add_metrics(v, s, r, list)
  local _, _, mk = kinds(s)
  local by = {}
  for _, m in ipairs(list) do
    check_key("metric", m.key)
    local p = { value = number("value", m.value), timestamp = number("timestamp", m.timestamp, true),
      step = m.step == nil and 0 or number("step", m.step, true) }
    by[m.key] = by[m.key] or {}
    table.insert(by[m.key], p)
  end
  for key, points in pairs(by) do
    local h = v:get(mk, r.info.run_id .. "/" .. key) or { points = {} }
    for _, p in ipairs(points) do
      h.points[#h.points + 1] = p
      local l = r.latest[key]
      -- the latest value: the greatest step, then timestamp (MLflow's rule)
      if not l or p.step > l.step or (p.step == l.step and p.timestamp >= l.timestamp) then r.latest[key] = p end
    end
    v:put(mk, r.info.run_id .. "/" .. key, h)
  end
end

local function add_params(r, list)
  for _, p in ipairs(list) do
    check_key("param", p.key)
    local val = tostring(p.value == nil and "" or p.value)
    local old = r.params[p.key]
    if old ~= nil and old ~= val then
      fail("INVALID_PARAMETER_VALUE", string.format("Changing param values is not allowed. Param with key='%s' was " ..
        "already logged with value='%s' for run ID='%s'. Attempted logging new value '%s'.", p.key, old,
        r.info.run_id, val))
    end
    r.params[p.key] = val
  end
end

local function add_tags(r, list)
  for _, t in ipairs(list) do
    check_key("tag", t.key)
    r.tags[t.key] = tostring(t.value == nil and "" or t.value)
    if t.key == "mlflow.runName" then r.info.run_name = r.tags[t.key] end
  end
end

function M.log_metric(v, s, input)
  local r = run_of(v, s, required(input, "run_id", "string"))
  active(r)
  required(input, "key", "string")
  required(input, "value")
  required(input, "timestamp")
  add_metrics(v, s, r, { { key = input.key, value = input.value, timestamp = input.timestamp, step = input.step } })
  put_run(v, s, r)
  return json.object()
end

-- one key and value added to an active run by add (params or tags)
local function add_one(v, s, input, add)
  local r = run_of(v, s, required(input, "run_id", "string"))
  active(r)
  add(r, { { key = required(input, "key", "string"), value = input.value } })
  put_run(v, s, r)
  return json.object()
end

function M.log_param(v, s, input) return add_one(v, s, input, add_params) end
function M.set_tag(v, s, input) return add_one(v, s, input, add_tags) end

function M.log_batch(v, s, input)
  local r = run_of(v, s, required(input, "run_id", "string"))
  active(r)
  local metrics = type(input.metrics) == "table" and input.metrics or {}
  local params = type(input.params) == "table" and input.params or {}
  local tags = type(input.tags) == "table" and input.tags or {}
  if #metrics > 1000 or #params > 100 or #tags > 100 or #metrics + #params + #tags > 1000 then
    fail("INVALID_PARAMETER_VALUE", string.format("A batch logging request can contain at most 1000 metrics, 100 " ..
      "params and 100 tags, 1000 in all. Got %d metrics, %d params and %d tags.", #metrics, #params, #tags))
  end
  add_params(r, params)
  add_tags(r, tags)
  add_metrics(v, s, r, metrics)
  put_run(v, s, r)
  return json.object()
end

local ORDER_ATTR = { start_time = true, end_time = true, run_name = true, status = true, run_id = true }

function M.search_runs(v, s, input)
  local ids = type(input.experiment_ids) == "table" and input.experiment_ids or
    (type(input.experiment_ids) == "string" and { input.experiment_ids }) or {}
  local want = {}
  for _, id in ipairs(ids) do
    experiment(v, s, id)
    want[tostring(id)] = true
  end
  local conds = parse_filter(input.filter)
  local _, rk = kinds(s)
  local all = {}
  for _, r in ipairs(v:list(rk)) do
    local ok = want[r.info.experiment_id] and (r.info.lifecycle_stage == "active" or input.run_view_type == "ALL")
    for _, c in ipairs(conds) do
      local have
      if c.entity == "attributes" then
        have = c.key == "run_name" and r.info.run_name or r.info[c.key]
      elseif c.entity == "tags" then have = r.tags[c.key]
      elseif c.entity == "params" then have = r.params[c.key]
      else have = (r.latest[c.key] or {}).value end
      if not compare(have, c.op, c.value) then ok = false end
    end
    if ok then all[#all + 1] = r end
  end
  local key, desc = "start_time", true
  local ob = type(input.order_by) == "table" and input.order_by[1] or nil
  if type(ob) == "string" then
    local k, dir = ob:match("^%s*([%w_%.]+)%s*(%a*)%s*$")
    k = k and k:gsub("^attributes?%.", "")
    if not k or not ORDER_ATTR[k] then fail("INVALID_PARAMETER_VALUE", "Invalid order_by clause '" .. ob .. "'") end
    key, desc = k, dir:upper() ~= "ASC"
  end
  table.sort(all, function(a, b)
    local x, y = a.info[key] or 0, b.info[key] or 0
    if type(x) ~= type(y) then x, y = tostring(x), tostring(y) end
    if x == y then return a.info.run_id < b.info.run_id end
    if desc then return x > y end
    return x < y
  end)
  for i, r in ipairs(all) do all[i] = run_json(r) end
  local list, nxt = page(all, input)
  return { runs = list, next_page_token = nxt }
end

function M.get_metric_history(v, s, input)
  local r = run_of(v, s, required(input, "run_id", "string"))
  local key = required(input, "metric_key", "string")
  local _, _, mk = kinds(s)
  local h = v:get(mk, r.info.run_id .. "/" .. key) or { points = {} }
  local all = {}
  for i, p in ipairs(h.points) do all[i] = { key = key, value = p.value, timestamp = p.timestamp, step = p.step } end
  local list, nxt = page(all, { max_results = input.max_results or M.HISTORY_MAX, page_token = input.page_token })
  return { metrics = list, next_page_token = nxt }
end

-- forget(view, server name): a deleted server's store goes with it
function M.forget(v, name)
  local s = { TrackingServerName = name }
  local ek, rk, mk, sk = kinds(s)
  for _, kind in ipairs { ek, rk, mk, sk } do
    local prefix = table.concat({ "sandbox", v.scope, v.service, kind, "" }, "/")
    for k in pairs(assert(require("hypd.store").list(prefix))) do require("hypd.store").delete(k) end
  end
end

-- server(view, arn_or_host) -> the tracking server record named by an ARN,
-- or whose TrackingServerUrl has that host, or nil
function M.server(v, ref)
  if type(ref) ~= "string" or ref == "" then return nil end
  local name = ref:match("^arn:aws[%w-]*:sagemaker:[%w-]+:%d+:mlflow%-tracking%-server/([%w-]+)$")
  if name then
    local s = v:get("mlflow", name)
    return s and s.TrackingServerArn == ref and s or nil
  end
  ref = ref:lower():gsub(":%d+$", "")
  for _, s in ipairs(v:list("mlflow")) do
    if tostring(s.TrackingServerUrl):lower():match("^https?://([^/:]+)") == ref then return s end
  end
end

return M
