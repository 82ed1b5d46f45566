// Hash routing: #/operations/op-1?status=running. The page, the selected
// item and the filters live in the URL so it can be shared (the token never
// does). match(pattern, path) with ":name" segments (":name?" optional).
import { useEffect, useState } from "/vendor/preact-htm.js";

export function parse(hash = location.hash) {
  const h = hash.replace(/^#/, "") || "/";
  const [p, q = ""] = h.split("?");
  const query = Object.fromEntries(new URLSearchParams(q));
  return { path: p.startsWith("/") ? p : "/" + p, query };
}

export function match(pattern, path) {
  const ps = pattern.split("/").filter(Boolean);
  const xs = path.split("/").filter(Boolean);
  const params = {};
  for (let i = 0; i < Math.max(ps.length, xs.length); i++) {
    const p = ps[i];
    if (p === undefined) return null;
    if (p.startsWith(":")) {
      const name = p.replace(/^:|\?$/g, "");
      if (xs[i] === undefined) { if (p.endsWith("?")) continue; return null; }
      params[name] = decodeURIComponent(xs[i]);
    } else if (p !== xs[i]) return null;
  }
  return params;
}

// href(path, query) -> "#/path?k=v" (empty values left out)
export function href(path, query = {}) {
  const q = new URLSearchParams(Object.entries(query).filter(([, v]) => v !== undefined && v !== null && v !== ""));
  const s = q.toString();
  return "#" + path + (s ? "?" + s : "");
}

export function navigate(path, query, { replace = false } = {}) {
  const h = href(path, query);
  if (replace) history.replaceState(null, "", h); else history.pushState(null, "", h);
  window.dispatchEvent(new HashChangeEvent("hashchange"));
}

// setQuery(changes): the current page's filters, replacing the history entry
export function setQuery(changes) {
  const { path, query } = parse();
  navigate(path, { ...query, ...changes }, { replace: true });
}

// useRoute() -> {path, query}, re-rendering on every change of the hash
export function useRoute() {
  const [r, setR] = useState(parse());
  useEffect(() => {
    const f = () => setR(parse());
    window.addEventListener("hashchange", f);
    return () => window.removeEventListener("hashchange", f);
  }, []);
  return r;
}
