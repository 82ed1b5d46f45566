// Lists that update by themselves from /ws: the instance groups and the
// nodes of a cluster, changed by another client (the REST API, not this
// page), with no reload. A group being added is listed while it is made,
// with its state and a link to the operation making it: simulated time is
// held still (a held operation: tests/web/api.mjs) so the page can be
// judged while the add is under way, then let go.
import { scenario } from "../lib.mjs";
import { held, waitFor } from "../api.mjs";
import { call, cluster, openAt, waitOperation } from "../clusters.mjs";

const noReload = (page) => page.evaluate(() => { window.__kept = "same page"; });
const same = (page) => page.evaluate(() => window.__kept === "same page");

await scenario("live lists: a group added from another client is listed while it is made, then in service, with no reload", async (page, check) => {
  const name = await cluster("ui-live-lists");
  await openAt(page, `/cluster/${name}?tab=groups`);
  await page.waitForSelector("tr[data-group]");
  await noReload(page);
  let id;
  await held(async (start) => {
    await start("live-lists");
    id = (await call("hyperpod_add_instance_group", { cluster: name, instance_group: "cpu-live", instance_type: "ml.m5.xlarge",
      instance_count: 1, availability_zone: "us-west-2a" })).operation_id;
    await page.waitForSelector('tr[data-group="cpu-live"] .group-op a', { timeout: 15000 });
    const row = await page.textContent('tr[data-group="cpu-live"]');
    check(/Pending|Creating/.test(row), "the group is listed as being made: " + row.replace(/\s+/g, " "));
    check(/being added/.test(row), "it says which work is making it");
    check((await page.getAttribute('tr[data-group="cpu-live"] .group-op a', "href")).includes(id), "and links to that operation");
    check(!(await page.$('[data-scale="cpu-live"]')) || !/Pending/.test(row), "a group HyperPod does not list yet offers no scale");
    await page.screenshot({ path: `${process.env.HYPD_SHOTS || "/tmp"}/live-lists-group-being-added.png`, fullPage: true });
  });
  const v = await waitOperation(id);
  check(v.status === "succeeded", "the add succeeds once time moves: " + v.status);
  await page.waitForSelector('tr[data-group="cpu-live"] .count[data-current="1"]', { timeout: 20000 });
  await page.waitForFunction(() => !document.querySelector('tr[data-group="cpu-live"] .group-op'), null, { timeout: 20000 });
  check(/InService/.test(await page.textContent('tr[data-group="cpu-live"]')), "then it is InService with its instance, the operation gone from the row");
  check(await same(page), "all on the same page, never reloaded");

  await page.click("#tab-nodes");
  await page.waitForSelector("tr[data-node]");
  const before = (await page.$$("tr[data-node]")).length;
  await noReload(page);
  const s = await call("hyperpod_scale_instance_group", { cluster: name, instance_group: "cpu-live", instance_count: 2 });
  await page.waitForFunction((n) => document.querySelectorAll("tr[data-node]").length === n + 1, before, { timeout: 30000 });
  check(true, "the nodes list gains the new node by itself");
  check((await waitOperation(s.operation_id)).status === "succeeded", "the scale succeeds");
  await waitFor(async () => (await page.$$eval('tr[data-node]', (rs) => rs.filter((r) => /cpu-live/.test(r.textContent) && /Ready/.test(r.textContent)).length)) === 2, 30000,
    "both nodes of cpu-live Ready");
  check(await same(page), "the nodes page was not reloaded");

  // after a dropped socket the list reads again (events may have been missed)
  await page.click("#tab-groups");
  await page.waitForSelector('tr[data-group="cpu-live"] .count[data-current="2"]', { timeout: 20000 });
  const reads = await page.evaluate(async () => {
    let n = 0;
    const orig = window.fetch;
    window.fetch = (...a) => { if (String(a[0]).includes("hyperpod_list_instance_groups")) n++; return orig(...a); };
    (await import("/lib/ws.js")).reconnect();
    for (let i = 0; i < 100 && n === 0; i++) await new Promise((f) => setTimeout(f, 100));
    window.fetch = orig;
    return n;
  });
  check(reads > 0, "a reconnect makes the list read again");
});
