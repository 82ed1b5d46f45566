// The log viewer of a finished training job: the lines its finished pods
// kept (said so), searched as you type (the count of matches, each match
// marked, Escape clears), timestamps shown or hidden, and the lines shown
// downloaded as a .txt file (a Blob URL under the page's CSP) whose text is
// those lines with their times and pods.
import { readFileSync } from "node:fs";
import { needing } from "../lib.mjs";
import { call, openAt, waitOperation } from "../clusters.mjs";
import { lines, trainingCluster } from "../workloads.mjs";

await needing(["job_get_logs"], "logs: a finished job's kept lines, searched, with timestamps, downloaded as text", async (page, check) => {
  const name = await trainingCluster("ui-train"); // 92-training's cluster (made again if it ran alone)
  const sub = await call("training_submit", { cluster: name, recipe: "pytorch-torchrun",
    params: { job_name: "logs-job", instance_type: "ml.g5.2xlarge", script: "scripts/train.py" } });
  check((await waitOperation(sub.operation_id)).status === "succeeded", "the job is submitted");
  for (let i = 0; i < 30; i++) {
    const j = await call("training_get_job", { cluster: name, name: "logs-job", wait_seconds: 20 });
    if (j.phase === "Completed" || j.phase === "Failed") break;
  }
  await openAt(page, `/training/logs-job?cluster=${name}`);
  await page.waitForSelector('.job-facts[data-phase="Completed"]', { timeout: 30000 });
  await page.waitForSelector("#logs li[data-pod]", { timeout: 30000 });
  await page.waitForSelector("#logs .log-kept");
  check(/finished: these are the lines its finished pods kept/.test(await page.textContent("#logs .log-kept")), "the view says these are the kept lines of finished pods");
  const all = await lines(page);
  check(all.length > 3, `the finished pods' lines are shown (${all.length})`);
  check((await page.$$eval("#logs li[data-pod] .log-pod", (xs) => xs.map((x) => x.textContent))).every((p) => p.startsWith("logs-job-")), "each line names its pod");

  // timestamps: the log API's time of each line, hidden and shown again
  const stamps = await page.$$eval("#logs li[data-pod] time.log-time", (xs) => xs.map((x) => [x.textContent, x.getAttribute("datetime")]));
  check(stamps.length === all.length && stamps.every(([t, d]) => /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}$/.test(t) && d && d.startsWith(t.slice(0, 10) + "T" + t.slice(11, 19))),
    "every line shows its time, to the millisecond, from the log's own timestamp: " + JSON.stringify(stamps[0]));
  await page.click("#logs-stamps");
  check((await page.$$("#logs li[data-pod] time.log-time")).length === 0, "the timestamps can be hidden");
  await page.click("#logs-stamps");
  check((await page.$$("#logs li[data-pod] time.log-time")).length === all.length, "and shown again");

  // search: a word some lines have and others not, typed in the box
  const words = [...new Set(all.join(" ").split(/[^A-Za-z]+/).filter((w) => w.length > 3))];
  const word = words.find((w) => { const n = all.filter((l) => l.toLowerCase().includes(w.toLowerCase())).length; return n > 0 && n < all.length; });
  check(!!word, "the lines hold a word some lines have and others not");
  const want = all.filter((l) => l.toLowerCase().includes(word.toLowerCase())).length;
  await page.focus("#logs-find");
  await page.keyboard.type(word.toUpperCase());
  await page.waitForFunction((n) => Number(document.querySelector("#logs .loglines").dataset.shown) === n, want, { timeout: 5000 });
  check(new RegExp(`^${want} of ${all.length} lines? match`).test(await page.textContent("#logs-found")), `the count says ${want} of ${all.length}: ` + await page.textContent("#logs-found"));
  const shown = await lines(page);
  check(shown.every((l) => l.toLowerCase().includes(word.toLowerCase())), "only the matching lines are left (any case)");
  check((await page.$$eval("#logs li[data-pod] .log-line mark", (xs) => xs.map((x) => x.textContent.toLowerCase()))).every((m) => m === word.toLowerCase())
    && (await page.$$("#logs li[data-pod] .log-line mark")).length >= want, "each match is marked");
  await page.screenshot({ path: `${process.env.HYPD_SHOTS || "/tmp"}/logs-search.png`, fullPage: true });

  // download: the lines shown, as text, through a Blob URL
  const [dl] = await Promise.all([page.waitForEvent("download", { timeout: 10000 }), page.click("#logs-download")]);
  check(/^logs-job-matching\.txt$/.test(dl.suggestedFilename()), "the file is named for the job and the search: " + dl.suggestedFilename());
  const text = readFileSync(await dl.path(), "utf8").trimEnd().split("\n");
  check(text.length === want, `the file has the ${want} lines shown (${text.length})`);
  check(text.every((t, i) => t.endsWith(shown[i]) && /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z logs-job-\S+ /.test(t)), "each with its time and pod: " + text[0]);

  await page.focus("#logs-find");
  await page.keyboard.press("Escape");
  await page.waitForFunction((n) => Number(document.querySelector("#logs .loglines").dataset.shown) === n, all.length, { timeout: 5000 });
  check((await page.inputValue("#logs-find")) === "", "Escape clears the search and every line is back");
  const [dl2] = await Promise.all([page.waitForEvent("download", { timeout: 10000 }), page.click("#logs-download")]);
  check(readFileSync(await dl2.path(), "utf8").trimEnd().split("\n").length === all.length, "without a search the file has every line");
});
