#!/usr/bin/env bash
# MCP through real clients (TAP, one plan; tests/run runs it as the suite
# "mcp"):
#   1. the official TypeScript SDK over stdio: `hypd mcp` in-process, and
#      `hypd mcp --api URL` through a `hypd serve` with its admin token;
#   2. the SDK over Streamable HTTP, against tests/mcp/http_entry.lua (the
#      /mcp endpoint alone on loopback, no token);
#   3. the MCP conformance suite against the same endpoint, judged against
#      baseline.yml (tests/mcp/conformance.mjs).
# The clients are pinned in tests/mcp/package-lock.json; `npm ci` installs
# them when tests/mcp/node_modules lacks them, and everything runs offline
# after that. Without node (20 or later) or npm the suite is one skipped
# check.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${HYPD_BUILD:-${BUILD:-build}}
HYPD=$BUILD/hypd
DIR=tests/mcp
n=0
pids=()
tmp=$(mktemp -d /tmp/hypd-mcp.XXXXXX)

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
	skip "MCP clients (the official SDK, the conformance suite)" "node or npm is absent"
	finish
fi
major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$major" -lt 20 ]; then
	skip "MCP clients (the official SDK, the conformance suite)" "node $(node --version 2>/dev/null) is older than 20"
	finish
fi

# the pinned clients
version() { node -p "require('./$DIR/node_modules/$1/package.json').version" 2>/dev/null; }
if [ "$(version @modelcontextprotocol/sdk)" != 1.32.2 ] ||
	[ "$(version @modelcontextprotocol/conformance)" != 0.1.13 ]; then
	if (cd "$DIR" && timeout 180 npm ci --no-audit --no-fund) >"$tmp/npm.log" 2>&1; then
		result ok "npm ci installs the pinned MCP SDK and conformance suite"
	else
		result "not ok" "npm ci installs the pinned MCP SDK and conformance suite # npm ci failed"
		comment "$tmp/npm.log"
		finish
	fi
fi
export NODE_NO_WARNINGS=1

# 1. stdio, in-process
mkdir -p "$tmp/stdio"
HYPD_STATE=$tmp/stdio tap "the stdio client" timeout -k 2 60 node $DIR/sdk_client.mjs stdio stdio "$HYPD" mcp

# 1b. stdio through a hypd server's REST API; the server has the sandbox
# behind it (virtual clock), so a mutating tool runs to the end
mkdir -p "$tmp/serve"
HYPD_CLOCK=virtual HYPD_STATE=$tmp/serve "$HYPD" serve --sandbox --listen 127.0.0.1:0 \
	>"$tmp/serve.out" 2>"$tmp/serve.err" &
pids+=($!)
if url=$(wait_line "$tmp/serve.out" 'listening on' "${pids[-1]}") &&
	token=$(wait_line "$tmp/serve.out" 'export HYPD_TOKEN=' "${pids[-1]}"); then
	url=${url##* }
	token=${token##*=}
	mkdir -p "$tmp/stdio-api"
	MUTATING=1 HYPD_STATE=$tmp/stdio-api HYPD_TOKEN=$token tap "the stdio --api client" \
		timeout -k 2 60 node $DIR/sdk_client.mjs stdio stdio-api "$HYPD" mcp --api "$url"
else
	result "not ok" "hypd serve starts and prints its URL and token"
	comment "$tmp/serve.err"
fi

# 2 and 3. Streamable HTTP
mkdir -p "$tmp/http"
HYPD_STATE=$tmp/http "$HYPD" test $DIR/http_entry.lua >"$tmp/http.out" 2>"$tmp/http.err" &
pids+=($!)
if port=$(wait_line "$tmp/http.out" '^mcp-port [0-9]+$' "${pids[-1]}"); then
	mcp_url=http://127.0.0.1:${port#mcp-port }/mcp
	tap "the HTTP client" timeout -k 2 60 node $DIR/sdk_client.mjs http http "$mcp_url"
	tap "the conformance harness" timeout -k 2 300 node $DIR/conformance.mjs "$mcp_url"
else
	result "not ok" "the MCP endpoint starts (tests/mcp/http_entry.lua)"
	comment "$tmp/http.err"
fi
finish
