-- Prepended to every script. All times are whole microseconds: Lua numbers are doubles, exact
-- for integers below 2^53, and microseconds since 1970 stay below that until the year 2255; the
-- Rust side refuses quotas whose arithmetic would not. No helper functions: a script's body
-- runs on every call, and each function it defines is a closure to allocate (measured: a fifth
-- of a check). Numbers go to redis.call as numbers (Redis prints integers below 2^53 exactly),
-- but never through `..` or tostring, which print 1.7e+15: string.format('%d') there. The
-- answer is one string, "allowed limit remaining reset_after retry_after": cheaper for Redis
-- to send than a table (measured: a tenth of a check).

-- ARGV[1]: the time to count at, the caller's, or '' for the Redis server's clock.
-- ARGV[2]: the cost. ARGV[3]: '1' to consume an admitted cost, '0' only to answer (peek).
local now = ARGV[1]
if now == '' then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
else
  now = tonumber(now)
end
local cost, commit = tonumber(ARGV[2]), ARGV[3] == '1'
