// Checks hypd.regex against ECMAScript's (node's RegExp), for
// tests/lua/regex_linear_test.lua: reads a JSON array of cases
// {p, s, test, match, groups} (groups: the group texts, null for one that
// took no part) and prints the ones node answers differently, as JSON.
"use strict";
const cases = JSON.parse(require("fs").readFileSync(process.argv[2], "utf8"));
const differ = [];
for (const c of cases) {
  const re = new RegExp(c.p, "u");
  const ex = re.exec(c.s);
  const groups = ex ? ex.slice(1).map((x) => (x === undefined ? null : x)) : [];
  if (re.test(c.s) !== c.test || (ex !== null) !== c.match ||
      (ex && JSON.stringify(groups) !== JSON.stringify(c.groups))) {
    differ.push({ p: c.p, s: c.s, hypd: [c.test, c.groups], node: [ex !== null, groups] });
  }
}
console.log(JSON.stringify({ cases: cases.length, differ: differ.slice(0, 10), count: differ.length }));
