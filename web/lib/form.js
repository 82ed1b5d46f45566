// One generic form for a tool's JSON Schema (GET /api/v1/tools/{name}
// input_schema). Types: string, integer, number, boolean, enum (a select),
// arrays (rows to add and remove), objects with properties (a fieldset),
// free-form objects (JSON), and unions of types (a choice of which; a
// feature, boolean or {enabled, options}, is a switch with its options
// shown when on). The x-hypd extensions: x-hypd-label (the field's label;
// its key is shown small beside it), x-hypd-help (the help under it, else
// its description), x-hypd-group and x-hypd-order (fields by group, then
// order: "decisions" first, "more" folded in a <details> that opens when
// it holds an invalid or required field), x-hypd-decision (marked as a
// choice the person must make), x-hypd-fixed (read-only when the form edits
// something that exists), x-hypd-pattern-help, writeOnly (a secret: a
// password field); a string of maxLength 16384 or more (a prompt, a script)
// is a textarea. A field of an optional object is marked required only once
// that object is given.
//
//   <SchemaForm schema id="run" values={prefill} hide={["plan"]}
//     existing={false} fixedReason="..." errors={ApiError}
//     choices={{ availability_zone: async (values) => ["us-west-2a", ...] }}
//     actions={[{label: "Plan", plan: true}, {label: "Run", kind: "mutating"}]}
//     onSubmit={(params, action) => ...}/>
//
// choices[field] is a function (values) -> [value | {value, label, group}],
// or {load, deps: ["other_field"], unknown: (value, values) -> "why"} to
// load again when those fields change (options with a group are shown in
// an <optgroup> each, in the order they come; a value the list does not
// hold is flagged with unknown's words).
// The server's VALIDATION errors (errors.fields[].field, paths like
// "features.training_operator.enabled" or "public_subnet_cidrs[1]") are
// shown next to the field they name; any that name no shown field are
// listed above the buttons. draft="key": what the person types is kept in
// sessionStorage under that key (web/lib/draft.js; secrets never), restored
// on a reload over the given values, and a "Clear the form" button drops it;
// the page drops it (dropDraft) once the form's call is accepted.
import { html, useEffect, useMemo, useRef, useState } from "/vendor/preact-htm.js";
import { Act } from "./ui.js";
import { dropDraft, loadDraft, saveDraft } from "./draft.js";

const typesOf = (s) => (Array.isArray(s.type) ? s.type : s.type ? [s.type] : s.enum ? ["string"] : s.properties ? ["object"] : []);
const isMap = (s) => typesOf(s)[0] === "object" && (!s.properties || Object.keys(s.properties).length === 0);
const join = (base, key) => (typeof key === "number" ? `${base}[${key}]` : base ? `${base}.${key}` : key);
const domId = (prefix, path) => prefix + "-" + path.replace(/[^A-Za-z0-9_-]+/g, "-");
const stripPath = (msg, path) => (msg && msg.startsWith(path + ": ") ? msg.slice(path.length + 2) : msg);
const GROUPS = { decisions: 1, more: 2 };
// byForm(props) -> [key, spec] by group ("decisions" first), then order; a
// schema without them: its decisions first, then the schema's order
const rank = (p) => GROUPS[p["x-hypd-group"]] || (p["x-hypd-decision"] ? 1 : 1.5);
export const byForm = (props) => Object.entries(props || {}).sort(([, p], [, q]) =>
  rank(p) - rank(q) || (p["x-hypd-order"] ?? 1e9) - (q["x-hypd-order"] ?? 1e9));
// a feature: true or false, or {enabled, options...}: a switch
const isFeature = (s, types) => types.includes("boolean") && types.includes("object") && !!(s.properties && s.properties.enabled);
// filled(s, o): an object field holds something besides its defaults (its fields' required marks then hold)
const filled = (s, o) => Object.entries(o || {}).some(([k, v]) => v !== undefined && v !== "" && !(Array.isArray(v) && !v.length) &&
  JSON.stringify(v) !== JSON.stringify(((s.properties || {})[k] || {}).default));

