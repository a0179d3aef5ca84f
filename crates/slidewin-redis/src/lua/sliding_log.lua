-- The exact sliding log (slidewin's SlidingLog), on a sorted set of admission times.
-- key: the log. rule: span, limit, idle ttl in ms.
-- Answers remaining (-1 - remaining when denied), reset_after, retry_after (see common.lua).
local span, limit, idle_ms = rule[1], rule[2], rule[3]
local idle = idle_ms * 1000

-- An entry per admitted unit, its time the score (from 0), its member the time's own number
-- (from 0 at each time; a letter for how many digits first, so that a time's members sort by
-- number) then the time: `a0` + time. Three members more, at negative scores (time - 2^53)
-- that no window, trimming or `inspect` reaches: `~` and `~~`, both the newest admission's
-- time, the log's own (it never goes back: a request older counts at it), and `~e`, the log's
-- expiry deadline (the end of the stretch of idle_ms after the newest's). Every write raises
-- all three with ZADD GT CH, which moves a member only forward and answers how many it added
-- or moved; so the common check, one unit admitted, reads nothing but its window's count and
-- learns from its own write whether the log's time was behind its own (the two `~` count 2
-- or 0, the rest at most 2): two calls instead of three, the newest member not read and
-- parsed (measured: Redis's time per check 3.0 to 2.5 µs). Old entries go with the expiry,
-- when the log's time enters a new stretch: a log holds none older than a span and a
-- stretch.
local OFF = 9007199254740992

-- The log as read in this call (false: no entry): its time (`hw`), the number of the last
-- member at that time (nil: not read), and the count of the window last asked about: at,
-- span, count.
local hw, idx = kept[1], kept[2]
if not same then
  hw, idx, kept[3] = nil, nil, false
  local counted = false
  if commit and cost == 1 then
    -- Counted as if the log's time were behind `now`, as it nearly always is; the write says.
    if texts_at ~= now or texts_span ~= span or texts_idle ~= idle then
      texts_at, texts_span, texts_idle = now, span, idle
      after_text, at_text = format('(%d', now - span), format('%d', now)
      deadline = now - now % idle + 2 * idle
      hw_text, dl_text = format('%d', now - OFF), format('%d', deadline - OFF)
    end
    local count = first('ZCOUNT', key, after_text, '+inf')
    if soft and type(count) == 'table' then
      answers[w + 1], answers[w + 2] = 0, -1
      w = w + 2
      break
    end
    if count < limit then
      local name = 'a0' .. at_text
      local moved =
        call('ZADD', key, 'GT', 'CH', hw_text, '~', hw_text, '~~', dl_text, '~e', at_text, name)
      if moved >= 3 then
        -- `~` moved, so every entry is older than `now`: the count holds, and `name` is new.
        -- `~e` moved too when `now` entered a new stretch: the expiry follows it, and the
        -- entries at or before `now - span` go (they never count again).
        if moved == 4 then
          call('PEXPIRE', key, format('%d', floor((deadline - now) / 1000)))
          call('ZREMRANGEBYSCORE', key, '0', format('%d', now - span))
        end
        kept[1], kept[2], kept[3], kept[4], kept[5], last = now, 0, now, span, count + 1, key
        answers[w + 1], answers[w + 2] = limit - count - 1, span
        w = w + 2
        break
      end
      -- The log's time was at or past `now` (a clock gone back, or a second admission in
      -- one microsecond). The write may have added `name` (if no entry had it), to undo, and
      -- moved `~e` (only under another rule's stretch), to honour: one of them is told apart
      -- by counting again.
      local added = moved == 2
      if moved == 1 then added = call('ZCOUNT', key, after_text, '+inf') > count end
      if added then call('ZREM', key, name) end
      if moved == 2 or (moved == 1 and not added) then
        call('PEXPIRE', key, format('%d', floor((deadline - now) / 1000)))
      end
    end
    kept[3], kept[4], kept[5] = now, span, count
    counted = true
  end
  local top = nil
  if counted then top = call('ZSCORE', key, '~') else top = first('ZSCORE', key, '~') end
  if soft and type(top) == 'table' then
    answers[w + 1], answers[w + 2] = 0, -1
    w = w + 2
    break
  end
  if top then
    hw = top + OFF
  else
    -- No `~`: no log, or one written before the markers, whose newest member gives its time.
    top = call('ZRANGE', key, '-1', '-1')[1]
    if top then
      local digits = byte(top) - 96
      if digits > 0 then
        hw = sub(top, digits + 2) + 0
      else
        hw = sub(top, 1, string.find(top, '-', 1, true) - 1) + 0 -- `time-n`, before numbers
      end
    end
  end
  kept[1], kept[2], last = hw or false, nil, key
end
if not hw then hw = nil end

local at = now
if hw and hw > at then at = hw end
if texts_at ~= at or texts_span ~= span or texts_idle ~= idle then
  texts_at, texts_span, texts_idle = at, span, idle
  after_text, at_text = format('(%d', at - span), format('%d', at)
  deadline = at - at % idle + 2 * idle
  hw_text, dl_text = format('%d', at - OFF), format('%d', deadline - OFF)
end
local count = kept[5]
if kept[3] ~= at or kept[4] ~= span then
  -- A log with no entry in the window counts none: no call to ask.
  count = 0
  if hw and hw > at - span then count = call('ZCOUNT', key, after_text, '+inf') end
  kept[3], kept[4], kept[5] = at, span, count
end

if count + cost <= limit then
  if commit and cost > 0 then
    -- Numbers from 0 at a time no entry has; after the last at the log's own time.
    local n = 0
    if hw == at then
      if idx == nil then
        idx = -1
        local tail = call('ZRANGE', key, at_text, at_text, 'BYSCORE', 'REV', 'LIMIT', '0', '1')[1]
        if tail then
          local digits = byte(tail) - 96
          if digits > 0 and digits < 27 then idx = sub(tail, 2, digits + 1) + 0 end
        end
      end
      n = idx + 1
    end
    local digits, ten = 1, 10
    while n >= ten do digits, ten = digits + 1, ten * 10 end
    local moved = -cost
    if cost == 1 then -- no table to unpack: 0.4 µs
      moved = moved + call('ZADD', key, 'GT', 'CH', hw_text, '~', hw_text, '~~', dl_text, '~e',
        at_text, format('%c%d%s', 96 + digits, n, at_text))
    else
      local members = { 'GT', 'CH', hw_text, '~', hw_text, '~~', dl_text, '~e' }
      for i = n, n + cost - 1 do
        if i >= ten then digits, ten = digits + 1, ten * 10 end
        members[#members + 1] = at_text
        members[#members + 1] = format('%c%d%s', 96 + digits, i, at_text)
        if #members >= 1000 then
          moved = moved + call('ZADD', key, unpack(members))
          members = { 'GT', 'CH' }
        end
      end
      if #members > 2 then moved = moved + call('ZADD', key, unpack(members)) end
    end
    -- Every name was new; the two `~` moved if the log's time did; `~e` if its deadline did.
    if not hw or at > hw then moved = moved - 2 end
    if moved > 0 then
      call('PEXPIRE', key, format('%d', floor((deadline - now) / 1000)))
      call('ZREMRANGEBYSCORE', key, '0', format('%d', at - span))
    end
    hw, kept[1], kept[2], kept[5] = at, at, n + cost - 1, count + cost
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

-- The newest `limit - cost` admitted units may stay; the one just older is the last that must
-- leave for the cost to fit.
-- (A count past the limit, a rule of a lower limit on the key, has no units left.)
local stay = limit - cost
local leaving = call('ZRANGEBYSCORE', key, after_text, '+inf', 'WITHSCORES', 'LIMIT', count - 1 - stay, 1)
local reset = max(hw + span - now, 0)
answers[w + 1], answers[w + 2], answers[w + 3] =
  -1 - max(limit - count, 0), reset, max(leaving[2] + span - now, 0)
w = w + 3
