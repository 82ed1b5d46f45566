// Cluster › Features: the training operator switched on on a cluster made
// without it; pending while its operation runs, then the state read back.
import { scenario } from "../lib.mjs";
import { cluster, openAt } from "../clusters.mjs";

await scenario("toggle the training operator on and see the actual state read back", async (page, check) => {
  const name = await cluster("ui-feat", { s3_storage: false });
  await openAt(page, `/cluster/${name}?tab=features`);
  await page.waitForSelector('[data-feature="training_operator"][data-enabled="false"]');
  check(!(await page.isChecked("#feat-training_operator")), "it reads as off");
  await page.click('label[for="feat-training_operator"]');
  await page.waitForFunction(() => location.hash.includes("op=op-"));
  await page.waitForSelector('.follow[data-status="succeeded"]', { timeout: 60000 });
  await page.waitForSelector('[data-feature="training_operator"][data-enabled="true"][data-pending="false"]', { timeout: 15000 });
  check(await page.isChecked("#feat-training_operator"), "the switch is on");
  // the read-back may say a part is still coming up (partial) a moment before it is all enabled
  await page.waitForFunction(() => (document.querySelector('[data-feature="training_operator"] .feature-state')?.textContent || "").includes("enabled"),
    null, { timeout: 30000 }).catch(() => {});
  check((await page.textContent('[data-feature="training_operator"] .feature-state')).includes("enabled"), "the state read back is enabled");
  await page.reload();
  await page.waitForSelector('[data-feature="training_operator"][data-enabled="true"]');
  check(true, "still on after a reload");
});

await scenario("turning a feature off asks first, naming its chain; confirmed, it is off and read back", async (page, check) => {
  const name = await cluster("ui-feat", { s3_storage: false });
  await openAt(page, `/cluster/${name}?tab=features`);
  await page.waitForSelector('[data-feature="training_operator"][data-enabled="true"][data-pending="false"]');
  await page.click('label[for="feat-training_operator"]');
  await page.waitForSelector("dialog[open]");
  const text = await page.textContent("dialog[open]");
  check(/Turn Training operator off\?/.test(text), "the dialog names the feature");
  check(/IAM roles/.test(text), "it says what is removed");
  await page.keyboard.press("Escape");
  await page.waitForSelector("dialog[open]", { state: "detached" }).catch(() => {});
  check(!(await page.$("dialog[open]")), "Escape closes it");
  check(await page.isChecked("#feat-training_operator"), "nothing changed: still on");
  check(!(await page.evaluate(() => location.hash.includes("op=op-"))), "no operation started");
  await page.click('label[for="feat-training_operator"]');
  await page.waitForSelector("dialog[open]");
  await page.click("dialog[open] button[type=submit]");
  await page.waitForFunction(() => location.hash.includes("op=op-"));
  await page.waitForSelector('.follow[data-status="succeeded"]', { timeout: 60000 });
  await page.waitForSelector('[data-feature="training_operator"][data-enabled="false"][data-pending="false"]',
    { timeout: 15000 });
  check(!(await page.isChecked("#feat-training_operator")), "the switch reads off");
});
