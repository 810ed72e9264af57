"""Always a tournament to enter: the operator's recurring tournaments, and the clock that
starts registering tournaments at their ``starts_at``.

**The schedule** (``ARENA_TOURNAMENT_SCHEDULE``, JSON: a list of entries, ``[]`` for none)
says, per entry, ``name``, ``every`` (seconds between starts), ``offset`` (seconds after
each multiple of ``every``, UTC), ``ahead`` (how long before its start each tournament is
created with registration open; default ``every``, so the next one is always there) and
``tournament`` (a ``POST /tournaments`` body, checked at startup by the wire's own schema).
The default is the hourly Swiss a newcomer's bot can enter within the hour — 2 players,
5 rounds of 2 games, 10 s a move, open to validated bots, at least 4 entrants (house bots
fill it up when at least one other bot entered) — and a 30-minute arena every four hours.

**Once per slot, whatever the number of workers.** Slot *k* of an entry starts at
``k * every + offset``; a worker creates it only after ``SET NX`` on
``{p}tours:sched:{name}:{k}`` (kept past the slot), so one tournament per slot however many
workers run ``ensure``, each every ``ENSURE_S``. A creation that fails gives the claim back
and is tried again on the next pass.

**The clock** (``TournamentClock``, a ``BackgroundLoop`` in every worker beside the
sweeper): every ``TICK_S`` it starts the registering tournaments whose time has come
(``Registration.start_due``: a sorted set read, and a claimed, transactional start), so a
start needs no request and waits at most a tick; every ``ENSURE_S`` it makes the schedule's
next tournaments; every ``ARENA_TICK_S`` it advances the running arenas (their waiting
entrants and their clocks).
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable
from typing import Any

from service.arena.core.loop import BackgroundLoop
from service.arena.tournaments.arena_format import ARENA_TICK_S
from service.arena.tournaments.registration import ADMIN, Registration

log = logging.getLogger(__name__)

TICK_S = 0.2  # a tournament starts at most this late (and one claimed start's work)
ENSURE_S = 10.0  # how often the schedule's next tournaments are made
SLOT_KEEP_S = 86400  # a slot's claim outlives its start by this

DEFAULT_SCHEDULE: list[dict[str, Any]] = [
    {"name": "hourly-swiss", "every": 3600, "offset": 0,
     "tournament": {"name": "Hourly Swiss", "format": "swiss", "players": 2, "rounds": 5,
                    "games_per_pairing": 2, "move_limit": 10, "time_bank": 30,
                    "registration": "open", "min_entrants": 4, "max_entrants": 64,
                    "no_show": 120}},
    {"name": "arena-30", "every": 4 * 3600, "offset": 1800,
     "tournament": {"name": "Half-hour Arena", "format": "arena", "duration": 1800,
                    "players": 2, "move_limit": 10, "time_bank": 30,
                    "registration": "open", "min_entrants": 4, "max_entrants": 64,
                    "no_show": 120}},
]
DEFAULTS: dict[str, Any] = {
    # the recurring tournaments (JSON, see the module docstring); "[]": none
    "ARENA_TOURNAMENT_SCHEDULE": json.dumps(DEFAULT_SCHEDULE, separators=(",", ":")),
}


def parse(text: str | list[dict[str, Any]], load: Callable[[dict[str, Any]], dict[str, Any]]
          ) -> list[dict[str, Any]]:
    """The schedule's entries from the setting; each ``tournament`` through ``load`` (the
    wire schema's check). A bad schedule is a startup error, said plainly."""
    entries = json.loads(text) if isinstance(text, str) else text
    if not isinstance(entries, list):
        raise ValueError("ARENA_TOURNAMENT_SCHEDULE must be a JSON list")
    out = []
    for e in entries:
        name, every = str(e["name"]), int(e["every"])
        if every < 5:
            raise ValueError(f"schedule {name}: every must be 5 s or more")
        out.append({"name": name, "every": every, "offset": int(e.get("offset", 0)) % every,
                    "ahead": int(e.get("ahead", every)),
                    "tournament": load(dict(e["tournament"]))})
    return out


class Schedule:
    """The recurring tournaments over a ``Registration`` (see the module docstring)."""

    def __init__(self, registration: Registration, entries: list[dict[str, Any]]) -> None:
        self.reg = registration
        self.entries = entries
        self.r = registration.r

    def slots(self, entry: dict[str, Any], now: float) -> list[tuple[int, float]]:
        """(slot, start) of ``entry`` from now to ``ahead`` (the next one at least)."""
        every, offset = entry["every"], entry["offset"]
        k = math.ceil((now - offset) / every)
        out = []
        while True:
            start = k * every + offset
            if out and start > now + entry["ahead"]:
                return out
            out.append((k, start))
            k += 1

    def ensure(self, now: float | None = None) -> int:
        """Create the tournaments of every slot due ahead of time (once per slot); how
        many this call created."""
        now = time.time() if now is None else now
        made = 0
        for entry in self.entries:
            for k, start in self.slots(entry, now):
                key = f"{self.reg.p}tours:sched:{entry['name']}:{k}"
                keep = int(start - now) + SLOT_KEEP_S
                if not self.r.set(key, "creating", nx=True, ex=max(60, keep)):
                    continue
                try:
                    out = self.reg.create(dict(entry["tournament"]), ADMIN,
                                          schedule=entry["name"], starts_at=start)
                except Exception:
                    self.r.delete(key)
                    log.exception("schedule %s: creating slot %s failed; retried",
                                  entry["name"], k)
                    continue
                self.r.set(key, out["id"], ex=max(60, keep))
                made += 1
        return made

    def listing(self, now: float | None = None) -> list[dict[str, Any]]:
        """The schedule as shown: each entry with its next start and tournament."""
        now = time.time() if now is None else now
        out = []
        for entry in self.entries:
            k, start = self.slots(entry, now)[0]
            raw = self.r.get(f"{self.reg.p}tours:sched:{entry['name']}:{k}")
            tid = raw.decode() if raw and raw != b"creating" else None
            out.append({"name": entry["name"], "every": entry["every"],
                        "offset": entry["offset"], "next_start": start,
                        "next_tournament": tid, "tournament": entry["tournament"]})
        return out


class TournamentClock(BackgroundLoop):
    """Starts due tournaments every ``tick_s`` and makes the schedule's every
    ``ensure_s``; one per worker, any number at once."""

    thread_name = "allfours-tournament-clock"
    what = "tournament clock"
    log = logging.getLogger(__name__)

    def __init__(self, schedule: Schedule, tick_s: float = TICK_S,
                 ensure_s: float = ENSURE_S) -> None:
        super().__init__()
        self.schedule = schedule
        self.tick_s = tick_s
        self.ensure_s = ensure_s
        self._next_arenas = 0.0

    def pass_once(self) -> None:
        if self.due(self.ensure_s):
            self.schedule.ensure()
        self.schedule.reg.start_due()
        if time.monotonic() >= self._next_arenas:
            self._next_arenas = time.monotonic() + ARENA_TICK_S
            self.schedule.reg.tick_arenas()

    def idle_s(self) -> float:
        return self.tick_s


def start_clock(app: Any) -> TournamentClock | None:
    """Start the tournament clock of a Flask app built by ``create_app``."""
    schedule = app.extensions.get("tournament_schedule")
    if schedule is None:
        return None
    clock = TournamentClock(schedule)
    app.extensions["tournament_clock"] = clock
    return clock.start()
