// Cost where decisions are made: the create wizard's plan shows what the
// cluster costs an hour and a month (its instances priced, the figure the
// plan tool answers), the confirmation names it, and the cluster's
// instance groups page shows each group's running cost and the total, and
// the cluster's summary what the whole cluster costs to run.
import { scenario } from "../lib.mjs";
import { call, cluster, decide, openAt } from "../clusters.mjs";

const money = (n, d) => new Intl.NumberFormat("en-US", { style: "currency", currency: "USD",
  minimumFractionDigits: d, maximumFractionDigits: d }).format(n);

await scenario("the wizard's plan and confirmation say what the cluster costs an hour and a month", async (page, check) => {
  const want = await call("cluster_create", { cluster_tag: "cost-ui", availability_zone: "us-west-2a",
    instance_type: "ml.g5.2xlarge", instance_count: 2, plan: true });
  check(want.cost && want.cost.hourly > 0, `the plan tool prices the cluster (${JSON.stringify(want.cost_error || "")})`);
  await decide(page, { tag: "cost-ui", count: 2 });
  await page.click("#create-form-plan");
  await page.waitForSelector(".cost-total");
  const total = await page.textContent(".cost-total");
  check(total.includes(`${money(want.cost.hourly, 2)} an hour`), `the hourly figure is the plan's (${total})`);
  check(total.includes(`${money(want.cost.monthly, 0)} a month`), "and the monthly one (730 hours)");
  const inst = await page.textContent('.cost-item[data-type="instance"]');
  check(inst.includes("ml.g5.2xlarge") && /\b2\b/.test(inst), "the instances are an item: type and count");
  check((await page.$$(".cost-item")).length >= 3, "the EKS cluster and NAT gateway are items too");
  await page.click("#create-run");
  await page.waitForSelector("dialog[open]");
  check((await page.textContent("dialog[open]")).includes(`${money(want.cost.hourly, 2)} an hour`),
    "the confirmation names the figure");
  await page.keyboard.press("Escape");
});

await scenario("the instance groups page shows each group's running cost and the total", async (page, check) => {
  const name = await cluster("ui-cost");
  const r = await call("hyperpod_list_instance_groups", { cluster: name });
  const g = r.instance_groups[0];
  check(g.cost && g.cost.hourly > 0, "the read tool prices the group");
  await openAt(page, `/cluster/${name}?tab=groups`);
  await page.waitForSelector(`tr[data-group="${g.name}"] .group-cost`);
  const cell = await page.textContent(`tr[data-group="${g.name}"] .group-cost`);
  check(cell.includes(`${money(g.cost.hourly, 2)} an hour`), `the group's running cost (${cell})`);
  const sum = await page.textContent(".groups-cost");
  check(sum.includes(`${money(r.cost.hourly, 2)} an hour`) && sum.includes(`${money(r.cost.monthly, 0)} a month`),
    "the total of the groups");
  const st = await call("cluster_get_status", { cluster: name });
  check(st.cost && st.cost.hourly > g.cost.hourly, "the cluster's status prices more than its groups (EKS, NAT): " +
    JSON.stringify(st.cost_error || null));
  await page.waitForSelector(".cluster-cost strong");
  const facts = await page.textContent(".cluster-cost");
  check(facts.includes(`${money(st.cost.hourly, 2)} an hour`) && facts.includes("ml.g5.2xlarge × 1"),
    `the summary shows the cluster's running cost and what it is for (${facts})`);
});
