#!/usr/bin/env bash
# Differential SigV4 test: tests/tools/sigv4_diff.py signs random requests
# with botocore (seeded, reproducible), $BUILD/tests/sigv4_diff signs the
# same requests with hypd and prints one TAP line per request.
#   SIGV4_DIFF_COUNT (300) and SIGV4_DIFF_SEED (20150830) change the set;
#   PYTHON picks the interpreter (python3).
set -u
cd "$(dirname "$0")/.." || exit 1
build=${HYPD_BUILD:-${BUILD:-build}}
py=${PYTHON:-python3}
if ! "$py" -c 'import botocore' >/dev/null 2>&1; then
	echo "ok 1 - hypd signs random requests like botocore # SKIP botocore is absent"
	echo "1..1"
	exit 0
fi
bin=$build/tests/sigv4_diff
if [ ! -x "$bin" ]; then
	echo "not ok 1 - $bin is built (make $bin)"
	echo "1..1"
	exit 1
fi
reqs=$(mktemp /tmp/hypd-sigv4-diff.XXXXXX)
trap 'rm -f "$reqs"' EXIT
if ! "$py" tests/tools/sigv4_diff.py --count "${SIGV4_DIFF_COUNT:-300}" \
	--seed "${SIGV4_DIFF_SEED:-20150830}" --out "$reqs"; then
	echo "not ok 1 - botocore signs the random requests"
	echo "1..1"
	exit 1
fi
exec "$bin" "$reqs"
