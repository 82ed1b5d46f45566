-- helpers for the Lua tests (loaded with dofile; tests run trusted).
local M = {}

M.build = os.getenv("HYPD_BUILD") or "build"
M.hypd = M.build .. "/hypd"

-- a fresh temporary directory
function M.tmpdir()
  local p = io.popen("mktemp -d /tmp/hypd-t.XXXXXX")
  local dir = p:read("l")
  p:close()
  return dir
end

function M.write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  return path
end

function M.read(path)
  local f = io.open(path, "r")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

local function quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end
M.quote = quote

-- sh(cmd) -> exit status, stdout, stderr (runs through /bin/sh)
function M.sh(cmd)
  local dir = M.tmpdir()
  local ok, _, code = os.execute(cmd .. " >" .. dir .. "/out 2>" .. dir .. "/err </dev/null")
  local out, err = M.read(dir .. "/out"), M.read(dir .. "/err")
  os.execute("rm -rf " .. quote(dir))
  return ok and 0 or code, out, err
end

-- hypd(args...) -> status, stdout, stderr; args are quoted
function M.run_hypd(env, ...)
  local parts = {}
  for k, v in pairs(env or {}) do parts[#parts + 1] = k .. "=" .. quote(v) end
  parts[#parts + 1] = M.hypd
  for _, a in ipairs { ... } do parts[#parts + 1] = quote(a) end
  return M.sh(table.concat(parts, " "))
end

-- a self-signed certificate for 127.0.0.1: returns cert path, key path, PEM text
function M.self_signed(dir)
  local cert, key = dir .. "/cert.pem", dir .. "/key.pem"
  local rc = M.sh("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes" ..
    " -keyout " .. key .. " -out " .. cert .. " -days 2 -subj /CN=127.0.0.1" ..
    " -addext subjectAltName=IP:127.0.0.1")
  assert(rc == 0, "openssl could not make a certificate")
  return cert, key, M.read(cert)
end

-- spawn_server(cmd, scheme) starts a loopback test server in the background
-- (it prints "PORT <n> PID <pid>" first); returns its base URL and a stop function
function M.spawn_server(cmd, scheme)
  local p = assert(io.popen(cmd .. " 2>/dev/null &", "r"))
  local line = p:read("l")
  local port, pid = (line or ""):match("PORT (%d+) PID (%d+)")
  p:close()
  assert(port, "test server did not start: " .. cmd .. ": " .. tostring(line))
  return (scheme or "http") .. "://127.0.0.1:" .. port, function() os.execute("kill " .. pid .. " 2>/dev/null") end
end

-- start the loopback echo server (HTTPS when given a certificate and key)
function M.echo_server(cert, key)
  local tls = cert and (" " .. M.quote(cert) .. " " .. M.quote(key)) or ""
  return M.spawn_server(M.build .. "/tests/echo_server 120" .. tls, cert and "https" or "http")
end

-- sandbox_process(dir, args) starts `hypd sandbox` (state in dir/state)
-- and reads the environment it prints; returns env (nil on failure), pid
function M.sandbox_process(dir, args)
  local out = dir .. "/sandbox.out"
  os.remove(out)
  local p = io.popen(string.format("%s --state %s sandbox --listen 127.0.0.1:0 %s >%s 2>%s/sandbox.err & echo $!",
    M.hypd, M.quote(dir .. "/state"), args or "", M.quote(out), M.quote(dir)))
  local pid = p:read("l")
  p:close()
  for _ = 1, 300 do
    local env = {}
    for k, v in (M.read(out) or ""):gmatch("export ([%w_]+)=(%S+)") do env[k] = v end
    if env.AWS_SECRET_ACCESS_KEY then return env, pid end
    os.execute("sleep 0.02")
  end
  return nil, pid
end

-- serve_process(state [, listen [, args]]) -> p | nil, why: `hypd serve --sandbox`
-- under the virtual clock on the state directory, in the background, once
-- it printed its address: p.url, p.port, p.token (the token it printed),
-- p.login (its sign-in link's code), p.out(), p.stop() (SIGTERM, then waits
-- up to 15 s for it to exit). listen: "127.0.0.1:PORT" (a restart on the
-- same port), default 127.0.0.1:0; args: more words for hypd serve, quoted.
function M.serve_process(state, listen, args)
  local out = state .. "/serve.out"
  os.remove(out)
  local p = io.popen(string.format("HYPD_CLOCK=virtual %s --state %s serve --sandbox --listen %s %s >%s " ..
    "2>>%s/serve.err </dev/null & echo $!", M.hypd, quote(state), listen or "127.0.0.1:0", args or "", quote(out),
    quote(state)))
  local pid = p:read("l")
  p:close()
  local s = { pid = pid, out = function() return M.read(out) or "" end }
  function s.stop()
    os.execute("kill " .. pid .. " 2>/dev/null")
    for _ = 1, 750 do
      if not os.execute("kill -0 " .. pid .. " 2>/dev/null") then return true end
      os.execute("sleep 0.02")
    end
    return false
  end
  for _ = 1, 750 do
    local text = s.out()
    s.url, s.token = text:match("listening on (http://[%d.:]+)"), text:match("export HYPD_TOKEN=(%S+)")
    s.login = text:match("/#login=([%w_-]+)")
    if s.url and s.token and s.login and text:find("stops it", 1, true) then
      s.port = tonumber(s.url:match(":(%d+)$"))
      return s
    end
    if not os.execute("kill -0 " .. pid .. " 2>/dev/null") then break end
    os.execute("sleep 0.02")
  end
  s.stop()
  return nil, "hypd serve did not start: " .. (M.read(state .. "/serve.err") or "") .. s.out()
end

-- sandbox_here([opts]) -> srv, OPTS: the sandbox in this process, and this
-- process's AWS environment pointed at it the standard way, as `hypd serve
-- --sandbox` does: AWS_ENDPOINT_URL, the sandbox's keys and region, and no
-- profile, session token or per-service endpoint that could win over them.
-- Every AWS call then reaches it (tools, operations, the test's own
-- aws.call) and so do the processes the test starts. OPTS: the options for
-- the test's own aws.call (the region only). The virtual clock unless
-- opts.real_clock.
function M.sandbox_here(opts)
  opts = opts or {}
  local core, sandbox, sys = require "hypd.core", require "sandbox", require "hypd.sys"
  local srv = assert(sandbox.start { listen = "127.0.0.1:0" })
  -- held for the process's life: a server nobody holds is collected and
  -- stops, and a test file's locals die once its chunk has run
  local kept = package.loaded["tests.sandbox_servers"] or {}
  package.loaded["tests.sandbox_servers"] = kept
  kept[#kept + 1] = srv
  sys.setenv("AWS_PROFILE")
  sys.setenv("AWS_SESSION_TOKEN")
  for svc in pairs(require("hypd.aws").SERVICES) do sys.setenv(require("hypd.aws").endpoint_env(svc)) end
  local env = sandbox.env(srv.port)
  for k, v in pairs(env) do sys.setenv(k, v) end
  if not opts.real_clock then core.virtual(true) end
  return srv, { region = env.AWS_REGION }
end

-- policy_actions(doc) -> the actions of every statement of an IAM policy
function M.policy_actions(doc)
  local out = {}
  for _, st in ipairs(doc.Statement or {}) do
    for _, a in ipairs(type(st.Action) == "table" and st.Action or { st.Action }) do out[#out + 1] = a end
  end
  return out
end

-- policy_without(doc, action) -> doc, that action taken out of each
-- statement (a statement left with none goes)
function M.policy_without(doc, action)
  local json = require "hypd.json"
  local out = { Version = doc.Version, Statement = json.array() }
  for _, st in ipairs(doc.Statement or {}) do
    local kept = json.array()
    for _, a in ipairs(type(st.Action) == "table" and st.Action or { st.Action }) do
      if a ~= action then kept[#kept + 1] = a end
    end
    if #kept > 0 then
      local c = {}
      for k, v in pairs(st) do c[k] = v end
      c.Action = kept
      out.Statement[#out.Statement + 1] = c
    end
  end
  return out
end

-- sandbox_mutations(port) -> the sandbox's audit log (what AWS saw): its
-- mutations as "service:Operation", those its policy refused left out
function M.sandbox_mutations(port)
  local http, json = require "hypd.http", require "hypd.json"
  local resp = assert(http.request { url = "http://127.0.0.1:" .. port .. "/_sandbox/audit" })
  local out = {}
  for _, e in ipairs(json.decode(resp.body) or {}) do
    if not e.refused then out[#out + 1] = e.service .. ":" .. e.operation end
  end
  return out
end

-- with_env(env, dir, cmd) runs cmd with the sandbox's AWS environment (and
-- no other AWS session or profile); client state in dir/client
function M.with_env(env, dir, cmd)
  local parts = { "env -u AWS_SESSION_TOKEN -u AWS_PROFILE" }
  for k, v in pairs(env) do parts[#parts + 1] = k .. "=" .. M.quote(v) end
  parts[#parts + 1] = "HYPD_STATE=" .. M.quote(dir .. "/client")
  return M.sh(table.concat(parts, " ") .. " " .. cmd)
end

-- eks_cluster(call, name, octet [, o]) -> the DescribeCluster of a new ACTIVE
-- EKS cluster (its role, a 10.<octet>.0.0/16 VPC and two subnets made
-- first); call(service, op, params) is the test's AWS call against a sandbox.
-- o: mode (authenticationMode, API), bootstrap (the creator's admin entry,
-- true), version, security_group (make one, false), trust (the role's trust
-- policy text), wait = false (answer at once, while it is CREATING); the
-- answer then also has role_arn, subnets and sg
function M.eks_cluster(call, name, octet, o)
  o = o or {}
  local json = require "hypd.json"
  local trust = o.trust or json.encode { Version = "2012-10-17", Statement = { { Effect = "Allow",
    Principal = { Service = "eks.amazonaws.com" }, Action = "sts:AssumeRole" } } }
  local role = call("iam", "CreateRole", { RoleName = name .. "-eks", AssumeRolePolicyDocument = trust }).Role.Arn
  local vpc = call("ec2", "CreateVpc", { CidrBlock = "10." .. octet .. ".0.0/16" }).Vpc.VpcId
  local subnets = {}
  for i, az in ipairs { "us-west-2a", "us-west-2b" } do
    subnets[i] = call("ec2", "CreateSubnet", { VpcId = vpc, CidrBlock = "10." .. octet .. "." .. i .. ".0/24",
      AvailabilityZone = az }).Subnet.SubnetId
  end
  local sg = o.security_group and call("ec2", "CreateSecurityGroup", { GroupName = name, Description = name,
    VpcId = vpc }).GroupId
  call("eks", "CreateCluster", { name = name, roleArn = role, version = o.version,
    resourcesVpcConfig = { subnetIds = subnets, securityGroupIds = sg and { sg } or nil },
    accessConfig = { authenticationMode = o.mode or "API", bootstrapClusterCreatorAdminPermissions = o.bootstrap } })
  while o.wait ~= false and call("eks", "DescribeCluster", { name = name }).cluster.status ~= "ACTIVE" do
    require("hypd.task").sleep(30)
  end
  local c = call("eks", "DescribeCluster", { name = name }).cluster
  c.role_arn, c.subnets, c.sg = role, subnets, sg
  return c
end

-- kubectl_sandbox(dir, h) -> env, pid | nil, nil, why: a sandbox process
-- under the virtual clock for kubectl and boto3 to judge (h, a
-- kubectl_harness, gets its environment); why: the machine lacks one of them
function M.kubectl_sandbox(dir, h)
  if M.sh("command -v kubectl") ~= 0 or M.sh("python3 -c 'import boto3'") ~= 0 then
    return nil, nil, "no kubectl or boto3 on this machine"
  end
  local env, pid = M.sandbox_process(dir, "--virtual-clock")
  h.env = env or {}
  return h.env, pid
end

-- kubectl_harness(dir) -> h: kubectl against a sandbox process's cluster.
-- h.env is the sandbox's AWS environment (the test fills it in), h.kc the
-- kubeconfig path; h.sh(cmd) runs cmd with that environment and
-- h.kubectl(args [, prefix]) runs kubectl with the kubeconfig
function M.kubectl_harness(dir)
  local h = { env = {}, kc = dir .. "/kubeconfig" }
  function h.sh(cmd) return M.with_env(h.env, dir, cmd) end
  -- start() -> env, pid | nil, why: a `hypd sandbox --virtual-clock` process
  -- in dir for kubectl and boto3 (h.env set), or why it cannot run here
  function h.start()
    if M.sh("command -v kubectl") ~= 0 or M.sh("python3 -c 'import boto3'") ~= 0 then
      return nil, "no kubectl or boto3 on this machine"
    end
    local env, pid = M.sandbox_process(dir, "--virtual-clock")
    h.env = env or {}
    return h.env, pid
  end
  function h.kubectl(args, prefix)
    return h.sh((prefix or "") .. "kubectl --kubeconfig " .. M.quote(h.kc) .. " --cache-dir " ..
      M.quote(dir .. "/cache") .. " " .. args)
  end
  return h
end

-- field_rules(err) -> the sorted "field:rule" of a VALIDATION's fields
function M.field_rules(err)
  local out = {}
  for _, f in ipairs(err and err.fields or {}) do out[#out + 1] = f.field .. ":" .. f.rule end
  table.sort(out)
  return out
end

return M
