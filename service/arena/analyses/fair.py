"""The analyses' waiting line: each requester served in turn, the lightest first.

Why not first come, first served. One worker drains about one game every few seconds,
and a bot's games against itself qualify without limit: a handful of addresses once
queued 80 games in a minute and a player's own request waited a quarter of an hour behind
them. So the requests wait here, one list per *requester*, and a worker takes the next
game from the requester that should go next (``PROMOTE``), straight into the stream the
workers read (``service.arena.analyses.queue``: its leases and take-overs are unchanged).

**Who is a requester.** A player asking for its game: its owner (``o:<owner>``), counted
in the asking client's network (IPv4 /24, IPv6 /64). An automatic request (a tournament
created with ``analyse``, the ladder with ``ARENA_LADDER_ANALYSE``): the tournament or the
ladder (``a:...``), a network of its own; but a game whose every seat is one owner's is
that owner's request, on its quota. Anyone else who finds a lost entry and asks again:
its network (``n:<network>``).

**How many.** At most ``ARENA_ANALYSIS_QUEUED_PER_OWNER`` games waiting or being computed
per requester and ``ARENA_ANALYSIS_QUEUED_PER_NETWORK`` per network at once (``ENQUEUE``
refuses the next: 429 to a player; an automatic one is skipped and can be asked for
later); the counts go down when the worker settles the game (``SETTLE``).

**Who goes next** (``PROMOTE``): a player's request before any automatic one; then the
requester whose network has the fewest games waiting or being computed (a player asking
for one game goes ahead of a network at its cap); then the requester served longest ago
(round robin; never served: the one waiting longest). One game from that requester's list
goes into the stream, in the same script, so nothing is lost between the two. A worker
computing a game of a heavier network gives it up for a player's request of a lighter
one (``lighter_waiting``; once a game, so nothing starves): the game goes back to the head
of its requester's list (``REQUEUE``), so a player waits for no flood game in progress.

Keys, under the one hash tag ``{analysis}`` (one slot in a cluster, so each script is one
step): ``{analysis}:fq:<requester>`` (list of ``<game>|<network>``), ``{analysis}:fq:meta``
(hash: requester -> JSON ``lane``, ``served``, ``since``), ``{analysis}:fq:load`` and
``{analysis}:fq:netload`` (hashes: games waiting or being computed per requester and per
network; a field goes at 0), ``{analysis}:fq:wake`` (a one-element list a worker waits on
with ``BLPOP``). Each is bounded by the requesters active now; none expires, none grows.
"""

from __future__ import annotations

import json
from typing import Any

PLAYER, AUTO = 0, 1  # lanes: a player's own request goes ahead of automatic ones

_LESS = """
local function less(a, b)
  for i = 1, #a do
    if a[i] < b[i] then return true end
    if a[i] > b[i] then return false end
  end
  return false
end
"""

# KEYS: meta, load, netload, the requester's list, wake. ARGV: requester, network, lane,
# now, cap per requester (0: none), cap per network (0: none), game. 1: queued; -1: the
# requester is at its cap; -2: the network is.
ENQUEUE = """
local lw = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
local ln = tonumber(redis.call('HGET', KEYS[3], ARGV[2]) or '0')
if tonumber(ARGV[5]) > 0 and lw >= tonumber(ARGV[5]) then return -1 end
if tonumber(ARGV[6]) > 0 and ln >= tonumber(ARGV[6]) then return -2 end
redis.call('RPUSH', KEYS[4], ARGV[7] .. '|' .. ARGV[2])
redis.call('HINCRBY', KEYS[2], ARGV[1], 1)
redis.call('HINCRBY', KEYS[3], ARGV[2], 1)
local raw = redis.call('HGET', KEYS[1], ARGV[1])
local m = raw and cjson.decode(raw) or {served = 0, since = tonumber(ARGV[4])}
m.lane = math.min(tonumber(ARGV[3]), m.lane or tonumber(ARGV[3]))
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(m))
redis.call('DEL', KEYS[5])
redis.call('RPUSH', KEYS[5], 1)
return 1
"""

# KEYS: meta, netload, the stream. ARGV: now, the requesters' lists' key prefix, the
# stream's cap. The game id moved into the stream (its entry: game, who, net), or false.
PROMOTE = _LESS + """
local best, bkey, bm = nil, nil, nil
local meta = redis.call('HGETALL', KEYS[1])
for i = 1, #meta, 2 do
  local who = meta[i]
  local head = redis.call('LINDEX', ARGV[2] .. who, 0)
  if head then
    local m = cjson.decode(meta[i + 1])
    local net = string.sub(head, string.find(head, '|', 1, true) + 1)
    local key = {m.lane, tonumber(redis.call('HGET', KEYS[2], net) or '0'), m.served, m.since}
    if not best or less(key, bkey) then best, bkey, bm = who, key, m end
  end
end
if not best then return false end
local item = redis.call('LPOP', ARGV[2] .. best)
local bar = string.find(item, '|', 1, true)
local game, net = string.sub(item, 1, bar - 1), string.sub(item, bar + 1)
bm.served = tonumber(ARGV[1])
redis.call('HSET', KEYS[1], best, cjson.encode(bm))
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[3], '*', 'game', game, 'who', best, 'net', net)
return game
"""

