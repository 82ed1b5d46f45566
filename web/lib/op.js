// Following an operation: useOperation(id) keeps its view (GET
// /api/v1/operations/{id}: steps with timings, phase, children, result or
// error) and its event log (GET .../events) current. Live over /ws (the
// operation's events and its children's); while /ws is down, a long poll of
// GET .../events?after=SEQ&wait_seconds=25 instead. Everything is read from
// the server, so a reloaded page (the id is in the URL) shows the same
// progress. <OperationView id/> draws it like a build log, with cancel.
import { html, useEffect, useRef, useState } from "/vendor/preact-htm.js";
import * as ws from "./ws.js";
import { cancelOperation, getOperation, operationEvents } from "./api.js";
import { href } from "./router.js";
import { Act, Confirm, ErrorBox, Json, Loading, Pill, Time, duration } from "./ui.js";
import { CostView } from "./cost.js";

const running = (v) => v && v.status === "running";

export function useOperation(id) {
  const [st, setSt] = useState({ view: null, events: [], error: null, note: null });
  const ref = useRef({ seq: 0, busy: false, again: false, alive: true, view: null });
  useEffect(() => {
    const r = { seq: 0, busy: false, again: false, alive: true, view: null, events: [] };
    ref.current = r;
    setSt({ view: null, events: [], error: null, note: null });
    async function refresh() {
      if (r.busy) { r.again = true; return; }
      r.busy = true;
      try {
        const [view, evs] = await Promise.all([getOperation(id), operationEvents(id, { after: r.seq, limit: 500 })]);
        if (!r.alive) return;
        const fresh = (evs.events || []).filter((e) => e.kind !== "audit");
        for (const e of evs.events || []) r.seq = Math.max(r.seq, e.seq || 0);
        r.events = r.events.concat(fresh);
        r.view = view;
        const note = [...r.events].reverse().find((e) => e.kind === "operation.progress");
        setSt({ view, events: r.events, error: null, note: note ? note.message : null });
      } catch (e) {
        if (r.alive) setSt((s) => ({ ...s, error: e }));
      } finally {
        r.busy = false;
        if (r.again && r.alive) { r.again = false; refresh(); }
      }
    }
    let timer = null;
    const soon = () => { clearTimeout(timer); timer = setTimeout(refresh, 100); };
    const related = (ev) => ev.operation_id === id || (r.view && (r.view.children || []).some((c) => c.operation_id === ev.operation_id));
    const offOps = ws.on("operations", (ev) => { if (related(ev)) soon(); });
    const offStatus = ws.on("status", (s) => { if (s === "open") soon(); else if (s === "closed") poll(); });
    // the fallback while /ws is not open: a long poll of the events
    let polling = false;
    async function poll() {
      if (polling) return;
      polling = true;
      while (r.alive && ws.status !== "open" && (!r.view || running(r.view))) {
        try {
          const evs = await operationEvents(id, { after: r.seq, wait_seconds: 25, limit: 500 });
          if (r.alive && (evs.events || []).length) await refresh();
        } catch { await new Promise((f) => setTimeout(f, 2000)); }
      }
      polling = false;
    }
    refresh().then(() => { if (ws.status !== "open") poll(); });
    return () => { r.alive = false; clearTimeout(timer); offOps(); offStatus(); };
  }, [id]);
  return st;
}

// elapsed(view) -> seconds so far (a running operation counts to now)
export function elapsed(v, now = Date.now() / 1000) {
  if (!v) return 0;
  if (v.seconds !== undefined && !running(v)) return v.seconds;
  return Math.max(0, (v.finished_at || Math.max(now, v.updated_at || 0)) - v.created_at);
}

function Steps({ view }) {
  const steps = view.steps || [];
  if (!steps.length) return html`<p class="muted">This operation has no recorded steps.</p>`;
  const total = Math.max(1, ...steps.map((s) => s.seconds || 0));
  return html`<ol class="steps" aria-label="steps">
    ${steps.map((s) => html`<li class=${"step step-" + (s.status || "pending")} data-step=${s.name}>
      <span class="step-name">${s.name}</span>
      <${Pill} status=${s.status === "running" ? "running" : s.status || "pending"}/>
      <span class="step-time">${s.seconds !== undefined ? duration(s.seconds)
        : s.status === "running" && s.started_at ? duration(Math.max(0, Math.max(Date.now() / 1000, view.updated_at || 0) - s.started_at)) + " so far" : ""}</span>
      <span class="step-bar" aria-hidden="true"><span class="step-fill" ref=${(el) => { if (el) el.style.width = Math.round(100 * (s.seconds || 0) / total) + "%"; }}></span></span>
      ${s.error && html`<span class="step-error">${s.error}</span>`}
    </li>`)}
  </ol>`;
}

