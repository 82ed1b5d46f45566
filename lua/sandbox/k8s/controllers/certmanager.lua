-- sandbox.k8s.controllers.certmanager: what cert-manager (the EKS add-on
-- cert-manager, whose Deployment cert-manager serves its cert-manager.io
-- CRDs) does for the objects hypd applies: while that Deployment has a
-- ready replica,
--   * an Issuer with spec.selfSigned is Ready (reason IsReady); an Issuer
--     of another kind (acme, ca, vault...) is not simulated: Ready False;
--   * a Certificate whose issuerRef names a Ready Issuer of its namespace
--     gets its Secret spec.secretName (type kubernetes.io/tls, tls.crt,
--     tls.key and ca.crt: a real self-signed certificate for its dnsNames,
--     made with sys.tls_cert) and Ready True (reason Ready, event Issuing);
--     with no such Issuer, Ready False (reason IssuerNotReady), as
--     cert-manager leaves it.
-- Without cert-manager running, nothing is issued: a pod mounting the
-- Secret waits, as it would.
local ctl_ = require "sandbox.k8s.controllers._ctl"
local sys = require "hypd.sys"

local M = {}

local function running(ctl)
  local d = ctl.cl:get(ctl:r("apps", "v1", "deployments"), "cert-manager", "cert-manager")
  return d ~= nil and ((d.status or {}).readyReplicas or 0) > 0
end

local function ready(obj, status, reason, message)
  local st = ctl_.copy(obj.status or {})
  st.conditions = ctl_.set_condition(st.conditions, "Ready", status, reason, message)
  return st
end

ctl_.handlers.certmanager = function(ctl)
  local cl = ctl.cl
  local ir, cr = ctl:r("cert-manager.io", "v1", "issuers"), ctl:r("cert-manager.io", "v1", "certificates")
  if not ir or not cr or not running(ctl) then return end
  local ok = {}
  for _, i in ipairs(cl:list(ir)) do
    local self = (i.spec or {}).selfSigned ~= nil
    ctl_.put_status(ctl, ir, i, ready(i, self and "True" or "False", self and "IsReady" or "NotSimulated",
      self and "" or "the sandbox's cert-manager issues only from selfSigned Issuers"))
    if self then ok[i.metadata.namespace .. "/" .. i.metadata.name] = true end
  end
  local sr = ctl:r("", "v1", "secrets")
  for _, c in ipairs(cl:list(cr)) do
    local spec, ns = c.spec or {}, c.metadata.namespace
    local ref = spec.issuerRef or {}
    if (ref.kind or "Issuer") ~= "Issuer" or not ok[ns .. "/" .. tostring(ref.name)] then
      ctl_.put_status(ctl, cr, c, ready(c, "False", "IssuerNotReady", "Issuer " .. tostring(ref.name) ..
        " is not Ready"))
    elseif spec.secretName and not cl:get(sr, ns, spec.secretName) then
      local dns = spec.dnsNames or {}
      local cert, key = assert(sys.tls_cert { cn = spec.commonName or dns[1] or c.metadata.name, dns = dns })
      cl:create(sr, { apiVersion = "v1", kind = "Secret", type = "kubernetes.io/tls",
        metadata = { name = spec.secretName, namespace = ns,
          annotations = { ["cert-manager.io/certificate-name"] = c.metadata.name,
            ["cert-manager.io/issuer-name"] = ref.name, ["cert-manager.io/issuer-kind"] = "Issuer" } },
        data = { ["tls.crt"] = sys.b64encode(cert), ["tls.key"] = sys.b64encode(key),
          ["ca.crt"] = sys.b64encode(cert) } }, { manager = "cert-manager" })
      ctl_.event(ctl, c, "Normal", "Issuing", "The certificate has been successfully issued", "cert-manager")
      ctl_.put_status(ctl, cr, c, ready(c, "True", "Ready", "Certificate is up to date and has not expired"))
    elseif spec.secretName then
      ctl_.put_status(ctl, cr, c, ready(c, "True", "Ready", "Certificate is up to date and has not expired"))
    end
  end
end

function M.watch(ctl, _, r, obj)
  if r.group == "cert-manager.io" or (r.kind == "Secret") or
      (r.kind == "Deployment" and obj.metadata.name == "cert-manager") then
    ctl:enqueue("certmanager")
  end
end

function M.start(ctl) ctl:enqueue("certmanager") end

return M
