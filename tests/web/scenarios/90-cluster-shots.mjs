// Screenshots of Clusters, the wizard (with a plan, and a creation's
// progress) and Cluster's sections at 1280 and
// 420 px, light and dark, under the test output folder.
import { TOKEN, URL, scenario } from "../lib.mjs";
import { decisions, openAt } from "../clusters.mjs";

const SHOTS = process.env.HYPD_SHOTS || "/tmp";
for (const width of [1280, 420]) {
  for (const scheme of ["light", "dark"]) {
    await scenario(`cluster pages at ${width} px, ${scheme}`, async (page, check) => {
      await openAt(page, "/clusters");
      const shot = (n) => page.screenshot({ path: `${SHOTS}/pages-${n}-${width}-${scheme}.png`, fullPage: true });
      await page.waitForSelector("table.clusters tr[data-cluster]");
      await shot("clusters");
      await page.goto(URL + "/#/create");
      await decisions(page, { tag: "shots", zone: "us-west-2b", type: "ml.g5.12xlarge", count: 4 });
      await page.click("#create-form-plan");
      await page.waitForSelector(".grouped-plan");
      await shot("create");
      const ops = await (await fetch(`${URL}/api/v1/operations?tool=cluster_create&status=succeeded&limit=1`, { headers: { authorization: "Bearer " + TOKEN } })).json();
      await page.goto(`${URL}/#/create?op=${ops.operations[0].operation_id}`);
      await page.waitForSelector('.progress[data-status="succeeded"] [data-stage="hyperpod_create"][data-status="succeeded"]');
      await shot("create-progress");
      const name = await page.evaluate(() => document.getElementById("cluster-switch").value);
      for (const tab of ["groups", "nodes", "deps", "features", "storage"]) {
        await page.goto(`${URL}/#/cluster/${name}?tab=${tab}`);
        await page.waitForSelector(`#${tab} .table, #${tab} .empty, #${tab} .features`);
        await shot("cluster-" + tab);
      }
      const over = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      check(over <= 1, `nothing wider than the window (${over} px over)`);
    }, { viewport: { width, height: 900 }, colorScheme: scheme });
  }
}
