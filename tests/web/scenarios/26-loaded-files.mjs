// A tool's page lists every file the tool loads; a changed copy of an area
// helper dropped into the playbook directory (then a reload) marks exactly
// the tools that load it overridden, on the Tools list and on each tool's
// page, naming the file; the tools that load it are read here from the
// require graph of lua/workflows, not from the server. Removing the file
// unmarks them.
import { execFileSync } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { URL, scenario, signIn } from "../lib.mjs";
import { rest } from "../api.mjs";

// the require graph: module name -> the modules it requires (comments dropped)
const ROOT = "lua/workflows";
const requires = {};
const walk = (dir, prefix) => {
  for (const f of readdirSync(dir, { withFileTypes: true })) {
    if (f.isDirectory()) walk(`${dir}/${f.name}`, prefix + f.name + ".");
    else if (f.name.endsWith(".lua")) {
      const code = readFileSync(`${dir}/${f.name}`, "utf8").replace(/--\[(=*)\[[\s\S]*?\]\1\]/g, "").replace(/--[^\n]*/g, "");
      requires[prefix + f.name.slice(0, -4)] = [...code.matchAll(/\brequire\s*\(?\s*["']([\w.-]+)["']/g)].map((m) => m[1]);
    }
  }
};
walk(ROOT, "");
const closure = (name) => {
  const seen = new Set([name]);
  const queue = [name];
  while (queue.length) for (const r of requires[queue.pop()] || []) if (requires[r] && !seen.has(r)) { seen.add(r); queue.push(r); }
  return seen;
};
// tool name -> its module (a built-in tool's file is lua/workflows/<area>/<tool>.lua)
const tools = Object.fromEntries(Object.keys(requires).filter((m) => !/(^|\.)_/.test(m)).map((m) => [m.split(".").pop(), m]));
const loaders = {};
for (const [t, m] of Object.entries(tools)) for (const x of closure(m)) (loaders[x] ||= new Set()).add(t);
// the area helper: the first (by name) that a few tools load
const HELPER = Object.keys(loaders).sort().find((m) => /^\w+\._/.test(m) && loaders[m].size >= 2 && loaders[m].size <= 10);

await scenario("a helper in the playbook directory marks the tools that load it overridden, on their pages", async (page, check) => {
  const dir = process.env.HYPD_PLAYBOOKS;
  const file = `${dir}/${HELPER.replace(/\./g, "/")}.lua`;
  const text = execFileSync(process.env.HYPD, ["playbook", "show", HELPER], { stdio: ["ignore", "pipe", "ignore"] }).toString();
  const marked = [...loaders[HELPER]].sort();
  const one = marked[0];
  const other = Object.keys(tools).sort().find((t) => !loaders[HELPER].has(t));
  await signIn(page);
  await page.goto(URL + "/#/tools/" + one);
  await page.waitForSelector("#tool-files");
  check((await page.$("#overridden-notice")) === null, "not overridden before the file is there");
  check((await page.$$("#tool-files [data-module]")).length > 1, "the page lists the files it loads");
  check((await page.$(`#tool-files [data-module="${HELPER}"]`)) !== null, `${one} lists ${HELPER}`);
  mkdirSync(file.replace(/\/[^/]+$/, ""), { recursive: true });
  writeFileSync(file, text + "\n-- a changed copy (web scenario)\n", { mode: 0o644 });
  const r = (await rest("/playbooks/reload", { body: {} })).body;
  const builtin = (names) => (names || []).filter((n) => tools[n]).sort(); // (other scenarios' playbook tools are reloaded too)
  check(JSON.stringify(builtin(r.defined)) === JSON.stringify(marked), `the reload defines again ${marked.join(", ")}: ${JSON.stringify(r.defined)}`);
  await page.goto(URL + "/#/tools");
  await page.reload(); // the session reads the tool list when the page loads
  await page.waitForSelector("[data-tool]");
  const listed = await page.$$eval("[data-tool]", (els) => els.filter((e) => /overridden/.test(e.textContent)).map((e) => e.dataset.tool).sort());
  check(JSON.stringify(listed) === JSON.stringify(marked), `the Tools list marks exactly ${marked.join(", ")}: ${listed.join(", ")}`);
  await page.goto(URL + "/#/tools/" + other);
  await page.waitForSelector("#tool-files");
  check((await page.$("#overridden-notice")) === null, `${other}, which does not load it, is not marked`);
  await page.goto(URL + "/#/tools/" + one);
  await page.waitForSelector("#overridden-notice");
  check((await page.textContent("#overridden-notice")).includes(file), "the notice names the file");
  const row = await page.textContent(`#tool-files [data-module="${HELPER}"]`);
  check(/overridden/.test(row) && row.includes(file), `the ${HELPER} row is marked overridden with its file: ${row}`);
  check(!/overridden/.test(await page.textContent(`#tool-files [data-module="${tools[one]}"]`)), "its own file is not marked");
  await page.screenshot({ path: `${process.env.HYPD_SHOTS || "/tmp"}/tool-files-overridden.png`, fullPage: true });
  rmSync(file);
  const back = (await rest("/playbooks/reload", { body: {} })).body;
  check(JSON.stringify(builtin(back.restored)) === JSON.stringify(marked), "removing it restores them");
  await page.reload();
  await page.waitForSelector("#tool-files");
  check((await page.$("#overridden-notice")) === null, "and unmarks them");
});
