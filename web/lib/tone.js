// tone(status) -> "ok" | "run" | "warn" | "bad" | "muted": how a status of
// AWS, Kubernetes or hypd is drawn. Failed states are red, degraded and
// stopping ones amber, work under way blue, settled good ones green; grey
// is only for what says nothing either way (queued, skipped, unknown). A
// word no table names is judged by what it says (…Failed, …Error, Not…,
// Unhealthy, …Degraded), so a state hypd has not met yet is not grey when
// it is bad. tests/lua/web_tone_test.lua checks every state the sandbox
// can report.
const TONE = {
  // hypd's operations
  running: "run", pending: "muted", queued: "muted", succeeded: "ok", done: "ok", failed: "bad", cancelled: "warn",
  skipped: "muted", unknown: "muted", created: "muted",
  // AWS (EKS, SageMaker HyperPod, FSx, EC2) and Kubernetes
  active: "ok", inservice: "ok", available: "ok", ready: "ok", true: "ok", completed: "ok", complete: "ok",
  bound: "ok", schedulable: "ok", enabled: "ok", present: "ok", associated: "ok", attached: "ok", applied: "ok",
  creating: "run", updating: "run", deleting: "warn", systemupdating: "run", provisioning: "run", starting: "run",
  containercreating: "run", podinitializing: "run", terminating: "warn", stopping: "warn", shuttingdown: "warn",
  rollingback: "warn", partlyready: "warn", restarting: "warn", degraded: "warn", notready: "bad",
  unschedulable: "warn", unschedulablependingreplacement: "warn", unschedulablependingreboot: "warn",
  pendingreplacement: "warn", pendingreboot: "warn", notjoined: "warn", misconfigured: "bad", false: "bad",
  failure: "bad", error: "bad", crashloopbackoff: "bad", imagepullbackoff: "bad", errimagepull: "bad",
  oomkilled: "bad", lost: "bad", released: "warn", insufficientcapacity: "bad", deleted: "muted",
  disabled: "muted", missing: "warn", drifted: "warn", partial: "warn", success: "ok", successful: "ok",
  initializing: "run", scheduled: "run", inprogress: "run", associating: "run", disassociating: "warn", new: "muted",
  leftbehind: "warn", // a teardown's leftovers (the Clusters page)
};

export function tone(status) {
  const s = String(status ?? "unknown").toLowerCase().replace(/[^a-z]/g, "");
  if (TONE[s]) return TONE[s];
  if (/fail|error|unhealthy|invalid|backoff|notready|insufficient|misconfigured/.test(s)) return "bad";
  if (/degraded|shuttingdown|unschedulable|pending|warning|stopp|terminat|rollback|deleting/.test(s)) return "warn";
  if (/creating|updating|progress|starting/.test(s)) return "run";
  return "muted";
}
