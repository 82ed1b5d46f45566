// Clusters: the region's EKS clusters (cluster_list) with the active one, a
// switch (cluster_switch), the creations still running (cluster_create
// operations), an import form (cluster_import's schema) and the way to the
// create wizard (#/create), and what teardowns left behind (cluster_list's
// leftovers: a tag whose EKS cluster is gone but whose VPC, groups, file
// systems or buckets are not), each with the command that removes it.
import { html, useEffect, useState } from "/vendor/preact-htm.js";
import { callTool, listOperations } from "/lib/api.js";
import * as ws from "/lib/ws.js";
import { SchemaForm } from "/lib/form.js";
import { dropDraft } from "/lib/draft.js";
import { href, navigate } from "/lib/router.js";
import { useSession } from "/lib/session.js";
import { Act, Empty, ErrorBox, Loading, Pill, Time } from "/lib/ui.js";
import { useToolDef } from "/lib/cluster-ui.js";
import { DeleteCluster } from "/lib/cluster-delete.js";

function Creations() {
  const [ops, setOps] = useState([]);
  useEffect(() => {
    const load = () => listOperations({ tool: "cluster_create", status: "running", limit: 20 }).then((r) => setOps(r.operations || []), () => {});
    load();
    const off = ws.on("operations", (ev) => { if (ev.tool === "cluster_create") load(); });
    return off;
  }, []);
  if (!ops.length) return null;
  return html`<section class="creations" aria-label="creations running"><h2>Being created</h2>
    <ul class="plain">${ops.map((o) => html`<li data-op=${o.operation_id}><a href=${href("/create", { op: o.operation_id })}>
      <code>${(o.target || "").split("/").pop() || o.operation_id}</code></a> <${Pill} status=${o.status}/> <span class="muted">${o.phase} · started <${Time} t=${o.created_at}/></span></li>`)}</ul></section>`;
}

// <Leftovers list/>: each tag's resources and the complete command that
// removes them (a page that said "No clusters yet" while they existed hid them)
function Leftovers({ list }) {
  if (!list || list.length === 0) return null;
  return html`<section class="leftovers panel" id="leftovers" aria-label="left behind by a teardown"><h2>Left behind by a teardown</h2>
    ${list.map((l) => html`<div class="leftover" data-leftover=${l.cluster_tag}>
      <h3><code>${l.eks_name}</code> <${Pill} status="Left behind" title="its EKS cluster is gone; these resources are not"/>
        <span class="muted small">tag <code>${l.cluster_tag}</code></span></h3>
      <ul class="plain small">${l.resources.map((x) => html`<li><span class="muted">${x.type}</span> <code>${x.name}</code>${x.name !== x.id ? html` <span class="muted">(${x.id})</span>` : ""}</li>`)}</ul>
      <p class="small">${l.note}</p>
      <p>Remove them: <code class="wrap" data-remove>${l.remove}</code></p>
      <p><${DeleteCluster} tag=${l.cluster_tag} force=${l.data}/></p>
    </div>`)}</section>`;
}

function Import({ onDone }) {
  const { def, error } = useToolDef("cluster_import");
  const [errors, setErrors] = useState(null);
  const [busy, setBusy] = useState(false);
  const [done, setDone] = useState(null);
  if (error) return html`<${ErrorBox} error=${error}/>`;
  if (!def) return html`<${Loading} what="Loading the import form"/>`;
  const submit = async (p) => {
    setBusy(true); setErrors(null); setDone(null);
    try { const r = await callTool("cluster_import", p); dropDraft("clusters:cluster_import"); setDone(r); onDone(); } catch (e) { setErrors(e); } finally { setBusy(false); }
  };
  return html`<div class="import">
    <p class="muted">${def.summary}.</p>
    <${SchemaForm} schema=${def.input_schema} id="import-form" errors=${errors} busy=${busy}
      actions=${[{ label: "Import", kind: def.kind }]} onSubmit=${submit} draft="clusters:cluster_import"/>
    ${done && html`<p class="notice" role="status">Imported <a href=${href("/cluster/" + done.cluster)}><code>${done.cluster}</code></a>${done.active ? " and made active" : ""}.
      ${(done.notes || []).map((n) => html`<br/><span class="muted">${typeof n === "string" ? n : JSON.stringify(n)}</span>`)}</p>`}
  </div>`;
}

function Clusters({ query }) {
  const { clusters, refreshClusters } = useSession();
  const [err, setErr] = useState(null);
  // read again on each visit: a list from before a teardown finished shows
  // what it was still deleting as left behind
  useEffect(() => { refreshClusters(); }, []);
  const list = (clusters && clusters.clusters) || [];
  const sw = async (name) => {
    try { await callTool("cluster_switch", { cluster: name }); setErr(null); refreshClusters(); } catch (e) { setErr(e); }
  };
  const importing = query.import === "1";
  return html`<h1>Clusters</h1>
    <p class="actions"><a class="btn btn-primary" id="create-cluster" href=${href("/create")}>Create a cluster</a>
      <button type="button" class="btn" id="import-toggle" aria-expanded=${importing ? "true" : "false"} aria-controls="import-panel"
        onClick=${() => navigate("/clusters", importing ? {} : { import: "1" }, { replace: true })}>Import an EKS cluster</button></p>
    ${importing && html`<section id="import-panel" class="panel" aria-label="import an EKS cluster"><h2>Import an EKS cluster</h2>
      <${Import} onDone=${refreshClusters}/></section>`}
    <${Creations}/>
    <${ErrorBox} error=${err}/>
    ${clusters && html`<${Leftovers} list=${clusters.leftovers}/>`}
    ${!clusters ? html`<${Loading} what="Loading clusters"/>`
      : list.length === 0 ? html`<${Empty} title=${(clusters.leftovers || []).length ? "No EKS clusters." : "No clusters yet."}>
          <a href=${href("/create")}>Create one</a> or <a href=${href("/clusters", { import: "1" })}>import an existing EKS cluster</a>.</${Empty}>`
      : html`<div class="table-wrap cwrap"><table class="table clusters stack">
        <caption class="sr-only">EKS clusters in ${clusters.region}</caption>
        <thead><tr><th scope="col">Cluster</th><th scope="col">EKS</th><th scope="col">HyperPod</th><th scope="col">Version</th><th scope="col">Managed</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
        <tbody>${list.map((c) => html`<tr data-cluster=${c.name} class=${c.active ? "row-active" : ""}>
          <td><a href=${href("/cluster/" + c.name)}>${c.name}</a> ${c.active && html`<span class="mark mark-active">active</span>`}
            ${c.cluster_tag && html`<div class="muted small">tag <code>${c.cluster_tag}</code></div>`}</td>
          <td data-label="EKS"><${Pill} status=${c.status}/></td><td data-label="HyperPod">${c.hyperpod ? html`<span class="nowrap">${c.hyperpod.name}</span> <${Pill} status=${c.hyperpod.status}/>` : html`<span class="muted">none</span>`}</td>
          <td data-label="Version">${c.version}</td><td data-label="Managed">${c.managed ? "by hypd" : html`<span class="muted">no</span>`}</td>
          <td>${c.active ? html`<span class="muted small">the default for every tool</span>`
            : html`<${Act} kind="mutating" quiet=${true} class="btn-small" data-switch=${c.name} onClick=${() => sw(c.name)}>Make active</${Act}>`}</td></tr>`)}</tbody>
      </table></div>`}`;
}

export default { path: "/clusters", title: "Clusters", nav: "Clusters", view: Clusters };
