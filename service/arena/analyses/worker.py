"""The analysis worker process: takes the next game from the queue
(``service.arena.analyses.queue``), claims it, computes it with a heartbeat renewing the
lease, stores the result and acknowledges the entry.

Why a process of its own: the analysis (``service.analysis.analyse``) is CPU-bound pure
Python; in a gunicorn worker it would hold the GIL from the requests. The arbiter starts
a supervisor (``python -m service.arena.analyses.worker``, ``gunicorn_conf.when_ready``)
that keeps ``ARENA_ANALYSIS_WORKERS`` of them running at the lowest CPU priority, so play
goes first.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import redis

from service.arena.analyses.queue import DEFAULTS, Analyses
from service.storage.store import Game, Store

log = logging.getLogger(__name__)

class Lost(Exception):
    """The lease went to another worker (this one was paused past it): stop computing."""


class MakeWay(Exception):
    """A player's request of a lighter network waits: give this game up for it."""


YIELD_CHECK_S = 1.0  # how often a worker looks for a lighter request while it computes




Analyser = Callable[..., dict[str, Any]]


def default_analyser() -> Analyser:
    from service.analysis import analyse  # the pure analyser (engine + strategies)

    return analyse


class Worker:
    """One analysis at a time: take an entry, claim its game, compute with a heartbeat
    thread renewing the lease, store, acknowledge."""

    def __init__(self, analyses: Analyses, analyser: Analyser | None = None,
                 quality: str = "default", name: str | None = None) -> None:
        self.a = analyses
        self.analyser = analyser or default_analyser()
        self.quality = quality
        self.name = name or f"{socket.gethostname()}:{os.getpid()}"
        self.stopping = threading.Event()
        self.yielded: set[str] = set()  # games given up once (never twice: no starving)

    def run(self, block_ms: int = 2000) -> None:
        self.a.ensure_group()
        tidy_at = 0.0
        while not self.stopping.is_set():
            try:
                if time.monotonic() >= tidy_at:
                    self.a.forget_consumers()
                    tidy_at = time.monotonic() + 600
                self.once(block_ms)
            except redis.RedisError:
                log.warning("analysis worker: redis error", exc_info=True)
                self.stopping.wait(1.0)

    def once(self, block_ms: int = 0) -> bool:
        """Deal with one entry if there is one; True if there was."""
        got = self.a.next_entry(self.name, block_ms)
        if got is None:
            return False
        entry_id, game_id = got
        game = self.a.store.get_game(game_id) if game_id else None
        if game is None or game.status != "finished":
            self.a.settle(entry_id)  # gone, or not a finished game: nothing to compute
            return True
        code = self.a.claim(game_id, self.name)
        if code == 0:
            self.a.settle(entry_id)
        elif code == 1:
            self.compute(game, entry_id)
        return True  # -1: another worker holds it; the entry stays pending

    def compute(self, game: Game, entry_id: str) -> None:
        progress = {"done": 0, "total": 0}
        lost = threading.Event()
        finished = threading.Event()

        def beat() -> None:
            every = max(0.2, self.a.lease_s / 3)
            while not finished.wait(every):
                try:
                    if not self.a.renew(game.id, self.name, progress["done"],
                                        progress["total"], entry_id, self.name):
                        lost.set()
                        return
                except redis.RedisError:
                    log.warning("analysis heartbeat failed", exc_info=True)

        _, net = self.a.taken_by(entry_id)
        may_yield = bool(net) and game.id not in self.yielded
        looked = [time.monotonic()]

        def on_progress(done: int, total: int) -> None:
            progress["done"], progress["total"] = done, total
            if lost.is_set():
                raise Lost(game.id)
            if may_yield and time.monotonic() - looked[0] >= YIELD_CHECK_S:
                looked[0] = time.monotonic()
                if self.a.line.lighter_waiting(net):
                    raise MakeWay(game.id)

        heart = threading.Thread(target=beat, name="analysis-heartbeat", daemon=True)
        heart.start()
        try:
            result = self.analyser(game.players, game.meta["seed"], game.variants,
                                   game.actions, quality=self.quality, progress=on_progress)
        except Lost:
            log.info("analysis of %s taken over by another worker", game.id)
            return
        except MakeWay:
            finished.set()
            heart.join()
            if len(self.yielded) > 10_000:
                self.yielded.clear()
            self.yielded.add(game.id)
            if self.a.give_up(game.id, self.name, entry_id):
                log.info("analysis of %s given up for a lighter request", game.id)
            return
        except Exception as exc:  # a bug in the analysis: stored as failed, not retried
            log.exception("analysis of %s failed", game.id)
            finished.set()
            self.a.finish(game.id, self.name, None, f"{type(exc).__name__}: {exc}")
            self.a.settle(entry_id)
            return
        finally:
            finished.set()
            heart.join()
        if self.a.finish(game.id, self.name, result):
            self.a.count_for_bots(game, result)
        self.a.settle(entry_id)


