-- Cluster access from kubeconfig files: the YAML `aws eks update-kubeconfig`,
-- eksctl and kubectl write, hypd's own, JSON, YAML the old hand-written
-- subset refused (anchors, merges, flow style, block scalars, several
-- documents), the refusals that name what is wrong, the same reading as
-- kubectl's, and such a file used end to end against a sandbox EKS cluster.
local t = require "hypd.tap"
local aws = require "hypd.aws"
local json = require "hypd.json"
local k8s = require "hypd.k8s"
local kubeconfig = require "hypd.k8s.kubeconfig"
local sys = require "hypd.sys"
local yaml = require "hypd.yaml"
local H = dofile("tests/lua/helpers.lua")

local dir = H.tmpdir()
local HAVE_KUBECTL = H.sh("command -v kubectl") == 0

local AWS_CLI = [[
apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==
    server: https://ABCDEF.gr7.us-west-2.eks.amazonaws.com
  name: arn:aws:eks:us-west-2:123456789012:cluster/demo
contexts:
- context:
    cluster: arn:aws:eks:us-west-2:123456789012:cluster/demo
    user: arn:aws:eks:us-west-2:123456789012:cluster/demo
  name: arn:aws:eks:us-west-2:123456789012:cluster/demo
current-context: arn:aws:eks:us-west-2:123456789012:cluster/demo
kind: Config
preferences: {}
users:
- name: arn:aws:eks:us-west-2:123456789012:cluster/demo
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      args:
      - --region
      - us-west-2
      - eks
      - get-token
      - --cluster-name
      - demo
      - --output
      - json
      command: aws
      env:
      - name: AWS_PROFILE
        value: ml-team   # a comment
]]

-- as eksctl writes it: with aws-iam-authenticator, or with the AWS CLI
local EKSCTL = [[
apiVersion: v1
clusters:
- cluster:
    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==
    server: https://0123456789ABCDEF.gr7.eu-west-1.eks.amazonaws.com
  name: ml.eu-west-1.eksctl.io
contexts:
- context:
    cluster: ml.eu-west-1.eksctl.io
    user: admin@ml.eu-west-1.eksctl.io
  name: admin@ml.eu-west-1.eksctl.io
current-context: admin@ml.eu-west-1.eksctl.io
kind: Config
preferences: {}
users:
- name: admin@ml.eu-west-1.eksctl.io
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      args:
      - token
      - -i
      - ml
      command: aws-iam-authenticator
      env:
      - name: AWS_STS_REGIONAL_ENDPOINTS
        value: regional
      provideClusterInfo: false
]]
local EKSCTL_AWS = EKSCTL:gsub("      args:\n      %- token\n      %- %-i\n      %- ml\n      command: aws%-iam%-authenticator\n",
  "      args:\n      - eks\n      - get-token\n      - --output\n      - json\n      - --cluster-name\n      - ml\n" ..
  "      - --region\n      - eu-west-1\n      command: aws\n")
  :gsub("      provideClusterInfo: false\n", "      interactiveMode: IfAvailable\n      provideClusterInfo: false\n")

