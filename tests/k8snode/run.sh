#!/usr/bin/env bash
# The sandbox's EKS Kubernetes API through a second real client (TAP, one
# plan; tests/run runs it as the suite "k8snode"): @kubernetes/client-node
# against a HyperPod-ready cluster, as tests/lua/k8s_kubectl_test.lua does
# with kubectl:
#   1. `hypd sandbox --virtual-clock` in the background, its environment
#      read from the `export` lines it prints;
#   2. tests/tools/hyperpod_cluster.py (boto3) builds the EKS cluster, its
#      add-ons and a HyperPod cluster of two ml.g5.12xlarge nodes;
#   3. `hypd kubeconfig --write` writes the kubeconfig (the cluster's CA, the
#      exec plugin `hypd eks-token`);
#   4. tests/k8snode/client.mjs runs the client's checks through it.
# The client is pinned in tests/k8snode/package-lock.json (1.4.0, the last
# line that runs on node 20); `npm ci` installs it when
# tests/k8snode/node_modules lacks it, and everything runs offline after
# that. Without node (20 or later), npm or python3's boto3 the suite is one
# skipped check.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${HYPD_BUILD:-${BUILD:-build}}
HYPD=$BUILD/hypd
DIR=tests/k8snode
PIN=1.4.0
n=0
pids=()
tmp=$(mktemp -d /tmp/hypd-k8snode.XXXXXX)

# shellcheck disable=SC2317 # run by the trap
cleanup() {
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null
	done
	for p in "${pids[@]}"; do
		wait "$p" 2>/dev/null
	done
	rm -rf "$tmp"
}
trap cleanup EXIT

. tests/tap.sh # result, skip, comment, finish, tap, wait_line

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	skip "@kubernetes/client-node against a sandbox EKS cluster" "node or npm is absent"
	finish
fi
major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$major" -lt 20 ]; then
	skip "@kubernetes/client-node against a sandbox EKS cluster" "node $(node --version 2>/dev/null) is older than 20"
	finish
fi
if ! python3 -c 'import boto3' 2>/dev/null; then
	skip "@kubernetes/client-node against a sandbox EKS cluster" "python3 or its boto3 is absent"
	finish
fi

# the pinned client
version() { node -p "require('./$DIR/node_modules/$1/package.json').version" 2>/dev/null; }
if [ "$(version @kubernetes/client-node)" != "$PIN" ]; then
	if (cd "$DIR" && timeout 180 npm ci --no-audit --no-fund) >"$tmp/npm.log" 2>&1; then
		result ok "npm ci installs the pinned @kubernetes/client-node $PIN"
	else
		result "not ok" "npm ci installs the pinned @kubernetes/client-node $PIN # npm ci failed"
		comment "$tmp/npm.log"
		finish
	fi
fi
export NODE_NO_WARNINGS=1

# 1. the sandbox; its environment for every later step (and no other AWS
# session or profile), the client's state apart from the suite's
"$HYPD" --state "$tmp/state" sandbox --listen 127.0.0.1:0 --virtual-clock \
	>"$tmp/sandbox.out" 2>"$tmp/sandbox.err" &
pids+=($!)
if ! wait_line "$tmp/sandbox.out" '^export AWS_SECRET_ACCESS_KEY=' "${pids[-1]}" >/dev/null; then
	result "not ok" "hypd sandbox starts and prints its environment"
	comment "$tmp/sandbox.err"
	finish
fi
while IFS= read -r line; do
	if [[ $line =~ ^export\ ([A-Z][A-Z0-9_]*)=([^[:space:]]+)$ ]]; then
		export "${BASH_REMATCH[1]}=${BASH_REMATCH[2]}"
	fi
done <"$tmp/sandbox.out"
unset AWS_SESSION_TOKEN AWS_PROFILE
export HYPD_STATE=$tmp/client
mkdir -p "$HYPD_STATE"
result ok "hypd sandbox starts at ${AWS_ENDPOINT_URL:-?}"

# 2. the HyperPod-ready EKS cluster
if timeout -k 2 180 python3 tests/tools/hyperpod_cluster.py kn-demo hp-kn ml.g5.12xlarge 2 \
	>"$tmp/cluster.out" 2>"$tmp/cluster.err" &&
	grep -qE '^https://127\.0\.0\.1:[0-9]+$' "$tmp/cluster.out"; then
	result ok "hyperpod_cluster.py builds kn-demo and its HyperPod nodes ($(head -n 1 "$tmp/cluster.out"))"
else
	result "not ok" "hyperpod_cluster.py builds kn-demo and its HyperPod nodes"
	comment "$tmp/cluster.out" 5
	comment "$tmp/cluster.err"
	finish
fi

# 3. the kubeconfig
if timeout -k 2 30 "$HYPD" kubeconfig --cluster kn-demo --write "$tmp/kubeconfig" \
	>"$tmp/kubeconfig.out" 2>"$tmp/kubeconfig.err" && [ -s "$tmp/kubeconfig" ]; then
	result ok "hypd kubeconfig --write writes the cluster's kubeconfig"
else
	result "not ok" "hypd kubeconfig --write writes the cluster's kubeconfig"
	comment "$tmp/kubeconfig.err"
	finish
fi

# 4. the client
tap "the @kubernetes/client-node checks" timeout -k 2 120 node $DIR/client.mjs "$tmp/kubeconfig"
finish
