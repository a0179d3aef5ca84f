-- A counter per window aligned to the span (slidewin's FixedWindow), in a hash {w, c}.
-- KEYS[1]: the state. ARGV (after the common three): span, limit, idle ttl in ms.
-- Returns "allowed limit remaining reset_after retry_after", waits in microseconds.
local span, limit = tonumber(ARGV[4]), tonumber(ARGV[5])

local state = redis.call('HMGET', KEYS[1], 'w', 'c')
local window, count = tonumber(state[1]) or 0, tonumber(state[2]) or 0
-- A later window starts empty; an earlier one (the clock went back) counts in this one.
local current = math.floor(now / span)
if current > window then
  window, count = current, 0
end

local wait = math.max((window + 1) * span - now, 0)
local used = count + cost
if used <= limit then
  if commit and cost > 0 then
    redis.call('HSET', KEYS[1], 'w', window, 'c', used)
    redis.call('PEXPIRE', KEYS[1], ARGV[6])
  end
  if used == 0 then wait = 0 end
  return string.format('1 %d %d %d 0', limit, limit - used, wait)
end
return string.format('0 %d %d %d %d', limit, limit - count, wait, wait)
