// The signed-in session the pages share: who (name, scope), the registry
// of tools (by name), and what the token's scope allows.
import { createContext, useContext } from "/vendor/preact-htm.js";

export const SCOPES = { read: 1, operate: 2, admin: 3 };
export const KIND_SCOPE = { read: "read", mutating: "operate", destructive: "admin" };
export const Session = createContext(null);
export const useSession = () => useContext(Session);

// denied(who, kind [, doing]) -> null when the scope allows a tool of this kind, else why not
// (doing: what the button does, "applying": a plan needs only read, so a read token plans)
export function denied(who, kind, doing) {
  const need = KIND_SCOPE[kind] || "admin";
  if (who && (SCOPES[who.scope] || 0) >= SCOPES[need]) return null;
  if (doing) return `Your token (${who ? who.name : "?"}) has scope ${who ? who.scope : "none"}: it can plan; ${doing} needs scope ${need}`;
  return `Needs a token with scope ${need}; this one (${who ? who.name : "?"}) has scope ${who ? who.scope : "none"}`;
}
