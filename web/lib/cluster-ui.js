// What the cluster pages share (Clusters, the create wizard, Cluster's
// sections): reading a tool with loading, error and reload; a tool's
// definition (its JSON Schema, cached); following a mutation's operation
// live (its id in the URL's query, so a reload finds it again); a section
// frame with its loading and empty states; a switch.
import { html, useEffect, useState } from "/vendor/preact-htm.js";
import { callTool, getOperation, getTool } from "./api.js";
import * as ws from "./ws.js";
import { OperationView } from "./op.js";
import { setQuery } from "./router.js";
import { Empty, ErrorBox, Loading } from "./ui.js";

// moving(status) -> true for a state a thing leaves by itself (Creating, Pending, Running...)
const MOVING = /^(pending|creating|updating|deleting|starting|provisioning|scaling|inprogress|systemupdating|rebooting|replacing|terminating|shuttingdown|initializing|containercreating|podinitializing|restarting|running|created|partlyready|notjoined|notready)$/;
export const moving = (status) => MOVING.test(String(status ?? "").toLowerCase().replace(/[^a-z]/g, ""));
// onCluster(ev, cluster) -> true when an operation event's target names the cluster ("hyperpod/<region>/<cluster>/...")
export const onCluster = (ev, cluster) => !!cluster && String(ev.target || "").split("/").slice(2).includes(cluster);

// useRead(tool, params, {cluster, moving}) -> {data, error, loading, reload}:
// a read tool's answer, read again when params change or reload() is
// called, and by itself from /ws: when an operation ends, a resource
// changes, the connection comes back (events may have been missed), and
// (given cluster) when an operation on that cluster changes phase. Those
// re-reads are at most one a second. opts.moving(data) -> true when what is
// shown changes by itself with no event (a job's pods, a deployment's
// replicas): read again every 5 s while it says so.
export function useRead(tool, params, { cluster, moving } = {}) {
  const [st, setSt] = useState({ data: null, error: null, loading: true });
  const [n, setN] = useState(0);
  const key = JSON.stringify(params);
  useEffect(() => {
    let live = true;
    setSt((s) => ({ ...s, loading: true }));
    callTool(tool, params).then((data) => live && setSt({ data, error: null, loading: false }),
      (error) => live && setSt((s) => ({ data: s.data, error, loading: false })));
    return () => { live = false; };
  }, [tool, key, n]);
  useEffect(() => {
    let timer = null;
    let last = 0;
    const soon = () => {
      if (timer) return;
      timer = setTimeout(() => { timer = null; last = Date.now(); setN((x) => x + 1); }, Math.max(400, last + 1000 - Date.now()));
    };
    const offOps = ws.on("operations", (ev) => {
      if ((ev.status && ev.status !== "running") || (ev.kind === "operation.phase" && onCluster(ev, cluster))) soon();
    });
    const offState = ws.on("state", soon);
    let down = false; // a reconnect (closed, then open again), not the first connection
    const offStatus = ws.on("status", (s) => { if (s === "closed") down = true; else if (s === "open" && down) { down = false; soon(); } });
    return () => { clearTimeout(timer); offOps(); offState(); offStatus(); };
  }, [cluster]);
  const still = !!(moving && st.data && !st.loading && moving(st.data));
  useEffect(() => {
    if (!still) return undefined;
    const i = setTimeout(() => setN((x) => x + 1), 5000);
    return () => clearTimeout(i);
  }, [still, st.data]);
  return { ...st, reload: () => setN((x) => x + 1) };
}

// useToolDef(name) -> the tool's definition (GET /api/v1/tools/{name}), or null while it loads
const defs = new Map();
export function useToolDef(name) {
  const [def, setDef] = useState(defs.get(name) || null);
  const [error, setError] = useState(null);
  useEffect(() => {
    if (defs.has(name)) return setDef(defs.get(name));
    getTool(name).then((d) => { defs.set(name, d); setDef(d); }, setError);
  }, [name]);
  return { def, error };
}

// the word a person types to confirm a destructive call: the value of its
// first required string parameter (the cluster tag, the storage name...), or the tool's name
export function confirmWord(def, p) {
  const props = (def.input_schema && def.input_schema.properties) || {};
  const k = (def.input_schema.required || []).find((n) => props[n] && props[n].type === "string" && typeof p[n] === "string" && p[n]);
  return k ? p[k] : def.name;
}

