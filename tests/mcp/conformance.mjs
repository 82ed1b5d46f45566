// The MCP conformance suite (the pinned @modelcontextprotocol/conformance
// of tests/mcp/package.json) against a Streamable HTTP endpoint, judged
// scenario by scenario against baseline.yml:
//
//   node conformance.mjs URL
//
// Runs `conformance server --url URL --suite all -o DIR --expected-failures
// baseline.yml` once, then reads each scenario's checks.json. A scenario
// fails when any check is FAILURE or WARNING (the suite's own rule). Output,
// one line per scenario ("ok - conformance: ..." / "not ok - ..."; run.sh
// numbers them): a pass; an expected failure (listed in baseline.yml, with
// the reason from its comment), printed as a skip ("ok - ... # SKIP fails
// as expected ...": counted apart, never as a pass); an unexpected failure
// (with the failed checks); a listed scenario that passes or did not run
// (stale baseline).
// The scenarios hypd must pass are named in REQUIRED and may not be listed.
// Exit 0 whatever the checks say; 1 only if the harness itself breaks.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
const CLI = join(HERE, "node_modules/@modelcontextprotocol/conformance/dist/index.js");
const BASELINE = join(HERE, "baseline.yml");
const REQUIRED = ["server-initialize", "ping", "logging-set-level", "tools-list", "tools-call-error",
  "dns-rebinding-protection"];

const url = process.argv[2];
if (!url) {
  console.error("usage: node conformance.mjs URL");
  process.exit(1);
}

const say = (ok, text, why) =>
  process.stdout.write(`${ok ? "ok" : "not ok"} - conformance: ${text}${!ok && why ? ` # ${why}` : ""}\n`);
// an expected failure is not a pass: TAP's skip directive, counted apart
const skip = (text, why) => process.stdout.write(`ok - conformance: ${text} # SKIP ${why}\n`);

// baseline.yml: "server:" then "  - name  # reason" lines
const expected = new Map();
for (const line of readFileSync(BASELINE, "utf8").split("\n")) {
  const m = line.match(/^\s*-\s*([\w-]+)\s*(?:#\s*(.*))?$/);
  if (m) expected.set(m[1], m[2] || "no reason given");
}

const out = mkdtempSync(join(tmpdir(), "hypd-mcp-conformance-"));
const run = spawnSync(process.execPath, [CLI, "server", "--url", url, "--suite", "all", "-o", out,
  "--expected-failures", BASELINE], { encoding: "utf8", timeout: 240000, maxBuffer: 64 << 20 });
if (run.error) {
  say(false, "the suite runs", run.error.message);
  rmSync(out, { recursive: true, force: true });
  process.exit(0);
}

const results = new Map();
for (const d of readdirSync(out)) {
  const m = d.match(/^server-(.+)-(\d{4}-\d{2}-\d{2}T[\d-]+Z?)$/);
  if (!m) continue;
  const checks = JSON.parse(readFileSync(join(out, d, "checks.json"), "utf8"));
  results.set(m[1], checks);
}
rmSync(out, { recursive: true, force: true });
if (results.size === 0) {
  say(false, "the suite runs", `no results; exit ${run.status}: ${(run.stderr || run.stdout || "").slice(-300)}`);
  process.exit(0);
}

for (const [name, checks] of [...results].sort((a, b) => a[0].localeCompare(b[0]))) {
  const bad = checks.filter((c) => c.status === "FAILURE" || c.status === "WARNING");
  const good = checks.filter((c) => c.status === "SUCCESS").length;
  const listed = expected.has(name);
  if (bad.length === 0 && !listed) say(true, `${name} (${good} checks)`);
  else if (bad.length > 0 && listed) skip(name, `fails as expected (baseline.yml: ${expected.get(name)})`);
  else if (listed) say(false, `${name} passes now`, "take it out of baseline.yml");
  else say(false, name, bad.map((c) => `${c.name}: ${c.errorMessage || c.status}`).join("; ").slice(0, 400));
}
for (const name of REQUIRED) {
  if (!results.has(name)) say(false, `${name} ran`, "the suite did not run it");
  if (expected.has(name)) say(false, `${name} is not excused`, "it is required to pass; take it out of baseline.yml");
}
for (const name of expected.keys()) {
  if (!results.has(name)) say(false, `baseline entry ${name} names a scenario that ran`, "stale entry");
}
say(run.status === 0, "the suite's own baseline check (--expected-failures baseline.yml) passes",
  `exit ${run.status}: ${(run.stdout || "").split("\n").filter((l) => /✗|Stale|Unexpected/.test(l)).join("; ")}`);
process.exit(0);
