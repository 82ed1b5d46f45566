// The browser scenarios' shared part: the browser, the server's address,
// token and sign-in link (tests/web/run.sh passes them), and scenario(),
// which runs one scenario on a fresh page, prints its "ok - ..." or
// "not ok - ..." line and saves a screenshot of its final page. A console
// error or an uncaught exception in the page fails the scenario it happens
// in (opts.allowConsole: one that provokes errors on purpose; a RegExp
// allows only the messages it matches, e.g. BAD_REQUEST below).
import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";

export const URL = process.env.HYPD_URL;
export const TOKEN = process.env.HYPD_TOKEN;
export const LOGIN = process.env.HYPD_LOGIN;
const SHOTS = process.env.HYPD_SHOTS || "/tmp";
mkdirSync(SHOTS, { recursive: true });

export const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync"] });

export const ok = (cond, name, why = "") => console.log(`${cond ? "ok" : "not ok"} - ${name}${cond || !why ? "" : " # " + why}`);

// skip(name, why): a scenario that cannot run here, reported as TAP's skip
// ("ok - name # SKIP why"; tests/run counts it apart, never as a pass)
export const skip = (name, why) => console.log(`ok - ${name} # SKIP ${why}`);

// missingTools(names) -> the names GET /api/v1/tools does not list on this server
export async function missingTools(names) {
  const r = await fetch(`${URL}/api/v1/tools`, { headers: { authorization: "Bearer " + TOKEN } });
  const have = new Set(((await r.json()).tools || []).map((t) => t.name));
  return names.filter((n) => !have.has(n));
}

// needing(tools, name, fn, opts): the scenario, or its skip naming the tools this server lacks
export async function needing(tools, name, fn, opts) {
  const lack = await missingTools(tools);
  if (lack.length) return skip(name, `the server has no ${lack.join(", ")} (not merged yet)`);
  return scenario(name, fn, opts);
}

// Skip: thrown by a scenario that finds, while running, that it cannot be
// judged here (a known limitation named in its message): a TAP skip, never a pass
export class Skip extends Error {}

// scenario(name, fn(page, check)): a fresh page (its own session storage);
// check(cond, what) records one assertion; the scenario is one test line
export async function scenario(name, fn, opts = {}) {
  const context = await browser.newContext({ viewport: opts.viewport || { width: 1280, height: 800 },
    colorScheme: opts.colorScheme || "light" });
  const page = await context.newPage();
  const problems = [];
  page.on("console", (m) => { if (m.type() === "error") problems.push("console: " + m.text()); });
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  const failed = [];
  const check = (cond, what) => { if (!cond) failed.push(what); };
  let skipped = null;
  try {
    await fn(page, check);
  } catch (e) {
    if (e instanceof Skip) skipped = e.message;
    else failed.push(String(e && e.message || e).split("\n")[0]);
  }
  const shot = `${SHOTS}/${name.replace(/[^a-z0-9]+/gi, "-").toLowerCase()}.png`;
  await page.screenshot({ path: shot, fullPage: true }).catch(() => {});
  const allowed = opts.allowConsole instanceof RegExp ? problems.filter((p) => !opts.allowConsole.test(p)) : opts.allowConsole ? [] : problems;
  const all = failed.concat(allowed);
  if (skipped !== null && failed.length === 0) skip(name, skipped);
  else ok(all.length === 0, name, all.join("; "));
  await context.close();
}


// the browser's own console line for an answer with an error status (a
// scenario that provokes a refusal on purpose allows only these)
export const BAD_REQUEST = /Failed to load resource: the server responded with a status of (400|403|422)/;

// signIn(page [, token]): the page, signed in with a token (the admin one by default)
export async function signIn(page, token = TOKEN) {
  await page.goto(URL + "/");
  await page.fill("#token", token);
  await page.click("#signin");
  await page.waitForSelector("#who");
}
