// <DeleteCluster tag="demo" [name]/>: Delete on the cluster pages (the
// cluster's header, the Clusters page's leftovers), not only on the Tools
// page: it asks cluster_delete for its plan first and shows it (what goes,
// what is kept and why, the workloads in the way), then asks for the tag
// typed in, then runs it and opens its operation. "Also delete storage
// that holds data" is force, said as what it does.
import { html, useState } from "/vendor/preact-htm.js";
import { callTool } from "/lib/api.js";
import { navigate } from "/lib/router.js";
import { Act, Confirm, ErrorBox } from "/lib/ui.js";

export function DeleteCluster({ tag, name, force: forced = false }) {
  const [force, setForce] = useState(forced);
  const [plan, setPlan] = useState(null);
  const [err, setErr] = useState(null);
  const [busy, setBusy] = useState(false);
  if (!tag) return null;
  const params = () => (force ? { cluster_tag: tag, force: true } : { cluster_tag: tag });
  const ask = async () => {
    setBusy(true); setErr(null);
    try { setPlan(await callTool("cluster_delete", { ...params(), plan: true })); } catch (e) { setErr(e); } finally { setBusy(false); }
  };
  const run = async () => {
    setPlan(null); setBusy(true);
    try {
      const r = await callTool("cluster_delete", params());
      if (r && r.operation_id) navigate("/operations/" + r.operation_id);
    } catch (e) { setErr(e); } finally { setBusy(false); }
  };
  const rows = (plan && plan.plan) || [];
  const items = rows.filter((r) => r.action === "delete").map((r) => `${r.type} ${r.name}`);
  const kept = rows.filter((r) => r.action === "keep").map((r) => ({ name: `${r.type} ${r.name}`, why: r.why }));
  return html`<span class="delete-cluster" data-delete=${tag}>
    <${Act} kind="destructive" class="btn-small" id=${"delete-" + tag} disabled=${busy} onClick=${ask}>Delete${name ? "" : " " + tag}…</${Act}>
    <label class="small"><input type="checkbox" checked=${force} onChange=${(e) => setForce(e.target.checked)}/> also delete storage that holds data</label>
    <${ErrorBox} error=${err}/>
    <${Confirm} open=${!!plan} title=${`Delete ${name || "hypd-" + tag}?`} action="Delete" typeToConfirm=${tag}
      items=${items.length ? items : ["nothing: its plan deletes nothing"]} kept=${kept}
      lost=${(force ? "Storage and the data on it go too. " : "What is deleted, with what runs on the cluster. ") + "This cannot be undone."}
      onConfirm=${run} onClose=${() => setPlan(null)}/>
  </span>`;
}
