// Monitoring (#/monitor[?cluster=&namespace=&group=&health=]): what is
// happening across a cluster, from monitor_get_cluster (its watch-backed
// cache). Health at a glance (nodes by state, the failed and degraded ones
// first with what they say), GPUs per instance group, the GPU allocation
// of the last hour, DCGM utilisation where the exporter runs, the nodes
// and pending pods (virtualised tables), the workloads with links to their
// pages, the running operations and the Warning events. Live: the /ws
// topic monitor:<cluster> sends the whole snapshot when the cache changes
// (it replaces the state; with a filter the page asks the tool again);
// while /ws is down or refuses the topic, it asks every 5 s.
import { html, useEffect, useState } from "/vendor/preact-htm.js";
import { callTool } from "/lib/api.js";
import * as ws from "/lib/ws.js";
import { href, setQuery } from "/lib/router.js";
import { Empty, ErrorBox, Loading, Pill, Time, duration } from "/lib/ui.js";
import { ClusterPick, Missing, useCluster, useHas } from "/lib/workload.js";
import { VirtualTable } from "/lib/vlist.js";
import { GpuBar, GpuLegend, HistoryChart, utilOf } from "/lib/monitor-charts.js";
import { jobHref } from "./training.js";
import { endpointHref } from "./inference.js";

const TOOL = "monitor_get_cluster";
const HEALTH = [
  { id: "failed", label: "Failed", tone: "bad", icon: "✕" },
  { id: "degraded", label: "Degraded", tone: "warn", icon: "■" },
  { id: "unknown", label: "Unknown", tone: "muted", icon: "○" },
  { id: "healthy", label: "Healthy", tone: "ok", icon: "✓" },
];
const PHASES = ["Running", "Pending", "Succeeded", "Failed", "Unknown"];
const num = (x) => (typeof x === "number" ? x : 0);
// a list of the answer (an empty one may come as {})
const arr = (x) => (Array.isArray(x) ? x : []);

// useMonitor(cluster, filter) -> {data, error, live, updates, reload}
function useMonitor(cluster, filter, enabled) {
  const [st, setSt] = useState({ data: null, error: null, live: "connecting", updates: 0 });
  const fkey = JSON.stringify(filter);
  const [n, setN] = useState(0);
  useEffect(() => {
    if (!cluster || !enabled) return undefined;
    let alive = true, busy = false, again = false, refused = false;
    const filtered = Object.keys(filter).length > 0;
    setSt({ data: null, error: null, live: ws.status === "open" ? "connecting" : "polling", updates: 0 });
    const load = async () => {
      if (busy) { again = true; return; }
      busy = true;
      try {
        const data = await callTool(TOOL, { cluster, ...filter });
        if (alive) setSt((s) => ({ ...s, data, error: null }));
      } catch (error) {
        if (alive) setSt((s) => ({ ...s, error }));
      } finally {
        busy = false;
        if (again && alive) { again = false; load(); }
      }
    };
    load();
    const topic = "monitor:" + cluster;
    const unsub = ws.subscribe(topic);
    const offEv = ws.on(topic, (ev) => {
      if (!ev || ev.kind !== "monitor.snapshot") return;
      setSt((s) => ({ ...s, live: "live", updates: s.updates + 1, ...(filtered || !ev.snapshot ? {} : { data: ev.snapshot, error: null }) }));
      if (filtered || !ev.snapshot) load();
    });
    const offErr = ws.on("msg:error", (m) => {
      if (String(m.message || "").includes("topic " + topic)) { refused = true; setSt((s) => ({ ...s, live: "polling" })); }
    });
    const offSt = ws.on("status", (s) => {
      if (s === "open") { refused = false; load(); }
      else setSt((x) => ({ ...x, live: "polling" }));
    });
    const poll = setInterval(() => { if (refused || ws.status !== "open") load(); }, 5000);
    return () => { alive = false; unsub(); offEv(); offErr(); offSt(); clearInterval(poll); };
  }, [cluster, fkey, enabled, n]);
  return { ...st, reload: () => setN((x) => x + 1) };
}

