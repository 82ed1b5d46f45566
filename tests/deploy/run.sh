#!/bin/sh
# The management environment's files (deploy/), as one TAP suite: the
# CloudFormation template (template_test.py) and the Dockerfile and systemd
# unit (container_unit_test.py), numbered as one plan. tests/run runs it as
# the suite "deploy"; without python3 it is one skipped check.
cd "$(dirname "$0")/../.." || exit 1
if ! command -v python3 >/dev/null 2>&1; then
	echo "ok 1 - the deploy/ checks # SKIP no python3 on this machine"
	echo "1..1"
	exit 0
fi
n=0 rc=0
for t in tests/deploy/template_test.py tests/deploy/container_unit_test.py; do
	out=$(python3 "$t" 2>&1) || rc=1
	# renumber each file's checks after the previous file's; its plan is dropped
	printf '%s\n' "$out" | awk -v base="$n" '
		/^(not )?ok [0-9]+/ { sub(/ok [0-9]+/, "ok " (base + ++k)); print; next }
		/^1\.\.[0-9]+$/ { next }
		{ print }'
	n=$((n + $(printf '%s\n' "$out" | grep -cE '^(not )?ok [0-9]+')))
done
echo "1..$n"
exit $rc
