-- Toolsets: which tools each set holds, `hypd mcp --toolsets` over stdio
-- (a child process) and /mcp?toolsets= list and allow only those, an
-- unknown set is refused naming the sets, the default set stays under its
-- token budget, and docs/mcp.md's table of sizes is the measured one
-- (HYPD_WRITE_DOCS=1 rewrites it).
local t = require "hypd.tap"
local json = require "hypd.json"
local mcp = require "hypd.api.mcp"
local mcp_http = require "hypd.api.mcp_http"
local toolsets = require "hypd.tool.toolsets"
local tool = require "hypd.tool.registry"
local H = dofile("tests/lua/helpers.lua")
local sizes = dofile("tests/lua/toolsets_sizes.lua")
require("hypd.tool.loader").load()

local function in_set(name, set) return toolsets.of(tool.get(name))[set] == true end

t.test("every tool is in a set of its area; readonly is exactly the read tools; observe only reads", function()
  for _, def in ipairs(tool.list()) do
    local of = toolsets.of(def)
    local areas = 0
    for _, n in ipairs { "cluster", "capacity", "storage", "training", "inference", "jobs", "operation" } do
      if of[n] then areas = areas + 1 end
    end
    t.ok(areas > 0 or def.name:find("^monitor_") or def.name:find("^diagnose_"), def.name .. " is in an area's set")
    t.eq(of.readonly == true, def.kind == "read", def.name .. ": readonly is the read tools")
    if of.observe then t.eq(def.kind, "read", def.name .. ": observe holds read tools only") end
    t.ok(of.all, def.name .. " is in all")
  end
  -- what the create-cluster and diagnose skills need is in the default set
  for _, n in ipairs { "cluster_list", "aws_get_availability_zones", "aws_get_instance_types", "cluster_create",
    "cluster_get_creation_status", "operation_get", "hyperpod_list_nodes", "hyperpod_node_reboot",
    "hyperpod_node_replace" } do
    t.ok(in_set(n, "default"), n .. " is in the default set")
  end
  t.ok(in_set("hyperpod_node_reboot", "capacity") and in_set("cluster_scale_node_group", "capacity"), "capacity")
  t.ok(not in_set("inference_deploy_container", "default"), "inference is not in the default set")
  t.ok(in_set("job_get_logs", "observe") and in_set("job_get_logs", "jobs"), "job_get_logs observes jobs")
end)

t.test("an unknown set is refused naming every set", function()
  local sets, err = toolsets.parse("cluster,nope")
  t.eq(sets, nil)
  t.eq(err.code, "VALIDATION")
  t.like(err.message, "unknown set 'nope' %(the sets are default, cluster, capacity, .*readonly, all%)")
  t.eq(err.fields[1].field, "toolsets")
  t.ok(toolsets.parse("cluster, observe").observe, "commas and spaces separate names")
end)

t.test("a tool's own toolsets adds it to a set; an unknown name is refused when it is defined", function()
  local ok, err = pcall(tool.check_def, { name = "monitor_probe_sets", summary = "p", description = "p", kind = "read",
    toolsets = { "nope" }, run = function() end })
  t.ok(not ok)
  t.like(err, "toolsets: 'nope' is not a toolset %(default, cluster")
  t.ok(toolsets.of({ name = "monitor_probe_sets", kind = "read", toolsets = { "training" } }).training)
end)

-- stdio: `hypd mcp` as a child process, lines in, lines out
local function stdio(args, messages)
  local dir = H.tmpdir()
  local lines = {}
  for i, m in ipairs(messages) do lines[i] = json.encode(m) end
  H.write(dir .. "/in", table.concat(lines, "\n") .. "\n")
  local rc = os.execute(string.format("HYPD_STATE=%s %s mcp %s <%s/in >%s/out 2>%s/err", H.quote(dir .. "/state"),
    H.hypd, args, dir, dir, dir))
  local out, byid = H.read(dir .. "/out") or "", {}
  for line in out:gmatch("[^\n]+") do
    local v = json.decode(line)
    if type(v) == "table" and v.id ~= nil then byid[v.id] = v end
  end
  local err = H.read(dir .. "/err")
  os.execute("rm -rf " .. H.quote(dir))
  return byid, rc, err
end

local INIT = { jsonrpc = "2.0", id = 1, method = "initialize", params = { protocolVersion = "2025-11-25",
  capabilities = json.object(), clientInfo = { name = "test", version = "1" } } }

