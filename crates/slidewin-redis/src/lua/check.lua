-- slidewin's rate limits on Redis: one script for every algorithm and every batch, so that a
-- request under several rules is one call on one slot, all-or-nothing.
--
-- Times are whole microseconds of Unix time: Lua's numbers are doubles, exact below 2^53, and
-- the Rust side refuses quotas whose arithmetic would pass that. The hot path defines no
-- functions (`read_log` is made once a call) and reads globals once into locals: each costs
-- a measurable part of a check.
-- Numbers written to Redis go as format('%d', n), which prints 1.7e15 in full.
--
-- KEYS[i] is check i's key (n checks). On a cluster a call carries one node's checks, whose
-- keys are of many slots: Redis would refuse those as KEYS (CROSSSLOT), so KEYS is empty,
-- ARGV[1] is n and ARGV[2 ..= n + 1] are the keys, and all the rest follows them. Such a call
-- ("soft") answers a check whose key is not on this node as 0, -1 rather than failing: its
-- first command goes through `first` (redis.pcall) before any write, and the client sends it
-- again to the right node.
--
-- Then ARGV holds:
--   per: how many arguments each check has. 2 (cost, rule) or 3 (cost, rule, time); 0 or 1
--     when every check has the same cost and rule, which then come once, before the checks
--     (0: no times; 1: a time each).
--   the checks' arguments. The rule is an index into the rules below, from 1; negative to
--     answer without consuming (a peek). A negative cost is a release of that many units.
--     The time is '' for the server's clock (TIME, read once per call: a batch's checks
--     happen at one instant).
--   groups: 0 when every check is alone, else 1 and for each check the size of the group it
--     starts (0 inside one). A group is one request under several rules, for one key: its
--     checks all peek first, and consume only if every one admits.
--   size, the count of each rule's numbers (5), then each rule: its algorithm (1 sliding log,
--     2 sliding counter, 3 fixed window, 4 GCRA, 5 leases, 6 calendar) and four parameters
--     (a sliding log's last is 1 when it refunds: a release gives its oldest units back).
--     A calendar rule's are the window the client dated for the check (Redis cannot date
--     calendar windows: zones, daylight saving): its start and end, and the limit. Checks of
--     one calendar rule in different windows (a batch across a boundary) name different
--     rules.
--
-- The answer is one flat array of integers, check after check: admitted, two (remaining,
-- reset_after); denied, three (-1 - remaining, reset_after, retry_after); waits in
-- microseconds; a release, two (units given back, 0). A check not on this node is 0, -1. A
-- calendar check at the server's time (TIME) outside the window sent is 0, -2 and that time:
-- the client's clock dated the window, and the clocks disagree; nothing is counted. The
-- limit is the client's own.
--
-- A batch names a key's checks one after the other (the client orders them so). A check of
-- the key the check before it read (`same`) takes what that one left, kept in `kept`, instead
-- of reading it again; a check followed by one of the same key (`more`) leaves its write to
-- the key's last check (a sliding log appends each unit at once, and keeps what it read of a
-- key in `logs` for any later check of it). A hot key then costs a read and a write per call,
-- not per check. Nothing else writes during a script, and Redis expires no
-- key in the middle of one: what is kept stays true.
local KEYS, ARGV, call, tonumber = KEYS, ARGV, redis.call, tonumber
local format, floor, max = string.format, math.floor, math.max
local clock = nil
local kept, last = {}, nil
local answers, w = {}, 0
local rules = {}
local n, from, soft, first = #KEYS, 0, false, call
if n == 0 then n, soft, first = tonumber(ARGV[1]), true, redis.pcall; from = n + 1 end
local spack, sunpack, rep, byte, sub = struct.pack, struct.unpack, string.rep, string.byte, string.sub
-- A sliding log's bytes a time, the offset that marks its first slot as its expiry deadline
-- (no time reaches it), the logs this call has read, by key, and the reads' starts as text,
-- by times read (a number given to redis.call is printed with %.14g, a measurable cost).
local W, TOP, logs, reads = 7, 36028797018963968, {}, {}
-- A sliding log as of `now`: its newest time (`hw`, nil: empty), the time it counts at (the
-- later of the two), its count in (at - span, at] (exact up to limit + 1), its expiry deadline
-- (`d`, nil: not read), and its last `n` times as read (`tail`, after `o` bytes of deadline).
-- False for a key not on this node (a soft call). `exact`: the count exact whatever it is.
local function read_log(key, now, span, limit, exact)
  local want = limit + 1
  if want > 128 then want = 128 end
  local from = reads[want]
  if not from then from = format('%d', -W * want - W); reads[want] = from end
  local tail = first('GETRANGE', key, from, '-1')
  if type(tail) == 'table' then return false end
  local log = { now = now, span = span, limit = limit, at = now, count = 0, tail = tail, o = 0, n = 0 }
  if tail == '' then return log end
  local o = 0
  if byte(tail) >= 128 then o, log.d = W, sunpack('>I7', tail) - TOP end
  local n = (#tail - o) / W
  local hw = sunpack('>I7', tail, #tail - W + 1)
  local at = now
  if hw > at then at = hw end
  log.hw, log.at, log.o, log.n = hw, at, o, n
  -- The first time read inside the window: times only grow along the string.
  local after, lo, hi = at - span, 1, n + 1
  while lo < hi do
    local mid = floor((lo + hi) / 2)
    if sunpack('>I7', tail, o + mid * W - W + 1) > after then hi = mid else lo = mid + 1 end
  end
  log.count = n - lo + 1
  if lo == 1 and o == 0 and (exact or want <= limit) then
    -- Every time read is inside, and older ones may be: bisect the string's slots (the
    -- deadline first), back to the time one past the limit (a check's count needs no more).
    local total = call('STRLEN', key) / W
    lo, hi = 2, total - n + 1
    if not exact then lo = max(total - limit, 2) end
    while lo < hi do
      local mid = floor((lo + hi) / 2)
      local at_mid = call('GETRANGE', key, mid * W - W, mid * W - 1)
      if sunpack('>I7', at_mid) > after then hi = mid else lo = mid + 1 end
    end
    log.count = total - lo + 1
  end
  return log
end
local per = tonumber(ARGV[from + 1])
from = from + 1
local cost, r = 0, 0
if per < 2 then cost, r, from = ARGV[from + 1] + 0, ARGV[from + 2] + 0, from + 2 end
local groups = nil
do
  local at = from + per * n + 1
  if ARGV[at] ~= '0' then
    groups = {}
    for i = 1, n do groups[i] = tonumber(ARGV[at + i]) end
    at = at + n
  end
  at = at + 1
  local size = tonumber(ARGV[at])
  for r = 1, (#ARGV - at) / size do
    local rule, from = {}, at + (r - 1) * size
    for j = 1, size do rule[j] = tonumber(ARGV[from + j]) end
    rules[r] = rule
  end
end
-- pass: 0 for a check alone; 1 for a group's peeks; 2 for its checks, once all admitted.
local i, pass, gfirst, glast, gw, gall = 0, 0, 0, 0, 0, false
while true do
if pass == 1 and i == glast and gall then
  pass, i, w = 2, gfirst, gw
else
  if i == glast then pass = 0 end
  i = i + 1
  if i > n then break end
  if groups and groups[i] > 1 then
    pass, gfirst, glast, gw, gall = 1, i, i + groups[i] - 1, w, true
  end
end
local key, base = KEYS[i], from + (i - 1) * per
if soft then key = ARGV[1 + i] end
local same, more = key == last, false
if i < n and pass == 0 and not (groups and groups[i + 1] ~= 1) then
  if soft then more = ARGV[2 + i] == key else more = KEYS[i + 1] == key end
end
local now, by_clock = '', false
if per > 1 then
  cost, r = ARGV[base + 1] + 0, ARGV[base + 2] + 0
  if per == 3 then now = ARGV[base + 3] end
elseif per == 1 then
  now = ARGV[base + 1]
end
if now == '' then
  by_clock = true
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
if pass == 1 then
  if not commit then gall = false end
  commit = false
end
local alg, answered = rule[1], w
repeat
if cost < 0 then
  -- A release of -cost units: leases (5), and a sliding log that refunds (1 with a last
  -- number of 1), give back their oldest units held, the other rates nothing. The answer is
  -- the units given back, then 0. The log is written again with the times still held alone:
  -- those that left go too, so that no clock gone back finds them (as in memory). A call's
  -- later checks of the key read it afresh.
  local released = 0
  if alg == 5 or (alg == 1 and rule[5] == 1) then
    local log = read_log(key, now, rule[2], rule[3], true)
    if not log then
      answers[w + 1], answers[w + 2] = 0, -1
      w = w + 2
      break
    end
    logs[key], last = nil, key
    released = -cost
    if released > log.count then released = log.count end
    local live = log.count - released
    if commit and released > 0 and live == 0 then
      call('DEL', key)
    elseif commit and released > 0 then
      local tail, times = log.tail, nil
      if live <= log.n then
        times = sub(tail, #tail - live * W + 1)
      else
        times = call('GETRANGE', key, format('%d', -W * live), '-1')
      end
      local d = log.d
      if not d then d = sunpack('>I7', call('GETRANGE', key, '0', '6')) - TOP end
      call('SET', key, spack('>I7', d + TOP) .. times, 'KEEPTTL')
    end
  end
  answers[w + 1], answers[w + 2] = released, 0
  w = w + 2
  break
end
if alg == 1 or alg == 5 then
  -- The exact sliding log (slidewin's SlidingLog), and leases (Leases: its span the lease,
  -- releases above), packed: one string of admission times,
  -- oldest first, each `W` bytes (a big-endian integer of microseconds), a time once per unit
  -- admitted. rule: span, limit, idle ttl in ms.
  --
  -- Its first slot is its expiry deadline, offset by TOP so that no time reads as it: the end
  -- of the stretch of idle_ms after the one its newest time is in. Every admission that moves
  -- the deadline forward (a new stretch, or a longer idle time: a quota changed under the same
  -- name) writes it and the key's expiry; no other does.
  --
  -- Times never go back in a log: a request older than its newest time (`hw`, its last W
  -- bytes) counts at that time, so the string stays sorted and its window (at - span, at] is
  -- always a tail of it. A check reads the last times it can need (one past the limit, at most
  -- 128) and counts by bisection; a log with more than that in its window is bisected further
  -- in place (STRLEN, then a GETRANGE of one time a step). An admission appends. Times that left
  -- the window stay until as many as the live ones have gathered, then the live tail is written
  -- back alone (SET KEEPTTL): a log holds at most twice its live times and 32 more.
  -- A call's checks of one key (a group's peeks, then its checks) read it once: `logs`.
  local span, limit, idle_ms = rule[2], rule[3], rule[4]
  local idle = idle_ms * 1000
  local log = logs[key]
  if not log or log.now ~= now or log.span ~= span or log.limit ~= limit then
    log = read_log(key, now, span, limit)
    if not log then
      answers[w + 1], answers[w + 2] = 0, -1
      w = w + 2
      break
    end
    logs[key] = log
  end
  last = key
  local hw, at, count = log.hw, log.at, log.count

  if count + cost <= limit then
    if commit and cost > 0 then
      local stamps = spack('>I7', at)
      if cost > 1 then stamps = rep(stamps, cost) end
      local live, total, d = count + cost, cost, log.d
      local deadline = at - at % idle + 2 * idle
      if not hw then
        call('APPEND', key, spack('>I7', deadline + TOP) .. stamps)
      else
        if not d then d = sunpack('>I7', call('GETRANGE', key, '0', '6')) - TOP end
        total = call('APPEND', key, stamps) / W - 1
        if deadline > d then
          call('SETRANGE', key, '0', spack('>I7', deadline + TOP))
        else
          deadline = nil
        end
      end
      if deadline then
        call('PEXPIRE', key, format('%d', floor((deadline - now) / 1000)))
        d = deadline
      end
      if total - live >= live and total - live >= 32 then
        local kept = call('GETRANGE', key, -W * live, -1)
        call('SET', key, spack('>I7', d + TOP) .. kept, 'KEEPTTL')
      end
      log.hw, log.count, log.d, log.tail, log.n = at, live, d, log.tail .. stamps, log.n + cost
    end
    local newest = hw
    if count == 0 then newest = nil end
    if cost > 0 then newest = at end
    local reset = 0
    if newest then
      reset = newest + span - now
      if reset < 0 then reset = 0 end
    end
    answers[w + 1], answers[w + 2] = limit - count - cost, reset
    w = w + 2
    break
  end

  -- The newest `limit - cost` admitted units may stay; the one just older (the k-th newest) is
  -- the last that must leave for the cost to fit. (A count past the limit, a rule of a lower
  -- limit on the key, has no units left.)
  local k, tail, leaving = limit - cost + 1, log.tail, nil
  if k <= log.n then
    leaving = sunpack('>I7', tail, #tail - k * W + 1)
  else
    leaving = sunpack('>I7', call('GETRANGE', key, -k * W, -k * W + W - 1))
  end
  answers[w + 1], answers[w + 2], answers[w + 3] =
    -1 - max(limit - count, 0), max(hw + span - now, 0), max(leaving + span - now, 0)
  w = w + 3
elseif alg == 2 then
  -- Cloudflare's two-counter sliding window (slidewin's SlidingCounter), in a hash {w, p, c}:
  -- the current window's index, the previous window's count and the current one's.
  -- rule: span, limit, idle ttl in ms.
  local span, limit, idle_ms = rule[2], rule[3], rule[4]

  -- The key as its checks so far left it: its window, the previous window's count and this
  -- one's, and whether it exists; whether that is still to be written, and the expiry to set
  -- then (false: none).
  local window, previous, current, exists = kept[1], kept[2], kept[3], kept[4]
  if not same then
    local state = first('HMGET', key, 'w', 'p', 'c')
    if soft and state.err then
      answers[w + 1], answers[w + 2] = 0, -1
      w = w + 2
      break
    end
    window, exists = tonumber(state[1]) or 0, state[1] ~= false
    previous, current = tonumber(state[2]) or 0, tonumber(state[3]) or 0
    kept[1], kept[2], kept[3], kept[4], last = window, previous, current, exists, key
    kept[5], kept[6] = false, false
  end

  -- Roll forward to `now`; an earlier window (the clock went back) counts at this one's start.
  local at = floor(now / span)
  local elapsed = 0
  -- A new key, or a window rolled: its first write sets the expiry, which covers this window
  -- and the next (where this one still weighs).
  local fresh = not exists or at > window
  if at >= window then
    if at == window + 1 then
      previous, current = current, 0
    elseif at > window + 1 then
      previous, current = 0, 0
    end
    window = at
    elapsed = now - window * span
  end

  -- Everything in units of cost x microseconds, so the comparison is exact.
  local weighted = previous * (span - elapsed) + current * span
  local capacity = limit * span
  local starts = window * span
  local after = weighted + cost * span

  -- The decision: `break` ends it, and the key's write below follows either way.
  repeat
  if after <= capacity then
    if commit and cost > 0 then
      kept[1], kept[2], kept[3], kept[4], kept[5] = window, previous, current + cost, true, true
      if fresh then kept[6] = idle_ms end
    end
    local reset_at = 0
    if current + cost > 0 then
      reset_at = starts + 2 * span
    elseif previous > 0 then
      reset_at = starts + span
    end
    answers[w + 1], answers[w + 2] = floor((capacity - after) / span), max(reset_at - now, 0)
    w = w + 2
    break
  end

  -- Denied. The first moment the cost fits, the state staying as it is: later in this window as
  -- the previous one weighs less, or else in the next. The smallest offset into a window with
  -- weight * (span - offset) <= room * span:
  local function first_offset(weight, room)
    if weight == 0 then return 0 end
    return max(span - floor(room * span / weight), 0)
  end
  local admits_at = nil
  if limit >= current + cost then
    local offset = max(first_offset(previous, limit - current - cost), elapsed)
    if offset < span then admits_at = starts + offset end
  end
  if not admits_at then
    admits_at = starts + span + first_offset(current, limit - cost)
  end
  local reset_at = starts + span
  if current > 0 then reset_at = starts + 2 * span end
  local remaining = floor(max(capacity - weighted, 0) / span)
  answers[w + 1], answers[w + 2], answers[w + 3] =
    -1 - remaining, max(reset_at - now, 0), max(admits_at - now, 0)
  w = w + 3
  until true

  -- The key's last check of the call writes what its checks left.
  if kept[5] and not more then
    call('HSET', key, 'w', format('%d', kept[1]), 'p', format('%d', kept[2]), 'c', format('%d', kept[3]))
    if kept[6] then call('PEXPIRE', key, kept[6]) end
    kept[5], kept[6] = false, false
  end
elseif alg == 3 then
  -- A counter per window aligned to the span (slidewin's FixedWindow), in a hash {w, c}.
  -- rule: span, limit, idle ttl in ms.
  local span, limit, idle_ms = rule[2], rule[3], rule[4]

  -- The key as its checks so far left it: its window and count, and whether it exists; whether
  -- that is still to be written, and the expiry to set then (false: none).
  local window, count, exists = kept[1], kept[2], kept[3]
  if not same then
    local state = first('HMGET', key, 'w', 'c')
    if soft and state.err then
      answers[w + 1], answers[w + 2] = 0, -1
      w = w + 2
      break
    end
    window, count, exists = tonumber(state[1]) or 0, tonumber(state[2]) or 0, state[1] ~= false
    kept[1], kept[2], kept[3], kept[4], kept[5], last = window, count, exists, false, false, key
  end
  -- A later window starts empty; an earlier one (the clock went back) counts in this one.
  local current = floor(now / span)
  -- A new key, or a new window: its first write sets the expiry, which covers the window.
  local fresh = not exists
  if current > window then
    window, count, fresh = current, 0, true
  end

  local wait = max((window + 1) * span - now, 0)
  local used = count + cost
  -- The decision: `break` ends it, and the key's write below follows either way.
  repeat
  if used <= limit then
    if commit and cost > 0 then
      kept[1], kept[2], kept[3], kept[4] = window, used, true, true
      if fresh then kept[5] = idle_ms end
    end
    if used == 0 then wait = 0 end
    answers[w + 1], answers[w + 2] = limit - used, wait
    w = w + 2
    break
  end
  -- A count past the limit (a rule of a lower limit on the key) has no units left, not fewer.
  answers[w + 1], answers[w + 2], answers[w + 3] = -1 - max(limit - count, 0), wait, wait
  w = w + 3
  until true

  -- The key's last check of the call writes what its checks left.
  if kept[4] and not more then
    call('HSET', key, 'w', format('%d', kept[1]), 'c', format('%d', kept[2]))
    if kept[5] then call('PEXPIRE', key, kept[5]) end
    kept[4], kept[5] = false, false
  end
elseif alg == 6 then
  -- A counter per calendar window (slidewin's Calendar), in a hash {s, e, c}: the window's
  -- start and end, and its count. rule: the window holding the check's time, [start, ends),
  -- as the client dated it, and the limit.
  local start, ends, limit = rule[2], rule[3], rule[4]

  -- The key as its checks so far left it (as the fixed window's, with the window's bounds).
  local window, ending, count, exists = kept[1], kept[2], kept[3], kept[4]
  if not same then
    local state = first('HMGET', key, 's', 'e', 'c')
    if soft and state.err then
      answers[w + 1], answers[w + 2] = 0, -1
      w = w + 2
      break
    end
    window, ending, count = tonumber(state[1]) or 0, tonumber(state[2]) or 0, tonumber(state[3]) or 0
    exists = state[1] ~= false
    kept[1], kept[2], kept[3], kept[4], kept[5], kept[6], last = window, ending, count, exists, false, false, key
  end

  repeat
  if by_clock and (now < start or now >= ends) then
    answers[w + 1], answers[w + 2], answers[w + 3] = 0, -2, now
    w = w + 3
    break
  end
  -- The key's window if it is this one, or a later one (a clock gone back counts there, as in
  -- memory); else this window, empty. Its first write sets the expiry: the window's end, a
  -- minute later (the time to it runs on Redis's clock, and the write took a while to come).
  local fresh = false
  if not exists or not ((window == start and ending == ends) or window >= ends) then
    window, ending, count, fresh = start, ends, 0, true
  end
  local wait = max(ending - now, 0)
  local used = count + cost
  if used <= limit then
    if commit and cost > 0 then
      kept[1], kept[2], kept[3], kept[4], kept[5] = window, ending, used, true, true
      if fresh then kept[6] = floor(wait / 1000) + 60000 end
    end
    if used == 0 then wait = 0 end
    answers[w + 1], answers[w + 2] = limit - used, wait
    w = w + 2
    break
  end
  answers[w + 1], answers[w + 2], answers[w + 3] = -1 - max(limit - count, 0), wait, wait
  w = w + 3
  until true

  -- The key's last check of the call writes what its checks left.
  if kept[5] and not more then
    call('HSET', key, 's', format('%d', kept[1]), 'e', format('%d', kept[2]), 'c', format('%d', kept[3]))
    if kept[6] then call('PEXPIRE', key, format('%d', kept[6])) end
    kept[5], kept[6] = false, false
  end
else
  -- The token bucket as GCRA (slidewin's Gcra): one number, the theoretical arrival time (TAT).
  -- rule: interval, tolerance, burst, and how long in ms an idle key outlives a full bucket.
  local interval, tolerance, burst, idle_ms = rule[2], rule[3], rule[4], rule[5]
  -- The TAT its checks so far left, the TAT as stored (0: no key), and the idle ttl and time of
  -- the last check that moved it (its write's).
  local tat = kept[1]
  if not same then
    tat = first('GET', key)
    if soft and type(tat) == 'table' then
      answers[w + 1], answers[w + 2] = 0, -1
      w = w + 2
      break
    end
    if tat then tat = tat + 0 else tat = 0 end
    kept[1], kept[2], last = tat, tat, key
  end

  -- The TAT after this request, and whether it is admitted.
  local next, allowed, retry = tat, 1, 0
  if cost > 0 then
    local admits_at = tat + interval * (cost - 1) - tolerance
    if admits_at < 0 then admits_at = 0 end
    if now >= admits_at then
      if tat > now then next = tat + interval * cost else next = now + interval * cost end
      if commit then
        kept[1] = next
        if more then kept[3], kept[4] = idle_ms, now end
      end
    else
      allowed, retry = 0, admits_at - now
    end
  end

  -- How many more units fit now.
  local remaining = 0
  local room = now + tolerance - next
  if room >= 0 then
    remaining = room / interval
    remaining = remaining - remaining % 1 + 1 -- floor: room and interval are positive
    if remaining > burst then remaining = burst end
  end
  local reset = next - now
  if reset < 0 then reset = 0 end
  if allowed == 1 then
    answers[w + 1], answers[w + 2] = remaining, reset
    w = w + 2
  else
    answers[w + 1], answers[w + 2], answers[w + 3] = -1 - remaining, reset, retry
    w = w + 3
  end

  -- The key's last check of the call writes the TAT its checks left, if they moved it. The key
  -- goes once the bucket has been full again for a while (then it is the same as no key):
  -- idle_ms after the TAT. Its expiry is set when the TAT enters a new stretch of that length,
  -- to the end of the next stretch, which covers every TAT in this one; the writes in between
  -- keep it (an expiry on every write costs Redis more than the write).
  if not more and kept[1] ~= kept[2] then
    -- The rule and time of the last check that moved it: this one, or one before it.
    local last_ms, at = idle_ms, now
    if not commit or next == tat then last_ms, at = kept[3], kept[4] end
    local stored, idle = kept[2], last_ms * 1000
    next = kept[1]
    local stretch = next - next % idle -- where its stretch starts
    if stored == 0 or stored - stored % idle ~= stretch then
      call('SET', key, format('%d', next), 'PX', floor((stretch + 2 * idle - at) / 1000))
    else
      call('SET', key, format('%d', next), 'KEEPTTL')
    end
    kept[2] = next
  end
end
until true
if pass == 1 and (answers[answered + 1] < 0 or answers[answered + 2] < 0) then gall = false end
end
return answers
