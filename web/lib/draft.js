// Drafts: what a person typed into a form, kept in this tab's
// sessionStorage under one key per form (the tool and the page's context:
// "tool:cluster_create", "models:model_download:hypd-demo"), so a reload
// or a failure never throws it away. A secret (a schema's writeOnly field:
// a Hugging Face token) is never written. The page drops the draft once the
// form's call is accepted, or when the person clears the form.
//
//   loadDraft(key) -> values | null
//   saveDraft(key, values, schema)     the values without their secrets
//   dropDraft(key)
//   withoutSecrets(schema, values) -> a copy with every writeOnly field left out
const PREFIX = "hypd.draft.";

function store() {
  try { return window.sessionStorage; } catch (e) { return null; } // storage refused (a privacy mode)
}

// withoutSecrets(schema, value): objects by their properties, arrays by their items
export function withoutSecrets(s, v) {
  if (!s || v === null || typeof v !== "object") return v;
  if (Array.isArray(v)) return s.items && s.items.writeOnly ? [] : v.map((x) => withoutSecrets(s.items, x));
  const props = s.properties || {};
  const out = {};
  for (const [k, x] of Object.entries(v)) {
    if (props[k] && props[k].writeOnly) continue;
    out[k] = props[k] ? withoutSecrets(props[k], x) : x;
  }
  return out;
}

export function loadDraft(key) {
  const s = store();
  if (!key || !s) return null;
  try { const v = JSON.parse(s.getItem(PREFIX + key) || "null"); return v && typeof v === "object" ? v : null; } catch (e) { return null; }
}

export function saveDraft(key, values, schema) {
  const s = store();
  if (!key || !s) return;
  try { s.setItem(PREFIX + key, JSON.stringify(withoutSecrets(schema, values))); } catch (e) { /* full: the draft is only a convenience */ }
}

export function dropDraft(key) {
  const s = store();
  if (key && s) s.removeItem(PREFIX + key);
}
