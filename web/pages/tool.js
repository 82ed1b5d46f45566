// One tool (#/tools/NAME[?op=ID]): its description and generated form,
// and every file it loads (its own and the helpers it requires), where each
// comes from, and which of them take the place of built-in ones.
// A read tool's result is shown as JSON; a staged tool can be planned
// ("Plan": the rows it would create, change, delete or keep) before it
// runs, and its operation is followed live (its id goes into the URL, so a
// reload finds it again); a destructive tool asks first. A plan takes focus
// and scrolls into view; a read token plans (planning changes nothing) and
// only Run is disabled. What the person typed is kept as a draft
// ("tool:NAME") until the call is accepted.
import { html, useEffect, useState } from "/vendor/preact-htm.js";
import { callTool, getTool } from "/lib/api.js";
import { SchemaForm } from "/lib/form.js";
import { standard } from "/lib/choices.js";
import { OperationView } from "/lib/op.js";
import { PlanView, usePlanFocus } from "/lib/plan.js";
import { dropDraft } from "/lib/draft.js";
import { href, setQuery } from "/lib/router.js";
import { Act, Confirm, ErrorBox, Json, Loading } from "/lib/ui.js";
import { denied, useSession } from "/lib/session.js";
import { KIND_LABEL } from "./tools.js";
import { confirmWord } from "/lib/cluster-ui.js";

// Files: the modules a tool loads, each with its file and origin; a file of
// the playbook directory over a built-in one is marked overridden
function Files({ def }) {
  const modules = def.modules || [];
  const by = def.overridden_by || [];
  return html`<details class="tool-files" id="tool-files" open=${by.length > 0}>
    <summary>Files it loads (${modules.length})${by.length > 0 && html` <span class="kind kind-playbook">overridden</span>`}</summary>
    <ul>${modules.map((m) => html`<li data-module=${m.name}><code>${m.name}</code>
      ${m.overrides ? html` <span class="kind kind-playbook">overridden</span>` : m.source === "operator" ? html` <span class="kind kind-playbook">playbook</span>` : ""}
      <span class="muted"> ${m.file}</span> <span class="muted hash" title=${m.hash}>${(m.hash || "").slice(7, 19)}</span></li>`)}</ul></details>`;
}

