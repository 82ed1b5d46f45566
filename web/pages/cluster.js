// Cluster (#/cluster/NAME, or the active one): its status
// (cluster_get_status). A first version on the framework; the cluster
// pages (instance groups, nodes, dependencies, features, storage) grow it.
import { html, useEffect, useState } from "/vendor/preact-htm.js";
import { callTool } from "/lib/api.js";
import { href } from "/lib/router.js";
import { useSession } from "/lib/session.js";
import { Empty, ErrorBox, Json, Loading } from "/lib/ui.js";

function Cluster({ params }) {
  const { clusters } = useSession();
  const name = params.name || (clusters && clusters.active);
  const [status, setStatus] = useState(null);
  const [err, setErr] = useState(null);
  useEffect(() => {
    if (!name) return;
    setStatus(null);
    callTool("cluster_get_status", { cluster: name }).then(setStatus, setErr);
  }, [name]);
  if (!name) return clusters ? html`<h1>Cluster</h1><${Empty} title="No active cluster.">Pick one in <a href=${href("/clusters")}>Clusters</a>.</${Empty}>` : html`<${Loading}/>`;
  return html`<h1>Cluster <code>${name}</code></h1><${ErrorBox} error=${err}/>
    ${status ? html`<${Json} value=${status}/>` : !err && html`<${Loading} what="Loading the cluster's status"/>`}`;
}

export default { path: "/cluster/:name?", navPath: "/cluster", title: (p) => "Cluster " + (p.name || ""), nav: "Cluster", view: Cluster };