# KEYS: the stream, meta, load, netload. ARGV: entry id, group, requester ('' for an entry
# of no requester), network, the requesters' lists' key prefix. Acknowledges and deletes
# the entry, and takes it off its requester's and network's counts (a requester with
# nothing left waiting or computed leaves the meta).
SETTLE = """
redis.call('XACK', KEYS[1], ARGV[2], ARGV[1])
local gone = redis.call('XDEL', KEYS[1], ARGV[1])
if ARGV[3] == '' or gone == 0 then return gone end
local function down(key, field)
  local n = redis.call('HINCRBY', key, field, -1)
  if n <= 0 then redis.call('HDEL', key, field) end
  return n
end
local left = down(KEYS[3], ARGV[3])
down(KEYS[4], ARGV[4])
if left <= 0 and redis.call('LLEN', ARGV[5] .. ARGV[3]) == 0 then
  redis.call('HDEL', KEYS[2], ARGV[3])
end
return gone
"""


# KEYS: the stream, the requester's list. ARGV: entry id, group, game, network. A game a
# worker gives up for a lighter request (``FairLine.yield_to``): its entry acknowledged
# and deleted, the game back at the head of its requester's list, its counts unchanged
# (it is still waiting).
REQUEUE = """
redis.call('XACK', KEYS[1], ARGV[2], ARGV[1])
redis.call('XDEL', KEYS[1], ARGV[1])
redis.call('LPUSH', KEYS[2], ARGV[3] .. '|' .. ARGV[4])
return 1
"""


class FairLine:
    """The requesters' lists over one Redis client (``r``) and key prefix (``p``, the
    analyses' own: ``{p}{analysis}:``), in front of the stream ``stream``."""

    def __init__(self, r: Any, p: str, stream: str, stream_max: int) -> None:
        self.r = r
        self.base = f"{p}{{analysis}}:fq:"
        self.stream = stream
        self.stream_max = stream_max
        self._enqueue = r.register_script(ENQUEUE)
        self._promote = r.register_script(PROMOTE)
        self._settle = r.register_script(SETTLE)
        self._requeue = r.register_script(REQUEUE)

    @property
    def meta(self) -> str:
        return self.base + "meta"

    @property
    def load(self) -> str:
        return self.base + "load"

    @property
    def netload(self) -> str:
        return self.base + "netload"

    @property
    def wake(self) -> str:
        return self.base + "wake"

    @property
    def lists(self) -> str:
        return self.base + "q:"

    def enqueue(self, game_id: str, who: str, network: str, lane: int, now: float,
                cap_who: int = 0, cap_network: int = 0) -> int:
        """1: queued; -1: ``who`` is at its cap; -2: ``network`` is (``ENQUEUE``)."""
        return int(self._enqueue(
            keys=[self.meta, self.load, self.netload, self.lists + who, self.wake],
            args=[who, network, lane, repr(now), cap_who, cap_network, game_id]))

    def promote(self, now: float) -> str | None:
        """Move the next game (``PROMOTE``) into the stream; its id, or None."""
        got = self._promote(keys=[self.meta, self.netload, self.stream],
                            args=[repr(now), self.lists, self.stream_max])
        return got.decode() if isinstance(got, bytes) else (got or None)

    def settle(self, entry_id: str, group: str, who: str, network: str) -> None:
        self._settle(keys=[self.stream, self.meta, self.load, self.netload],
                     args=[entry_id, group, who, network, self.lists])

    def lighter_waiting(self, network: str) -> bool:
        """Whether a player's request waits whose network has fewer games waiting or
        being computed than ``network``: the game in progress (of ``network``) should
        make way for it (``service.arena.analyses.worker.Worker``)."""
        meta = {(k.decode() if isinstance(k, bytes) else k): v
                for k, v in self.r.hgetall(self.meta).items()}
        players = [w for w, raw in meta.items() if json.loads(raw).get("lane") == PLAYER]
        if not players:
            return False
        pipe = self.r.pipeline(transaction=False)
        for who in players:
            pipe.lindex(self.lists + who, 0)
        heads = [h.decode() for h in pipe.execute() if h is not None]
        if not heads:
            return False
        loads = {(k.decode() if isinstance(k, bytes) else k): int(v)
                 for k, v in self.r.hgetall(self.netload).items()}
        mine = loads.get(network, 0)
        return any(loads.get(h.split("|", 1)[1], 0) < mine for h in heads)

    def requeue(self, entry_id: str, group: str, game_id: str, who: str,
                network: str) -> None:
        """Put a game a worker gave up back at the head of ``who``'s list (``REQUEUE``)."""
        self._requeue(keys=[self.stream, self.lists + who],
                      args=[entry_id, group, game_id, network])

    def waiting(self) -> int:
        """Games in the requesters' lists (not yet in the stream)."""
        whos = [k.decode() if isinstance(k, bytes) else k for k in self.r.hkeys(self.meta)]
        if not whos:
            return 0
        pipe = self.r.pipeline(transaction=False)
        for who in whos:
            pipe.llen(self.lists + who)
        return sum(int(n) for n in pipe.execute())

    def counts(self) -> tuple[dict[str, int], dict[str, int]]:
        """(games waiting or being computed per requester, per network)."""
        def read(key: str) -> dict[str, int]:
            return {(k.decode() if isinstance(k, bytes) else k): int(v)
                    for k, v in self.r.hgetall(key).items()}
        return read(self.load), read(self.netload)

    def nap(self, seconds: float) -> None:
        """Wait up to ``seconds`` for a new request (``BLPOP`` on the wake list)."""
        if seconds > 0:
            self.r.blpop([self.wake], timeout=seconds)


__all__ = ["AUTO", "ENQUEUE", "PLAYER", "PROMOTE", "REQUEUE", "SETTLE", "FairLine"]
