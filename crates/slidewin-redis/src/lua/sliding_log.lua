-- The exact sliding log (slidewin's SlidingLog), on a sorted set of admission times.
-- KEYS[1]: the log. ARGV (after the common three): span, limit, idle ttl in ms.
-- Returns "allowed limit remaining reset_after retry_after", waits in microseconds.
local span, limit = tonumber(ARGV[4]), tonumber(ARGV[5])

-- The log's own time never goes back: a request older than the newest admission counts at it.
local at = now
local newest = nil
local top = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
if #top > 0 then
  newest = tonumber(top[2])
  if newest > at then at = newest end
end

local after = string.format('(%d', at - span)
local count = redis.call('ZCOUNT', KEYS[1], after, '+inf')
if count == 0 then newest = nil end

if count + cost <= limit then
  if commit and cost > 0 then
    -- `at` becomes the newest admission, and every later check counts at it or after: what
    -- has left the window ending there never counts again. (The max is inclusive: an entry
    -- exactly one span old goes.)
    redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', at - span)
    -- Each unit its own member, `at-n`: the entries already at `at` are numbered from 1 (a
    -- removal takes all of a time's entries or none, so the numbers stay unique).
    local taken = 0
    if newest == at then taken = redis.call('ZCOUNT', KEYS[1], at, at) end
    local first = 1
    while first <= cost do
      local members = {}
      for n = first, math.min(first + 499, cost) do
        members[#members + 1] = at
        members[#members + 1] = string.format('%d-%d', at, taken + n)
      end
      redis.call('ZADD', KEYS[1], unpack(members))
      first = first + 500
    end
    redis.call('PEXPIRE', KEYS[1], ARGV[6])
  end
  if cost > 0 then newest = at end
  local reset = 0
  if newest then reset = math.max(newest + span - now, 0) end
  return string.format('1 %d %d %d 0', limit, limit - count - cost, reset)
end

-- The newest `limit - cost` admitted units may stay; the one just older is the last that must
-- leave for the cost to fit.
local stay = limit - cost
local leaving = redis.call('ZRANGEBYSCORE', KEYS[1], after, '+inf', 'WITHSCORES', 'LIMIT', count - 1 - stay, 1)
local reset = math.max(newest + span - now, 0)
return string.format('0 %d %d %d %d', limit, limit - count, reset,
  math.max(tonumber(leaving[2]) + span - now, 0))
