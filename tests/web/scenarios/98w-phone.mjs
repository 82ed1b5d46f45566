// A phone (390 × 844): every main page fits the screen's width (no
// sideways scrolling of the page), the tables stack into one card per row
// with each cell labelled (the nodes table, which ran off-screen, above
// all), and axe finds nothing critical or serious.
import { URL, scenario } from "../lib.mjs";
import { cluster, openAt } from "../clusters.mjs";
import { axe } from "../a11y.mjs";

const SHOTS = process.env.HYPD_SHOTS || "/tmp";

await scenario("phone 390×844: tables are cards with labelled cells, no page scrolls sideways, axe clean", async (page, check) => {
  const name = await cluster("ui-live-lists"); // 67-live-lists' cluster (made again if it ran alone)
  const q = `cluster=${name}`;
  const PAGES = [["clusters", "/clusters", "table.clusters"], ["groups", `/cluster/${name}?tab=groups`, "tr[data-group]"],
    ["nodes", `/cluster/${name}?tab=nodes`, "tr[data-node]"], ["deps", `/cluster/${name}?tab=deps`, "table.deps"],
    ["features", `/cluster/${name}?tab=features`, "main h2"], ["storage", `/cluster/${name}?tab=storage`, "main h2"],
    ["training", `/training?${q}`, "#recipes"], ["inference", `/inference?${q}`, "#deploy"], ["models", `/models?${q}`, "main h1"],
    ["monitor", `/monitor?${q}`, "main h1"], ["diagnostics", `/diagnostics?${q}`, "main h1"], ["operations", "/operations", "table.ops"],
    ["tools", "/tools", ".tool-list"], ["tool-form", "/tools/hyperpod_add_instance_group", "form"]];
  await openAt(page, "/clusters");
  for (const [what, route, ready] of PAGES) {
    await page.goto(URL + "/#" + route);
    await page.waitForSelector(ready, { timeout: 20000 });
    await page.waitForTimeout(300);
    await page.screenshot({ path: `${SHOTS}/phone-${what}.png`, fullPage: true });
    const wide = await page.evaluate(() => document.documentElement.scrollWidth);
    check(wide <= 390, `${what}: the page is ${wide} px wide on a 390 px screen`);
    const bad = await axe(page);
    check(bad.length === 0, `${what}: axe: ${bad.join("; ")}`);
  }
  await page.goto(URL + `/#/cluster/${name}?tab=nodes`);
  await page.waitForSelector("tr[data-node]");
  const cards = await page.$$eval("table.nodes tbody tr[data-node]", (rows) => rows.map((r) => {
    const box = r.getBoundingClientRect();
    return { display: getComputedStyle(r).display, right: box.right, width: box.width,
      labels: [...r.querySelectorAll("td[data-label]")].map((td) => getComputedStyle(td, "::before").content.replace(/"/g, "")),
      head: getComputedStyle(r.closest("table").querySelector("thead")).position };
  }));
  check(cards.length > 0, "the nodes table has rows");
  check(cards.every((c) => c.display === "block"), "each node is a card (its row a block)");
  check(cards.every((c) => c.right <= 390), "each card fits the screen: " + cards.map((c) => Math.round(c.right)).join(","));
  check(cards.every((c) => ["Group", "Instance", "Health", "Kubernetes", "Launched"].every((l) => c.labels.includes(l))), "each cell says what it is: " + (cards[0] || {}).labels);
  check(cards.every((c) => c.head === "absolute"), "the header row is hidden from sight but kept for screen readers");
  const checkbox = await page.$("tr[data-node] input[type=checkbox]");
  await checkbox.click();
  check(await page.isEnabled('[data-node-action="reboot"]'), "a node can still be selected on a card and acted on");
}, { viewport: { width: 390, height: 844 } });
