// Screenshots of Clusters, the wizard (with a plan) and Cluster at 1280 and
// 420 px, light and dark, under the test output folder.
import { URL, scenario } from "../lib.mjs";
import { openAt } from "../clusters.mjs";

const SHOTS = process.env.HYPD_SHOTS || "/tmp";
for (const width of [1280, 420]) {
  for (const scheme of ["light", "dark"]) {
    await scenario(`cluster pages at ${width} px, ${scheme}`, async (page, check) => {
      await openAt(page, "/clusters");
      const shot = (n) => page.screenshot({ path: `${SHOTS}/pages-${n}-${width}-${scheme}.png`, fullPage: true });
      await page.waitForSelector("table.clusters tr[data-cluster]");
      await shot("clusters");
      await page.goto(URL + "/#/create");
      await page.waitForSelector("#create-form-cluster_tag");
      await page.fill("#create-form-cluster_tag", "shots");
      await page.waitForSelector('#create-form-availability_zone option[value="us-west-2b"]', { state: "attached" });
      await page.selectOption("#create-form-availability_zone", "us-west-2b");
      await page.waitForSelector('#create-form-instance_type option[value="ml.g5.12xlarge"]', { state: "attached" });
      await page.selectOption("#create-form-instance_type", "ml.g5.12xlarge");
      await page.fill("#create-form-instance_count", "4");
      await page.click("#create-form-plan");
      await page.waitForSelector(".grouped-plan");
      await shot("create");
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
