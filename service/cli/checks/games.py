"""One game of a check as it was played, and check-bot's side of it: the opponent's seats
and the watcher that keeps the game's timeline.

Why a timeline: the service's record says which plies the clock played (``timeouts``: seat,
ply), not when. To tell a bot *why* its seat was played by the clock — it had exited, it saw
its turn and decided too late, it was busy in another game, it asked only for its other
seat, a fault check-bot injected took the time — each decision's window is needed: when it
began and its deadline. The watcher long-polls the game (``/turn?after=V``, straight to the
service, not through the bot's proxy) and notes, for every ply it sees, the seat in turn,
the deadline and when it was seen.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from service.cli.checks.proxy import Exchange, Rule
from service.cli.checks.service import CheckError, call

RANKS = "23456789TJQKA"


@dataclass
class Entry:
    """A ply of the game as the watcher first saw it: who was to act, and by when."""

    ply: int
    version: int
    turn: int | None
    deadline: float | None  # unix seconds on the service's clock
    seen: float  # time.monotonic() when the watcher saw it
    wall: float  # time.time() then
    status: str

    @property
    def deadline_at(self) -> float | None:
        """The deadline on check-bot's monotonic clock."""
        return None if self.deadline is None else self.seen + (self.deadline - self.wall)


@dataclass
class GameRun:
    """One game as it was played: the service's record plus what check-bot did to it."""

    name: str
    players: int = 2
    bot_seats: tuple[int, ...] = ()
    settings: dict[str, Any] = field(default_factory=dict)
    game_id: str = ""
    finished: bool = False
    record: dict[str, Any] = field(default_factory=dict)
    started: float = 0.0
    ended: float = 0.0
    opponent_moves: int = 0
    marks: dict[str, Any] = field(default_factory=dict)  # what the plan injected, and when
    rules: dict[str, Rule] = field(default_factory=dict)
    timeline: dict[int, Entry] = field(default_factory=dict)
    by_version: dict[int, Entry] = field(default_factory=dict)
    last: Entry | None = None

    @property
    def move_limit(self) -> float | None:
        limit = self.settings.get("move_limit")
        return float(limit) if limit else None

    @property
    def seconds(self) -> float:
        return max(0.0, (self.ended or time.monotonic()) - self.started) if self.started else 0.0

    def bot_timeouts(self) -> list[dict[str, Any]]:
        return [t for t in self.record.get("timeouts") or [] if t["seat"] in self.bot_seats]

    def note(self, view: dict[str, Any]) -> None:
        """Keep the first sight of every ply (and version) the watcher meets."""
        entry = Entry(view.get("ply", 0), view["version"], view.get("turn"),
                      view.get("deadline"), time.monotonic(), time.time(), view["status"])
        self.last = entry
        self.by_version.setdefault(entry.version, entry)
        if entry.status == "active":
            self.timeline.setdefault(entry.ply, entry)

    def seat_of(self, ex: Exchange) -> int | None:
        """The seat a bot's action was for: the one it named, else the seat in turn at the
        version it named, else the seat in turn now."""
        body = ex.body if isinstance(ex.body, dict) else {}
        if isinstance(body.get("seat"), int):
            return body["seat"]
        entry = self.by_version.get(body.get("version")) if isinstance(
            body.get("version"), int) else None
        entry = entry or self.last
        return entry.turn if entry else None

    def due(self, ply: int) -> Entry | None:
        """The entry in which the ``ply``-th action was due (the state after ply - 1)."""
        for p in range(ply - 1, -1, -1):
            if p in self.timeline:
                return self.timeline[p]
        return None


def decision_kind(action: object) -> str:
    """Which of the three decision kinds an action answers."""
    if action in ("stand", "beg"):
        return "stand_or_beg"
    return "give_one_or_run" if action in ("give_one", "run_pack") else "play"


# --- the opponent ---------------------------------------------------------------------------


def plain(view: dict[str, Any], legal: list[str], rng: random.Random) -> str:
    """Beg when it may (so the bot as dealer must give one or run); else at random."""
    return "beg" if "beg" in legal else rng.choice(legal)


def sharp(view: dict[str, Any], legal: list[str], rng: random.Random) -> str:
    """Plays so the house rules that change what is legal come up for the bot: it begs and
    runs the pack (the pack runs out sooner), leads a plain suit and trumps it high when it
    can (the bot following may then not under-trump, R15)."""
    for choice in ("beg", "run_pack"):
        if choice in legal:
            return choice
    cards = [a for a in legal if len(a) == 2]
    if not cards:
        return rng.choice(legal)
    trump = view.get("trump")
    trick = (view.get("trick") or {}).get("cards") or []
    if not trick:
        plain_suit = [c for c in cards if c[1] != trump]
        return rng.choice(plain_suit or cards)
    if trick[0]["card"][1] != trump:
        trumps = [c for c in cards if c[1] == trump]
        if trumps:
            return max(trumps, key=lambda c: RANKS.index(c[0]))
    return rng.choice(cards)


class Opponent:
    """check-bot's side of a game: a thread per seat, playing at once with ``strategy``,
    with ``hooks`` run before its n-th move (1 = its first) — where a plan thinks —, taking
    ``delay`` seconds per move."""

    def __init__(self, base: str, token: str, game_id: str, seats: list[int],
                 hooks: dict[int, Callable[[], None]], stop: threading.Event,
                 strategy: Callable[..., str] = plain, delay: float = 0.0) -> None:
        self.base, self.token, self.game_id = base, token, game_id
        self.hooks, self.stop = hooks, stop
        self.strategy, self.delay = strategy, delay
        self.moves = 0
        self._lock = threading.Lock()
        self.rngs = {s: random.Random(f"{game_id}:{s}") for s in seats}
        self.threads = [threading.Thread(target=self._play, args=(s,), daemon=True,
                                         name=f"opponent-{s}") for s in seats]

    def start(self) -> Opponent:
        for t in self.threads:
            t.start()
        return self

    def _play(self, seat: int) -> None:
        path = f"/games/{self.game_id}"
        while not self.stop.is_set():
            try:
                view = call(self.base, "GET", f"{path}/turn?timeout=2&seat={seat}",
                            self.token)["view"]
            except CheckError:
                time.sleep(0.2)
                continue
            if view["status"] == "finished":
                return
            if not view["your_turn"]:
                continue
            with self._lock:
                self.moves += 1
                hook = self.hooks.pop(self.moves, None)
            if hook is not None:
                hook()
                continue  # look again: the game may have moved on meanwhile
            if self.delay:
                time.sleep(self.delay)
            action = self.strategy(view, view["legal_actions"], self.rngs[seat])
            with contextlib.suppress(CheckError):
                call(self.base, "POST", f"{path}/actions", self.token,
                     {"action": action, "version": view["version"], "seat": seat})
