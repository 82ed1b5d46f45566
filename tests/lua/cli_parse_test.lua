-- The command line's parsing (hypd.cli): every command's --help, unknown
-- options and missing values named with the command, the global options
-- before and after every command, the exit statuses, and the global
-- options reaching the host of the real binary (serve, sandbox, run,
-- doctor, tools, eks-token). Also hypd._cli's EKS token handle, which
-- keeps the token out of Lua.
local t = require "hypd.tap"
local _cli = require "hypd._cli"
local cli = require "hypd.cli"
local commands = require "hypd.cli.commands"
local http = require "hypd.http"
local json = require "hypd.json"
local H = dofile("tests/lua/helpers.lua")

local dir = H.tmpdir()
local state = dir .. "/state"

-- the shortest valid command line of every command (a new command needs one)
local MINIMAL = {
  run = { "run", "hello" },
  ["eks-token"] = { "eks-token", "--cluster", "c1" },
  kubeconfig = { "kubeconfig", "--cluster", "c1" },
  doctor = { "doctor" },
  sandbox = { "sandbox" },
  serve = { "serve" },
  tools = { "tools" },
  call = { "call", "operation_list" },
  token = { "token", "list" },
  backup = { "backup", "f.db" },
  restore = { "restore", "f.db" },
  mcp = { "mcp" },
  version = { "version" },
  help = { "help" },
  test = { "test", "x_test.lua" },
  playbook = { "playbook", "list" },
  ["iam-policy"] = { "iam-policy" },
}

local GLOBALS = { "--state", "/s", "--playbooks", "/p", "--log-level", "debug", "--region", "eu-west-3",
  "--profile", "dev" }
local HOST = { state_dir = "/s", playbooks_dir = "/p", log_level = "debug", region = "eu-west-3", profile = "dev" }

