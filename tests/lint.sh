#!/bin/sh
# The Lua tree is luacheck-clean (std lua54, see .luacheckrc). TAP output.
cd "$(dirname "$0")/.." || exit 1
if out=$(luacheck --no-color --formatter plain lua recipes tests/lua tests/bench examples 2>&1); then
	echo "ok 1 - the Lua tree is luacheck-clean"
else
	echo "not ok 1 - the Lua tree is luacheck-clean"
	echo "$out" | sed 's/^/#   /'
fi
echo "1..1"
