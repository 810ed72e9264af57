"""The storage budget that holds: what strangers may create, service-wide, and the memory
left for the players already here.

The creation quotas (``service.http.quotas``) bound one client address; an actor with
many addresses (256 of them in 16 networks made 6,000 bots in 30 s) multiplies them. So
what anonymous visitors and new owners (younger than ``ARENA_ESTABLISHED_AGE``: the
accounts a farm or a flood is made of) create is also counted service-wide, per minute:

- ``ARENA_NEW_ACCOUNTS_PER_MINUTE``: bots registered without a token or by a new owner,
  and the accounts of anonymous house players;
- ``ARENA_NEW_GAMES_PER_MINUTE``: games created by new owners' bots, and house games of
  anonymous players.

A budget shared by everyone would let one actor shut strangers out, so each network (an
IPv4 /24, an IPv6 /64) has a reserve: its first ``ARENA_BUDGET_RESERVE`` creations of a
kind in a minute are let through even when the service's budget is spent, up to a
ceiling of ``CEILING`` times the budget (an actor with more networks than that leaves no
reserve to anyone: then the storage holds first). A refusal is
429 ``rate-limited`` with ``Retry-After`` (the minute's end) and takes nothing from any
quota or budget. Counted by one script (``SHARE``) over two counters under one hash tag,
``{p}{budget}:<kind>:<minute>`` and ``{p}{budget}:<kind>:<network>:<minute>``, expiring
with their minute.

**Memory.** Redis refuses every write at its ``maxmemory`` (the embedded server never
evicts: docs/operations.md says why no eviction policy can respect what the retention
table says may go first). Before that, the service refuses what may wait: above
``ARENA_MEMORY_GUARD`` of ``maxmemory`` (0.85) the creations above are answered 503
``service-unavailable`` with ``Retry-After`` while games in progress, registered owners
and their bots go on; ``allfours_redis_memory_alarm`` is 1 from ``ARENA_MEMORY_ALARM``
(0.7) on, time for the operator to act. Each process reads ``INFO memory`` at most every
``MEMORY_CHECK_S``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

from flask import current_app
from redis.exceptions import RedisError

from service import metrics
from service.addresses import network_of
from service.arena.core.problems import Problem
from service.http import limits
from service.metrics import read_memory

DEFAULTS: dict[str, Any] = {
    # service-wide, per minute: accounts and games made by anonymous visitors and new
    # owners (docs/operations.md: what they cost, held, at these figures); 0: off
    "ARENA_NEW_ACCOUNTS_PER_MINUTE": 60,
    "ARENA_NEW_GAMES_PER_MINUTE": 60,
    # a network's creations of a kind a minute that pass whatever the service's budget
    "ARENA_BUDGET_RESERVE": 5,
    # shares of Redis' maxmemory: the alarm gauge from the first, creations by strangers
    # refused from the second (0: off)
    "ARENA_MEMORY_ALARM": 0.7,
    "ARENA_MEMORY_GUARD": 0.85,
}
WINDOW_S = 60
MEMORY_CHECK_S = 5.0
SETTINGS = {"accounts": "ARENA_NEW_ACCOUNTS_PER_MINUTE", "games": "ARENA_NEW_GAMES_PER_MINUTE"}

# The reserves pass until the service's count is this many times its budget: a ceiling
# that holds however many networks an actor has (the storage it allows is stated in
# docs/operations.md), far above what the networks of one actor's 16 reserves take.
CEILING = 3

# KEYS: the service's count this minute, the network's. ARGV: the budget, the reserve,
# seconds the counters live, the ceiling. {1, 0}: counted; {0, ms until the service's
# minute ends}.
SHARE = """
local all = tonumber(redis.call('GET', KEYS[1]) or '0')
local mine = tonumber(redis.call('GET', KEYS[2]) or '0')
local budget = tonumber(ARGV[1])
if all >= budget and (mine >= tonumber(ARGV[2]) or all >= budget * tonumber(ARGV[4])) then
  return {0, redis.call('PTTL', KEYS[1])}
