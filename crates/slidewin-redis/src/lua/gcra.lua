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
    answers[w + 1], answers[w + 2], answers[w + 3] = 0, -1, 0
    break
  end
  tat = tonumber(tat or 0)
  kept[1], kept[2], last = tat, tat, key
end

-- The TAT after this request, and whether it is admitted.
local next, allowed, retry = tat, 1, 0
if cost > 0 then
  local admits_at = max(tat + interval * (cost - 1) - tolerance, 0)
  if now >= admits_at then
    next = max(tat, now) + interval * cost
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
if room >= 0 then remaining = min(floor(room / interval) + 1, burst) end
if allowed == 0 then remaining = -1 - remaining end
answers[w + 1], answers[w + 2], answers[w + 3] = remaining, max(next - now, 0), retry

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
  local stretch = floor(next / idle)
  if stored == 0 or floor(stored / idle) ~= stretch then
    call('SET', key, format('%d', next), 'PX', floor(((stretch + 2) * idle - at) / 1000))
  else
    call('SET', key, format('%d', next), 'KEEPTTL')
  end
  kept[2] = next
end
