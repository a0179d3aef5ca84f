-- slidewin's settle on Redis: a reservation's cost changed in place, in the windows it was
-- admitted in (slidewin's `settle`), under every rule of one key in one call. The rules' keys
-- share the key's hash tag, so one slot: atomic, and Cluster-safe. Times are whole
-- microseconds of Unix time, as check.lua's; numbers stay below 2^53 (the Rust side bounds
-- them), and go to Redis as format('%d', n).
--
-- KEYS[i]: rule i's key. ARGV: the reservation's time ('' for a charge at Redis's TIME),
-- `more` and `less` (the difference to its units, one of them 0), `charge` (1 for a
-- reservation of nothing: `more` is a cost reported after the work, counted at that time
-- whatever the limit, the key made if need be),
-- then four numbers a rule: its algorithm (1 sliding log, 2 sliding counter, 3 fixed window,
-- 4 GCRA, 5 leases, 6 calendar) and, for the logs and the windows, span, limit and the idle
-- ttl in ms check.lua's writes give the key; for GCRA, its interval, the earliest TAT a
-- settle down leaves (the reservation's time plus what it used) and how far past the time a
-- settle up may take it (a span and a full bucket); for a calendar rule, the
-- window holding the reservation's time as the client dated it (start, end) and the limit
-- (a charge at Redis's TIME is dated by the client from TIME read first).
-- Answers 1 when any rule still held the reservation (GCRA: when its TAT moved; a charge:
-- when it charged anything), else 0.
local call, tonumber, format = redis.call, tonumber, string.format
local floor, min, max = math.floor, math.min, math.max
local spack, sunpack, rep, sub, byte = struct.pack, struct.unpack, string.rep, string.sub, string.byte
local W = 7
local at, more, less = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local charge = ARGV[4] == '1'
if ARGV[1] == '' then -- a charge at the server's clock
  local t = call('TIME')
  at = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local TOP = 36028797018963968 -- check.lua's: the offset that marks a log's deadline slot

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

-- A charge of `more` at `at` (or at the newest time, if later), as check.lua admits: the times
-- that left the window go, the log holds at most twice the limit in its window, and the
-- deadline slot and expiry move as an admission moves them.
local function charge_log(key, span, limit, idle_ms)
  local log = call('GET', key)
  local o, n, d, t = 0, 0, nil, at
  if log then
    if byte(log) >= 128 then o, d = W, sunpack('>I7', log) - TOP end
    n = (#log - o) / W
  end
  local live = 1
  if n > 0 then
    t = max(t, (sunpack('>I7', log, #log - W + 1)))
    live = first(log, o, n, function(x) return x > t - span end)
  end
  local units = min(more, max(2 * limit - (n + 1 - live), 0))
  if units > 0 then
    local kept = ''
    if n > 0 then kept = sub(log, o + (live - 1) * W + 1) end
    local idle = idle_ms * 1000
    local deadline = t - t % idle + 2 * idle
    local times = kept .. rep(spack('>I7', t), units)
    if d and d >= deadline then
      call('SET', key, spack('>I7', d + TOP) .. times, 'KEEPTTL')
    else
      call('SET', key, spack('>I7', deadline + TOP) .. times, 'PX',
        format('%d', max(floor((deadline - at) / 1000), 1)))
    end
  end
  return more > 0
end

-- A charge in the window of `at` (the hash's, if later): a later window starts empty (the
-- sliding counter's next one weighs the one before), up to the limit; a new window or key
-- gets check.lua's expiry.
local function charge_count(key, span, limit, idle_ms, sliding)
  local state = call('HMGET', key, 'w', 'p', 'c')
  local window, p, c = tonumber(state[1]), tonumber(state[2]) or 0, tonumber(state[3]) or 0
  local mine, fresh = floor(at / span), false
  if not window or mine > window then
    if sliding and window and mine == window + 1 then p = c else p = 0 end
    window, c, fresh = mine, 0, true
  end
  c = min(c + more, limit)
  if sliding then
    call('HSET', key, 'w', format('%d', window), 'p', format('%d', p), 'c', format('%d', c))
  else
    call('HSET', key, 'w', format('%d', window), 'c', format('%d', c))
  end
  if fresh then call('PEXPIRE', key, format('%d', idle_ms)) end
  return more > 0
end

-- A charge in the calendar window [start, ends) the client dated `at` in (the hash's, if
-- later: a clock gone back counts there, as check.lua does), up to the limit; a new window or
-- key gets check.lua's expiry, a minute past the window's end.
local function charge_calendar(key, start, ends, limit)
  local state = call('HMGET', key, 's', 'e', 'c')
  local s, e, c = tonumber(state[1]), tonumber(state[2]), tonumber(state[3]) or 0
  local fresh = false
  if not s or not ((s == start and e == ends) or s >= ends) then
    s, e, c, fresh = start, ends, 0, true
  end
  c = min(c + more, limit)
  call('HSET', key, 's', format('%d', s), 'e', format('%d', e), 'c', format('%d', c))
  if fresh then call('PEXPIRE', key, format('%d', floor(max(ends - at, 0) / 1000) + 60000)) end
  return more > 0
end

-- A charge as an admission at `at`: from the TAT, or from `at` if the bucket is full by then,
-- never past `latest`. The key lives until the TAT at least.
local function charge_gcra(key, interval, latest)
  local stored = call('GET', key)
  local tat = tonumber(stored) or 0
  local next = min(max(tat, at) + more * interval, latest)
  if next <= tat then return false end
  local ttl = floor((next - at) / 1000) + 1
  if stored then ttl = max(ttl, call('PTTL', key)) end
  call('SET', key, format('%d', next), 'PX', format('%d', ttl))
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
  local base = 4 + (i - 1) * 4
  local alg, a, b, c = tonumber(ARGV[base + 1]), tonumber(ARGV[base + 2]), tonumber(ARGV[base + 3]), tonumber(ARGV[base + 4])
  local changed = false
  if charge then
    if more == 0 then
      changed = false
    elseif alg == 1 or alg == 5 then
      changed = charge_log(KEYS[i], a, b, c)
    elseif alg == 2 or alg == 3 then
      changed = charge_count(KEYS[i], a, b, c, alg == 2)
    elseif alg == 6 then
      changed = charge_calendar(KEYS[i], a, b, c)
    else
      changed = charge_gcra(KEYS[i], a, at + c)
    end
  elseif alg == 1 or alg == 5 then
    changed = settle_log(KEYS[i], a, b)
  elseif alg == 2 or alg == 3 then
    changed = settle_count(KEYS[i], a, b, alg == 2)
  elseif alg == 6 then
    changed = settle_calendar(KEYS[i], a, b, c)
  else
    changed = settle_gcra(KEYS[i], a, b, at + c)
  end
  if changed then held = 1 end
end
return held
