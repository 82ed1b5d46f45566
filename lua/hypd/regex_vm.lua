-- hypd.regex_vm: runs the patterns hypd.regex parses in time linear in the
-- subject, with no recursion per character (a backtracking matcher takes
-- exponential time on `^(a|a)*$` and overflows the C stack on a long
-- subject: both are reachable by any caller through a schema's pattern).
--
--   vm.compile(alts, ngroups) -> prog | nil, err   (err: the pattern is too big)
--   vm.test(prog, s) -> boolean      unanchored search (a lazily built DFA)
--   vm.match(prog, s) -> nil | caps  the leftmost match's group positions,
--                                     caps[2n], caps[2n+1] = from, to+1
--                                     (a Pike VM: threads in priority order,
--                                     so groups are the ones a backtracking
--                                     matcher would give: greedy, leftmost)
--
-- The program is Thompson's: "byte" instructions (a 256-entry table of the
-- bytes they accept), "split" (try x before y), "jmp", "save" (a group's
-- edge), "bol"/"eol" (anchors), "match". A repetition {m,n} is unrolled to
-- m copies and n-m optional ones, so the program is bounded (MAX_PROG) and
-- a pattern beyond it is refused at compile time.
local M = {}

M.MAX_PROG = 20000   -- instructions in one pattern's program
M.MAX_STATES = 2000  -- DFA states cached per pattern before the cache restarts

-- byte tables ------------------------------------------------------------------------

local function table_of(node)
  local tbl = {}
  if node.t == "char" then
    tbl[node.c:byte()] = true
  elseif node.t == "any" then
    for b = 0, 255 do if b ~= 10 then tbl[b] = true end end
  else -- "set": items are predicates on a one-byte string
    for b = 0, 255 do
      local c, hit = string.char(b), false
      for _, f in ipairs(node.items) do
        if f(c) then hit = true break end
      end
      if node.negate then hit = not hit end
      if hit then tbl[b] = true end
    end
  end
  return tbl
end

-- compiler -------------------------------------------------------------------------

