-- The Amazon EKS optimized AMIs the simulated account sees: one release
-- (RELEASE_DATE) of each AMI type for each Kubernetes version, the one a
-- managed node group launches by default (services/eks/nodegroups.lua
-- reports its releaseVersion, the Nodes its image id) and the one the
-- public SSM parameters under /aws/service/eks/optimized-ami/ name
-- (services/ssm.lua). An image id is the same for a region, an AMI type
-- and a release, as a real AMI's is.
local ctl_ = require "sandbox.k8s.controllers._ctl"

local M = {}

M.RELEASE_DATE = "20251103"
M.KUBELET = { ["1.28"] = "1.28.15", ["1.29"] = "1.29.15", ["1.30"] = "1.30.14", ["1.31"] = "1.31.10",
  ["1.32"] = "1.32.6", ["1.33"] = "1.33.3", ["1.34"] = "1.34.1" }

-- the SSM path segment of each AMI type, its image name prefix, and whether
-- it is published only up to Kubernetes 1.32 (Amazon Linux 2)
local TYPES = {
  AL2_x86_64 = { path = "amazon-linux-2", image = "amazon-eks-node-", al2 = true },
  AL2_x86_64_GPU = { path = "amazon-linux-2-gpu", image = "amazon-eks-gpu-node-", al2 = true },
  AL2_ARM_64 = { path = "amazon-linux-2-arm64", image = "amazon-eks-arm64-node-", al2 = true },
  AL2023_x86_64_STANDARD = { path = "amazon-linux-2023/x86_64/standard", image = "amazon-eks-node-al2023-x86_64-standard-" },
  AL2023_x86_64_NVIDIA = { path = "amazon-linux-2023/x86_64/nvidia", image = "amazon-eks-node-al2023-x86_64-nvidia-" },
  AL2023_x86_64_NEURON = { path = "amazon-linux-2023/x86_64/neuron", image = "amazon-eks-node-al2023-x86_64-neuron-" },
  AL2023_ARM_64_STANDARD = { path = "amazon-linux-2023/arm64/standard", image = "amazon-eks-node-al2023-arm64-standard-" },
}

-- release(version) -> the default release version of a Kubernetes version ("1.31.10-20251103"), or nil
function M.release(version)
  local k = M.KUBELET[version]
  return k and (k .. "-" .. M.RELEASE_DATE)
end

-- image_id(region, ami_type, release) -> "ami-0…": the AMI of that type and release in the region
function M.image_id(region, ami_type, release)
  local h = ctl_.hash(tostring(region) .. "/" .. tostring(ami_type) .. "/" .. tostring(release), 16)
  return "ami-0" .. (h:gsub(".", function(ch) return string.format("%x", ch:byte() % 16) end)):sub(1, 16)
end

-- published(region, version, path) -> { image_id, image_name, release_version }
-- of the recommended AMI that an SSM path segment ("amazon-linux-2023/x86_64/standard")
-- names for a version, or nil when EKS publishes none
function M.published(region, version, path)
  local minor = tonumber((version or ""):match("^1%.(%d+)$") or "")
  local release = M.release(version)
  if not release then return nil end
  for ami_type, t in pairs(TYPES) do
    if t.path == path and not (t.al2 and minor > 32) then
      return { image_id = M.image_id(region, ami_type, release),
        image_name = t.image .. version .. "-v" .. M.RELEASE_DATE, release_version = release }
    end
  end
end

return M
