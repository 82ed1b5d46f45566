// Cluster › Dependencies: each item's state and a re-run followed live; and
// a read-scope token sees the cluster pages with every change disabled.
import { execFileSync } from "node:child_process";
import { URL, scenario, signIn } from "../lib.mjs";
import { cluster, openAt } from "../clusters.mjs";

await scenario("dependencies: every item's state, and a re-run followed to its end", async (page, check) => {
  const name = await cluster("ui-deps", { s3_storage: false });
  await openAt(page, `/cluster/${name}?tab=deps`);
  await page.waitForSelector("tr[data-item]");
  const states = await page.$$eval("tr[data-item]", (xs) => xs.map((x) => x.dataset.state));
  check(states.length >= 5 && states.every((s) => s === "present"), "each dependency is present: " + states.join(" "));
  await page.click("#deps-rerun");
  await page.waitForSelector('.follow[data-status="succeeded"]', { timeout: 60000 });
  check((await page.textContent(".follow")).includes("cluster_configure_dependencies"), "the re-run's operation is shown");
  check((await page.evaluate(() => location.hash)).includes("op=op-"), "its id is in the URL");
});

await scenario("a read-scope token: the cluster pages show, every change is disabled", async (page, check) => {
  const token = execFileSync(process.env.HYPD, ["token", "create", "--scope", "read", "--name", "ui-reader"],
    { env: process.env, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim().split("\n")[0];
  await signIn(page, token);
  await page.waitForFunction(() => location.hash.startsWith("#/clusters") && document.querySelector("#nav a"));
  await page.waitForSelector("tr[data-cluster]");
  check(await page.isDisabled("#import-toggle") === false, "opening the import form is allowed (reading)");
  const name = await page.getAttribute("tr[data-cluster]", "data-cluster");
  await page.goto(`${URL}/#/cluster/${name}?tab=groups`);
  await page.waitForSelector("tr[data-group]");
  check(await page.isDisabled("#group-add"), "adding a group is disabled");
  check(await page.isDisabled("[data-scale]"), "scaling is disabled");
  await page.goto(`${URL}/#/cluster/${name}?tab=features`);
  await page.waitForSelector("[data-feature]");
  check(await page.isDisabled('[data-feature] input[role="switch"]'), "the feature switches are disabled");
  await page.goto(`${URL}/#/cluster/${name}?tab=storage`);
  await page.waitForSelector("#storage-add-s3");
  check(await page.isDisabled("#storage-add-s3"), "creating storage is disabled");
  check(/scope operate/.test(await page.getAttribute("#storage-add-s3", "title")), "the button says which scope it needs");
});