def store_from_env(env: dict[str, str] | os._Environ[str] | None = None) -> Store:
    """The Store a worker process uses: the same settings as the app's."""
    from service.storage import redis_client

    env = os.environ if env is None else env
    url = env.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
    timeout = float(env.get("ARENA_REDIS_TIMEOUT") or redis_client.COMMAND_TIMEOUT_S)
    mode = redis_client.mode_of(url, env.get("ARENA_REDIS_MODE") or "auto", timeout)
    # a blocking XREADGROUP waits up to 2 s: the socket timeout must outlast it
    client = redis_client.connect(url, max(timeout, 10.0), 4, mode)
    return Store(client, env.get("ARENA_KEY_PREFIX") or "af:")


def worker_count(env: dict[str, str] | os._Environ[str] | None = None) -> int:
    env = os.environ if env is None else env
    return max(0, int(env.get("ARENA_ANALYSIS_WORKERS") or DEFAULTS["ARENA_ANALYSIS_WORKERS"]))


def run_worker() -> int:
    """One worker process (``python -m service.arena.analyses.worker --worker``)."""
    logging.basicConfig(level=os.environ.get("ARENA_LOG_LEVEL", "INFO").upper(),
                        format="%(asctime)s analysis %(levelname)s %(message)s")
    nice = int(os.environ.get("ARENA_ANALYSIS_NICE") or DEFAULTS["ARENA_ANALYSIS_NICE"])
    if nice > 0:
        # A session of its own, so (on a kernel with autogroup scheduling) its CPU time is
        # not charged to the service's own group, whose requests would then wait behind
        # every other session's processes; and that group's niceness lowered too.
        with contextlib.suppress(OSError):
            os.setsid()
        with contextlib.suppress(OSError), open("/proc/self/autogroup", "w") as f:
            f.write(str(nice))
    with contextlib.suppress(OSError):  # not allowed: run at the same priority
        os.nice(nice)
    if nice > 0 and hasattr(os, "SCHED_IDLE"):
        # Linux: run only on CPU time nothing else of the machine wants (below nice 19)
        with contextlib.suppress(OSError):
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    lease = float(os.environ.get("ARENA_ANALYSIS_LEASE") or DEFAULTS["ARENA_ANALYSIS_LEASE"])
    worker = Worker(Analyses(store_from_env(), lease),
                    quality=os.environ.get("ARENA_ANALYSIS_QUALITY") or "default")

    def on_term(*_: object) -> None:
        # at once, even mid-analysis: the game's entry stays pending, and another worker
        # takes it over after the lease (as after a crash)
        worker.stopping.set()
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_term)
    worker.run()
    return 0


def spawn_workers(count: int, env: dict[str, str] | None = None) -> list[subprocess.Popen]:
    """``count`` worker processes (each computes one analysis at a time)."""
    from service.storage.embedded import die_with_parent

    # each dies with the supervisor, even a supervisor killed without its clean-up
    return [subprocess.Popen([sys.executable, "-m", "service.arena.analyses.worker", "--worker"],
                             env=env, preexec_fn=die_with_parent) for _ in range(count)]


def supervise(count: int) -> int:
    """Keep ``count`` workers running until SIGTERM (or the parent, gunicorn's arbiter,
    is gone); a worker that dies is started again a second later."""
    parent = os.getppid()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    procs = spawn_workers(count)
    try:
        while not stop.wait(1.0):
            if os.getppid() != parent:
                break
            for i, proc in enumerate(procs):
                if proc.poll() is not None:
                    log.warning("analysis worker %s exited (%s); starting another",
                                proc.pid, proc.returncode)
                    procs[i] = spawn_workers(1)[0]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m service.arena.analyses.worker")
    parser.add_argument("--worker", action="store_true", help="be one worker")
    parser.add_argument("--workers", type=int, default=None,
                        help="supervise this many workers (default ARENA_ANALYSIS_WORKERS)")
    args = parser.parse_args(argv)
    if args.worker:
        return run_worker()
    return supervise(worker_count() if args.workers is None else args.workers)


if __name__ == "__main__":
    sys.exit(main())
