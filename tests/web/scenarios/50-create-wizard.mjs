// The create wizard: decisions, the plan for review, the run on
// confirmation and its five stages to InService in the progress panel.
import { scenario } from "../lib.mjs";
import { decide } from "../clusters.mjs";

const STAGES = ["cluster_create_eks", "cluster_configure_dependencies", "hyperpod_create", "storage_create_s3", "hyperpod_update_advanced_features"];

await scenario("create a cluster through the wizard: plan, confirm, five stages complete", async (page, check) => {
  await decide(page, { tag: "wz-one", count: 2 });
  check(!(await page.isVisible("#create-form-volume_size_gb")), "the other options are folded away");
  await page.click("#create-form-more > summary");
  await page.waitForSelector("#create-form-volume_size_gb");
  // the training operator, so that all five stages run
  await page.click("label[for=create-form-features-training_operator]");
  await page.click("#create-form-plan");
  await page.waitForSelector(".grouped-plan");
  const creates = Number(await page.textContent('[data-count="create"] strong'));
  check(creates > 20, `the plan counts what it creates (${creates})`);
  check(/10\.\d+\.\d+\.\d+\/16/.test(await page.textContent(".computed")), "the VPC's CIDR is shown");
  check((await page.$$(".computed [data-subnet]")).length >= 4, "the subnets are listed with their CIDRs");
  check((await page.textContent(".computed")).includes("hypd-wz-one-hp"), "the HyperPod cluster is named");
  check((await page.$$(".plan-group")).length >= 5, "the rows are grouped by kind");
  await page.click("#create-run");
  await page.waitForSelector("dialog[open]");
  check((await page.textContent("dialog[open]")).includes("ml.g5.2xlarge"), "the confirmation says what it creates");
  await page.click("dialog[open] button[type=submit]");
  await page.waitForFunction(() => location.hash.includes("op=op-"));
  check(/op=op-[0-9a-f]{16}/.test(await page.evaluate(() => location.hash)), "the operation id is in the URL");
  await page.waitForSelector('.progress[data-status="succeeded"]', { timeout: 60000 });
  for (const s of STAGES) {
    await page.waitForSelector(`[data-stage="${s}"][data-status="succeeded"]`, { timeout: 10000 }).catch(() => {});
    check(await page.$(`[data-stage="${s}"][data-status="succeeded"]`), `stage ${s} completed`);
  }
  check((await page.$$(".progress > .timeline .tl")).length >= 5, "the timeline shows the phases");
  check(/\d/.test(await page.textContent(".progress > .timeline .tl-time")), "each phase has its time");
  await page.click(".progress .notice a");
  await page.waitForSelector(".summary-facts");
  check((await page.textContent(".summary-facts")).includes("InService"), "the cluster is InService");
});