const LIVE = { live: ["Live", "ok", "updated through /ws as the cache changes"], connecting: ["Connecting", "run", "waiting for the first snapshot over /ws"],
  polling: ["Polling", "warn", "/ws is down or does not offer this cluster's topic: asked again every 5 s"] };

function LiveBadge({ live, updates, cache }) {
  const [word, tone, why] = LIVE[live] || LIVE.polling;
  return html`<span class="live-badge" id="monitor-live" data-live=${live} data-updates=${updates} title=${why}>
    <span class=${"pill pill-" + tone}><span aria-hidden="true">${tone === "ok" ? "●" : tone === "warn" ? "■" : "○"}</span> ${word}</span>
    ${cache && html`<span class="muted small" id="monitor-cache" data-state=${cache.state}> cache ${cache.state}${cache.built_seconds !== undefined ? `, built in ${duration(cache.built_seconds)}` : ""}${cache.age_seconds !== undefined ? `, ${duration(cache.age_seconds)} old` : ""}</span>`}
  </span>`;
}

// health at a glance: nodes by state (each a filter of the node table), GPUs, pods
function Glance({ d, health }) {
  const by = (d.nodes && d.nodes.by_health) || {};
  const g = d.gpus || {};
  const pods = (d.pods && d.pods.by_phase) || {};
  const pend = d.pending || {};
  return html`<section class="glance" id="glance" aria-label="health at a glance">
    <div class="glance-card" id="glance-nodes"><div class="glance-title">Nodes <span class="glance-total" data-count=${num(d.nodes && d.nodes.total)}>${num(d.nodes && d.nodes.total)}</span></div>
      <div class="glance-row">${HEALTH.map((h) => html`<button type="button" class=${"hcount hcount-" + h.tone + (num(by[h.id]) ? "" : " zero")} data-health=${h.id} data-count=${num(by[h.id])}
        aria-pressed=${health === h.id ? "true" : "false"} title=${`Show only the ${h.label.toLowerCase()} nodes`} onClick=${() => setQuery({ health: health === h.id ? "" : h.id })}>
        <span class="hcount-n">${num(by[h.id])}</span> <span class="hcount-l"><span aria-hidden="true">${h.icon}</span> ${h.label}</span></button>`)}</div></div>
    <div class="glance-card" id="glance-gpus"><div class="glance-title">GPUs <span class="glance-total" data-count=${num(g.allocatable)}>${num(g.allocatable)}</span> <span class="muted small">allocatable of ${num(g.capacity)}</span></div>
      <dl class="glance-facts"><div><dt>requested</dt><dd data-gpus="requested">${num(g.requested)}</dd></div><div><dt>free</dt><dd data-gpus="free">${num(g.free)}</dd></div>
        <div class=${num(g.pending) ? "warn" : ""}><dt>pending demand</dt><dd data-gpus="pending">${num(g.pending)}</dd></div></dl></div>
    <div class="glance-card" id="glance-pods"><div class="glance-title">Pods <span class="glance-total" data-count=${num(d.pods && d.pods.total)}>${num(d.pods && d.pods.total)}</span></div>
      <dl class="glance-facts">${PHASES.map((p) => html`<div class=${p === "Failed" && num(pods[p]) ? "bad" : p === "Pending" && num(pods[p]) ? "warn" : ""}><dt>${p}</dt><dd data-phase=${p}>${num(pods[p])}</dd></div>`)}</dl>
      ${num(pend.pods) > 0 && html`<p class="small warn-text" id="glance-pending"><span aria-hidden="true">■</span> ${pend.pods} pending ${pend.pods === 1 ? "pod wants" : "pods want"} ${num(pend.gpus)} GPUs</p>`}</div>
  </section>`;
}

const bad = (c) => `${c.type}=${c.status}${c.reason ? " (" + c.reason + ")" : ""}${c.message ? ": " + c.message : ""}`;

