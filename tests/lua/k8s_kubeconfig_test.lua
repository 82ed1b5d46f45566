-- Cluster access from kubeconfig files: the YAML `aws eks update-kubeconfig`
-- writes, hypd's own, JSON, and the refusals (unknown plugins, client
-- certificates, skipped TLS verification) that name what is wrong.
local t = require "hypd.tap"
local kubeconfig = require "hypd.k8s.kubeconfig"
local yaml = require "hypd.k8s.yaml"

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

t.test("the YAML aws eks update-kubeconfig writes gives server, CA and the EKS token plugin's cluster", function()
  local a = kubeconfig.parse(AWS_CLI, "config")
  t.eq(a.server, "https://ABCDEF.gr7.us-west-2.eks.amazonaws.com")
  t.like(a.ca_pem, "BEGIN CERTIFICATE")
  t.eq(a.eks, { cluster = "demo", region = "us-west-2", profile = "ml-team" })
  t.eq(a.token, nil)
end)

t.test("YAML scalars: quoted strings, numbers, booleans, null, empty collections", function()
  local v = yaml.decode([[
a: "x: y \"q\""
b: 'it''s'
c: 42
d: true
e: ~
f: {}
g: []
h:
  - 1
  - two
  -
    k: v
]])
  t.eq(v.a, 'x: y "q"')
  t.eq(v.b, "it's")
  t.eq(v.c, 42)
  t.eq(v.d, true)
  t.eq(v.f, {})
  t.eq(v.h[1], 1)
  t.eq(v.h[2], "two")
  t.eq(v.h[3], { k = "v" })
end)

t.test("unsupported YAML is refused with its line number", function()
  local v, err = yaml.decode("a: 1\nb: &anchor x\n")
  t.eq(v, nil)
  t.like(err.message, "^line 2: unsupported YAML")
  local _, err2 = yaml.decode("a:\n  b: 1\n c: 2\n")
  t.like(err2.message, "line 3")
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
  local b = kubeconfig.parse(require("hypd.json").encode(require("hypd.json").decode([[{"current-context":"a",
    "clusters":[{"name":"c2","cluster":{"server":"https://10.0.0.2"}}],
    "contexts":[{"name":"b","context":{"cluster":"c2","user":"u","namespace":"ml"}}],
    "users":[{"name":"u","user":{"token":"x"}}]}]])), "j", "b")
  t.eq(b.server, "https://10.0.0.2")
  t.eq(b.namespace, "ml")
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
end)
