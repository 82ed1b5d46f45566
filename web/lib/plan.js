// <PlanView plan=result/>: what a staged tool called with plan = true
// answers ({create, change, delete, keep, plan: [{action, type, name, id,
// fields, changes, why}]}), as counts and a table of rows, like Terraform's
// plan. A kept resource (and a stage planned later) shows why: a keep
// without its reason reads as a resource forgotten. What the plan costs
// (plan.cost, or why not: plan.cost_error) comes first (lib/cost.js).
//
// usePlanFocus(key) -> ref: on the section that holds a plan (tabindex -1,
// named by its heading); each time key changes to a new plan, the section
// takes focus (a screen reader reads its heading) and scrolls into view,
// at once when the person prefers reduced motion.
import { html, useEffect, useRef } from "/vendor/preact-htm.js";
import { CostView } from "/lib/cost.js";

export function usePlanFocus(key) {
  const ref = useRef(null);
  useEffect(() => {
    const el = ref.current;
    if (!key || !el) return;
    const still = window.matchMedia && window.matchMedia("(prefers-reduced-motion: reduce)").matches;
    el.focus({ preventScroll: true });
    el.scrollIntoView({ behavior: still ? "auto" : "smooth", block: "start" });
  }, [key]);
  return ref;
}

const SIGN = { create: "+", change: "~", delete: "−", keep: "=" };

function fieldsText(o) {
  if (!o || typeof o !== "object") return "";
  return Object.entries(o).map(([k, v]) => `${k}: ${typeof v === "object" ? JSON.stringify(v) : String(v)}`).join("; ");
}

export function PlanView({ plan }) {
  const rows = (plan && plan.plan) || [];
  return html`<section class="plan" aria-label="plan">
    <p class="plan-counts">
      ${["create", "change", "delete", "keep"].map((k) => html`<span class=${"plan-count plan-" + k}><strong>${plan[k] || 0}</strong> to ${k}</span> `)}
    </p>
    <${CostView} cost=${plan.cost} error=${plan.cost_error} title="What it costs"/>
    ${rows.length === 0 ? html`<p class="muted">Nothing to do: everything is as it should be.</p>` : html`
    <table class="table plan-rows"><thead><tr><th scope="col">Action</th><th scope="col">Type</th><th scope="col">Name</th><th scope="col">Details</th></tr></thead>
    <tbody>${rows.map((r) => html`<tr class=${"plan-row plan-" + r.action} data-action=${r.action}>
      <td><span class=${"plan-action plan-" + r.action}><span aria-hidden="true">${SIGN[r.action] || "·"}</span> ${r.action}</span></td>
      <td><code>${r.type}</code></td><td>${r.name}</td>
      <td class="plan-fields">${r.why ? html`<span class="plan-why">${r.why}</span>` : ""}${r.why && (r.changes || r.fields) ? " " : ""}${fieldsText(r.changes && Object.keys(r.changes).length ? r.changes : r.fields)}</td></tr>`)}</tbody></table>`}
  </section>`;
}
