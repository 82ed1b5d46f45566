-- Shared by the tests that drive plain EKS clusters of given Kubernetes
-- versions in a `hypd sandbox --virtual-clock` process with the machine's
-- kubectls (sandbox_proto_test, sandbox_kubectl_versions_test,
-- sandbox_explain_test).
--
--   local K = dofile("tests/lua/sandbox_kubectl_helpers.lua").new("name")
--   K.start { "1.34", "1.33" [, "+addon"...] } -- in the first test; K.ready after
--   K.kubectl("1.33", "get ns" [, binary]) -> rc, out, err
--   K.binary("1.27") -> the path of kubectl 1.27 on this machine | nil
--   K.conn("1.34") -> hypd's Kubernetes client on that cluster
--
-- `kubectl` on this machine is the Cloud SDK's dispatcher: it runs the
-- kubectl.<major>.<minor> beside it that matches the server's version.
-- K.cleanup() stops the sandbox and removes the test's directory.
local t = require "hypd.tap"
local json = require "hypd.json"
local sys = require "hypd.sys"
local H = dofile("tests/lua/helpers.lua")

local M = {}

function M.new(name)
  local K = { H = H, dir = H.tmpdir(), ready = false, kc = {} }
  local harness = H.kubectl_harness(K.dir)
  local conns = {}

  function K.skip() return t.skip(K.absent or "no clusters: the first test failed to make them") end

  -- binary(version) -> the kubectl of that minor version on this machine | nil
  function K.binary(version)
    local rc, out = H.sh("command -v kubectl")
    if rc ~= 0 then return nil end
    local link = io.popen("readlink -f " .. H.quote(out:gsub("%s+$", ""))):read("l") or ""
    local path = link:gsub("[^/]+$", "") .. "kubectl." .. version
    if H.sh("test -x " .. H.quote(path)) == 0 then return path end
    return nil
  end

  function K.start(versions)
    local env, pid, absent = H.kubectl_sandbox(K.dir, harness)
    K.env, K.pid, K.absent = env, pid, absent
    if absent then return K.skip() end
    local rc, _, err = harness.sh("python3 tests/tools/eks_clusters.py " .. name .. " " .. table.concat(versions, " "))
    t.eq(rc, 0, err)
    if rc ~= 0 then return end
    for _, v in ipairs(versions) do
      if v:match("^%+") then break end -- the add-ons (tests/tools/eks_clusters.py)
      local path = K.dir .. "/kubeconfig-" .. v
      local cluster = name .. "-" .. v:gsub("%.", "-")
      rc, _, err = harness.sh(H.hypd .. " kubeconfig --cluster " .. cluster .. " --write " .. H.quote(path))
      t.eq(rc, 0, err)
      K.kc[v] = path
    end
    for k, v in pairs(env) do sys.setenv(k, v) end
    sys.setenv("AWS_PROFILE")
    sys.setenv("AWS_SESSION_TOKEN")
    K.ready = rc == 0
  end

  function K.kubectl(version, args, binary)
    return harness.sh((binary or "kubectl") .. " --kubeconfig " .. H.quote(K.kc[version]) .. " --cache-dir " ..
      H.quote(K.dir .. "/cache-" .. version .. "-" .. (binary or "kubectl"):gsub("[/.]", "_")) .. " " .. args)
  end

  function K.get_json(version, args, binary)
    local rc, out = K.kubectl(version, args .. " -o json", binary)
    return rc == 0 and json.decode(out) or nil
  end

  function K.conn(version)
    conns[version] = conns[version] or require("hypd.k8s").from_kubeconfig { path = K.kc[version] }
    return conns[version]
  end

  function K.cleanup()
    if K.pid then os.execute("kill " .. tostring(K.pid) .. " 2>/dev/null") end
    os.execute("rm -rf " .. H.quote(K.dir))
  end

  return K
end

return M
