-- slidewin's settle on Redis: a reservation's cost changed in place, in the windows it was
-- admitted in (slidewin's `settle`), under every rule of one key in one call. The rules' keys
-- share the key's hash tag, so one slot: atomic, and Cluster-safe. Times are whole
-- microseconds of Unix time, as check.lua's; numbers stay below 2^53 (the Rust side bounds
-- them), and go to Redis as format('%d', n).
--
-- KEYS[i]: rule i's key. ARGV: the reservation's time, `more` and `less` (the difference to
-- its units, one of them 0), then four numbers a rule: its algorithm (1 sliding log,
-- 2 sliding counter, 3 fixed window, 4 GCRA, 5 leases, 6 calendar) and, for the logs and the
-- windows, span and limit (the fourth unused); for GCRA, its interval, the earliest TAT a
-- settle down leaves (the reservation's time plus what it used) and the latest a settle up
-- leaves (the reservation's time plus a span and a full bucket); for a calendar rule, the
-- window holding the reservation's time as the client dated it (start, end) and the limit.
-- Answers 1 when any rule still held the reservation (GCRA: when its TAT moved), else 0.
local call, tonumber, format = redis.call, tonumber, string.format
local floor, min, max = math.floor, math.min, math.max
local spack, sunpack, rep, sub, byte = struct.pack, struct.unpack, string.rep, string.sub, string.byte
local W = 7
local at, more, less = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])

-- The first of the `n` times of `log` (after `o` bytes of deadline) for which `found(t)`
-- holds, by bisection (times only grow along the string); n + 1 for none.
local function first(log, o, n, found)
  local lo, hi = 1, n + 1
  while lo < hi do
    local mid = floor((lo + hi) / 2)
    if found(sunpack('>I7', log, o + mid * W - W + 1)) then hi = mid else lo = mid + 1 end
  end
  return lo
end

-- The packed log (check.lua's): one time per unit, sorted. Up: times at `at` inserted after
-- the ones of that time, so that the window (hw - span, hw] holds at most twice the limit.
-- Down: up to `less` times equal to `at` removed. A reservation whose times are gone, or out
-- of the window ending at the newest time (hw), changes nothing. The log is written back with
-- the times of that window alone: a settle that empties the newest instant moves hw back, and
-- no time that had left must count again (memory dropped those at their admission).
local function settle_log(key, span, limit)
  local log = call('GET', key)
  if not log then return false end
  local o = 0
  if byte(log) >= 128 then o = W end
  local n = (#log - o) / W
  if n < 1 then return false end
  local hw = sunpack('>I7', log, #log - W + 1)
  if at + span <= hw then return false end
  local lo = first(log, o, n, function(t) return t >= at end)
  local hi = first(log, o, n, function(t) return t > at end)
  if hi == lo then return false end
  local units = hi - lo
  local live = first(log, o, n, function(t) return t > hw - span end)
  if more > 0 then
    units = units + min(more, max(2 * limit - (n + 1 - live), 0))
  else
    units = units - min(less, units)
  end
  local before = sub(log, o + (live - 1) * W + 1, o + (lo - 1) * W)
  local after = sub(log, o + (hi - 1) * W + 1)
  if units == 0 and before == '' and after == '' then
    call('DEL', key) -- no time left: the same as no key
  else
    call('SET', key, sub(log, 1, o) .. before .. rep(spack('>I7', at), units) .. after, 'KEEPTTL')
  end
  return true
end

-- A counter of the reservation's window, if the hash still holds it: `c` (its window `w`) or,
-- for the sliding counter, `p` (the window before). Up to the limit, down to 0.
local function settle_count(key, span, limit, previous)
  local state = call('HMGET', key, 'w', 'p', 'c')
  if not state[1] then return false end
  local window, mine = tonumber(state[1]), floor(at / span)
  local field, count = 'c', tonumber(state[3]) or 0
  if mine ~= window then
    if not previous or mine + 1 ~= window then return false end
    field, count = 'p', tonumber(state[2]) or 0
  end
  if more > 0 then count = min(count + more, limit) else count = count - min(less, count) end
  call('HSET', key, field, format('%d', count))
  return true
end

-- A calendar counter, if the hash still holds the reservation's window [start, ends): up to
-- the limit, down to 0. A later window holds nothing of it.
local function settle_calendar(key, start, ends, limit)
  local state = call('HMGET', key, 's', 'e', 'c')
  if not state[1] or tonumber(state[1]) ~= start or tonumber(state[2]) ~= ends then return false end
  local count = tonumber(state[3]) or 0
  if more > 0 then count = min(count + more, limit) else count = count - min(less, count) end
  call('HSET', key, 'c', format('%d', count))
  return true
end

-- The TAT moved by the difference in intervals: later, never past `latest`, or earlier, never
-- before `earliest`; never the other way. Whether it moved. A TAT moved later keeps its key as much
-- longer (its expiry is relative: the times may be a caller's, not Redis's).
local function settle_gcra(key, interval, earliest, latest)
  local tat = call('GET', key)
  if not tat then return false end
  tat = tonumber(tat)
  local next = tat
  if more > 0 then
    next = max(min(tat + more * interval, latest), tat)
  else
    next = min(max(tat - less * interval, earliest), tat)
  end
  if next == tat then return false end
  local ttl = call('PTTL', key)
  call('SET', key, format('%d', next), 'KEEPTTL')
  if next > tat and ttl > 0 then
    call('PEXPIRE', key, format('%d', ttl + floor((next - tat) / 1000) + 1))
  end
  return true
end

local held = 0
for i = 1, #KEYS do
  local base = 3 + (i - 1) * 4
  local alg, a, b, c = tonumber(ARGV[base + 1]), tonumber(ARGV[base + 2]), tonumber(ARGV[base + 3]), tonumber(ARGV[base + 4])
  local changed = false
  if alg == 1 or alg == 5 then
    changed = settle_log(KEYS[i], a, b)
  elseif alg == 2 or alg == 3 then
    changed = settle_count(KEYS[i], a, b, alg == 2)
  elseif alg == 6 then
    changed = settle_calendar(KEYS[i], a, b, c)
  else
    changed = settle_gcra(KEYS[i], a, b, c)
  end
  if changed then held = 1 end
end
return held
