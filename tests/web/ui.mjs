// The web UI's browser scenarios: every module of tests/web/scenarios/, in
// the order of their names (tests/web/run.sh runs this file); with
// HYPD_SCENARIOS=REGEX only the files whose names match (a quicker run
// while working on some pages).
import { readdirSync } from "node:fs";
import { browser } from "./lib.mjs";

const dir = new URL("./scenarios/", import.meta.url);
const only = process.env.HYPD_SCENARIOS ? new RegExp(process.env.HYPD_SCENARIOS) : null;
for (const f of readdirSync(dir).filter((x) => x.endsWith(".mjs") && (!only || only.test(x))).sort()) await import(new URL(f, dir));
await browser.close();
