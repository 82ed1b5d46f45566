#!/usr/bin/env bash
# The web UI in a real browser (TAP, one plan; tests/run runs it as the
# suite "web"): playwright-core (pinned in tests/web/package-lock.json)
# drives Debian's chromium headless against `hypd serve --sandbox` under
# the virtual clock (tests/web/ui.mjs runs the scenarios, each saving a
# screenshot of its final page under $BUILD/test-logs/web/). As root,
# chromium is installed when missing (mk/deps.sh web); without node 20, npm
# or chromium the suite is one skipped check.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${HYPD_BUILD:-${BUILD:-build}}
HYPD=$BUILD/hypd
DIR=tests/web
SHOTS=$BUILD/test-logs/web
n=0
pids=()
tmp=$(mktemp -d /tmp/hypd-web.XXXXXX)

# shellcheck disable=SC2317 # run by the trap
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT

. tests/tap.sh # result, skip, comment, finish, tap, wait_line

WHAT="the web UI in headless chromium"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then skip "$WHAT" "node or npm is absent"; finish; fi
if [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 20 ]; then skip "$WHAT" "node is older than 20"; finish; fi
if [ ! -x /usr/bin/chromium ] && [ "$(id -u)" -eq 0 ]; then mk/deps.sh web >"$tmp/apt.log" 2>&1; fi
if [ ! -x /usr/bin/chromium ]; then skip "$WHAT" "Debian's chromium is absent (apt-get install chromium)"; finish; fi
if [ "$(node -p "require('./$DIR/node_modules/playwright-core/package.json').version" 2>/dev/null)" != 1.65.1 ] ||
	[ "$(node -p "require('./$DIR/node_modules/axe-core/package.json').version" 2>/dev/null)" != 4.14.1 ]; then
	if ! (cd "$DIR" && timeout 180 npm ci --no-audit --no-fund) >"$tmp/npm.log" 2>&1; then
		result "not ok" "npm ci installs the pinned playwright-core and axe-core"
		comment "$tmp/npm.log"
		finish
	fi
fi
export NODE_NO_WARNINGS=1
mkdir -p "$SHOTS" "$tmp/state" "$tmp/playbooks"

# the server: the sandbox behind it, the virtual clock, a playbook directory the tests drop tools into
HYPD_CLOCK=virtual HYPD_STATE=$tmp/state "$HYPD" --playbooks "$tmp/playbooks" serve --sandbox \
	--listen 127.0.0.1:0 >"$tmp/serve.out" 2>"$tmp/serve.err" &
pids+=($!)
if ! url=$(wait_line "$tmp/serve.out" 'listening on' "${pids[-1]}" 20) ||
	! token=$(wait_line "$tmp/serve.out" 'export HYPD_TOKEN=' "${pids[-1]}" 20) ||
	! login=$(wait_line "$tmp/serve.out" '/#login=' "${pids[-1]}" 20) ||
	! sandbox=$(wait_line "$tmp/serve.out" 'export AWS_ENDPOINT_URL=' "${pids[-1]}" 20); then
	result "not ok" "hypd serve starts and prints its URL, token and sign-in link"
	comment "$tmp/serve.err"
	finish
fi
url=${url##* }
token=${token##*=}
login=${login##*link: }
login=${login%)}
sandbox=${sandbox##*=}

HYPD=$HYPD HYPD_STATE=$tmp/state HYPD_URL=$url HYPD_TOKEN=$token HYPD_LOGIN=$login HYPD_PLAYBOOKS=$tmp/playbooks \
	HYPD_SANDBOX=$sandbox HYPD_SERVE_OUT=$tmp/serve.out HYPD_SHOTS=$SHOTS tap "the browser scenarios" timeout -k 5 1500 node $DIR/ui.mjs
finish
