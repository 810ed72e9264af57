"""Who delivers the webhook calls: a ``Dispatcher`` per process hears webhook bots' turns
and calls them through ``service.arena.webhooks.callbacks.Callbacks``.

**Who delivers: claims with leases, like the deadlines.** Every process runs a
``Dispatcher``. The truth of "whose turn is it" is the game itself (and the bot's turn set,
which ``Store.COMMIT`` keeps with every change): a dispatcher looks at a webhook bot's turn
set when the bot's turn channel wakes it (the listener every process runs hears each game
become a bot's turn) and, as a repair pass, every ``SCAN_S`` seconds for every webhook bot.
For each game there at version *v* it tries ``SET {hook:bot}:claim:{game}:{v} NX PX
lease``: exactly one process wins the turn and calls the bot. The lease outlasts the call
(its time budget plus ``LEASE_MARGIN_S``); a process killed mid-call leaves the claim to
expire, and the next repair pass of any process claims the turn again and calls again
while time is left — never nobody (until the deadline, which the sweeper owns) and never
two applied actions (version plus key). Once the call has an outcome the claim becomes a
``done`` marker that lives until the deadline has passed: no second call for that
version. A game with no move limit has no fallback; a failed turn there is called again
after ``NO_DEADLINE_RETRY_S``. A process killed after the action applied but before it
wrote the delivery record leaves no record of that call (the game has the action; nothing
is called again, since the turn is over). The repair pass costs each process, every
``SCAN_S``, a few small reads per webhook bot and per game where it is that bot's turn.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from typing import Any

from service.arena.core.loop import BackgroundLoop
from service.arena.webhooks.callbacks import Callbacks
from service.arena.webhooks.keys import CONCURRENCY, SCAN_S, Claim, claim_key, hooks_key, notify_key
from service.storage.wakeups import Waiter

log = logging.getLogger(__name__)


class _TurnWaiter(Waiter):
    """A permanent waiter on one webhook bot's turn channel: each wake-up queues the bot."""

    def __init__(self, hub: Any, channel: str, bot_id: str, inbox: queue.Queue[str]) -> None:
        super().__init__(hub, channel)
        self.bot_id = bot_id
        self.inbox = inbox

    def _deliver(self, data: bytes | None) -> None:
        self.inbox.put(self.bot_id)