// the failed and degraded nodes, worst first, with what they say
function Attention({ nodes, cluster }) {
  const list = nodes.filter((x) => x.health === "failed" || x.health === "degraded");
  if (!list.length) return null;
  const shown = list.slice(0, 6);
  return html`<section class="csec" id="attention" aria-labelledby="attention-h">
    <div class="csec-head"><h2 id="attention-h">Needs attention <span class="muted small">${list.length} ${list.length === 1 ? "node" : "nodes"}</span></h2></div>
    <ul class="attention">${shown.map((x) => html`<li class=${"att att-" + x.health} data-node=${x.name}>
      <div><${Pill} status=${x.health === "failed" ? "Failed" : "Degraded"}/> <code>${x.name}</code> <span class="muted small">${x.instance_group} · ${x.instance_type}</span>
        ${/^hyperpod-/.test(x.name) && html`<a class="small" href=${href("/diagnostics", { cluster, tool: "diagnose_node_health", node: x.name })}>Diagnose</a>`}</div>
      ${x.message && html`<p class="att-msg">${x.message}</p>`}
      <p class="small muted">${[x.health_label && `health ${x.health_label}`, x.deep_health_label && `deep health ${x.deep_health_label}`,
        ...(x.message ? [] : arr(x.conditions).map(bad)), ...arr(x.taints).map((t) => `taint ${t.key}${t.value ? "=" + t.value : ""}:${t.effect}`)].filter(Boolean).join(" · ")}</p></li>`)}</ul>
    ${list.length > shown.length && html`<p class="small"><a href=${href("/monitor", { cluster, health: "failed" })}>${list.length - shown.length} more</a> in the node table below.</p>`}
  </section>`;
}

function Groups({ groups }) {
  return html`<section class="csec" id="gpu-groups" aria-labelledby="gpu-groups-h"><div class="csec-head"><h2 id="gpu-groups-h">GPUs by instance group</h2></div>
    ${groups.length === 0 ? html`<p class="muted">No instance groups.</p>` : html`<${GpuLegend}/>
      ${groups.map((g) => html`<div class="group-bars"><${GpuBar} name=${g.name} gpu=${g.gpu || {}}/>
        <p class="muted small">${g.nodes} ${g.nodes === 1 ? "node" : "nodes"} × ${g.instance_type}${g.efa && num(g.efa.capacity) ? ` · EFA ${num(g.efa.requested)} of ${num(g.efa.allocatable)} in use` : ""}</p></div>`)}`}
  </section>`;
}

const res = (r) => (r && num(r.capacity) ? `${num(r.requested)}/${num(r.allocatable)}${num(r.allocatable) < num(r.capacity) ? ` (of ${num(r.capacity)})` : ""}` : "—");

function Nodes({ d, health, cluster }) {
  const all = arr(d.nodes && d.nodes.items);
  const rows = health ? all.filter((x) => x.health === health) : all;
  const head = html`<tr><th scope="col">Node</th><th scope="col">Group</th><th scope="col">Health</th><th scope="col">Ready</th>
    <th scope="col" class="num" title="GPUs requested by pods / allocatable">GPUs used</th><th scope="col" class="num" title="EFA devices requested / allocatable">EFA used</th><th scope="col">Says</th></tr>`;
  return html`<section class="csec" id="mon-nodes" aria-labelledby="mon-nodes-h">
    <div class="csec-head"><h2 id="mon-nodes-h">Nodes <span class="muted small">${health ? `${rows.length} ${health} of ${all.length}` : all.length}</span></h2>
      <div class="csec-actions">${health && html`<button type="button" class="btn btn-small" onClick=${() => setQuery({ health: "" })}>Show every node</button>`}
        <a class="btn btn-small" href=${href("/cluster/" + cluster, { tab: "nodes" })}>Reboot or replace…</a></div></div>
    <${VirtualTable} id="nodes-table" cols=${7} label="Nodes" rows=${rows} rowKey=${(x) => x.name} head=${head} height=${440}
      empty=${health ? `No ${health} nodes.` : "No nodes."}
      rowAttrs=${(x) => ({ "data-node": x.name, "data-health": x.health })}
      row=${(x) => html`<td><code>${x.name}</code></td><td>${x.instance_group}<span class="muted small"> ${x.instance_type}</span></td>
        <td><${Pill} status=${x.health_label || x.health} title=${`${x.health}${x.deep_health_label ? ", deep health " + x.deep_health_label : ""}`}/></td>
        <td>${x.ready ? "Ready" : html`<span class="bad-text">NotReady</span>`}</td>
        <td class="num">${res(x.gpu)}</td><td class="num">${res(x.efa)}</td>
        <td class="small ellipsis" title=${x.message || ""}>${x.message || (arr(x.conditions).map(bad).join("; ")) || ""}</td>`}/>
  </section>`;
}

