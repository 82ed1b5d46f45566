// The instance-type picker: the types grouped by accelerator (GPU, then
// Trainium / Inferentia, then CPU), each option with its accelerators, vCPUs,
// memory and EFA, filtered to what the chosen zone offers
// (aws_get_instance_types, from EC2's instance type offerings of the zone):
// another zone, another list; a type chosen that the new zone does not
// offer is flagged.
import { scenario } from "../lib.mjs";
import { call, choose, openAt } from "../clusters.mjs";

// options(page) -> {groups: [label], values: [value], texts: {value: text}} of the instance-type select
const options = (page) => page.$eval("#create-form-instance_type", (s) => ({
  groups: [...s.querySelectorAll("optgroup")].map((g) => g.label),
  values: [...s.querySelectorAll("optgroup option")].map((o) => o.value),
  texts: Object.fromEntries([...s.querySelectorAll("optgroup option")].map((o) => [o.value, o.textContent])),
  firstOfGroup: [...s.querySelectorAll("optgroup")].map((g) => g.querySelector("option") && g.querySelector("option").value) }));

await scenario("instance types: grouped GPU, Trainium/Inferentia, CPU; GPUs, memory and EFA shown; the zone filters them", async (page, check) => {
  const zones = (await call("aws_get_availability_zones", {})).zones.map((z) => z.name);
  const offered = {};
  for (const z of zones) offered[z] = (await call("aws_get_instance_types", { zone: z })).instance_types;
  const has = (z) => offered[z].some((t) => t.name === "ml.p5.48xlarge");
  const a = zones.find(has);
  const b = zones.find((z) => !has(z));
  if (!a || !b) throw new Error("the sandbox should offer ml.p5.48xlarge in some zones only: " + zones.map((z) => z + (has(z) ? "+" : "-")).join(" "));
  await openAt(page, "/create");
  await choose(page, "#create-form-availability_zone", a);
  // the zone's list, once loaded (the region's may show a moment before)
  await page.waitForSelector('#create-form-instance_type[aria-busy="false"] optgroup option[value="ml.p5.48xlarge"]', { state: "attached" });
  // (the zone's read may not have begun when the region's list is drawn: wait up to 10 s for a list of the zone's size)
  const want = offered[a].map((t) => t.name).sort();
  await page.waitForFunction((n) => document.querySelectorAll("#create-form-instance_type optgroup option").length === n,
    want.length, { timeout: 10000 }).catch(() => {});
  const o = await options(page);
  check(JSON.stringify(o.groups) === JSON.stringify(["GPU", "Trainium / Inferentia", "CPU"]), "the groups in order: " + o.groups.join(", "));
  check(JSON.stringify([...o.values].sort()) === JSON.stringify(want), `the list is exactly what ${a} offers (${o.values.length} of ${want.length})`);
  const p5 = o.texts["ml.p5.48xlarge"];
  check(/8 × NVIDIA H100 80 GiB/.test(p5) && /192 vCPU/.test(p5) && /2048 GiB/.test(p5) && /EFA × 32/.test(p5), "a GPU option shows its GPUs, memory and EFA: " + p5);
  const cpu = offered[a].find((t) => !t.accelerator_count);
  check(cpu && o.values.indexOf(cpu.name) > o.values.indexOf("ml.p5.48xlarge"), "CPU types come after the GPU ones");
  const trn = offered[a].find((t) => t.accelerator_kind === "neuron");
  if (trn) check(/AWS Trainium|AWS Inferentia/.test(o.texts[trn.name]), "a Neuron option names its accelerator: " + o.texts[trn.name]);
  await page.selectOption("#create-form-instance_type", "ml.p5.48xlarge");
  await page.screenshot({ path: `${process.env.HYPD_SHOTS || "/tmp"}/instance-types-${a}.png`, fullPage: true });
  // another zone: another list, and the chosen type flagged
  await choose(page, "#create-form-availability_zone", b);
  await page.waitForSelector("[data-path=instance_type] [data-unknown]");
  await page.waitForSelector('#create-form-instance_type[aria-busy="false"]', { state: "attached" });
  await page.waitForFunction((n) => document.querySelectorAll("#create-form-instance_type optgroup option").length === n,
    offered[b].length, { timeout: 10000 }).catch(() => {});
  const o2 = await options(page);
  check(!o2.values.includes("ml.p5.48xlarge"), `${b} does not list ml.p5.48xlarge`);
  check(JSON.stringify([...o2.values].sort()) === JSON.stringify(offered[b].map((t) => t.name).sort()), `the list is what ${b} offers`);
  const flag = await page.textContent("[data-path=instance_type] [data-unknown]");
  check(flag.includes("ml.p5.48xlarge") && flag.includes(b), "the chosen type the zone does not offer is flagged: " + flag);
  check((await page.getAttribute("#create-form-instance_type", "aria-invalid")) === "true", "and the select is marked invalid");
  await page.selectOption("#create-form-instance_type", "ml.g5.2xlarge");
  check(!(await page.$("[data-path=instance_type] [data-unknown]")), "an offered type clears the flag");
});
