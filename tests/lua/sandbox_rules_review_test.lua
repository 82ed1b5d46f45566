-- kubectl auth can-i --list (issue 14): SelfSubjectRulesReview, answered
-- from the same access decision every request gets (the caller's EKS
-- access entry and policies). A cluster admin gets the cluster-admin
-- rules; a principal with AmazonEKSViewPolicy gets read verbs on every
-- resource but secrets; everyone gets the reviews and the discovery URLs.
local t = require "hypd.tap"
local K = dofile("tests/lua/sandbox_kubectl_helpers.lua").new("rr")
local H = K.H
t.cleanup(K.cleanup)

local V = "1.33"

t.test("a sandbox with a 1.33 EKS cluster", function() K.start { V } end)

t.test("kubectl auth can-i --list for the cluster's creator: everything, as cluster-admin reads", function()
  if not K.ready then return K.skip() end
  local rc, out, err = K.kubectl(V, "auth can-i --list")
  t.eq(rc, 0, err)
  t.like(out, "^Resources +Non%-Resource URLs +Resource Names +Verbs\n")
  t.like(out, "\n%*%.%* +%[%] +%[%] +%[%*%]\n")
  t.like(out, "\n +%[%*%] +%[%] +%[%*%]\n")
  t.like(out, "\nselfsubjectaccessreviews%.authorization%.k8s%.io +%[%] +%[%] +%[create%]\n")
end)

t.test("kubectl auth can-i --list for a view-only principal: read verbs, no secrets, no writes", function()
  if not K.ready then return K.skip() end
  local rc, out, err = H.with_env(K.env, K.dir, "python3 tests/tools/eks_viewer.py rr-1-33 rr-viewer")
  t.eq(rc, 0, err)
  local akid, secret, session = out:match("^(%S+) (%S+) (%S+)")
  if not akid then return end
  local as = "env AWS_ACCESS_KEY_ID=" .. akid .. " AWS_SECRET_ACCESS_KEY=" .. H.quote(secret) ..
    " AWS_SESSION_TOKEN=" .. H.quote(session) .. " kubectl"
  rc, out, err = K.kubectl(V, "auth can-i --list -n default", as)
  t.eq(rc, 0, err)
  t.ok(not out:match("\n%*%.%* "), "no wildcard rule:\n" .. out)
  t.like(out, "\npods +%[%] +%[%] +%[get list watch%]\n")
  t.like(out, "\ndeployments%.apps +%[%] +%[%] +%[get list watch%]\n")
  t.ok(not out:match("\nsecrets "), "no rule on secrets:\n" .. out)
  t.ok(not out:match("create list") and not out:match("%[create delete"), "no write verbs on resources:\n" .. out)
  t.like(out, "\n +%[/version%] +%[%] +%[get%]\n")
end)
