// hypd's web UI: the entry module. Signs in (a pasted token, or the
// one-time code of a sign-in link in the URL fragment), then shows who is
// signed in. The token lives in this tab's session storage only.
const KEY = "hypd.token";
const app = document.getElementById("app");

async function api(path, opts = {}) {
  const token = sessionStorage.getItem(KEY);
  const headers = { ...(opts.headers || {}) };
  if (token) headers.authorization = "Bearer " + token;
  if (opts.body !== undefined) headers["content-type"] = "application/json";
  const r = await fetch("/api/v1" + path, { ...opts, headers,
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body) });
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw Object.assign(new Error((body.error && body.error.message) || r.statusText), body.error || {});
  return body;
}

function el(tag, attrs = {}, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  for (const k of kids) e.append(k);
  return e;
}

async function signIn(message) {
  const input = el("input", { id: "token", type: "password", autocomplete: "off", "aria-label": "token" });
  const go = el("button", { id: "signin", type: "submit" }, "Sign in");
  const form = el("form", {}, el("h1", {}, "hypd"), el("p", {}, "Paste a token (hypd token create)"), input, go,
    el("p", { id: "message", role: "alert" }, message || ""));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(KEY, input.value.trim());
    start();
  });
  app.replaceChildren(form);
}

async function start() {
  const m = location.hash.match(/^#login=([A-Za-z0-9_-]+)$/);
  if (m) {
    history.replaceState(null, "", location.pathname);
    try {
      const r = await api("/auth/login", { method: "POST", body: { code: m[1] } });
      sessionStorage.setItem(KEY, r.token);
    } catch (e) {
      return signIn(e.message);
    }
  }
  if (!sessionStorage.getItem(KEY)) return signIn();
  try {
    const who = await api("/auth/whoami");
    app.replaceChildren(el("p", { id: "who" }, `Signed in as ${who.name} (${who.scope})`));
  } catch (e) {
    sessionStorage.removeItem(KEY);
    signIn(e.message);
  }
}

start();
