#!/bin/sh
# The Lua tree is luacheck-clean (std lua54, see .luacheckrc), and no
# tracked file reaches outside the repository for the work folder's shared
# directory beside it (a person's clone has none: the data the build and
# tests need lives in the tree). The path is put together below, so this
# file does not name it either.
# TAP output.
cd "$(dirname "$0")/.." || exit 1
if out=$(luacheck --no-color --formatter plain lua recipes tests/lua tests/bench examples 2>&1); then
	echo "ok 1 - the Lua tree is luacheck-clean"
else
	echo "not ok 1 - the Lua tree is luacheck-clean"
	echo "$out" | sed 's/^/#   /'
fi
beside=shared
outside="../$beside"
if ! command -v git >/dev/null 2>&1 || ! git rev-parse --git-dir >/dev/null 2>&1; then
	echo "ok 2 - no tracked file names $outside # SKIP not a git checkout"
elif found=$(git grep -l -F "$outside" 2>/dev/null); then
	echo "not ok 2 - no tracked file names $outside"
	echo "$found" | sed 's/^/#   /'
else
	echo "ok 2 - no tracked file names $outside"
fi
echo "1..2"
