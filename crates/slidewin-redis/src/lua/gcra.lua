-- The token bucket as GCRA (slidewin's Gcra): one number, the theoretical arrival time (TAT).
-- KEYS[1]: the TAT. ARGV (after the common three): interval, tolerance, burst, and how long in
-- ms an idle key outlives a full bucket.
-- Returns "allowed burst remaining reset_after retry_after", waits in microseconds.
local interval, tolerance, burst = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local tat = tonumber(redis.call('GET', KEYS[1]) or 0)

-- The TAT after this request, and whether it is admitted.
local next, allowed, retry = tat, 1, 0
if cost > 0 then
  local admits_at = math.max(tat + interval * (cost - 1) - tolerance, 0)
  if now >= admits_at then
    next = math.max(tat, now) + interval * cost
    if commit then
      -- The key goes once the bucket has been full again for a while (then it is the same as
      -- no key): ARGV[7], a span. Not at once, so that a busy key is not deleted and made
      -- again between its checks.
      redis.call('SET', KEYS[1], next, 'PX', math.floor((next - now) / 1000) + ARGV[7])
    end
  else
    allowed, retry = 0, admits_at - now
  end
end

-- How many more units fit now.
local remaining = 0
local room = now + tolerance - next
if room >= 0 then remaining = math.min(math.floor(room / interval) + 1, burst) end
return string.format('%d %d %d %d %d', allowed, burst, remaining, math.max(next - now, 0), retry)