function Tool({ params, query }) {
  const name = params.name;
  const [def, setDef] = useState(null);
  const [loadErr, setLoadErr] = useState(null);
  const [errors, setErrors] = useState(null);
  const [busy, setBusy] = useState(false);
  const [result, setResult] = useState(null); // {kind: "read"|"plan", value, params}
  const [ask, setAsk] = useState(null);       // params waiting for a destructive confirmation
  const { who } = useSession();
  const planRef = usePlanFocus(result && result.kind === "plan" ? result : null);
  const draft = "tool:" + name;
  useEffect(() => { getTool(name).then(setDef, setLoadErr); }, [name]);
  if (loadErr) return html`<h1>${name}</h1><${ErrorBox} error=${loadErr}/><p><a href=${href("/tools")}>All tools</a></p>`;
  if (!def) return html`<${Loading} what="Loading the tool"/>`;
  const run = async (p, plan) => {
    setBusy(true);
    setErrors(null);
    try {
      const r = await callTool(name, plan ? { ...p, plan: true } : p);
      if (!plan && def.kind !== "read") dropDraft(draft); // accepted: the draft's work is done
      if (r && r.operation_id && !plan) { setResult(null); setQuery({ op: r.operation_id }); }
      else setResult({ kind: plan ? "plan" : "result", value: r, params: p });
    } catch (e) {
      setErrors(e);
      setResult(null);
    } finally { setBusy(false); }
  };
  // a destructive call asks first, naming what goes: for a staged tool, the
  // delete rows of its plan; otherwise the parameters it was given
  const submit = async (p, action) => {
    if (action.plan) return run(p, true);
    if (def.kind !== "destructive") return run(p, false);
    let items = Object.entries(p).map(([k, v]) => `${k} = ${JSON.stringify(v)}`);
    let kept = [];
    if (def.staged) {
      setBusy(true);
      try {
        const plan = await callTool(name, { ...p, plan: true });
        items = (plan.plan || []).filter((r) => r.action === "delete").map((r) => `${r.type} ${r.name}`);
        if (!items.length) items = ["nothing: its plan deletes nothing"];
        kept = (plan.plan || []).filter((r) => r.action === "keep").map((r) => ({ name: `${r.type} ${r.name}`, why: r.why }));
      } catch (e) {
        setErrors(e);
        return;
      } finally { setBusy(false); }
    }
    setErrors(null);
    setAsk({ params: p, items, kept });
  };
  const actions = def.staged ? [{ label: "Plan", plan: true, kind: def.kind }, { label: "Run", kind: def.kind, doing: "applying" }]
    : [{ label: "Run", kind: def.kind }];
  return html`<p class="crumbs"><a href=${href("/tools")}>Tools</a> / <code>${name}</code></p>
    <h1><code>${name}</code> <span class=${"kind kind-" + def.kind}>${KIND_LABEL[def.kind] || def.kind}</span></h1>
    <p class="summary">${def.summary}</p>
    <details class="description"><summary>What it does</summary><p>${def.description}</p>
      <p class="muted">Needs scope ${def.scope}. ${def.source === "built-in" ? "Built in." : html`From <code>${def.source}</code>.`}
      ${def.status_tool && html` Followed with <a href=${href("/tools/" + def.status_tool)}><code>${def.status_tool}</code></a>.`}</p></details>
    ${(def.overridden_by || []).length > 0 && html`<p class="notice" id="overridden-notice">Overridden by the playbook directory: ${def.overridden_by.map((f, i) => html`${i ? ", " : ""}<code>${f}</code>`)}.</p>`}
    <${Files} def=${def}/>
    ${denied(who, def.kind) && html`<p class="notice" id="scope-notice">${def.staged ? html`${denied(who, def.kind, "applying")}. Plan shows what
      it would do, changing nothing.` : html`${denied(who, def.kind)}: its form is shown, but it cannot be run with this token.`}</p>`}
    <div class="tool-layout">
      <section class="tool-form" aria-label="parameters">
        <${SchemaForm} schema=${def.input_schema} id="tool-form" hide=${def.staged ? ["plan"] : []} errors=${errors} busy=${busy}
          choices=${standard(def.input_schema)} actions=${actions} onSubmit=${submit} draft=${draft}/>
      </section>
      <section class="tool-out" aria-label="result" aria-live="polite">
        ${query.op && html`<div class="op-panel"><p><a href=${href("/operations/" + query.op)}>Open the operation page</a></p>
          <${OperationView} id=${query.op}/></div>`}
        ${result && result.kind === "plan" && html`<section class="plan-out" id="plan-out" tabindex="-1" ref=${planRef} aria-labelledby="plan-h">
          <h2 id="plan-h">Plan</h2><${PlanView} plan=${result.value}/>
          <p><${Act} kind=${def.kind} id="plan-run" doing="applying" onClick=${() => submit(result.params, { label: "Run" })}>Run this plan</${Act}></p></section>`}
        ${result && result.kind === "result" && html`<h2>Result</h2><${Json} value=${result.value}/>`}
      </section>
    </div>
    <${Confirm} open=${!!ask} title=${`Run ${name}?`} action="Run it" typeToConfirm=${ask && confirmWord(def, ask.params)}
      items=${ask ? ask.items : []} kept=${ask ? ask.kept || [] : []} lost=${def.summary + ". This cannot be undone."}
      onConfirm=${() => { const p = ask.params; setAsk(null); run(p, false); }} onClose=${() => setAsk(null)}/>`;
}

export default { path: "/tools/:name", title: (p) => p.name, view: Tool };
