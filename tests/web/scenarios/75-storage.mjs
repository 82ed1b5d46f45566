// Cluster › Storage: create S3 storage through its form, then list its
// contents (the bucket is new, so the listing is empty and says so).
import { URL, scenario } from "../lib.mjs";
import { call, cluster, openAt } from "../clusters.mjs";

await scenario("create S3 storage and list its contents: an empty bucket", async (page, check) => {
  const name = await cluster("ui-store", { s3_storage: false });
  await openAt(page, `/cluster/${name}?tab=storage`);
  await page.waitForSelector("#storage .empty");
  check((await page.textContent("#storage .empty")).includes("No storage yet"), "the empty state says what to do");
  await page.click("#storage-add-s3");
  await page.waitForSelector("#form-storage_create_s3-claim_name");
  await page.fill("#form-storage_create_s3-claim_name", "data-claim");
  await page.click("#form-storage_create_s3-create");
  await page.waitForSelector('.follow[data-status="succeeded"]', { timeout: 60000 });
  await page.waitForSelector('tr[data-claim="data-claim"]', { timeout: 15000 });
  check((await page.textContent('tr[data-claim="data-claim"]')).includes("hypd-ui-store-data"), "the claim is backed by hypd's bucket");
  await page.click('[data-browse="data-claim"]');
  await page.waitForSelector(".contents .contents-empty, .contents table.objects");
  check((await page.textContent(".contents")).includes("data-claim"), "the listing names the claim");
  check(/The bucket is empty|objects/.test(await page.textContent(".contents")), "the listing renders");
  check((await page.evaluate(() => location.hash)).includes("browse=data-claim"), "the open listing is in the URL");
  await page.click('[data-delete="data-claim"]');
  await page.waitForSelector("dialog[open]");
  check(/bucket .* and its data are kept/.test(await page.textContent("dialog[open] .lost")), "deleting says the bucket is kept");
  await page.click("dialog[open] .dialog-actions button[type=button]");
});

await scenario("S3 storage of an existing bucket: its folders and objects, a page at a time", async (page, check) => {
  const name = "hypd-ui-store";
  // the cluster's lifecycle bucket holds hypd's lifecycle scripts: mount it as it is
  const groups = await call("hyperpod_list_instance_groups", { cluster: name });
  const bucket = groups.instance_groups[0].lifecycle.source.replace(/^s3:\/\//, "").split("/")[0];
  await openAt(page, `/cluster/${name}?tab=storage`);
  await page.waitForSelector("#storage-add-s3");
  await page.click("#storage-add-s3");
  await page.waitForSelector("#form-storage_create_s3-bucket");
  await page.fill("#form-storage_create_s3-bucket", bucket);
  await page.fill("#form-storage_create_s3-claim_name", "scripts");
  await page.click("#form-storage_create_s3-create");
  await page.waitForSelector('.follow[data-status="succeeded"]', { timeout: 60000 });
  await page.waitForSelector('tr[data-claim="scripts"]', { timeout: 15000 });
  await page.goto(`${URL}/#/cluster/${name}?tab=storage&browse=scripts&size=1`);
  await page.waitForSelector('.contents tr[data-folder="lifecycle/"]');
  await page.click('.contents tr[data-folder="lifecycle/"] button');
  await page.waitForSelector('.contents tr[data-folder="lifecycle/base-config/"]');
  await page.click('.contents tr[data-folder="lifecycle/base-config/"] button');
  await page.waitForSelector(".contents tr[data-object]");
  const first = await page.getAttribute(".contents tr[data-object]", "data-object");
  check(first.startsWith("lifecycle/base-config/"), "an object of the folder is listed: " + first);
  check(/B$/.test((await page.textContent(".contents tr[data-object] td.num")).trim()), "with its size");
  await page.click("#contents-next");
  await page.waitForFunction((k) => { const r = document.querySelector(".contents tr[data-object]"); return r && r.dataset.object !== k; }, first);
  check((await page.textContent("#contents-count")).includes("page 2"), "the next page shows another object");
  check((await page.evaluate(() => location.hash)).includes("prefix=lifecycle%2Fbase-config%2F"), "the folder is in the URL");
  await page.goto(`${URL}/#/cluster/${name}?tab=storage`);
  await page.click('[data-delete="scripts"]');
  await page.waitForSelector("dialog[open]");
  check(await page.isDisabled("dialog[open] button[type=submit]"), "deleting waits for the claim's name");
  await page.fill("#confirm-type", "scripts");
  await page.click("dialog[open] button[type=submit]");
  await page.waitForSelector('.follow[data-status="succeeded"]', { timeout: 60000 });
  await page.waitForFunction(() => !document.querySelector('tr[data-claim="scripts"]'), null, { timeout: 15000 });
  check(true, "the storage is gone from the list");
});
