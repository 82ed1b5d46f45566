-- sandbox.k8s.audit: every write a client sends to a simulated cluster's
-- API (create, update, patch, delete; not dry runs, not refusals) is one
-- "sandbox.k8s.audit" event, as the AWS services' mutations are
-- "sandbox.audit" events: {cluster, region, verb, group, resource, sub,
-- namespace, name, user}. A kind of its own, so the counts of AWS
-- mutations the tests compare stay what they are. The controllers' own
-- writes do not pass here: they are the cluster's, not a client's.
local api = require "sandbox.k8s.api"
local json = require "hypd.json"
local store = require "hypd.store"
local core = require "hypd.core"

local M = {}

local VERB = { POST = "create", PUT = "update", PATCH = "patch", DELETE = "delete" }

-- record(cluster, region, req, resp, user): the event of req when it was a write the cluster made
function M.record(cluster, region, req, resp, user)
  local verb = VERB[req.method]
  if not verb or type(resp) ~= "table" or type(resp.status) ~= "number" or resp.status >= 300 then return end
  local q = api.parse_query(req.query)
  if q.dryRun then return end
  local rt = api.route(req.path)
  -- objects and their scale and status; not a proxied request, an exec, an eviction, a token
  if not rt or rt.discovery or not rt.resource or (rt.sub and rt.sub ~= "scale" and rt.sub ~= "status") then
    return
  end
  local name = rt.name
  if verb == "delete" and not name then verb = "deletecollection" end
  if not name and verb == "create" and type(resp.body) == "string" then
    local ok, obj = pcall(json.decode, resp.body)
    name = ok and type(obj) == "table" and type(obj.metadata) == "table" and obj.metadata.name or nil
  end
  -- a review (SubjectAccessReview, TokenReview) writes nothing that stays
  if tostring(rt.resource):find("reviews$") then return end
  store.event("sandbox.k8s.audit", nil, { cluster = cluster, region = region, verb = verb, group = rt.group or "",
    resource = rt.resource, sub = rt.sub, namespace = rt.ns, name = name, user = user and user.name, at = core.now() })
end

return M
