// Clusters: the list with the active one, a switch (cluster_switch) and an
// import (cluster_import's form).
import { scenario } from "../lib.mjs";
import { cluster, openAt } from "../clusters.mjs";

await scenario("clusters: make another one active, import one through its form", async (page, check) => {
  await cluster("ui-list-a");
  await cluster("ui-list-b"); // the last one made is the active one
  await openAt(page, "/clusters");
  await page.waitForSelector('tr[data-cluster="hypd-ui-list-b"] .mark-active');
  check(!(await page.$('tr[data-cluster="hypd-ui-list-a"] .mark-active')), "one active cluster");
  await page.click('[data-switch="hypd-ui-list-a"]');
  await page.waitForSelector('tr[data-cluster="hypd-ui-list-a"] .mark-active');
  check((await page.inputValue("#cluster-switch")) === "hypd-ui-list-a", "the top bar follows the switch");
  await page.click("#import-toggle");
  await page.waitForSelector("#import-form-cluster");
  check((await page.evaluate(() => location.hash)).includes("import=1"), "the open form is in the URL");
  await page.fill("#import-form-cluster", "hypd-ui-list-b");
  await page.click("#import-form-import");
  await page.waitForSelector("#import-panel .notice");
  check((await page.textContent("#import-panel .notice")).includes("hypd-ui-list-b"), "the import names the cluster");
});
