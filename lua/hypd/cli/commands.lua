-- hypd.cli.commands: every command of the command line, one entry each, in
-- the order `hypd help` lists them. Adding a command is adding an entry:
--
--   {
--     name = "doctor",                      -- hypd doctor
--     synopsis = "doctor [--json]",         -- its line in hypd help
--     summary = "check the region, ...",    -- (hidden = true: not listed)
--     usage = [[usage: hypd doctor ...]],   -- hypd doctor --help
--     options = { json = true,              -- a flag: o.json = true
--                 listen = "ADDR:PORT" },   -- takes a value: o.listen
--     args = true,                          -- positional words in o[1], o[2], ...
--                                           -- (without: any word is a usage error)
--     check = function(o) ... end,          -- before the host opens: nil, or a
--                                           -- usage error line, or USAGE
--     quiet = true,                         -- the log defaults to warn
--     signals = true,                       -- Ctrl-C interrupts the engine
--     host = false,                         -- runs without a host (help, version)
--     run = function(o) ... end,            -- in the host: the exit status
--                                           -- (host = false: run(o, host), host: the
--                                           -- global options, state_dir, ...)
--   }                                       -- (longer ones in hypd.cli._handlers)
--
-- "--virtual-clock" arrives as o.virtual_clock. The global options
-- (hypd.cli.GLOBAL: --state, --playbooks, --log-level, --region,
-- --profile) are accepted by every command and go to hypd_open, never to
-- o. check runs twice (when main.c plans, then in the host), so it only
-- reads and converts o. run raising an error prints it and exits 1 (0 for
-- CANCELLED). Requires of the host's modules go inside run: check and the
-- table itself run in a bare Lua state with no host.
local _cli = require "hypd._cli"
local json = require "hypd.json"

local M = {}

M.USAGE = setmetatable({}, { __name = "hypd.cli.USAGE" })

M.HEAD = [[
usage: hypd [--state DIR] [--playbooks DIR] [--log-level LEVEL]
            [--region REGION] [--profile PROFILE] COMMAND [ARGS]

commands:
]]

M.TAIL = [[

The options before COMMAND go after it as well (hypd sandbox --state DIR).
PLAYBOOK is a file ending in .lua, or the name of a playbook in the playbook
directory or compiled into hypd (try: hypd run hello).

environment: HYPD_STATE (default ~/.hypd), HYPD_PLAYBOOKS, HYPD_LOG_LEVEL,
HYPD_TOKEN (for --api),
HYPD_CLOCK=virtual (simulated time), and the AWS SDK variables (AWS_REGION,
AWS_PROFILE, AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_<SERVICE>, ...).
]]

local function say(...) io.stdout:write(...) io.stdout:flush() end

-- number(o, name, ok, message) -> message | nil: o[name] converted in place
local function number(o, name, ok, message)
  if o[name] == nil then return nil end
  local n = tonumber(o[name])
  if not n or n ~= n or not ok(n) then return string.format(message, o[name]) end
  o[name] = n
end

local function positive(n) return n > 0 end

-- playbook_args(base, words) -> args | nil, message: --args and the
-- key=value (a string) and key:=json words of hypd run
local function playbook_args(base, words)
  local args = json.object()
  if base then
    local v = json.decode(base)
    if type(v) ~= "table" or json.is_array(v) then return nil, "--args must be a JSON object: " .. base end
    args = v
  end
  for _, w in ipairs(words) do
    local k, v = w:match("^(.-)=(.*)$")
    if not k or k == "" or k == ":" then return nil, "argument '" .. w .. "' is not key=value or key:=json" end
    if k:sub(-1) == ":" then
      k, v = k:sub(1, -2), json.decode(v)
      if v == nil then return nil, "argument '" .. w .. "' has a value that is not JSON" end
    end
    args[k] = v
  end
  return args
end