// initial(schema, given) -> the form's starting value for one field
function initial(s, given) {
  if (given !== undefined) return given;
  if (s.default !== undefined) return s.default;
  const t = typesOf(s)[0];
  if (t === "object" && s.properties && !isMap(s)) {
    const o = {};
    for (const [k, p] of Object.entries(s.properties)) {
      const v = initial(p);
      if (v !== undefined) o[k] = v;
    }
    return o;
  }
  return undefined;
}

// collect(schema, value, given) -> the parameters to send: empty fields and
// untouched defaults left out (the server applies its defaults), numbers
// converted when they read as numbers (otherwise sent as typed, so the
// server's error names the field)
function collect(s, v, given) {
  if (given !== undefined && v === given) return v;
  const types = typesOf(s);
  if (v === undefined || v === null || v === "") return undefined;
  if (types.includes("object") && typeof v === "object" && !Array.isArray(v) && s.properties && !isMap(s)) {
    const o = {};
    for (const [k, p] of Object.entries(s.properties)) {
      const x = collect(p, v[k], given && given[k]);
      if (x !== undefined) o[k] = x;
    }
    return Object.keys(o).length || (given !== undefined) ? o : undefined;
  }
  if (types.includes("array") && Array.isArray(v)) {
    const items = v.map((x) => collect(s.items || {}, x)).filter((x) => x !== undefined);
    return items.length ? items : undefined;
  }
  if ((types.includes("integer") || types.includes("number")) && typeof v === "string") {
    const n = Number(v.trim());
    return v.trim() !== "" && !isNaN(n) ? n : v;
  }
  if (s.default !== undefined && JSON.stringify(v) === JSON.stringify(s.default)) return undefined;
  if (types.includes("boolean") && v === false && s.default === undefined) return undefined;
  return v;
}

// useChoices(choices, values) -> {field: {list, loading, error}}
function useChoices(choices, values) {
  const [state, setState] = useState({});
  const keys = Object.entries(choices || {}).map(([k, c]) =>
    k + "=" + JSON.stringify((typeof c === "object" && c.deps ? c.deps : []).map((d) => values[d])));
  useEffect(() => {
    let live = true;
    for (const [k, c] of Object.entries(choices || {})) {
      const load = typeof c === "function" ? c : c.load;
      setState((s) => ({ ...s, [k]: { ...(s[k] || {}), loading: true } }));
      Promise.resolve().then(() => load(values)).then(
        (list) => live && setState((s) => ({ ...s, [k]: { list: (list || []).map((x) => (typeof x === "object" ? x : { value: x, label: String(x) })),
          unknown: (v) => (typeof c === "object" && c.unknown ? c.unknown(v, values) : null) } })),
        (e) => live && setState((s) => ({ ...s, [k]: { error: e.message || String(e) } })));
    }
    return () => { live = false; };
  }, [keys.join("&")]);
  return state;
}

// the help under a field (a field picked from a list needs no format)
function Help({ s, id, picked }) {
  const bits = [];
  const text = s["x-hypd-help"] || s.description;
  if (text) bits.push(text.replace(/([^.!?])\s*$/, "$1."));
  if (s["x-hypd-pattern-help"] && !picked) bits.push("Format: " + s["x-hypd-pattern-help"] + ".");
  if (s.minimum !== undefined || s.maximum !== undefined)
    bits.push(`From ${s.minimum ?? "−∞"} to ${s.maximum ?? "∞"}.`);
  if (s.default !== undefined && typeof s.default !== "object") bits.push(`Default: ${String(s.default)}.`);
  return bits.length ? html`<p class="help" id=${id}>${bits.join(" ")}</p>` : null;
}

