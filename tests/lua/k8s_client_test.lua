-- hypd's Kubernetes client against a sandbox EKS cluster's API over HTTPS,
-- with the EKS token made in C: the token checks (another cluster's, an
-- expired one, a bad signature, no access entry, a view-only policy), list
-- with selectors and pages over 5,000 pods, idempotent server-side apply,
-- Status errors, a watch that survives a dropped connection and a 410,
-- log follow, delete that waits.
local t = require "hypd.tap"
local aws = require "hypd.aws"
local core = require "hypd.core"
local http = require "hypd.http"
local json = require "hypd.json"
local k8s = require "hypd.k8s"
local logs = require "sandbox.k8s.logs"
local objects = require "sandbox.k8s.objects"
local sandbox = require "sandbox"
local sigv4 = require "hypd.sigv4"
local skube = require "sandbox.k8s"
local state = require "sandbox.state"
local sys = require "hypd.sys"
local task = require "hypd.task"
local H = dofile("tests/lua/helpers.lua")

local AKID, SECRET = os.getenv("AWS_ACCESS_KEY_ID"), os.getenv("AWS_SECRET_ACCESS_KEY")
local srv = assert(sandbox.start { listen = "127.0.0.1:0", credentials = { [AKID] = SECRET } })
local EP = "http://127.0.0.1:" .. srv.port
local OPTS = { endpoint_url = EP, region = "us-west-2" }
core.virtual(true)

local NAME = "k8s-client"
local function call(service, op, params) return aws.call(service, op, params or {}, OPTS) end

local E = {}

