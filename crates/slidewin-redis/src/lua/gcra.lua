-- The token bucket as GCRA (slidewin's Gcra): one number, the theoretical arrival time (TAT).
-- key: the TAT. rule: interval, tolerance, burst, and how long in
-- ms an idle key outlives a full bucket.
-- Answers remaining (-1 - remaining when denied), reset_after, retry_after (see common.lua).
local interval, tolerance, burst, idle_ms = rule[1], rule[2], rule[3], rule[4]
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
-- keep it (an expiry on every write costs Redis more than the write: measured).
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
