// A server restart, on a server of this scenario's own (the shared one
// stays up): while it is down every page shows one connection banner and
// no error box; after it a tab signed in through the link is still signed
// in (the banner goes, a reload keeps it), and a tab holding the printed
// token, which is new at each start, is signed out saying it was replaced
// at a restart and pointing at the new sign-in link.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { browser, scenario } from "../lib.mjs";

// serve(state, listen) -> {proc, url, token, login}: hypd serve --sandbox, once it printed its sign-in link
function serve(state, listen) {
  const proc = spawn(process.env.HYPD, ["serve", "--sandbox", "--listen", listen], {
    env: { ...process.env, HYPD_CLOCK: "virtual", HYPD_STATE: state }, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("hypd serve did not start: " + out)), 20000);
    proc.stdout.on("data", (d) => {
      out += d;
      const url = out.match(/listening on (http:\/\/[\d.:]+)/), token = out.match(/export HYPD_TOKEN=(\S+)/);
      const login = out.match(/once with this link: (\S+)\)/);
      if (url && token && login && out.includes("stops it")) { clearTimeout(timer); resolve({ proc, url: url[1], token: token[1], login: login[1] }); }
    });
    proc.stderr.on("data", () => {});
    proc.on("exit", (code) => reject(new Error("hypd serve exited " + code + ": " + out)));
  });
}
const stop = (s) => new Promise((resolve) => {
  if (s.proc.exitCode !== null || s.proc.signalCode !== null) return resolve();
  s.proc.on("exit", resolve);
  s.proc.kill("SIGTERM");
});

await scenario("a restart: one banner while the server is down; the link's tab stays signed in, the printed token's tab is told it was replaced", async (page, check) => {
  const state = mkdtempSync(join(tmpdir(), "hypd-restart-"));
  let srv = await serve(state, "127.0.0.1:0");
  const other = await browser.newContext();
  try {
    await page.goto(srv.login);
    await page.waitForSelector("#who");
    check(/^web-/.test((await page.textContent("#who")).trim()), "the link signed in as a web- token");
    const pasted = await other.newPage();
    await pasted.goto(srv.url + "/");
    await pasted.fill("#token", srv.token);
    await pasted.click("#signin");
    await pasted.waitForSelector("#who");
    await page.waitForFunction(() => document.querySelector("#nav a"));

    const first = srv;
    await stop(srv);
    await page.waitForSelector("#connection-banner", { timeout: 15000 });
    await page.evaluate(() => { location.hash = "#/operations"; }); // a page that reads while the server is down
    await page.waitForTimeout(300);
    check((await page.$$("#connection-banner")).length <= 1, "never two banners");
    check((await page.$$(".error-box")).length === 0, "no error box for the lost connection");
    await page.screenshot({ path: `${process.env.HYPD_SHOTS || "/tmp"}/11-restart-banner.png` }).catch(() => {});

    srv = await serve(state, first.url.replace(/^http:\/\//, ""));
    check(srv.token !== first.token, "the printed token is new at this start");
    await page.goto(srv.url + "/#/clusters");
    await page.waitForSelector("#who", { timeout: 15000 });
    check(/^web-/.test((await page.textContent("#who")).trim()), "a reload after the restart is still signed in");
    await page.waitForSelector("#connection-banner", { state: "detached", timeout: 15000 });

    await pasted.waitForSelector("#restarted", { timeout: 40000 });
    const msg = await pasted.textContent("#message");
    check(/server started again.*is replaced/.test(msg), "the printed token's tab says it was replaced: " + msg);
    check(/sign-in link/.test(await pasted.textContent("#restarted")), "and points at the new sign-in link");
    check(!(await pasted.content()).includes(first.token), "the old token is on no page");
    await pasted.screenshot({ path: `${process.env.HYPD_SHOTS || "/tmp"}/11-restart-replaced.png` }).catch(() => {});
  } finally {
    await other.close();
    await stop(srv).catch(() => {});
    rmSync(state, { recursive: true, force: true });
  }
}, { allowConsole: true });
