// A create that HyperPod cannot give capacity to (an insufficient_capacity
// fault in the sandbox, continuous provisioning): the create page's "Now"
// line carries HyperPod's InsufficientCapacity message (its child
// hyperpod_create's progress, relayed to cluster_create), and the
// operation's log has the wait's notes with the nodes' message at each
// check, not only "0 of 1 nodes Ready".
import { scenario, URL } from "../lib.mjs";
import { call, openAt, waitOperation } from "../clusters.mjs";

const SANDBOX = process.env.HYPD_SANDBOX;
const faults = (spec) => fetch(SANDBOX + "/_sandbox/faults", { method: "POST", body: JSON.stringify(spec),
  headers: { "content-type": "application/json" } });

await scenario("a create short of capacity shows HyperPod's InsufficientCapacity message with the wait", async (page, check) => {
  check(URL && SANDBOX, "the server and its sandbox");
  const type = "ml.g5.4xlarge";
  check((await faults({ insufficient_capacity: [{ instance_type: type, zone: "us-west-2a" }] })).ok, "the fault is set");
  let v;
  try {
    const r = await call("cluster_create", { cluster_tag: "ui-short", availability_zone: "us-west-2a", instance_type: type, instance_count: 1 });
    v = await waitOperation(r.operation_id, 300);
  } finally {
    await faults({});
  }
  check(v.status === "failed" && /INSUFFICIENT_CAPACITY/.test(JSON.stringify(v.error)), "it gives up after HyperPod's grace: " + v.status);
  await openAt(page, "/create?op=" + v.operation_id);
  await page.waitForSelector('.progress[data-status="failed"]');
  const now = await page.textContent(".progress .op-now");
  check(/InsufficientCapacity/.test(now) && /hyperpod_create/.test(now), "the Now line names the child and HyperPod's message: " + now);
  await page.goto(URL + "/#/operations/" + v.operation_id); // signed in already
  await page.waitForSelector(".oplog");
  await page.evaluate(() => { document.querySelector(".oplog").open = true; });
  const notes = await page.$$eval(".oplog .log li", (xs) => xs.filter((x) => x.querySelector(".log-k").textContent === "progress")
    .map((x) => x.textContent));
  const said = notes.filter((n) => /HyperPod says: 1 node \w+: Waiting for capacity: InsufficientCapacity/.test(n));
  check(said.length >= 2, `the log's wait notes carry the nodes' message at every check (${said.length} of ${notes.length})`);
  await page.evaluate(() => {
    const li = [...document.querySelectorAll(".oplog .log li")].find((x) => /InsufficientCapacity/.test(x.textContent));
    if (li) li.scrollIntoView();
  });
});
