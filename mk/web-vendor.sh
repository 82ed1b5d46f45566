#!/bin/sh
# Copies the web UI's vendored library into web/vendor/ from the npm
# packages pinned in mk/web-vendor/package-lock.json (make web-vendor). The
# result is committed: serving the UI needs neither npm nor the network.
#   web/vendor/preact-htm.js   htm's Preact standalone build (Preact, its
#                              hooks and htm in one ES module)
#   web/vendor/LICENSE.htm, LICENSE.preact   their licences
set -eu
cd "$(dirname "$0")/web-vendor"
npm ci --no-audit --no-fund --silent
cp node_modules/htm/preact/standalone.module.js ../../web/vendor/preact-htm.js
cp node_modules/htm/LICENSE ../../web/vendor/LICENSE.htm
cp node_modules/preact/LICENSE ../../web/vendor/LICENSE.preact
echo "web/vendor: htm $(node -p 'require("./node_modules/htm/package.json").version') (Preact standalone)"
