// A reload in the middle of a creation shows the same progress: the
// operation is in the URL and everything is read from the server.
import { scenario } from "../lib.mjs";
import { decide } from "../clusters.mjs";

await scenario("reload mid-creation: the same stages and phases", async (page, check) => {
  await decide(page, { tag: "wz-two" });
  await page.click("#create-form-plan");
  await page.waitForSelector("#create-run");
  await page.click("#create-run");
  await page.click("dialog[open] button[type=submit]");
  await page.waitForFunction(() => location.hash.includes("op=op-"));
  const before = await page.evaluate(() => location.hash);
  await page.reload();
  await page.waitForSelector(".progress");
  check((await page.evaluate(() => location.hash)) === before, "the same operation after the reload");
  await page.waitForSelector('.progress[data-status="succeeded"]', { timeout: 60000 });
  const done = await page.$$eval(".stage", (xs) => xs.map((x) => x.dataset.stage + "=" + x.dataset.status));
  check(done.filter((x) => x.endsWith("=succeeded")).length === 4, "four stages done (no features asked for): " + done.join(" "));
  check(done.includes("hyperpod_update_advanced_features=skipped"), "the features stage shows as not asked for");
  const phases = await page.$$eval(".progress > .timeline .tl", (xs) => xs.map((x) => x.dataset.step));
  check(["eks", "dependencies", "hyperpod_and_storage"].every((p) => phases.includes(p)), "the timeline has the phases: " + phases.join(" "));
  await page.reload();
  await page.waitForSelector('.progress[data-status="succeeded"]');
  const again = await page.$$eval(".progress > .timeline .tl", (xs) => xs.map((x) => x.dataset.step + " " + x.querySelector(".tl-time").textContent));
  check(again.length === phases.length, "a second reload shows the same timeline");
});
