// A diagnostic's answer drawn (the one shape of
// lua/workflows/diagnose/_findings.lua: {healthy, summary, counts,
// findings[{severity, code, subject, summary, evidence[{source, quote, at}],
// explanation, next[{order, action, tool, args, call, why}]}], checked}):
// the findings worst first with their severity in colour and in words, the
// evidence quoted as read, the explanation, and each suggested next step as
// a button that opens the step's tool form prefilled with its arguments
// (<Step>). The diagnostic never ran it: the form runs it only when the
// person asks, after a confirmation for a mutating tool (naming the call)
// and the name typed in for a destructive one, as Delete asks.
import { html, useEffect, useRef, useState } from "/vendor/preact-htm.js";
import { callTool } from "./api.js";
import { SchemaForm } from "./form.js";
import { standard } from "./choices.js";
import { Follow, confirmWord, useToolDef } from "./cluster-ui.js";
import { href } from "./router.js";
import { Confirm, ErrorBox, Json, Time } from "./ui.js";

export const SEVERITY = {
  critical: { tone: "bad", icon: "✕", label: "Critical" },
  warning: { tone: "warn", icon: "■", label: "Warning" },
  info: { tone: "run", icon: "●", label: "Info" },
};
const RANK = { critical: 0, warning: 1, info: 2 };
const ACTION = { inspect: 0, fix: 1, reboot: 2, replace: 3 };

const isHole = (v) => typeof v === "string" && /^<[^<>]+>$/.test(v);

// fillable(args) -> {values, holes}: the step's arguments without its
// placeholders ("<instance id>"), which the person fills in, and their names
export function fillable(args = {}) {
  const values = {}, holes = [];
  for (const [k, v] of Object.entries(args)) {
    if (isHole(v)) { holes.push(`${k} (${v.slice(1, -1)})`); continue; }
    if (Array.isArray(v) && v.some(isHole)) {
      holes.push(`${k} (${v.filter(isHole).map((x) => x.slice(1, -1)).join(", ")})`);
      const rest = v.filter((x) => !isHole(x));
      if (rest.length) values[k] = rest;
      continue;
    }
    values[k] = v;
  }
  return { values, holes };
}

// hidden(def, args, all) -> the parameters the step's form leaves out: plan,
// and unless all, the optional ones the step does not set
function hidden(def, args, all) {
  const props = (def.input_schema && def.input_schema.properties) || {};
  const req = new Set(def.input_schema.required || []);
  return Object.keys(props).filter((k) => k === "plan" ? def.staged : !all && !req.has(k) && !(k in (args || {})));
}

const KIND_WORD = { read: "only reads", mutating: "changes the cluster", destructive: "removes things" };

// <Step step/>: the suggested call's tool form, prefilled; Run asks first unless the tool only reads
export function Step({ step, onClose }) {
  const { def, error: defErr } = useToolDef(step.tool);
  const [errors, setErrors] = useState(null);
  const [busy, setBusy] = useState(false);
  const [ask, setAsk] = useState(null); // the parameters waiting for confirmation
  const [out, setOut] = useState(null); // {value} | {op}
  const [all, setAll] = useState(false); // every parameter, not only the step's and the required ones
  const box = useRef(null);
  const { values, holes } = fillable(step.args);
  useEffect(() => { box.current && box.current.scrollIntoView({ block: "nearest" }); }, []);
  const run = async (p) => {
    setBusy(true); setErrors(null); setAsk(null);
    try {
      const r = await callTool(step.tool, p);
      setOut(r && r.operation_id && def.kind !== "read" ? { op: r.operation_id } : { value: r });
    } catch (e) { setErrors(e); } finally { setBusy(false); }
  };
  const submit = (p) => (def.kind === "read" ? run(p) : setAsk(p));
  return html`<div class="step-form" id="step-form" ref=${box} data-tool=${step.tool} role="region" aria-label=${"run " + step.tool}>
    <div class="csec-head"><h4><code>${step.tool}</code>${def && html` <span class=${"kind kind-" + def.kind}>${def.kind}</span>`}</h4>
      <button type="button" class="btn btn-small" onClick=${onClose}>Close</button></div>
    <p class="small">Suggested, not run: review the call${def ? html` (it ${KIND_WORD[def.kind] || def.kind})` : ""}, then run it. <a href=${href("/tools/" + step.tool)}>Its tool page</a></p>
    ${holes.length > 0 && html`<p class="notice small" id="step-holes">Fill in: ${holes.join("; ")}.</p>`}
    <${ErrorBox} error=${defErr}/>
    ${def && !out && html`<${SchemaForm} schema=${def.input_schema} id="step" values=${values} errors=${errors} busy=${busy}
      hide=${hidden(def, step.args, all)} choices=${standard(def.input_schema)} actions=${[{ label: "Run", kind: def.kind }]} onSubmit=${submit}/>
      <p><button type="button" class="linkish small" id="step-all" aria-expanded=${all ? "true" : "false"} onClick=${() => setAll(!all)}>${all ? "Only the step's parameters" : "Every parameter of the tool"}</button></p>`}
    ${out && out.op && html`<${Follow} id=${out.op}/>`}
    ${out && out.value !== undefined && html`<h5>Result</h5><${Json} value=${out.value}/>`}
    ${def && html`<${Confirm} open=${!!ask} kind=${def.kind === "destructive" ? "destructive" : "mutating"} title=${`Run ${step.tool}?`}
      action=${"Run " + step.tool} typeToConfirm=${ask && def.kind === "destructive" ? confirmWord(def, ask) : undefined}
      itemsLabel="It runs with:" items=${ask ? Object.entries(ask).map(([k, v]) => `${k} = ${JSON.stringify(v)}`) : []}
      lost=${`${def.summary}.${def.kind === "destructive" ? " This cannot be undone." : ""}${step.why ? ` Suggested because: ${step.why}.` : ""}`}
      onConfirm=${() => run(ask)} onClose=${() => setAsk(null)}/>`}
  </div>`;
}