function Pending({ d }) {
  const items = arr(d.pending && d.pending.items);
  if (!items.length) return null;
  const head = html`<tr><th scope="col">Pod</th><th scope="col" class="num">GPUs</th><th scope="col">Reason</th><th scope="col">Scheduler says</th><th scope="col">Since</th></tr>`;
  return html`<section class="csec" id="mon-pending" aria-labelledby="mon-pending-h">
    <div class="csec-head"><h2 id="mon-pending-h">Pending pods <span class="muted small">${items.length}</span></h2></div>
    <${VirtualTable} id="pending-table" cols=${5} label="Pending pods" rows=${items} rowKey=${(p) => p.namespace + "/" + p.name} head=${head} height=${260}
      rowAttrs=${(p) => ({ "data-pod": p.namespace + "/" + p.name })}
      row=${(p) => html`<td><code>${p.namespace}/${p.name}</code></td><td class="num">${num(p.gpus)}</td><td>${p.reason || ""}</td>
        <td class="small ellipsis" title=${p.message || ""}>${p.message || ""}</td><td class="small"><${Time} t=${typeof p.since === "string" ? Date.parse(p.since) / 1000 : p.since}/></td>`}/>
  </section>`;
}

// one small table of workloads: [label, cell(row)] columns; empty says so
function Small({ id, title, rows, cols, rowKey: rk, hint }) {
  return html`<section class="wl" id=${id} aria-labelledby=${id + "-h"}><h3 id=${id + "-h"}>${title} <span class="muted small">${rows.length}</span></h3>
    ${rows.length === 0 ? html`<p class="muted small">None.${hint ? " " : ""}${hint}</p>` : html`<div class="table-wrap"><table class="table small-table stack">
      <thead><tr>${cols.map(([l]) => html`<th scope="col">${l}</th>`)}</tr></thead>
      <tbody>${rows.slice(0, 200).map((r) => html`<tr data-name=${rk(r)}>${cols.map(([l, c]) => html`<td data-label=${l}>${c(r)}</td>`)}</tr>`)}</tbody></table></div>
      ${rows.length > 200 && html`<p class="muted small">The first 200 of ${rows.length}.</p>`}`}
  </section>`;
}

const nsName = (r) => html`<code>${r.namespace}/${r.name}</code>`;
const when = (t) => (t ? html`<${Time} t=${typeof t === "string" ? Date.parse(t) / 1000 : t}/>` : "");