local function emit(prog, ins)
  if #prog >= M.MAX_PROG then error({ regex = true }, 0) end
  prog[#prog + 1] = ins
  return ins
end

local compile_node

-- nullable(n) -> true when n can match the empty string
local function nullable(n)
  local t = n.t
  if t == "bol" or t == "eol" then return true end
  if t == "rep" then return n.min == 0 or nullable(n.node) end
  if t == "group" then
    for _, seq in ipairs(n.alts) do
      local all = true
      for _, x in ipairs(seq) do all = all and nullable(x) end
      if all then return true end
    end
  end
  return false
end

-- an optional iteration of a body that can match empty: as ECMAScript
-- says, an iteration that matched nothing fails (so a group in it keeps
-- what it had); "mark" notes where the iteration began, "check" refuses
-- an end at the same place. Only the Pike VM looks: for test() an empty
-- iteration changes nothing.
local function compile_iteration(prog, n)
  if not nullable(n.node) then return compile_node(prog, n.node) end
  prog.marks = (prog.marks or 0) + 1
  local k = prog.marks
  emit(prog, { op = "mark", n = k })
  compile_node(prog, n.node)
  emit(prog, { op = "check", n = k })

end

local function compile_alts(prog, alts)
  local jumps = {}
  for k, seq in ipairs(alts) do
    local split
    if k < #alts then split = emit(prog, { op = "split", x = #prog + 2 }) end
    for _, n in ipairs(seq) do compile_node(prog, n) end
    if k < #alts then
      jumps[#jumps + 1] = emit(prog, { op = "jmp" })
      split.y = #prog + 1
    end
  end
  for _, j in ipairs(jumps) do j.x = #prog + 1 end
end

function compile_node(prog, n)
  local t = n.t
  if t == "char" or t == "any" or t == "set" then
    n.tbl = n.tbl or table_of(n) -- shared by a repetition's copies
    emit(prog, { op = "byte", tbl = n.tbl })
  elseif t == "bol" or t == "eol" then
    emit(prog, { op = t })
  elseif t == "group" then
    if n.cap then emit(prog, { op = "save", n = 2 * n.cap }) end
    compile_alts(prog, n.alts)
    if n.cap then emit(prog, { op = "save", n = 2 * n.cap + 1 }) end
  elseif t == "rep" then
    for _ = 1, n.min do compile_node(prog, n.node) end
    if n.max == math.huge then
      local at = #prog + 1
      local split = emit(prog, { op = "split", x = at + 1 })
      compile_iteration(prog, n)
      emit(prog, { op = "jmp", x = at })
      split.y = #prog + 1
    else
      -- x{0,k} as (x(x(x)?)?)?: each optional copy is tried before skipping
      local splits = {}
      for _ = 1, n.max - n.min do
        splits[#splits + 1] = emit(prog, { op = "split", x = #prog + 2 })
        compile_iteration(prog, n)
      end
      for _, s in ipairs(splits) do s.y = #prog + 1 end
    end
  end
end

function M.compile(alts, ngroups)
  local prog = {}
  local ok, e = pcall(function()
    compile_alts(prog, alts)
    emit(prog, { op = "match" })
  end)
  if not ok then
    if type(e) == "table" and e.regex then
      return nil, "the pattern is too big (more than " .. M.MAX_PROG .. " steps once its repetitions are unrolled)"
    end
    error(e, 0)
  end
  prog.ngroups = ngroups or 0
  prog.states = {}
  prog.nstates = 0
  return prog
end

-- the DFA (test) -------------------------------------------------------------------

-- closure(prog, pcs, bol, eol) -> consumers, matched: the "byte" and "match"
-- instructions reachable from pcs without reading a byte, where the anchors
-- hold as bol/eol say. Iterative: an explicit stack, each pc once.
local function closure(prog, pcs, bol, eol)
  local seen, out, matched, stack = {}, {}, false, {}
  for i = #pcs, 1, -1 do stack[#stack + 1] = pcs[i] end
  while #stack > 0 do
    local pc = stack[#stack]
    stack[#stack] = nil
    if not seen[pc] then
      seen[pc] = true
      local ins = prog[pc]
      local op = ins.op
      if op == "byte" then out[#out + 1] = pc
      elseif op == "match" then matched = true
      elseif op == "jmp" then stack[#stack + 1] = ins.x
      elseif op == "split" then
        stack[#stack + 1] = ins.y
        stack[#stack + 1] = ins.x
      elseif op == "save" or op == "mark" or op == "check" then stack[#stack + 1] = pc + 1
      elseif op == "bol" then if bol then stack[#stack + 1] = pc + 1 end
      elseif op == "eol" then if eol then stack[#stack + 1] = pc + 1 end
      end
    end
  end
  return out, matched
end

-- A DFA state is the set of pcs pending before a position's closure (always
-- with pc 1: the search may start anywhere). It caches its closure in the
-- middle of the subject, its answer at the end, and its successor per byte.
local function state(prog, pcs)
  table.sort(pcs)
  local key = table.concat(pcs, ",")
  local st = prog.states[key]
  if st then return st end
  if prog.nstates >= M.MAX_STATES then -- bounded memory; each step stays linear
    prog.states, prog.nstates = {}, 0
  end
  local cons, matched = closure(prog, pcs, false, false)
  st = { pcs = pcs, cons = cons, matched = matched, next = {} }
  prog.states[key] = st
  prog.nstates = prog.nstates + 1
  return st
end

-- step(prog, cons, b) -> the pending pcs after reading byte b
local function step(prog, cons, b)
  local pcs, seen = { 1 }, { [1] = true }
  for _, pc in ipairs(cons) do
    if prog[pc].tbl[b] and not seen[pc + 1] then
      seen[pc + 1] = true
      pcs[#pcs + 1] = pc + 1
    end
  end
  return pcs
end

function M.test(prog, s)
  local n = #s
  -- position 1: the start, where ^ holds (and $ too when s is empty)
  local cons, matched = closure(prog, { 1 }, true, n == 0)
  if matched then return true end
  if n == 0 then return false end
  local st = state(prog, step(prog, cons, s:byte(1)))
  for i = 2, n do
    if st.matched then return true end
    local b = s:byte(i)
    local nx = st.next[b]
    if not nx then
      nx = state(prog, step(prog, st.cons, b))
      st.next[b] = nx
    end
    st = nx
  end
  if st.final == nil then st.final = select(2, closure(prog, st.pcs, false, true)) end
  return st.final
end

-- the Pike VM (match) ----------------------------------------------------------------

-- add(prog, list, seen, pc, caps, i, n): thread pc (with its captures) and
-- what it reaches without reading, at position i of a subject of n bytes,
-- appended to list in priority order
local function add(prog, list, seen, pc, caps, i, n)
  local stack = { pc, caps }
  while #stack > 0 do
    local c = stack[#stack]
    local p = stack[#stack - 1]
    stack[#stack], stack[#stack - 1] = nil, nil
    local ins = prog[p]
    -- a check that fails leaves its pc free for a thread whose iteration
    -- did match something
    if not seen[p] and not (ins.op == "check" and c[-ins.n] == i) then
      seen[p] = true
      local op = ins.op
      if op == "byte" or op == "match" then list[#list + 1] = { p, c }
      elseif op == "jmp" then stack[#stack + 1] = ins.x; stack[#stack + 1] = c
      elseif op == "split" then
        stack[#stack + 1] = ins.y; stack[#stack + 1] = c
        stack[#stack + 1] = ins.x; stack[#stack + 1] = c
      elseif op == "save" or op == "mark" then
        local nc = {}
        for k, v in pairs(c) do nc[k] = v end
        nc[op == "save" and ins.n or -ins.n] = i
        stack[#stack + 1] = p + 1; stack[#stack + 1] = nc
      elseif op == "check" then
        stack[#stack + 1] = p + 1; stack[#stack + 1] = c
      elseif op == "bol" then
        if i == 1 then stack[#stack + 1] = p + 1; stack[#stack + 1] = c end
      elseif op == "eol" then
        if i == n + 1 then stack[#stack + 1] = p + 1; stack[#stack + 1] = c end
      end
    end
  end
end

function M.match(prog, s)
  local n = #s
  local clist, cseen = {}, {}
  local found
  for i = 1, n + 1 do
    if not found then add(prog, clist, cseen, 1, {}, i, n) end -- a later start, lowest priority
    -- no thread here: a match found stays, and none is found without one
    -- (a start that dies at once, as `()$` does before the end, is not the
    -- end of the search: a later start may match)
    if #clist == 0 and found then break end
    local nlist, nseen = {}, {}
    local b = s:byte(i)
    for _, th in ipairs(clist) do
      local ins = prog[th[1]]
      if ins.op == "match" then
        found = th[2]
        break -- the threads after this one have lower priority
      elseif b and ins.tbl[b] then
        add(prog, nlist, nseen, th[1] + 1, th[2], i + 1, n)
      end
    end
    clist, cseen = nlist, nseen
  end
  return found
end

return M
