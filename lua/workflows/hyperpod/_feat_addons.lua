-- hyperpod/_feat_addons: the managed features that are an EKS add-on with
-- its identity: cert-manager, the FSx for Lustre CSI driver and the
-- HyperPod training operator. (The FSx CSI chain is the one
-- storage_create_fsx needs too: fsx_csi_driver.enable(ctx, env) builds it.)
--
--   cert_manager       add-on cert-manager (one replica of each part, as
--                      InstantStart installs it)
--   fsx_csi_driver     IAM role SM_HP_FSX_CSI_ROLE_<eks> trusting the
--                      cluster's OIDC provider for
--                      kube-system:fsx-csi-controller-sa, AmazonFSxFullAccess
--                      on it, add-on aws-fsx-csi-driver with that role
--   training_operator  prerequisites cert-manager and eks-pod-identity-agent
--                      (installed when missing, kept when it is disabled);
--                      IAM role SageMakerHyperPodTrainingOperator-<tag> of
--                      its own trusting pods.eks.amazonaws.com with the AWS
--                      managed policy AmazonSageMakerHyperPodTrainingOperatorAccess
--                      (what the SageMaker console's one-click install
--                      makes; the execution role of the instance groups is
--                      left alone); add-on
--                      amazon-sagemaker-hyperpod-training-operator with the
--                      Pod Identity association for
--                      aws-hyperpod/hp-training-operator-controller-manager;
--                      then the HyperPodPyTorchJob API is served. A Pod
--                      Identity association for that service account that
--                      already exists on another role is used as it is.
local Names = require "_names"
local A = require "_eks_addon"
local F = require "hyperpod._feat"
local I = require "hyperpod._feat_iam"
local K = require "_k8s_objects"

local M = { features = {} }

M.CERT_MANAGER = "cert-manager"
M.CERT_CONFIG = { replicaCount = 1, cainjector = { replicaCount = 1 }, webhook = { replicaCount = 1 } }
M.POD_IDENTITY_AGENT = "eks-pod-identity-agent"
M.FSX = "aws-fsx-csi-driver"
M.FSX_SA = "kube-system:fsx-csi-controller-sa"
M.TRAINING = "amazon-sagemaker-hyperpod-training-operator"
M.TRAINING_NS, M.TRAINING_SA = "aws-hyperpod", "hp-training-operator-controller-manager"
M.TRAINING_POLICY = "AmazonSageMakerHyperPodTrainingOperatorAccess"
M.INFERENCE = "amazon-sagemaker-hyperpod-inference"
M.PYTORCH_CRD = "hyperpodpytorchjobs.sagemaker.amazonaws.com"

local function addon_part(ctx, env, name, label, prerequisite)
  local p = A.read(ctx, env, name)
  p.part = label or ("EKS add-on " .. name)
  p.prerequisite = prerequisite
  return p
end

-- cert-manager ---------------------------------------------------------------------

local cert = { name = "cert_manager" }
M.features.cert_manager = cert

function cert.read(ctx, env)
  local parts = {}
  local p = F.part(parts, addon_part(ctx, env, M.CERT_MANAGER))
  local extra
  if not p.present then
    -- installed some other way (Helm, manifests): its controller runs
    local conn = ctx:k8s(env.eks)
    local d = K.get(conn, "apps/v1", "Deployment", "cert-manager", "cert-manager")
    if d then
      extra = { source = "kubernetes", note = "cert-manager runs in namespace cert-manager but is not the EKS " ..
        "add-on (" .. (select(2, K.owned(d)) or "installed another way") .. "); hypd leaves it alone" }
      return { enabled = true, status = "enabled", parts = parts, missing = hypd.json.array(), source = extra.source,
        note = extra.note }
    end
  end
  return F.state(parts)
end

function cert.matches(state, want) return state.enabled == want.enabled end

function cert.enable(ctx, env)
  A.ensure(ctx, env, "cert_manager", M.CERT_MANAGER, { config = M.CERT_CONFIG })
end

function cert.disable(ctx, env)
  A.absent(ctx, env, M.CERT_MANAGER)
end

-- what needs cert-manager (disabling it is refused while they are on)
cert.needed_by = { training_operator = M.TRAINING, inference_operator = M.INFERENCE }