local function names(list)
  local out = {}
  for _, x in ipairs(list or {}) do out[#out + 1] = x.name end
  table.sort(out)
  return out
end

local function expected(set)
  local out = {}
  for _, d in ipairs(toolsets.select(tool.list(), { [set] = true })) do out[#out + 1] = d.name end
  table.sort(out)
  return out
end

t.test("hypd mcp --toolsets capacity lists only capacity's tools and refuses a call of another, naming its sets", function()
  local r = stdio("--toolsets capacity", { INIT, { jsonrpc = "2.0", id = 2, method = "tools/list" },
    { jsonrpc = "2.0", id = 3, method = "tools/call", params = { name = "cluster_list", arguments = json.object() } },
    { jsonrpc = "2.0", id = 4, method = "tools/call", params = { name = "aws_get_availability_zones",
      arguments = { region = "us-west-2" } } } })
  t.eq(names(r[2] and r[2].result.tools), expected("capacity"))
  t.like(r[1] and r[1].result.instructions or "", "This session lists the toolsets capacity;", "the agent is told")
  t.eq(r[3] and r[3].error and r[3].error.code, mcp.INVALID_PARAMS)
  t.like(r[3] and r[3].error.message or "", "cluster_list is not in this session's toolsets %(capacity%); it is in " ..
    "default, cluster, observe, readonly")
  t.ok(r[4] and r[4].result, "a tool of the set is called")
end)

t.test("hypd mcp with no --toolsets gives the default set; an unknown set exits 2 naming the sets", function()
  local r = stdio("", { INIT, { jsonrpc = "2.0", id = 2, method = "tools/list" } })
  t.eq(names(r[2] and r[2].result.tools), expected("default"))
  local _, rc, err = stdio("--toolsets cluster,bogus", { INIT })
  t.ok(rc ~= true, "refused")
  t.like(err, "unknown set 'bogus' %(the sets are default, cluster")
end)

-- HTTP: the handler as the gateway calls it
local CALLER = { name = "t", scope = "admin", token_id = "tok-sets" }
local function post(query, body, sid)
  return mcp_http.handle({ method = "POST", path = "/mcp", query = query, body = json.encode(body),
    headers = { ["content-type"] = "application/json", accept = "application/json, text/event-stream",
      host = "127.0.0.1", ["mcp-session-id"] = sid } }, CALLER)
end

t.test("/mcp?toolsets=readonly lists only read tools for that session; none gives every tool; bogus is 400", function()
  local init = post("toolsets=readonly", INIT)
  t.eq(init.status, 200)
  local sid = init.headers["mcp-session-id"]
  local list = json.decode(post(nil, { jsonrpc = "2.0", id = 2, method = "tools/list" }, sid).body).result.tools
  t.eq(names(list), expected("readonly"))
  for _, x in ipairs(list) do t.eq(x.annotations.readOnlyHint, true, x.name) end
  local d = post("", INIT).headers["mcp-session-id"]
  t.eq(names(json.decode(post(nil, { jsonrpc = "2.0", id = 2, method = "tools/list" }, d).body).result.tools),
    expected("all"))
  local bad = post("toolsets=cluster%2Cbogus", INIT)
  t.eq(bad.status, 400)
  t.like(json.decode(bad.body).error.message, "unknown set 'bogus'")
end)

t.test("tools/list of the default set is under 25,000 tokens (bytes / 4); built-in tools carry no module hashes", function()
  local d = sizes.measure_set("default")
  t.ok(d.tokens < sizes.TARGET, "default: " .. d.tokens .. " tokens")
  local all = sizes.measure_set("all")
  t.ok(d.bytes < all.bytes, "smaller than every tool")
  local s = mcp.session { caller = CALLER }
  local list = mcp.handle(s, { jsonrpc = "2.0", id = 1, method = "tools/list" }).result.tools
  for _, x in ipairs(list) do
    if x._meta["hypd.io/source"] == "built-in" and not x._meta["hypd.io/overridden_by"] then
      t.eq(x._meta["hypd.io/modules"], nil, x.name)
    end
  end
end)

-- the table docs/mcp.md shows, from the measurement
local function table_text()
  local rows = { "| set | what for | tools | bytes | tokens |", "|---|---|---:|---:|---:|" }
  for _, r in ipairs(sizes.measure()) do
    rows[#rows + 1] = string.format("| `%s` | %s | %d | %d | %d |", r.set, toolsets.ABOUT[r.set], r.tools, r.bytes,
      r.tokens)
  end
  return table.concat(rows, "\n")
end

t.test("docs/mcp.md lists every set with its measured size", function()
  local doc = assert(H.read("docs/mcp.md"))
  local want = table_text()
  if os.getenv("HYPD_WRITE_DOCS") then
    doc = doc:gsub("(<!%-%- toolsets:begin %-%->\n).-(<!%-%- toolsets:end %-%->)", function(a, b)
      return a .. want .. "\n" .. b
    end)
    H.write("docs/mcp.md", doc)
  end
  local have = doc:match("<!%-%- toolsets:begin %-%->\n(.-)\n<!%-%- toolsets:end %-%->")
  t.ok(have, "the table's markers")
  -- counts exactly; sizes within 10% (a reworded description moves them a little)
  local got = {}
  for set, n, bytes in (have or ""):gmatch("| `([a-z]+)` | [^|]* | (%d+) | (%d+) |") do
    got[set] = { tools = tonumber(n), bytes = tonumber(bytes) }
  end
  for _, r in ipairs(sizes.measure()) do
    local g = got[r.set]
    t.ok(g, r.set .. " is in the table")
    if g then
      t.eq(g.tools, r.tools, r.set .. ": tools (HYPD_WRITE_DOCS=1 rewrites the table)")
      t.ok(math.abs(g.bytes - r.bytes) <= r.bytes // 10, r.set .. ": bytes " .. g.bytes .. " vs measured " .. r.bytes ..
        " (HYPD_WRITE_DOCS=1 rewrites the table)")
    end
  end
end)