function Workloads({ d, cluster }) {
  const by = (d.pods && d.pods.by_phase) || {};
  const linkJob = (j) => html`<a href=${jobHref(j, cluster)}>${nsName(j)}</a>`;
  const linkEp = (e) => html`<a href=${endpointHref(e, cluster)}>${nsName(e)}</a>`;
  return html`<section class="csec" id="workloads" aria-labelledby="workloads-h"><div class="csec-head"><h2 id="workloads-h">Workloads</h2></div>
    <div class="wl-grid">
      <${Small} id="wl-pods" title="Pods by phase" rows=${PHASES.filter((p) => num(by[p]) > 0).map((p) => ({ p, n: by[p] }))} rowKey=${(r) => r.p}
        cols=${[["Phase", (r) => html`<${Pill} status=${r.p}/>`], ["Pods", (r) => html`<span class="num" data-phase=${r.p}>${r.n}</span>`]]}/>
      <${Small} id="wl-pytorch" title="PyTorch jobs" rows=${arr(d.pytorch_jobs)} rowKey=${(r) => r.namespace + "/" + r.name} hint=${html`Submit one from <a href=${href("/training", { cluster })}>Training</a>.`}
        cols=${[["Job", linkJob], ["State", (r) => html`<${Pill} status=${r.state}/>`], ["Replicas", (r) => r.replicas], ["Restarts", (r) => r.restarts]]}/>
      <${Small} id="wl-inference" title="Inference endpoints" rows=${arr(d.inference_endpoints)} rowKey=${(r) => r.namespace + "/" + r.name}
        cols=${[["Endpoint", linkEp], ["Model", (r) => html`<code class="wrap">${r.model}</code>`], ["State", (r) => html`<${Pill} status=${r.state}/>`], ["Replicas", (r) => r.replicas]]}/>
      <${Small} id="wl-jumpstart" title="JumpStart models" rows=${arr(d.jumpstart_models)} rowKey=${(r) => r.namespace + "/" + r.name}
        cols=${[["Model", linkEp], ["Model id", (r) => html`<code class="wrap">${r.model_id}</code>`], ["State", (r) => html`<${Pill} status=${r.state}/>`]]}/>
      <${Small} id="wl-deployments" title="Deployments" rows=${arr(d.deployments)} rowKey=${(r) => r.namespace + "/" + r.name}
        cols=${[["Deployment", nsName], ["Ready", (r) => html`<span class=${num(r.ready) < num(r.replicas) ? "warn-text" : ""}>${num(r.ready)} of ${num(r.replicas)}</span>`], ["Available", (r) => num(r.available)]]}/>
      <${Small} id="wl-services" title="Services" rows=${arr(d.services)} rowKey=${(r) => r.namespace + "/" + r.name}
        cols=${[["Service", nsName], ["Type", (r) => r.type], ["Cluster IP", (r) => html`<code>${r.cluster_ip}</code>`],
          ["Ports", (r) => arr(r.ports).map((p) => (typeof p === "object" ? `${p.port}${p.protocol && p.protocol !== "TCP" ? "/" + p.protocol : ""}` : p)).join(", ")]]}/>
      <${Small} id="wl-ray" title="Ray jobs" rows=${arr(d.ray_jobs)} rowKey=${(r) => r.namespace + "/" + r.name}
        cols=${[["Job", nsName], ["State", (r) => html`<${Pill} status=${r.state}/>`]]}/>
      <${Small} id="wl-operations" title="Running hypd operations" rows=${arr(d.operations)} rowKey=${(r) => r.id}
        cols=${[["Operation", (r) => html`<a href=${href("/operations/" + r.id)}>${r.tool}</a>`], ["Phase", (r) => r.phase], ["Started", (r) => when(r.started)]]}/>
    </div></section>`;
}

function Utilisation({ u }) {
  const gpus = arr(u.gpus);
  const avg = gpus.length ? Math.round(gpus.reduce((a, g) => a + utilOf(g), 0) / gpus.length) : 0;
  const head = html`<tr><th scope="col">Node</th><th scope="col">GPU</th><th scope="col">Utilisation</th></tr>`;
  return html`<section class="csec" id="utilisation" aria-labelledby="util-h"><div class="csec-head"><h2 id="util-h">GPU utilisation <span class="muted small">DCGM exporter · ${gpus.length} GPUs, ${avg}% on average</span></h2></div>
    <${VirtualTable} id="util-table" cols=${3} label="GPU utilisation" rows=${gpus} rowKey=${(g) => `${g.node}/${g.gpu ?? g.uuid}`} head=${head} height=${220}
      row=${(g) => html`<td><code>${g.node}</code></td><td>${g.gpu ?? g.uuid ?? ""}</td><td><span class="ubar" role="img" aria-label=${utilOf(g) + "%"}><span ref=${(el) => { if (el) el.style.width = Math.min(100, utilOf(g)) + "%"; }}></span></span> ${Math.round(utilOf(g))}%</td>`}/>
  </section>`;
}

