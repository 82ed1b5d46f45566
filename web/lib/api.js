// hypd's REST API from the browser: every call carries the tab's token
// (session storage "hypd.token", never a URL, cookie or local storage).
// Errors are thrown as ApiError {code, message, fields: [{field, rule, message}], status}.
// Each call tells window "hypd:network" (detail: whether the server answered)
// for the one connection banner; a 401 tells "hypd:unauthorized" (detail: the ApiError).
const KEY = "hypd.token";

export const token = {
  get: () => sessionStorage.getItem(KEY),
  set: (t) => sessionStorage.setItem(KEY, t),
  clear: () => sessionStorage.removeItem(KEY),
};

export class ApiError extends Error {
  constructor(status, body) {
    const e = (body && body.error) || {};
    super(e.message || `HTTP ${status}`);
    this.status = status;
    this.code = e.code || (status === 0 ? "NETWORK" : "HTTP_" + status);
    this.fields = Array.isArray(e.fields) ? e.fields : [];
    this.detail = e;
  }
}

// api(path, {method, body, signal}) -> the decoded JSON answer (path is under /api/v1)
export async function api(path, opts = {}) {
  const headers = {};
  const t = token.get();
  if (t) headers.authorization = "Bearer " + t;
  if (opts.body !== undefined) headers["content-type"] = "application/json";
  let r;
  try {
    r = await fetch("/api/v1" + path, { method: opts.method || (opts.body !== undefined ? "POST" : "GET"),
      headers, signal: opts.signal, body: opts.body === undefined ? undefined : JSON.stringify(opts.body) });
  } catch (e) {
    if (e.name === "AbortError") throw e;
    window.dispatchEvent(new CustomEvent("hypd:network", { detail: false }));
    throw new ApiError(0, { error: { code: "NETWORK", message: "the server cannot be reached: " + e.message } });
  }
  window.dispatchEvent(new CustomEvent("hypd:network", { detail: true }));
  const body = await r.json().catch(() => ({}));
  if (!r.ok) {
    const err = new ApiError(r.status, body);
    if (r.status === 401) window.dispatchEvent(new CustomEvent("hypd:unauthorized", { detail: err }));
    throw err;
  }
  return body;
}

const enc = encodeURIComponent;
const qs = (q) => {
  const p = Object.entries(q || {}).filter(([, v]) => v !== undefined && v !== null && v !== "");
  return p.length ? "?" + p.map(([k, v]) => enc(k) + "=" + enc(v)).join("&") : "";
};

// the calls the pages share
export const whoami = () => api("/auth/whoami");
export const login = (code) => api("/auth/login", { body: { code } });
// Sign out: the server revokes the token if a sign-in link made it
export const logout = () => api("/auth/logout", { method: "POST" });
export const listTools = () => api("/tools");
export const getTool = (name) => api("/tools/" + enc(name));
// callTool(name, params) -> a read tool's result, or {operation_id, status_tool, ...} for a staged one
export const callTool = (name, params = {}) => api("/tools/" + enc(name), { body: params });
export const listOperations = (q) => api("/operations" + qs(q));
export const getOperation = (id, q) => api("/operations/" + enc(id) + qs(q));
export const operationEvents = (id, q) => api("/operations/" + enc(id) + "/events" + qs(q));
export const cancelOperation = (id) => api("/operations/" + enc(id) + "/cancel", { body: {} });
export const reloadPlaybooks = () => api("/playbooks/reload", { body: {} });
