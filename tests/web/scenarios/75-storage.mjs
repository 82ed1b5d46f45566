// Cluster › Storage: create S3 storage through its form, then list its
// contents (the bucket is new, so the listing is empty and says so).
import { scenario } from "../lib.mjs";
import { cluster, openAt } from "../clusters.mjs";

await scenario("create S3 storage and list its contents", async (page, check) => {
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
