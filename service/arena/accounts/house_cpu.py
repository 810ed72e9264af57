"""The house bots' CPU: a budget per game and per owner, so that cheap moves against the
search bot never turn into the web workers' CPU.

The search bot spends a tenth of a second of CPU on every decision; thirty people
answering it at once made the house process take a core from the web workers (honest
actions' p99 29 -> 707 ms). So the house process runs at a lower CPU priority
(``ARENA_HOUSE_NICE``, ``house.run``), and its search decisions are budgeted
(``Budgeted``): a decision is the heuristic's instead when

- the game has had ``ARENA_HOUSE_GAME_CPU`` seconds of search already (``game``),
- the owner it is played against has had ``ARENA_HOUSE_OWNER_CPU`` seconds of search in
  the last ``OWNER_WINDOW_S`` over all its games (``owner``), or
- the house process has used more than ``ARENA_HOUSE_CPU_SHARE`` of a core over the last
  ``LOAD_WINDOW_S`` (``load``): under load every search bot plays the heuristic.

Each decision is counted (``Tally``: search, or the heuristic and why) and the house
process adds the counts to ``{p}house:decisions`` every beat; ``GET /metrics`` shows them
as ``allfours_house_decisions_total{strategy, reason}``. Imports nothing of the clients:
the house process hands its strategies in.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from typing import Any

DEFAULTS: dict[str, Any] = {
    "ARENA_HOUSE_NICE": 10,  # added to the house process's niceness: play's requests first
    # seconds of search CPU a house game may have, and an owner over a minute; past them,
    # and while the process uses more than the share of a core, the heuristic plays
    "ARENA_HOUSE_GAME_CPU": 30.0,
    "ARENA_HOUSE_OWNER_CPU": 20.0,
    "ARENA_HOUSE_CPU_SHARE": 0.5,
}
OWNER_WINDOW_S = 60.0
LOAD_WINDOW_S = 5.0
GAMES_KEPT = 10_000  # games whose CPU is remembered (the oldest forgotten first)
REASONS = ("game", "owner", "load")


class Tally:
    """Decisions made, by (strategy, reason); ``take`` empties it (the house process adds
    the counts to Redis every beat)."""

    def __init__(self) -> None:
        self.counts: Counter[tuple[str, str]] = Counter()
        self.lock = threading.Lock()

    def add(self, strategy: str, reason: str = "") -> None:
        with self.lock:
            self.counts[(strategy, reason)] += 1

    def take(self) -> dict[tuple[str, str], int]:
        with self.lock:
            out, self.counts = dict(self.counts), Counter()
        return out


class Load:
    """The process's CPU use over the last ``window_s``, in cores (sampled at each ask)."""

    def __init__(self, window_s: float = LOAD_WINDOW_S,
                 cpu: Callable[[], float] = time.process_time,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.window_s = window_s
        self.cpu = cpu
        self.clock = clock
        self.samples: deque[tuple[float, float]] = deque()
        self.lock = threading.Lock()

    def cores(self) -> float:
        now, used = self.clock(), self.cpu()
        with self.lock:
            self.samples.append((now, used))
            while len(self.samples) > 1 and now - self.samples[0][0] > self.window_s:
                self.samples.popleft()
            then, before = self.samples[0]
        return (used - before) / (now - then) if now - then >= 1.0 else 0.0


class Budgeted:
    """``strong`` (the search) within its budgets, else ``cheap`` (the heuristic); see
    the module docstring. ``owner_of`` names the owner a view's game is played against
    (None: not known, no owner budget)."""

    def __init__(self, strong: Any, cheap: Any, owner_of: Callable[[dict[str, Any]],
                                                                   str | None],
                 tally: Tally, config: dict[str, Any] | None = None,
                 load: Load | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 cpu: Callable[[], float] = time.thread_time) -> None:
        cfg = {**DEFAULTS, **(config or {})}
        self.strong = strong
        self.cheap = cheap
        self.owner_of = owner_of
        self.tally = tally
        self.game_s = float(cfg["ARENA_HOUSE_GAME_CPU"])
        self.owner_s = float(cfg["ARENA_HOUSE_OWNER_CPU"])
        self.share = float(cfg["ARENA_HOUSE_CPU_SHARE"])
        self.load = load or Load()
        self.clock = clock
        self.cpu = cpu
        self.games: dict[str, float] = {}
        self.owners: dict[str, deque[tuple[float, float]]] = {}
        self.lock = threading.Lock()

    def over(self, game: str, owner: str | None) -> str | None:
        """Why this decision may not be searched, or None."""
        if self.share and self.load.cores() > self.share:
            return "load"
        now = self.clock()
        with self.lock:
            if self.game_s and self.games.get(game, 0.0) >= self.game_s:
                return "game"
            spent = self.owners.get(owner or "")
            if owner and self.owner_s and spent is not None:
                while spent and now - spent[0][0] > OWNER_WINDOW_S:
                    spent.popleft()
                if sum(s for _, s in spent) >= self.owner_s:
                    return "owner"
        return None

    def spend(self, game: str, owner: str | None, seconds: float) -> None:
        with self.lock:
            self.games[game] = self.games.get(game, 0.0) + seconds
            if len(self.games) > GAMES_KEPT:
                self.games.pop(next(iter(self.games)))
            if owner:
                self.owners.setdefault(owner, deque()).append((self.clock(), seconds))
                if len(self.owners) > GAMES_KEPT:
                    self.owners.pop(next(iter(self.owners)))

    def choose(self, view: dict[str, Any], legal: list[str]) -> str:
        if len(legal) == 1:
            return legal[0]
        game = str(view.get("id") or "")
        owner = self.owner_of(view)
        why = self.over(game, owner)
        if why is not None:
            self.tally.add("heuristic", why)
            return self.cheap.choose(view, legal)
        started = self.cpu()
        try:
            return self.strong.choose(view, legal)
        finally:
            self.spend(game, owner, self.cpu() - started)
            self.tally.add("search")


def opponent(view: dict[str, Any], house_bots: set[str]) -> str | None:
    """The first seat's bot in ``view`` that is not a house account (whose owner the game
    is played against), or None."""
    for seat in view.get("seats") or ():
        bot = seat.get("bot_id") if isinstance(seat, dict) else seat
        if bot and bot not in house_bots:
            return str(bot)
    return None


__all__ = ["DEFAULTS", "REASONS", "Budgeted", "Load", "Tally", "opponent"]
