// A read-scope token plans (planning changes nothing): on the create
// wizard and on a staged tool's page (hyperpod_scale_instance_group of a
// cluster that exists) Plan works, the plan takes focus and is in the
// viewport, and only the apply button is disabled, saying why.
import { URL, scenario, signIn } from "../lib.mjs";
import { newToken } from "../api.mjs";
import { cluster, decisions } from "../clusters.mjs";
import { fill } from "../workloads.mjs";

// seen(page, sel) -> {focused, inView}: the plan section holds the focus and its top is on screen
const seen = (page, sel) => page.waitForFunction((s) => {
  const el = document.querySelector(s);
  if (!el) return null;
  const r = el.getBoundingClientRect();
  const focused = document.activeElement === el;
  return focused && r.top >= 0 && r.top < window.innerHeight ? { focused, top: r.top } : null;
}, sel, { timeout: 10000 }).then((h) => h.jsonValue()).catch(() => null);

await scenario("a read token plans a create and a scale: the plan is focused and in view, only apply is disabled", async (page, check) => {
  const name = await cluster("ui-keep", { instance_type: "ml.m5.2xlarge" }); // also the drafts' and confirmations' cluster
  const reader = newToken("read", "plan-reader");
  await signIn(page, reader);
  await page.waitForFunction(() => location.hash.startsWith("#/clusters") && document.querySelector("#nav a"));
  await page.goto(URL + "/#/create");
  await decisions(page, { tag: "ro-plan", count: 2 });
  check(!(await page.isDisabled("#create-form-plan")), "Plan is enabled for a read token");
  await page.click("#create-form-plan");
  await page.waitForSelector(".grouped-plan");
  const at = await seen(page, "#wizard-plan");
  check(at, "the create's plan has the focus and is in the viewport");
  check(/The plan for/.test(await page.evaluate(() => document.activeElement.getAttribute("aria-labelledby") &&
    document.getElementById(document.activeElement.getAttribute("aria-labelledby")).textContent)), "the focused plan is named by its heading");
  check(await page.isDisabled("#create-run"), "Create this cluster is disabled");
  const why = (await page.getAttribute("#create-run", "title")) || "";
  check(/can plan; applying needs scope operate/.test(why), "its reason says that applying needs operate: " + why);
  check(/applying needs scope operate/.test(await page.textContent("#apply-scope")), "and the reason is written beside it");
  await page.screenshot({ path: `${process.env.HYPD_SHOTS || "/tmp"}/41-readonly-create-plan.png` });

  await page.goto(URL + "/#/tools/hyperpod_scale_instance_group");
  await page.waitForSelector("#tool-form-plan");
  const groups = await fetch(`${URL}/api/v1/tools/hyperpod_list_instance_groups`, { method: "POST", body: JSON.stringify({ cluster: name }),
    headers: { authorization: "Bearer " + reader, "content-type": "application/json" } }).then((r) => r.json());
  const group = (groups.instance_groups || [])[0];
  check(group, "the cluster has an instance group");
  await fill(page, "tool-form", { cluster: name, instance_group: group && group.name, instance_count: 2 });
  check(/applying needs scope operate/.test(await page.textContent("#scope-notice")), "the page says a read token plans and cannot apply");
  await page.click("#tool-form-plan");
  await page.waitForSelector("#plan-out .plan");
  check(await seen(page, "#plan-out"), "the scale's plan has the focus and is in the viewport");
  check(/1\b.*to change/.test(await page.textContent("#plan-out .plan-counts")), "the plan changes the group: " +
    await page.textContent("#plan-out .plan-counts"));
  check(await page.isDisabled("#tool-form-run") && await page.isDisabled("#plan-run"), "Run and Run this plan are disabled");
  check(/applying needs scope operate/.test((await page.getAttribute("#plan-run", "title")) || ""), "with the reason as their tooltip");
});
