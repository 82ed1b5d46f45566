// The web UI's weight as a browser sees it (make bench runs it from
// tests/bench/web_bench.lua): a signed-in tab opens the Clusters page of
// the server at HYPD_URL (token HYPD_TOKEN) with an empty cache, then
// reloads it. Prints one JSON line: for the first load and the reload, the
// HTTP requests made and the bytes received (response headers and bodies
// as transferred, compressed or not; the /ws connection is not counted).
import { chromium } from "playwright-core";

const URL = process.env.HYPD_URL;
const TOKEN = process.env.HYPD_TOKEN;
const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync"] });
const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
await context.addInitScript((t) => sessionStorage.setItem("hypd.token", t), TOKEN);
const page = await context.newPage();

let seen = [];
page.on("requestfinished", (r) => seen.push(r));

// load(fn) -> {requests, bytes, statuses}: what fn's navigation fetched
async function load(fn) {
  seen = [];
  await fn();
  await page.waitForSelector("#who");
  await page.waitForLoadState("networkidle");
  const out = { requests: 0, bytes: 0, statuses: {} };
  for (const r of seen) {
    const s = await r.sizes();
    const resp = await r.response();
    out.requests += 1;
    out.bytes += s.responseHeadersSize + s.responseBodySize;
    const st = resp ? resp.status() : 0;
    out.statuses[st] = (out.statuses[st] || 0) + 1;
  }
  return out;
}

const first = await load(() => page.goto(URL + "/#/clusters"));
const reload = await load(() => page.reload());
console.log(JSON.stringify({ first, reload }));
await browser.close();
