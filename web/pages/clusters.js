// Clusters: the list (cluster_list) with the active one and a switch
// (cluster_switch). A first version on the framework; the cluster pages
// (create wizard, import) grow it.
import { html, useState } from "/vendor/preact-htm.js";
import { callTool } from "/lib/api.js";
import { href } from "/lib/router.js";
import { useSession } from "/lib/session.js";
import { Act, Empty, ErrorBox, Loading, Pill } from "/lib/ui.js";

function Clusters() {
  const { clusters, refreshClusters } = useSession();
  const [err, setErr] = useState(null);
  const list = (clusters && clusters.clusters) || [];
  const sw = async (name) => {
    try { await callTool("cluster_switch", { cluster: name }); setErr(null); refreshClusters(); } catch (e) { setErr(e); }
  };
  return html`<h1>Clusters</h1>
    <p class="actions"><a class="btn" href=${href("/tools/cluster_create")}>Create a cluster</a>
      <a class="btn" href=${href("/tools/cluster_import")}>Import an EKS cluster</a></p>
    <${ErrorBox} error=${err}/>
    ${!clusters ? html`<${Loading} what="Loading clusters"/>`
      : list.length === 0 ? html`<${Empty} title="No clusters yet.">Create one or import an existing EKS cluster.</${Empty}>`
      : html`<div class="table-wrap"><table class="table clusters stack">
        <thead><tr><th scope="col">Cluster</th><th scope="col">EKS</th><th scope="col">HyperPod</th><th scope="col">Version</th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
        <tbody>${list.map((c) => html`<tr data-cluster=${c.name}>
          <td><a href=${href("/cluster/" + c.name)}>${c.name}</a> ${c.active && html`<span class="mark mark-active">active</span>`}</td>
          <td data-label="EKS"><${Pill} status=${c.status}/></td><td data-label="HyperPod">${c.hyperpod ? html`${c.hyperpod.name} <${Pill} status=${c.hyperpod.status}/>` : html`<span class="muted">none</span>`}</td>
          <td data-label="Version">${c.version}</td>
          <td>${!c.active && html`<${Act} kind="mutating" quiet=${true} class="btn-small" onClick=${() => sw(c.name)}>Make active</${Act}>`}</td></tr>`)}</tbody>
      </table></div>`}`;
}

export default { path: "/clusters", title: "Clusters", nav: "Clusters", view: Clusters };
