"""The per-worker background loops (the deadline sweeper, the ladder's matchmaker, the
webhook dispatcher) share one shape: a daemon thread (a greenlet under gevent) repeats a
pass until stopped, some work of the pass only every so often, and a failed pass (Redis
down, say) is logged and retried after a second, so that the loop never dies of one.
``BackgroundLoop`` is that shape; a subclass says what one pass does."""

from __future__ import annotations

import logging
import threading
import time
from typing import Self


class BackgroundLoop:
    """Runs ``pass_once`` in a thread of its own from ``start`` until ``stop``, waiting
    ``idle_s()`` after each pass (and a second more after a failed one)."""

    thread_name = "allfours-loop"
    what = "background"  # "<what> pass failed" is the warning of a failed pass
    log = logging.getLogger(__name__)  # a subclass logs to its own module's logger

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._next_due = 0.0

    def pass_once(self) -> None:
        """One pass of the loop; an exception is logged and the loop goes on."""
        raise NotImplementedError

    def idle_s(self) -> float:
        """How long to wait after a pass (0: not at all, a pass waits for its work
        itself)."""
        return 0.0

    def due(self, every_s: float) -> bool:
        """True on the first pass of ``run``, then once ``every_s`` seconds have passed
        since it was last true: the work a loop does only every so often."""
        if time.monotonic() < self._next_due:
            return False
        self._next_due = time.monotonic() + every_s
        return True

    def until_due(self) -> float:
        """Seconds until ``due`` is next true (0 when it is now): how long a pass that
        waits for its work may wait."""
        return max(0.0, self._next_due - time.monotonic())

    def run(self) -> None:
        self._next_due = 0.0
        while not self._stop.is_set():
            try:
                self.pass_once()
            except Exception:  # Redis down, say: keep trying, quietly
                self.log.warning("%s pass failed", self.what, exc_info=True)
                self._stop.wait(1.0)
            idle = self.idle_s()
            if idle > 0:  # (a wait of 0 would still yield to other greenlets under gevent)
                self._stop.wait(idle)

    def start(self) -> Self:
        self._thread = threading.Thread(target=self.run, name=self.thread_name, daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self.wake_to_stop()
        if self._thread is not None:
            self._thread.join(timeout)

    def wake_to_stop(self) -> None:
        """Rouse a pass that waits for work on something other than ``_stop``."""