function Events({ events }) {
  return html`<section class="csec" id="mon-events" aria-labelledby="mon-events-h"><div class="csec-head"><h2 id="mon-events-h">Warning events <span class="muted small">${events.length}</span></h2></div>
    ${events.length === 0 ? html`<p class="muted">No Warning events.</p>` : html`<div class="table-wrap"><table class="table events stack">
      <thead><tr><th scope="col">Object</th><th scope="col">Reason</th><th scope="col">Message</th><th scope="col">Last</th></tr></thead>
      <tbody>${events.map((e) => html`<tr class="ev-warn" data-reason=${e.reason}><td data-label="Object"><code class="wrap">${e.namespace ? e.namespace + "/" : ""}${e.object}</code></td>
        <td data-label="Reason">${e.reason}</td><td data-label="Message">${e.message}${num(e.count) > 1 ? html` <span class="muted small">(×${e.count})</span>` : ""}</td>
        <td data-label="Last" class="small">${when(e.last)}</td></tr>`)}</tbody></table></div>`}
  </section>`;
}

function Filters({ d, query }) {
  const groups = [...new Set([...(d ? arr(d.instance_groups).map((g) => g.name) : []), ...(query.group ? [query.group] : [])])];
  const [ns, setNs] = useState(query.namespace || "");
  return html`<form class="filters" id="monitor-filters" onSubmit=${(e) => { e.preventDefault(); setQuery({ namespace: ns.trim() }); }}>
    <label for="mon-namespace">Namespace</label>
    <input id="mon-namespace" placeholder="every namespace" value=${ns} onInput=${(e) => setNs(e.target.value)} onChange=${(e) => setQuery({ namespace: e.target.value.trim() })}/>
    <label for="mon-group">Instance group</label>
    <select id="mon-group" onChange=${(e) => setQuery({ group: e.target.value })}>
      <option value="" selected=${!query.group}>every group</option>
      ${groups.map((g) => html`<option value=${g} selected=${g === query.group}>${g}</option>`)}
    </select>
  </form>`;
}

function Monitor({ query }) {
  const has = useHas();
  const cluster = useCluster(query);
  const filter = {};
  if (query.namespace) filter.namespace = query.namespace;
  if (query.group) filter.instance_group = query.group;
  const m = useMonitor(cluster, filter, has(TOOL) === true);
  const d = m.data;
  const health = HEALTH.some((h) => h.id === query.health) ? query.health : "";
  return html`<div class="page-head"><h1>Monitoring</h1><${ClusterPick} value=${cluster}/>
      ${d && html`<${LiveBadge} live=${m.live} updates=${m.updates} cache=${d.cache}/>`}</div>
    ${has(TOOL) === false ? html`<${Missing} tools=${[TOOL]} what="Monitoring"/>`
      : !cluster ? html`<${Empty} title="No active cluster.">Pick one above, or <a href=${href("/create")}>create one</a>.</${Empty}>`
      : html`<${Filters} key=${cluster} d=${d} query=${query}/>
        <${ErrorBox} error=${m.error}/>
        ${!d ? !m.error && html`<${Loading} what="Reading the cluster"/>` : html`<div class="monitor" data-cluster=${d.cluster}>
          <${Glance} d=${d} health=${health}/>
          <${Attention} nodes=${arr(d.nodes && d.nodes.items)} cluster=${cluster}/>
          <div class="mon-two"><${Groups} groups=${arr(d.instance_groups)}/>
            <section class="csec" id="gpu-chart" aria-labelledby="gpu-chart-h"><div class="csec-head"><h2 id="gpu-chart-h">GPU allocation, last hour</h2></div>
              <${HistoryChart} history=${arr(d.history)}/>
              ${!d.utilisation && d.utilisation_absent && html`<p class="muted small" id="utilisation-absent">No GPU utilisation: ${d.utilisation_absent}.</p>`}</section></div>
          ${d.utilisation && html`<${Utilisation} u=${d.utilisation}/>`}
          <${Nodes} d=${d} health=${health} cluster=${cluster}/>
          <${Pending} d=${d}/>
          <${Workloads} d=${d} cluster=${cluster}/>
          <${Events} events=${arr(d.events)}/>
        </div>`}`}`;
}

export default { path: "/monitor", title: "Monitoring", nav: "Monitoring", view: Monitor };