end
redis.call('INCR', KEYS[1])
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('INCR', KEYS[2])
redis.call('EXPIRE', KEYS[2], ARGV[3])
return {1, 0}
"""


def _arena() -> Any:
    return current_app.extensions["arena"]


def _keys(kind: str, network: str, slot: int) -> list[str]:
    p = _arena().store.p
    return [f"{p}{{budget}}:{kind}:{slot}", f"{p}{{budget}}:{kind}:{network}:{slot}"]


def is_new(bot_id: str | None) -> bool:
    """Whether the caller counts as a stranger: no token, or a bot whose owner is younger
    than ``ARENA_ESTABLISHED_AGE`` (0: no owner is new)."""
    if bot_id is None:
        return True
    age = float(current_app.config["ARENA_ESTABLISHED_AGE"])
    if age <= 0:
        return False
    owners = _arena().owners
    owner = owners.owner_of(bot_id)
    created = owners.created_of([owner]).get(owner)
    return created is None or time.time() - created < age


def take(kinds: list[str]) -> list[str]:
    """Count one creation of each of ``kinds`` for this client's network, or none: 429 at
    the first budget spent (what was counted before it given back). The counters taken,
    for ``give_back``."""
    if not kinds:
        return []
    guard()
    cfg = current_app.config
    reserve = int(cfg["ARENA_BUDGET_RESERVE"])
    network = network_of(limits.counted_address())
    slot = int(time.time()) // WINDOW_S
    script = _script()
    taken: list[str] = []
    for kind in kinds:
        budget = int(cfg[SETTINGS[kind]])
        if not budget:
            continue
        keys = _keys(kind, network, slot)
        counted, wait_ms = script(keys=keys, args=[budget, reserve, WINDOW_S + 1, CEILING])
        if int(counted):
            taken.extend(keys)
            continue
        give_back(taken)
        limits.reject(f"the service takes at most {budget} {kind} a minute from new owners "
                      f"and anonymous visitors ({SETTINGS[kind]}), and this network has had "
                      f"its {reserve} of this minute", limits.reset_ms(int(wait_ms) or 1000,
                                                                        WINDOW_S))
    return taken


def give_back(keys: list[str]) -> None:
    """Undo ``take`` for a creation refused after it (a refused request takes nothing)."""
    store = _arena().store
    for k in keys:  # DECR only where the counter is still there (``Store.give_back_quota``)
        store.give_back_quota(k)


_scripts: dict[int, Any] = {}


def _script() -> Any:
    store = _arena().store
    found = _scripts.get(id(store.r))
    if found is None:
        found = _scripts[id(store.r)] = store.r.register_script(SHARE)
    return found


# --- memory ------------------------------------------------------------------------------


class _Memory:
    """This process's last reading of Redis' memory (used, maxmemory), refreshed at most
    every ``MEMORY_CHECK_S``."""

    def __init__(self) -> None:
        self.at = -1e9
        self.used = 0
        self.cap = 0
        self.lock = threading.Lock()


_memory = _Memory()


def memory(r: Any) -> tuple[int, int]:
    """(used_memory, maxmemory) of ``r`` (the fullest node's in a cluster; maxmemory 0:
    no cap), at most ``MEMORY_CHECK_S`` old; a Redis that does not answer keeps the last
    reading (the request's own command answers 503 if it is really gone)."""
    now = time.monotonic()
    if now - _memory.at < MEMORY_CHECK_S:
        return _memory.used, _memory.cap
    with _memory.lock:
        if now - _memory.at >= MEMORY_CHECK_S:
            _memory.at = now
            with contextlib.suppress(RedisError):
                _memory.used, _memory.cap = read_memory(r)
    return _memory.used, _memory.cap


def guard() -> None:
    """503 while Redis is above ``ARENA_MEMORY_GUARD`` of its cap: what strangers would
    create waits, so that the players here keep the room left."""
    share = float(current_app.config["ARENA_MEMORY_GUARD"])
    if not share:
        return
    used, cap = memory(_arena().store.r)
    if cap and used >= share * cap:
        metrics.STORAGE_GUARD.inc()
        raise Problem("service-unavailable", "the game store is nearly full: new accounts "
                      "and new owners' games wait until the operator makes room (existing "
                      "games and owners go on)", headers={"Retry-After": "60"})


__all__ = ["DEFAULTS", "give_back", "guard", "is_new", "memory", "read_memory", "take"]
