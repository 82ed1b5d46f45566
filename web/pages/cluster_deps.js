// Cluster › Dependencies (cluster_get_dependency_status): each item's
// state (present, missing, drifted, failed, pending) and a re-run
// (cluster_configure_dependencies, followed live).
import { html } from "/vendor/preact-htm.js";
import { Act, ErrorBox } from "/lib/ui.js";
import { Follow, Section, State, useMutation, useRead } from "/lib/cluster-ui.js";

export default function Deps({ cluster, query }) {
  const r = useRead("cluster_get_dependency_status", { cluster });
  const mut = useMutation(query);
  const items = (r.data && r.data.items) || [];
  const counts = (r.data && r.data.counts) || {};
  const off = items.filter((i) => i.state !== "present").length;
  return html`<${Section} id="deps" title="Dependencies" loading=${r.loading && !r.data} error=${r.error}
      empty=${r.data && items.length === 0 ? "No dependencies configured yet." : null} emptyHint="Configure them: the OIDC provider, add-ons and HyperPod's node dependencies."
      actions=${html`<${Act} kind="mutating" id="deps-rerun" class="btn-small" disabled=${mut.busy || (mut.op && true)}
        onClick=${() => mut.run("cluster_configure_dependencies", { cluster })}>${off ? `Reconcile (${off} not present)` : "Re-run"}</${Act}>`}>
    <p class="dep-counts">${Object.entries(counts).filter(([, n]) => n).map(([k, n]) => html`<span class="chip">${n} ${k}</span> `)}</p>
    <div class="table-wrap cwrap"><table class="table deps stack">
      <thead><tr><th scope="col">Item</th><th scope="col">Kind</th><th scope="col">State</th><th scope="col">Details</th></tr></thead>
      <tbody>${items.map((i) => html`<tr data-item=${i.item} data-state=${i.state}>
        <td><code>${i.item}</code></td><td data-label="Kind">${i.kind}</td>
        <td data-label="State"><${State} state=${i.state}/></td>
        <td class="small" data-label="Details">${[i.version, i.status, i.owner && "owner " + i.owner, i.message || i.reason].filter(Boolean).join(" · ")}</td></tr>`)}</tbody>
    </table></div>
  </${Section}>
  <${ErrorBox} error=${mut.error}/>
  ${mut.op && html`<${Follow} key=${mut.op} id=${mut.op} onDone=${r.reload} onClose=${mut.close}/>`}`;
}