M[#M + 1] = {
  name = "run",
  synopsis = "run PLAYBOOK [key=value | key:=json ...]",
  summary = "run a playbook's main and print its JSON result",
  usage = [=[
usage: hypd run [--timeout SECONDS] [--args JSON] PLAYBOOK [key=value | key:=json ...]

Runs the playbook's main(args) and prints its result as JSON.
key=value passes a string; key:=json passes any JSON value (numbers,
booleans, arrays, objects). --args gives all arguments as one JSON object.
Exits 1 with the error on stderr when the playbook fails.
]=],
  options = { timeout = "SECONDS", args = "JSON" },
  args = true,
  signals = true,
  check = function(o)
    local bad = number(o, "timeout", positive, "--timeout must be a positive number of seconds, not '%s'")
    if bad then return bad end
    if not o[1] then return "run needs a PLAYBOOK (see hypd run --help)" end
    local args, err = playbook_args(o.args, { table.unpack(o, 2) })
    if not args then return err end
    o.input = args
  end,
  run = function(o) return require("hypd.cli._handlers").run(o) end,
}

M[#M + 1] = {
  name = "eks-token",
  synopsis = "eks-token --cluster NAME",
  summary = "print an EKS ExecCredential (kubectl exec plugin)",
  usage = [=[
usage: hypd eks-token --cluster NAME [--region REGION] [--profile PROFILE]

Prints a client.authentication.k8s.io/v1beta1 ExecCredential with an EKS
bearer token, like `aws eks get-token`, so kubectl can use hypd as its
exec plugin (hypd kubeconfig writes a kubeconfig that does).
]=],
  options = { cluster = "NAME" },
  check = function(o)
    if not o.cluster then return "eks-token needs --cluster NAME (see hypd eks-token --help)" end
  end,
  run = function(o) return require("hypd.cli._handlers").eks_token(o) end,
}

M[#M + 1] = {
  name = "kubeconfig",
  synopsis = "kubeconfig --cluster NAME [--write FILE]",
  summary = "a kubeconfig that uses hypd eks-token",
  usage = [=[
usage: hypd kubeconfig --cluster NAME [--region REGION] [--profile PROFILE] [--write FILE]

Prints (or writes to FILE, mode 0600) a kubeconfig for the EKS cluster that
runs `hypd eks-token` as its exec credential plugin, like
`aws eks update-kubeconfig`. The cluster must be ACTIVE.
]=],
  options = { cluster = "NAME", write = "FILE" },
  check = function(o)
    if not o.cluster then return "kubeconfig needs --cluster NAME (see hypd kubeconfig --help)" end
  end,
  run = function(o) return require("hypd.cli._handlers").kubeconfig(o) end,
}

M[#M + 1] = {
  name = "doctor",
  synopsis = "doctor [--json]",
  summary = "check the region, credentials, identity, endpoints",
  usage = [=[
usage: hypd doctor [--json] [--region REGION] [--profile PROFILE]

Reports the AWS region and where it came from, the credential source (never
a secret), the caller identity from STS GetCallerIdentity, and the endpoint
of every service hypd uses. Exits 1 when something is missing or fails.
]=],
  options = { json = true },
  run = function(o) return require("hypd.cli._handlers").doctor(o) end,
}

M[#M + 1] = {
  name = "sandbox",
  synopsis = "sandbox [--listen ADDR:PORT] [--speed N | --virtual-clock] [--faults FILE]",
  summary = "serve a simulated AWS account on loopback",
  usage = [=[
usage: hypd [--state DIR] sandbox [--listen ADDR:PORT] [--speed N | --virtual-clock]
                                  [--faults FILE]

Serves a simulated AWS account (STS, IAM, EC2, S3, EKS with its Kubernetes
API, SageMaker HyperPod, FSx, CloudFormation, CloudWatch Logs, SSM
parameters, Elastic Load Balancing, Pricing, Service Quotas) on loopback,
default 127.0.0.1:4566, plain HTTP like LocalStack. Prints
the environment to use it. Every request must be signed with the printed
keys. State survives restarts (in --state DIR). --speed N runs simulated
durations N times faster; --virtual-clock makes them instant. --faults FILE
is JSON: throttling, 5xx and latency per service, capacity shortages,
failing nodes, with a seed. Ctrl-C stops it. Like hypd serve, it owns its
state directory: a second process on it is refused.
]=],
  options = { listen = "ADDR:PORT", speed = "N", faults = "FILE", ["virtual-clock"] = true },
  signals = true,
  check = function(o)
    if o.virtual_clock and o.speed then return "--speed and --virtual-clock cannot be combined" end
    return number(o, "speed", positive, "--speed must be a positive number, not '%s'")
  end,
  run = function(o) return require("hypd.cli._handlers").sandbox(o) end,
}

