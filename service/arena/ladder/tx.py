"""A ladder's entry states, its limits, and its one way to change: an optimistic change over
one ladder's keys (``Tx``, the ``CAS`` script), shared by its matching
(``service.arena.ladder.matching``), its settling (``service.arena.ladder.settling``) and
a bot's entry (``service.arena.ladder.ladders``). See ``ladders``' module docstring."""

from __future__ import annotations

import json
from typing import Any

import redis

from service.arena.ladder.validation import NOT_ADMITTED, VALIDATING

WAITING, MATCHED, PLAYING, PAUSED, OFF = "waiting", "matched", "playing", "paused", "off"
STATES = [WAITING, MATCHED, PLAYING, PAUSED, VALIDATING, NOT_ADMITTED, OFF]
WINDOW = 5.0  # ordinal points two bots may differ by at once
WIDEN_PER_S = 1.0  # ... plus this much per second waited
CLAIM_LEASE_S = 10.0  # an unbound match older than this gets its game from any matchmaker
PASS_S = 0.25  # how often a matchmaker looks at the queue
REPAIR_S = 2.0  # how often it looks at every live match (unrated ends, timeouts, stale claims)
FORM = 10  # results kept in "form"
RESULTS_KEPT = 100_000  # the ladder's list of results (for replays) keeps the newest
ATTEMPTS = 100


def _dump(x: Any) -> str:
    return json.dumps(x, separators=(",", ":"))


# --- compare-and-set over one ladder's keys ---------------------------------------------------

# KEYS: the keys a change touches (one ladder's: one hash tag). ARGV[1]: JSON
# {"expect": [[k, field, value or false]], "ops": [[op, k, a, b]]} with k an index into KEYS.
# Applies every op only if every expected hash field still holds what was read (false: was
# absent); returns 1, else 0 and changes nothing.
CAS = """
local d = cjson.decode(ARGV[1])
for _, e in ipairs(d.expect) do
  local v = redis.call('HGET', KEYS[e[1]], e[2])
  if e[3] == false then
    if v then return 0 end
  elseif v ~= e[3] then
    return 0
  end
end
for _, o in ipairs(d.ops) do
  if o[1] == 'hset' then redis.call('HSET', KEYS[o[2]], o[3], o[4])
  elseif o[1] == 'hdel' then redis.call('HDEL', KEYS[o[2]], o[3])
  elseif o[1] == 'rpush' then redis.call('RPUSH', KEYS[o[2]], o[3])
  elseif o[1] == 'lpush' then redis.call('LPUSH', KEYS[o[2]], o[3])
  elseif o[1] == 'ltrim' then redis.call('LTRIM', KEYS[o[2]], o[3], o[4])
  elseif o[1] == 'zadd' then redis.call('ZADD', KEYS[o[2]], o[4], o[3])
  elseif o[1] == 'zrem' then redis.call('ZREM', KEYS[o[2]], o[3]) end
end
return 1
"""


class Tx:
    """One optimistic change of a ladder: reads record what they saw (per hash field), and
    ``commit`` applies the queued writes only if those fields are unchanged (``CAS``). Per
    field, not per key: a bot joining does not void a claim of two other bots, and two
    games of different bots settle side by side. ``multi`` is a no-op kept so a decision
    reads as "read, then write"."""

    def __init__(self, r: redis.Redis, script: Any) -> None:
        self.r = r
        self.script = script
        self.keys: list[str] = []
        self.expects: list[list[Any]] = []
        self.ops: list[list[Any]] = []

    def _k(self, key: str) -> int:
        if key not in self.keys:
            self.keys.append(key)
        return self.keys.index(key) + 1

    def expect(self, key: str, field_: str, value: bytes | None) -> None:
        self.expects.append([self._k(key), field_, value.decode() if value else False])

    def hget(self, key: str, field_: str) -> bytes | None:
        v = self.r.hget(key, field_)
        self.expect(key, field_, v)
        return v

    def hmget(self, key: str, fields_: list[str]) -> list[bytes | None]:
        vs = self.r.hmget(key, fields_)
        for f, v in zip(fields_, vs, strict=True):
            self.expect(key, f, v)
        return vs

    def multi(self) -> None:
        pass

    def hset(self, key: str, field_: str, value: str) -> None:
        self.ops.append(["hset", self._k(key), field_, value])

    def hdel(self, key: str, field_: str) -> None:
        self.ops.append(["hdel", self._k(key), field_])

    def rpush(self, key: str, value: str) -> None:
        self.ops.append(["rpush", self._k(key), value])

    def lpush(self, key: str, value: str) -> None:
        self.ops.append(["lpush", self._k(key), value])

    def zadd(self, key: str, member: str, score: float) -> None:
        self.ops.append(["zadd", self._k(key), member, score])

    def zrem(self, key: str, member: str) -> None:
        self.ops.append(["zrem", self._k(key), member])

    def ltrim(self, key: str, start: int, stop: int) -> None:
        self.ops.append(["ltrim", self._k(key), start, stop])

    def commit(self) -> bool:
        if not self.ops:
            return True
        arg = json.dumps({"expect": self.expects, "ops": self.ops}, separators=(",", ":"))
        return int(self.script(keys=self.keys, args=[arg])) == 1


__all__ = ["ATTEMPTS", "CAS", "CLAIM_LEASE_S", "FORM", "MATCHED", "OFF", "PASS_S", "PAUSED",
           "PLAYING", "REPAIR_S", "RESULTS_KEPT", "STATES", "WAITING", "WIDEN_PER_S",
           "WINDOW", "Tx"]
