-- Shared by the tests that drive a `hypd sandbox --virtual-clock` process's
-- EKS cluster with kubectl and hypd's client (sandbox_k8s_gaps*_test.lua).
--
--   local S = dofile("tests/lua/sandbox_k8s_helpers.lua").new()
--   t.test("...", function() S.start("my-eks", "my-hp") end)   -- the first test
--   if not S.ready then return S.skip() end                    -- in the others
--   S.kubectl(args), S.get_json(args), S.until_ok(fn), S.names(list), S.conn
--
-- S.start makes a HyperPod-ready EKS cluster (two ml.g5.12xlarge nodes),
-- writes its kubeconfig, points this process's AWS environment at the
-- sandbox and opens S.conn (hypd.k8s from that kubeconfig); S.cleanup()
-- stops the sandbox and removes the test's directory.
local t = require "hypd.tap"
local json = require "hypd.json"
local sys = require "hypd.sys"
local H = dofile("tests/lua/helpers.lua")

local M = {}

function M.new()
  local S = { H = H, dir = H.tmpdir(), ready = false }
  S.kc = H.kubectl_harness(S.dir)
  S.kubectl = S.kc.kubectl

  function S.skip() return t.skip(S.absent or "no cluster: the first test failed to make it") end

  -- until_ok(fn [, tries]) -> fn's last answer once it is truthy (the
  -- controllers run on the sandbox's virtual clock; a few polls suffice)
  function S.until_ok(fn, tries)
    local v
    for _ = 1, tries or 100 do
      v = fn()
      if v then return v end
      os.execute("sleep 0.1")
    end
    return v
  end

  function S.get_json(args)
    local rc, out = S.kubectl(args .. " -o json")
    return rc == 0 and json.decode(out) or nil
  end

  function S.names(list)
    local out = {}
    for _, o in ipairs(list.items or {}) do out[#out + 1] = o.metadata.name end
    table.sort(out)
    return out
  end

  function S.start(eks, hp)
    S.env, S.pid, S.absent = H.kubectl_sandbox(S.dir, S.kc)
    if S.absent then return S.skip() end
    local rc, _, err = S.kc.sh("python3 tests/tools/hyperpod_cluster.py " .. eks .. " " .. hp .. " ml.g5.12xlarge 2")
    t.eq(rc, 0, err)
    rc, _, err = S.kc.sh(H.hypd .. " kubeconfig --cluster " .. eks .. " --write " .. H.quote(S.kc.kc))
    t.eq(rc, 0, err)
    for k, v in pairs(S.env) do sys.setenv(k, v) end
    sys.setenv("AWS_PROFILE")
    sys.setenv("AWS_SESSION_TOKEN")
    S.conn = require("hypd.k8s").from_kubeconfig { path = S.kc.kc }
    S.ready = rc == 0 and S.conn ~= nil
  end

  function S.cleanup()
    if S.pid then os.execute("kill " .. tostring(S.pid) .. " 2>/dev/null") end
    os.execute("rm -rf " .. H.quote(S.dir))
  end

  return S
end

return M
