// The web UI's browser scenarios: every module of tests/web/scenarios/, in
// the order of their names (tests/web/run.sh runs this file).
import { readdirSync } from "node:fs";
import { browser } from "./lib.mjs";

const dir = new URL("./scenarios/", import.meta.url);
for (const f of readdirSync(dir).filter((x) => x.endsWith(".mjs")).sort()) await import(new URL(f, dir));
await browser.close();