M[#M + 1] = {
  name = "serve",
  synopsis = "serve [--listen ADDR:PORT] [--sandbox]",
  summary = "REST, MCP, /ws and metrics on one port",
  usage = [=[
usage: hypd serve [--listen ADDR:PORT] [--state DIR] [--playbooks DIR] [--grace SECONDS]
                  [--sandbox [--speed N]] [--web DIR] [--max-per-client N]

Serves the web UI (/), the REST API (/api/v1), MCP (/mcp), WebSocket
events (/ws) and Prometheus metrics (/metrics) on one port, default
127.0.0.1:3099 (port 0 picks a free one). The UI's files are compiled in;
--web DIR serves them from a directory instead (working on web/). Each
start prints a sign-in link for the UI that works once. Every request but GET /api/v1/health needs a bearer
token. The first start with no token creates an admin token and prints it
once; a non-loopback address is refused until a token exists (hypd token
create). Operations left running resume. --sandbox also runs the simulated
AWS account in this process, points the AWS layer at it and prints a fresh
admin token (--speed N: simulated durations N times faster). SIGTERM or
Ctrl-C stops it: no new requests, running operations get --grace seconds
(default 10) to reach their next phase, and resume at the next start.
One client address holds at most --max-per-client connections (default
64, of 1,000), and a new connection's headers must arrive within 15 s.

One process at a time owns a state directory: a second hypd serve on it
exits 1 naming the one that holds it (use --api URL to talk to that one);
started while the holder is stopping, it waits for it (its grace + 5 s).
]=],
  options = { listen = "ADDR:PORT", speed = "N", grace = "SECONDS", sandbox = true, web = "DIR",
    ["max-per-client"] = "N" },
  signals = true,
  check = function(o)
    local bad = number(o, "speed", positive, "--speed must be a positive number, not '%s'")
    if bad then return bad end
    if o.speed and not o.sandbox then return "--speed is for the sandbox: give --sandbox too" end
    bad = number(o, "max_per_client", function(n) return math.tointeger(n) and n >= 1 and n <= 1000 end,
      "--max-per-client must be a whole number of connections from 1 to 1000, not '%s'")
    if bad then return bad end
    if o.max_per_client then o.max_per_client = math.tointeger(o.max_per_client) end
    return number(o, "grace", function(n) return n >= 0 end, "--grace must be a number of seconds, 0 or more, not '%s'")
  end,
  run = function(o)
    return require("hypd.api.gateway").main { listen = o.listen or "127.0.0.1:3099", sandbox = o.sandbox == true,
      speed = o.speed, grace = o.grace, web = o.web, max_per_client = o.max_per_client }
  end,
}

