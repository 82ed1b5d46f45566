// axe(page, what) -> the problems axe-core (pinned in tests/web/package.json)
// finds on the page as it is now, critical and serious only, each as
// "rule (impact): the first target": the walks expect none. axe is evaluated
// through the browser's debugging protocol, which the page's CSP does not
// restrict, so the page is judged as it is served.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

const source = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

export async function axe(page) {
  if (!(await page.evaluate(() => !!window.axe))) await page.evaluate(source);
  const found = await page.evaluate(async () => {
    const r = await window.axe.run(document, { resultTypes: ["violations"] });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact, target: (v.nodes[0] && v.nodes[0].target || []).join(" "), n: v.nodes.length }));
  });
  return found.filter((v) => v.impact === "critical" || v.impact === "serious").map((v) => `${v.id} (${v.impact}, ${v.n}×): ${v.target}`);
}
