// The signed-in session the pages share: who (name, scope), the registry
// of tools (by name), and what the token's scope allows.
import { createContext, useContext } from "/vendor/preact-htm.js";

export const SCOPES = { read: 1, operate: 2, admin: 3 };
export const KIND_SCOPE = { read: "read", mutating: "operate", destructive: "admin" };
export const Session = createContext(null);
export const useSession = () => useContext(Session);

// denied(who, kind) -> null when the scope allows a tool of this kind, else why not
export function denied(who, kind) {
  const need = KIND_SCOPE[kind] || "admin";
  if (who && (SCOPES[who.scope] || 0) >= SCOPES[need]) return null;
  return `Needs a token with scope ${need}; this one (${who ? who.name : "?"}) has scope ${who ? who.scope : "none"}`;
}