M[#M + 1] = {
  name = "tools",
  synopsis = "tools [--json | --markdown] [--skills [NAME]]",
  summary = "list the tools (--json: with their schemas; --markdown: the reference; --skills: the skills)",
  usage = [=[
usage: hypd tools [--json | --markdown] [--state DIR] [--playbooks DIR]
       hypd tools --skills [NAME] [--json]

Lists the tools: name, kind (read, mutating, destructive) and summary.
--json prints the whole registry with input and output JSON Schemas.
--markdown prints the tool reference (docs/tools.md): every tool with its
parameters, AWS actions, status tool and the tools it calls, sorted by name.
--skills lists the skills (skills/*/SKILL.md, the MCP prompts): name and
description; --skills NAME prints that skill.
]=],
  options = { json = true, markdown = true, skills = true },
  args = true,
  quiet = true,
  signals = true,
  check = function(o)
    if o.markdown and (o.json or o.skills) then return "tools --markdown takes neither --json nor --skills" end
    if o[1] and not o.skills then return "unexpected argument '" .. o[1] .. "' for tools (see hypd tools --help)" end
    if o[2] then
      return "unexpected argument '" .. o[2] .. "' for tools --skills, which takes one NAME (see hypd tools --help)"
    end
  end,
  run = function(o)
    if o.skills then return require("hypd.cli._registry").skills { name = o[1], json = o.json == true } end
    return require("hypd.cli._registry").tools { json = o.json == true, markdown = o.markdown == true }
  end,
}

M[#M + 1] = {
  name = "call",
  synopsis = "call TOOL [key=value ...] [--api URL] [--wait | --detach | --plan]",
  summary = "call a tool, in this process or on a server",
  usage = [=[
usage: hypd call TOOL [key=value | key:=json ...] [--json ARGS] [--api URL]
                 [--wait | --detach | --plan] [--state DIR] [--playbooks DIR]

Calls a tool and prints its result as JSON. key=value is read by the tool's
schema (integers, numbers, booleans; arrays and objects as JSON); key:=json
is always JSON; --json gives all arguments as one object. In this process
by default (the configured AWS account), or with --api URL on a running
hypd serve with the token in HYPD_TOKEN. A staged tool answers with an
operation: --wait follows it, printing each phase on stderr (and its
child operations' waits: what is awaited, what was seen, for how long; on a
terminal one status line whose clock keeps running, in a pipe a line at
least every 10 s), then prints the operation; in-process the command does not exit before the operation
ends unless --detach, which leaves it to the next hypd serve on this state.
--plan asks a staged tool only for its plan: what it would create, change or
delete, with the fields that differ; nothing is changed.
In-process, a mutating or destructive tool needs the state directory: while
another process (a hypd serve) owns it, the call goes to that server (its
lock records its URL) with the token in HYPD_TOKEN, and without a token
exits 1 naming it. A plan needs no lock: it runs in this process.
Exits 1 with the error on stderr when the call fails, 2 on a usage error.
]=],
  options = { json = "ARGS", api = "URL", wait = true, detach = true, plan = true },
  args = true,
  quiet = true,
  signals = true,
  check = function(o)
    if not o[1] then return "call needs a TOOL (see hypd tools)" end
    if o.wait and o.detach then return "--wait and --detach cannot be combined" end
    if o.plan and (o.wait or o.detach) then return "--plan answers at once; it takes neither --wait nor --detach" end
  end,
  run = function(o)
    local words = { table.unpack(o, 2) }
    if o.plan then words[#words + 1] = "plan:=true" end
    return require("hypd.cli._registry").call { tool = o[1], words = words, json = o.json,
      api = o.api, wait = o.wait == true, detach = o.detach == true }
  end,
}

M[#M + 1] = {
  name = "token",
  synopsis = "token create|list|revoke",
  summary = "bearer tokens for serve (see hypd token --help)",
  usage = [=[
usage: hypd token create --scope read|operate|admin --name NAME
       hypd token list [--json]
       hypd token revoke NAME|ID
       (each also takes --state DIR)

Bearer tokens for hypd serve. create prints the token once; only its
SHA-256 is stored. read may call read tools, operate also mutating ones,
admin also destructive ones. list shows names, scopes, dates and ids,
never a token.
]=],
  options = { scope = "SCOPE", name = "NAME", json = true },
  args = true,
  quiet = true,
  signals = true,
  check = function(o)
    local action = o[1]
    if not action then return M.USAGE end
    if action ~= "create" and action ~= "list" and action ~= "revoke" then
      return "unknown token command '" .. action .. "' (create, list or revoke)"
    end
    local extra = o[action == "revoke" and 3 or 2]
    if extra then return "unexpected argument '" .. extra .. "' for token " .. action .. " (see hypd token --help)" end
    if action == "create" and not (o.scope and o.name) then
      return "token create needs --scope read|operate|admin and --name NAME"
    end
    if action == "revoke" and not o[2] then return "token revoke needs a NAME or ID (see hypd token list)" end
  end,
  run = function(o)
    return require("hypd.cli._registry").token { action = o[1], scope = o.scope, name = o.name, which = o[2],
      json = o.json == true }
  end,
}

M[#M + 1] = {
  name = "backup",
  synopsis = "backup FILE [--force]",
  summary = "copy the state database to FILE, also while serve runs",
  usage = [=[
usage: hypd backup FILE [--force] [--state DIR]

Copies the state database (DIR/hypd.db: operations, events, tokens' hashes,
the sandbox's state) to FILE, one SQLite file readable only by its owner.
It is SQLite's online backup of one moment, safe while hypd serve runs on
the state: the server goes on reading and writing. It is written to
FILE.tmp, checked, then renamed to FILE. An existing FILE is refused unless
--force. Prints the path, bytes, schema version and number of operations.
The operations' secrets (DIR/secrets/) are not copied: docs/state.md.
Exits 1 with the reason on stderr when it fails.
]=],
  options = { force = true },
  args = true,
  host = false,
  check = function(o)
    if not o[1] then return "backup needs a FILE (see hypd backup --help)" end
    if o[2] then return "unexpected argument '" .. o[2] .. "' for backup (see hypd backup --help)" end
  end,
  run = function(o, host) return require("hypd.cli._state").backup(o, host) end,
}

M[#M + 1] = {
  name = "restore",
  synopsis = "restore FILE",
  summary = "replace the state database with a backup",
  usage = [=[
usage: hypd restore FILE [--state DIR]

Replaces the state database DIR/hypd.db with the backup FILE (made by hypd
backup). Refused while another process holds the state directory (a hypd
serve or sandbox: its lock names it; stop it first) or has the database
open. FILE is checked first, on a copy in DIR: SQLite's integrity check, the
tables of a hypd state, and a schema version this hypd knows (a newer one is
refused, naming both versions). Then the old database is kept as
DIR/hypd.db.before-restore and the checked copy takes its place in one
rename. An older schema is upgraded when hypd next opens the state.
Exits 0 when restored; 1 with the reason on stderr otherwise (LOCKED,
IN_USE, INVALID, NOT_FOUND, IO), and then the state is unchanged.
]=],
  args = true,
  host = false,
  check = function(o)
    if not o[1] then return "restore needs a FILE (see hypd restore --help)" end
    if o[2] then return "unexpected argument '" .. o[2] .. "' for restore (see hypd restore --help)" end
  end,
  run = function(o, host) return require("hypd.cli._state").restore(o, host) end,
}

M[#M + 1] = {
  name = "mcp",
  synopsis = "mcp [--api URL] [--toolsets SETS]",
  summary = "MCP over stdio, in-process or through a server",
  usage = [=[
usage: hypd mcp [--api URL] [--toolsets SETS] [--state DIR] [--playbooks DIR]

Speaks MCP over stdin and stdout: the tools run in this process, or with
--api URL on a running hypd serve (token in HYPD_TOKEN). In-process while
another process (a hypd serve) owns the state directory, only read tools
work; the others answer LOCKED, naming it.
--toolsets a,b lists and allows only the tools of those sets (default,
cluster, capacity, storage, training, inference, jobs, observe, operation,
readonly, all); without it, the default set (create, operate, diagnose).
]=],
  options = { api = "URL", toolsets = "SETS" },
  quiet = true, -- stdout carries the protocol; the log goes to stderr
  signals = true,
  run = function(o) return require("hypd.cli._registry").mcp { api = o.api, toolsets = o.toolsets } end,
}

M[#M + 1] = {
  name = "version",
  summary = "print the version",
  usage = "usage: hypd version   (prints the version)\n",
  host = false,
  run = function()
    say("hypd ", _cli.VERSION, "\n")
    return 0
  end,
}

M[#M + 1] = {
  name = "help",
  summary = "this text",
  usage = "usage: hypd help [COMMAND]   (the commands, or how to use one)\n",
  args = true,
  host = false,
  check = function(o)
    if o[2] then return "unexpected argument '" .. o[2] .. "' for help (see hypd help --help)" end
  end,
  run = function(o)
    if not o[1] then
      say(M.usage())
      return 0
    end
    local c
    for _, entry in ipairs(M) do
      if entry.name == o[1] then c = entry end
    end
    if not c then
      io.stderr:write("hypd: unknown command '", o[1], "' (see hypd help)\n")
      return 2
    end
    say(c.usage)
    return 0
  end,
}

M[#M + 1] = {
  name = "playbook",
  synopsis = "playbook list|show NAME|check FILE",
  summary = "the playbooks behind the tools: sources, overrides, checks",
  usage = [=[
usage: hypd playbook list [--json]
       hypd playbook show TOOL|MODULE
       hypd playbook check FILE [--json]
       (each also takes --playbooks DIR)

Every tool is a playbook file. list shows each tool's source (built-in, or a
file of the playbook directory), whether it overrides a built-in tool, how
many files it loads, and which of them, files of the playbook directory,
take the place of built-in ones (overridden by). show prints a tool's file,
to copy into the playbook directory and edit (a file there declaring a tool
of the same name replaces the built-in one), and on stderr every file it
loads with its origin and hash; for a module tools load (a helper such as
cluster._pipeline) it prints its file and the tools that load it.
check compiles a playbook, checks its tool definition, reports the globals
it uses that playbooks do not have and the AWS actions it declares with
their class (read, mutating, deleting). Exits 1 when check finds a problem.
]=],
  options = { json = true },
  args = true,
  quiet = true,
  check = function(o)
    local action = o[1]
    if not action then return M.USAGE end
    local want = ({ list = 1, show = 2, check = 2 })[action]
    if not want then return "unknown playbook command '" .. action .. "' (list, show or check)" end
    if want == 2 and not o[2] then
      return "playbook " .. action .. " needs a " .. (action == "show" and "TOOL or MODULE" or "FILE")
    end
    if o[want + 1] then return "unexpected argument '" .. o[want + 1] .. "' for playbook " .. action end
  end,
  run = function(o)
    local pb = require "hypd.cli._playbook"
    if o[1] == "list" then return pb.list { json = o.json } end
    if o[1] == "show" then return pb.show { name = o[2] } end
    return pb.check { file = o[2], json = o.json }
  end,
}

M[#M + 1] = {
  name = "iam-policy",
  synopsis = "iam-policy [--tools a,b] [--kind KIND] [--resources ARN,...]",
  summary = "the IAM policy the tools need, from their declarations",
  usage = [=[
usage: hypd iam-policy [--tools a,b] [--kind read|mutating|destructive]
                       [--resources ARN,ARN...]

Prints the least-privilege IAM policy document of the management host,
generated from the AWS actions the tools declare (never written by hand):
all tools, the ones --tools names, or those of --kind and milder ones (read:
the read tools; mutating: read and mutating; destructive: all).

Each statement is scoped to what hypd makes: IAM roles and policies, EKS
clusters and S3 buckets by their names (hypd-*, and the names the HyperPod
features keep), EC2 resources, HyperPod clusters and FSx file systems by
the tag hypd:cluster-tag (aws:RequestTag when made, aws:ResourceTag after).
What stays on Resource "*" is listed on stderr with the reason.

--resources adds what hypd did not make and the tools may use: an imported
EKS cluster (arn:aws:eks:REGION:ACCOUNT:cluster/NAME, with its node groups
and add-ons), a HyperPod cluster (its ARN), a bucket of yours
(arn:aws:s3:::BUCKET, with its objects).
]=],
  options = { tools = "a,b", kind = "KIND", resources = "ARN,..." },
  quiet = true,
  check = function(o)
    if o.kind and not ({ read = 1, mutating = 1, destructive = 1 })[o.kind] then
      return "--kind must be read, mutating or destructive, not '" .. o.kind .. "'"
    end
  end,
  run = function(o)
    return require("hypd.cli._playbook").iam_policy { tools = o.tools, kind = o.kind, resources = o.resources }
  end,
}

M[#M + 1] = {
  name = "test",
  usage = "usage: hypd test FILE.lua...   (runs Lua tests inside the host; TAP output)\n",
  hidden = true,
  args = true,
  traceback = true,
  check = function(o)
    if not o[1] then return M.USAGE end
  end,
  run = function(o) return require("hypd.tap").run_files { table.unpack(o) } and 0 or 1 end,
}

-- usage() -> the text of `hypd help`: the commands' lines in table order
function M.usage()
  local lines = {}
  for _, c in ipairs(M) do
    if not c.hidden then
      local syn = c.synopsis or c.name
      if #syn <= 40 then
        lines[#lines + 1] = string.format("  %-43s%s\n", syn, c.summary or "")
      else
        lines[#lines + 1] = "  " .. syn .. "\n" .. string.rep(" ", 45) .. (c.summary or "") .. "\n"
      end
    end
  end
  return M.HEAD .. table.concat(lines) .. M.TAIL
end

return M