t.test("an ACTIVE EKS cluster serves its Kubernetes API over HTTPS", function()
  E.c = H.eks_cluster(call, NAME, 70)
  t.like(E.c.endpoint, "^https://127%.0%.0%.1:%d+$")
  E.conn = k8s.connect { cluster = NAME, region = "us-west-2", endpoint_url = EP }
  local nss = assert(E.conn:list("v1", "Namespace"))
  local names = {}
  for _, n in ipairs(nss) do names[#names + 1] = n.metadata.name end
  table.sort(names)
  t.eq(names, { "default", "kube-node-lease", "kube-public", "kube-system" })
  local rootca = assert(E.conn:get("v1", "ConfigMap", "kube-root-ca.crt", { namespace = "default" }))
  t.eq(rootca.data["ca.crt"], sys.b64decode(E.c.certificateAuthority.data), "kube-root-ca.crt holds the cluster CA")
  E.cl = skube.cluster("us-west-2", NAME)
end)

-- a hand-made EKS token: presigned GetCallerIdentity for cluster, signed at when
local function token(cluster, when, akid, secret, session)
  local host = EP:match("//(.+)$")
  local s = assert(sigv4.sign { method = "GET", path = "/", query = "Action=GetCallerIdentity&Version=2011-06-15",
    headers = { { "host", host }, { "x-k8s-aws-id", cluster } }, access_key = akid, secret_key = secret,
    session_token = session, region = "us-west-2", service = "sts", when = when, presign = 60 })
  local url = EP .. "/?" .. s.query
  return "k8s-aws-v1." .. sys.b64encode(url, true)
end

local function get_ns(tok)
  local resp = assert(http.request { url = E.c.endpoint .. "/api/v1/namespaces", ca_pem = sys.b64decode(
    E.c.certificateAuthority.data), headers = { authorization = "Bearer " .. tok } })
  return resp.status, json.decode(resp.body)
end

t.test("EKS token checks: right cluster passes; another cluster, expired, bad signature and garbage get 401", function()
  local now = math.floor(core.wall())
  t.eq((get_ns(token(NAME, now, AKID, SECRET))), 200)
  local st, body = get_ns(token("other-cluster", now, AKID, SECRET))
  t.eq(st, 401)
  t.eq(body.reason, "Unauthorized")
  t.eq((get_ns(token(NAME, now - 16 * 60, AKID, SECRET))), 401, "older than 15 minutes")
  t.eq((get_ns(token(NAME, now, AKID, SECRET .. "x"))), 401, "bad signature")
  t.eq((get_ns("k8s-aws-v1.bm90IGEgdXJs")), 401)
  t.eq((get_ns("sometoken")), 401)
  local resp = assert(http.request { url = E.c.endpoint .. "/api/v1/namespaces",
    ca_pem = sys.b64decode(E.c.certificateAuthority.data) })
  t.eq(resp.status, 401, "no token at all")
end)

t.test("a principal without an access entry gets 401; a view-only entry reads but gets 403 on delete", function()
  local auth = require "sandbox.auth"
  local who = { arn = "arn:aws:iam::123456789012:user/viewer", user_id = "AIDAVIEWER0000000001" }
  local cred = auth.issue(who, 3600)
  local tok = token(NAME, math.floor(core.wall()), cred.AccessKeyId, cred.SecretAccessKey, cred.SessionToken)
  t.eq((get_ns(tok)), 401)
  call("eks", "CreateAccessEntry", { clusterName = NAME, principalArn = who.arn })
  call("eks", "AssociateAccessPolicy", { clusterName = NAME, principalArn = who.arn,
    policyArn = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy", accessScope = { type = "cluster" } })
  t.eq((get_ns(tok)), 200)
  local resp = assert(http.request { method = "DELETE", url = E.c.endpoint .. "/api/v1/namespaces/default",
    ca_pem = sys.b64decode(E.c.certificateAuthority.data), headers = { authorization = "Bearer " .. tok } })
  t.eq(resp.status, 403)
  t.like(json.decode(resp.body).message, 'User "arn:aws:iam::123456789012:user/viewer" cannot delete resource')
  -- the view policy reaches no workload: the proxy subresources are not in it
  resp = assert(http.request { url = E.c.endpoint .. "/api/v1/namespaces/default/services/kubernetes:443/proxy/",
    ca_pem = sys.b64decode(E.c.certificateAuthority.data), headers = { authorization = "Bearer " .. tok } })
  t.eq(resp.status, 403)
  t.like(json.decode(resp.body).message, 'services "kubernetes:443" is forbidden: User "arn:aws:iam::123456789012:' ..
    'user/viewer" cannot get resource "services/proxy" in API group "" in the namespace "default"')
end)

t.test("list with label and field selectors pages through 5,000 pods", function()
  local nsr, pods = E.cl.reg:find("", "v1", "namespaces"), E.cl.reg:find("", "v1", "pods")
  assert(E.cl:create(nsr, { metadata = { name = "load" } }))
  for i = 1, 5000 do
    assert(E.cl:create(pods, { metadata = { name = string.format("load-%05d", i), namespace = "load",
      labels = { tier = i % 2 == 0 and "a" or "b", shard = tostring(i % 10) } },
      spec = { containers = { { name = "c", image = "busybox" } }, nodeName = "node-" .. (i % 4),
        schedulerName = "none" } }))
  end
  local all, meta = assert(E.conn:list("v1", "Pod", { namespace = "load" }))
  t.eq(#all, 5000, "every page of 500")
  t.like(meta.resourceVersion, "^%d+$")
  local a = assert(E.conn:list("v1", "Pod", { namespace = "load", labels = { tier = "a" }, limit = 300 }))
  t.eq(#a, 2500)
  local seen, dup = {}, false
  for _, p in ipairs(a) do
    if seen[p.metadata.name] then dup = true end
    seen[p.metadata.name] = true
  end
  t.eq(dup, false, "no pod twice across pages")
  local one = assert(E.conn:list("v1", "Pod", { namespace = "load", labels = "tier=b,shard in (1,3)",
    fields = "spec.nodeName=node-1" }))
  for _, p in ipairs(one) do
    t.ok(p.metadata.labels.tier == "b" and p.spec.nodeName == "node-1", p.metadata.name)
  end
  t.ok(#one > 0 and #one < 2500, #one .. " pods match")
  local page, pmeta = assert(E.conn:list("v1", "Pod", { namespace = "load", limit = 7, page = true }))
  t.eq(#page, 7)
  t.ok(pmeta.continue, "a continue token for the next page")
end)

t.test("server-side apply is idempotent and labels what hypd made", function()
  local dep = { apiVersion = "apps/v1", kind = "Deployment", metadata = { name = "web", namespace = "default" },
    spec = { replicas = 0, selector = { matchLabels = { app = "web" } },
      template = { metadata = { labels = { app = "web" } }, spec = { containers = { { name = "web", image = "nginx" } } } } } }
  local first = assert(E.conn:apply(json.decode(json.encode(dep)), { operation = "op-123" }))
  task.sleep(5) -- the simulated deployment controller writes its status
  local now = assert(E.conn:get("apps/v1", "Deployment", "web", { namespace = "default" }))
  local second = assert(E.conn:apply(json.decode(json.encode(dep)), { operation = "op-123" }))
  t.eq(second.metadata.resourceVersion, now.metadata.resourceVersion, "a second apply changes nothing")
  t.eq(first.metadata.labels["app.kubernetes.io/managed-by"], "hypd")
  t.eq(first.metadata.labels["hypd.io/operation"], "op-123")
  t.eq(first.metadata.managedFields[#first.metadata.managedFields].manager, "hypd")
  local found = assert(E.conn:list("apps/v1", "Deployment", { namespace = "default",
    labels = "app.kubernetes.io/managed-by=hypd" }))
  t.eq(#found, 1)
  local patched = assert(E.conn:patch("apps/v1", "Deployment", "web", { metadata = { annotations = { x = "y" } } },
    { namespace = "default" }))
  t.eq(patched.metadata.annotations.x, "y")
end)

t.test("Kubernetes Status failures become error tables coded by reason", function()
  local none, err = E.conn:get("v1", "ConfigMap", "missing", { namespace = "default" })
  t.eq(none, nil)
  t.eq(err.code, "NotFound")
  t.eq(err.status, 404)
  t.eq(err.message, 'configmaps "missing" not found')
  assert(E.conn:create({ apiVersion = "v1", kind = "ConfigMap", metadata = { name = "dup", namespace = "default" } }))
  local _, dup = E.conn:create({ apiVersion = "v1", kind = "ConfigMap", metadata = { name = "dup", namespace = "default" } })
  t.eq(dup.code, "AlreadyExists")
  local _, bad = E.conn:create({ apiVersion = "v1", kind = "ConfigMap", metadata = { name = "Bad!", namespace = "default" } })
  t.eq(bad.code, "Invalid")
  t.eq(bad.fields[1].field, "metadata.name")
  local _, nokind = E.conn:get("example.com/v1", "Widget", "w")
  t.eq(nokind.code, "NotFound")
end)

t.test("a watch survives a dropped connection and resumes from its resourceVersion", function()
  local got = {}
  local w = task.spawn(function()
    return E.conn:watch("v1", "ConfigMap", { namespace = "default", labels = "watch=me" }, function(ev)
      got[#got + 1] = ev.type .. " " .. ev.object.metadata.name
      return #got < 3
    end)
  end)
  task.sleep(0.1)
  assert(E.conn:create({ apiVersion = "v1", kind = "ConfigMap", metadata = { name = "w1", namespace = "default",
    labels = { watch = "me" } } }))
  task.sleep(0.1)
  -- the API server goes away and comes back on the same endpoint
  skube.stop("us-west-2", NAME)
  task.sleep(0.1)
  local endpoint = skube.serve("us-west-2", state.view("us-west-2", "eks"):get("cluster", NAME))
  t.eq(endpoint, E.c.endpoint, "the same endpoint after a restart")
  assert(E.conn:create({ apiVersion = "v1", kind = "ConfigMap", metadata = { name = "w2", namespace = "default",
    labels = { watch = "me" } } }))
  assert(E.conn:delete("v1", "ConfigMap", "w1", { namespace = "default" }))
  t.eq(w:wait(), true)
  t.eq(got, { "ADDED w1", "ADDED w2", "DELETED w1" })
end)

t.test("a watch from a resourceVersion the server no longer has relists (410 Gone)", function()
  local saved = objects.RING
  objects.RING = 4
  for i = 1, 8 do
    assert(E.conn:create({ apiVersion = "v1", kind = "ConfigMap", metadata = { name = "gone" .. i,
      namespace = "default", labels = { gone = "yes" } } }))
  end
  objects.RING = saved
  local names = {}
  E.conn:watch("v1", "ConfigMap", { namespace = "default", labels = "gone=yes", resource_version = "1" },
    function(ev)
      names[#names + 1] = ev.object.metadata.name
      return #names < 8
    end)
  table.sort(names)
  t.eq(#names, 8, "the relist replays every current object")
  t.eq(names[1], "gone1")
end)

t.test("pod logs: tail, and follow as a stream until the container stops", function()
  local pods = E.cl.reg:find("", "v1", "pods")
  local p = assert(E.cl:create(pods, { metadata = { name = "talker", namespace = "default" },
    spec = { nodeName = "node-x", schedulerName = "none", containers = { { name = "main", image = "busybox" } } } }))
  p = json.decode(json.encode(p))
  p.status = { phase = "Running", containerStatuses = { { name = "main", ready = true, restartCount = 0,
    state = { running = { startedAt = p.metadata.creationTimestamp } } } } }
  assert(E.cl:update(pods, p, { subresource = "status" }))
  for i = 1, 3 do logs.append(E.cl, "default", "talker", "main", "line " .. i) end
  t.eq(E.conn:logs("talker", { namespace = "default", tail = 2 }), "line 2\nline 3\n")
  local lines = {}
  local f = task.spawn(function()
    return E.conn:logs("talker", { namespace = "default", follow = true,
      on_line = function(l) lines[#lines + 1] = l end })
  end)
  task.sleep(0.2)
  logs.append(E.cl, "default", "talker", "main", "line 4")
  task.sleep(0.2)
  local done = json.decode(json.encode(E.cl:get(pods, "default", "talker")))
  done.status.phase = "Succeeded"
  assert(E.cl:update(pods, done, { subresource = "status" }))
  logs.ended(E.cl, "default", "talker")
  local ok, n = f:wait()
  t.eq(ok, true)
  t.eq(n, 4)
  t.eq(lines, { "line 1", "line 2", "line 3", "line 4" })
end)

t.test("delete with wait returns once the object is gone", function()
  assert(E.conn:create({ apiVersion = "v1", kind = "ConfigMap", metadata = { name = "bye", namespace = "default" } }))
  t.eq(E.conn:delete("v1", "ConfigMap", "bye", { namespace = "default", wait = true, timeout = 10 }), true)
  local _, err = E.conn:get("v1", "ConfigMap", "bye", { namespace = "default" })
  t.eq(err.code, "NotFound")
  t.eq(E.conn:delete("v1", "ConfigMap", "bye", { namespace = "default" }), true, "deleting what is gone succeeds")
end)

t.cleanup(function()
  skube.stop_all()
  srv:stop()
end)
