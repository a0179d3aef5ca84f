-- The token bucket as GCRA (slidewin's Gcra): one number, the theoretical arrival time (TAT).
-- key: the TAT. rule: interval, tolerance, burst, and how long in
-- ms an idle key outlives a full bucket.
-- Answers remaining (-1 - remaining when denied), reset_after, retry_after (see common.lua).
local interval, tolerance, burst, idle_ms = rule[1], rule[2], rule[3], rule[4]
local tat = kept[1]
if not same then
  tat = first('GET', key)
  if soft and type(tat) == 'table' then
    answers[w + 1], answers[w + 2], answers[w + 3] = 0, -1, 0
    break
  end
  tat = tonumber(tat or 0)
  kept[1], last = tat, key
end

-- The TAT after this request, and whether it is admitted.
local next, allowed, retry = tat, 1, 0
if cost > 0 then
  local admits_at = max(tat + interval * (cost - 1) - tolerance, 0)
  if now >= admits_at then
    next = max(tat, now) + interval * cost
    if commit then
      -- The key goes once the bucket has been full again for a while (then it is the same as
      -- no key): idle_ms after the TAT. Its expiry is set when the TAT enters a new
      -- stretch of that length, to the end of the next stretch, which covers every TAT in this
      -- one; the checks in between keep it (an expiry on every write costs Redis more than
      -- the write: measured).
      local idle = idle_ms * 1000
      local stretch = floor(next / idle)
      if tat == 0 or floor(tat / idle) ~= stretch then
        call('SET', key, format('%d', next), 'PX', floor(((stretch + 2) * idle - now) / 1000))
      else
        call('SET', key, format('%d', next), 'KEEPTTL')
      end
      kept[1] = next
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
