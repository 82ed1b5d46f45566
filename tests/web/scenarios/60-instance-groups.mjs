// Cluster › Instance groups: add a CPU group through its form, then scale it
// (its fixed-at-create fields read-only), each change followed live.
import { scenario } from "../lib.mjs";
import { choose, cluster, openAt } from "../clusters.mjs";

const opDone = (page, not) => page.waitForFunction((old) => {
  const f = document.querySelector(".follow");
  return f && f.dataset.op !== old && f.dataset.status === "succeeded";
}, not, { timeout: 60000 });

await scenario("add an instance group, scale it, delete it after typing its name", async (page, check) => {
  const name = await cluster("ui-groups");
  await openAt(page, `/cluster/${name}?tab=groups`);
  await page.waitForSelector('tr[data-group]');
  await page.click("#group-add");
  await page.waitForSelector("#add-group-instance_group");
  await page.fill("#add-group-instance_group", "cpu1");
  await choose(page, "#add-group-availability_zone", "us-west-2a");
  await choose(page, "#add-group-instance_type", "ml.m5.xlarge");
  await page.fill("#add-group-instance_count", "1");
  await page.click("#add-group-add-the-group");
  await opDone(page, "");
  await page.waitForSelector('tr[data-group="cpu1"] .count[data-current="1"]', { timeout: 15000 });
  check(await page.$('tr[data-group="cpu1"] .count[data-current="1"]'), "the new group has its instance");
  const first = await page.getAttribute(".follow", "data-op");
  await page.click('[data-scale="cpu1"]');
  await page.waitForSelector("#scale-group-instance_count");
  check(await page.isDisabled("#scale-group-capacity_type"), "the capacity type is read-only");
  check(/Read-only: fixed when the group was created/.test(await page.textContent(".form-panel")), "with the reason");
  await page.fill("#scale-group-instance_count", "2");
  await page.click("#scale-group-scale");
  await opDone(page, first);
  await page.waitForSelector('tr[data-group="cpu1"] .count[data-current="2"]', { timeout: 15000 });
  check(await page.$('tr[data-group="cpu1"] .count[data-current="2"]'), "the group is scaled to 2");
  const second = await page.getAttribute(".follow", "data-op");
  await page.click('[data-delete="cpu1"]');
  await page.waitForSelector("dialog[open]");
  check((await page.textContent("dialog[open] .confirm-items")).includes("cpu1 (2 × ml.m5.xlarge)"), "the dialog names the group and its instances");
  check(/local volumes .* wiped/.test(await page.textContent("dialog[open] .lost")), "and says their local volumes are wiped");
  await page.fill("#confirm-type", "cpu1");
  await page.click("dialog[open] button[type=submit]");
  await opDone(page, second);
  await page.waitForFunction(() => !document.querySelector('tr[data-group="cpu1"]'), null, { timeout: 15000 });
  check(true, "the group is gone");
});
