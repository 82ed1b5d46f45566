// Small shared components: status pill, relative time, loading and empty
// states, an error box, formatted JSON, a button that a token's scope may
// disable (with the reason as its tooltip), and the confirmation dialog.
import { html, useEffect, useRef, useState } from "/vendor/preact-htm.js";
import { denied, useSession } from "./session.js";
import { tone as toneOf } from "./tone.js";

const ICON = { run: "●", ok: "✓", bad: "✕", warn: "■", muted: "○" };

// <Pill status="running" [title] [message]/>: the status as a word and a
// symbol (never by colour alone); a failed or degraded one shows its
// message beside it (what AWS or Kubernetes said), not only on hover
export function Pill({ status, title, message }) {
  const s = String(status ?? "unknown");
  const tone = toneOf(s);
  const pill = html`<span class=${"pill pill-" + tone} data-tone=${tone} title=${title || message || s}><span aria-hidden="true">${ICON[tone]}</span> ${s}</span>`;
  if (!message || (tone !== "bad" && tone !== "warn")) return pill;
  return html`<span class="pill-with-message">${pill} <span class="pill-message small">${message}</span></span>`;
}

export function ago(t, now = Date.now() / 1000) {
  const d = Math.round(now - t);
  if (d < 5) return "just now"; // a clock ahead of this browser's (or the virtual clock) reads as now
  const a = Math.abs(d);
  const f = a < 45 ? `${a} s` : a < 2700 ? `${Math.round(a / 60)} min` : a < 86400 * 1.5 ? `${Math.round(a / 3600)} h` : `${Math.round(a / 86400)} d`;
  return `${f} ago`;
}

// duration(seconds) -> "1 min 12 s"
export function duration(s) {
  if (s === undefined || s === null || isNaN(s)) return "";
  s = Math.max(0, s);
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  if (s < 60) return `${Math.round(s * 10) / 10} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
  return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
}

// <Time t=epochSeconds/>: "3 min ago", the absolute time on hover
export function Time({ t }) {
  const [, tick] = useState(0);
  useEffect(() => { const i = setInterval(() => tick((x) => x + 1), 15000); return () => clearInterval(i); }, []);
  if (!t) return html`<span class="muted">—</span>`;
  const d = new Date(t * 1000);
  return html`<time datetime=${d.toISOString()} title=${d.toLocaleString()}>${ago(t)}</time>`;
}

// <Loading/>: shown only after 300 ms, so fast answers never flash it
export function Loading({ what = "Loading" }) {
  const [show, setShow] = useState(false);
  useEffect(() => { const i = setTimeout(() => setShow(true), 300); return () => clearTimeout(i); }, []);
  return html`<div class="loading" role="status" aria-live="polite">${show ? what + "…" : ""}</div>`;
}

// <Empty title="No operations yet.">what to do next</Empty>
export function Empty({ title, children }) {
  return html`<div class="empty"><p class="empty-title">${title}</p>${children && html`<p>${children}</p>`}</div>`;
}

// <ErrorBox error=ApiError/>
export function ErrorBox({ error }) {
  if (!error) return null;
  // no server: the shell's one connection banner says so; the page reads again when it is back
  if (error.code === "NETWORK") return html`<p class="muted not-read">Not read yet: waiting for the connection.</p>`;
  return html`<div class="error-box" role="alert"><strong>${error.code || "ERROR"}</strong> ${error.message}
    ${error.fields && error.fields.length > 0 && html`<ul>${error.fields.map((f) => html`<li><code>${f.field}</code>: ${f.message}</li>`)}</ul>`}</div>`;
}

export function Json({ value }) {
  return html`<pre class="json" tabindex="0">${JSON.stringify(value, null, 2)}</pre>`;
}

// <Act kind="mutating" onClick=...>Run</Act>: a button the token's scope may
// disable; the reason is its tooltip and its accessible description
// (doing="applying": the reason names what needs the scope)
export function Act({ kind = "mutating", onClick, children, class: cls = "", disabled, type = "button", quiet = false, doing, ...rest }) {
  const who = useSession()?.who;
  const why = denied(who, kind, doing);
  const btn = html`<button type=${type} class=${"btn " + (kind === "destructive" ? "btn-danger " : kind === "read" || quiet ? "" : "btn-primary ") + cls}
    disabled=${!!why || disabled} aria-disabled=${why ? "true" : undefined} title=${why || rest.title}
    data-needs=${why ? "scope" : undefined} onClick=${onClick} ...${rest}>${children}</button>`;
  // a disabled button shows no tooltip in most browsers: its wrapper carries it
  return why ? html`<span class="needs-scope" title=${why}>${btn}</span>` : btn;
}

// <Confirm open title items=[names] [itemsLabel="This will remove:"] kept=[{name, why}] lost="what is lost"
//   [lostLabel="What is lost:"] typeToConfirm="name"
//   action="Delete" onConfirm onClose/>: a modal dialog (focus stays inside,
//   Escape closes) that names what will be removed, and what stays and why;
//   its content exists only while open (a page can hold several: one
//   #confirm-type at a time)
export function Confirm({ open, title, items = [], itemsLabel = "This will remove:", kept = [], lost, lostLabel = "What is lost:", typeToConfirm,
  action = "Delete", onConfirm, onClose, kind = "destructive" }) {
  const ref = useRef(null);
  const [typed, setTyped] = useState("");
  useEffect(() => {
    const d = ref.current;
    if (!d) return;
    if (open && !d.open) { setTyped(""); d.showModal(); }
    if (!open && d.open) d.close();
  }, [open]);
  const ok = !typeToConfirm || typed === typeToConfirm;
  return html`<dialog ref=${ref} class="dialog" aria-labelledby="confirm-title" onClose=${() => onClose && onClose()}
      onCancel=${(e) => { e.preventDefault(); onClose && onClose(); }}>
    ${open && html`<form method="dialog" onSubmit=${(e) => { e.preventDefault(); if (ok) { onConfirm(); } }}>
      <h2 id="confirm-title">${title}</h2>
      ${items.length > 0 && html`<p>${itemsLabel}</p><ul class="confirm-items">${items.map((i) => html`<li><code>${i}</code></li>`)}</ul>`}
      ${kept.length > 0 && html`<p>This keeps:</p><ul class="confirm-kept">${kept.map((k) => html`<li><code>${k.name}</code>: <span class="plan-why">${k.why}</span></li>`)}</ul>`}
      ${lost && html`<p class="lost"><strong>${lostLabel}</strong> ${lost}</p>`}
      ${typeToConfirm && html`<p><label for="confirm-type">Type <code>${typeToConfirm}</code> to confirm</label>
        <input id="confirm-type" autocomplete="off" value=${typed} onInput=${(e) => setTyped(e.target.value)}/></p>`}
      <div class="dialog-actions">
        <button type="button" class="btn" onClick=${() => onClose && onClose()}>Keep it</button>
        <button type="submit" class=${"btn " + (kind === "destructive" ? "btn-danger" : "btn-primary")} disabled=${!ok}>${action}</button>
      </div>
    </form>`}
  </dialog>`;
}
