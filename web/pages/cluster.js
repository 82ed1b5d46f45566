// Cluster (#/cluster/NAME[?tab=nodes&op=ID], or the active one): the
// summary (cluster_get_status: EKS and HyperPod status, versions,
// endpoint) and its sections as tabs in the URL: instance groups, nodes,
// dependencies, features, storage (web/pages/cluster_*.js).
import { html } from "/vendor/preact-htm.js";
import { href, navigate } from "/lib/router.js";
import { useSession } from "/lib/session.js";
import { Empty, ErrorBox, Loading, Pill } from "/lib/ui.js";
import { useRead } from "/lib/cluster-ui.js";
import { DeleteCluster } from "/lib/cluster-delete.js";
import { costText } from "/lib/cost.js";
import Groups from "./cluster_groups.js";
import Nodes from "./cluster_nodes.js";
import Deps from "./cluster_deps.js";
import Features from "./cluster_features.js";
import Storage from "./cluster_storage.js";

const TABS = [
  { id: "groups", title: "Instance groups", view: Groups },
  { id: "nodes", title: "Nodes", view: Nodes },
  { id: "deps", title: "Dependencies", view: Deps },
  { id: "features", title: "Features", view: Features },
  { id: "storage", title: "Storage", view: Storage },
];

function Summary({ status }) {
  const eks = status.eks || {};
  const hp = status.hyperpod;
  const addons = status.addons || [];
  return html`<dl class="facts summary-facts">
    <div><dt>EKS</dt><dd><${Pill} status=${eks.status}/> <span class="muted">Kubernetes</span> ${eks.version} <span class="muted">${eks.platform_version}</span></dd></div>
    <div><dt>HyperPod</dt><dd>${hp ? html`<code>${hp.name}</code> <${Pill} status=${hp.status} message=${hp.failure_message}/> <span class="muted">node recovery ${hp.node_recovery}</span>` : html`<span class="muted">none yet</span>`}</dd></div>
    <div><dt>Endpoint</dt><dd><code class="wrap">${eks.endpoint}</code></dd></div>
    <div><dt>Region</dt><dd>${status.region} ${status.active && html`<span class="mark mark-active">active</span>`}</dd></div>
    <div><dt>VPC</dt><dd><code>${eks.vpc_id}</code> <span class="muted">auth ${eks.authentication_mode}</span></dd></div>
    <div><dt>Add-ons</dt><dd>${addons.length} <span class="muted">(${addons.filter((a) => a.status === "ACTIVE").length} active)</span>
      ${addons.length > 0 && html`<details class="addons"><summary>list</summary><ul class="plain">${addons.map((a) => html`<li><code>${a.name}</code> ${a.version} <${Pill} status=${a.status} message=${a.message}/></li>`)}</ul></details>`}</dd></div>
    ${(status.cost || status.cost_error) && html`<div><dt>Running cost</dt><dd class="cluster-cost">${status.cost
      ? html`<strong>${costText(status.cost)}</strong> <span class="muted">(${(status.cost.items || []).map((i) => i.type === "instance" ? i.instance_type + " × " + i.quantity : i.type.toUpperCase()).join(", ")}; on-demand list prices)</span>`
      : html`<span class="muted">not shown: ${status.cost_error}</span>`}</dd></div>`}
    ${hp && (hp.instance_groups || []).length > 0 && html`<div><dt>Capacity</dt><dd>${hp.instance_groups.map((g) => html`<span class="chip"><code>${g.name}</code> ${g.current}/${g.target} × ${g.instance_type}</span> `)}</dd></div>`}
  </dl>`;
}

function Cluster({ params, query }) {
  const { clusters } = useSession();
  const name = params.name || (clusters && clusters.active);
  if (!name) {
    return clusters ? html`<h1>Cluster</h1><${Empty} title="No active cluster.">Pick one in <a href=${href("/clusters")}>Clusters</a>, or <a href=${href("/create")}>create one</a>.</${Empty}>`
      : html`<${Loading}/>`;
  }
  return html`<${ClusterOf} name=${name} query=${query}/>`;
}

function ClusterOf({ name, query }) {
  const st = useRead("cluster_get_status", { cluster: name }, { cluster: name });
  const tab = TABS.find((t) => t.id === query.tab) || TABS[0];
  const View = tab.view;
  const go = (id) => navigate("/cluster/" + name, { tab: id });
  const key = (e, i) => {
    const d = e.key === "ArrowRight" ? 1 : e.key === "ArrowLeft" ? -1 : 0;
    if (!d) return;
    const n = TABS[(i + d + TABS.length) % TABS.length];
    go(n.id);
    setTimeout(() => document.getElementById("tab-" + n.id)?.focus(), 0);
  };
  return html`<p class="crumbs"><a href=${href("/clusters")}>Clusters</a> / <code>${name}</code></p>
    <div class="cluster-head"><h1>Cluster <code>${name}</code></h1>
      <button type="button" class="btn btn-small" onClick=${st.reload} disabled=${st.loading}>Refresh</button>
      ${st.data && st.data.eks && st.data.eks.cluster_tag && html`<${DeleteCluster} tag=${st.data.eks.cluster_tag} name=${name}/>`}</div>
    <${ErrorBox} error=${st.error}/>
    ${st.data ? html`<${Summary} status=${st.data}/>` : !st.error && html`<${Loading} what="Loading the cluster's status"/>`}
    <div class="tabs" role="tablist" aria-label="sections">${TABS.map((t, i) => html`<button type="button" role="tab" id=${"tab-" + t.id}
      aria-selected=${t === tab ? "true" : "false"} aria-controls="tabpanel" tabindex=${t === tab ? 0 : -1}
      onKeyDown=${(e) => key(e, i)} onClick=${() => go(t.id)}>${t.title}</button>`)}</div>
    <div class="tabpanel" id="tabpanel" role="tabpanel" aria-labelledby=${"tab-" + tab.id}>
      <${View} key=${tab.id + name} cluster=${name} query=${query} status=${st.data} reloadStatus=${st.reload}/></div>`;
}

export default { path: "/cluster/:name?", navPath: "/cluster", title: (p) => "Cluster " + (p.name || ""), nav: "Cluster", view: Cluster };