function Log({ events, start }) {
  if (!events.length) return null;
  return html`<details class="oplog" open=${events.length < 40}>
    <summary>Log (${events.length} events)</summary>
    <ol class="log" tabindex="0" aria-label="Events">${events.map((e) => html`<li><span class="log-t">+${duration((e.at || start) - start)}</span>${" "}<span class="log-k">${e.kind.replace(/^operation\./, "")}</span> ${e.message || e.phase || ""}</li>`)}</ol>
  </details>`;
}

export function OperationView({ id }) {
  const { view, events, error, note } = useOperation(id);
  const [asking, setAsking] = useState(false);
  const [cancelErr, setCancelErr] = useState(null);
  const [, tick] = useState(0);
  useEffect(() => {
    if (!running(view)) return;
    const i = setInterval(() => tick((x) => x + 1), 1000);
    return () => clearInterval(i);
  }, [view && view.status]);
  if (error && !view) return html`<${ErrorBox} error=${error}/>`;
  if (!view) return html`<${Loading} what="Loading the operation"/>`;
  const cancel = async () => {
    setAsking(false);
    try { await cancelOperation(id); setCancelErr(null); } catch (e) { setCancelErr(e); }
  };
  return html`<article class="operation" data-status=${view.status} aria-busy=${running(view) ? "true" : "false"}>
    <header class="op-head">
      <h1><span class="op-tool">${view.tool}</span> <${Pill} status=${view.status}/></h1>
      <dl class="facts">
        <div><dt>Operation</dt><dd><code>${view.operation_id}</code></dd></div>
        ${view.target && html`<div><dt>Target</dt><dd><code>${view.target}</code></dd></div>`}
        <div><dt>Started by</dt><dd>${view.caller || "?"} <span class="muted">via ${view.frontend || "?"}</span></dd></div>
        <div><dt>Started</dt><dd><${Time} t=${view.created_at}/></dd></div>
        <div><dt>Duration</dt><dd class="op-duration">${duration(elapsed(view))}</dd></div>
        ${view.parent && html`<div><dt>Part of</dt><dd><a href=${href("/operations/" + view.parent)}>${view.parent}</a></dd></div>`}
      </dl>
      ${running(view) && html`<${Act} kind="mutating" id="op-cancel" class="btn-danger" onClick=${() => setAsking(true)}>Cancel operation</${Act}>`}
    </header>
    <section class="op-now" aria-live="polite">
      <p><strong>Phase:</strong> <span class="op-phase">${view.phase}</span></p>
      ${note && running(view) && html`<p class="op-note"><strong>Note:</strong> ${note}</p>`}
    </section>
    <${ErrorBox} error=${cancelErr}/>
    <section><h2>Steps</h2><${Steps} view=${view}/></section>
    ${(view.children || []).length > 0 && html`<section><h2>Child operations</h2>
      <div class="table-wrap"><table class="table children stack"><thead><tr><th scope="col">Tool</th><th scope="col">Status</th><th scope="col">Phase</th><th scope="col">Started</th></tr></thead>
      <tbody>${view.children.map((c) => html`<tr data-op=${c.operation_id}><td><a href=${href("/operations/" + c.operation_id)}>${c.tool}</a></td>
        <td data-label="Status"><${Pill} status=${c.status}/></td><td data-label="Phase">${c.phase}</td><td data-label="Started"><${Time} t=${c.created_at}/></td></tr>`)}</tbody></table></div></section>`}
    ${view.status === "failed" || view.status === "cancelled" ? html`<section><h2>Error</h2><${ErrorBox} error=${view.error || { message: view.phase }}/></section>` : null}
    ${view.result && (view.result.kept_cost || view.result.kept_cost_error) && html`<${CostView} cost=${view.result.kept_cost}
      error=${view.result.kept_cost_error} title=${`What it kept (${(view.result.kept || []).length}) costs while it stays`}/>`}
    ${view.status === "succeeded" && html`<section><h2>Result</h2><${Json} value=${view.result}/></section>`}
    <${Log} events=${events} start=${view.created_at}/>
    <${Confirm} open=${asking} title=${`Cancel ${view.tool}?`} kind="mutating" action="Cancel operation"
      items=${[]} lost=${`The operation ${view.operation_id} stops at its next wait (now: ${view.phase}). What it made so far stays; running it again finds and reuses it.`}
      onConfirm=${cancel} onClose=${() => setAsking(false)}/>
  </article>`;
}
