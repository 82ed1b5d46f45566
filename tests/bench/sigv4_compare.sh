#!/usr/bin/env bash
# Signatures per second of hypd's SigV4 signer, botocore and
# @smithy/signature-v4 on the same three requests (sigv4_bench.c), and the
# ratios. Each signer prints its three signatures; they must agree.
#   SIGV4_BENCH_SECONDS (1) is the time given to each signer.
# Prints "# bench ..." lines like the other benchmarks; never fails on speed.
set -u
cd "$(dirname "$0")/../.." || exit 1
build=${HYPD_BUILD:-${BUILD:-build}}
secs=${SIGV4_BENCH_SECONDS:-1}
py=${PYTHON:-python3}
status=0

run() {  # run NAME CMD...: prints the RESULT line of CMD, or nothing
	local name=$1 out
	shift
	if out=$("$@" 2>&1) && out=$(printf '%s\n' "$out" | grep '^RESULT '); then
		printf '%s\n' "$out"
	else
		echo "# bench sigv4 $name: not run ($(printf '%s' "$out" | tail -n 1))" >&2
	fi
}

hypd=$(run hypd "$build/tests/sigv4_bench" "$secs")
boto=""
if "$py" -c 'import botocore' >/dev/null 2>&1; then
	boto=$(run botocore "$py" tests/bench/sigv4_botocore.py "$secs")
else
	echo "# bench sigv4 botocore: not run (python3 cannot import botocore)"
fi
smithy=""
if [ ! -d tests/node/node_modules/@smithy/signature-v4 ] && command -v npm >/dev/null; then
	(cd tests/node && npm ci --no-audit --no-fund --silent) >/dev/null 2>&1 ||
		echo "# bench sigv4 smithy: npm ci in tests/node failed"
fi
if [ -d tests/node/node_modules/@smithy/signature-v4 ] && command -v node >/dev/null; then
	smithy=$(run smithy node tests/bench/sigv4_smithy.mjs "$secs")
else
	echo "# bench sigv4 smithy: not run (no node or no tests/node/node_modules)"
fi

rate() { printf '%s\n' "$1" | awk '{print $3}'; }
sigs() { printf '%s\n' "$1" | cut -d' ' -f4-; }
for r in "$hypd" "$boto" "$smithy"; do
	[ -n "$r" ] && printf '# bench sigv4 %-32s %12.1f signatures/s\n' "$(echo "$r" | awk '{print $2}'):" "$(rate "$r")"
done
[ -z "$hypd" ] && exit 1
for r in "$boto" "$smithy"; do
	[ -z "$r" ] && continue
	name=$(echo "$r" | awk '{print $2}')
	if [ "$(sigs "$r")" != "$(sigs "$hypd")" ]; then
		echo "# bench sigv4 $name: signatures DIFFER from hypd's:"
		echo "#   hypd  $(sigs "$hypd")"
		echo "#   $name $(sigs "$r")"
		status=1
	fi
	awk -v a="$(rate "$hypd")" -v b="$(rate "$r")" -v n="hypd/$name:" \
		'BEGIN { printf "# bench sigv4 %-32s %12.1f x\n", n, a / b }'
done
exit $status
