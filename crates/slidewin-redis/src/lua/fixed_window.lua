-- A counter per window aligned to the span (slidewin's FixedWindow), in a hash {w, c}.
-- key: the state. rule: span, limit, idle ttl in ms.
-- Answers remaining (-1 - remaining when denied), reset_after, retry_after (see common.lua).
local span, limit, idle_ms = rule[1], rule[2], rule[3]

-- The key as its checks so far left it: its window and count, and whether it exists; whether
-- that is still to be written, and the expiry to set then (false: none).
local window, count, exists = kept[1], kept[2], kept[3]
if not same then
  local state = first('HMGET', key, 'w', 'c')
  if soft and state.err then
    answers[w + 1], answers[w + 2] = 0, -1
    w = w + 2
    break
  end
  window, count, exists = tonumber(state[1]) or 0, tonumber(state[2]) or 0, state[1] ~= false
  kept[1], kept[2], kept[3], kept[4], kept[5], last = window, count, exists, false, false, key
end
-- A later window starts empty; an earlier one (the clock went back) counts in this one.
local current = floor(now / span)
-- A new key, or a new window: its first write sets the expiry, which covers the window.
local fresh = not exists
if current > window then
  window, count, fresh = current, 0, true
end

local wait = max((window + 1) * span - now, 0)
local used = count + cost
-- The decision: `break` ends it, and the key's write below follows either way.
repeat
if used <= limit then
  if commit and cost > 0 then
    kept[1], kept[2], kept[3], kept[4] = window, used, true, true
    if fresh then kept[5] = idle_ms end
  end
  if used == 0 then wait = 0 end
  answers[w + 1], answers[w + 2] = limit - used, wait
  w = w + 2
  break
end
-- A count past the limit (a rule of a lower limit on the key) has no units left, not fewer.
answers[w + 1], answers[w + 2], answers[w + 3] = -1 - max(limit - count, 0), wait, wait
w = w + 3
until true

-- The key's last check of the call writes what its checks left.
if kept[4] and not more then
  call('HSET', key, 'w', format('%d', kept[1]), 'c', format('%d', kept[2]))
  if kept[5] then call('PEXPIRE', key, kept[5]) end
  kept[4], kept[5] = false, false
end
