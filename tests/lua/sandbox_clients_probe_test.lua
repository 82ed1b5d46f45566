-- A new user's look at what a HyperPod cluster on EKS made in a fresh
-- `hypd sandbox --virtual-clock` process, with the real aws CLI, boto3 and
-- kubectl (tests/clients/probe.py: one table row a command, each judged
-- against the answer AWS or Kubernetes gives). Every row must pass; the
-- rows marked as known sandbox gaps are counted apart and listed in the log.
local t = require "hypd.tap"
local S = dofile("tests/lua/sandbox_k8s_helpers.lua").new()
local H = S.H

local probe -- the probe's output, once it ran

t.cleanup(function() S.cleanup() end)

t.test("a sandbox with a HyperPod cluster on EKS, and the probe run against it", function()
  S.start("probe-eks", "probe-hp")
  if not S.ready then return S.skip() end
  if H.sh("python3 -c 'import awscli'") ~= 0 then return t.skip("no aws CLI (awscli) for python3") end
  -- in the background, waited for by yielding (a blocking call of a minute
  -- is a task that never yields)
  local base = S.dir .. "/probe"
  S.kc.sh("sh -c " .. H.quote("timeout 280 python3 tests/clients/probe.py probe-eks probe-hp " .. H.quote(S.kc.kc) ..
    " >" .. base .. ".out 2>" .. base .. ".err; echo $? >" .. base .. ".rc") .. " >/dev/null 2>&1 &")
  for _ = 1, 600 do
    if H.read(base .. ".rc") then break end
    require("hypd.task").sleep(0.5)
  end
  local rc, out, err = tonumber(H.read(base .. ".rc") or ""), H.read(base .. ".out"), H.read(base .. ".err")
  t.ok(rc, "the probe ended within 5 minutes")
  probe = out or ""
  for line in probe:gmatch("[^\n]+") do
    if not line:match("^ok ") then print("# " .. line) end -- the gaps, the failures and the counts
  end
  t.like(probe, "\naws CLI %d+/%d+, boto3 %d+/%d+, kubectl %d+/%d+, gaps %d+\n$", "the probe ran to its end: " ..
    tostring(err))
  t.ok(rc == 0 or probe:find("\nFAIL ", 1, true), "the probe fails only by a row: " .. tostring(err))
end)

-- each family's rows: enough of them, none failed
for _, f in ipairs { { "aws CLI", 120 }, { "boto3", 50 }, { "kubectl", 100 } } do
  local family, least = f[1], f[2]
  t.test("every " .. family .. " command answers as AWS or Kubernetes would", function()
    if not probe then return t.skip("the probe did not run") end
    local failed, rows = {}, 0
    for word, line in probe:gmatch("\n?(%S+)%s+(" .. family:gsub("%p", "%%%0") .. ": [^\n]+)") do
      rows = rows + 1
      if word == "FAIL" then failed[#failed + 1] = line end
    end
    t.ok(rows >= least, family .. ": " .. rows .. " rows, at least " .. least .. " wanted")
    t.eq(failed, {}, family .. " commands failed")
  end)
end
