// Cluster › Instance groups (hyperpod_list_instance_groups): add
// (hyperpod_add_instance_group's form), scale (hyperpod_scale_instance_group's
// form, the fixed-at-create fields read-only with the reason), delete
// (hyperpod_delete_instance_group, after a typed confirmation). Each change
// is followed live; its operation id is in the URL.
import { html, useState } from "/vendor/preact-htm.js";
import { SchemaForm } from "/lib/form.js";
import { standard } from "/lib/choices.js";
import { href, setQuery } from "/lib/router.js";
import { Act, Confirm, ErrorBox, Loading, Pill } from "/lib/ui.js";
import { Follow, Section, moving, useMutation, useRead, useToolDef } from "/lib/cluster-ui.js";
import { perHourMonth } from "/lib/cost.js";

const OP_WORD = { hyperpod_add_instance_group: "being added", hyperpod_scale_instance_group: "being scaled",
  hyperpod_delete_instance_group: "being deleted", hyperpod_update_software: "software update" };
const FIXED_REASON = "fixed when the group was created (HyperPod cannot change it); add a new group for another value";

function ToolForm({ tool, id, values, hide, existing, mut, cluster, onCancel, label }) {
  const { def, error } = useToolDef(tool);
  if (error) return html`<${ErrorBox} error=${error}/>`;
  if (!def) return html`<${Loading} what="Loading the form"/>`;
  const p = def.input_schema.properties || {};
  const choices = standard(def.input_schema);
  delete choices.cluster;
  return html`<div class="panel form-panel" data-tool=${tool}>
    <h3>${label} <span class="muted small"><code>${tool}</code></span></h3>
    <${SchemaForm} schema=${def.input_schema} id=${id} values=${values} existing=${existing} fixedReason=${FIXED_REASON}
      hide=${["cluster", "region", "plan", "operation_id"].filter((k) => p[k]).concat(hide || [])} errors=${mut.error} busy=${mut.busy} choices=${choices}
      actions=${[{ label, kind: def.kind }]} onSubmit=${async (v) => { const r = await mut.run(tool, { ...v, cluster }); if (r) onCancel(); }}/>
    <button type="button" class="btn btn-small" onClick=${onCancel}>Cancel</button>
  </div>`;
}

