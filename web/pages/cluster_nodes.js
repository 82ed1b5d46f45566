// Cluster › Nodes (hyperpod_list_nodes, a page at a time; the group filter
// in the URL): health, group, Kubernetes readiness; reboot
// (hyperpod_node_reboot), replace (hyperpod_node_replace: wipes local
// volumes) and delete (hyperpod_node_delete) the selected nodes after a
// confirmation that names them and says what happens: a reboot what it
// removes from service, a replace or a delete what is lost; those two,
// which lose the nodes' local data, ask for the first node's id typed.
import { html, useState } from "/vendor/preact-htm.js";
import { callTool } from "/lib/api.js";
import { setQuery } from "/lib/router.js";
import { Act, Confirm, ErrorBox, Pill, Time } from "/lib/ui.js";
import { Section, moving, useRead } from "/lib/cluster-ui.js";

const ACTIONS = {
  reboot: { tool: "hyperpod_node_reboot", kind: "mutating", label: "Reboot", itemsLabel: "This will reboot:",
    lostLabel: "This will remove from service, until each is Running and Ready again:",
    lost: "the pods running on them, which stop; a Deployment's pods and a training job's (as its restart policy allows) " +
      "start again, a bare pod does not. Their local volumes are kept." },
  replace: { tool: "hyperpod_node_replace", kind: "destructive", label: "Replace", itemsLabel: "This will replace:", typed: true,
    lost: "each instance is terminated and swapped for a new one: everything on its local volumes is WIPED (the root volume, " +
      "the instance store at /opt/dlami/nvme, the EBS volume at /opt/sagemaker) and the pods on it stop. Copy what you need " +
      "to S3 or FSx first." },
  delete: { tool: "hyperpod_node_delete", kind: "destructive", label: "Delete", itemsLabel: "This will remove:", typed: true,
    lost: "they are terminated and their group's count lowered, so they are not replaced: the pods on them stop and their " +
      "local data is gone for good." },
};

