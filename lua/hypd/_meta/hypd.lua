---@meta
-- luacheck: ignore
-- LuaLS annotations of the playbook API (docs/playbooks.md), for editors:
-- point `workspace.library` at lua/hypd/_meta. Never loaded by hypd.

---@class hypd.Error
---@field code string        a stable code: VALIDATION, NOT_FOUND, CONFLICT, GUARDRAIL, an AWS error code, ...
---@field message string
---@field fields? {field: string, rule: string, message: string}[]

---@class hypd.ParamSpec
---@field type "string"|"integer"|"number"|"boolean"|"array"|"object"
---@field required? boolean
---@field default? any
---@field enum? any[]
---@field pattern? string     an ECMAScript regex
---@field pattern_help? string the pattern's rule in words
---@field minimum? number
---@field maximum? number
---@field min_length? integer
---@field max_length? integer
---@field items? hypd.ParamSpec
---@field description? string
---@field decision? boolean   a person must choose it
---@field secret? boolean     never stored, logged or shown
---@field fixed? boolean      cannot change once created

---@class hypd.Step
---@field name string
---@field run fun(ctx: hypd.Ctx): table?

---@class hypd.ToolDef
---@field name string
---@field summary string
---@field description string
---@field kind "read"|"mutating"|"destructive"
---@field params? table<string, hypd.ParamSpec>
---@field result? table       a JSON Schema
---@field aws? string[]       the AWS actions it may call ("ec2:Describe*")
---@field k8s? string[]       the Kubernetes verbs it may use
---@field status_tool? string the read tool that follows a mutating one
---@field target? fun(params: table): string   what one operation works on (staged tools)
---@field run? fun(ctx: hypd.Ctx, params: table): table
---@field steps? hypd.Step[]
---@field check? fun(params: table)  rules across fields, run after each field's own; raises VALIDATION

---Declares a tool (a playbook returns it).
---@param def hypd.ToolDef
---@return hypd.ToolDef
function tool(def) end

---@class hypd.EnsureSpec
---@field type string
---@field name string
---@field label? string
---@field key? string
---@field id? string|fun(obj: table): string
---@field find? fun(id: string): table?
---@field search? fun(): table?
---@field needs? string|table
---@field owned? fun(obj: table): boolean, string?
---@field field? string
---@field create fun(): table
---@field exists? string|string[]
---@field fields? table
---@field desired? table
---@field current? fun(obj: table): table
---@field update? fun(obj: table, changes: table): table?
---@field retry? fun(err: hypd.Error): string?
---@field retry_every? number
---@field retry_for? number
---@field placeholder? fun(id: string): table

---@class hypd.AbsentSpec
---@field type string
---@field name string
---@field label? string
---@field id? string|fun(obj: table): string
---@field find fun(): table?
---@field owned? fun(obj: table): boolean, string?
---@field keep? string|fun(obj: table): string?
---@field field? string
---@field delete fun(obj: table)
---@field gone? string|string[]
---@field every? number
---@field timeout? number
---@field retry? fun(err: table): string?
---@field retry_every? number
---@field retry_for? number
---@field fields? table

---@class hypd.PollSpec
---@field what string
---@field check fun(waited: number): boolean, string?, any
---@field every number
---@field timeout? number
---@field since? number
---@field phase? string|false
---@field expired? fun(waited: number, note: string?)

---@class hypd.Ctx
---@field params table
---@field caller {name: string, scope: string, front: string}
---@field tool hypd.ToolDef
---@field plan boolean
---@field state table
---@field op_id? string
local Ctx = {}
---@return table
function Ctx:call(service, operation, params) end
---@return table?, hypd.Error?
function Ctx:try(service, operation, params) end
---@return string
function Ctx:aws_region() end
---@return table
function Ctx:aws_opts() end
---@return hypd.K8s
function Ctx:k8s(cluster) end
function Ctx:phase(text) end
function Ctx:progress(text) end
function Ctx:sleep(seconds) end
function Ctx:check_cancel() end
function Ctx:save() end
---@param spec hypd.EnsureSpec
---@return table obj, string action
function Ctx:ensure(spec) end
---@param spec hypd.AbsentSpec
---@return string action, string? why
function Ctx:absent(spec) end
---@param spec hypd.PollSpec
---@return any
function Ctx:poll(spec) end

