// What the workload pages share (Training, Models, Inference): which tools
// this server has (GET /api/v1/tools; a page says plainly when one is
// missing, never shows a made-up result), the cluster a page works on (the
// URL's ?cluster=, else the active one), a long poll of a status tool
// (its wait_seconds), and objects as readable YAML.
import { html, useEffect, useState } from "/vendor/preact-htm.js";
import { Time } from "./ui.js";
import { callTool } from "./api.js";
import { setQuery } from "./router.js";
import { useSession } from "./session.js";

// useHas() -> has(name): true when the server lists the tool, null while the list loads
export function useHas() {
  const { tools } = useSession();
  const names = new Set((tools || []).map((t) => t.name));
  return (name) => (tools ? names.has(name) : null);
}

// <Missing tools=["model_download"] what="Downloading a model"/>: what cannot be done here, and why
export function Missing({ tools, what }) {
  const one = tools.length === 1;
  return html`<div class="missing" role="note" data-missing=${tools.join(" ")}>
    <p><strong>${what} is not available on this server.</strong> ${`It needs ${one ? "the tool" : "the tools"} `}${tools.map((t, i) => html`${i ? ", " : ""}<code>${t}</code>`)}${`, which GET /api/v1/tools does not list here. Nothing is shown in ${one ? "its" : "their"} place.`}</p></div>`;
}

// needs(has, tools) -> the tools of the list this server lacks ([] once all are there)
export const lacking = (has, tools) => tools.filter((t) => has(t) === false);

// useCluster(query) -> the cluster the page works on: ?cluster=, else the active one
export function useCluster(query) {
  const { clusters } = useSession();
  return query.cluster || (clusters && clusters.active) || null;
}

// useItem(params, query) -> {has, cluster, name, namespace, id}: a workload page's
// item (#/PAGE/NAME?namespace=&cluster=) and the parameters that name it to its tools
export function useItem(params, query) {
  const has = useHas();
  const cluster = useCluster(query);
  const name = params.name;
  const namespace = query.namespace || "default";
  return { has, cluster, name, namespace, id: { name, namespace, ...(cluster ? { cluster } : {}) } };
}

// <Events events/>: the recent events of a workload and its pods (warnings marked), oldest first
export function Events({ events }) {
  return html`<section aria-labelledby="ev-h"><h2 id="ev-h">Events</h2>
    ${(events || []).length === 0 ? html`<p class="muted">No events.</p>` : html`<div class="table-wrap"><table class="table events stack">
      <thead><tr><th scope="col">Type</th><th scope="col">Reason</th><th scope="col">Object</th><th scope="col">Message</th><th scope="col">Time</th></tr></thead>
      <tbody>${events.map((e) => html`<tr class=${e.type === "Warning" ? "ev-warn" : ""}><td data-label="Type">${e.type}</td><td data-label="Reason">${e.reason}</td>
        <td data-label="Object"><code class="wrap">${e.object}</code></td><td data-label="Message">${e.message}${e.count > 1 ? html` <span class="muted small">(×${e.count})</span>` : ""}</td>
        <td data-label="Time" class="small">${e.time ? html`<${Time} t=${Date.parse(e.time) / 1000}/>` : ""}</td></tr>`)}</tbody></table></div>`}
  </section>`;
}

// <ClusterPick value/>: which cluster the page shows (into the URL; the active one by default)
export function ClusterPick({ value, id = "page-cluster" }) {
  const { clusters } = useSession();
  const list = (clusters && clusters.clusters) || [];
  return html`<span class="cluster-pick"><label for=${id}>Cluster</label>
    <select id=${id} onChange=${(e) => setQuery({ cluster: e.target.value })}>
      ${!value && html`<option value="">${clusters ? "— none —" : "…"}</option>`}
      ${list.map((c) => html`<option value=${c.name} selected=${c.name === value}>${c.name}${c.name === clusters.active ? " (active)" : ""}</option>`)}
    </select></span>`;
}

