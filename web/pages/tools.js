// Tools: every tool in the registry (built-in and playbook tools),
// searchable (#/tools?q=word), each opening its generated form.
import { html } from "/vendor/preact-htm.js";
import { href, setQuery } from "/lib/router.js";
import { useSession } from "/lib/session.js";
import { Empty, Loading } from "/lib/ui.js";

export const KIND_LABEL = { read: "read", mutating: "changes things", destructive: "removes things" };

function Tools({ query }) {
  const { tools, toolsError } = useSession();
  const q = (query.q || "").toLowerCase();
  const list = (tools || []).filter((t) => !q || (t.name + " " + t.summary + " " + (t.description || "")).toLowerCase().includes(q));
  const groups = {};
  for (const t of list) (groups[t.name.split("_")[0]] ||= []).push(t);
  return html`<h1>Tools</h1>
    <p class="muted">Every tool hypd has, with a form made from its parameters. Playbook tools from the playbook directory appear here too.</p>
    <div class="filters" role="search">
      <label for="tool-search">Search</label>
      <input id="tool-search" type="search" value=${query.q || ""} placeholder="name or words of its description"
        onInput=${(e) => setQuery({ q: e.target.value })}/>
      <span class="muted" aria-live="polite">${tools ? `${list.length} of ${tools.length}` : ""}</span>
    </div>
    ${!tools ? !toolsError && html`<${Loading} what="Loading tools"/>`
      : list.length === 0 ? html`<${Empty} title="No tool matches."><a href=${href("/tools")}>Show every tool</a></${Empty}>`
      : Object.entries(groups).map(([g, ts]) => html`<section class="tool-group"><h2>${g}</h2>
        <ul class="tool-list">${ts.map((t) => html`<li data-tool=${t.name}>
          <div class="tool-head"><a href=${href("/tools/" + t.name)}><code>${t.name}</code></a>
          <span class=${"kind kind-" + t.kind}>${KIND_LABEL[t.kind] || t.kind}</span>
          ${t.staged && html`<span class="kind">staged</span>`}
          ${t.source !== "built-in" && html`<span class="kind kind-playbook" title=${t.source}>playbook</span>`}
          ${(t.overridden_by || []).length > 0 && html`<span class="kind kind-playbook" title=${t.overridden_by.join(", ")}>overridden</span>`}</div>
          <div class="muted">${t.summary}</div></li>`)}</ul></section>`)}`;
}

export default { path: "/tools", title: "Tools", nav: "Tools", view: Tools };