class Dispatcher(BackgroundLoop):
    """Per process: hears webhook bots' turns and calls them (see the module docstring).
    One loop thread (a greenlet under gevent) hears the wake-ups; one thread per bot at a
    time looks for its turns and claims them; each claimed turn is called in a thread of
    its own, at most ``CONCURRENCY`` at once."""

    thread_name = "allfours-callbacks"
    what = "callback dispatcher"
    log = logging.getLogger(__name__)

    def __init__(self, callbacks: Callbacks, scan_s: float = SCAN_S) -> None:
        super().__init__()
        self.cb = callbacks
        self.arena = callbacks.arena
        self.scan_s = scan_s
        self.inbox: queue.Queue[str] = queue.Queue()
        self._waiters: dict[str, _TurnWaiter] = {}
        self._busy: set[str] = set()
        self._again: set[str] = set()
        self._notifying: set[str] = set()
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(CONCURRENCY)
        callbacks.dispatcher = self  # type: ignore[attr-defined]

    def wake(self, bot_id: str) -> None:
        self.inbox.put(bot_id)

    def _listen(self, bots: set[str]) -> None:
        """Keep one turn-channel waiter per webhook bot (and the listener running)."""
        wakeups = self.arena.wakeups
        for bot in bots - set(self._waiters):
            w = _TurnWaiter(wakeups, self.arena.store.bot_turn_channel(bot), bot, self.inbox)
            w.__enter__()
            self._waiters[bot] = w
        for bot in set(self._waiters) - bots:
            self._waiters.pop(bot).__exit__()
        if self._waiters:
            wakeups.start()

    def scan_once(self) -> set[str]:
        """The repair pass: every webhook bot is looked at, and the verifications due are
        sent."""
        r = self.cb.store.r
        bots = {b.decode() for b in r.smembers(hooks_key(self.cb.p))}
        self._listen(bots)
        for bot in bots:
            self._start(bot)
        self.verify_due()
        return bots

    def verify_due(self) -> None:
        """Send each due verification in a thread of its own (a slot of ``CONCURRENCY``
        each; with none free it is left to the lease, and sent after it)."""
        for bot, vid in self.cb.claim_verifications():
            if not self._slots.acquire(blocking=False):
                break
            threading.Thread(target=self._verify, args=(bot, vid), daemon=True,
                             name="allfours-callback-verify").start()

    def _verify(self, bot: str, vid: str) -> None:
        try:
            self.cb.verify_once(bot, vid)
        except Exception:
            log.warning("verifying the callback of bot %s failed", bot, exc_info=True)
        finally:
            self._slots.release()

    def _start(self, bot: str) -> None:
        """Work on ``bot`` in a thread of its own unless one is at it already (then once
        more when that one is done)."""
        with self._lock:
            if bot in self._busy:
                self._again.add(bot)
                return
            self._busy.add(bot)
        threading.Thread(target=self._work, args=(bot,), daemon=True,
                         name="allfours-callback").start()

    def _work(self, bot: str) -> None:
        while True:
            try:
                self.process_bot(bot)
            except Exception:
                log.warning("callbacks for bot %s failed", bot, exc_info=True)
            with self._lock:
                if bot not in self._again:
                    self._busy.discard(bot)
                    return
                self._again.discard(bot)

    def process_bot(self, bot: str) -> None:
        """Claim every turn of ``bot`` that nobody has claimed and call each in a thread
        of its own (a bot in many games is called for all of them at once), then deliver
        its due notifications. When a call ends the bot is looked at again: a turn that
        stays the bot's after its own action (a trick it won) is called at once."""
        cb = self.cb
        cfg = cb.config(bot)
        if cfg is None:
            cb.store.r.srem(hooks_key(cb.p), bot)  # an id left without its config
            return
        store, r = self.arena.store, cb.store.r
        if not cfg["verified"]:
            # sent nothing but its verification: its turns fall to the deadline; its
            # notifications wait for the verification, and go with a URL that failed it
            if cfg["verification"] == "failed":
                r.delete(notify_key(cb.p, bot))
            return
        for game_id in store.bot_turns(bot):
            version = store.get_version(game_id)
            if version is None or r.exists(claim_key(cb.p, bot, game_id, version)):
                continue  # gone, or this turn is being (or was) called: no full read
            game = store.get_game(game_id)
            claim = cb.claim_turn(bot, game) if game is not None else None
            if claim is None:
                continue
            if not self._slots.acquire(blocking=False):  # full: free it for another pass
                cb.store.r.delete(claim.key)
                break
            threading.Thread(target=self._turn, args=(claim, cfg), daemon=True,
                             name="allfours-callback").start()
        if not r.exists(notify_key(cb.p, bot)):
            return  # no notification pending
        with self._lock:
            if bot in self._notifying:
                return
            self._notifying.add(bot)
        threading.Thread(target=self._notify, args=(bot, cfg), daemon=True,
                         name="allfours-callback-notes").start()

    def _notify(self, bot: str, cfg: dict[str, Any]) -> None:
        try:
            self.cb.notify_due(bot, cfg)
        except Exception:
            log.warning("notifications for bot %s failed", bot, exc_info=True)
        finally:
            with self._lock:
                self._notifying.discard(bot)

    def _turn(self, claim: Claim, cfg: dict[str, Any]) -> None:
        try:
            self.cb.run_claimed(claim, cfg)
        finally:
            self._slots.release()
            self.wake(claim.bot_id)

    def pass_once(self) -> None:
        """Scan every ``scan_s``; meanwhile wait for wake-ups and start on the bots woken."""
        if self.due(self.scan_s):
            self.scan_once()
        try:
            bot = self.inbox.get(timeout=self.until_due())
        except queue.Empty:
            return
        woken = {bot}
        while True:
            try:
                woken.add(self.inbox.get_nowait())
            except queue.Empty:
                break
        for b in woken:
            self._start(b)

    def wake_to_stop(self) -> None:
        self.inbox.put("")

    def stop(self, timeout: float = 5.0) -> None:
        super().stop(timeout)
        for w in list(self._waiters.values()):
            w.__exit__()
        self._waiters.clear()


def start_dispatcher(app: Any) -> Dispatcher | None:
    """Start delivering callbacks for a Flask app built by ``create_app`` (unless
    ``ARENA_CALLBACKS=0``)."""
    cb: Callbacks = app.extensions["callbacks"]
    if not cb.enabled or os.environ.get("ARENA_CALLBACKS", "1") == "0":
        return None
    dispatcher = Dispatcher(cb)
    app.extensions["callback_dispatcher"] = dispatcher
    return dispatcher.start()
