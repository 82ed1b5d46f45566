-- _lifecycle: the lifecycle scripts hypd uploads for a HyperPod
-- cluster on EKS, kept here as text so the binary carries them and an
-- operator can read (or override) them like any playbook module.
--
-- HyperPod downloads everything under LifeCycleConfig.SourceS3Uri to each
-- new instance and runs OnCreate (on_create.sh) from that directory as
-- root, before the node joins the EKS cluster. on_create.sh only sets up
-- the log and runs on_create_main.sh, which does the work; both must be
-- uploaded (a bucket holding on_create.sh alone fails every node).
--
--   M.PREFIX            the key prefix in the lifecycle bucket
--   M.ON_CREATE         the script HyperPod runs ("on_create.sh")
--   M.SCRIPTS           { {key = "on_create.sh", body = "..."}, ... }
local M = {}

M.PREFIX = "lifecycle/base-config/"
M.ON_CREATE = "on_create.sh"

local ON_CREATE = [[
#!/bin/bash
# hypd base lifecycle script for SageMaker HyperPod on EKS (OnCreate).
# HyperPod runs it as root from the directory it downloaded the scripts to,
# once per new instance, before the node joins the EKS cluster. It keeps a
# log and runs on_create_main.sh; a failure is reported to HyperPod (exit
# status) after a pause that lets the log reach CloudWatch.
set -o pipefail

LOG_DIR=/var/log/provision
LOG_FILE=$LOG_DIR/provisioning.log
mkdir -p "$LOG_DIR"
touch "$LOG_FILE"

log() { echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) $*" | tee -a "$LOG_FILE"; }

cd "$(dirname "$0")" || exit 1
log "[start] on_create.sh"
if ! bash ./on_create_main.sh >>"$LOG_FILE" 2>&1; then
  log "[error] on_create_main.sh failed; waiting 60 s so the log is uploaded"
  sleep 60
  log "[stop] on_create.sh failed"
  exit 1
fi
log "[stop] on_create.sh"
]]

local ON_CREATE_MAIN = [[
#!/bin/bash
# hypd base lifecycle script for SageMaker HyperPod on EKS, called by
# on_create.sh. It prepares the instance for Kubernetes workloads:
#   1. containerd and kubelet keep their data on the instance's largest
#      local volume: the secondary EBS volume HyperPod mounts at
#      /opt/sagemaker (InstanceStorageConfigs), or NVMe instance storage
#      at /opt/dlami/nvme when the instance has it;
#   2. limits for EFA and NCCL (locked memory, open files);
#   3. the GPUs in persistence mode when there are GPUs.
set -euxo pipefail

pick_data_dir() {
  for d in /opt/dlami/nvme /opt/sagemaker; do
    if mountpoint -q "$d"; then echo "$d"; return; fi
  done
}

DATA_DIR=$(pick_data_dir || true)
if [ -n "${DATA_DIR:-}" ]; then
  echo "keeping containerd and kubelet data under $DATA_DIR"
  mkdir -p "$DATA_DIR/containerd" "$DATA_DIR/kubelet"
  if [ -f /etc/containerd/config.toml ]; then
    sed -i "s|^root = .*|root = \"$DATA_DIR/containerd\"|" /etc/containerd/config.toml
    grep -q "^root = " /etc/containerd/config.toml ||
      sed -i "1i root = \"$DATA_DIR/containerd\"" /etc/containerd/config.toml
  fi
  if [ -d /var/lib/kubelet ] && [ ! -L /var/lib/kubelet ]; then
    cp -a /var/lib/kubelet/. "$DATA_DIR/kubelet/" 2>/dev/null || true
    rm -rf /var/lib/kubelet
  fi
  ln -sfn "$DATA_DIR/kubelet" /var/lib/kubelet
  systemctl is-active --quiet containerd && systemctl restart containerd || true
else
  echo "no secondary volume or instance storage; containerd keeps its default root"
fi

# EFA and NCCL need locked memory and many open files
cat >/etc/security/limits.d/90-hyperpod.conf <<'LIMITS'
* soft memlock unlimited
* hard memlock unlimited
* soft nofile 1048576
* hard nofile 1048576
LIMITS
mkdir -p /etc/systemd/system/containerd.service.d
cat >/etc/systemd/system/containerd.service.d/90-hyperpod-limits.conf <<'UNIT'
[Service]
LimitMEMLOCK=infinity
LimitNOFILE=1048576
UNIT
systemctl daemon-reload || true

if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi -pm 1 || true
fi
echo "on_create_main.sh done"
]]

M.SCRIPTS = {
  { key = "on_create.sh", body = ON_CREATE },
  { key = "on_create_main.sh", body = ON_CREATE_MAIN },
}

return M