// one field: its label, marks, control, help and server error
function Field({ ctx, s, path, idPath, name, value, onChange, required, union }) {
  const id = domId(ctx.prefix, idPath || path);
  ctx.shown.add(path);
  const types = typesOf(s);
  const title = s["x-hypd-label"] || name;
  // the key, small beside a human label (not for an array's rows)
  const key = s["x-hypd-label"] && !/\d$/.test(name) ? html`<code class="param-key">${name}</code>` : null;
  // a union's errors show beside the control of the type chosen
  const errs = types.length > 1 ? [] : ctx.errors.filter((e) => e.field === path);
  const decision = !!s["x-hypd-decision"];
  const fixed = !!s["x-hypd-fixed"];
  const readOnly = fixed && ctx.existing;
  const describedBy = [s["x-hypd-help"] || s.description || s["x-hypd-pattern-help"] ? id + "-help" : "", errs.length ? id + "-err" : "",
    readOnly ? id + "-fixed" : ""].filter(Boolean).join(" ") || undefined;
  const common = { id, name: path, "aria-describedby": describedBy, "aria-invalid": errs.length ? "true" : undefined,
    "aria-required": required ? "true" : undefined, disabled: readOnly || ctx.disabled, readOnly };
  let control;
  let group = false; // a fieldset of its own (objects, arrays, unions)
  let unknown = null; // why a chosen value is not among the choices loaded
  const choice = ctx.choices[path];
  if (isFeature(s, types)) {
    group = true;
    const on = value === true || (!!value && typeof value === "object" && value.enabled === true);
    const opts = value && typeof value === "object" ? value : {};
    const options = byForm(s.properties).filter(([k]) => k !== "enabled");
    control = html`<div class="feature-switch">
      <div class="check"><label class="toggle" for=${id}>
        <input type="checkbox" role="switch" ...${common} checked=${on} aria-checked=${on ? "true" : "false"}
          onChange=${(e) => onChange(e.target.checked ? (options.some(([k]) => opts[k] !== undefined) ? { ...opts, enabled: true } : true) : undefined)}/>
        <span class="toggle-track" aria-hidden="true"><span class="toggle-knob"></span></span>
        <span class="toggle-label">${title}</span></label> ${key}</div>
      ${on && options.length > 0 && html`<div class="object feature-options">${options.map(([k, p]) => html`<${Field} ctx=${ctx} s=${p} path=${join(path, k)}
        name=${k} value=${opts[k]} onChange=${(v) => onChange({ ...opts, enabled: true, [k]: v })}/>`)}</div>`}
    </div>`;
  } else if (types.length > 1) {
    group = true;
    const cur = types.find((t) => (t === "boolean" ? typeof value === "boolean" : t === "object" ? value && typeof value === "object" && !Array.isArray(value)
      : t === "array" ? Array.isArray(value) : t === "string" ? typeof value === "string" : typeof value === "number")) || types[0];
    control = html`<div class="union">
      <label class="inline" for=${id + "-as"}>Given as</label>
      <select id=${id + "-as"} disabled=${readOnly || ctx.disabled} onChange=${(e) => onChange(initial({ ...s, type: e.target.value, default: undefined }) ?? (e.target.value === "boolean" ? false : e.target.value === "object" ? {} : undefined))}>
        ${types.map((t) => html`<option value=${t} selected=${t === cur}>${t === "object" ? "object (with options)" : t}</option>`)}
      </select>
      <${Field} ctx=${ctx} s=${{ ...s, type: cur, description: undefined, "x-hypd-decision": false, default: undefined }} path=${path} idPath=${path + "-" + cur}
        name=${cur === "boolean" ? "enabled" : "value"} value=${value} onChange=${onChange} nested=${true}/>
    </div>`;
  } else if (choice && (choice.list || choice.loading)) {
    const list = choice.list || [];
    const known = list.some((o) => String(o.value) === String(value ?? ""));
    const opt = (o) => html`<option value=${o.value} selected=${String(o.value) === String(value ?? "")}>${o.label ?? o.value}</option>`;
    const groups = [...new Set(list.filter((o) => o.group).map((o) => o.group))];
    unknown = !known && !choice.loading && value !== undefined && value !== "" ? choice.unknown(value) : null;
    control = html`<select ...${common} aria-invalid=${unknown || errs.length ? "true" : undefined}
      aria-describedby=${[describedBy, unknown && id + "-err"].filter(Boolean).join(" ") || undefined}
      aria-busy=${choice.loading ? "true" : "false"} onChange=${(e) => onChange(e.target.value === "" ? undefined : e.target.value)}>
      <option value="" selected=${value === undefined || value === ""}>${choice.loading ? "Loading choices…" : required ? "— choose —" : "— not set —"}</option>
      ${!known && value !== undefined && value !== "" && html`<option value=${value} selected>${value}${unknown ? " (not offered)" : ""}</option>`}
      ${groups.length ? [...groups.map((g) => html`<optgroup label=${g}>${list.filter((o) => o.group === g).map(opt)}</optgroup>`), ...list.filter((o) => !o.group).map(opt)]
        : list.map(opt)}
    </select>`;
  } else if (s.enum) {
    control = html`<select ...${common} onChange=${(e) => onChange(e.target.value === "" ? undefined : s.enum.find((x) => String(x) === e.target.value))}>
      ${(!required || value === undefined) && s.default === undefined && html`<option value="" selected=${value === undefined}>${required ? "— choose —" : "— not set —"}</option>`}
      ${s.enum.map((x) => html`<option value=${String(x)} selected=${x === value}>${String(x)}</option>`)}
    </select>`;
  } else if (types[0] === "boolean") {
    control = html`<input type="checkbox" ...${common} checked=${!!value} onChange=${(e) => onChange(e.target.checked)}/>`;
  } else if (types[0] === "integer" || types[0] === "number") {
    control = html`<input type="number" inputmode=${types[0] === "integer" ? "numeric" : "decimal"} step=${types[0] === "integer" ? 1 : "any"}
      min=${s.minimum} max=${s.maximum} ...${common} value=${value ?? ""} onInput=${(e) => onChange(e.target.value)}/>`;
  } else if (types[0] === "array") {
    group = true;
    const list = Array.isArray(value) ? value : [];
    const items = s.items || {};
    control = html`<div class="array">
      ${list.map((x, i) => html`<div class="array-row">
        <${Field} ctx=${ctx} s=${{ ...items, description: undefined, "x-hypd-help": undefined }} path=${join(path, i)} name=${`${title} ${i + 1}`} value=${x}
          onChange=${(v) => onChange(list.map((y, j) => (j === i ? v : y)))} nested=${true}/>
        <button type="button" class="btn btn-small" disabled=${readOnly || ctx.disabled} aria-label=${`remove ${title} ${i + 1}`}
          onClick=${() => onChange(list.filter((_, j) => j !== i))}>Remove</button></div>`)}
      <button type="button" class="btn btn-small" id=${id + "-add"} disabled=${readOnly || ctx.disabled}
        onClick=${() => onChange([...list, initial(items) ?? (typesOf(items)[0] === "object" ? {} : "")])}>Add ${title}</button>
    </div>`;
  } else if (types[0] === "object" && !isMap(s)) {
    group = true;
    const o = value && typeof value === "object" ? value : {};
    // a field of an optional object is required once the object is given
    const req = new Set(required || filled(s, o) ? s.required || [] : []);
    control = html`<div class="object">${byForm(s.properties).map(([k, p]) => html`<${Field} ctx=${ctx} s=${p} path=${join(path, k)} name=${k}
      value=${o[k]} required=${req.has(k)} onChange=${(v) => onChange({ ...o, [k]: v })}/>`)}</div>`;
  } else if (types[0] === "object" || types.length === 0) {
    control = html`<${JsonInput} common=${common} value=${value} onChange=${onChange} ctx=${ctx} path=${path}/>`;
  } else if (!s.writeOnly && s.maxLength >= 16384) {
    // a long text (a prompt, a script): several lines
    control = html`<textarea rows="4" spellcheck="false" maxlength=${s.maxLength} ...${common} value=${value ?? ""} onInput=${(e) => onChange(e.target.value)}/>`;
  } else {
    control = html`<input type=${s.writeOnly ? "password" : "text"} autocomplete=${s.writeOnly ? "new-password" : "off"} spellcheck="false"
      minlength=${s.minLength} maxlength=${s.maxLength} ...${common} value=${value ?? ""} onInput=${(e) => onChange(e.target.value)}/>`;
  }
  const marks = html`${decision && html`<span class="mark mark-decision">your decision</span>`}
    ${required && html`<span class="mark mark-required">required</span>`}
    ${fixed && !ctx.existing && html`<span class="mark mark-fixed" title="It cannot change once created">fixed once created</span>`}
    ${s.writeOnly && html`<span class="mark mark-secret" title="Never stored or logged">secret</span>`}`;
  const cls = "field" + (decision ? " decision" : "") + (errs.length ? " invalid" : "") + (readOnly ? " readonly" : "");
  const tail = html`<${Help} s=${s} id=${id + "-help"} picked=${!!(choice && choice.list && choice.list.length)}/>
    ${readOnly && html`<p class="fixed-reason" id=${id + "-fixed"}>Read-only: ${ctx.fixedReason || "fixed when it was created; it cannot change now"}.</p>`}
    ${choice && choice.error && html`<p class="help">Choices could not be loaded (${choice.error}); type a value.</p>`}
    ${unknown && html`<p class="field-error" id=${id + "-err"} data-field=${path} data-unknown="true">${unknown}</p>`}
    ${errs.map((e) => html`<p class="field-error" id=${id + "-err"} data-field=${path}>${stripPath(e.message, path)}</p>`)}`;
  if (group) {
    // a feature: its switch is its label; its options follow it
    if (isFeature(s, types)) return html`<div class=${cls + " feature-field"} data-path=${path}>${control}${tail}</div>`;
    return html`<fieldset class=${cls + " group"} data-path=${path}><legend>${title} ${key} ${marks}</legend>${control}${tail}</fieldset>`;
  }
  const label = html`<label for=${id}>${title}</label>`;
  return html`<div class=${cls} data-path=${path}>
    ${types[0] === "boolean" && !s.enum ? html`<div class="check">${control} ${label} ${key} ${marks}</div>` : html`<div class="label-row">${label} ${key} ${marks}</div>${control}`}
    ${tail}</div>`;
}

