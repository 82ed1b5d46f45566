// A plan's kept resources, each with its reason (issue 19, "plans are
// true"): storage_delete of an S3 claim keeps its bucket and the data in
// it unless asked, and the plan's row for the bucket says so. Every keep
// row of the plan the server answers is drawn with its why, in the plan and
// in the dialog that asks before the run.
import { URL, scenario } from "../lib.mjs";
import { call, choose, cluster, openAt } from "../clusters.mjs";

await scenario("a plan shows each kept resource with its reason", async (page, check) => {
  const name = await cluster("ui-keeps");
  const plan = await call("storage_delete", { cluster: name, claim_name: "s3-claim", plan: true });
  const keeps = (plan.plan || []).filter((e) => e.action === "keep");
  check(keeps.length > 0, "the plan keeps the bucket: " + JSON.stringify(plan.plan).slice(0, 300));
  check(keeps.every((e) => typeof e.why === "string" && e.why.length > 0), "the server gives each keep its reason");
  await openAt(page, "/tools/storage_delete");
  await page.waitForSelector("[name=claim_name]");
  await page.click("#tool-form-more > summary"); // the cluster is among the folded options
  await choose(page, "[name=cluster]", name);
  await page.fill("[name=claim_name]", "s3-claim");
  await page.click("#tool-form-plan");
  await page.waitForSelector(".plan-rows");
  const rows = await page.$$eval("tr.plan-row[data-action=keep]", (trs) => trs.map((tr) => tr.textContent));
  check(rows.length === keeps.length, `each kept resource has a row (${rows.length} of ${keeps.length})`);
  for (const e of keeps) {
    check(rows.some((r) => r.includes(e.name) && r.includes(e.why)), `the row of ${e.type} ${e.name} says why: ${e.why}`);
  }
  const why = await page.$eval("tr.plan-row[data-action=keep] .plan-why", (s) => getComputedStyle(s).color).catch(() => null);
  check(why !== null, "the reason is its own element, drawn in the text colour");
  check(/1<\/strong> to keep|to keep/.test(await page.innerHTML(".plan-counts")), "the counts say what is kept");
  // Run (a destructive tool) asks first: the dialog names what it removes, and what it keeps and why
  await page.click("#tool-form-run");
  await page.waitForSelector("dialog[open] .confirm-kept");
  const kept = await page.textContent("dialog[open] .confirm-kept");
  for (const e of keeps) check(kept.includes(e.name) && kept.includes(e.why), `the dialog keeps ${e.name} and says why: ${kept}`);
  check(/s3-claim/.test(await page.textContent("dialog[open] .confirm-items")), "and names what it removes");
  check(page.url().startsWith(URL), "still on the UI");
});
