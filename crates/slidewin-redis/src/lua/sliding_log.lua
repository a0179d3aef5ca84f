-- The exact sliding log (slidewin's SlidingLog), on a sorted set of admission times.
-- key: the log. rule: span, limit, idle ttl in ms.
-- Answers remaining (-1 - remaining when denied), reset_after, retry_after (see common.lua).
local span, limit, idle_ms = rule[1], rule[2], rule[3]

-- Each unit its own member: its number in the log (from 1, again once all entries are old), a
-- letter for how many digits first, then its time: `c123` + time. The letter sorts a time's
-- members by number, so the last member gives the newest time and the last number: no
-- WITHSCORES (the score printed with '%.17g' and parsed back: 0.45 µs), and no count of the
-- entries at that time to number them.

-- The log as stored: the time and number of its newest entry (false and 0 when empty; `top`,
-- whether it has any entry, is that time or the member read), and the count of the window
-- last asked about: at, span, count.
local top, newest, seq = kept[1], kept[1] or nil, kept[2]
if not same then
  newest, seq = nil, 0
  top = first('ZRANGE', key, '-1', '-1')
  if soft and top.err then
    answers[w + 1], answers[w + 2] = 0, -1
    w = w + 2
    break
  end
  top = top[1]
  if top then
    local digits = byte(top) - 96
    if digits > 0 then
      seq, newest = sub(top, 2, digits + 1) + 0, sub(top, digits + 2) + 0
    else
      -- Written before numbers (`time-n`): they start at 1, and a letter sorts after digits.
      newest = sub(top, 1, string.find(top, '-', 1, true) - 1) + 0
    end
  end
  kept[1], kept[2], kept[3], last = newest or false, seq, false, key
end
-- The log's own time never goes back: a request older than the newest admission counts at it.
local at = now
if newest and newest > at then at = newest end

if texts_at ~= at or texts_span ~= span then
  texts_at, texts_span, after_text, at_text = at, span, format('(%d', at - span), format('%d', at)
end
local after = after_text
local count = kept[5]
if kept[3] ~= at or kept[4] ~= span then
  -- A log with no entry at all (a key seen for the first time, or gone idle) counts none:
  -- no call to ask (a key's first check is then two calls, not three).
  count = 0
  if top then count = call('ZCOUNT', key, after, '+inf') end
  kept[3], kept[4], kept[5] = at, span, count
end
if count == 0 then newest, seq = nil, 0 end

if count + cost <= limit then
  if commit and cost > 0 then
    local score, digits, ten = at_text, 1, 10
    while seq + 1 >= ten do digits, ten = digits + 1, ten * 10 end
    if cost == 1 then -- no table to unpack: 0.4 µs
      call('ZADD', key, score, format('%c%d%s', 96 + digits, seq + 1, score))
    else
      local members = {}
      for n = seq + 1, seq + cost do
        if n >= ten then digits, ten = digits + 1, ten * 10 end
        members[#members + 1] = score
        members[#members + 1] = format('%c%d%s', 96 + digits, n, score)
        if #members == 1000 then
          call('ZADD', key, unpack(members))
          members = {}
        end
      end
      if #members > 0 then call('ZADD', key, unpack(members)) end
    end
    -- Every later check counts at `at` or after, so entries at or before `at - span` (the max is
    -- inclusive) never count again. They go when the numbers pass a multiple of 8, or when all
    -- are that old (removing them at every admission: 0.8 µs of 5.6): between calls the set
    -- holds at most limit + 7 entries.
    if top and (not newest or seq % 8 + cost >= 8) then
      call('ZREMRANGEBYSCORE', key, '-inf', format('%d', at - span))
    end
    -- The log goes idle_ms after its newest entry. Its expiry is set when the
    -- newest time enters a new stretch of that length, to the end of the next stretch, which
    -- covers every newest time in this one (an expiry on every write costs Redis about as much
    -- as the write: measured).
    local idle = idle_ms * 1000
    local stretch = at - at % idle -- where its stretch starts
    if not newest or newest - newest % idle ~= stretch then
      call('PEXPIRE', key, format('%d', floor((stretch + 2 * idle - now) / 1000)))
    end
    kept[1], kept[2], kept[5] = at, seq + cost, count + cost
  end
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

-- The newest `limit - cost` admitted units may stay; the one just older is the last that must
-- leave for the cost to fit.
-- (A count past the limit, a rule of a lower limit on the key, has no units left.)
local stay = limit - cost
local leaving = call('ZRANGEBYSCORE', key, after, '+inf', 'WITHSCORES', 'LIMIT', count - 1 - stay, 1)
local reset = max(newest + span - now, 0)
answers[w + 1], answers[w + 2], answers[w + 3] =
  -1 - max(limit - count, 0), reset, max(leaving[2] + span - now, 0)
w = w + 3
