-- The exact sliding log (slidewin's SlidingLog), on a sorted set of admission times.
-- key: the log. rule: span, limit, idle ttl in ms.
-- Answers allowed, limit, remaining, reset_after, retry_after (waits in microseconds).
local span, limit, idle_ms = rule[1], rule[2], rule[3]

-- The log's own time never goes back: a request older than the newest admission counts at it.
local at = now
local newest = nil
local top = first('ZRANGE', key, -1, -1, 'WITHSCORES')
if soft and top.err then
  answers[w + 1], answers[w + 2], answers[w + 3], answers[w + 4], answers[w + 5] = -1, 0, 0, 0, 0
  break
end
if #top > 0 then
  newest = tonumber(top[2])
  if newest > at then at = newest end
end

local after = format('(%d', at - span)
local count = call('ZCOUNT', key, after, '+inf')
if count == 0 then newest = nil end

if count + cost <= limit then
  if commit and cost > 0 then
    -- `at` becomes the newest admission, and every later check counts at it or after: what
    -- has left the window ending there never counts again. (The max is inclusive: an entry
    -- exactly one span old goes.)
    call('ZREMRANGEBYSCORE', key, '-inf', format('%d', at - span))
    -- Each unit its own member, `at-n`: the entries already at `at` are numbered from 1 (a
    -- removal takes all of a time's entries or none, so the numbers stay unique).
    local taken = 0
    local score = format('%d', at)
    if newest == at then taken = call('ZCOUNT', key, score, score) end
    local first = 1
    while first <= cost do
      local members = {}
      for n = first, min(first + 499, cost) do
        members[#members + 1] = score
        members[#members + 1] = format('%d-%d', at, taken + n)
      end
      call('ZADD', key, unpack(members))
      first = first + 500
    end
    -- The log goes idle_ms after its newest entry. Its expiry is set when the
    -- newest time enters a new stretch of that length, to the end of the next stretch, which
    -- covers every newest time in this one (an expiry on every write costs Redis about as much
    -- as the write: measured).
    local idle = idle_ms * 1000
    local stretch = floor(at / idle)
    if not newest or floor(newest / idle) ~= stretch then
      call('PEXPIRE', key, floor(((stretch + 2) * idle - now) / 1000))
    end
  end
  if cost > 0 then newest = at end
  local reset = 0
  if newest then reset = max(newest + span - now, 0) end
  answers[w + 1], answers[w + 2], answers[w + 3], answers[w + 4], answers[w + 5] =
    1, limit, limit - count - cost, reset, 0
  break
end

-- The newest `limit - cost` admitted units may stay; the one just older is the last that must
-- leave for the cost to fit.
local stay = limit - cost
local leaving = call('ZRANGEBYSCORE', key, after, '+inf', 'WITHSCORES', 'LIMIT', count - 1 - stay, 1)
local reset = max(newest + span - now, 0)
answers[w + 1], answers[w + 2], answers[w + 3], answers[w + 4], answers[w + 5] =
  0, limit, limit - count, reset, max(tonumber(leaving[2]) + span - now, 0)