function Finding({ f, i, open, setOpen }) {
  const sev = SEVERITY[f.severity] || SEVERITY.info;
  const steps = [...(f.next || [])].sort((a, b) => (a.order ?? ACTION[a.action] ?? 9) - (b.order ?? ACTION[b.action] ?? 9));
  return html`<li class=${"finding finding-" + sev.tone} data-code=${f.code} data-severity=${f.severity}>
    <div class="finding-head"><span class=${"pill pill-" + sev.tone}><span aria-hidden="true">${sev.icon}</span> ${sev.label}</span>
      <code class="finding-code">${f.code}</code> <span class="finding-subject">${f.subject}</span></div>
    <p class="finding-summary">${f.summary}</p>
    ${(f.evidence || []).length > 0 && html`<div class="evidence"><h4>Evidence</h4><ul>${f.evidence.map((e) => html`<li>
      <span class="ev-source">${e.source}</span>${e.at && html` <span class="muted small">${typeof e.at === "number" ? html`<${Time} t=${e.at}/>` : e.at}</span>`}
      <pre class="quote" tabindex="0">${e.quote}</pre></li>`)}</ul></div>`}
    ${f.explanation && html`<p class="explanation">${f.explanation}</p>`}
    ${steps.length > 0 && html`<div class="next"><h4>Suggested next steps</h4><ol>${steps.map((s, j) => {
      const k = `${i}-${j}`;
      return html`<li data-action=${s.action} data-tool=${s.tool}><span class="mark">${s.action}</span>
        <button type="button" class="btn btn-small step-open" aria-expanded=${open === k ? "true" : "false"} onClick=${() => setOpen(open === k ? null : k)}>
          Review <code>${s.tool}</code>…</button> ${s.why && html`<span class="small">${s.why}</span>`}
        <div><code class="call small">${s.call}</code></div>
        ${open === k && html`<${Step} key=${k} step=${s} onClose=${() => setOpen(null)}/>`}</li>`;
    })}</ol></div>`}
  </li>`;
}

// <Findings result/>
export function Findings({ result }) {
  const [open, setOpen] = useState(null);
  const list = [...(result.findings || [])].sort((a, b) => (RANK[a.severity] ?? 3) - (RANK[b.severity] ?? 3));
  const c = result.counts || {};
  return html`<section class="findings-box" id="findings" data-healthy=${result.healthy ? "true" : "false"} aria-live="polite">
    <div class=${"verdict verdict-" + (result.healthy ? "ok" : c.critical ? "bad" : "warn")} id="verdict">
      <strong><span aria-hidden="true">${result.healthy ? "✓" : c.critical ? "✕" : "■"}</span> ${result.healthy ? "Healthy" : "Problems found"}</strong>
      <span>${result.summary}</span>
      <span class="muted small">${c.critical || 0} critical, ${c.warning || 0} warning, ${c.info || 0} info</span></div>
    ${list.length > 0 && html`<ol class="findings">${list.map((f, i) => html`<${Finding} f=${f} i=${i} open=${open} setOpen=${setOpen}/>`)}</ol>`}
    ${(result.checked || []).length > 0 && html`<details class="checked"><summary>What it checked (${result.checked.length})</summary>
      <ul>${result.checked.map((x) => html`<li>${x.what}${x.detail !== undefined && html`: <span class="muted">${typeof x.detail === "string" ? x.detail : JSON.stringify(x.detail)}</span>`}</li>`)}</ul></details>`}
  </section>`;
}
