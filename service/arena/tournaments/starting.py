"""The start of a registering tournament, and the arenas' clock: the half of
``Registration`` (``service.arena.tournaments.registration``, which inherits it) that the
tournament clock drives (``service.arena.tournaments.schedule``).

A registering tournament starts at ``starts_at`` (``start_due``, every worker's clock) or
its organizer's word (``start_one``): claimed first (``{p}tour:{id}:starting``, so that
the workers do not all plan it), then one optimistic transaction on its document turns it
into the tournament ``Tournaments.plan`` makes of its entrants — or, short of
``min_entrants`` after house bots filled up what they may, cancels it with the reason.
Its entrants are told either way.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable
from typing import Any

import redis

from service.arena.accounts.owners import HOUSE_OWNER
from service.arena.core.problems import Problem
from service.arena.tournaments import arena_format, control

log = logging.getLogger(__name__)

REGISTERING = "registering"
ADMIN = "admin"  # the caller that sent the admin token (service.http.api)
ATTEMPTS = 200
CLAIM_MS = 30_000  # a start's claim: another worker tries again after this
# the house accounts that fill a tournament up, in this order (service.arena.accounts.house)
HOUSE_ORDER = ("heuristic", "search", "random", "heuristic:partner", "search:partner",
               "random:partner")


class StartedMeanwhile(Exception):
    """The registering tournament has started meanwhile."""


class Starting:
    """Starting registering tournaments and moving arenas on (see the module docstring)."""

    t: Any
    r: redis.Redis
    p: str
    store: Any
    unstarted_retention: int

    @property
    def registering_key(self) -> str:
        return f"{self.p}tours:registering"

    def bot_key(self, bot: str) -> str:
        return f"{self.p}tours:bot:{bot}"

    def tell(self, bots: list[str], doc: dict[str, Any], event: str,
             reason: str | None = None) -> None:
        raise NotImplementedError

    def _change_registering(self, tid: str, change: Callable[[dict[str, Any]], bool],
                            ) -> dict[str, Any]:
        raise NotImplementedError

    @property
    def arenas_key(self) -> str:
        """Running arenas: the clock re-checks them (``tick_arenas``)."""
        return f"{self.p}tours:arenas"

    def tick_arenas(self) -> None:
        """Advance every running arena: entrants that have waited long enough are paired
        (``arena_format.REMATCH_AFTER_S``) and a clock that has run out ends it, without
        waiting for a game to finish. Over ones leave the set."""
        for raw in self.r.smembers(self.arenas_key):
            tid = raw.decode()
            try:
                self.t.advance(tid)
            except Exception:
                log.exception("advancing arena %s failed", tid)
                continue
            if not self.r.sismember(self.t.running_key, tid):
                self.r.srem(self.arenas_key, tid)

    # --- the start ------------------------------------------------------------------------

    def start_due(self, now: float | None = None) -> int:
        """Start every registering tournament whose ``starts_at`` has come (the clock
        loop, in every worker); how many this call started."""
        now = time.time() if now is None else now
        due = self.r.zrangebyscore(self.registering_key, "-inf", now)
        started = 0
        for raw in due:
            try:
                started += self.start_one(raw.decode())
            except Exception:
                log.exception("starting tournament %s failed; retried", raw)
        return started

    def start_one(self, tid: str, by_organizer: bool = False) -> int:
        """Start ``tid`` if it is still registering (see the module docstring): 1 if this
        call started it. Claimed first, so concurrent workers do not all plan it; the
        document's own transaction is what makes the start happen once."""
        claim = f"{self.t.key(tid)}:starting"
        if not self.r.set(claim, "1", nx=True, px=CLAIM_MS):
            if by_organizer:
                raise Problem("service-unavailable", "the tournament is starting; retry",
                              headers={"Retry-After": "1"})
            return 0
        try:
            return self._start(tid, by_organizer)
        finally:
            self.r.delete(claim)

    def _start(self, tid: str, by_organizer: bool) -> int:
        for _ in range(ATTEMPTS):
            try:
                with self.r.pipeline(transaction=True) as pipe:
                    pipe.watch(self.t.key(tid))
                    raw = pipe.get(self.t.key(tid))
                    doc = json.loads(raw) if raw else None
                    if doc is None or doc["status"] != REGISTERING:
                        pipe.unwatch()
                        self.r.zrem(self.registering_key, tid)
                        return 0
                    entrants = [e["bot_id"] for e in doc["entrants"]]
                    reg = doc["registration"]
                    added = self._house_fill(doc) if len(entrants) < reg["min_entrants"] \
                        else []
                    ids = entrants + added
                    if len(ids) < max(2, reg["min_entrants"]):
                        why = (f"{len(entrants)} entrants at the start, fewer than its "
                               f"minimum of {reg['min_entrants']}")
                        if by_organizer:
                            pipe.unwatch()
                            raise Problem("too-few-entrants", f"{why}: wait for more, or "
                                          "lower min_entrants by creating it anew")
                        pipe.unwatch()
                        self._close(tid, why, keep_s=self.unstarted_retention)
                        return 0
                    new = self._planned(doc, ids)
                    if isinstance(new, str):  # the plan refused the entrants as they are
                        pipe.unwatch()
                        self._close(tid, new, keep_s=self.unstarted_retention)
                        return 0
                    pipe.multi()
                    pipe.set(self.t.key(tid), json.dumps(new, separators=(",", ":")))
                    pipe.sadd(self.t.running_key, tid)
                    if new["settings"]["format"] == arena_format.ARENA:
                        pipe.sadd(self.arenas_key, tid)
                    pipe.zrem(self.registering_key, tid)
                    for b in added:
                        pipe.sadd(self.bot_key(b), tid)
                    pipe.execute()
                    break
            except redis.WatchError:
                time.sleep(random.uniform(0.001, 0.01))
        else:
            return 0
        # the entrants are told before the first round's games exist: a bot's turn poll
        # woken by its first game then finds the notice with it, never the game alone
        self.tell(ids, new, "starting")
        self.t.advance(tid)
        return 1

    def _planned(self, doc: dict[str, Any], ids: list[str]) -> dict[str, Any] | str:
        """The started tournament's document, or why it cannot start."""
        body = {**doc["body"], "entrants": ids, "name": doc["name"]}
        try:
            new = self.t.plan(body, doc["id"])
        except Problem as exc:
            return f"it could not start with these entrants: {exc}"
        owners = {e["bot_id"]: e.get("owner") for e in doc["entrants"]}
        for e in new["entrants"]:
            e["owner"] = owners.get(e["bot_id"]) or HOUSE_OWNER
        keep = ("name", "created", "organizer", "creator", "schedule", "registration",
                "excluded", "game_cap")
        new.update({k: doc[k] for k in keep if k in doc})
        new["started"] = int(time.time())
        new["rated"] = len({e["owner"] for e in new["entrants"]}) > 1
        return new

    def _house_fill(self, doc: dict[str, Any]) -> list[str]:
        """House bots to fill ``doc`` up to its minimum: none unless it asks, a house is
        playing, and a bot not the house's entered (a tournament of house bots alone is
        nobody's)."""
        reg = doc["registration"]
        entrants = {e["bot_id"] for e in doc["entrants"]}
        if not reg.get("house_fill") or not any(e.get("owner") != HOUSE_OWNER
                                                for e in doc["entrants"]):
            return []
        pipe = self.r.pipeline(transaction=False)
        pipe.exists(f"{self.store.p}house:alive")
        pipe.hmget(f"{self.store.p}house", list(HOUSE_ORDER))
        alive, ids = pipe.execute()
        if not alive:
            return []
        want = reg["min_entrants"] - len(entrants)
        return [i.decode() for i in ids if i and i.decode() not in entrants][:max(0, want)]

    def _close(self, tid: str, why: str, keep_s: int) -> bool:
        """Cancel a registering tournament (``why`` shown) and tell its entrants; kept
        ``keep_s`` more. False if it is no longer registering."""
        doc: dict[str, Any] = {}

        def change(d: dict[str, Any]) -> bool:
            if d["status"] != REGISTERING:
                raise StartedMeanwhile
            d.update(status=control.CANCELLED, finished=int(time.time()), reason=why)
            doc.update(d)
            return True

        try:
            self._change_registering(tid, change)
        except StartedMeanwhile:
            return False
        pipe = self.r.pipeline(transaction=False)
        if keep_s > 0:
            pipe.expire(self.t.key(tid), keep_s)
        pipe.zrem(self.registering_key, tid)
        pipe.execute()
        self.tell([e["bot_id"] for e in doc["entrants"]], doc, "cancelled", why)
        return True
