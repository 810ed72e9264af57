"""The Lua scripts the store runs: each touches the keys of one slot in cluster mode
(``COMMIT_CLUSTER``, ``READ_CLUSTER``, ``CREATE_CLUSTER``, ``CLAIM``, ``RATE``), or any
keys on a single Redis (``COMMIT``, ``READ``, ``AUTH``). The key layout and the
invariants between the steps are in ``service.storage.keys``."""

# KEYS[1] game hash, KEYS[2] the game's retry memory (``{p}game:{id}:idem``), KEYS[3]
# index prefix, KEYS[4] bot-turns key prefix, KEYS[5] channel, KEYS[6] deadlines sorted set.
# ARGV: expected version, state json ('' keep), meta json ('' keep), action char ('' none),
# new status, retry record ('' none: the record without its tag and version), the
# memory's grace seconds once the game is finished, old turn bot, new turn bot, game id,
# new deadline ('' none), seat in turn after the change ('' none or not said).
# KEYS[7] rate counter ('' none), ARGV[13] its window seconds, ARGV[14] its limit.
# ARGV[15] '1' when the game may have a deadline to move (it has a move limit): a game
# without one touches neither the deadlines set nor the hash's deadline field. The turn
# sets change (and the message names the new bot) only when the bot in turn changes.
# ARGV[16] the commit's time (unix seconds), kept as the hash's ``updated``.
# ARGV[17] the acting bot (its field in the memory), ARGV[18] the key's tag (``{len}:{key}|``,
# '' no key): a record of this bot that starts with the tag is a retry, answered from it.
# ARGV[19] unused ('': the cluster script's publish command), ARGV[20] the game's retention
# after this change in seconds (``Store.game_ttl``; '0': kept, no expiry): the game and its
# retry memory get it (the memory of a game this change finishes gets ARGV[7], or the
# retention if shorter), so a casual game's keys expire with the commit that set its
# status, and nothing else has to remember to delete them (``service.storage.keys``).
# Returns {1, new_version} | {0, current_version} | {2, stored retry record} | {-1, 0}
# (no such game), each followed by the rate counter's count and ttl_ms (0, 0 without one:
# the answer states the budget it counted, ``RateLimit``), | {3, count, ttl_ms} (the rate
# limit is exceeded: nothing written).
COMMIT = """
local rn, rt = 0, 0
if KEYS[7] and KEYS[7] ~= '' then
  rn = redis.call('INCR', KEYS[7])
  if rn == 1 then redis.call('PEXPIRE', KEYS[7], tonumber(ARGV[13]) * 1000) end
  rt = redis.call('PTTL', KEYS[7])
  if rn > tonumber(ARGV[14]) then return {3, rn, rt} end
end
local ttl = tonumber(ARGV[20]) or 0
local v = redis.call('HGET', KEYS[1], 'version')
if not v then return {-1, 0, rn, rt} end
if ARGV[18] ~= '' then
  local seen = redis.call('HGET', KEYS[2], ARGV[17])
  if seen and string.sub(seen, 1, #ARGV[18]) == ARGV[18] then return {2, seen, rn, rt} end
end
if v ~= ARGV[1] then return {0, tonumber(v), rn, rt} end
local nv = tonumber(v) + 1
local fields = {'version', nv, 'updated', ARGV[16]}
if ARGV[2] ~= '' then fields[#fields + 1] = 'state'; fields[#fields + 1] = ARGV[2] end
if ARGV[3] ~= '' then fields[#fields + 1] = 'meta'; fields[#fields + 1] = ARGV[3] end
if ARGV[4] ~= '' then
  fields[#fields + 1] = 'log'
  fields[#fields + 1] = (redis.call('HGET', KEYS[1], 'log') or '') .. ARGV[4]
end
local old = redis.call('HGET', KEYS[1], 'status')
if old ~= ARGV[5] then
  local score = redis.call('ZSCORE', KEYS[3] .. 'all', ARGV[10])
  redis.call('ZREM', KEYS[3] .. old, ARGV[10])
  if score then redis.call('ZADD', KEYS[3] .. ARGV[5], score, ARGV[10]) end
  fields[#fields + 1] = 'status'
  fields[#fields + 1] = ARGV[5]
end
if ARGV[11] ~= '' then
  fields[#fields + 1] = 'deadline'
  fields[#fields + 1] = ARGV[11]
end
redis.call('HSET', KEYS[1], unpack(fields))
if ARGV[15] ~= '' then
  redis.call('ZREM', KEYS[6], ARGV[10] .. ':' .. v)
  if ARGV[11] ~= '' then
    redis.call('ZADD', KEYS[6], ARGV[11], ARGV[10] .. ':' .. nv)
  else
    redis.call('HDEL', KEYS[1], 'deadline')
  end
end
if ARGV[6] ~= '' then
  redis.call('HSET', KEYS[2], ARGV[17], ARGV[18] .. ARGV[6] .. '|' .. nv)
end
local new_turn = ''
if ARGV[8] ~= ARGV[9] then
  if ARGV[8] ~= '' then redis.call('SREM', KEYS[4] .. ARGV[8] .. ':turns', ARGV[10]) end
  if ARGV[9] ~= '' then
    local turns = KEYS[4] .. ARGV[9] .. ':turns'
    local left = redis.call('TTL', turns)
    redis.call('SADD', turns, ARGV[10])
    new_turn = ARGV[9]
    -- the set lives at least as long as each casual game in it, and for ever once a
    -- kept game (ttl 0) is in it: a set of an account that expires goes with it
    if ttl > 0 and (left == -2 or (left >= 0 and left < ttl)) then
      redis.call('EXPIRE', turns, ttl)
    elseif ttl == 0 and left >= 0 then
      redis.call('PERSIST', turns)
    end
  end
elseif ARGV[9] ~= '' and ttl > 0 then  -- still its turn (it holds the next seat too)
  local turns = KEYS[4] .. ARGV[9] .. ':turns'
  local left = redis.call('TTL', turns)
  if left >= 0 and left < ttl then redis.call('EXPIRE', turns, ttl) end
end
local msg = nv .. ':' .. (ARGV[12] or '') .. ':' .. new_turn
if ARGV[2] ~= '' and ARGV[3] == '' then
  msg = msg .. ':' .. ARGV[5] .. ':' .. ARGV[11] .. ':' .. ARGV[16] .. ':' .. ARGV[2]
end
if old ~= ARGV[5] and ARGV[5] == 'finished' then
  local grace = tonumber(ARGV[7])
  if ttl > 0 and ttl < grace then grace = ttl end
  redis.call('EXPIRE', KEYS[2], grace)
elseif ttl > 0 then
  redis.call('EXPIRE', KEYS[2], ttl)
end
if ttl > 0 then redis.call('EXPIRE', KEYS[1], ttl) end
redis.call('PUBLISH', KEYS[5], msg)
return {1, nv, rn, rt}
"""