-- as kubectl writes it (kubectl config set-cluster, set-credentials, ...; the
-- extensions are minikube's)
local KUBECTL = [[
apiVersion: v1
clusters:
- cluster:
    certificate-authority: /home/me/.minikube/ca.crt
    extensions:
    - extension:
        last-update: Mon, 01 Jan 2024 10:00:00 UTC
        provider: minikube.sigs.k8s.io
        version: v1.32.0
      name: cluster_info
    server: https://192.168.49.2:8443
  name: minikube
contexts:
- context:
    cluster: minikube
    namespace: ml
    user: dev
  name: minikube
current-context: minikube
kind: Config
preferences: {}
users:
- name: dev
  user:
    token: dev-token-0123456789
]]

-- what the old subset refused: anchors and aliases, a << merge, flow style,
-- a literal block scalar, a quoted key, a tag, several documents
local FEATURES = [[
%YAML 1.1
--- # hand-written
apiVersion: v1
kind: Config
current-context: "ml"
clusters:
- name: &c prod
  cluster: &prod
    server: 'https://10.0.0.1:6443/'
    certificate-authority-data: |
      LS0tLS1CRUdJTiBD
      RVJUSUZJQ0FURS0t
      LS0tCg==
- name: staging
  cluster:
    <<: *prod
    server: https://10.0.0.2:6443
contexts: [{name: ml, context: {cluster: *c, user: &u eks, namespace: !!str training}},
           {name: stg, context: {cluster: staging, user: *u}}]
users:
- {name: *u, user: {exec: &exec {apiVersion: client.authentication.k8s.io/v1beta1, command: aws,
    args: [eks, get-token, --cluster-name, ml, --region, us-east-2], env: ~}}}
"preferences": {}
...
---
kind: Config
current-context: ignored
]]

t.test("the YAML aws eks update-kubeconfig writes gives server, CA and the EKS token plugin's cluster", function()
  local a = kubeconfig.parse(AWS_CLI, "config")
  t.eq(a.server, "https://ABCDEF.gr7.us-west-2.eks.amazonaws.com")
  t.like(a.ca_pem, "BEGIN CERTIFICATE")
  t.eq(a.eks, { cluster = "demo", region = "us-west-2", profile = "ml-team" })
  t.eq(a.token, nil)
end)

t.test("eksctl's kubeconfigs, with aws-iam-authenticator and with the AWS CLI", function()
  local a = kubeconfig.parse(EKSCTL, "eksctl")
  t.eq(a.server, "https://0123456789ABCDEF.gr7.eu-west-1.eks.amazonaws.com")
  t.eq(a.context, "admin@ml.eu-west-1.eksctl.io")
  t.eq(a.eks, { cluster = "ml" })
  t.ok(EKSCTL_AWS:find("interactiveMode", 1, true), "the AWS CLI variant was made")
  t.eq(kubeconfig.parse(EKSCTL_AWS, "eksctl").eks, { cluster = "ml", region = "eu-west-1" })
end)

t.test("a kubeconfig as kubectl writes it: a CA file, extensions, a namespace, a token", function()
  local a = kubeconfig.parse(KUBECTL, "kubectl")
  t.eq({ a.server, a.ca_file, a.namespace, a.token, a.eks }, { "https://192.168.49.2:8443", "/home/me/.minikube/ca.crt",
    "ml", "dev-token-0123456789", nil })
  if not HAVE_KUBECTL then return t.skip("no kubectl to write one") end
  local file = dir .. "/written"
  local function kc(args) return H.sh("kubectl config --kubeconfig " .. H.quote(file) .. " " .. args) end
  t.eq(kc("set-cluster c1 --server=https://10.1.2.3:6443 --certificate-authority=/etc/ca.pem"), 0)
  t.eq(kc("set-credentials u1 --token=written-by-kubectl"), 0)
  t.eq(kc("set-context ctx --cluster=c1 --user=u1 --namespace=ns1"), 0)
  t.eq(kc("set-credentials u2 --exec-command=aws --exec-api-version=client.authentication.k8s.io/v1beta1 " ..
    "--exec-arg=eks --exec-arg=get-token --exec-arg=--cluster-name --exec-arg=k1 --exec-env=AWS_REGION=ap-south-1"), 0)
  t.eq(kc("set-context ctx2 --cluster=c1 --user=u2"), 0)
  t.eq(kc("use-context ctx"), 0)
  local text = H.read(file)
  a = kubeconfig.parse(text, "written")
  t.eq({ a.server, a.ca_file, a.namespace, a.token }, { "https://10.1.2.3:6443", "/etc/ca.pem", "ns1",
    "written-by-kubectl" })
  t.eq(kubeconfig.parse(text, "written", "ctx2").eks, { cluster = "k1", region = "ap-south-1" })
end)

t.test("YAML the old subset refused reads: anchors, a merge, flow style, a block scalar, several documents", function()
  local a = kubeconfig.parse(FEATURES, "features")
  t.eq(a.server, "https://10.0.0.1:6443", "a single-quoted server, its trailing slash dropped")
  t.eq(a.ca_pem, "-----BEGIN CERTIFICATE-----\n", "a literal block of base64 lines")
  t.eq(a.namespace, "training")
  t.eq(a.eks, { cluster = "ml", region = "us-east-2" }, "the exec plugin inside flow style")
  local s = kubeconfig.parse(FEATURES, "features", "stg")
  t.eq(s.server, "https://10.0.0.2:6443", "the merged cluster's own server wins")
  t.eq(s.ca_pem, a.ca_pem, "the rest comes through the << merge")
  t.eq(s.namespace, nil)
  t.eq(kubeconfig.parse("a: 1\nb: &anchor x\ncurrent-context: c\ncontexts: [{name: c, context: {cluster: k}}]\n" ..
    "clusters: [{name: k, cluster: {server: https://h}}]\n", "anchor").server, "https://h",
    "the anchor the old subset refused at line 2")
end)

t.test("malformed YAML is refused with the file, line and column", function()
  local err = t.raises(function() kubeconfig.parse(AWS_CLI:gsub("  name: arn", "   name: arn", 1), "config") end,
    "VALIDATION")
  t.like(err.message, "^config: not a kubeconfig: line 6 column 4: ")
  err = t.raises(function() kubeconfig.parse("clusters: [\n", "cfg") end, "VALIDATION")
  t.like(err.message, "^cfg: not a kubeconfig: line 2 column 1: ")
end)

t.test("hypd's own kubeconfig, a JSON one with a static token, and a named context", function()
  local old_args = table.concat({ "--region", "us-west-2", "eks", "get-token", "--cluster-name", "demo", "--output",
    "json" }, "\n      - ")
  local new_args = table.concat({ "eks-token", "--cluster", "other", "--region", "eu-west-1" }, "\n      - ")
  local at = AWS_CLI:find(old_args, 1, true)
  local hypd_cfg = (AWS_CLI:sub(1, at - 1) .. new_args .. AWS_CLI:sub(at + #old_args)):gsub("command: aws",
    "command: /usr/local/bin/hypd")
  local a = kubeconfig.parse(hypd_cfg, "config")
  t.eq(a.eks.cluster, "other")
  t.eq(a.eks.region, "eu-west-1")
  local j = kubeconfig.parse([[{"apiVersion":"v1","kind":"Config","current-context":"a",
    "clusters":[{"name":"c1","cluster":{"server":"https://10.0.0.1:6443/"}},
                {"name":"c2","cluster":{"server":"https://10.0.0.2"}}],
    "contexts":[{"name":"a","context":{"cluster":"c1","user":"u"}},
                {"name":"b","context":{"cluster":"c2","user":"u","namespace":"ml"}}],
    "users":[{"name":"u","user":{"token":"sekret-token-123"}}]}]], "j")
  t.eq(a.token, nil)
  t.eq(j.server, "https://10.0.0.1:6443")
  t.eq(j.token, "sekret-token-123")
  local b = kubeconfig.parse(json.encode(json.decode([[{"current-context":"a",
    "clusters":[{"name":"c2","cluster":{"server":"https://10.0.0.2"}}],
    "contexts":[{"name":"b","context":{"cluster":"c2","user":"u","namespace":"ml"}}],
    "users":[{"name":"u","user":{"token":"x"}}]}]])), "j", "b")
  t.eq(b.server, "https://10.0.0.2")
  t.eq(b.namespace, "ml")
end)

t.test("empty and null fields read as absent, as kubectl reads them", function()
  local a = kubeconfig.parse("current-context: c\ncontexts:\n- name: c\n  context:\n    cluster: k\n    namespace:\n" ..
    "    user: ~\nclusters:\n- name: k\n  cluster:\n    server: https://h\n    certificate-authority-data: null\n" ..
    "users:\n", "nulls")
  t.eq({ a.server, a.namespace, a.ca_pem, a.token, a.eks }, { "https://h" })
  local err = t.raises(function() kubeconfig.parse("", "empty") end, "VALIDATION")
  t.eq(err.message, "empty: no current-context and no context given")
end)

t.test("refusals name the field: unknown plugin, client certificates, insecure TLS, missing context", function()
  local function refused(text, field, pattern, context)
    local ok, err = pcall(kubeconfig.parse, text, "cfg", context)
    t.eq(ok, false)
    t.eq(err.fields and err.fields.field or err.field, field)
    t.like(err.message, pattern)
  end
  refused(AWS_CLI:gsub("command: aws", "command: gke-gcloud-auth-plugin"), "exec", "not one hypd understands")
  refused([[{"current-context":"a",
    "clusters":[{"name":"c","cluster":{"server":"https://h","insecure-skip-tls-verify":true}}],
    "contexts":[{"name":"a","context":{"cluster":"c","user":"u"}}],"users":[{"name":"u","user":{}}]}]],
    "insecure-skip-tls-verify", "not supported")
  refused([[{"current-context":"a","clusters":[{"name":"c","cluster":{"server":"https://h"}}],
    "contexts":[{"name":"a","context":{"cluster":"c","user":"u"}}],
    "users":[{"name":"u","user":{"client-certificate-data":"x"}}]}]],
    "client-certificate", "client certificates")
  refused(AWS_CLI, "context", "no context named 'nope'", "nope")
  -- kubectl reads YAML 1.1 booleans here, so yes/on are refused too, and no/off pass
  for _, v in ipairs { "yes", "on", "Y", "True" } do
    refused(KUBECTL:gsub("    server: https", "    insecure-skip-tls-verify: " .. v .. "\n    server: https"),
      "insecure-skip-tls-verify", "insecure%-skip%-tls%-verify is not supported")
  end
  for _, v in ipairs { "no", "off", "false" } do
    t.eq(kubeconfig.parse((KUBECTL:gsub("    server: https", "    insecure-skip-tls-verify: " .. v ..
      "\n    server: https")), "cfg").server, "https://192.168.49.2:8443")
  end
  refused(KUBECTL:gsub("    server: https", "    insecure-skip-tls-verify: maybe\n    server: https"),
    "insecure-skip-tls-verify", "must be true or false")
  -- kubectl refuses a number or boolean in a string field; so does hypd, by name
  refused(KUBECTL:gsub("namespace: ml", "namespace: 0600"), "namespace", "namespace must be a string, not integer 384")
  refused(KUBECTL:gsub("token: dev%-token%-0123456789", "token: 12345"), "token", "token must be a string")
  -- a key written twice is refused (kubectl would keep the last)
  local ok, err = pcall(kubeconfig.parse, KUBECTL:gsub("    token: dev", "    token: first\n    token: dev"), "cfg")
  t.eq(ok, false)
  t.eq(err.message, 'cfg: not a kubeconfig: line 26 column 5: duplicate key "token"')
end)

-- the fields hypd takes from each context, from a decoded kubeconfig
local function digest(cfg)
  local function val(v) if v ~= json.null then return v end end
  local function find(list, name)
    for _, x in ipairs(type(list) == "table" and list or {}) do if x.name == name then return x end end
  end
  local out = {}
  for _, c in ipairs(cfg.contexts or {}) do
    local cl = find(cfg.clusters, c.context.cluster) or { cluster = {} }
    local u = find(cfg.users, val(c.context.user)) or { user = {} }
    local ca = val(cl.cluster["certificate-authority-data"])
    local exec = val(u.user.exec)
    out[c.name] = { server = cl.cluster.server, namespace = val(c.context.namespace),
      ca = ca and sys.b64decode((ca:gsub("\n", ""))), ca_file = val(cl.cluster["certificate-authority"]),
      token = val(u.user.token), command = exec and exec.command, args = exec and val(exec.args) }
  end
  return out
end

t.test("hypd reads each of these files as kubectl reads it", function()
  if not HAVE_KUBECTL then return t.skip("no kubectl") end
  local compared = 0
  for name, text in pairs { aws_cli = AWS_CLI, eksctl = EKSCTL, eksctl_aws = EKSCTL_AWS, kubectl = KUBECTL,
    features = FEATURES } do
    local file = H.write(dir .. "/" .. name, text)
    local rc, out, err = H.sh("kubectl config view --raw -o json --kubeconfig " .. H.quote(file))
    t.eq(rc, 0, name .. ": " .. tostring(err))
    local theirs = digest(json.decode(out))
    t.eq(digest(yaml.decode(text)), theirs, name)
    t.ok(next(theirs), name .. " has contexts")
    compared = compared + 1
  end
  t.eq(compared, 5)
end)

-- a sandbox EKS cluster in this process, for the end-to-end test
local srv, OPTS = H.sandbox_here()

local function call(service, op, params) return aws.call(service, op, params or {}, OPTS) end

t.test("a kubeconfig with anchors, a merge, flow style and a literal-block CA reaches a sandbox cluster", function()
  local c = H.eks_cluster(call, "kc-yaml", 71)
  -- the CA as base64 lines in a literal block, the server through a merge
  local ca_lines = {}
  for i = 1, #c.certificateAuthority.data, 64 do
    ca_lines[#ca_lines + 1] = "      " .. c.certificateAuthority.data:sub(i, i + 63)
  end
  local text = table.concat({
    "# two clusters share one definition",
    "apiVersion: v1",
    "kind: Config",
    "current-context: sandbox",
    "clusters:",
    "- name: &name " .. c.arn,
    "  cluster: &base",
    "    server: https://unused.example",
    "    certificate-authority-data: |",
    table.concat(ca_lines, "\n"),
    "- name: real",
    "  cluster:",
    "    <<: *base",
    "    server: '" .. c.endpoint .. "'",
    "contexts: [{name: sandbox, context: {cluster: real, user: *name, namespace: kube-system}}]",
    "users:",
    "- name: *name",
    "  user:",
    "    exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: aws,",
    "           args: [--region, us-west-2, eks, get-token, --cluster-name, kc-yaml]}",
    "---",
    "kind: NotAKubeconfig",
  }, "\n") .. "\n"
  local file = H.write(dir .. "/sandbox-kubeconfig", text)
  local conn = k8s.from_kubeconfig { path = file }
  t.eq(conn.server, c.endpoint)
  t.eq(conn.namespace, "kube-system")
  local ns = assert(conn:get("v1", "Namespace", "kube-system"))
  t.eq(ns.metadata.name, "kube-system")
  local cm = assert(conn:get("v1", "ConfigMap", "kube-root-ca.crt", { namespace = "kube-system" }))
  t.eq(cm.data["ca.crt"], sys.b64decode(c.certificateAuthority.data))
end)

t.cleanup(function()
  require("sandbox.k8s").stop_all()
  srv:stop()
  os.execute("rm -rf " .. H.quote(dir))
end)
