// Operations: the history of every operation, whoever started it (UI,
// REST, an agent over MCP, the command line), filtered by status and tool
// in the URL (#/operations?status=running&tool=cluster_create), live.
import { html, useEffect, useState } from "/vendor/preact-htm.js";
import { listOperations } from "/lib/api.js";
import * as ws from "/lib/ws.js";
import { href, setQuery } from "/lib/router.js";
import { useSession } from "/lib/session.js";
import { Empty, ErrorBox, Loading, Pill, Time, duration } from "/lib/ui.js";
import { elapsed } from "/lib/op.js";
import { useSort } from "/lib/table.js";

const STATUSES = ["running", "succeeded", "failed", "cancelled"];

function Operations({ query }) {
  const { tools } = useSession();
  const [ops, setOps] = useState(null);
  const [error, setError] = useState(null);
  const status = query.status || "";
  const tool = query.tool || "";
  useEffect(() => {
    let live = true;
    let timer = null;
    const load = () => listOperations({ status, tool, limit: query.limit || 200 }).then(
      (r) => { if (live) { setOps(r.operations || []); setError(null); } }, (e) => live && setError(e));
    load();
    const soon = () => { clearTimeout(timer); timer = setTimeout(load, 250); };
    const off = ws.on("operations", (ev) => { if (!tool || ev.tool === tool) soon(); });
    const offS = ws.on("status", (s) => { if (s === "open") soon(); });
    const offP = ws.whileDown(load, 5000);
    return () => { live = false; clearTimeout(timer); off(); offS(); offP(); };
  }, [status, tool]);
  const sort = useSort(ops || [], { key: "created_at", dir: "desc" }, (o, k) => (k === "duration" ? elapsed(o) : o[k]));
  const names = [...new Set((tools || []).map((t) => t.name).concat(tool ? [tool] : []))].sort();
  return html`<h1>Operations</h1>
    <form class="filters" role="search" onSubmit=${(e) => e.preventDefault()}>
      <label for="filter-status">Status</label>
      <select id="filter-status" onChange=${(e) => setQuery({ status: e.target.value })}>
        <option value="" selected=${!status}>any</option>
        ${STATUSES.map((s) => html`<option value=${s} selected=${s === status}>${s}</option>`)}
      </select>
      <label for="filter-tool">Tool</label>
      <select id="filter-tool" onChange=${(e) => setQuery({ tool: e.target.value })}>
        <option value="" selected=${!tool}>any</option>
        ${names.map((n) => html`<option value=${n} selected=${n === tool}>${n}</option>`)}
      </select>
    </form>
    <${ErrorBox} error=${error}/>
    ${ops === null ? !error && html`<${Loading} what="Loading operations"/>`
      : ops.length === 0 ? html`<${Empty} title=${status || tool ? "No operation matches these filters." : "No operations yet."}>
          ${status || tool ? html`<a href=${href("/operations")}>Show every operation</a>` : html`Start one from <a href=${href("/clusters")}>Clusters</a> or <a href=${href("/tools")}>Tools</a>.`}</${Empty}>`
      : html`<div class="table-wrap"><table class="table ops stack">
        <thead><tr>${sort.th("tool", "Tool")}${sort.th("status", "Status")}${sort.th("phase", "Phase")}${sort.th("caller", "Caller")}
          ${sort.th("frontend", "Front end")}${sort.th("created_at", "Started")}${sort.th("duration", "Duration")}</tr></thead>
        <tbody>${sort.rows.map((o) => html`<tr data-op=${o.operation_id}>
          <td><div><a href=${href("/operations/" + o.operation_id)}>${o.tool}</a><div class="muted small"><code>${o.target || o.operation_id}</code></div></div></td>
          <td data-label="Status"><${Pill} status=${o.status}/></td><td class="phase" data-label="Phase">${o.phase}</td>
          <td data-label="Caller">${o.caller}</td><td data-label="Front end">${o.frontend}</td>
          <td data-label="Started"><${Time} t=${o.created_at}/></td><td data-label="Duration">${duration(elapsed(o))}</td></tr>`)}</tbody>
      </table></div>`}`;
}

export default { path: "/operations", title: "Operations", nav: "Operations", view: Operations };
