-- hypd.tool.guard_request: the one chokepoint every signed request passes.
-- hypd.http calls it for each request that carries credentials hypd
-- attaches (aws = {...}: SigV4 in C; eks = {...}: an EKS bearer token in
-- C; kubernetes = true: a Kubernetes connection's kubeconfig token), before
-- anything is signed or sent:
--
--   * what the request is comes from the request itself
--     (hypd.aws.classify: target, Action, or method and path as the model
--     maps them; hypd.k8s.classify: verb and resource), never from the
--     caller; the running tool's guard (hypd.tool.guard.current) must allow it,
--     with the same rules and messages as hypd.tool.guard.aws and .k8s;
--   * an EKS token (eks = {...}) goes only to an API server hypd.k8s
--     recorded for that cluster (the endpoint EKS names, or the operator's
--     kubeconfig), never to a URL a playbook picked;
--   * an AWS request that maps to no modelled operation is refused unless
--     the tool is destructive and declares raw access to that signing
--     service (`raw = { "eks" }` in its definition);
--   * every such request, sent or refused, is one audit record:
--     { tool, aws = "service:Operation" | k8s = "verb Kind/name", class,
--       outcome ("ok", "HTTP_<status>", a transport code, GUARDRAIL, or
--       "started" for a stream), status,
--       caller, front, refused = true|false }.
--
-- Host code with no tool running (no guard) is allowed and not audited:
-- it is hypd's own (the engine, tests, the command line).
--
--   guard_request.check(req) -> pending | nil, GUARDRAIL err
--   guard_request.done(pending, resp, err): the request ended (resp, or
--     the transport's err); writes its record. pending == true: no guard.
local aws_classify = require "hypd.aws.classify"
local errors = require "hypd.errors"
local guard = require "hypd.tool.guard"
local k8s_classify = require "hypd.k8s.classify"

local M = {}

local record = guard.audit

-- refused(g, rec, err) -> nil, err, audited (a refusal hypd.tool.guard's check
-- did not make, and so did not record)
local function refused(g, rec, err)
  rec.outcome, rec.refused = "GUARDRAIL", true
  record(g, rec)
  return nil, err
end
M.refused = refused

-- raw(g, service) -> true when the tool may send unmodelled requests signed for service
local function raw(g, service)
  local def = g.tool or {}
  if def.kind ~= "destructive" then return false end
  for _, s in ipairs(def.raw or {}) do if s == service then return true end end
  return false
end

local function aws(g, req)
  local c, why = aws_classify.request(req)
  local service = req.aws.service
  if not c then
    local method = (req.method or "GET"):upper()
    local rec = { aws = tostring(service) .. ":(raw " .. method .. ")", class = "deleting" }
    if raw(g, service) and not g.plan then
      rec.refused = false
      return rec
    end
    local name = g.tool and g.tool.name or "this tool"
    return refused(g, rec, errors.new("GUARDRAIL", string.format("%s may not send this request signed for %s: %s; " ..
      "a request that maps to no modelled operation is sent only by a destructive tool that declares raw = { %q }; " ..
      "nothing was sent", name, tostring(service), why, tostring(service)),
      { tool = name, action = rec.aws, rule = "unmodelled request" }))
  end
  -- a tie (the model maps the request to several operations, as S3's
  -- GET / is ListBuckets and ListDirectoryBuckets): the tool must declare
  -- one of them, and its kind must allow the highest class among them
  local chosen = c
  for _, cand in ipairs(c.candidates) do
    if guard.matches(g.tool.aws, cand.service .. ":" .. cand.operation) then chosen = cand break end
  end
  local action = chosen.service .. ":" .. chosen.operation
  local ok, err = guard.check(g, action, c.class, function(a) return guard.matches(g.tool.aws, a) end, "AWS actions")
  if not ok then
    err.service, err.operation = chosen.service, chosen.operation
    return nil, err -- check audited it
  end
  return { aws = action, class = c.class, refused = false }
end

local function kube(g, req)
  if req.eks and not k8s_classify.token_goes_to(req.eks, req.url) then
    local name = g.tool and g.tool.name or "this tool"
    return refused(g, { k8s = "token for " .. tostring(req.eks.cluster) .. " to " .. req.url:match("^[^?]*"),
      class = "deleting" }, errors.new("GUARDRAIL", string.format("%s may not send the EKS token of cluster %s to %s: " ..
      "it goes only to the API server EKS names for that cluster (hypd.k8s.connect); nothing was sent", name,
      tostring(req.eks.cluster), req.url:match("^[%a][%w+.-]*://[^/?#]*") or "that url"),
      { tool = name, rule = "EKS token to another server" }))
  end
  local c, why = k8s_classify.request(req.method, req.url, req.headers)
  if not c then
    local name = g.tool and g.tool.name or "this tool"
    return refused(g, { k8s = "unknown " .. tostring(req.method or "GET"), class = "deleting" },
      errors.new("GUARDRAIL", string.format("%s may not send this Kubernetes request: %s; nothing was sent", name, why),
        { tool = name, rule = "unclassified Kubernetes request" }))
  end
  if c.verb == "discover" then
    -- the API's own description: read by any tool that uses Kubernetes at all
    local rec = { k8s = "discover " .. c.what, class = "read" }
    if #(g.tool and g.tool.k8s or {}) == 0 then
      return refused(g, rec, guard.refuse(g, "kubernetes discovery " .. c.what,
        "the tool declares no Kubernetes verbs"))
    end
    rec.refused = false
    return rec
  end
  local class = c.dry and "read" or guard.K8S_VERBS[c.verb] or "deleting"
  local rec = { k8s = c.verb .. " " .. c.what, class = class, dry = c.dry or nil }
  local ok, err = guard.k8s(c.verb, c.what, c.dry)
  if not ok then return nil, err end -- check audited it
  rec.refused = false
  return rec
end

function M.check(req)
  local g = guard.current()
  if not g then return true end
  if req.aws then return aws(g, req) end
  return kube(g, req)
end

function M.done(pending, resp, err)
  if pending == true then return end
  local g = guard.current()
  if not g then return end
  if resp and resp.started then
    pending.outcome = "started" -- a stream: its status arrives after this
  elseif resp then
    pending.status = resp.status
    pending.outcome = resp.status and resp.status < 400 and "ok" or ("HTTP_" .. tostring(resp.status))
  else
    pending.outcome = tostring(type(err) == "table" and err.code or err)
  end
  record(g, pending)
end

-- signed(req) -> true when the request carries credentials hypd attaches
function M.signed(req)
  return req.aws ~= nil or req.eks ~= nil or req.kubernetes == true
end

return M