export default function Groups({ cluster, query, reloadStatus }) {
  // live: re-read at the phases of the cluster's operations, and every 5 s while a group is in transition
  const r = useRead("hyperpod_list_instance_groups", { cluster }, { cluster,
    moving: (d) => (d.instance_groups || []).some((g) => moving(g.status)) || moving(d.hyperpod_cluster && d.hyperpod_cluster.status) });
  const mut = useMutation(query);
  const [ask, setAsk] = useState(null);
  const form = query.form; // "add" or "scale:NAME"
  const open = (f) => { mut.setError(null); setQuery({ form: f }); };
  const groups = (r.data && r.data.instance_groups) || [];
  const scaling = form && form.startsWith("scale:") ? groups.find((g) => g.name === form.slice(6)) : null;
  const done = () => { r.reload(); reloadStatus(); };
  const running = (o) => o && o.status === "running";
  const work = r.data && r.data.operation && (running(r.data.operation.top) ? r.data.operation.top : running(r.data.operation) ? r.data.operation : null);
  const noHp = r.error && /no HyperPod|NOT_FOUND/i.test(r.error.code + " " + r.error.message);
  return html`<${Section} id="groups" title="Instance groups" loading=${r.loading && !r.data} error=${noHp ? null : r.error}
    empty=${noHp ? "This cluster has no HyperPod cluster yet." : groups.length === 0 ? "No instance groups." : null}
    emptyHint=${noHp ? html`Create one with <a href=${href("/tools/hyperpod_create")}><code>hyperpod_create</code></a>, or a whole cluster with <a href=${href("/create")}>the wizard</a>.` : "Add one: a GPU group for work, or a CPU group for system pods."}
    actions=${html`<${Act} kind="mutating" id="group-add" class="btn-small" onClick=${() => open("add")}>Add an instance group</${Act}>`}>
    ${work && html`<p class="notice small cluster-op" role="status">At work on this cluster: <a href=${href("/operations/" + work.operation_id)}><code>${work.tool}</code></a>
      ${work.phase ? html` (${work.phase})` : ""}${r.data.hyperpod_cluster && moving(r.data.hyperpod_cluster.status) ? html` · HyperPod cluster <${Pill} status=${r.data.hyperpod_cluster.status}/>` : ""}</p>`}
    <div class="table-wrap cwrap"><table class="table groups stack">
      <thead><tr><th scope="col">Group</th><th scope="col">Status</th><th scope="col">Instances</th><th scope="col">Type</th><th scope="col">Running cost</th>
        <th scope="col">Fixed at create <span class="muted small">(read-only)</span></th><th scope="col"><span class="sr-only">Actions</span></th></tr></thead>
      <tbody>${groups.map((g) => html`<tr data-group=${g.name}>
        <td><code>${g.name}</code></td><td data-label="Status"><${Pill} status=${g.status}/>${g.operation && html`<div class="small group-op">
          <a href=${href("/operations/" + g.operation.operation_id)}>${OP_WORD[g.operation.tool] || g.operation.tool}</a>: ${g.operation.phase || g.operation.status}</div>`}
          ${g.pending && html`<div class="muted small">requested; HyperPod does not list it yet</div>`}</td>
        <td class="num" data-label="Instances"><span class="count" data-current=${g.current_count}>${g.current_count}</span> <span class="muted">of ${g.target_count}</span></td>
        <td data-label="Type"><code>${g.instance_type}</code></td>
        <td class="small group-cost" data-label="Running cost">${g.cost ? perHourMonth(g.cost.hourly, g.cost.monthly) : g.cost_unknown ? html`<span class="muted" title=${g.cost_unknown}>price unknown</span>` : "—"}</td>
        <td class="small" data-label="Fixed" title=${FIXED_REASON}>${g.capacity_type} · ${(g.subnets || []).map((s) => s.availability_zone).join(", ") || "—"}${g.efa_only ? " · efa-only" : ""}${g.training_plan ? " · plan " + g.training_plan : ""}</td>
        <td class="row-actions">${!g.pending && html`<${Act} kind="mutating" class="btn-small" data-scale=${g.name} onClick=${() => open("scale:" + g.name)}>Scale</${Act}>
          <${Act} kind="destructive" class="btn-small" data-delete=${g.name} onClick=${() => setAsk(g)}>Delete</${Act}>`}</td></tr>`)}</tbody>
    </table></div>
    ${r.data && (r.data.cost ? html`<p class="groups-cost">Running cost of the groups: <strong>${perHourMonth(r.data.cost.hourly, r.data.cost.monthly)}</strong> <span class="muted">(on-demand list prices, 730 hours a month)</span></p>`
      : r.data.cost_error ? html`<p class="muted groups-cost">No cost shown: ${r.data.cost_error}</p>` : "")}
  </${Section}>
  ${form === "add" && html`<${ToolForm} tool="hyperpod_add_instance_group" id="add-group" label="Add the group" mut=${mut} cluster=${cluster}
    values=${{}} onCancel=${() => setQuery({ form: "" })}/>`}
  ${scaling && html`<${ToolForm} tool="hyperpod_scale_instance_group" id="scale-group" label="Scale" mut=${mut} cluster=${cluster} existing=${true}
    hide=${["subnet_id", "training_plan"].filter((k) => !scaling[k])}
    values=${{ instance_group: scaling.name, instance_count: scaling.target_count, capacity_type: scaling.capacity_type, efa_only: scaling.efa_only,
      ...((scaling.subnets || []).length === 1 ? { availability_zone: scaling.subnets[0].availability_zone } : {}),
      ...(scaling.training_plan ? { training_plan: scaling.training_plan } : {}) }}
    onCancel=${() => setQuery({ form: "" })}/>`}
  ${!form && html`<${ErrorBox} error=${mut.error}/>`}
  ${mut.op && html`<${Follow} key=${mut.op} id=${mut.op} onDone=${done} onClose=${mut.close}/>`}
  <${Confirm} open=${!!ask} title=${ask ? `Delete the instance group ${ask.name}?` : ""} typeToConfirm=${ask && ask.name} action="Delete the group"
    items=${ask ? [`instance group ${ask.name} (${ask.current_count} × ${ask.instance_type})`] : []}
    lost=${"Every instance of the group is terminated: the work running on them stops and their local volumes (/opt/sagemaker and instance storage) are wiped."}
    onConfirm=${() => { const g = ask; setAsk(null); mut.run("hyperpod_delete_instance_group", { cluster, instance_group: g.name }); }} onClose=${() => setAsk(null)}/>`;
}
