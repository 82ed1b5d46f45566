-- hypd.yaml, the libyaml binding, from Lua: values in hypd.json's conventions,
-- every YAML style, aliases as copies, several documents, the caps (billion
-- laughs, deep nesting, size) and errors that name the line.
local t = require "hypd.tap"
local core = require "hypd.core"
local json = require "hypd.json"
local yaml = require "hypd.yaml"

t.test("plain scalars: YAML 1.2 booleans and nulls, kubectl's numbers, everything else a string", function()
  local v = assert(yaml.decode([[
t1: true
t2: True
f1: FALSE
n1: null
n2: ~
n3:
yes_: yes
on_: on
no_: NO
i1: 42
i2: -17
i3: 0600
i4: 0x1F
i5: 0o17
i6: 1_000
i7: 9223372036854775807
big: 9223372036854775808
f2: 1.5
f3: 1.20
f4: 1e3
f5: 1.0
inf: -.inf
ver: v1.29
date: 2024-01-01
time: 12:30
url: https://h:443/p?q=1
spaced: a b  c
]]))
  t.eq({ v.t1, v.t2, v.f1 }, { true, true, false })
  t.eq({ v.n1, v.n2, v.n3 }, { json.null, json.null, json.null })
  t.eq({ v.yes_, v.on_, v.no_ }, { "yes", "on", "NO" }, "YAML 1.1 booleans stay strings")
  t.eq({ v.i1, v.i2, v.i3, v.i4, v.i5, v.i6, v.i7 }, { 42, -17, 384, 31, 15, 1000, math.maxinteger })
  for _, k in ipairs { "i1", "i3", "i7" } do t.eq(math.type(v[k]), "integer", k) end
  t.eq(math.type(v.big), "float", "past int64 an integer is a float")
  t.eq({ v.f2, v.f3, v.f4, v.f5, v.inf }, { 1.5, 1.2, 1000.0, 1.0, -math.huge })
  t.eq(math.type(v.f5), "float")
  t.eq({ v.ver, v.date, v.time, v.url, v.spaced }, { "v1.29", "2024-01-01", "12:30", "https://h:443/p?q=1", "a b  c" })
end)

t.test("quoted scalars are strings, with their escapes; tags pick the type", function()
  local v = assert(yaml.decode([[
a: "true"
b: '0600'
c: "x: y \"q\" \u00e9\t#"
d: 'it''s # not a comment'
e: ""
f: !!str 12
g: !!int "12"
h: !!binary aGVsbG8=
i: !!float 2
]]))
  t.eq(v, { a = "true", b = "0600", c = 'x: y "q" \u{e9}\t#', d = "it's # not a comment", e = "", f = "12",
    g = 12, h = "hello", i = 2.0 })
  t.eq(math.type(v.i), "float")
end)

t.test("block scalars: literal and folded, with each chomping", function()
  local v = assert(yaml.decode("lit: |\n  line 1\n    indented\n  line 3\nfold: >\n  one\n  two\n\n  three\n" ..
    "strip: |-\n  x\n\nkeep: |+\n  y\n\nnext: 1\n"))
  t.eq(v.lit, "line 1\n  indented\nline 3\n")
  t.eq(v.fold, "one two\nthree\n")
  t.eq(v.strip, "x")
  t.eq(v.keep, "y\n\n")
  t.eq(v.next, 1)
end)

t.test("flow style and block style give the same values, with {} and [] kept apart", function()
  local flow = assert(yaml.decode('{a: [1, "two", {b: c}], e: {}, f: [], g: [ ], "h i": {j: null}}'))
  local block = assert(yaml.decode("a:\n- 1\n- two\n- b: c\ne: {}\nf: []\ng: []\nh i:\n  j: null\n"))
  t.eq(flow, block)
  t.eq(json.encode(flow), '{"a":[1,"two",{"b":"c"}],"e":{},"f":[],"g":[],"h i":{"j":null}}')
  t.ok(json.is_object(flow.e) and json.is_array(flow.f), "the marks of hypd.json")
  t.eq(json.encode(json.decode(json.encode(block))), json.encode(block), "a JSON round trip keeps them")
end)

t.test("comments anywhere are dropped", function()
  t.eq(yaml.decode("# head\na: 1 # trailing\n# between\nb: # after a key\n  - x # item\nc: 'q#'\nd: e#f\n"),
    { a = 1, b = { "x" }, c = "q#", d = "e#f" })
end)

