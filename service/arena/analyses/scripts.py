"""The analysis hash's scripts (``service.arena.analyses.queue``): asking, the worker's
lease (claim, renew) and the result. Each copies the game's TTL onto the analysis hash,
so an analysis goes when its game goes."""

# The TTL of KEYS[1] becomes KEYS[2]'s (the game's): none if the game has none.
_SAME_TTL = """
local function same_ttl(key, game)
  local ttl = redis.call('PTTL', game)
  if ttl > 0 then redis.call('PEXPIRE', key, ttl) else redis.call('PERSIST', key) end
end
"""

# KEYS: analysis, game. ARGV: now, stale_s. 1: the caller adds a stream entry (a new
# request, or one whose queued entry or worker seems lost: older than stale_s), else 0.
ASK = _SAME_TTL + """
if redis.call('EXISTS', KEYS[2]) == 0 then return -1 end
local status = redis.call('HGET', KEYS[1], 'status')
local now = tonumber(ARGV[1])
if not status then
  redis.call('HSET', KEYS[1], 'status', 'queued', 'asked', ARGV[1], 'done', 0, 'total', 0)
  same_ttl(KEYS[1], KEYS[2])
  return 1
end
if status == 'done' then return 0 end
local since = tonumber(redis.call('HGET', KEYS[1], 'lease') or
                       redis.call('HGET', KEYS[1], 'asked') or 0)
if since + tonumber(ARGV[2]) < now then
  redis.call('HSET', KEYS[1], 'asked', ARGV[1])
  if status == 'failed' then redis.call('HSET', KEYS[1], 'status', 'queued') end
  return 1
end
return 0
"""

# KEYS: analysis, game. ARGV: worker, now, lease_s. 1: computing is ours; 0: done (or
# the game is gone): acknowledge; -1: another worker's lease runs: leave it pending.
CLAIM = _SAME_TTL + """
if redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
local status = redis.call('HGET', KEYS[1], 'status')
if status == 'done' then return 0 end
local holder = redis.call('HGET', KEYS[1], 'worker')
local lease = tonumber(redis.call('HGET', KEYS[1], 'lease') or 0)
if holder and holder ~= ARGV[1] and lease > tonumber(ARGV[2]) then return -1 end
redis.call('HSET', KEYS[1], 'status', 'running', 'worker', ARGV[1],
           'lease', tonumber(ARGV[2]) + tonumber(ARGV[3]), 'done', 0)
redis.call('HINCRBY', KEYS[1], 'attempts', 1)
same_ttl(KEYS[1], KEYS[2])
return 1
"""

# KEYS: analysis. ARGV: worker, now, lease_s, done, total. 1: still ours.
RENEW = """
if redis.call('HGET', KEYS[1], 'worker') ~= ARGV[1] then return 0 end
if redis.call('HGET', KEYS[1], 'status') ~= 'running' then return 0 end
redis.call('HSET', KEYS[1], 'lease', tonumber(ARGV[2]) + tonumber(ARGV[3]),
           'done', ARGV[4], 'total', ARGV[5])
return 1
"""

# KEYS: analysis, game. ARGV: worker, status (done|failed), result or error, etag, now.
FINISH = _SAME_TTL + """
if redis.call('HGET', KEYS[1], 'worker') ~= ARGV[1] then return 0 end
if ARGV[2] == 'done' then
  redis.call('HSET', KEYS[1], 'status', 'done', 'result', ARGV[3], 'etag', ARGV[4],
             'finished', ARGV[5])
  redis.call('HDEL', KEYS[1], 'error')
else
  redis.call('HSET', KEYS[1], 'status', 'failed', 'error', ARGV[3], 'finished', ARGV[5])
end
redis.call('HDEL', KEYS[1], 'worker', 'lease')
same_ttl(KEYS[1], KEYS[2])
return 1
"""


# KEYS: analysis. Undo an ``ASK`` whose queueing was refused (a requester at its cap): the
# hash goes if it holds no result, so the next ask starts afresh.
UNASK = """
if redis.call('HEXISTS', KEYS[1], 'result') == 1 then return 0 end
if redis.call('HGET', KEYS[1], 'status') ~= 'queued' then return 0 end
return redis.call('DEL', KEYS[1])
"""


# KEYS: analysis. ARGV: worker, now. A worker gives the game up (for a lighter request):
# if it still holds it, it is queued again, with no worker and no lease.
UNCLAIM = """
if redis.call('HGET', KEYS[1], 'worker') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'status', 'queued', 'asked', ARGV[2], 'done', 0)
redis.call('HDEL', KEYS[1], 'worker', 'lease')
return 1
"""

__all__ = ["ASK", "CLAIM", "FINISH", "RENEW", "UNASK", "UNCLAIM"]
