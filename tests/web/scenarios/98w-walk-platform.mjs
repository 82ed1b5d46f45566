// The platform engineer's walk: a cluster created through the wizard
// from its plan and its cost (the API's for the same decisions), then its nodes
// and features operated: a node rebooted after the confirmation naming it,
// the training operator switched on and read back. Each stop is
// screenshotted and judged by axe.
import { scenario } from "../lib.mjs";
import { call, decide } from "../clusters.mjs";
import { costShown, stop } from "../walks.mjs";

await scenario("walk, platform engineer: create a cluster from its plan, reboot a node, switch a feature on", async (page, check) => {
  await decide(page, { tag: "walk-plat", count: 1 });
  await stop(page, check, "platform", "1-decisions");
  await page.click("#create-form-plan");
  await page.waitForSelector(".grouped-plan");
  const creates = Number(await page.textContent('[data-count="create"] strong'));
  check(creates > 20, `the plan counts what it creates (${creates})`);
  check((await page.textContent(".computed")).includes("hypd-walk-plat-hp"), "the plan names the HyperPod cluster it makes");
  // the plan's cost is the one the API plans for the same decisions, with a row for the instances it creates
  const planned = await call("cluster_create", { cluster_tag: "walk-plat", availability_zone: "us-west-2a",
    instance_type: "ml.g5.2xlarge", instance_count: 1, plan: true });
  const total = await page.textContent(".cost-total strong").catch(() => "");
  check(planned.cost && planned.cost.hourly > 0, "the API's plan has a cost: " + JSON.stringify(planned.cost_error || null));
  check(planned.cost && costShown(total)[0] === Number(planned.cost.hourly.toFixed(planned.cost.hourly < 1 ? 3 : 2)),
    `the plan shows the hourly cost the API plans: ${total} against ${planned.cost && planned.cost.hourly}`);
  const row = await page.textContent('.cost-item[data-type="instance"]').catch(() => "");
  check(/ml\.g5\.2xlarge/.test(row), "a cost row for the ml.g5.2xlarge it creates: " + row);
  await stop(page, check, "platform", "2-plan");
  await page.click("#create-run");
  await page.waitForSelector("dialog[open]");
  check((await page.textContent("dialog[open]")).includes("ml.g5.2xlarge"), "the confirmation says what it creates");
  await page.click("dialog[open] button[type=submit]");
  await page.waitForSelector('.progress[data-status="succeeded"]', { timeout: 90000 });
  await stop(page, check, "platform", "3-created");
  await page.click(".progress .notice a");
  await page.waitForSelector(".summary-facts");
  check((await page.textContent(".summary-facts")).includes("InService"), "the cluster is InService");

  await page.click("#tab-nodes");
  await page.waitForSelector("tr[data-node]");
  const id = await page.getAttribute("tr[data-node]", "data-node");
  check(/Ready/.test(await page.textContent(`tr[data-node="${id}"]`)), "its node is Ready in Kubernetes");
  await page.check(`#sel-${id}`);
  await page.click('[data-node-action="reboot"]');
  await page.waitForSelector("dialog[open]");
  check((await page.textContent("dialog[open]")).includes(id), "the reboot's confirmation names the node");
  await stop(page, check, "platform", "4-reboot-confirm");
  await page.click("dialog[open] button[type=submit]");
  await page.waitForSelector(".node-outcome");
  check(/1 of 1 accepted/.test(await page.textContent(".node-outcome")), "the reboot is accepted");

  await page.click("#tab-features");
  await page.waitForSelector('[data-feature="training_operator"][data-enabled="false"]');
  await page.click('label[for="feat-training_operator"]');
  await page.waitForSelector('.follow[data-status="succeeded"]', { timeout: 60000 });
  await page.waitForSelector('[data-feature="training_operator"][data-enabled="true"][data-pending="false"]', { timeout: 20000 });
  await page.waitForFunction(() => (document.querySelector('[data-feature="training_operator"] .feature-state')?.textContent || "").includes("enabled"),
    null, { timeout: 30000 }).catch(() => {});
  check((await page.textContent('[data-feature="training_operator"] .feature-state')).includes("enabled"), "the training operator is on, read back as enabled");
  await stop(page, check, "platform", "5-features");
});
