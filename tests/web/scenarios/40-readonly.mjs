// A read-scope token (made with `hypd token create` beside the running
// server): every mutating and destructive button is disabled (Plan, which
// changes nothing, is not), with the
// reason as its tooltip; read tools still run; a request forced past the
// UI is refused by the server (403).
import { BAD_REQUEST, URL, scenario, signIn } from "../lib.mjs";
import { held, newToken } from "../api.mjs";

await scenario("a read-scope token: mutating buttons are disabled, and the server refuses a forced request", async (page, check) => {
  const reader = newToken("read", "web-reader");
  check(/^hypd_/.test(reader), "hypd token create works beside the running server");
  await signIn(page, reader);
  check(/web-reader/.test(await page.textContent("#who")) && /read/.test(await page.textContent("#who")), "the top bar shows scope read");
  await page.goto(URL + "/#/tools/cluster_create_eks");
  await page.waitForSelector("#tool-form-run");
  check(await page.$eval("#tool-form-run", (b) => b.disabled), "Run is disabled");
  check(await page.$eval("#tool-form-plan", (b) => !b.disabled), "Plan is enabled: planning changes nothing (41-readonly-plan plans)");
  const why = await page.getAttribute("#tool-form-run", "title");
  check(/scope operate/.test(why || ""), "the tooltip says why: " + why);
  check(await page.$eval("#cluster-switch", (s) => s.disabled), "the cluster switcher is disabled");
  await page.goto(URL + "/#/tools/cluster_delete");
  await page.waitForSelector("#tool-form-run");
  check(/scope admin/.test((await page.getAttribute("#tool-form-run", "title")) || ""), "a destructive tool needs admin");
  await page.goto(URL + "/#/tools/aws_get_availability_zones");
  await page.waitForSelector("#tool-form-run");
  check(await page.$eval("#tool-form-run", (b) => !b.disabled), "a read tool's Run is enabled");
  await page.click("#tool-form-run");
  await page.waitForSelector("pre.json");
  await page.goto(URL + "/#/clusters");
  await page.waitForSelector("h1:text-is('Clusters')");
  await page.waitForSelector("table.clusters, .empty");
  const acts = await page.$$eval("table.clusters button", (bs) => bs.map((b) => b.disabled));
  check(acts.every((d) => d), "the clusters' actions are disabled");
  await held(async (start) => {
    const id = await start("web-reader");
    await page.goto(URL + "/#/operations/" + id);
    await page.waitForSelector("#op-cancel");
    check(await page.$eval("#op-cancel", (b) => b.disabled), "Cancel is disabled");
    // forced past the UI, with the page's own token
    const forced = await page.evaluate(async (id) => {
      const t = sessionStorage.getItem("hypd.token");
      const post = (p, body) => fetch(p, { method: "POST", headers: { authorization: "Bearer " + t, "content-type": "application/json" },
        body: JSON.stringify(body) }).then(async (r) => ({ status: r.status, body: await r.json() }));
      return [await post("/api/v1/tools/cluster_create_eks", { cluster_tag: "web-forced" }),
        await post(`/api/v1/operations/${id}/cancel`, {})];
    }, id);
    check(forced[0].status === 403 && forced[0].body.error.code === "FORBIDDEN", "a forced tool call gets 403: " + JSON.stringify(forced[0]));
    check(forced[1].status === 403, "a forced cancel gets 403");
    check((await page.getAttribute(".operation", "data-status")) === "running", "the operation still runs");
  });
}, { allowConsole: BAD_REQUEST });
