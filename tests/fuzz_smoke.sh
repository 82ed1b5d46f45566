#!/usr/bin/env bash
# A short libFuzzer pass over every fuzz target (FUZZ_TIME seconds each,
# default 5), from the committed seed corpus. TAP: one line per target.
set -u
cd "$(dirname "$0")/.." || exit 1
build=${BUILD:-build}
secs=${FUZZ_TIME:-5}
n=0
for target in sigv4 xml yaml; do
	n=$((n + 1))
	bin=$build/fuzz/fuzz_$target
	if [ ! -x "$bin" ]; then
		echo "not ok $n - the $target fuzzer is built (make $bin)"
		continue
	fi
	work=$(mktemp -d /tmp/hypd-fuzz.XXXXXX)
	if "$bin" -max_total_time="$secs" -max_len=8192 -artifact_prefix="$work/" \
		"$work" "tests/fuzz/corpus/$target" >"$work/log" 2>&1; then
		runs=$(grep -o 'Done [0-9]* runs' "$work/log" | tail -n 1)
		echo "ok $n - the $target fuzzer finds no crash or leak in ${secs}s ($runs)"
	else
		echo "not ok $n - the $target fuzzer found a problem"
		tail -n 30 "$work/log" | sed 's/^/#   /'
		ls "$work" | grep -E '^(crash|leak|timeout|oom)-' | sed 's/^/#   artifact: /'
	fi
	rm -rf "$work"
done
echo "1..$n"