// <Section title id loading empty="..." error actions>children</Section>
export function Section({ title, id, loading, error, empty, emptyHint, actions, children }) {
  return html`<section class="csec" id=${id} aria-labelledby=${id + "-h"} aria-busy=${loading ? "true" : "false"}>
    <div class="csec-head"><h2 id=${id + "-h"}>${title}</h2><div class="csec-actions">${actions}</div></div>
    <${ErrorBox} error=${error}/>
    ${loading ? html`<${Loading} what=${"Loading " + title.toLowerCase()}/>` : empty ? html`<${Empty} title=${empty}>${emptyHint}</${Empty}>` : children}
  </section>`;
}

// <Follow id onDone onView/>: an operation followed live (OperationView); onView(view)
// at each change it sees, onDone(view)
// once it has ended (the section reads its state again then). The end is
// found by a long poll of the operation (GET .../operations/{id}?wait_seconds),
// independent of the view's own updates.
export function Follow({ id, onDone, onView, onClose }) {
  const [status, setStatus] = useState("loading");
  useEffect(() => {
    let live = true;
    (async () => {
      while (live) {
        try {
          const v = await getOperation(id, { wait_seconds: 20 });
          if (!live) return;
          setStatus(v.status);
          onView && onView(v);
          if (v.status !== "running") { onDone && onDone(v); return; }
        } catch (e) {
          if (!live) return;
          setStatus("unknown");
          await new Promise((f) => setTimeout(f, 2000));
        }
      }
    })();
    return () => { live = false; };
  }, [id]);
  return html`<div class="follow" data-op=${id} data-status=${status}>
    ${onClose && html`<button type="button" class="btn btn-small follow-close" onClick=${onClose} aria-label="Close the operation panel">Close</button>`}
    <${OperationView} id=${id}/></div>`;
}

// useMutation(key) -> {op, run, busy, error, result, close}: calls a tool; a
// staged one's operation id goes into the URL's query (opKey), a direct
// answer into result
export function useMutation(query, opKey = "op") {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const [result, setResult] = useState(null);
  const run = async (tool, params) => {
    setBusy(true); setError(null); setResult(null);
    try {
      const r = await callTool(tool, params);
      if (r && r.operation_id) setQuery({ [opKey]: r.operation_id });
      else setResult({ tool, value: r });
      return r;
    } catch (e) { setError(e); return null; } finally { setBusy(false); }
  };
  return { op: query[opKey], run, busy, error, setError, result, close: () => { setQuery({ [opKey]: "" }); setResult(null); } };
}

// <Toggle checked pending label onChange disabled/>: a switch (a checkbox with role switch)
export function Toggle({ id, checked, pending, label, onChange, disabled, title }) {
  return html`<label class=${"toggle" + (pending ? " toggle-pending" : "")} for=${id} title=${title}>
    <input type="checkbox" role="switch" id=${id} checked=${checked} disabled=${disabled || pending}
      aria-checked=${checked ? "true" : "false"} aria-busy=${pending ? "true" : "false"} onChange=${(e) => onChange(e.target.checked)}/>
    <span class="toggle-track" aria-hidden="true"><span class="toggle-knob"></span></span>
    <span class="toggle-label">${label}</span></label>`;
}

// bytes(n) -> "1.2 MB"
export function bytes(n) {
  if (n === undefined || n === null) return "";
  const u = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  while (n >= 1000 && i < u.length - 1) { n /= 1000; i++; }
  return (i ? n.toFixed(1) : n) + " " + u[i];
}

// <State state="drifted"/>: a dependency's or feature's state as a pill (word and symbol)
const STATE_TONE = { present: "ok", enabled: "ok", missing: "warn", drifted: "warn", partial: "warn", failed: "bad",
  pending: "run", enabling: "run", disabling: "run", disabled: "muted", unknown: "muted" };
const STATE_ICON = { ok: "✓", warn: "■", bad: "✕", run: "●", muted: "○" };
export function State({ state, title }) {
  const tone = STATE_TONE[state] || "muted";
  return html`<span class=${"pill pill-" + tone} data-state=${state} title=${title || state}><span aria-hidden="true">${STATE_ICON[tone]}</span> ${state}</span>`;
}
