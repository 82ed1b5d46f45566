-- Every file a tool loads is shown, and shadowing is never silent: each
-- built-in tool lists every module it loads (the require graph read here
-- from the source text, lazy requires inside functions included), with its
-- file, hash and origin. A changed copy of _params.lua and of an area
-- helper dropped into the playbook directory, then a reload, marks exactly
-- the tools that load them (again from the graph read here) as overridden
-- by those files, on the command line (hypd playbook list), REST GET
-- /api/v1/tools and MCP tools/list; their hash changes, the others' does
-- not. hypd playbook show prints a helper and the tools that load it. A
-- removed helper unmarks its tools on the next reload.
local t = require "hypd.tap"
local core = require "hypd.core"
local http = require "hypd.http"
local json = require "hypd.json"
local sys = require "hypd.sys"
local task = require "hypd.task"
local tool = require "hypd.tool.registry"
local tools = require "hypd.tool.loader"
local H = dofile("tests/lua/helpers.lua")

-- the require graph ------------------------------------------------------------------

-- every module compiled under lua/workflows: name -> text
local TEXT = {}
for _, m in ipairs(core.embedded_list("workflows.")) do TEXT[m:sub(#"workflows." + 1)] = (core.embedded(m)) end

-- code(src) -> src without its comments and with the contents of its
-- strings blanked (their quotes kept) but for the string a require call
-- gives, so a require in a comment or a message is no require
local function code(src)
  local out, i, n = {}, 1, #src
  while i <= n do
    local c = src:sub(i, i)
    local long = src:match("^%-%-%[(=*)%[", i) or (c == "[" and src:match("^%[(=*)%[", i))
    if long then
      local _, e = src:find("]" .. long .. "]", i, true)
      out[#out + 1] = src:sub(i, i + 1) == "--" and " " or '""'
      i = (e or n) + 1
    elseif src:sub(i, i + 1) == "--" then
      i = src:find("\n", i, true) or n + 1
    elseif c == '"' or c == "'" then
      local j = i + 1
      while j <= n and src:sub(j, j) ~= c do j = j + (src:sub(j, j) == "\\" and 2 or 1) end
      local called = table.concat(out, "", math.max(1, #out - 12)):find("%f[%w_]require%s*%(?%s*$")
      out[#out + 1] = c .. (called and src:sub(i + 1, j - 1) or "") .. c
      i = j + 1
    else
      out[#out + 1] = c
      i = i + 1
    end
  end
  return table.concat(out)
end

local CODE = {}
for name, src in pairs(TEXT) do CODE[name] = code(src) end

-- requires(name) -> the names module name requires, and how many of its
-- require calls name no module as a quoted string
local function requires(name)
  local out, computed = {}, 0
  local c = CODE[name]
  for at in c:gmatch("()%f[%w_]require%f[^%w_]") do
    local k = at - 1
    while k > 0 and c:sub(k, k):match("%s") do k = k - 1 end
    local before = c:sub(k, k)
    if before ~= "." and before ~= ":" then
      local m = c:match("^require%s*%(?%s*[\"']([%w_%.%-]+)[\"']", at)
      if m then out[#out + 1] = m else computed = computed + 1 end
    end
  end
  return out, computed
end

-- closure(name) -> the set of modules a load of name can run: name, and
-- every module its modules require, transitively (those that exist)
local function closure(name)
  local set, queue = { [name] = true }, { name }
  while #queue > 0 do
    local m = table.remove(queue)
    for _, r in ipairs((requires(m))) do
      if TEXT[r] and not set[r] then
        set[r] = true
        queue[#queue + 1] = r
      end
    end
  end
  return set
end

local function sorted_keys(set)
  local out = {}
  for k in pairs(set) do out[#out + 1] = k end
  table.sort(out)
  return out
end

tools.load()
local BUILTIN = {} -- tool name -> its module name
for _, def in ipairs(tool.list()) do
  if def.source == "built-in" and def.module then BUILTIN[def.name] = def.module end
end

t.test("no module under lua/workflows requires a module by a computed name", function()
  local bad = {}
  for _, name in ipairs(sorted_keys(TEXT)) do
    local _, computed = requires(name)
    if computed > 0 then bad[#bad + 1] = name end
  end
  t.eq(bad, {}, "every require names its module as a quoted string, so the loader can list it")
end)

t.test("every built-in tool lists the modules of its require graph, with file, hash and origin", function()
  local n, lazy = 0, 0
  for name, module in pairs(BUILTIN) do
    local def = tool.get(name)
    local listed = {}
    for _, m in ipairs(def.modules) do
      listed[m.name] = true
      local want = { file = "lua/workflows/" .. m.name:gsub("%.", "/") .. ".lua", source = "built-in",
        hash = "sha256:" .. sys.digest("sha256", TEXT[m.name] or "", "hex") }
      t.eq({ file = m.file, source = m.source, hash = m.hash }, want, name .. ": " .. m.name)
    end
    local graph = closure(module)
    t.eq(sorted_keys(listed), sorted_keys(graph), name .. ": the listed modules are its require graph")
    t.eq(def.modules[1].name, module, name .. ": its own file comes first")
    n = n + 1
    if graph["hyperpod._feat_karpenter"] then lazy = lazy + 1 end
  end
  t.ok(n >= 60, "compared " .. n .. " built-in tools")
  t.ok(lazy > 0, "the graph holds modules that are required only inside functions (the features' modules)")
end)

-- the playbook directory -------------------------------------------------------------

local dir = H.tmpdir()
local playbooks, state = dir .. "/playbooks", dir .. "/state"
os.execute("mkdir -p " .. H.quote(playbooks))
local pid
t.cleanup(function()
  if pid then os.execute("kill -TERM " .. pid .. " 2>/dev/null; sleep 0.3") end
  os.execute("rm -rf " .. H.quote(dir))
end)

-- the tools that load each module, from the graph
local LOADERS = {}
for name, module in pairs(BUILTIN) do
  for m in pairs(closure(module)) do
    LOADERS[m] = LOADERS[m] or {}
    LOADERS[m][name] = true
  end
end

-- the area helper to override: the first (by name) that a few tools load
local HELPER
for _, m in ipairs(sorted_keys(LOADERS)) do
  local k = #sorted_keys(LOADERS[m])
  if not HELPER and m:find("^%w+%._") and k >= 2 and k <= 10 then HELPER = m end
end
local PARAMS_FILE = playbooks .. "/_params.lua"
local HELPER_FILE = playbooks .. "/" .. tostring(HELPER):gsub("%.", "/") .. ".lua"
local CHANGED = "\n-- a changed copy (loaded_modules_test)\n"

-- expected(with_helper) -> tool name -> the sorted files it is overridden by
local function expected(with_helper)
  local out = {}
  for name in pairs(BUILTIN) do
    local files = {}
    if LOADERS._params[name] then files[#files + 1] = PARAMS_FILE end
    if with_helper and LOADERS[HELPER][name] then files[#files + 1] = HELPER_FILE end
    table.sort(files)
    out[name] = files
  end
  return out
end

local url, token
local function api(method, path, body)
  local resp = assert(http.request { method = method, url = url .. path, body = body,
    headers = { authorization = "Bearer " .. token, ["content-type"] = "application/json" } })
  return json.decode(resp.body) or {}
end

local session
local function mcp(method, params, id)
  local resp = assert(http.request { method = "POST", url = url .. "/mcp", body = json.encode { jsonrpc = "2.0",
    id = id, method = method, params = params }, headers = { authorization = "Bearer " .. token,
    ["content-type"] = "application/json", accept = "application/json, text/event-stream",
    ["mcp-protocol-version"] = "2025-11-25", ["mcp-session-id"] = session } })
  session = session or resp.headers["mcp-session-id"]
  return resp.body ~= "" and json.decode(resp.body) or nil
end

-- marks(list, field) -> tool name -> sorted files, for the built-in tools of a tool list
local function marks(list, get)
  local out = {}
  for _, d in ipairs(list) do
    if BUILTIN[d.name] then
      local files = {}
      for i, f in ipairs(get(d) or {}) do files[i] = f end
      table.sort(files)
      out[d.name] = files
    end
  end
  return out
end

-- cli_marks() -> what `hypd playbook list` prints: tool name -> sorted files
local function cli_marks()
  local rc, out, err = H.run_hypd({ HYPD_STATE = dir .. "/cli" }, "--playbooks", playbooks, "playbook", "list")
  t.eq(rc, 0, err)
  local got, last = {}, nil
  for line in out:gmatch("[^\n]+") do
    local by = line:match("^  overridden by (.+)$")
    if by and last then
      for f in by:gmatch("[^,%s]+") do got[last][#got[last] + 1] = f end
      table.sort(got[last])
    elseif not by then
      last = line:match("^(%S+)")
      if BUILTIN[last] then got[last] = {} else last = nil end
    end
  end
  return got
end

local function rest_marks() return marks(api("GET", "/api/v1/tools").tools or {}, function(d) return d.overridden_by end) end
local function mcp_marks()
  local r = mcp("tools/list", json.object(), 2)
  return marks((r and r.result or {}).tools or {}, function(d) return d._meta and d._meta["hypd.io/overridden_by"] end)
end

t.test("a hypd serve over an empty playbook directory marks no built-in tool", function()
  t.ok(HELPER, "an area helper a few tools load: " .. tostring(HELPER))
  local out = dir .. "/serve.out"
  os.execute(string.format("HYPD_CLOCK=virtual HYPD_STATE=%s %s --playbooks %s serve --listen 127.0.0.1:0 " ..
    "--grace 1 >%s 2>%s.err </dev/null & echo $! >%s.pid", H.quote(state), H.quote(H.hypd), H.quote(playbooks),
    H.quote(out), H.quote(out), H.quote(out)))
  for _ = 1, 500 do
    local text = H.read(out) or ""
    url, token = text:match("listening on (http://[%d.:]+)"), text:match("admin token %b(): (hypd_[%w_-]+)")
    if url and token and text:find("stops it", 1, true) then break end
    task.sleep(0.02)
  end
  pid = (H.read(out .. ".pid") or ""):match("%d+")
  t.ok(url and token, "the server started: " .. tostring(H.read(out .. ".err")))
  local none = {}
  for name in pairs(BUILTIN) do none[name] = {} end
  t.eq(rest_marks(), none, "REST")
  local init = mcp("initialize", { protocolVersion = "2025-11-25", capabilities = json.object(),
    clientInfo = { name = "modules", version = "1" } }, 1)
  t.ok(init and init.result, "MCP initialize")
  mcp("notifications/initialized", nil, nil)
  t.eq(mcp_marks(), none, "MCP")
end)

local hash_before = {}

t.test("a reload that adds _params.lua and an area helper marks exactly the tools that load them", function()
  for _, d in ipairs(api("GET", "/api/v1/tools").tools or {}) do hash_before[d.name] = d.hash end
  os.execute("mkdir -p " .. H.quote(HELPER_FILE:match("^(.*)/")))
  H.write(PARAMS_FILE, TEXT._params .. CHANGED)
  H.write(HELPER_FILE, TEXT[HELPER] .. CHANGED)
  local r = api("POST", "/api/v1/playbooks/reload")
  t.eq(r.errors, {}, "nothing refused")
  local want = expected(true)
  local redefined = {}
  for name, files in pairs(want) do if #files > 0 then redefined[#redefined + 1] = name end end
  table.sort(redefined)
  table.sort(r.defined)
  t.eq(r.defined, redefined, "the reload defines again exactly the tools that load them")
  t.ok(#redefined >= 50, #redefined .. " tools load one of them")
  t.eq(rest_marks(), want, "REST GET /api/v1/tools: overridden_by")
  t.eq(mcp_marks(), want, "MCP tools/list: _meta[\"hypd.io/overridden_by\"]")
  t.eq(cli_marks(), want, "hypd playbook list")
  for _, d in ipairs(api("GET", "/api/v1/tools").tools or {}) do
    if BUILTIN[d.name] then
      t.eq(d.hash ~= hash_before[d.name], #want[d.name] > 0, d.name .. ": its hash changes with its files")
      for _, m in ipairs(d.modules) do
        local file = (m.name == "_params" and PARAMS_FILE) or (m.name == HELPER and HELPER_FILE) or nil
        if file then
          t.eq({ m.file, m.source, m.overrides, m.hash }, { file, "operator", "built-in",
            "sha256:" .. sys.digest("sha256", H.read(file), "hex") }, d.name .. ": " .. m.name)
        end
      end
    end
  end
end)

t.test("hypd playbook show prints a helper, where it is from and the tools that load it", function()
  local rc, out, err = H.run_hypd({ HYPD_STATE = dir .. "/cli" }, "playbook", "show", HELPER)
  t.eq(rc, 0, err)
  t.eq(out, TEXT[HELPER], "the built-in text")
  t.like(err, "module " .. HELPER:gsub("%p", "%%%0") .. " comes from lua/workflows/" ..
    HELPER:gsub("%.", "/"):gsub("%p", "%%%0") .. "%.lua %(built%-in, sha256:%x+%)")
  local names = sorted_keys(LOADERS[HELPER])
  t.like(err, #names .. " tool%(s%) load it: " .. table.concat(names, ", "):gsub("%p", "%%%0"))
  rc, out, err = H.run_hypd({ HYPD_STATE = dir .. "/cli" }, "--playbooks", playbooks, "playbook", "show", HELPER)
  t.eq(rc, 0, err)
  t.eq(out, TEXT[HELPER] .. CHANGED, "the operator's text")
  t.like(err, HELPER_FILE:gsub("%p", "%%%0") .. " %(operator, sha256:%x+%), over the built%-in one")
  local tool_name = names[1]
  rc, out, err = H.run_hypd({ HYPD_STATE = dir .. "/cli" }, "--playbooks", playbooks, "playbook", "show", tool_name)
  t.eq(out, TEXT[BUILTIN[tool_name]], "a tool's show prints its own file")
  t.eq(rc, 0, err)
  t.like(err, "\n  " .. HELPER:gsub("%p", "%%%0") .. " +operator +" .. HELPER_FILE:gsub("%p", "%%%0"),
    "a tool's show lists the files it loads")
  t.like(err, "overridden by [^\n]*" .. HELPER_FILE:gsub("%p", "%%%0"))
  rc = H.run_hypd({ HYPD_STATE = dir .. "/cli" }, "playbook", "show", "no._such_module")
  t.eq(rc, 1, "a name no tool loads is not found")
end)

t.test("a reload after the helper is removed unmarks the tools that loaded only it", function()
  os.remove(HELPER_FILE)
  local r = api("POST", "/api/v1/playbooks/reload")
  t.eq(r.errors, {}, "nothing refused")
  local restored, defined = {}, {}
  for name in pairs(LOADERS[HELPER]) do
    local list = LOADERS._params[name] and defined or restored
    list[#list + 1] = name
  end
  table.sort(restored)
  table.sort(defined)
  table.sort(r.restored)
  t.eq(r.restored, restored, "back to the built-in files")
  local again = {}
  for _, n in ipairs(r.defined) do if LOADERS[HELPER][n] then again[#again + 1] = n end end
  table.sort(again)
  t.eq(again, defined, "those that load _params.lua too stay marked by it")
  local want = expected(false)
  t.eq(rest_marks(), want, "REST")
  t.eq(mcp_marks(), want, "MCP")
  t.eq(cli_marks(), want, "hypd playbook list")
  os.remove(PARAMS_FILE)
  api("POST", "/api/v1/playbooks/reload")
  for _, d in ipairs(api("GET", "/api/v1/tools").tools or {}) do
    if BUILTIN[d.name] then t.eq(d.hash, hash_before[d.name], d.name .. ": its built-in hash again") end
  end
end)

t.test("a broken helper is refused on reload, naming it, and its tools keep their previous version", function()
  H.write(PARAMS_FILE, TEXT._params .. "\nthis is not Lua\n")
  local r = api("POST", "/api/v1/playbooks/reload")
  local files = {}
  for _, e in ipairs(r.errors or {}) do
    t.like(e.message, "_params does not compile", e.file)
    files[#files + 1] = e.file
  end
  t.eq(#files, #sorted_keys(LOADERS._params), "one error per tool that loads it")
  for _, d in ipairs(api("GET", "/api/v1/tools").tools or {}) do
    if BUILTIN[d.name] then t.eq({ d.hash, d.overridden_by }, { hash_before[d.name], nil }, d.name .. ": as it was") end
  end
  os.remove(PARAMS_FILE)
  r = api("POST", "/api/v1/playbooks/reload")
  t.eq({ r.errors, r.defined, r.restored }, { {}, {}, {} }, "a reload after it is gone changes nothing")
end)

t.test("a tool that does not load at start (a broken helper) is loaded by the reload after the helper is fixed", function()
  local dir2 = dir .. "/broken"
  os.execute("mkdir -p " .. H.quote(dir2))
  H.write(dir2 .. "/_params.lua", TEXT._params .. "\nthis is not Lua\n")
  local out = dir .. "/serve2.out"
  os.execute(string.format("HYPD_CLOCK=virtual HYPD_STATE=%s %s --playbooks %s serve --listen 127.0.0.1:0 " ..
    "--grace 1 >%s 2>%s.err </dev/null & echo $! >%s.pid", H.quote(dir .. "/state2"), H.quote(H.hypd),
    H.quote(dir2), H.quote(out), H.quote(out), H.quote(out)))
  local url2, token2
  for _ = 1, 500 do
    local text = H.read(out) or ""
    url2, token2 = text:match("listening on (http://[%d.:]+)"), text:match("admin token %b(): (hypd_[%w_-]+)")
    if url2 and token2 and text:find("stops it", 1, true) then break end
    task.sleep(0.02)
  end
  local pid2 = (H.read(out .. ".pid") or ""):match("%d+")
  t.ok(url2 and token2, "the second server started: " .. tostring(H.read(out .. ".err")))
  local saved_url, saved_token = url, token
  url, token = url2, token2
  local ok, err = pcall(function()
    local listed = {}
    for _, d in ipairs(api("GET", "/api/v1/tools").tools or {}) do listed[d.name] = true end
    local missing = {}
    for name in pairs(BUILTIN) do if not listed[name] then missing[#missing + 1] = name end end
    table.sort(missing)
    t.eq(missing, sorted_keys(LOADERS._params), "the tools that load the broken helper are missing")
    H.write(dir2 .. "/_params.lua", TEXT._params .. CHANGED)
    local r = api("POST", "/api/v1/playbooks/reload")
    t.eq(r.errors, {}, "nothing refused")
    table.sort(r.defined)
    t.eq(r.defined, missing, "the reload defines them, marked by the fixed helper")
    local back = {}
    for _, d in ipairs(api("GET", "/api/v1/tools").tools or {}) do
      if LOADERS._params[d.name] then back[#back + 1] = d.name .. " " .. table.concat(d.overridden_by or {}, ",") end
    end
    table.sort(back)
    local want = {}
    for i, name in ipairs(missing) do want[i] = name .. " " .. dir2 .. "/_params.lua" end
    t.eq(back, want)
  end)
  url, token = saved_url, saved_token
  if pid2 then os.execute("kill -TERM " .. pid2 .. " 2>/dev/null") end
  if not ok then error(err, 0) end
end)
