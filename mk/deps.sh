#!/bin/sh
# Installs the Debian 12 packages that hypd's build and tests need.
# As root it runs apt-get for the missing ones; otherwise it prints the exact
# command and fails. `mk/deps.sh check` only reports, installing nothing.
# `mk/deps.sh bench [check]` does the same for what only `make bench` uses,
# `mk/deps.sh web [check]` for the browser the web UI's tests drive.
set -eu

PACKAGES="gcc make pkg-config liblua5.4-dev libcurl4-openssl-dev libcjson-dev \
libssl-dev libmicrohttpd-dev libsqlite3-dev libexpat1-dev libyaml-dev zlib1g-dev lua-check sqlite3 openssl clang libclang-rt-14-dev python3"
BENCH_PACKAGES="wrk"
WEB_PACKAGES="chromium" # the web UI's browser tests (tests/web/run.sh)

if [ "${1:-}" = bench ]; then
	PACKAGES=$BENCH_PACKAGES
	shift
elif [ "${1:-}" = web ]; then
	PACKAGES=$WEB_PACKAGES
	shift
fi

missing=""
for p in $PACKAGES; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing="$missing $p"
done

[ -z "$missing" ] && exit 0
if [ "${1:-}" = check ]; then
	echo "missing Debian packages:$missing" >&2
	exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
	echo "hypd needs these Debian packages:$missing" >&2
	echo "run: sudo apt-get update && sudo apt-get install -y$missing" >&2
	exit 1
fi
echo "hypd: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends $missing >&2
