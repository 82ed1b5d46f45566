-- hypd.cli._handlers: the work of the commands run, eks-token, kubeconfig,
-- doctor and sandbox, with their options parsed and checked (hypd.cli.commands).
-- Each returns the exit status: 0, 1 with the error on stderr, 2 for a usage
-- error only the host can find (a --faults file that is not JSON). Loaded
-- only in the host (hypd.cli.commands runs in a bare state first).
local _cli = require "hypd._cli"
local core = require "hypd.core"
local errors = require "hypd.errors"
local json = require "hypd.json"
local log = require "hypd.log"
local runner = require "hypd.runner"
local sys = require "hypd.sys"

local M = {}

local out = require "hypd.cli._out"
local say, fail = out.say, out.fail

-- invoke(module, fn, args) -> result | nil, err: a library function run as
-- a task (hypd.runner.invoke)
local function invoke(module, fn, args)
  return errors.try(runner.invoke, { module = module, fn = fn, args = args })
end

-- run: the playbook o[1] with the arguments check built (o.input)
function M.run(o)
  local ok, r = xpcall(runner.call, function(e)
    if type(e) ~= "table" then e = errors.new("INTERNAL", tostring(e)) end
    return e
  end, { name = o[1], args = o.input, timeout = o.timeout })
  if not ok then
    log.debug("host", "%s failed: %s", o[1], tostring(r.traceback or ""))
    return fail(r)
  end
  local encoded, text = pcall(json.encode, r, { pretty = true })
  if not encoded then
    return fail(errors.new("JSON", "the result cannot be encoded as JSON: " .. tostring(text.message or text)))
  end
  say(text, "\n")
  return 0
end

-- eks-token: the ExecCredential kubectl reads, with the token only C sees
function M.eks_token(o)
  local p, err = invoke("hypd.aws.eks", "prepare", { cluster = o.cluster })
  if not p then return fail(err) end
  -- the token stays in C: Lua shapes the document around _cli.TOKEN
  local tok <close>, terr = _cli.eks_token(p)
  if not tok then return fail(terr) end
  -- kubectl refreshes a minute early; `aws eks get-token` says 14 minutes
  local doc = { kind = "ExecCredential", apiVersion = "client.authentication.k8s.io/v1beta1", spec = json.object(),
    status = { expirationTimestamp = os.date("!%Y-%m-%dT%H:%M:%SZ", tok:expires() - 60), token = _cli.TOKEN } }
  local ok, werr = tok:write(json.encode(doc) .. "\n")
  if not ok then return fail(werr) end
  return 0
end

-- kubeconfig: printed, or written 0600 to --write FILE
function M.kubeconfig(o)
  local text, err = invoke("hypd.aws.kubeconfig", "build", { cluster = o.cluster, command = _cli.self_exe() or "hypd" })
  if not text then return fail(err) end
  if not o.write then
    say(text)
    return 0
  end
  local ok, werr = sys.write_private(o.write, text)
  if not ok then
    io.stderr:write("hypd: cannot write ", o.write, ": ", tostring(werr.message), "\n")
    return 1
  end
  io.stderr:write("hypd: wrote ", o.write, " for cluster ", o.cluster, "\n")
  return 0
end

-- doctor: the report, as text or JSON; 1 when something is missing
function M.doctor(o)
  local r, err = invoke("hypd.aws.doctor", "run", {})
  if not r then return fail(err) end
  if o.json then
    say(json.encode(r, { pretty = true }), "\n")
  else
    local text, ferr = invoke("hypd.aws.doctor", "format", r)
    if text then say(text, "\n") else fail(ferr) end
  end
  return r.ok and 0 or 1
end

-- sandbox: serves the simulated account until interrupted
function M.sandbox(o)
  local opts = { listen = o.listen or "127.0.0.1:4566", speed = o.speed }
  if o.faults then
    local f = io.open(o.faults, "rb")
    local v = f and json.decode(f:read("a") or "")
    if f then f:close() end
    if type(v) ~= "table" or json.is_array(v) then
      io.stderr:write("hypd: --faults: cannot read a JSON object from ", o.faults, "\n")
      return 2
    end
    opts.faults = v
  end
  -- the process's clock, switched before anything has read it
  if o.virtual_clock then core.virtual(true) end
  local ok, err = invoke("sandbox", "serve", opts)
  if ok == nil and err and err.code ~= "CANCELLED" then return fail(err) end
  return 0
end

return M