-- FSx for Lustre CSI driver -----------------------------------------------------

local fsx = { name = "fsx_csi_driver" }
M.features.fsx_csi_driver = fsx

local function fsx_trust(env) return I.trust_oidc(env, { M.FSX_SA }) end

function fsx.read(ctx, env)
  local n = F.names(env)
  local parts = {}
  local role = I.read_role(ctx, env, n.fsx_role, env.oidc_arn and fsx_trust(env),
    { I.aws_policy(env, "AmazonFSxFullAccess") })
  role.part = "IAM role " .. n.fsx_role .. " (" .. M.FSX_SA .. ", AmazonFSxFullAccess)"
  F.part(parts, role)
  local a = F.part(parts, addon_part(ctx, env, M.FSX))
  if a.present and role.present and a.role ~= role.id then
    a.note = "the add-on uses role " .. tostring(a.role) .. ", not " .. role.id
  end
  return F.state(parts)
end

function fsx.matches(state, want) return state.enabled == want.enabled end

-- enable(ctx, env): the role, its policy, the add-on with it (storage_create_fsx builds the same chain)
function fsx.enable(ctx, env)
  local n = F.names(env)
  F.oidc(ctx, env, "fsx_csi_driver")
  local role = I.role(ctx, env, "fsx_csi_driver", n.fsx_role, fsx_trust(env),
    "hypd " .. env.tag .. ": the FSx for Lustre CSI driver's controller (" .. M.FSX_SA .. ")")
  I.attach(ctx, role, I.aws_policy(env, "AmazonFSxFullAccess"))
  A.ensure(ctx, env, "fsx_csi_driver", M.FSX, { role_arn = role.Arn })
end

function fsx.disable(ctx, env)
  local n = F.names(env)
  A.absent(ctx, env, M.FSX)
  I.role_absent(ctx, env, n.fsx_role)
end

fsx.needed_by = { inference_operator = M.INFERENCE }

-- HyperPod training operator -----------------------------------------------------

local train = { name = "training_operator" }
M.features.training_operator = train

local TRAINING_TRUST = I.trust_services({ "pods.eks.amazonaws.com" }, { "sts:AssumeRole", "sts:TagSession" })

-- association(ctx, env) -> the Pod Identity association of the operator's
-- service account, described, or nil
local function association(ctx, env)
  local list = F.try(ctx, "ResourceNotFoundException", "eks", "ListPodIdentityAssociations", { clusterName = env.eks,
    namespace = M.TRAINING_NS, serviceAccount = M.TRAINING_SA })
  local a = list and (list.associations or {})[1]
  if not a then return nil end
  local d = F.try(ctx, "ResourceNotFoundException", "eks", "DescribePodIdentityAssociation",
    { clusterName = env.eks, associationId = a.associationId })
  return d and d.association
end