// a free-form object (or anything without a type) as JSON text
function JsonInput({ common, value, onChange, ctx, path }) {
  const [text, setText] = useState(value === undefined ? "" : JSON.stringify(value, null, 2));
  const [bad, setBad] = useState(null);
  return html`<textarea class="code" rows="3" spellcheck="false" ...${common} value=${text} placeholder=${'JSON, e.g. {"key": "value"}'}
    onInput=${(e) => {
      const t = e.target.value;
      setText(t);
      if (t.trim() === "") { setBad(null); ctx.local.delete(path); return onChange(undefined); }
      try { onChange(JSON.parse(t)); setBad(null); ctx.local.delete(path); } catch (err) { setBad(err.message); ctx.local.set(path, "not valid JSON: " + err.message); }
    }}/>${bad && html`<p class="field-error">not valid JSON: ${bad}</p>`}`;
}

export function SchemaForm({ schema, id = "f", values: given = {}, hide = [], existing = false, fixedReason, errors, choices,
  actions = [{ label: "Run", kind: "mutating" }], onSubmit, busy = false, disabled = false, draft }) {
  const props = (schema && schema.properties) || {};
  const required = new Set((schema && schema.required) || []);
  const start = (kept = loadDraft(draft) || {}) => {
    const o = {};
    for (const [k, p] of Object.entries(props)) { const v = initial(p, kept[k] !== undefined ? kept[k] : given[k]); if (v !== undefined) o[k] = v; }
    return o;
  };
  const [values, setValues] = useState(() => start());
  // what the person types is written to the draft at once, in the input's
  // own handler: a reload straight after typing (before a render) keeps it
  const latest = useRef(values);
  latest.current = values;
  const change = (k, v) => {
    const next = { ...latest.current, [k]: v };
    latest.current = next;
    if (draft) saveDraft(draft, next, schema);
    setValues(next);
  };
  const givenKey = JSON.stringify(given);
  const first = useRef(true);
  useEffect(() => { if (first.current) { first.current = false; return; } setValues(start()); }, [givenKey, schema, draft]);
  const loaded = useChoices(choices, values);
  const local = useMemo(() => new Map(), [schema]);
  const ctx = { prefix: id, errors: (errors && errors.fields) || [], shown: new Set(), existing, fixedReason, choices: loaded,
    disabled, local };
  const hidden = new Set(hide);
  // by group ("decisions" first), then order; the rest ("more") folded
  const ordered = byForm(props).map(([k]) => k).filter((k) => !hidden.has(k));
  const more = ordered.filter((k) => props[k]["x-hypd-group"] === "more");
  const main = ordered.filter((k) => props[k]["x-hypd-group"] !== "more");
  // the folded options open by themselves when one of them is invalid or required
  const top = (f) => String(f).split(/[.[]/)[0];
  const mustOpen = more.some((k) => required.has(k)) || ctx.errors.some((e) => more.includes(top(e.field))) ||
    [...local.keys()].some((p) => more.includes(top(p)));
  // and when a kept draft holds one of them, so that what is kept shows
  // (once the schema gives the folded fields: after a reload it comes later)
  const [moreOpen, setMoreOpen] = useState(false);
  const draftLooked = useRef(false);
  useEffect(() => {
    if (draftLooked.current || more.length === 0) return;
    draftLooked.current = true;
    if (Object.keys(loadDraft(draft) || {}).some((k) => more.includes(k))) setMoreOpen(true);
  }, [more.length, draft]);
  useEffect(() => { if (mustOpen) setMoreOpen(true); }, [mustOpen, errors]);
  const submit = (action) => {
    const params = {};
    for (const [k, p] of Object.entries(props)) {
      const x = collect(p, values[k], given[k]);
      if (x !== undefined) params[k] = x;
    }
    onSubmit && onSubmit(params, action);
  };
  const field = (k) => html`<${Field} ctx=${ctx} s=${props[k]} path=${k} name=${k} value=${values[k]}
    required=${required.has(k)} onChange=${(v) => change(k, v)}/>`;
  // with no decisions, the other fields are the form (nothing to fold them under)
  const fields = main.length === 0 ? more.map(field) : html`${main.map(field)}
    ${more.length > 0 && html`<details class="more-options" id=${id + "-more"} open=${moreOpen}
      onToggle=${(e) => setMoreOpen(e.currentTarget.open)}>
      <summary>More options <span class="muted">(${more.length}: ${more.slice(0, 4).map((k) => props[k]["x-hypd-label"] || k).join(", ")}${more.length > 4 ? ", …" : ""})</span></summary>
      ${more.map(field)}</details>`}`;
  const hasDecision = ordered.some((k) => props[k]["x-hypd-decision"]);
  return html`<form class="schema-form" id=${id} noValidate onSubmit=${(e) => { e.preventDefault(); submit(actions[actions.length - 1]); }}>
    ${hasDecision && html`<p class="help legend-decision"><span class="mark mark-decision">your decision</span> marks the choices you must make; the rest have defaults or are computed.</p>`}
    ${ordered.length === 0 && html`<p class="muted">This tool takes no parameters.</p>`}
    ${fields}
    <${Leftover} ctx=${ctx} errors=${errors}/>
    <div class="form-actions">
      ${actions.map((a, i) => html`<${Act} kind=${a.plan ? "read" : a.kind || "mutating"} quiet=${!!a.plan} doing=${a.plan ? undefined : a.doing} type=${i === actions.length - 1 ? "submit" : "button"}
        class=${a.plan ? "btn-plan" + (actions.length === 1 ? " btn-primary" : "") : "btn-run"} id=${id + "-" + a.label.toLowerCase().replace(/\W+/g, "-")} disabled=${busy || disabled}
        onClick=${i === actions.length - 1 ? undefined : () => submit(a)}>${a.label}</${Act}>`)}
      ${draft && html`<button type="button" class="btn btn-small form-clear" id=${id + "-clear"} disabled=${busy}
        onClick=${() => { dropDraft(draft); setValues(start({})); }}>Clear the form</button>`}
      ${busy && html`<span class="muted" role="status">Working…</span>`}
    </div>
  </form>`;
}

// the server's errors that name no field shown (listed after the fields are drawn)
function Leftover({ ctx, errors }) {
  if (!errors) return null;
  const rest = ctx.errors.filter((e) => !ctx.shown.has(e.field));
  const n = ctx.errors.length;
  return html`<div class="form-errors" role="alert">
    <p class="field-error"><strong>${errors.code || "ERROR"}</strong>: ${n ? `${n} ${n === 1 ? "field needs" : "fields need"} a change (shown beside ${n === 1 ? "it" : "each"})` : errors.message}</p>
    ${rest.map((e) => html`<p class="field-error" data-field=${e.field}><code>${e.field}</code>: ${stripPath(e.message, e.field)}</p>`)}
  </div>`;
}
