-- hypd.cli._state: hypd backup and hypd restore (docs/state.md). Both run
-- without a host (host = false in hypd.cli.commands): a host opens the
-- store, and a restore must replace it while no connection has it open.
-- The work is C's (hypd._backup over store_backup.c); this file words it.
local backup = require "hypd._backup"

local M = {}

M.HINT = "Its lock is LOCKFILE. Stop it first (kill -TERM PID: it finishes its current phases and exits), " ..
  "then run hypd restore again."

local function say(...) io.stdout:write(...) io.stdout:flush() end

local function dir_of(host) return (host or {}).state_dir or backup.default_dir() end

local function count(n, word) return string.format("%d %s%s", n, word, n == 1 and "" or "s") end

local function describe(info)
  return string.format("%s, schema version %d, %s", count(info.bytes, "byte"), info.schema,
    count(info.operations, "operation"))
end

-- backup{FILE, force} -> 0, or raises the error (hypd.cli prints it, exit 1)
function M.backup(o, host)
  local dir = dir_of(host)
  local info, err = backup.backup(dir, o[1], o.force == true)
  if not info then error(err) end
  say("hypd: backed up ", dir, "/hypd.db to ", o[1], ": ", describe(info), "\n")
  return 0
end

-- restore{FILE} -> 0, or raises the error: LOCKED while another process
-- holds the state directory, INVALID for a file that is not a state this
-- hypd can use, IN_USE, NOT_FOUND or IO otherwise. The state is unchanged
-- unless it answers 0.
function M.restore(o, host)
  local dir = dir_of(host)
  local warn = assert(backup.prepare(dir))
  if warn ~= "" then io.stderr:write("hypd: ", warn, "\n") end
  -- hypd.statelock reads the directory from hypd.config, which a host
  -- publishes; this process has no host, so its config is the directory
  package.loaded["hypd.config"] = package.loaded["hypd.config"] or { state_dir = dir }
  local statelock = require "hypd.statelock"
  local hint = M.HINT:gsub("LOCKFILE", function() return dir .. "/lock" end)
  local ok, lerr = statelock.acquire { command = "hypd restore", hint = hint }
  if not ok then error(lerr) end
  local info, err = backup.restore(dir, o[1])
  statelock.release()
  if not info then error(err) end
  say("hypd: restored ", o[1], " into ", dir, "/hypd.db: ", describe(info), "\n")
  if info.kept then say("hypd: the previous state is kept as ", dir, "/hypd.db.before-restore\n") end
  if info.schema < backup.latest() then
    say("hypd: its schema is upgraded to version ", tostring(backup.latest()), " when hypd next opens it\n")
  end
  return 0
end

return M
