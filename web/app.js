// hypd's web UI: the entry module. Signs in (a pasted token, or the
// one-time code of a sign-in link in the URL fragment; the token lives in
// this tab's session storage only), then draws the shell: the left
// navigation (from web/pages/index.js), the top bar (active cluster and
// region with a switcher, who is signed in, the running operations), the
// page of the hash route, and the drawer of running operations.
import { html, render, useCallback, useEffect, useState } from "/vendor/preact-htm.js";
import { callTool, listOperations, listTools, login, logout, token, whoami } from "/lib/api.js";
import * as ws from "/lib/ws.js";
import { href, match, parse, useRoute } from "/lib/router.js";
import { Session, denied, useSession } from "/lib/session.js";
import { ErrorBox, Pill } from "/lib/ui.js";
import names from "/pages/index.js";

const root = document.getElementById("app");

// the sign-in page; replaced: the token was the one hypd serve --sandbox
// (make run) prints, replaced by a new one when the server started again
function SignIn({ message, replaced }) {
  const [value, setValue] = useState("");
  return html`<main class="signin">
    <form onSubmit=${(e) => { e.preventDefault(); token.set(value.trim()); start(); }}>
      <h1>hypd</h1>
      <p><label for="token">Token</label></p>
      <p class="help" id="token-help">Paste a token (<code>hypd token create</code>), or open the sign-in link <code>hypd serve</code> prints.</p>
      <input id="token" type="password" autocomplete="off" aria-describedby="token-help" value=${value} onInput=${(e) => setValue(e.target.value)}/>
      <button id="signin" class="btn btn-primary" type="submit">Sign in</button>
      <p id="message" role="alert">${message || ""}</p>
      ${replaced && html`<p id="restarted" class="notice"><code>make run</code> prints a new token and a new
        one-time sign-in link at every start: open the link from its latest output (the line <q>web UI … once
        with this link: …/#login=…</q>), or paste the token it printed. A sign-in through a link, and a token
        made with <code>hypd token create</code>, stay valid across restarts.</p>`}
    </form>
  </main>`;
}

// the one connection banner: shown while /ws is down after it was open
// (past a short grace, so a quick reconnect shows nothing) or a call found
// no server; gone when both answer again. Pages show no error box for it.
function ConnectionBanner() {
  const [down, setDown] = useState(false);
  useEffect(() => {
    let wsDown = false, apiDown = false, wasOpen = ws.status === "open", t = null;
    const update = () => {
      clearTimeout(t);
      if (wsDown || apiDown) t = setTimeout(() => setDown(true), 1500);
      else setDown(false);
    };
    const offS = ws.on("status", (s) => {
      if (s === "open") { wasOpen = true; wsDown = false; } else if (wasOpen) wsDown = true;
      update();
    });
    const net = (e) => { apiDown = !e.detail; update(); };
    window.addEventListener("hypd:network", net);
    return () => { offS(); window.removeEventListener("hypd:network", net); clearTimeout(t); };
  }, []);
  if (!down) return null;
  return html`<div id="connection-banner" class="connection-banner" role="status">
    <strong>Connection to hypd lost.</strong> Reconnecting… What the pages show may be out of date; they read again
    when it is back. Running operations are the server's: they go on, or resume when it starts again.</div>`;
}

// the running operations, kept live: {id: {operation_id, tool, phase, status}}
function useRunning() {
  const [ops, setOps] = useState({});
  useEffect(() => {
    const load = () => listOperations({ status: "running", limit: 100 }).then((r) => {
      const o = {};
      for (const v of r.operations || []) o[v.operation_id] = { operation_id: v.operation_id, tool: v.tool, phase: v.phase, status: v.status, created_at: v.created_at };
      setOps(o);
    }, () => {});
    load();
    const off = ws.on("operations", (ev) => setOps((o) => {
      const n = { ...o };
      if (ev.status === "running") n[ev.operation_id] = { ...(o[ev.operation_id] || {}), operation_id: ev.operation_id, tool: ev.tool, phase: ev.phase, status: ev.status, note: ev.message || (o[ev.operation_id] || {}).note };
      else delete n[ev.operation_id];
      return n;
    }));
    const offS = ws.on("status", (s) => { if (s === "open") load(); });
    const offP = ws.whileDown(load, 3000);
    return () => { off(); offS(); offP(); };
  }, []);
  return Object.values(ops);
}

function Drawer({ ops, onClose }) {
  useEffect(() => {
    const k = (e) => { if (e.key === "Escape") onClose(); };
    window.addEventListener("keydown", k);
    document.getElementById("ops-drawer-close")?.focus();
    return () => window.removeEventListener("keydown", k);
  }, []);
  return html`<aside id="ops-drawer" class="drawer" aria-label="Running operations">
    <div class="drawer-head"><h2>Running operations</h2>
      <button id="ops-drawer-close" class="btn btn-small" onClick=${onClose} aria-label="Close the running operations">Close</button></div>
    ${ops.length === 0 ? html`<p class="muted">Nothing is running. <a href=${href("/operations")} onClick=${onClose}>See every operation</a>.</p>`
      : html`<ul class="drawer-list">${ops.map((o) => html`<li data-op=${o.operation_id}>
        <a href=${href("/operations/" + o.operation_id)} onClick=${onClose}><strong>${o.tool}</strong></a> <${Pill} status=${o.status}/>
        <div class="drawer-phase">${o.phase}</div>${o.note && html`<div class="muted drawer-note">${o.note}</div>`}</li>`)}</ul>
        <p><a href=${href("/operations", { status: "running" })} onClick=${onClose}>All running operations</a></p>`}
  </aside>`;
}

function ClusterSwitch() {
  const s = useSession();
  const [err, setErr] = useState(null);
  const why = denied(s.who, "mutating");
  const list = (s.clusters && s.clusters.clusters) || [];
  const active = s.clusters && s.clusters.active;
  const change = async (e) => {
    const name = e.target.value;
    if (!name || name === active) return;
    try { await callTool("cluster_switch", { cluster: name }); setErr(null); s.refreshClusters(); } catch (x) { setErr(x); e.target.value = active || ""; }
  };
  return html`<div class="switch">
    <label for="cluster-switch">Cluster</label>
    <span class=${why ? "needs-scope" : ""} title=${why || "Switch the active cluster (cluster_switch)"}>
    <select id="cluster-switch" onChange=${change} disabled=${!!why || !s.clusters} title=${why || undefined}>
      ${!active && html`<option value="">${s.clusters ? (list.length ? "— none active —" : "no clusters") : "…"}</option>`}
      ${list.map((c) => html`<option value=${c.name} selected=${c.name === active}>${c.name}</option>`)}
    </select></span>
    <span class="region" title="region">${(s.clusters && s.clusters.region) || ""}</span>
    ${err && html`<span class="field-error" role="alert">${err.message}</span>`}
  </div>`;
}

function App({ who }) {
  const route = useRoute();
  const [pages, setPages] = useState(null);
  const [tools, setTools] = useState(null);
  const [toolsError, setToolsError] = useState(null);
  const [clusters, setClusters] = useState(null);
  const [drawer, setDrawer] = useState(false);
  const [navOpen, setNavOpen] = useState(false);
  const running = useRunning();
  const reloadTools = useCallback(() => listTools().then((r) => { setTools(r.tools || []); setToolsError(null); return r; },
    (e) => setToolsError(e)), []);
  const refreshClusters = useCallback(() => callTool("cluster_list", {}).then(setClusters, () => setClusters({ clusters: [], error: true })), []);
  useEffect(() => {
    Promise.all(names.map((n) => import(`/pages/${n}.js`).then((m) => ({ name: n, ...m.default })))).then(setPages);
    reloadTools();
    refreshClusters();
    // the active cluster changes (state), and operations that end may have made or removed one
    let t = null;
    const soon = () => { clearTimeout(t); t = setTimeout(refreshClusters, 300); };
    const off = ws.on("state", soon);
    const offOps = ws.on("operations", (ev) => { if (ev.status !== "running") soon(); });
    return () => { off(); offOps(); clearTimeout(t); };
  }, []);
  useEffect(() => setNavOpen(false), [route.path]);
  let page = null;
  let params = null;
  for (const p of pages || []) { params = match(p.path, route.path); if (params) { page = p; break; } }
  useEffect(() => {
    const t = page ? (typeof page.title === "function" ? page.title(params) : page.title) : "Not found";
    document.title = t + " · hypd";
  });
  const session = { who, tools, toolsError, reloadTools, clusters, refreshClusters };
  const nav = (pages || []).filter((p) => p.nav);
  const current = (p) => route.path === (p.navPath || p.path) || route.path.startsWith((p.navPath || p.path) + "/") || page === p;
  const View = page && page.view;
  return html`<${Session.Provider} value=${session}>
    <div class=${"shell" + (navOpen ? " nav-open" : "")}>
      <a class="skip" href="#main" onClick=${(e) => { e.preventDefault(); document.getElementById("main").focus(); }}>Skip to content</a>
      <header class="topbar">
        <button class="btn nav-toggle" aria-expanded=${navOpen ? "true" : "false"} aria-controls="nav" onClick=${() => setNavOpen(!navOpen)}>Menu</button>
        <a class="brand" href=${href("/clusters")}>hypd</a>
        <${ClusterSwitch}/>
        <span class="spacer"></span>
        <button id="ops-indicator" class=${"btn ops-indicator" + (running.length ? " busy" : "")} aria-expanded=${drawer ? "true" : "false"}
          aria-controls="ops-drawer" onClick=${() => setDrawer(!drawer)}>
          <span class="ops-count">${running.length}</span> running</button>
        <span id="who" class="who" title=${`token ${who.name}, scope ${who.scope}`}>${who.name} <span class=${"scope scope-" + who.scope}>${who.scope}</span></span>
        <button class="btn btn-small" id="signout" onClick=${async () => { await logout().catch(() => {}); token.clear(); ws.stop(); history.replaceState(null, "", location.pathname); start(); }}>Sign out</button>
      </header>
      <${ConnectionBanner}/>
      <nav id="nav" class="nav" aria-label="Main">
        <ul>${nav.map((p) => html`<li><a href=${href(p.navPath || p.path.replace(/\/:[^/]*\?$/, ""))} aria-current=${current(p) ? "page" : undefined}>${p.nav}</a></li>`)}</ul>
      </nav>
      <main id="main" class="main" tabindex="-1">
        ${!pages ? null : View ? html`<${View} key=${route.path} params=${params} query=${route.query}/>`
          : html`<h1>Not found</h1><p>No page at <code>${route.path}</code>. <a href=${href("/clusters")}>Clusters</a></p>`}
        ${toolsError && html`<${ErrorBox} error=${toolsError}/>`}
      </main>
      ${drawer && html`<${Drawer} ops=${running} onClose=${() => { setDrawer(false); document.getElementById("ops-indicator")?.focus(); }}/>`}
    </div>
  </${Session.Provider}>`;
}

async function start() {
  const m = location.hash.match(/^#login=([A-Za-z0-9_-]+)$/);
  if (m) {
    history.replaceState(null, "", location.pathname);
    try {
      token.set((await login(m[1])).token);
    } catch (e) {
      return render(html`<${SignIn} message=${e.message}/>`, root);
    }
  }
  if (!token.get()) return render(html`<${SignIn}/>`, root);
  let who;
  try {
    who = await whoami();
  } catch (e) {
    token.clear();
    const replaced = !!(e.detail && e.detail.reason === "replaced");
    return render(html`<${SignIn} replaced=${replaced} message=${replaced
      ? "The server started again, and the token this tab held (the one it printed before) is replaced." : e.message}/>`, root);
  }
  ws.start();
  if (parse().path === "/") history.replaceState(null, "", href("/clusters"));
  render(html`<${App} who=${who}/>`, root);
}

// a refused token (a REST 401 or /ws's 4401): signed out, with the server's reason
window.addEventListener("hypd:unauthorized", (e) => {
  const err = e.detail || {};
  token.clear();
  ws.stop();
  const replaced = !!(err.detail && err.detail.reason === "replaced");
  render(html`<${SignIn} replaced=${replaced} message=${replaced
    ? "Signed out: the server started again, and the token this tab held (the one it printed before) is replaced."
    : "Signed out: " + (err.message || "the token is no longer valid") + "."}/>`, root);
});
start();
