-- Cloudflare's two-counter sliding window (slidewin's SlidingCounter), in a hash {w, p, c}:
-- the current window's index, the previous window's count and the current one's.
-- key: the state. rule: span, limit, idle ttl in ms.
-- Answers remaining (-1 - remaining when denied), reset_after, retry_after (see common.lua).
local span, limit, idle_ms = rule[1], rule[2], rule[3]

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
