-- Prepended to every script. All times are whole microseconds: Lua numbers are doubles, exact
-- for integers below 2^53, and microseconds since 1970 stay below that until the year 2255; the
-- Rust side refuses quotas whose arithmetic would not. No helper functions: a script's body
-- runs on every call, and each function it defines is a closure to allocate (measured: a fifth
-- of a check). Numbers written to Redis go as format('%d', n): a number argument Redis 7.0
-- prints with '%.17g', which costs more, and `..` or tostring print 1.7e+15. Globals (KEYS,
-- ARGV, redis.call, math.*) are read once into locals: a global is a table lookup at every
-- use. (Those two: a tenth of a check's time in Redis, measured.)
--
-- One call runs a batch of checks in order, one per key: KEYS[i] is check i's key. ARGV[1] is
-- how many arguments each check has, `per`: 2 when all use the server's clock, else 3. Check
-- i's are ARGV[base + 1 ..= base + per]. When all checks have the same cost and rule, those
-- two come once, after `per`, and `per` is 0 (all on the server's clock) or 1 (each its time).
-- After the checks come the rules: how many numbers a rule has, then each distinct rule of the
-- batch, its numbers in a row. A batch's checks mostly share one rule and cost, so they are
-- sent and parsed once, not once per check (fewer arguments: measured, a fifth of a check's
-- time in Redis; the time left out when it is the server's, and two answers fewer per check:
-- 7% more; the cost and rule once when shared: 7% more again).
-- On a cluster, a call carries the checks of one node, whose keys are of many slots: a call
-- naming them as KEYS would be refused (CROSSSLOT), so there KEYS is empty, ARGV[1] is n and
-- ARGV[2 ..= n + 1] the keys, and everything else follows them. Such a call ("soft") answers
-- a check whose key is not on this node (moved, or never was) as not its own instead of
-- failing: its first command goes through `first` (redis.pcall), before any write, so the
-- check is untouched and the client sends it again alone, to the right node. Scripts
-- without a shebang may use undeclared keys of any slot the node serves.
-- The answer is one flat array of integers, each check's after the one before, from
-- `answers[w + 1]` (a check moves `w` past what it wrote): admitted, two, the remaining units
-- and reset_after; denied, three, -1 - remaining, reset_after and retry_after (waits in
-- microseconds). A check not on this node is 0, -1. (The limit is the client's own.) Redis
-- sends numbers as integers; string.format would cost more (measured: a fifth of a check in a
-- batch), and so would a third number for every admitted check (a twenty-fifth). Each check's
-- body sits in `repeat ... until true`, so that `break` ends that check.
--
-- A check's arguments: the cost; the index of its rule (from 1), positive to consume an
-- admitted cost, negative only to answer (peek); when per is 3 (or 1, the time alone), the
-- time to count at, the caller's, or '' for the Redis server's clock (read once per call: a
-- batch's checks happen at one instant).
--
-- The checks' arithmetic calls no C function where Lua's own operators do (each call costs
-- more than the operation, measured: a tenth of a GCRA check): a string of digits is made a
-- number by `+ 0`, and the hot paths compare instead of calling math.max and math.min.
local KEYS, ARGV, call, tonumber = KEYS, ARGV, redis.call, tonumber
local format, floor, max = string.format, math.floor, math.max
local sub, byte = string.sub, string.byte
local clock = nil
-- A batch names a key's checks one after the other (the client orders them so): a check of
-- the key the check before it read (`same`) takes what that one left, kept in `kept`, instead
-- of reading it again, and a check followed by one of the same key (`more`) leaves its write
-- to the key's last check, which writes what they all left (the sliding log, whose every
-- unit is an entry, still adds its own). A hot key (one limit for many callers) then costs a
-- read and a write per call, not per check; other keys pay two comparisons. Nothing else
-- writes during a script, and Redis expires no key in the middle of one: what is kept stays
-- true. `last` is the key whose state `kept` holds, set by a check once it has read it.
local kept, last = {}, nil
local answers, w = {}, 0
-- A batch's checks mostly count at one time (the server's clock) over one span: the texts a
-- sliding log's check sends for them (a string.format each, measured: 7% of its check) stay
-- for the next one: that time, span and idle time, then the texts (and the expiry deadline).
local texts_at, texts_span, texts_idle, after_text, at_text = nil, nil, nil, nil, nil
local hw_text, dl_text, deadline = nil, nil, nil
local rules = {}
local n, from, soft, first = #KEYS, 0, false, call
if n == 0 then n, soft, first = tonumber(ARGV[1]), true, redis.pcall; from = n + 1 end
local per = tonumber(ARGV[from + 1])
from = from + 1
local cost, r = 0, 0
if per < 2 then cost, r, from = ARGV[from + 1] + 0, ARGV[from + 2] + 0, from + 2 end
do
  local at = from + per * n + 1
  local size = tonumber(ARGV[at])
  for r = 1, (#ARGV - at) / size do
    local rule, from = {}, at + (r - 1) * size
    for j = 1, size do rule[j] = tonumber(ARGV[from + j]) end
    rules[r] = rule
  end
end
for i = 1, n do
local key, base = KEYS[i], from + (i - 1) * per
if soft then key = ARGV[1 + i] end
local same, more = key == last, false
if i < n then
  if soft then more = ARGV[2 + i] == key else more = KEYS[i + 1] == key end
end
local now = ''
if per > 1 then
  cost, r = ARGV[base + 1] + 0, ARGV[base + 2] + 0
  if per == 3 then now = ARGV[base + 3] end
elseif per == 1 then
  now = ARGV[base + 1]
end
if now == '' then
  if not clock then
    local t = call('TIME')
    clock = t[1] * 1000000 + t[2]
  end
  now = clock
else
  now = now + 0
end
local commit, rule = r > 0, rules[r]
if r < 0 then rule = rules[-r] end
repeat