local function cat(...)
  local out = {}
  for _, list in ipairs { ... } do
    for _, w in ipairs(list) do out[#out + 1] = w end
  end
  return out
end

local function cat_env(...)
  local out = {}
  for _, env in ipairs { ... } do
    for k, v in pairs(env) do out[k] = v end
  end
  return out
end

local function hypd(env, ...)
  local e = { HYPD_STATE = state }
  for k, v in pairs(env or {}) do e[k] = v end
  return H.run_hypd(e, ...)
end

t.test("every command has a name, a usage that starts with 'usage: hypd', a handler and a test case here", function()
  t.ok(#commands >= 13, "the table holds the commands")
  for _, c in ipairs(commands) do
    t.like(c.usage, "^usage: hypd ", c.name)
    t.eq(type(c.run), "function", c.name)
    t.ok(MINIMAL[c.name], "cli_parse_test.lua has a minimal command line for " .. c.name)
    t.eq(cli.command(c.name), c)
  end
end)

t.test("hypd help lists every command that is not hidden, in the table's order", function()
  local text, at = commands.usage(), 0
  t.like(text, "^usage: hypd %[%-%-state DIR%]")
  for _, c in ipairs(commands) do
    local i = text:find("\n  " .. (c.synopsis or c.name), 1, true)
    if c.hidden then
      t.ok(i == nil, c.name .. " is hidden")
    else
      t.ok(i and i > at, c.name .. " is listed after the one before it")
      at = i or at
    end
  end
end)

t.test("--help and -h anywhere after a command answer its usage, before any check", function()
  for _, c in ipairs(commands) do
    t.eq(cli.parse { c.name, "--help" }, { help = c.usage }, c.name)
    t.eq(cli.parse(cat(MINIMAL[c.name], { "-h" })), { help = c.usage }, c.name)
  end
  t.eq(cli.parse { "call", "--json", "--help" }, { help = cli.command("call").usage }, "even as a value")
  t.eq(cli.parse { "--help" }, { help = commands.usage() })
  t.eq(cli.parse { "-h", "run" }, { help = commands.usage() })
end)

t.test("the global options parse the same before, after and around every command", function()
  for _, c in ipairs(commands) do
    local base = cli.parse(MINIMAL[c.name])
    t.ok(base.command == c, c.name .. " parses: " .. tostring(base.error))
    local half = { table.unpack(GLOBALS, 1, 4) }
    local rest = { table.unpack(GLOBALS, 5) }
    local inline = { "--state=/s", "--playbooks=/p", "--log-level=debug", "--region=eu-west-3", "--profile=dev" }
    for _, argv in ipairs {
      cat(GLOBALS, MINIMAL[c.name]),
      cat(MINIMAL[c.name], GLOBALS),
      cat(half, MINIMAL[c.name], rest),
      cat({ MINIMAL[c.name][1] }, GLOBALS, { table.unpack(MINIMAL[c.name], 2) }),
      cat(MINIMAL[c.name], inline),
    } do
      local p = cli.parse(argv)
      local label = table.concat(argv, " ")
      t.eq(p.error, nil, label)
      t.eq(p.command, c, label)
      t.eq(p.host, HOST, label)
      t.eq(p.opts, base.opts, label .. ": the command's own options are unchanged")
    end
  end
end)

t.test("a global option given twice keeps the last one", function()
  t.eq(cli.parse({ "--state", "/a", "run", "hello", "--state", "/b" }).host.state_dir, "/b")
end)

t.test("tools, call, token and mcp log at warn unless a level is asked for", function()
  for _, name in ipairs { "tools", "call", "token", "mcp" } do
    local p = cli.parse(MINIMAL[name])
    if (os.getenv("HYPD_LOG_LEVEL") or "") == "" then t.eq(p.host.log_level, "warn", name) end
    t.eq(cli.parse(cat(MINIMAL[name], { "--log-level", "info" })).host.log_level, "info", name)
  end
  t.eq(cli.parse(MINIMAL.run).host.log_level, nil, "run logs at the host's default")
end)

t.test("an unknown option names the option and the command", function()
  for _, c in ipairs(commands) do
    t.eq(cli.parse(cat(MINIMAL[c.name], { "--frob" })),
      { error = "unknown option '--frob' for " .. c.name .. " (see hypd " .. c.name .. " --help)" }, c.name)
    t.eq(cli.parse { c.name, "--frob=1" }.error,
      "unknown option '--frob=1' for " .. c.name .. " (see hypd " .. c.name .. " --help)", c.name)
  end
  t.eq(cli.parse { "--frob", "run", "hello" }, { error = "unknown option '--frob' (see hypd --help)" })
  t.eq(cli.parse { "--cluster", "x", "eks-token" }, { error = "unknown option '--cluster' (see hypd --help)" },
    "a command's option before the command is not a global one")
  t.eq(cli.parse { "frobnicate" }, { error = "unknown command 'frobnicate' (see hypd help)" })
end)

t.test("an option without its value says which one, for the command's options and the global ones", function()
  for _, c in ipairs(commands) do
    for name, spec in pairs(c.options or {}) do
      if spec ~= true then
        t.eq(cli.parse(cat(MINIMAL[c.name], { "--" .. name })), { error = "--" .. name .. " needs a value" },
          c.name .. " --" .. name)
      end
    end
    for name in pairs(cli.GLOBAL) do
      t.eq(cli.parse(cat(MINIMAL[c.name], { "--" .. name })), { error = "--" .. name .. " needs a value" },
        c.name .. " --" .. name)
    end
  end
  t.eq(cli.parse { "--state" }, { error = "--state needs a value" })
  t.eq(cli.parse { "sandbox", "--listen", "--state", "/s" }, { error = "--listen needs a value" },
    "the next option is not a value")
  t.eq(cli.parse { "doctor", "--json=yes" }, { error = "--json takes no value" })
  t.eq(cli.parse({ "sandbox", "--listen=127.0.0.1:0" }).opts.listen, "127.0.0.1:0")
end)

t.test("a word a command takes no words for is named with the command", function()
  for _, name in ipairs { "doctor", "sandbox", "serve", "tools", "mcp", "version", "eks-token", "kubeconfig" } do
    t.eq(cli.parse(cat(MINIMAL[name], { "extra" })),
      { error = "unexpected argument 'extra' for " .. name .. " (see hypd " .. name .. " --help)" }, name)
  end
  t.eq(cli.parse { "token", "list", "extra" },
    { error = "unexpected argument 'extra' for token list (see hypd token --help)" })
  t.eq(cli.parse { "help", "run", "extra" },
    { error = "unexpected argument 'extra' for help (see hypd help --help)" })
end)

t.test("each command's own checks are usage errors before the host opens", function()
  for _, c in ipairs {
    { { "run" }, "run needs a PLAYBOOK (see hypd run --help)" },
    { { "run", "--timeout", "0", "hello" }, "--timeout must be a positive number of seconds, not '0'" },
    { { "run", "--args", "[1]", "hello" }, "--args must be a JSON object: [1]" },
    { { "run", "hello", "=x" }, "argument '=x' is not key=value or key:=json" },
    { { "run", "hello", ":=1" }, "argument ':=1' is not key=value or key:=json" },
    { { "eks-token" }, "eks-token needs --cluster NAME (see hypd eks-token --help)" },
    { { "kubeconfig", "--write", "f" }, "kubeconfig needs --cluster NAME (see hypd kubeconfig --help)" },
    { { "sandbox", "--virtual-clock", "--speed", "2" }, "--speed and --virtual-clock cannot be combined" },
    { { "sandbox", "--speed", "-1" }, "--speed must be a positive number, not '-1'" },
    { { "serve", "--grace", "soon" }, "--grace must be a number of seconds, 0 or more, not 'soon'" },
    { { "serve", "--speed", "2" }, "--speed is for the sandbox: give --sandbox too" },
    { { "call" }, "call needs a TOOL (see hypd tools)" },
    { { "call", "x", "--wait", "--detach" }, "--wait and --detach cannot be combined" },
    { { "token", "frob" }, "unknown token command 'frob' (create, list or revoke)" },
    { { "token", "create", "--name", "n" }, "token create needs --scope read|operate|admin and --name NAME" },
    { { "token", "revoke" }, "token revoke needs a NAME or ID (see hypd token list)" },
    { { "backup" }, "backup needs a FILE (see hypd backup --help)" },
    { { "backup", "a", "b" }, "unexpected argument 'b' for backup (see hypd backup --help)" },
    { { "restore" }, "restore needs a FILE (see hypd restore --help)" },
  } do
    t.eq(cli.parse(c[1]), { error = c[2] }, table.concat(c[1], " "))
  end
  t.eq(cli.parse { "token" }, { usage = cli.command("token").usage })
  t.eq(cli.parse { "test" }, { usage = cli.command("test").usage })
  t.eq(cli.parse {}, { usage = commands.usage() })
end)

t.test("options arrive converted, words in order", function()
  local p = cli.parse { "run", "--timeout", "2.5", "pb.lua", "a=1", "--state", "/s", "b:=[1]", "--args", '{"c":true}' }
  t.eq(p.opts.timeout, 2.5)
  t.eq(p.opts.input, { a = "1", b = json.array { 1 }, c = true })
  t.eq({ p.opts[1], p.opts[2], p.opts[3] }, { "pb.lua", "a=1", "b:=[1]" })
  p = cli.parse { "sandbox", "--virtual-clock", "--listen", "127.0.0.1:0" }
  t.eq(p.opts, { virtual_clock = true, listen = "127.0.0.1:0" })
  p = cli.parse { "token", "revoke", "laptop", "--state", "/s" }
  t.eq({ p.opts[1], p.opts[2], p.host.state_dir }, { "revoke", "laptop", "/s" })
end)

-- the binary ------------------------------------------------------------------------

t.test("hypd CMD --help and hypd help CMD print the usage on stdout and exit 0, for every command", function()
  for _, c in ipairs(commands) do
    local rc, out, err = hypd(nil, c.name, "--help")
    t.eq({ rc, out, err }, { 0, c.usage, "" }, c.name .. " --help")
    rc, out, err = hypd(nil, "help", c.name)
    t.eq({ rc, out, err }, { 0, c.usage, "" }, "help " .. c.name)
  end
  local rc, out, err = hypd(nil, "help", "nosuch")
  t.eq({ rc, out, err }, { 2, "", "hypd: unknown command 'nosuch' (see hypd help)\n" })
end)

t.test("an unknown option is one line on stderr and exit 2, for every command", function()
  for _, c in ipairs(commands) do
    local rc, out, err = hypd(nil, c.name, "--frob")
    t.eq({ rc, out, err }, { 2, "", "hypd: unknown option '--frob' for " .. c.name .. " (see hypd " .. c.name ..
      " --help)\n" }, c.name)
  end
  local rc, out, err = hypd(nil)
  t.eq({ rc, out, err }, { 2, "", commands.usage() }, "no command: the usage on stderr")
  rc, out, err = hypd(nil, "--region")
  t.eq({ rc, out, err }, { 2, "", "hypd: --region needs a value\n" })
end)

t.test("exit statuses: 0 for success, 1 for a failure, 2 for a usage error", function()
  t.eq((hypd(nil, "version")), 0)
  t.eq((hypd(nil, "--version")), 0)
  t.eq((hypd(nil, "run", "nosuch")), 1)
  t.eq((hypd(nil, "version", "extra")), 2)
  t.eq((hypd(nil, "run", "hello", "--timeout")), 2)
end)

t.test("help, version and usage errors touch no state directory", function()
  local fresh = dir .. "/untouched"
  for _, argv in ipairs { { "help" }, { "version" }, { "run", "--help" }, { "doctor", "--frob" },
    { "sandbox", "--speed", "fast" }, { "frobnicate" } } do
    hypd(nil, "--state", fresh, table.unpack(argv))
    t.eq(H.read(fresh .. "/hypd.db"), nil, table.concat(argv, " "))
    t.eq(H.sh("test -e " .. H.quote(fresh)), 1, table.concat(argv, " ") .. ": no directory")
  end
end)

t.test("every command that opens a host opens it with the --log-level and --state given after it", function()
  local file = H.write(dir .. "/a-file", "")
  for _, c in ipairs(commands) do
    if c.host ~= false then
      local rc, out, err = hypd(nil, table.unpack(cat(MINIMAL[c.name], { "--log-level", "loud" })))
      t.eq({ rc, out, err }, { 1, "", "hypd: log level 'loud' is not one of debug, info, warn, error, off\n" }, c.name)
      rc, out, err = hypd(nil, table.unpack(cat(MINIMAL[c.name], { "--state", file .. "/state" })))
      t.eq({ rc, out }, { 1, "" }, c.name)
      t.like(err, "^hypd: [^\n]*" .. (file .. "/state"):gsub("%p", "%%%0"), c.name)
    end
  end
end)

local playbooks = dir .. "/playbooks"
os.execute("mkdir -p " .. H.quote(playbooks))
H.write(playbooks .. "/hello.lua", "return { main = function(a) return 'from the playbook directory ' .. a.n end }")
H.write(playbooks .. "/nap.lua", [[
return tool {
  name = "diagnose_nap", summary = "Sleep a while", kind = "read",
  description = "A playbook tool, to see the playbook directory reach the host.", params = {},
  run = function() return { slept = 0 } end,
}]])
-- a profile whose key the fake AWS endpoint sees in the signatures
local aws_config = H.write(dir .. "/aws-config", "[profile ci]\nregion = eu-north-1\n")
local aws_creds = H.write(dir .. "/aws-credentials",
  "[ci]\naws_access_key_id = AKIDPROFILE\naws_secret_access_key = profilesecret\n")
local PROFILE_ENV = { AWS_CONFIG_FILE = aws_config, AWS_SHARED_CREDENTIALS_FILE = aws_creds }

t.test("hypd run takes --state and --playbooks after the command, between its words", function()
  local other = dir .. "/run-state"
  local rc, out, err = hypd(nil, "run", "hello", "--playbooks", playbooks, "n=7", "--state", other)
  t.eq(rc, 0, err)
  t.eq(json.decode(out), "from the playbook directory 7")
  t.ok(H.read(other .. "/hypd.db") ~= nil, "the store is in --state")
end)

t.test("hypd tools takes --playbooks and --state after the command", function()
  local rc, out, err = hypd(nil, "tools", "--playbooks", playbooks, "--state", dir .. "/tools-state")
  t.eq(rc, 0, err)
  t.like(out, "\ndiagnose_nap +read +Sleep a while")
  t.ok(H.read(dir .. "/tools-state/hypd.db") ~= nil, "the store is in --state")
end)

t.test("hypd doctor takes --region and --profile after the command", function()
  local rc, out = hypd(cat_env(PROFILE_ENV, { AWS_ENDPOINT_URL = "http://127.0.0.1:9" }), "doctor", "--json",
    "--region", "eu-west-3", "--profile", "ci")
  local r = json.decode(out)
  t.eq(rc, 1, "the identity cannot be reached")
  t.eq({ r.region, r.region_source, r.profile }, { "eu-west-3", "--region", "ci" })
  t.eq(r.credentials and r.credentials.source, "profile:ci")
end)

t.test("hypd eks-token takes --region and --profile after the command; the token is signed with them", function()
  local rc, out, err = hypd(PROFILE_ENV, "eks-token", "--cluster", "eks1", "--profile", "ci", "--region", "eu-west-3")
  t.eq(rc, 0, err)
  t.like(out, "^{[^\n]*}\n$", "one line")
  local cred = json.decode(out)
  t.eq({ cred.kind, cred.apiVersion, cred.spec }, { "ExecCredential", "client.authentication.k8s.io/v1beta1",
    json.object() })
  local b64 = cred.status.token:match("^k8s%-aws%-v1%.([%w_%-]+)$")
  local url = require("hypd.sys").b64decode(b64:gsub("%-", "+"):gsub("_", "/") .. string.rep("=", (4 - #b64 % 4) % 4))
  t.like(url, "X%-Amz%-Credential=AKIDPROFILE%%2F%d+%%2Feu%-west%-3%%2Fsts%%2F")
  local y, mo, d, h, mi, s = cred.status.expirationTimestamp:match("^(%d+)%-(%d+)%-(%d+)T(%d+):(%d+):(%d+)Z$")
  local left = os.time { year = y, month = mo, day = d, hour = h, min = mi, sec = s } -
    os.time(os.date("!*t", os.time()))
  t.ok(left > 13 * 60 - 5 and left <= 14 * 60, "it expires in 14 minutes: " .. left)
end)

-- start(cmd, out) -> pid: a background hypd whose stdout goes to out
local function start(cmd, out, env)
  local parts = {}
  for k, v in pairs(env or {}) do parts[#parts + 1] = k .. "=" .. H.quote(v) end
  local p = io.popen(string.format("%s %s >%s 2>%s.err </dev/null & echo $!", table.concat(parts, " "), cmd,
    H.quote(out), H.quote(out)))
  local pid = p:read("l")
  p:close()
  return pid
end

local function wait_for(path, text)
  for _ = 1, 500 do
    local s = H.read(path) or ""
    if s:find(text, 1, true) then return s end
    os.execute("sleep 0.02")
  end
  return H.read(path) or ""
end

local function stop(pid)
  os.execute("kill -TERM " .. pid .. " 2>/dev/null")
  for _ = 1, 500 do
    if H.sh("kill -0 " .. pid) ~= 0 then return true end
    os.execute("sleep 0.02")
  end
  os.execute("kill -KILL " .. pid .. " 2>/dev/null")
  return false
end

t.test("hypd serve takes --state, --playbooks, --log-level, --region and --profile after the command", function()
  local base, stop_fake = H.spawn_server("python3 tests/tools/fake_aws.py 60")
  http.request { method = "POST", url = base .. "/_script", body = json.encode(json.array { { status = 200,
    headers = { ["content-type"] = "text/xml" }, body = '<DescribeAvailabilityZonesResponse xmlns=' ..
    '"http://ec2.amazonaws.com/doc/2016-11-15/"><availabilityZoneInfo/></DescribeAvailabilityZonesResponse>' } }) }
  local sstate, out = dir .. "/serve-state", dir .. "/serve.out"
  local env = cat_env(PROFILE_ENV, { AWS_ENDPOINT_URL = base, HYPD_STATE = dir .. "/not-this-one" })
  local pid = start(H.hypd .. " serve --listen 127.0.0.1:0 --state " .. H.quote(sstate) .. " --playbooks " ..
    H.quote(playbooks) .. " --log-level debug --region eu-west-3 --profile ci", out, env)
  local printed = wait_for(out, "stops it")
  local url = printed:match("listening on (http://[%d%.:]+)")
  local token = printed:match("admin token %(shown once%): (hypd_[%w_%-]+)")
  local tools, zones
  if url and token then
    local auth = { authorization = "Bearer " .. token, ["content-type"] = "application/json" }
    tools = http.request { url = url .. "/api/v1/tools", headers = auth }
    zones = http.request { method = "POST", url = url .. "/api/v1/tools/aws_get_availability_zones",
      headers = auth, body = "{}" }
  end
  local stopped = stop(pid)
  local reqs = json.decode(http.request { url = base .. "/_requests" }.body)
  stop_fake()
  t.ok(url and token, "it started and printed its URL and token: " .. printed .. tostring(H.read(out .. ".err")))
  t.ok(stopped, "SIGTERM stopped it")
  t.ok(printed:find("hypd --state " .. sstate .. " token create", 1, true), "--state: " .. printed)
  t.ok(H.read(sstate .. "/hypd.db") ~= nil, "the store is in --state")
  t.ok(H.read(dir .. "/not-this-one/hypd.db") == nil, "not in HYPD_STATE")
  t.like(tools and tools.body or "", '"diagnose_nap"', "--playbooks: the playbook's tool is served")
  t.eq(zones and json.decode(zones.body).region, "eu-west-3", "--region")
  t.like(reqs[1] and reqs[1].headers.authorization or "", "Credential=AKIDPROFILE/%d+/eu%-west%-3/ec2/",
    "--profile: the profile's key signs")
  t.like(H.read(out .. ".err") or "", " debug ", "--log-level debug")
end)

t.test("hypd sandbox takes --state and --virtual-clock after the command", function()
  local sstate, out = dir .. "/sandbox-state", dir .. "/sandbox.out"
  local pid = start(H.hypd .. " sandbox --listen 127.0.0.1:0 --state " .. H.quote(sstate) ..
    " --virtual-clock --log-level debug", out)
  local printed = wait_for(out, "stops it")
  local stopped = stop(pid)
  t.like(printed, "export AWS_ENDPOINT_URL=http://127%.0%.0%.1:%d+\n")
  t.like(printed, "%(virtual clock%)")
  t.ok(stopped, "SIGTERM stopped it")
  t.ok(H.read(sstate .. "/hypd.db") ~= nil, "the store is in --state")
end)

-- hypd._cli ---------------------------------------------------------------------------

t.test("hypd._cli.VERSION is the host's version", function()
  t.eq(_cli.VERSION, require("hypd.config").version)
end)

t.test("an EKS token handle tells its expiry and writes the token, and never hands the token to Lua", function()
  local p = require("hypd.aws.eks").prepare { cluster = "eks1" }
  local tok <close> = assert(_cli.eks_token(p))
  t.eq(tostring(tok), "EKS token")
  t.eq(getmetatable(tok), false, "the metatable is not reachable")
  t.eq(tok.token, nil)
  local left = tok:expires() - os.time()
  t.ok(left > 14 * 60 and left <= 15 * 60, "EKS accepts it for 15 minutes: " .. left)
  t.raises(function() tok:write("no placeholder") end, "VALIDATION")
  t.raises(function() tok:write(_cli.TOKEN .. _cli.TOKEN) end, "VALIDATION")
  tok:close()
  t.eq(tostring(tok), "EKS token (closed)")
  t.raises(function() tok:expires() end)
  local none, err = _cli.eks_token { sts_url = p.sts_url, cluster = "eks1", region = p.region, profile = "nosuch" }
  t.eq(none, nil)
  t.eq(err.code, "CREDENTIALS")
  t.like(err.message, "no fresh AWS credentials for profile nosuch")
end)

t.test("a playbook cannot reach hypd._cli", function()
  local pb = H.write(dir .. "/reach.lua", [[return { main = function()
    local ok, m = pcall(require, "hypd._cli") return { ok = ok, what = tostring(m) } end }]])
  local rc, out, err = hypd(nil, "run", pb)
  t.eq(rc, 0, err)
  local r = json.decode(out)
  t.eq(r.ok, false)
  t.like(r.what, "no playbook named 'hypd%._cli'")
end)

t.test("hypd._cli.self_exe is this binary", function()
  local path = assert(_cli.self_exe())
  t.like(path, "/hypd$")
end)

local function cleanup() os.execute("rm -rf " .. H.quote(dir)) end
t.cleanup(cleanup)
