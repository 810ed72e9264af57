"""The bot framework: a strategy decides, ``BotRunner`` does everything else.

A bot author writes one function ``(view, legal) -> action`` or a class with
``choose(view, legal)`` (see ``clients.strategies.Strategy``)::

    from clients.api import ArenaClient
    from clients.runner import BotRunner

    def first_legal(view, legal):
        return legal[0]

    BotRunner(ArenaClient(URL, token=TOKEN), first_legal).run()

The runner long-polls ``GET /bots/me/turns`` for the games (all of them, any number) where
it is the bot's turn, and gives each new one a thread of its own that plays it to the end:
it fetches the view, asks the strategy, and posts the action with the view's ``version``,
waiting in the same request for the bot's next turn in that game (``POST …/actions?wait=``,
up to ``act_wait`` seconds): the answer is the next view to decide on, so a move costs one
request. When the wait runs out with the other side still thinking, the thread goes on
waiting on the game (``GET …/turn``) until the game is over. The turn poll names every game
being played (``?playing=``), so it is answered only, and at once, when *another* game
becomes the bot's turn — a new game's first turn is never left waiting behind games that
are busy (else a running bot is charged timeouts in a game it never saw). ``workers`` bounds how
many strategies decide at once, not how many games are played. A
``not-your-turn``/``version-conflict``/``precondition-failed`` answer means the game moved
on: the thread re-fetches and decides again. Every request is paced by the client
(``ArenaClient``) from the service's ``RateLimit`` fields, so the runner waits for a new
window rather than meet a 429; one that comes anyway is retried after its
``Retry-After``. Network trouble that outlasts the client's own retries is waited out
with a growing backoff. Stop it with ``stop()``, a
``threading.Event``, ``max_games``, ``stop_when_idle``, or SIGINT/SIGTERM when
``handle_signals`` is on.

Logging (``logging`` module, logger ``clients.runner``): each decision at INFO with the
seat's own hand — a view only ever shows its own seat's cards, and nothing else is logged.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Collection
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from .api import ArenaClient, ArenaError, View

log = logging.getLogger(__name__)

ChooseFn = Callable[[dict[str, Any], list[str]], str]
# The game moved on under us: look again and decide again.
STALE = {"not-your-turn", "version-conflict", "precondition-failed", "game-not-started"}
MAX_PLAYING = 200  # game ids a turn poll may name as already being played (the contract's)
GAME_THREADS = 1024  # games played at once, each on a thread that mostly waits on the wire


class FunctionStrategy:
    """Wraps a plain ``(view, legal) -> action`` function as a strategy."""

    def __init__(self, fn: ChooseFn) -> None:
        self.fn = fn

    def choose(self, view: dict[str, Any], legal: list[str]) -> str:
        return self.fn(view, legal)

    def __repr__(self) -> str:
        return f"FunctionStrategy({getattr(self.fn, '__name__', self.fn)!r})"


def as_strategy(obj: Any) -> Any:
    """A strategy from a strategy object, a strategy class, a name, or a function."""
    if isinstance(obj, str):
        from .strategies import get_strategy

        return get_strategy(obj)
    if isinstance(obj, type):
        obj = obj()
    if callable(getattr(obj, "choose", None)):
        return obj
    if callable(obj):
        return FunctionStrategy(obj)
    raise TypeError(f"{obj!r} is neither a strategy (choose(view, legal)) nor a function")


@dataclass
class RunnerStats:
    """What the runner did; read it after ``run()`` (or while it runs, roughly)."""

    actions: int = 0
    games_finished: int = 0
    wins: int = 0
    conflicts: int = 0  # stale views re-fetched
    errors: int = 0  # calls that failed after the client's retries
    strategy_errors: int = 0  # strategy raised or chose an illegal action
    finished: list[str] = field(default_factory=list)  # game ids, in the order they ended


class BotRunner:
    """Plays every game of the client's bot until told to stop.

    - ``workers``: strategies deciding at the same time (any number of games is played at
      once, each on its own thread that waits on the wire, so one game's wait never holds
      up another game's turn).
    - ``max_games``: stop once this many of the bot's games have finished; on a ladder,
      this many *rated* games (the service counts them; a validation game is not one).
    - ``stop_when_idle``: stop when a turn poll comes back empty and no game this runner
      has played is still going.
    - ``stop_event``: a ``threading.Event`` that stops the runner when set.
    - ``poll_timeout``: seconds per turn long-poll (also how quickly a stop is noticed).
    - ``ladder``: a ladder's name (``2p``, ``4p``...): join it at the start (for
      ``max_games`` games, or until stopped) and play the games the service seats the bot
      in. The entry is checked every ``check_every`` seconds while idle: a bot the service
      paused (too many timeouts) stops with the reason logged. The first SIGINT/SIGTERM
      leaves the ladder and plays out the games in progress; a second stops at once.
      However the runner stops, it leaves the ladder, so no entry is left queued without
      a bot to play its games.
    - ``act_wait``: seconds an action also waits for the bot's next turn in its game (0:
      plain actions, each followed by a turn long-poll of the game). Waits are at most
      ``poll_timeout``, so a stop is noticed as quickly.
    - ``accept_from``: invitations (games another owner's bot asked this bot to play)
      to accept: from these bot ids or owner ids, ``"*"`` from anyone; others are left
      to expire, or declined with ``decline_others``. Default: none accepted (a bot
      plays only the games it chose).
    """

    def __init__(
        self,
        client: ArenaClient,
        strategy: Any,
        *,
        workers: int = 4,
        max_games: int | None = None,
        stop_when_idle: bool = False,
        stop_event: threading.Event | None = None,
        poll_timeout: float = 10.0,
        act_wait: float = 10.0,
        check_every: float = 2.0,
        max_backoff: float = 30.0,
        handle_signals: bool = False,
        name: str | None = None,
        ladder: str | None = None,
        accept_from: Collection[str] = (),
        decline_others: bool = False,
    ) -> None:
        self.client = client
        self.accept_from = frozenset(accept_from)
        self.decline_others = decline_others
        self._answered: set[str] = set()
        self._invitations_seen: float | None = None
        self.ladder = ladder
        self._ladder_checked = 0.0
        self._left = False
        self.strategy = as_strategy(strategy)
        self.workers = max(1, workers)
        self.max_games = max_games
        self.stop_when_idle = stop_when_idle
        self.stop_event = stop_event or threading.Event()
        self.poll_timeout = poll_timeout
        self.act_wait = max(0.0, min(30.0, act_wait))
        self.check_every = check_every
        self.max_backoff = max_backoff
        self.handle_signals = handle_signals
        self.name = name or "bot"
        self.stats = RunnerStats()
        self._lock = threading.Lock()
        self._open: dict[str, float] = {}  # games played and not seen over -> last checked
        self._done: set[str] = set()
        self._failed_games: set[str] = set()  # games whose strategy failure was logged
        self._deciding = threading.BoundedSemaphore(self.workers)

    # --- control -------------------------------------------------------------------------

    def stop(self) -> None:
        self.stop_event.set()

    @property
    def stopping(self) -> bool:
        return self.stop_event.is_set()

    def run(self) -> RunnerStats:
        """Play until stopped; returns the stats."""
        previous: dict[int, Any] = {}
        if self.handle_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                previous[sig] = signal.signal(sig, self._on_signal)
        log.info("%s: runner started (%s, %d workers)", self.name, _name(self.strategy),
                 self.workers)
        if self.ladder:
            entry = self.client.join_ladder(self.ladder, self.max_games)
            log.info("%s: joined ladder %s (%s, rating ordinal %s)", self.name, self.ladder,
                     entry["state"], entry["rating"]["ordinal"])
        pool = ThreadPoolExecutor(GAME_THREADS, thread_name_prefix=f"{self.name}-game")
        busy: dict[str, Future[None]] = {}
        failures = 0
        try:
            while not self._should_stop():
                for gid in [g for g, f in busy.items() if f.done()]:
                    busy.pop(gid).result()  # play_game never raises; this re-raises bugs
                try:
                    # every game being played is named: the poll answers when another one's
                    # turn comes (a new game's first), however long the busy ones take
                    turns = self.client.my_turns(self.poll_timeout,
                                                 playing=sorted(busy)[:MAX_PLAYING],
                                                 invitations_after=self._invitations_seen)
                    failures = 0
                except ArenaError as exc:
                    failures += 1
                    self._backoff(failures, exc)
                    continue
                if turns.invitations:
                    self._answer_invitations(turns.invitations)
                fresh = [g for g in turns.games if g not in busy and g not in self._done]
                for gid in fresh:
                    busy[gid] = pool.submit(self.play_game, gid)
                if turns.games and not fresh:
                    # only games already being played: more of them than a poll may name,
                    # or one that just ended. Do not spin on them.
                    wait(list(busy.values()), timeout=0.05, return_when=FIRST_COMPLETED)
                if not turns.games:
                    self._check_open(force=turns.timed_out, skip=busy)
                    self._check_ladder(busy)
                    if self.stop_when_idle and turns.timed_out and not busy and not self._open:
                        log.info("%s: idle, stopping", self.name)
                        break
                else:
                    self._check_open(force=False, skip=busy)
        finally:
            self.stop_event.set()
            pool.shutdown(wait=True)
            if self.ladder and not self._left:
                self._leave_ladder()  # stopped for any reason: never left queued, unplayed
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            log.info("%s: runner stopped: %s", self.name, self.stats)
        return self.stats

    def _answer_invitations(self, invitations: list[dict[str, Any]]) -> None:
        """Accept the invitations ``accept_from`` names; decline the rest with
        ``decline_others``, else leave them to expire. Each is answered once."""
        for inv in invitations:
            self._invitations_seen = max(self._invitations_seen or 0.0, inv["created"])
            if inv["id"] in self._answered:
                continue
            self._answered.add(inv["id"])
            wanted = "*" in self.accept_from or bool(
                {inv.get("from_bot"), inv.get("from_owner")} & self.accept_from)
            try:
                if wanted:
                    self.client.accept(inv["id"])
                    log.info("%s: accepted invitation to game %s from %s", self.name,
                             inv["game_id"], inv.get("from_bot"))
                elif self.decline_others:
                    self.client.decline(inv["id"])
                    log.info("%s: declined invitation to game %s from %s", self.name,
                             inv["game_id"], inv.get("from_bot"))
            except ArenaError as exc:
                if exc.status in (0, 429) or exc.status >= 500:
                    # unanswered (a restart, a lost connection): answer it again after the
                    # next poll, which lists it again from just before it
                    self._answered.discard(inv["id"])
                    self._invitations_seen = min(self._invitations_seen or inv["created"],
                                                 inv["created"] - 0.001)
                    log.warning("%s: invitation %s: %s; trying again", self.name, inv["id"],
                                exc)
                    return
                log.info("%s: invitation %s: %s", self.name, inv["id"], exc)  # expired...

    def _on_signal(self, signum: int, _frame: Any) -> None:
        if self.stopping:
            raise KeyboardInterrupt
        if self.ladder and not self._left:
            log.info("%s: signal %d: leaving ladder %s; playing out the games in progress "
                     "(again to stop at once)", self.name, signum, self.ladder)
            self._leave_ladder()
            self.stop_when_idle = True
            return
        log.info("%s: signal %d: finishing the current moves, then stopping", self.name,
                 signum)
        self.stop()

    def _should_stop(self) -> bool:
        if self.stopping:
            return True
        # on a ladder the service counts the rated games (the entry's ``games_left``; an
        # unrated validation game is not one of them) and turns the entry ``off`` after the
        # last: ``_check_ladder`` stops then
        return (self.max_games is not None and not self.ladder
                and self.stats.games_finished >= self.max_games)

    def _leave_ladder(self) -> None:
        self._left = True
        try:
            self.client.leave_ladder(self.ladder or "")
        except ArenaError as exc:
            log.warning("%s: leaving ladder %s: %s", self.name, self.ladder, exc)

    def _check_ladder(self, busy: Collection[str]) -> None:
        """Idle on a ladder: stop when the service paused the bot or did not admit it
        (saying why), or its games are done (``off``)."""
        now = time.monotonic()
        if not self.ladder or self._left or busy or now - self._ladder_checked < self.check_every:
            return
        self._ladder_checked = now
        try:
            entry = self.client.ladder_entry(self.ladder)
        except ArenaError as exc:
            log.warning("%s: ladder %s: %s", self.name, self.ladder, exc)
            return
        if entry["state"] == "paused" and not entry["game_id"]:
            log.warning("%s: paused on ladder %s: %s", self.name, self.ladder, entry["reason"])
            self.stop()
        elif entry["state"] == "not_admitted":  # its validation game (docs/ladder.md)
            log.warning("%s: not admitted to ladder %s: %s", self.name, self.ladder,
                        entry["reason"])
            self.stop()
        elif entry["state"] == "off" and not self._open:
            log.info("%s: ladder %s: no more games to play", self.name, self.ladder)
            self.stop()

    def _backoff(self, failures: int, exc: ArenaError) -> None:
        pause = min(self.max_backoff, 0.5 * 2 ** (failures - 1))
        if exc.retry_after is not None:
            pause = max(pause, exc.retry_after)
        with self._lock:
            self.stats.errors += 1
        log.warning("%s: %s; trying again in %.1f s", self.name, exc, pause)
        self.stop_event.wait(pause)

    # --- one game --------------------------------------------------------------------------

    def play_game(self, game_id: str) -> None:
        """Play ``game_id`` until it is over (or the runner stops). Never raises.

        Trouble on the wire (the service unreachable, a 5xx or 429 that outlasted the
        client's retries) is waited out here with a growing backoff, so the game stays this
        thread's and its next turn is never left to a poll that was told it is being
        played; any other refusal ends the thread (the turn poll then offers the game
        again if it is still the bot's turn)."""
        failures = 0
        while not self.stopping:
            try:
                self._play(game_id)
                return
            except ArenaError as exc:
                with self._lock:
                    self.stats.errors += 1
                log.warning("%s: game %s: %s", self.name, game_id, exc)
                if exc.status not in (0, 429) and exc.status < 500:
                    return
                failures += 1
                pause = min(self.max_backoff, 0.5 * 2 ** (failures - 1))
                self.stop_event.wait(max(pause, exc.retry_after or 0.0))
            except Exception:
                with self._lock:
                    self.stats.errors += 1
                log.exception("%s: game %s: unexpected error", self.name, game_id)
                return

    def _play(self, game_id: str) -> None:
        view = self.client.game(game_id)
        stale = 0
        wait_s = min(self.act_wait, self.poll_timeout)
        while not self.stopping:
            self._seen(view)
            if view.finished:
                return
            if not view.your_turn:
                # the other side is to act: wait on this game, not on the turn poll
                view = self.client.wait_turn(
                    game_id, timeout=min(30.0, max(0.5, self.poll_timeout))).view
                continue
            action = self._decide(view)
            try:
                # Waiting, the seat is left out: the service then answers on the turn of
                # any seat this bot holds (both of a team's seats, in a 4-player game) and
                # acts for the seat in turn, which ``version`` pins to the view's.
                view = self.client.act(game_id, action, version=view.version,
                                       seat=None if wait_s else view.seat,
                                       wait=wait_s or None)
            except ArenaError as exc:
                if exc.kind not in STALE or stale >= 20:
                    raise
                stale += 1
                with self._lock:
                    self.stats.conflicts += 1
                log.info("%s: game %s: %s; looking again", self.name, game_id, exc.kind)
                view = self.client.game(game_id)
                continue
            stale = 0
            with self._lock:
                self.stats.actions += 1
            log.info("%s: game %s seat %s v%d: %s (hand was %s)", self.name, game_id,
                     view.seat, view.version, action, " ".join(_hand_before(view, action)))

    def _decide(self, view: View) -> str:
        legal = view.legal_actions
        try:
            with self._deciding:  # at most ``workers`` strategies think at once
                action = self.strategy.choose(view.raw, list(legal))
        except Exception as exc:
            log.debug("%s: game %s: the strategy failed", self.name, view.id, exc_info=True)
            return self._failed(view, f"the strategy failed ({type(exc).__name__}: {exc})")
        if action not in legal:
            return self._failed(view, f"the strategy chose {action!r}, not one of {legal}")
        return action

    def _failed(self, view: View, what: str) -> str:
        """The first legal action, for a decision the strategy failed. Logged once a game,
        one line without a traceback (that is at debug level): a strategy that fails on
        a position (a long game it cannot handle) fails on every later one too, and a
        line or a traceback a decision would fill a busy bot's log."""
        legal = view.legal_actions
        with self._lock:
            self.stats.strategy_errors += 1
            first = view.id not in self._failed_games
            self._failed_games.add(view.id)
        if first:
            log.error("%s: game %s: %s; playing the first legal action (%s), and so for "
                      "every later failure in this game", self.name, view.id, what, legal[0])
        return legal[0]

    # --- which games are still going -----------------------------------------------------

    def _seen(self, view: View) -> None:
        with self._lock:
            if view.id in self._done:
                return
            if not view.finished:
                self._open[view.id] = time.monotonic()
                return
            self._open.pop(view.id, None)
            self._done.add(view.id)
            self._failed_games.discard(view.id)
            self.stats.games_finished += 1
            self.stats.finished.append(view.id)
            won = view.winner is not None and view.winner == view.team
            self.stats.wins += won
        log.info("%s: game %s over: scores %s, %s", self.name, view.id, view.scores,
                 "won" if won else "lost")

    def _check_open(self, force: bool, skip: Collection[str] = ()) -> None:
        """Games can end on another seat's move: look at open games now and then (except
        those in ``skip``: their own threads are watching them)."""
        now = time.monotonic()
        with self._lock:
            due = [g for g, t in self._open.items()
                   if g not in skip and (force or now - t >= self.check_every)]
        for gid in due:
            try:
                self._seen(self.client.game(gid))
            except ArenaError as exc:
                log.warning("%s: game %s: %s", self.name, gid, exc)
                if exc.status == 404:
                    with self._lock:
                        self._open.pop(gid, None)


def _hand_before(view: View, action: str) -> list[str]:
    """The seat's own hand before its action (the answer shows the hand after it)."""
    hand = list(view.hand or [])
    if len(action) == 2 and action not in hand and action[0] in "23456789TJQKA":
        hand.append(action)
    return hand


def _name(strategy: Any) -> str:
    return repr(strategy) if isinstance(strategy, FunctionStrategy) else type(strategy).__name__


def run_bot(
    server: str,
    strategy: Any,
    token: str | None = None,
    name: str | None = None,
    **options: Any,
) -> RunnerStats:
    """Convenience: connect (registering ``name`` when no token is given) and run."""
    client = ArenaClient(server, token=token)
    if token is None:
        bot = client.register(name or "bot")
        log.info("registered %s as %s (token %s...)", bot.name, bot.id, bot.token[:6])
    with client:
        return BotRunner(client, strategy, **options).run()


__all__ = ["BotRunner", "FunctionStrategy", "RunnerStats", "as_strategy", "run_bot"]