// usePoll(tool, params, {done, wait}) -> {data, error, reload}: the tool read,
// then read again with wait_seconds (the server answers when something
// changed, or after that long) until done(data); at least a second apart,
// since under a virtual clock the server's wait can pass at once
export function usePoll(tool, params, { done = () => false, wait = 20, enabled = true } = {}) {
  const [st, setSt] = useState({ data: null, error: null });
  const [n, setN] = useState(0);
  const key = JSON.stringify(params);
  useEffect(() => {
    if (!enabled || !params) return undefined;
    let live = true;
    (async () => {
      let first = true;
      let failed = false;
      while (live) {
        const t0 = Date.now();
        try {
          const data = await callTool(tool, first ? params : { ...params, wait_seconds: wait });
          if (!live) return;
          setSt({ data, error: null });
          failed = false;
          if (done(data)) return;
        } catch (error) {
          if (!live) return;
          setSt((s) => ({ data: s.data, error }));
          failed = true;
          // answers that asking again will not change: the page shows them (reload() asks again)
          if ([400, 401, 403, 404, 422].includes(error.status) || error.code === "NOT_FOUND" || error.code === "VALIDATION") return;
        }
        first = false;
        const rest = 1000 - (Date.now() - t0);
        await new Promise((f) => setTimeout(f, Math.max(rest, 0) + (failed ? 2000 : 0)));
      }
    })();
    return () => { live = false; };
  }, [tool, key, n, enabled]);
  return { ...st, reload: () => setN((x) => x + 1) };
}

// toYaml(value) -> YAML text (block style; strings quoted when YAML would misread them)
const PLAIN = /^[A-Za-z0-9_./@][A-Za-z0-9_./@:+-]*$/;
const RESERVED = /^(true|false|yes|no|on|off|null|~|-?[0-9][0-9_.eE+-]*|0x[0-9a-fA-F]+)$/i;
function scalar(v) {
  if (v === null || v === undefined) return "null";
  if (typeof v === "number" || typeof v === "boolean") return String(v);
  const s = String(v);
  return PLAIN.test(s) && !RESERVED.test(s) && !s.includes(": ") ? s : JSON.stringify(s);
}
export function toYaml(v, indent = "") {
  if (Array.isArray(v)) {
    if (!v.length) return "[]";
    return v.map((x) => {
      if (x && typeof x === "object" && Object.keys(x).length) {
        const inner = toYaml(x, indent + "  ");
        return indent + "- " + inner.slice(indent.length + 2);
      }
      return indent + "- " + (x && typeof x === "object" ? (Array.isArray(x) ? "[]" : "{}") : scalar(x));
    }).join("\n");
  }
  if (v && typeof v === "object") {
    const ks = Object.keys(v);
    if (!ks.length) return "{}";
    return ks.map((k) => {
      const x = v[k];
      const key = indent + scalar(k) + ":";
      if (x && typeof x === "object" && (Array.isArray(x) ? x.length : Object.keys(x).length)) {
        return key + "\n" + toYaml(x, Array.isArray(x) ? indent : indent + "  ");
      }
      return key + " " + (x && typeof x === "object" ? (Array.isArray(x) ? "[]" : "{}") : scalar(x));
    }).join("\n");
  }
  return indent + scalar(v);
}

// <Yaml objects/>: Kubernetes objects as one YAML stream, with a copy button
export function Yaml({ objects, id = "yaml" }) {
  const text = (objects || []).map((o) => toYaml(o)).join("\n---\n") + "\n";
  const [copied, setCopied] = useState("");
  const copy = async () => {
    try { await navigator.clipboard.writeText(text); setCopied("Copied."); } catch {
      const el = document.getElementById(id);
      const r = document.createRange();
      r.selectNodeContents(el);
      const sel = getSelection();
      sel.removeAllRanges();
      sel.addRange(r);
      setCopied("Selected: copy it with Ctrl+C.");
    }
  };
  return html`<div class="yaml-box"><div class="yaml-head"><span class="muted small">${(objects || []).length} ${(objects || []).length === 1 ? "object" : "objects"}, as <code>kubectl apply -f</code> takes them</span>
    <button type="button" class="btn btn-small" id=${id + "-copy"} onClick=${copy}>Copy YAML</button> <span class="small" role="status">${copied}</span></div>
    <pre class="yaml" id=${id} tabindex="0">${text}</pre></div>`;
}

// errorsUnder(error, prefix) -> the error with its fields' paths relative to prefix ("params.job_name" -> "job_name")
export function errorsUnder(error, prefix) {
  if (!error || !error.fields) return error;
  const p = prefix + ".";
  const fields = error.fields.filter((f) => f.field && f.field.startsWith(p))
    .map((f) => ({ ...f, field: f.field.slice(p.length), message: f.message && f.message.startsWith(f.field + ": ") ? f.message.slice(f.field.length + 2) : f.message }));
  const rest = error.fields.filter((f) => !(f.field && f.field.startsWith(p)));
  return { code: error.code, message: error.message, fields: fields.concat(rest) };
}
