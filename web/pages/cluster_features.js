// Cluster › Features: the HyperPod cluster's managed features as switches.
// Each shows the actual state read back (hyperpod_get_advanced_features);
// flipping one calls hyperpod_update_advanced_features with only that
// feature; the switch stays pending while the operation runs (the
// operation id is in the URL, so a reload keeps it pending) and then
// shows the state read again, the parts of its chain on demand; a feature
// that is on shows its options (tiered checkpointing's memory share,
// Karpenter's idle time: hyperpod_update_advanced_features's schema, with
// its labels) with their values read back, applied with one button. Turning one
// off removes its chain (roles, add-ons, objects: the destructive child
// hyperpod_disable_advanced_features), so it asks first, naming the parts,
// and needs a token that may delete.
import { html, useState } from "/vendor/preact-htm.js";
import { denied, useSession } from "/lib/session.js";
import { Confirm, ErrorBox } from "/lib/ui.js";
import { SchemaForm } from "/lib/form.js";
import { Follow, Section, State, Toggle, useMutation, useRead, useToolDef } from "/lib/cluster-ui.js";

const TOOL = "hyperpod_update_advanced_features";

// Options({name, spec, f, disabled, onApply}): a feature's options (its schema's properties but enabled), with the values read back
function Options({ name, spec, f, disabled, onApply }) {
  const props = Object.fromEntries(Object.entries((spec && spec.properties) || {}).filter(([k]) => k !== "enabled"));
  if (!Object.keys(props).length) return null;
  // the values read back that fit the field (Karpenter's groups are read as rows: not prefilled)
  const values = Object.fromEntries(Object.keys(props).filter((k) => f[k] !== undefined && f[k] !== null && typeof f[k] !== "object").map((k) => [k, f[k]]));
  return html`<details class="feature-options-edit" data-options=${name}><summary>Options</summary>
    <${SchemaForm} schema=${{ type: "object", properties: props }} id=${"feat-opts-" + name} values=${values} disabled=${disabled}
      actions=${[{ label: "Apply options", kind: "mutating" }]} onSubmit=${(p) => onApply({ ...values, ...p, enabled: true })}/></details>`;
}

// wanted(v) -> whether a feature's parameter asks for it on (true, or an object of options not enabled: false)
const wanted = (v) => v === true || (!!v && typeof v === "object" && v.enabled !== false);

export default function Features({ cluster, query }) {
  const { who } = useSession();
  const r = useRead("hyperpod_get_advanced_features", { cluster });
  const { def } = useToolDef(TOOL);
  const specs = (def && def.input_schema.properties) || {};
  const label = (name) => (specs[name] && specs[name]["x-hypd-label"]) || name;
  const mut = useMutation(query);
  const [opView, setOpView] = useState(null); // the feature operation's latest view (from Follow)
  const mine = opView && opView.operation_id === mut.op ? opView : null;
  // null: every switch pending until the operation is read; else the features it changes while it runs
  const feats = (r.data && r.data.features) || {};
  const pending = !mut.op ? [] : !mine ? null : mine.status === "running" ? Object.keys(mine.params || {}).filter((k) => feats[k]) : [];
  const why = denied(who, "mutating");
  const whyOff = denied(who, "destructive"); // turning off deletes the chain
  const [ask, setAsk] = useState(null);      // the feature waiting for the confirmation to turn off
  const send = (name, on) => mut.run(TOOL, { cluster, [name]: on });
  const flip = (name, on) => (on ? send(name, true) : setAsk(name));
  const body = (pending) => html`<ul class="features">${Object.entries(feats).map(([name, f]) => {
    // after the operation, a feature it changed stays pending while the read in flight has not yet shown
    // the change; the others keep the state read back (a slow read no longer greys every switch)
    const asked = mine && (mine.params || {})[name];
    const isPending = mut.busy || pending === null || (pending || []).includes(name) ||
      (!!mut.op && r.loading && asked !== undefined && !!f.enabled !== wanted(asked));
    return html`<li class="feature" data-feature=${name} data-enabled=${f.enabled ? "true" : "false"} data-pending=${isPending ? "true" : "false"}>
      <${Toggle} id=${"feat-" + name} checked=${!!f.enabled} pending=${isPending}
        disabled=${!!why || (f.enabled && !!whyOff) || (pending || []).length > 0}
        title=${why || (f.enabled && whyOff) || undefined} label=${label(name)} onChange=${(on) => flip(name, on)}/>
      <span class="feature-state">${isPending ? html`<span class="pill pill-run" data-state="pending"><span aria-hidden="true">●</span> pending</span>` : html`<${State} state=${f.status || (f.enabled ? "enabled" : "disabled")}/>`}</span>
      ${(f.missing || []).length > 0 && f.enabled && html`<span class="field-error small">missing: ${f.missing.join(", ")}</span>`}
      ${f.enabled && !isPending && html`<${Options} name=${name} spec=${specs[name]} f=${f} disabled=${!!why} onApply=${(v) => send(name, v)}/>`}
      <details class="feature-parts"><summary>${(f.parts || []).length} ${(f.parts || []).length === 1 ? "part" : "parts"}</summary><ul class="plain small">${(f.parts || []).map((p) => html`<li>
        <${State} state=${p.present ? (p.pending ? "pending" : p.failed ? "failed" : "present") : "missing"}/> ${p.part}${p.version ? " " + p.version : ""}</li>`)}</ul></details>
    </li>`;
  })}</ul>`;
  return html`<${Section} id="features" title="Advanced features" loading=${r.loading && !r.data} error=${r.error}
      empty=${r.data && Object.keys(feats).length === 0 ? "No features reported." : null}
      actions=${html`<button type="button" class="btn btn-small" onClick=${r.reload}>Read again</button>`}>
    <p class="muted small">Each switch shows the state read back from the cluster. Flipping one changes only that feature; it stays pending while its operation runs.</p>
    ${body(pending)}
  </${Section}>
  <${Confirm} open=${!!ask} title=${ask ? `Turn ${label(ask)} off?` : ""} action="Turn it off"
    items=${ask ? ((feats[ask] || {}).parts || []).filter((x) => x.present).map((x) => x.part) : []}
    lost=${"Its chain is removed in reverse: the IAM roles and policies, EKS add-ons and Kubernetes objects hypd made " +
      "for it. Workloads that use it stop working."}
    onConfirm=${() => { const name = ask; setAsk(null); send(name, false); }} onClose=${() => setAsk(null)}/>
  <${ErrorBox} error=${mut.error}/>
  ${mut.op && html`<${Follow} key=${mut.op} id=${mut.op} onView=${setOpView} onDone=${r.reload} onClose=${mut.close}/>`}`;
}
