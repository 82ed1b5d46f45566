# The TAP helpers of the suites that drive outside clients (tests/mcp,
# tests/k8snode, tests/web run.sh source this file). They number the checks
# in $n and keep a client's output in $tmp (the caller sets both).
#   result "ok"|"not ok" DESCRIPTION   one numbered check
#   skip DESCRIPTION REASON            a skip: counted apart, never as a pass
#   comment FILE [LINES]               the last lines of FILE as TAP comments
#   finish                             the plan, then exit 0
#   tap LABEL CMD...                   runs CMD and numbers the checks it
#                                      prints ("ok - ..."/"not ok - ..."); a
#                                      failing CMD is one more failed check
#   wait_line FILE PATTERN PID [SECS]  the first line of FILE matching
#                                      PATTERN, written by process PID
#                                      (SECS at most, default 10)

result() {
	n=$((n + 1))
	echo "$1 $n - $2"
}
skip() { result ok "$1 # SKIP $2"; }
comment() { sed 's/^/#   /' "$1" | tail -n "${2:-15}"; }
finish() {
	echo "1..$n"
	exit 0
}

tap() {
	local label=$1 line rc
	shift
	"$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	while IFS= read -r line; do
		case $line in
		"ok - "*) n=$((n + 1)); echo "ok $n - ${line#ok - }" ;;
		"not ok - "*) n=$((n + 1)); echo "not ok $n - ${line#not ok - }" ;;
		*) echo "# $line" ;;
		esac
	done <"$tmp/out"
	if [ "$rc" -ne 0 ]; then
		result "not ok" "$label exits 0 # exit $rc"
		comment "$tmp/err"
	fi
}

wait_line() {
	local _
	for _ in $(seq $((${4:-10} * 10))); do
		if grep -m1 -E "$2" "$1" 2>/dev/null; then return 0; fi
		kill -0 "$3" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}