---@class hypd.K8s
local K8s = {}
function K8s:get(api_version, kind, name, opts) end
function K8s:list(api_version, kind, opts) end
function K8s:create(obj, opts) end
---opts: force, field_manager, operation, dry_run (dryRun=All: what the apply would make, nothing kept)
function K8s:apply(obj, opts) end
function K8s:patch(api_version, kind, name, patch, opts) end
function K8s:delete(api_version, kind, name, opts) end
function K8s:wait(api_version, kind, name, predicate, opts) end
function K8s:watch(api_version, kind, opts, fn) end
function K8s:logs(pod, opts) end
---kind "Service" | "Pod"; opts: namespace, port, scheme, method, body, headers, query, timeout.
---The workload's answer {status, headers, body} (any status), or nil and the API server's error.
---@return table? resp, table? err
function K8s:proxy(kind, name, path, opts) end

---@class hypd
---@field version string
hypd = {}
function hypd.sleep(seconds) end
---@return number
function hypd.now() end
function hypd.checkpoint() end
---@param alg "sha256"|"md5"
---@param data string
---@return string hex
function hypd.digest(alg, data) end
function hypd.spawn(fn, opts, ...) end
hypd.http = { request = function(req) end, get = function(url, opts) end }
hypd.json = { encode = function(v, opts) end, decode = function(s, opts) end, null = {},
  object = function(t) end, array = function(t) end }
hypd.log = { debug = function(fmt, ...) end, info = function(fmt, ...) end, warn = function(fmt, ...) end,
  error = function(fmt, ...) end }
hypd.errors = { new = function(code, message, fields) end, raise = function(code, message, fields) end,
  fail = function(code, message, fields) end, is = function(v, code) end }
hypd.state = { get = function(key) end, put = function(key, value) end, delete = function(key) end }
hypd.aws = { call = function(service, op, params, opts) end, try = function(service, op, params, opts) end,
  pages = function(service, op, params, opts) end, all = function(service, op, params, opts) end,
  class = function(service, op) end, region = function(opts) end, hyperpod_types = function() end,
  eks_cluster_name = "",
  signed_json = function(req) end,
  ---AWS tags: map(list) -> {key = value} of [{Key, Value}]; list(map) -> [{Key, Value}] sorted by key
  tags = { map = function(list) end, list = function(map) end } }
---@type {connect: fun(args: {cluster?: string, region?: string}): hypd.K8s, cache: fun(spec: {cluster: string, region?: string, kinds: table[], sample?: function}): table}
---cache: the running tool's watch-backed cache of a cluster (hypd.k8s.cache): ready(timeout), items(name),
---kind_state(name), version(), wait_change(version, seconds), info(), history(), touch()
hypd.k8s = {}
hypd.tools = { call = function(name, params) end, exists = function(name) end, check = function(name, args) end }
hypd.operations = { list = function(filter) end, get = function(id) end, events = function(id, after, limit, wait) end,
  wait = function(id, seconds) end, state = function(id) end, cancel = function(id) end }
-- set_active, record: a mutating or destructive tool; forget: a destructive one (GUARDRAIL otherwise)
hypd.clusters = { active = function() end, set_active = function(c) end, record = function(c) end,
  get = function(name, region) end, list = function() end, forget = function(name, region) end }
hypd.cidr = { parse = function(text) end, format = function(base, prefix) end, contains = function(a, b) end,
  overlaps = function(a, b) end, next_free = function(vpc, used, prefix) end, subnet_prefix = function(p) end }
hypd.yaml = { decode = function(text, opts) end, decode_all = function(text, opts) end }
---The Kubernetes manifests kept as YAML in lua/manifests/ (a playbook directory's manifests/ overrides):
---load(name, vars) -> objects (${key} replaced from vars), text(name) -> yaml, origin, list() -> names
hypd.manifests = { load = function(name, vars) end, text = function(name) end, list = function() end }
---The training recipes of recipes/ (a playbook directory's recipes/ overrides and adds): list() -> {{name,
---description, params, source}}, get(name), validate(name, params) -> params, render(name, params, ctx) -> params, objects
hypd.recipes = { list = function() end, get = function(name) end, validate = function(name, params) end,
  render = function(name, params, ctx) end }
