-- Cloudflare's two-counter sliding window (slidewin's SlidingCounter), in a hash {w, p, c}:
-- the current window's index, the previous window's count and the current one's.
-- KEYS[1]: the state. ARGV (after the common three): span, limit, idle ttl in ms.
-- Returns "allowed limit remaining reset_after retry_after", waits in microseconds.
local span, limit = tonumber(ARGV[4]), tonumber(ARGV[5])

local state = redis.call('HMGET', KEYS[1], 'w', 'p', 'c')
local window = tonumber(state[1]) or 0
local previous, current = tonumber(state[2]) or 0, tonumber(state[3]) or 0

-- Roll forward to `now`; an earlier window (the clock went back) counts at this one's start.
local at = math.floor(now / span)
local elapsed = 0
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

if after <= capacity then
  if commit and cost > 0 then
    redis.call('HSET', KEYS[1], 'w', window, 'p', previous, 'c', current + cost)
    redis.call('PEXPIRE', KEYS[1], ARGV[6])
  end
  local reset_at = 0
  if current + cost > 0 then
    reset_at = starts + 2 * span
  elseif previous > 0 then
    reset_at = starts + span
  end
  return string.format('1 %d %d %d 0', limit, math.floor((capacity - after) / span),
    math.max(reset_at - now, 0))
end

-- Denied. The first moment the cost fits, the state staying as it is: later in this window as
-- the previous one weighs less, or else in the next. The smallest offset into a window with
-- weight * (span - offset) <= room * span:
local function first_offset(weight, room)
  if weight == 0 then return 0 end
  return math.max(span - math.floor(room * span / weight), 0)
end
local admits_at = nil
if limit >= current + cost then
  local offset = math.max(first_offset(previous, limit - current - cost), elapsed)
  if offset < span then admits_at = starts + offset end
end
if not admits_at then
  admits_at = starts + span + first_offset(current, limit - cost)
end
local reset_at = starts + span
if current > 0 then reset_at = starts + 2 * span end
local remaining = math.floor(math.max(capacity - weighted, 0) / span)
return string.format('0 %d %d %d %d', limit, remaining, math.max(reset_at - now, 0),
  math.max(admits_at - now, 0))