export default function Nodes({ cluster, query }) {
  const [page, setPage] = useState({ token: undefined, prev: [] });
  const group = query.group || "";
  const r = useRead("hyperpod_list_nodes", { cluster, page_size: 50, ...(group ? { instance_group: group } : {}), ...(page.token ? { page_token: page.token } : {}) },
    { cluster, moving: (d) => (d.nodes || []).some((n) => moving(n.instance_status) || (n.kubernetes && !n.kubernetes.ready)) });
  const [sel, setSel] = useState(new Set());
  const [ask, setAsk] = useState(null); // action key
  const [outcome, setOutcome] = useState(null);
  const [err, setErr] = useState(null);
  const nodes = (r.data && r.data.nodes) || [];
  const groups = [...new Set(nodes.map((n) => n.instance_group))];
  const toggle = (id) => setSel((s) => { const n = new Set(s); if (n.has(id)) n.delete(id); else n.add(id); return n; });
  const act = async (k) => {
    const a = ACTIONS[k];
    const ids = [...sel];
    setAsk(null); setErr(null); setOutcome(null);
    try { setOutcome({ k, ids, value: await callTool(a.tool, { cluster, nodes: ids }) }); setSel(new Set()); r.reload(); } catch (e) { setErr(e); }
  };
  const named = (id) => { const n = nodes.find((x) => x.instance_id === id); return n ? `${id} (${n.node_name}, group ${n.instance_group})` : id; };
  const actions = html`${Object.entries(ACTIONS).map(([k, a]) => html`<${Act} kind=${a.kind} class="btn-small" data-node-action=${k}
      disabled=${sel.size === 0} onClick=${() => setAsk(k)}>${a.label}${sel.size ? ` ${sel.size}` : ""}</${Act}> `)}
    <button type="button" class="btn btn-small" onClick=${r.reload}>Refresh</button>`;
  const noHp = r.error && /no HyperPod|NOT_FOUND/i.test(r.error.code + " " + r.error.message);
  return html`<${Section} id="nodes" title="Nodes" loading=${r.loading && !r.data} error=${noHp ? null : r.error}
      empty=${noHp ? "This cluster has no HyperPod cluster yet." : nodes.length === 0 ? (group ? `No nodes in ${group}.` : "No nodes.") : null}
      emptyHint=${group ? html`<button type="button" class="btn btn-small" onClick=${() => setQuery({ group: "" })}>Show every group</button>` : "Nodes appear once an instance group has instances."}
      actions=${actions}>
    <div class="filters"><label for="node-group">Group</label>
      <select id="node-group" onChange=${(e) => { setPage({ token: undefined, prev: [] }); setQuery({ group: e.target.value }); }}>
        <option value="" selected=${!group}>every group</option>
        ${[...new Set(groups.concat(group ? [group] : []))].map((g) => html`<option value=${g} selected=${g === group}>${g}</option>`)}
      </select>
      ${r.data && r.data.kubernetes_error && html`<span class="field-error">Kubernetes: ${r.data.kubernetes_error}</span>`}</div>
    <div class="table-wrap cwrap"><table class="table nodes stack">
      <thead><tr><th scope="col"><span class="sr-only">Select</span></th><th scope="col">Node</th><th scope="col">Group</th><th scope="col">Instance</th>
        <th scope="col">Health</th><th scope="col">Kubernetes</th><th scope="col">Launched</th></tr></thead>
      <tbody>${nodes.map((n) => html`<tr data-node=${n.instance_id} class=${sel.has(n.instance_id) ? "row-selected" : ""}>
        <td class="cell-select"><input type="checkbox" id=${"sel-" + n.instance_id} aria-label=${"select " + n.instance_id} checked=${sel.has(n.instance_id)} onChange=${() => toggle(n.instance_id)}/></td>
        <td class="cell-title"><label for=${"sel-" + n.instance_id}><code>${n.instance_id}</code></label><div class="muted small"><code>${n.node_name}</code></div></td>
        <td data-label="Group">${n.instance_group}<div class="muted small">${n.instance_type}</div></td>
        <td data-label="Instance"><${Pill} status=${n.instance_status} message=${n.status_message}/></td>
        <td data-label="Health"><${Pill} status=${n.health_status} title=${"HyperPod health: " + n.health_status}/></td>
        <td data-label="Kubernetes">${n.kubernetes ? html`<${Pill} status=${n.kubernetes.ready ? "Ready" : n.kubernetes.joined ? "NotReady" : "not joined"}/>` : html`<span class="muted">unknown</span>`}</td>
        <td class="small" data-label="Launched">${n.launch_time ? html`<${Time} t=${Date.parse(n.launch_time) / 1000}/>` : ""}</td></tr>`)}</tbody>
    </table></div>
    <p class="pager">${page.prev.length > 0 && html`<button type="button" class="btn btn-small" onClick=${() => setPage((p) => ({ token: p.prev[p.prev.length - 1], prev: p.prev.slice(0, -1) }))}>Previous page</button>`}
      ${r.data && r.data.next_page_token && html`<button type="button" class="btn btn-small" onClick=${() => setPage((p) => ({ token: r.data.next_page_token, prev: [...p.prev, p.token] }))}>Next page</button>`}</p>
  </${Section}>
  <${ErrorBox} error=${err}/>
  ${outcome && html`<div class="notice node-outcome" role="status"><strong>${ACTIONS[outcome.k].label}:</strong>
    ${(outcome.value.succeeded || []).length} of ${outcome.value.requested ?? outcome.ids.length} accepted
    ${(outcome.value.succeeded || []).map((s) => html` <code>${typeof s === "string" ? s : s.node || s.instance_id || JSON.stringify(s)}</code>`)}
    ${(outcome.value.failed || []).map((f) => html`<div class="field-error">${typeof f === "string" ? f : `${f.node || f.instance_id}: ${f.message || f.error || JSON.stringify(f)}`}</div>`)}</div>`}
  <${Confirm} open=${!!ask} kind=${ask ? ACTIONS[ask].kind : "mutating"} title=${ask ? `${ACTIONS[ask].label} ${sel.size} ${sel.size === 1 ? "node" : "nodes"}?` : ""}
    action=${ask ? ACTIONS[ask].label : ""} items=${[...sel].map(named)} itemsLabel=${ask ? ACTIONS[ask].itemsLabel : undefined}
    lost=${ask ? ACTIONS[ask].lost : ""} lostLabel=${ask ? ACTIONS[ask].lostLabel : undefined}
    typeToConfirm=${ask && ACTIONS[ask].typed && sel.size ? [...sel][0] : undefined}
    onConfirm=${() => act(ask)} onClose=${() => setAsk(null)}/>`;
}