function train.read(ctx, env)
  local n = F.names(env)
  local parts = {}
  F.part(parts, addon_part(ctx, env, M.CERT_MANAGER, nil, true))
  F.part(parts, addon_part(ctx, env, M.POD_IDENTITY_AGENT, nil, true))
  local pia = association(ctx, env)
  local mine = not pia or pia.roleArn == I.arn(env, "role", n.training_role)
  local role = I.read_role(ctx, env, n.training_role, TRAINING_TRUST, { I.aws_policy(env, M.TRAINING_POLICY) })
  role.part = "IAM role " .. n.training_role .. " (pods.eks.amazonaws.com, " .. M.TRAINING_POLICY .. ")"
  if mine then
    F.part(parts, role)
  else
    role.optional, role.prerequisite = true, true
    role.note = "not needed: the service account's Pod Identity association uses role " .. tostring(pia.roleArn)
    F.part(parts, role)
  end
  F.part(parts, addon_part(ctx, env, M.TRAINING))
  F.part(parts, { part = "Pod Identity association " .. M.TRAINING_NS .. "/" .. M.TRAINING_SA, present = pia ~= nil,
    id = pia and pia.associationArn, role = pia and pia.roleArn, ok = true })
  local crd = K.get(ctx:k8s(env.eks), "apiextensions.k8s.io/v1", "CustomResourceDefinition", M.PYTORCH_CRD)
  F.part(parts, { part = "CRD " .. M.PYTORCH_CRD .. " (served by the add-on)", present = crd ~= nil, ok = true,
    optional = true, derived = true })
  -- the CRD comes and goes with the add-on: it is not one of the parts hypd makes
  parts[#parts].prerequisite = true
  return F.state(parts)
end

function train.matches(state, want) return state.enabled == want.enabled end

function train.enable(ctx, env)
  local n = F.names(env)
  cert.enable(ctx, env)
  A.ensure(ctx, env, "training_operator", M.POD_IDENTITY_AGENT)
  local pia = association(ctx, env)
  local role_arn = pia and pia.roleArn
  if not pia or pia.roleArn == I.arn(env, "role", n.training_role) then
    local role = I.role(ctx, env, "training_operator", n.training_role, TRAINING_TRUST,
      "hypd " .. env.tag .. ": the HyperPod training operator (" .. M.TRAINING_NS .. "/" .. M.TRAINING_SA .. ")")
    I.attach(ctx, role, I.aws_policy(env, M.TRAINING_POLICY))
    role_arn = role.Arn
  else
    ctx:progress("the training operator's service account already has a Pod Identity association with role " ..
      tostring(pia.roleArn) .. "; it is used as it is")
  end
  local with = not pia and { { serviceAccount = M.TRAINING_SA, roleArn = role_arn } } or nil
  local _, made = A.ensure(ctx, env, "training_operator", M.TRAINING, { pod_identity = with })
  -- a planned add-on brings the association with it (its CreateAddon's
  -- podIdentityAssociations, in the add-on's plan entry): listed again it
  -- would be a create the run never sends
  if ctx.plan and with and made == "create" then return end
  -- an add-on that was there before without the association gets one of its own
  ctx:ensure { type = "eks:pod-identity-association", label = "Pod Identity association",
    name = M.TRAINING_NS .. "/" .. M.TRAINING_SA .. " on " .. env.eks, id = "associationArn",
    exists = "ResourceInUseException", needs = role_arn,
    search = function() return association(ctx, env) end,
    fields = { namespace = M.TRAINING_NS, serviceAccount = M.TRAINING_SA, roleArn = role_arn },
    create = function()
      return ctx:call("eks", "CreatePodIdentityAssociation", { clusterName = env.eks, namespace = M.TRAINING_NS,
        serviceAccount = M.TRAINING_SA, roleArn = role_arn, tags = { [Names.TAG] = env.tag,
        [F.FEATURE_TAG] = "training_operator" } }).association
    end }
  if ctx.plan then return end
  -- the add-on serves the HyperPodPyTorchJob API
  local conn = ctx:k8s(env.eks)
  ctx:poll { what = "the HyperPodPyTorchJob API (CRD " .. M.PYTORCH_CRD .. ")", every = 5, timeout = 5 * 60,
    check = function()
      return K.get(conn, "apiextensions.k8s.io/v1", "CustomResourceDefinition", M.PYTORCH_CRD) ~= nil
    end }
end

function train.disable(ctx, env)
  local n = F.names(env)
  local addon = A.absent(ctx, env, M.TRAINING)
  -- the add-on's own association goes with it; one made beside it, for hypd's role, goes now
  ctx:absent { type = "eks:pod-identity-association", label = "Pod Identity association",
    name = M.TRAINING_NS .. "/" .. M.TRAINING_SA .. " on " .. env.eks, gone = { "ResourceNotFoundException" },
    find = function()
      local a = association(ctx, env)
      -- a plan, where the add-on is still there: the association it owns
      -- (ownerArn) is deleted by EKS with it, no delete of the run's own
      if a and ctx.plan and addon == "delete" and a.ownerArn then return nil end
      return a
    end,
    owned = function(a)
      if a.roleArn == I.arn(env, "role", n.training_role) then return true end
      return false, "it uses role " .. tostring(a.roleArn) .. ", not hypd's " .. n.training_role
    end,
    delete = function(a)
      ctx:call("eks", "DeletePodIdentityAssociation", { clusterName = env.eks, associationId = a.associationId })
    end }
  I.role_absent(ctx, env, n.training_role)
end

return M
