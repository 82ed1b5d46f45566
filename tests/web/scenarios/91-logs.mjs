// The live log view's bookkeeping (web/lib/logs.js) in the browser: after
// a reconnect the server replays a tail that overlaps what was shown; the
// merger drops exactly the lines already shown (per pod, by the last time
// and how many lines had that time) and keeps the new ones, including
// identical lines that share a timestamp.
import { scenario } from "../lib.mjs";
import { openAt } from "../clusters.mjs";

await scenario("logs: a replay after a reconnect shows no line twice and loses none", async (page, check) => {
  await openAt(page, "/training");
  const r = await page.evaluate(async () => {
    const { merger, norm } = await import("/lib/logs.js");
    const m = merger();
    const L = (pod, time, line) => ({ pod, container: "c", time, line });
    const first = [L("a", "2026-01-01T00:00:01Z", "a1"), L("b", "2026-01-01T00:00:01.5Z", "b1"),
      L("a", "2026-01-01T00:00:02.000000001Z", "tick"), L("a", "2026-01-01T00:00:02.000000001Z", "tick")];
    const shown = first.filter((l) => m.accept(l)).map((l) => l.line);
    m.replay();
    const again = [L("a", "2026-01-01T00:00:01Z", "a1"), L("a", "2026-01-01T00:00:02.000000001Z", "tick"),
      L("a", "2026-01-01T00:00:02.000000001Z", "tick"), L("a", "2026-01-01T00:00:02.000000001Z", "tick"),
      L("b", "2026-01-01T00:00:01.5Z", "b1"), L("b", "2026-01-01T00:00:03Z", "b2"), L("a", "2026-01-01T00:00:04Z", "a4")];
    const more = again.filter((l) => m.accept(l)).map((l) => l.line);
    return { shown, more, order: [norm("2026-01-01T00:00:02.5Z") < norm("2026-01-01T00:00:02.123456789Z"),
      norm("2026-01-01T00:00:02.1Z") < norm("2026-01-01T00:00:02.12Z")] };
  });
  check(r.shown.join(",") === "a1,b1,tick,tick", "the first lines are all shown: " + r.shown.join(","));
  check(r.more.join(",") === "tick,b2,a4", "the replay adds only the third tick and the new lines: " + r.more.join(","));
  check(r.order[0] === false && r.order[1] === true, "times compare to the nanosecond whatever their digits");
});
