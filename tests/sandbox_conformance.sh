#!/usr/bin/env bash
# The sandbox judged by real AWS clients: starts `hypd sandbox` on a free
# loopback port, then runs the AWS SDK for JavaScript v3 harness
# (tests/sdk/conformance.mjs) and the boto3 one (tests/sdk/conformance_boto3.py)
# against it with the environment the sandbox prints. Both speak TAP; their
# lines are renumbered into one stream with one plan at the end. Every step
# has a timeout, so a hung sandbox or client shows up as "not ok", never as a
# hang.
#
# Env: BUILD (default $HYPD_BUILD, else build); the sandbox runs with
# --virtual-clock (simulated durations pass at once), or with --speed 1000
# when SANDBOX_CLOCK=speed; CONFORMANCE_TRACE=1 prints the failed requests
# and responses on stderr.
set -u
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-${HYPD_BUILD:-build}}
hypd=$BUILD/hypd
tmp=$(mktemp -d /tmp/hypd-conformance.XXXXXX)
sandbox_pid=
n=0

# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
	if [ -n "$sandbox_pid" ]; then
		kill "$sandbox_pid" 2>/dev/null
		wait "$sandbox_pid" 2>/dev/null
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# tap FILE: renumbers FILE's test lines into the combined stream; drops its plan
tap() {
	local line re='^(not ok|ok) [0-9]+(.*)$'
	while IFS= read -r line || [ -n "$line" ]; do
		if [[ $line =~ $re ]]; then
			n=$((n + 1))
			printf '%s %d%s\n' "${BASH_REMATCH[1]}" "$n" "${BASH_REMATCH[2]}"
		elif [[ $line =~ ^1\.\.[0-9]+ ]]; then
			:
		else
			printf '%s\n' "$line"
		fi
	done <"$1"
}

# result OK DESCRIPTION: one line of the harness's own
result() {
	n=$((n + 1))
	if [ "$1" = ok ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi
}
# skip DESCRIPTION REASON: a check that cannot run here (counted apart, never as a pass)
skip() { result ok "$1 # SKIP $2"; }

# tail_comment FILE: the last lines of FILE as TAP comments
tail_comment() {
	tail -n "${2:-15}" "$1" 2>/dev/null | sed 's/^/#   /'
}

finish() {
	echo "1..$n"
	exit 0
}

# run NAME PLANFILE CMD...: runs one client harness with a timeout and adds its TAP
run() {
	local name=$1 out=$tmp/$1.tap err=$tmp/$1.err rc
	shift
	"$@" >"$out" 2>"$err"
	rc=$?
	tap "$out"
	if [ "$CONFORMANCE_TRACE" = 1 ]; then cat "$err" >&2; fi
	if ! grep -q '^1\.\.[0-9]' "$out"; then
		if [ "$rc" -eq 124 ]; then
			result "not ok" "the $name harness finished in time # killed by its timeout"
		else
			result "not ok" "the $name harness printed its plan # exit status $rc"
		fi
		tail_comment "$err"
	elif [ "$rc" -ne 0 ]; then
		result "not ok" "the $name harness exits cleanly # exit status $rc"
		tail_comment "$err"
	fi
}
CONFORMANCE_TRACE=${CONFORMANCE_TRACE:-0}

# 1. the sandbox
if [ ! -x "$hypd" ]; then
	result "not ok" "the sandbox starts # $hypd is not built"
	finish
fi
clock=(--virtual-clock)
if [ "${SANDBOX_CLOCK:-virtual}" = speed ]; then clock=(--speed 1000); fi
timeout -k 5 150 "$hypd" --state "$tmp/state" sandbox --listen 127.0.0.1:0 "${clock[@]}" \
	>"$tmp/sandbox.out" 2>"$tmp/sandbox.err" </dev/null &
sandbox_pid=$!
for _ in $(seq 200); do
	grep -q '^export AWS_SECRET_ACCESS_KEY=' "$tmp/sandbox.out" 2>/dev/null && break
	kill -0 "$sandbox_pid" 2>/dev/null || break
	sleep 0.05
done
if ! grep -q '^export AWS_SECRET_ACCESS_KEY=' "$tmp/sandbox.out" 2>/dev/null; then
	result "not ok" "the sandbox starts and prints its environment"
	tail_comment "$tmp/sandbox.err"
	finish
fi
sleep 0.2
if ! kill -0 "$sandbox_pid" 2>/dev/null; then
	result "not ok" "the sandbox keeps running once started # it exited"
	tail_comment "$tmp/sandbox.err"
	finish
fi
# only the sandbox's AWS environment reaches the clients
for v in $(env | sed -n 's/^\(AWS_[A-Z0-9_]*\)=.*/\1/p'); do unset "$v"; done
while IFS= read -r line; do
	if [[ $line =~ ^export\ (AWS_[A-Z_]+)=(.*)$ ]]; then export "${BASH_REMATCH[1]}=${BASH_REMATCH[2]}"; fi
done <"$tmp/sandbox.out"
export AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_EC2_METADATA_DISABLED=true
export AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED=true NODE_NO_WARNINGS=1 PYTHONDONTWRITEBYTECODE=1
echo "# sandbox at $AWS_ENDPOINT_URL (${clock[*]})"

# 2. the AWS SDK for JavaScript v3
echo "# AWS SDK for JavaScript v3 (tests/sdk/conformance.mjs)"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	skip "the AWS SDK for JavaScript v3 harness" "node or npm is absent"
else
	ready=1
	for c in sts iam ec2 s3 eks sagemaker fsx; do
		[ -f "tests/node/node_modules/@aws-sdk/client-$c/package.json" ] || ready=0
	done
	if [ "$ready" = 0 ]; then
		if (cd tests/node && timeout 120 npm ci --no-audit --no-fund) >"$tmp/npm.log" 2>&1; then
			result ok "npm ci installs the pinned AWS SDK clients"
		else
			result "not ok" "npm ci installs the pinned AWS SDK clients # npm ci failed"
			tail_comment "$tmp/npm.log"
			ready=-1
		fi
	fi
	if [ "$ready" != -1 ]; then
		run node timeout -k 2 40 env CONFORMANCE_BUDGET_MS=20000 node tests/sdk/conformance.mjs
	fi
fi

# 3. boto3
echo "# boto3 (tests/sdk/conformance_boto3.py)"
if ! command -v python3 >/dev/null; then
	skip "the boto3 harness" "python3 is absent"
else
	run boto3 timeout -k 2 40 env CONFORMANCE_BUDGET_S=15 python3 tests/sdk/conformance_boto3.py
fi

# 4. the sandbox is still alive, and said nothing alarming
if kill -0 "$sandbox_pid" 2>/dev/null; then
	result ok "the sandbox is still running after both harnesses"
else
	result "not ok" "the sandbox is still running after both harnesses # it exited"
	tail_comment "$tmp/sandbox.err"
fi
if grep -q ' error ' "$tmp/sandbox.err"; then
	echo "# the sandbox logged errors:"
	grep ' error ' "$tmp/sandbox.err" | tail -n 20 | cut -c1-400 | sed 's/^/#   /'
fi
finish
