#!/usr/bin/env bash
# A short libFuzzer pass over every fuzz target (FUZZ_TIME seconds each,
# default 5), from the committed seed corpus, one target at a time. TAP:
# one line per target. The targets are the directories of
# tests/fuzz/corpus: corpus/NAME is replayed and mutated by
# $BUILD/fuzz/fuzz_NAME (make builds them; lua_* are the Lua-level
# targets of tests/fuzz/lua_targets.lua). FUZZ_TARGETS (names, space
# separated) picks some. An input that runs longer than FUZZ_SLOW seconds
# (default 10) is a finding too (a timeout artifact), so a pathological
# input cannot stall the pass.
set -u
cd "$(dirname "$0")/.." || exit 1
build=${BUILD:-build}
secs=${FUZZ_TIME:-5}
slow=${FUZZ_SLOW:-10}
targets=${FUZZ_TARGETS:-$(cd tests/fuzz/corpus && ls -d -- * | LC_ALL=C sort)}
n=0
for target in $targets; do
	n=$((n + 1))
	bin=$build/fuzz/fuzz_$target
	if [ ! -x "$bin" ]; then
		echo "not ok $n - the $target fuzzer is built (make $bin)"
		continue
	fi
	work=$(mktemp -d /tmp/hypd-fuzz.XXXXXX)
	if "$bin" -max_total_time="$secs" -timeout="$slow" -max_len=8192 -artifact_prefix="$work/" \
		"$work" "tests/fuzz/corpus/$target" >"$work/log" 2>&1; then
		runs=$(grep -o 'Done [0-9]* runs' "$work/log" | tail -n 1)
		echo "ok $n - the $target fuzzer finds no crash or leak in ${secs}s ($runs)"
	else
		echo "not ok $n - the $target fuzzer found a problem"
		tail -n 30 "$work/log" | sed 's/^/#   /'
		for a in "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-* "$work"/slow-unit-*; do
			[ -f "$a" ] || continue
			echo "#   artifact: ${a##*/} (base64: $(head -c 4096 "$a" | base64 -w0))"
		done
	fi
	rm -rf "$work"
done
echo "1..$n"