t.test("anchors and aliases become copies; << merges; keys become strings as kubectl makes them", function()
  local v = assert(yaml.decode([[
base: &base {server: https://a, port: 1, tags: [x]}
copy: *base
over:
  <<: *base
  port: 2
list: [&one 1, *one]
keys: {1: a, true: b, 1.5: c, 0x10: d, 1e6: e}
]]))
  t.eq(v.copy, { server = "https://a", port = 1, tags = { "x" } })
  t.ok(v.copy ~= v.base and v.copy.tags ~= v.base.tags, "no table is shared")
  v.copy.tags[1] = "changed"
  t.eq(v.base.tags[1], "x")
  t.eq(v.over, { server = "https://a", port = 2, tags = { "x" } })
  t.eq(v.list, { 1, 1 })
  t.eq(v.keys, { ["1"] = "a", ["true"] = "b", ["1.5"] = "c", ["16"] = "d", ["1e+06"] = "e" })
  local _, err = yaml.decode("{1: a, 1.0: b}")
  t.eq(err.message, 'line 1 column 8: duplicate key "1"', "1 and 1.0 make the same key")
end)

t.test("several documents: decode reads the first, decode_all all of them", function()
  local text = "kind: A\n---\n# empty\n---\nkind: B\n...\n---\n[1]\n"
  t.eq(yaml.decode(text), { kind = "A" })
  local docs = assert(yaml.decode_all(text))
  t.eq(docs, { { kind = "A" }, json.null, { kind = "B" }, { 1 } })
  t.ok(json.is_array(docs))
  t.eq(yaml.decode(""), json.null, "no document is null")
  t.eq(yaml.decode_all("# nothing\n"), {})
  t.ok(json.is_array(yaml.decode_all("")))
  t.eq(yaml.decode("a: 1\n---\n[bad\n"), { a = 1 }, "decode stops after the first document")
  local v, err = yaml.decode_all("a: 1\n---\n[bad\n")
  t.fails(v, err, "YAML")
  t.like(err.message, "^line 4 column 1: ", "decode_all reads on and finds the error")
end)

t.test("duplicate keys are refused with their line, or keep the last on request", function()
  local v, err = yaml.decode("a: 1\nb:\n  c: 1\n  c: 2\n")
  t.fails(v, err, "YAML")
  t.eq({ err.message, err.line, err.column }, { 'line 4 column 3: duplicate key "c"', 4, 3 })
  t.eq(yaml.decode("c: 1\nc: 2\n", { duplicate_keys = "last" }), { c = 2 })
  v, err = yaml.decode("b: &b {p: 1}\nx:\n  p: 2\n  <<: *b\n")
  t.fails(v, err, "YAML")
  t.like(err.message, "^line 3 column 3: key \"p\" is set before a '<<' merge that sets it too")
  t.eq(yaml.decode("b: &b {p: 1}\nx:\n  p: 2\n  <<: *b\n", { duplicate_keys = "last" }).x, { p = 1 },
    "as kubectl reads it, the later merge wins")
end)

t.test("malformed YAML names the line and column, never echoing long input", function()
  local cases = {
    { "a: 1\nb: [1, 2\nc: 3\n", "^line 3 column 2: did not find expected ',' or ']' %(while parsing a flow " ..
      "sequence at line 2 column 4%)$" },
    { "a:\n  b: 1\n c: 2\n", "^line 3 column 2: did not find expected key" },
    { "a: \"unterminated\n", "^line 2 column 1: found unexpected end of stream" },
    { "a:\n\tb: 1\n", "^line 2 column 1: found character that cannot start any token" },
    { "a: *nope\n", "^line 1 column 4: the alias %*nope names no anchor before it$" },
    { "a: &a [1, *a]\n", "^line 1 column 11: the alias %*a is inside the node it names$" },
    { "? [x]\n: y\n", "^line 1 column 3: a mapping key is a sequence; keys must be scalars$" },
    { "~: y\n", "^line 1 column 1: a mapping key is null$" },
    { "a: !!int x\n", '^line 1 column 4: "x" is not a valid !!int$' },
    { "a: \"\255\"\n", "^line 1 column 5: invalid leading UTF%-8 octet %(byte 0xff%)$" },
  }
  for _, c in ipairs(cases) do
    local v, err = yaml.decode(c[1])
    t.fails(v, err, "YAML", c[1])
    t.like(err.message, c[2], c[1])
    t.eq(math.type(err.line), "integer")
  end
  local long = string.rep("k", 5000)
  local _, err = yaml.decode(long .. ": 1\n" .. long .. ": 2\n", nil)
  t.ok(#err.message < 120, "the message is short: " .. err.message)
end)

t.test("a billion-laughs document is refused at once, having built nothing big", function()
  local lines = { 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]' }
  for i = 2, 10 do
    local n, p = string.char(96 + i), string.char(95 + i)
    lines[i] = n .. ": &" .. n .. " [" .. string.rep("*" .. p .. ",", 9) .. "*" .. p .. "]"
  end
  local before = collectgarbage("count")
  local t0 = core.wall()
  local v, err = yaml.decode(table.concat(lines, "\n") .. "\n")
  local secs = core.wall() - t0
  t.fails(v, err, "YAML")
  t.like(err.message, "^line 7 column %d+: the document holds more than 2000000 nodes %(an alias counts as every " ..
    "node it copies%)$")
  t.ok(secs < 0.5, "refused in " .. secs .. " s")
  t.ok(collectgarbage("count") - before < 1024, "no Lua memory spent")
  -- the same with a quarter of the budget fails earlier; a small one fits
  v, err = yaml.decode(table.concat(lines, "\n", 1, 4) .. "\n", { max_nodes = 1000 })
  t.fails(v, err, "YAML")
  t.like(err.message, "more than 1000 nodes")
  t.eq(#yaml.decode(table.concat(lines, "\n", 1, 4) .. "\n", { max_nodes = 20000 }).d, 10)
end)

t.test("nesting deeper than 256 is refused where it starts, aliases included; 256 is read", function()
  local v = assert(yaml.decode(string.rep("[", 256) .. string.rep("]", 256)))
  local depth = 0
  while type(v) == "table" do depth, v = depth + 1, v[1] end
  t.eq(depth, 256)
  local err
  v, err = yaml.decode(string.rep("[", 100000))
  t.fails(v, err, "YAML")
  t.eq(err.message, "line 1 column 257: sequences and mappings nest deeper than 256")
  v, err = yaml.decode(string.rep("- ", 300) .. "x\n")
  t.fails(v, err, "YAML")
  t.like(err.message, "nest deeper than 256")
  v, err = yaml.decode("a: &a " .. string.rep("[", 200) .. string.rep("]", 200) .. "\nb: " ..
    string.rep("[", 100) .. "*a" .. string.rep("]", 100) .. "\n")
  t.fails(v, err, "YAML")
  t.like(err.message, "^line 2 column 104: sequences and mappings nest deeper than 256 %(through the alias %*a%)$")
  t.eq(select(2, yaml.decode("[[[1]]]", { max_depth = 2 })).message,
    "line 1 column 3: sequences and mappings nest deeper than 2")
end)

t.test("input past the size cap is refused before it is parsed", function()
  t.eq(yaml.limits, { max_bytes = 16 * 1024 * 1024, max_depth = 256, max_nodes = 2000000 })
  local v, err = yaml.decode(string.rep("#", yaml.limits.max_bytes + 1))
  t.fails(v, err, "YAML")
  t.eq(err.message, "the YAML text has 16777217 bytes, more than the limit of 16777216")
  t.eq({ err.line, err.column }, { nil, nil })
  t.eq(select(2, yaml.decode("a: 1\n", { max_bytes = 4 })).message,
    "the YAML text has 5 bytes, more than the limit of 4")
end)

t.test("misuse raises: a non-string text, bad options, caps above the defaults", function()
  t.ok(not pcall(yaml.decode, {}))
  t.ok(not pcall(yaml.decode))
  t.ok(not pcall(yaml.decode, "a: 1", "opts"))
  local ok, err = pcall(yaml.decode, "a: 1", { duplicate_keys = "first" })
  t.eq(ok, false)
  t.like(tostring(err), 'opts.duplicate_keys must be "error" or "last"')
  ok, err = pcall(yaml.decode_all, "a: 1", { max_depth = 1000 })
  t.eq(ok, false)
  t.like(tostring(err), "opts.max_depth must be an integer from 1 to 256")
  t.ok(not pcall(yaml.decode, "a: 1", { max_nodes = 0 }))
  t.ok(not pcall(yaml.decode, "a: 1", { max_bytes = 1.5 }))
end)

t.test("opts.tags keeps local tags (CloudFormation's !Ref, !Sub, !GetAtt) as one-key mappings", function()
  local text = "a: !Ref X\nb: !Sub [ 'x${y}', {y: 1} ]\nc: !GetAtt A.B\nd: !!str 5\ne: ! x\nf: plain\n" ..
    "g: !Base64\n  Fn::Sub: s\nh: &h !Ref Y\ni: *h\n"
  local v = assert(yaml.decode(text, { tags = true }))
  t.eq(v.a, { ["!Ref"] = "X" })
  t.eq(json.encode(v.b), '{"!Sub":["x${y}",{"y":1}]}')
  t.eq(v.c, { ["!GetAtt"] = "A.B" })
  t.eq(v.d, "5", "a !! tag is a core tag, not a local one")
  t.eq(v.e, "x", "the non-specific ! is no local tag")
  t.eq(v.f, "plain")
  t.eq(v.g, { ["!Base64"] = { ["Fn::Sub"] = "s" } })
  t.eq(v.i, { ["!Ref"] = "Y" }, "an alias carries its node's tag")
  local plain = assert(yaml.decode(text))
  t.eq(plain.a, "X", "without opts.tags the tag is dropped, as before")
  t.eq(plain.g, { ["Fn::Sub"] = "s" })
  t.ok(not pcall(yaml.decode, "a: 1", { tags = 1 }), "opts.tags must be a boolean")
end)