# KEYS[1] deadlines. ARGV: now, lease-until, max entries. Due entries (score <= now) are
# pushed to lease-until and returned: one sweeper gets each; if it dies before acting,
# the entry falls due again when the lease ends and another sweeper takes it.
CLAIM = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
for _, m in ipairs(due) do redis.call('ZADD', KEYS[1], 'XX', ARGV[2], m) end
return due
"""

# KEYS[1] counter. ARGV[1] window seconds. Returns {count, ttl_ms}.
RATE = """
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]) * 1000) end
return {n, redis.call('PTTL', KEYS[1])}
"""


# KEYS[1..n] failure counters (a client address's, its network's). ARGV[1] their window
# seconds, counted from each counter's first failure. Each is incremented and the values
# INCR returned are handed back, in one step: {n1, ttl1_ms, n2, ttl2_ms, ...}. A caller
# compares those values, never a count it read before, so N concurrent failures are
# numbered 1..N however they interleave (no check-then-increment race).
COUNT = """
local out = {}
for i = 1, #KEYS do
  local n = redis.call('INCR', KEYS[i])
  if n == 1 then redis.call('PEXPIRE', KEYS[i], tonumber(ARGV[1]) * 1000) end
  out[#out + 1] = n
  out[#out + 1] = redis.call('PTTL', KEYS[i])
end
return out
"""

# KEYS[1..n] counters ``COUNT`` incremented for an attempt that turned out right (the
# admin token): each is given back, unless it has expired meanwhile (a DECR then would
# make a counter of -1 without an expiry).
UNCOUNT = """
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then redis.call('DECR', KEYS[i]) end
end
return 0
"""

# KEYS[1] the token's key, KEYS[2..] the failure counters (as ``COUNT``'s). ARGV[1] their
# window seconds. The token is looked up first, always: {1, bot id} for a known one (no
# counter is touched, so a valid token is never refused for anyone's failures); an unknown
# one is counted as ``COUNT`` does: {0, n1, ttl1_ms, n2, ttl2_ms, ...}. Only the counters
# are ever written, nothing per guessed token.
AUTH = """
local bot = redis.call('GET', KEYS[1])
if bot then return {1, bot} end
local out = {0}
for i = 2, #KEYS do
  local n = redis.call('INCR', KEYS[i])
  if n == 1 then redis.call('PEXPIRE', KEYS[i], tonumber(ARGV[1]) * 1000) end
  out[#out + 1] = n
  out[#out + 1] = redis.call('PTTL', KEYS[i])
end
return out
"""


# KEYS[1] rate counter ('' none), KEYS[2] game hash, KEYS[3] the game's retry memory ('' none).
# ARGV[1] rate window seconds, ARGV[2] the bot whose record to read. One round trip for
# what a hot request reads first:
# returns {count, ttl_ms, the bot's retry record or '', the hash's fields and values...}.
READ = """
local n, ttl = 0, 0
if KEYS[1] ~= '' then
  n = redis.call('INCR', KEYS[1])
  if n == 1 then redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]) * 1000) end
  ttl = redis.call('PTTL', KEYS[1])
end
local out = {n, ttl, ''}
if KEYS[3] ~= '' then out[3] = redis.call('HGET', KEYS[3], ARGV[2]) or '' end
local h = redis.call('HGETALL', KEYS[2])
for i = 1, #h do out[#out + 1] = h[i] end
return out
"""


# Cluster mode: the game's own keys only (one slot). KEYS[1] game hash, KEYS[2] its retry
# memory, KEYS[3] its channel. ARGV as ``COMMIT``'s (ARGV[13], ARGV[14] unused: the rate
# counter is counted by ``RATE`` before), plus ARGV[19] the publish command (``PUBLISH``
# or ``SPUBLISH``) and ARGV[20] the retention (as ``COMMIT``'s). Also keeps ``turn`` (the
# bot in turn after the change, ARGV[9]): what
# ``Store.bot_turns`` and ``Store.reconcile`` read as the truth. The indexes are moved by
# the store around it (``service.storage.keys``). Returns as ``COMMIT`` (never 3).
COMMIT_CLUSTER = """
local ttl = tonumber(ARGV[20]) or 0
local v = redis.call('HGET', KEYS[1], 'version')
if not v then return {-1, 0} end
if ARGV[18] ~= '' then
  local seen = redis.call('HGET', KEYS[2], ARGV[17])
  if seen and string.sub(seen, 1, #ARGV[18]) == ARGV[18] then return {2, seen} end
end
if v ~= ARGV[1] then return {0, tonumber(v)} end
local nv = tonumber(v) + 1
local fields = {'version', nv, 'updated', ARGV[16], 'turn', ARGV[9]}
if ARGV[2] ~= '' then fields[#fields + 1] = 'state'; fields[#fields + 1] = ARGV[2] end
if ARGV[3] ~= '' then fields[#fields + 1] = 'meta'; fields[#fields + 1] = ARGV[3] end
if ARGV[4] ~= '' then
  fields[#fields + 1] = 'log'
  fields[#fields + 1] = (redis.call('HGET', KEYS[1], 'log') or '') .. ARGV[4]
end
local old = redis.call('HGET', KEYS[1], 'status')
if old ~= ARGV[5] then
  fields[#fields + 1] = 'status'
  fields[#fields + 1] = ARGV[5]
end
if ARGV[11] ~= '' then
  fields[#fields + 1] = 'deadline'
  fields[#fields + 1] = ARGV[11]
end
redis.call('HSET', KEYS[1], unpack(fields))
if ARGV[15] ~= '' and ARGV[11] == '' then redis.call('HDEL', KEYS[1], 'deadline') end
if ARGV[6] ~= '' then
  redis.call('HSET', KEYS[2], ARGV[17], ARGV[18] .. ARGV[6] .. '|' .. nv)
end
local new_turn = ''
if ARGV[8] ~= ARGV[9] then new_turn = ARGV[9] end
local msg = nv .. ':' .. (ARGV[12] or '') .. ':' .. new_turn
if ARGV[2] ~= '' and ARGV[3] == '' then
  msg = msg .. ':' .. ARGV[5] .. ':' .. ARGV[11] .. ':' .. ARGV[16] .. ':' .. ARGV[2]
end
if old ~= ARGV[5] and ARGV[5] == 'finished' then
  local grace = tonumber(ARGV[7])
  if ttl > 0 and ttl < grace then grace = ttl end
  redis.call('EXPIRE', KEYS[2], grace)
elseif ttl > 0 then
  redis.call('EXPIRE', KEYS[2], ttl)
end
if ttl > 0 then redis.call('EXPIRE', KEYS[1], ttl) end
redis.call(ARGV[19], KEYS[3], msg)
return {1, nv}
"""

# Cluster mode: a new game's hash, only if it does not exist yet (a tournament's game,
# whose id is its slot's, may be created twice). KEYS[1] game hash, KEYS[2] its channel.
# ARGV[1] the message to publish ('' none), ARGV[2] the publish command, ARGV[3] the game's
# retention in seconds ('0': kept), ARGV[4..] the hash's fields and values. Returns 1 if
# created, 0 if it existed.
CREATE_CLUSTER = """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 4))
if tonumber(ARGV[3]) > 0 then redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3])) end
if ARGV[1] ~= '' then redis.call(ARGV[2], KEYS[2], ARGV[1]) end
return 1
"""

# Cluster mode: ``READ`` without the rate counter (counted by ``RATE`` first). KEYS[1]
# game hash, KEYS[2] (optional) its retry memory; ARGV[1] the bot whose record to read.
READ_CLUSTER = """
local out = {0, 0, ''}
if KEYS[2] then out[3] = redis.call('HGET', KEYS[2], ARGV[1]) or '' end
local h = redis.call('HGETALL', KEYS[1])
for i = 1, #h do out[#out + 1] = h[i] end
return out
"""

# A creation quota (``service.http.quotas``). KEYS[1] the counter of this window; ARGV[1]
# the limit, ARGV[2] the window seconds. Counted only when below the limit, so exactly
# ``limit`` creations are let through whatever the concurrency, and a refused one writes
# nothing. Returns {1, count} (taken) | {0, ttl_ms} (refused).
QUOTA = """
local n = tonumber(redis.call('GET', KEYS[1]) or '0')
if n >= tonumber(ARGV[1]) then return {0, redis.call('PTTL', KEYS[1])} end
n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) * 1000) end
return {1, n}
"""

# Single Redis: a new game's turn entry (``Store.add_game``, in its MULTI). KEYS[1] the bot's
# turn set, ARGV[1] the game id, ARGV[2] the game's retention ('0': kept). The set's expiry
# as ``COMMIT`` keeps it: at least each casual game's in it, none once a kept game is.
TURN_ADD = """
local left = redis.call('TTL', KEYS[1])
redis.call('SADD', KEYS[1], ARGV[1])
local ttl = tonumber(ARGV[2])
if ttl > 0 and (left == -2 or (left >= 0 and left < ttl)) then
  redis.call('EXPIRE', KEYS[1], ttl)
elseif ttl == 0 and left >= 0 then
  redis.call('PERSIST', KEYS[1])
end
return 1
"""

# KEYS[1] a quota's counter: one taken back (``Store.give_back_quota``), if the counter is
# still there (a counter recreated here would have no expiry).
GIVE_BACK = """
if redis.call('EXISTS', KEYS[1]) == 1 then return redis.call('DECR', KEYS[1]) end
return 0
"""

# Single Redis: the games where it is a bot's turn, without those that expired (their
# retention ran out while it was the bot's turn): KEYS[1] the bot's turn set, ARGV[1] and
# ARGV[2] what goes before and after a game id in its key. Returns the live ids.
TURNS = """
local out = {}
for _, gid in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if redis.call('EXISTS', ARGV[1] .. gid .. ARGV[2]) == 1 then
    out[#out + 1] = gid
  else
    redis.call('SREM', KEYS[1], gid)
  end
end
return out
"""
