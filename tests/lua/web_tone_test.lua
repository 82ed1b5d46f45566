-- The web UI's status colours (web/lib/tone.js, issue 19: Failure,
-- Degraded, NotReady and ShuttingDown were drawn in Schedulable's grey):
-- every state the sandbox can report (read from its sources: the Status,
-- State, Lifecycle, phase and health values it assigns) gets a tone, failed
-- states are red, degraded and stopping ones amber or red, and grey is left
-- for the few that say nothing either way. The mapping is run in node, as
-- the browser runs it.
local t = require "hypd.tap"
local json = require "hypd.json"

local function sh(cmd)
  local p = assert(io.popen(cmd))
  local out = p:read("a")
  local ok = p:close()
  return out, ok
end

-- the states: a value assigned to a status-like field in lua/sandbox
local FIELDS = { "Status", "status", "State", "Lifecycle", "phase", "ClusterStatus", "InstanceStatus", "jobStatus" }
-- quoted words on such lines that are not states: an endpoint's type, a
-- mode, error codes (…Status)
local NOT_STATE = { Enable = true, Gateway = true, Interface = true }
local states, where = {}, {}
for path in sh("find lua/sandbox -name '*.lua' | sort"):gmatch("[^\n]+") do
  local f = assert(io.open(path))
  local src = f:read("a")
  f:close()
  for line in src:gmatch("[^\n]+") do
    for _, field in ipairs(FIELDS) do
      -- the value assigned (up to the next comma or brace), each quoted
      -- word of it: Status = failed and "FAILED" or "ACTIVE"
      for rhs in line:gmatch("[%s{,%.]" .. field .. "%s*=%s*([^=,}][^,}]*)") do
        for v in rhs:gmatch("\"([%a_]+)\"") do
          if (v:match("^%u") or field == "State") and not NOT_STATE[v] and not v:match("^Invalid") and not where[v] then
            states[#states + 1], where[v] = v, path
          end
        end
      end
    end
  end
  -- the HyperPod health label's values (sagemaker.amazonaws.com/node-health-status)
  for v in src:gmatch("return \"(%u%a+)\", %a+") do
    if not where[v] then states[#states + 1], where[v] = v, path end
  end
  for v in src:gmatch("HEALTH%]%s*=%s*\"(%u%a+)\"") do
    if not where[v] then states[#states + 1], where[v] = v, path end
  end
end
-- what the UI derives itself: a node's Ready condition (web/pages/cluster_nodes.js)
for _, v in ipairs { "Ready", "NotReady" } do
  if not where[v] then states[#states + 1], where[v] = v, "web/pages/cluster_nodes.js" end
end
table.sort(states)

local have_node = sh("command -v node >/dev/null && echo yes"):match("yes")
local function need_node() if not have_node then t.skip("node is absent: the mapping is not run") end end

local out, ok, tones = "", false, {}
if have_node then
local tmp = os.tmpname()
local f = assert(io.open(tmp, "w"))
f:write(json.encode(states))
f:close()
out, ok = sh(string.format("node --input-type=module -e %q 2>&1",
  "import { readFileSync } from 'node:fs'; import { pathToFileURL } from 'node:url';" ..
  "const { tone } = await import(pathToFileURL('web/lib/tone.js'));" ..
  "const s = JSON.parse(readFileSync('" .. tmp .. "', 'utf8')); const o = {};" ..
  "for (const x of s) o[x] = tone(x); console.log(JSON.stringify(o));"))
os.remove(tmp)
tones = ok and json.decode(out) or {}
end

t.test("the sandbox's sources name the states it reports", function()
  need_node()
  t.ok(ok, "node ran web/lib/tone.js: " .. tostring(out))
  t.ok(#states >= 30, #states .. " states: " .. table.concat(states, " "))
  for _, s in ipairs { "Failure", "Degraded", "ShuttingDown", "Schedulable", "InService", "ACTIVE", "CREATE_FAILED",
      "FAILED", "NotReady" } do
    t.ok(where[s], s .. " is among them")
  end
end)

local BAD = { "fail", "error", "notready", "misconfigured", "crashloop", "insufficient", "unhealthy", "unreachable" }
local AMBER = { "degraded", "shuttingdown", "unschedulable", "rollingback", "deleting", "terminating", "stopping",
  "pendingreplacement", "pendingreboot" }
-- the states that say nothing either way: grey
local NEUTRAL = { unknown = true, queued = true, skipped = true, created = true, deleted = true, pending = true,
  disabled = true, new = true }

local function word(s) return s:lower():gsub("[^a-z]", "") end
local function any(s, list)
  for _, p in ipairs(list) do if word(s):find(p, 1, true) then return p end end
end

t.test("failed states are red, degraded and stopping ones amber or red, everywhere", function()
  need_node()
  for _, s in ipairs(states) do
    local tn = tones[s]
    if any(s, BAD) and not any(s, { "unschedulable" }) then
      t.eq(tn, "bad", s .. " (" .. where[s] .. ") is red")
    elseif any(s, AMBER) then
      t.ok(tn == "warn" or tn == "bad", s .. " (" .. where[s] .. ") is amber or red: " .. tostring(tn))
    end
  end
end)

t.test("grey only for states that say nothing either way", function()
  need_node()
  for _, s in ipairs(states) do
    if not NEUTRAL[word(s)] then
      t.ok(tones[s] ~= "muted", s .. " (" .. where[s] .. ") has a tone of its own, not grey")
    end
  end
end)

t.test("Failure, Degraded, NotReady and ShuttingDown are not drawn as Schedulable is", function()
  need_node()
  local sched = tones.Schedulable
  t.eq(sched, "ok", "Schedulable is green")
  local more = sh(string.format("node --input-type=module -e %q 2>&1",
    "import { pathToFileURL } from 'node:url'; const { tone } = await import(pathToFileURL('web/lib/tone.js'));" ..
    "console.log(['Failure','Degraded','NotReady','ShuttingDown'].map(tone).join(' '))"))
  t.eq(more:gsub("%s+$", ""), "bad warn bad warn")
end)
