"""What follows a game's end, off the path of the request that ended it.

A finished tournament, ladder or validation game has consequences above the games: the
tournament records it and may pair and start its next round (an optimistic transaction
that may be retried many times under contention), the ladder rates it and re-queues its
bots, the validation judges it, the analysis queue may take it. None of that is the
answer of the move that ended the game, so the move's request only hands the game to
``AfterFinish.submit`` and answers; the process's after-finish loop runs the hooks.

**Why a queue in the process, not in Redis.** Every one of those consequences is already
repaired from Redis alone for a process that dies after a game's end: the sweeper's pass
over open tournaments (``Tournaments.advance_all``), the matchmaker's over live ladder
matches and validation games (``ladder.REPAIR_S``). A queue in Redis would buy durability
that the repair passes already give, at the price of one more write on the move's path
and a consumer group to keep. What this loop adds is promptness: the next round is
usually paired within moments of the last game, by the process that saw it end.

**One loop per process**, started on first use (in the process that uses it: a forked
worker starts its own), running the hooks one game at a time in the order the games
ended. A hook that fails is logged and the next runs; the repair passes cover it as they
cover a dead process.

**After the answer, not merely off the request.** Under gevent the loop is a greenlet
of the same worker, so handing it the game is not enough: whenever the ending request
gives the hub a turn before its answer is written, the hub runs the woken loop, and the
request waits for the hooks (and for every other greenlet ready by then) as if it ran
them itself. It did so on every ending move: checking that the loop was alive
(``Thread.is_alive``) is a non-blocking acquire of the thread's lock, which gevent
follows with a ``sleep()``, so the hooks ran between the commit and the answer. So the
loop's liveness is a field of its own (no lock, no yield). Any other turn given to the
hub before the answer (a Redis read while the finished view is built, say) would do the
same, so a request that may end a game also holds a ``Gate`` (``AfterFinish.gate``): the
games it ends wait in the queue until the gate opens, which the request does as its
answer goes out, or at once if it fails. The action route opens it when the server takes
the answer's body to write it (the write follows before any other greenlet runs, unless
the socket's buffer is full), else when the response is closed: not only at the close,
since a WSGI caller may take the body and never close it (the test client does). A gate
that never opens holds its game ``gate_s`` at most; ``settle`` opens every gate, as its
caller wants the consequences now.
"""

from __future__ import annotations

import contextvars
import logging
import os
import queue
import threading
from collections.abc import Callable

from service.arena.core.loop import BackgroundLoop
from service.storage.store import Game

log = logging.getLogger(__name__)

Hook = Callable[[Game], None]

# How long a game waits for its gate at most: a request's answer goes out within
# milliseconds, so this only bounds the wait for one whose close never came.
GATE_S = 2.0


class Gate:
    """Held by a request that may end games (``AfterFinish.gate``, a ``with`` block):
    the games ended in the block wait for ``open``, which the request calls once its
    answer has gone out; an exception out of the block opens it at once. The gate is
    the block's context's, so other requests (greenlets, threads) are not held by it."""

    __slots__ = ("_event", "_opened", "_token")

    def __init__(self) -> None:
        self._event: threading.Event | None = None  # made when a game waits for it
        self._opened = False
        self._token: contextvars.Token[Gate | None] | None = None

    def __enter__(self) -> Gate:
        self._token = _GATE.set(self)
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if self._token is not None:
            _GATE.reset(self._token)
            self._token = None
        if kind is not None:
            self.open()

    @property
    def holding(self) -> bool:
        """Whether a game ended under this gate waits for it."""
        return self._event is not None and not self._opened

    def open(self) -> None:
        """Let this request's games' hooks run (safe to call again)."""
        self._opened = True
        if self._event is not None:
            self._event.set()

    def _waiting(self) -> threading.Event | None:
        """The event a game submitted now waits for (None: the gate is open already)."""
        if self._opened:
            return None
        if self._event is None:
            self._event = threading.Event()
        return self._event


_GATE: contextvars.ContextVar[Gate | None] = contextvars.ContextVar("after_finish_gate",
                                                                   default=None)


class AfterFinish(BackgroundLoop):
    """The after-finish hooks (``hooks``, installed by the domains above the games) and
    the loop that runs them for each submitted game (see the module docstring)."""

    thread_name = "allfours-after-finish"
    what = "after-finish"
    log = log

    def __init__(self) -> None:
        super().__init__()
        self.hooks: list[Hook] = []
        self.gate_s = GATE_S
        self._games: queue.Queue[tuple[Game, threading.Event | None] | None] = queue.Queue()
        self._gates: set[threading.Event] = set()  # the closed gates games wait for
        self._start_lock = threading.Lock()
        # the process whose loop runs (0: none): set when it starts, cleared when it ends,
        # so ``submit`` knows without ``Thread.is_alive`` (which yields under gevent)
        self._pid = 0

    def gate(self) -> Gate:
        """A gate for one request's ``with`` block: see ``Gate``."""
        return Gate()

    def submit(self, game: Game) -> None:
        """Queue ``game``, which has just finished, for the hooks; returns at once,
        without yielding (see the module docstring). Under a ``gate`` its hooks wait
        for the gate."""
        if not self.hooks:
            return
        gate = _GATE.get()
        waiting = gate._waiting() if gate is not None else None
        if waiting is not None:
            self._gates.add(waiting)
        self._games.put((game, waiting))
        if self._pid != os.getpid():
            self._start_here()

    def _start_here(self) -> None:
        with self._start_lock:
            if self._pid == os.getpid():
                return
            self._pid = os.getpid()
            self._stop.clear()
            self.start()

    def run(self) -> None:
        try:
            super().run()
        finally:
            if self._thread is threading.current_thread():  # not a loop stopped before
                self._pid = 0

    def stop(self, timeout: float = 5.0) -> None:
        super().stop(timeout)
        if self._thread is None or not self._thread.is_alive():
            self._pid = 0  # the next submit starts a loop again

    def run_hooks(self, game: Game) -> None:
        """Every hook for ``game``, now, in this thread; a failure is logged."""
        for hook in self.hooks:
            try:
                hook(game)
            except Exception:
                log.exception("after-finish hook failed for game %s", game.id)

    def pass_once(self) -> None:
        try:
            item = self._games.get(timeout=1.0)
        except queue.Empty:
            return
        try:
            if item is not None:
                game, waiting = item
                if waiting is not None:
                    waiting.wait(self.gate_s)
                    self._gates.discard(waiting)
                self.run_hooks(game)
        finally:
            self._games.task_done()

    def wake_to_stop(self) -> None:
        self._games.put(None)

    def settle(self, timeout: float = 30.0, open_gates: bool = True) -> bool:
        """Open every gate (unless not ``open_gates``), then wait until every game
        submitted so far has had its hooks run (tests, and a process that wants its
        consequences before it stops); False if ``timeout`` seconds passed first."""
        if open_gates:
            for waiting in list(self._gates):
                waiting.set()
        done = self._games.all_tasks_done
        with done:
            return done.wait_for(lambda: not self._games.unfinished_tasks, timeout)


__all__ = ["GATE_S", "AfterFinish", "Gate", "Hook"]
