"""Post-game analyses (issue 25): asked for once, computed once by a background worker in
any instance, stored with the game.

Why a queue and a lock both. The queue is one Redis Stream with one consumer group
(``XADD`` to ask, ``XREADGROUP`` to take, ``XACK`` when done, ``XAUTOCLAIM`` to take over
an entry whose worker went quiet for longer than the lease): every instance's workers
read the same group, so any of them may compute any game, and an entry a killed worker
held is handed to another. A stream alone may still deliver one game twice (a second
``XADD`` by a request racing the first, an entry taken over from a worker that was only
slow), so the game's analysis hash is the lock: ``CLAIM`` gives the game to one worker
for ``lease_s`` (renewed every third of it by a heartbeat thread while it computes) and
``FINISH`` stores the result only for the worker that holds it. A worker that finds the
game done acknowledges the entry; one that finds it held by a live lease leaves the entry
pending (it comes round again after the lease, and is acknowledged once the game is done).

Keys (``p`` = the key prefix, ``T(x)`` a hash tag in cluster mode, docs/operations.md):

- ``{p}game:T(id):analysis`` hash, in the game's slot: ``status`` (queued, running, done,
  failed), ``done``/``total`` (progress), ``result`` (the analysis JSON), ``etag``,
  ``worker``/``lease`` (the lock), ``attempts`` (computations started: 1 unless a worker
  died), ``counted`` (added to the bots' averages). Its TTL is the game's own, copied
  by every script that writes it (they read the game's PTTL in the same slot), so it goes
  when the game goes, and a kept (tournament, ladder) game's analysis is kept too.
- ``{p}{analysis}:queue`` the stream (one key: the queue's traffic is one entry per
  analysed game, far below what one slot serves, and one key keeps one consumer group);
  entries are deleted once acknowledged, and it is capped (``MAXLEN ~``).
- ``{p}bot:{id}:analysis`` hash: a bot's sums over its analysed games (``games``,
  ``decisions``, ``loss``, the marks, and ``n:<kind>``/``loss:<kind>`` per decision
  kind), the bot's TTL copied when written (a bot kept for ever keeps it).

The analysis itself (``service.analysis.analyse``) is CPU-bound pure Python: it runs in
worker processes of its own (``main``), never in a gunicorn worker, where it would hold
the GIL from the requests. ``ARENA_ANALYSIS_WORKERS`` of them per instance (default 1;
0: none), started by the gunicorn arbiter (``gunicorn_conf.when_ready``) and at a lower
CPU priority (``nice``), so that play is not slowed.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
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

from service.storage.store import Game, Store

log = logging.getLogger(__name__)

DEFAULTS: dict[str, Any] = {
    # analysis worker processes per instance (0: this instance computes none)
    "ARENA_ANALYSIS_WORKERS": 1,
    # seconds a worker holds a game without a heartbeat before another may take it over
    "ARENA_ANALYSIS_LEASE": 30.0,
    # the analyser's quality (``service.analysis``: samples per decision)
    "ARENA_ANALYSIS_QUALITY": "default",
    # "1": every finished ladder game is analysed
    "ARENA_LADDER_ANALYSE": "0",
    # CPU priority added to the workers (``os.nice``): play goes first
    "ARENA_ANALYSIS_NICE": 19,
}

GROUP = "workers"
STREAM_MAX = 100_000  # entries kept at most (``XADD MAXLEN ~``): a queue, not a log
QUEUED, RUNNING, DONE, FAILED = "queued", "running", "done", "failed"
MARKS = ("inaccuracy", "mistake", "blunder")

# The TTL of KEYS[1] becomes KEYS[2]'s (the game's): none if the game has none.
_SAME_TTL = """
local function same_ttl(key, game)
  local ttl = redis.call('PTTL', game)
  if ttl > 0 then redis.call('PEXPIRE', key, ttl) else redis.call('PERSIST', key) end
end
"""

# KEYS: analysis, game. ARGV: now, stale_s. 1: the caller adds a stream entry (a new
# request, or one whose queued entry or worker seems lost: older than stale_s), else 0.
ASK = _SAME_TTL + """
if redis.call('EXISTS', KEYS[2]) == 0 then return -1 end
local status = redis.call('HGET', KEYS[1], 'status')
local now = tonumber(ARGV[1])
if not status then
  redis.call('HSET', KEYS[1], 'status', 'queued', 'asked', ARGV[1], 'done', 0, 'total', 0)
  same_ttl(KEYS[1], KEYS[2])
  return 1
end
if status == 'done' then return 0 end
local since = tonumber(redis.call('HGET', KEYS[1], 'lease') or
                       redis.call('HGET', KEYS[1], 'asked') or 0)
if since + tonumber(ARGV[2]) < now then
  redis.call('HSET', KEYS[1], 'asked', ARGV[1])
  if status == 'failed' then redis.call('HSET', KEYS[1], 'status', 'queued') end
  return 1
end
return 0
"""

# KEYS: analysis, game. ARGV: worker, now, lease_s. 1: computing is ours; 0: done (or
# the game is gone): acknowledge; -1: another worker's lease runs: leave it pending.
CLAIM = _SAME_TTL + """
if redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
local status = redis.call('HGET', KEYS[1], 'status')
if status == 'done' then return 0 end
local holder = redis.call('HGET', KEYS[1], 'worker')
local lease = tonumber(redis.call('HGET', KEYS[1], 'lease') or 0)
if holder and holder ~= ARGV[1] and lease > tonumber(ARGV[2]) then return -1 end
redis.call('HSET', KEYS[1], 'status', 'running', 'worker', ARGV[1],
           'lease', tonumber(ARGV[2]) + tonumber(ARGV[3]), 'done', 0)
redis.call('HINCRBY', KEYS[1], 'attempts', 1)
same_ttl(KEYS[1], KEYS[2])
return 1
"""

# KEYS: analysis. ARGV: worker, now, lease_s, done, total. 1: still ours.
RENEW = """
if redis.call('HGET', KEYS[1], 'worker') ~= ARGV[1] then return 0 end
if redis.call('HGET', KEYS[1], 'status') ~= 'running' then return 0 end
redis.call('HSET', KEYS[1], 'lease', tonumber(ARGV[2]) + tonumber(ARGV[3]),
           'done', ARGV[4], 'total', ARGV[5])
return 1
"""

# KEYS: analysis, game. ARGV: worker, status (done|failed), result or error, etag, now.
FINISH = _SAME_TTL + """
if redis.call('HGET', KEYS[1], 'worker') ~= ARGV[1] then return 0 end
if ARGV[2] == 'done' then
  redis.call('HSET', KEYS[1], 'status', 'done', 'result', ARGV[3], 'etag', ARGV[4],
             'finished', ARGV[5])
  redis.call('HDEL', KEYS[1], 'error')
else
  redis.call('HSET', KEYS[1], 'status', 'failed', 'error', ARGV[3], 'finished', ARGV[5])
end
redis.call('HDEL', KEYS[1], 'worker', 'lease')
same_ttl(KEYS[1], KEYS[2])
return 1
"""


class Lost(Exception):
    """The lease went to another worker (this one was paused past it): stop computing."""


class Analyses:
    """The queue, the lock and the stored analyses, over one ``Store``."""

    def __init__(self, store: Store, lease_s: float = 30.0) -> None:
        self.store = store
        self.r = store.r
        self.lease_s = float(lease_s)
        # a hash tag on a single Redis too (as the ladders' keys): one name everywhere
        self.stream = f"{store.keys.p}{{analysis}}:queue"
        self._ask = self.r.register_script(ASK)
        self._claim = self.r.register_script(CLAIM)
        self._renew = self.r.register_script(RENEW)
        self._finish = self.r.register_script(FINISH)

    # --- keys ------------------------------------------------------------------------------

    def key(self, game_id: str) -> str:
        return self.store.keys.game(game_id) + ":analysis"

    def bot_key(self, bot_id: str) -> str:
        return f"{self.store.keys.p}bot:{bot_id}:analysis"

    # --- asking ----------------------------------------------------------------------------

    def state(self, game_id: str) -> dict[str, str] | None:
        """The stored analysis hash (decoded), or None if nobody has asked for it."""
        raw = self.r.hgetall(self.key(game_id))
        if not raw:
            return None
        return {k.decode(): v.decode() for k, v in raw.items()}

    def ask(self, game_id: str) -> bool:
        """Queue ``game_id`` unless it is queued, running or done already; True if an entry
        was added. A request that finds its entry seemingly lost (asked, or last renewed,
        more than four leases ago: the process that asked died before ``XADD``, or every
        worker that held it is gone) adds another: a spare entry is harmless (``CLAIM``)."""
        added = self._ask(keys=[self.key(game_id), self.store.game_key(game_id)],
                          args=[repr(time.time()), 4 * self.lease_s])
        if int(added) == 1:
            self.r.xadd(self.stream, {"game": game_id}, maxlen=STREAM_MAX, approximate=True)
            return True
        return False

    def ensure_group(self) -> None:
        try:
            self.r.xgroup_create(self.stream, GROUP, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    # --- the worker's side -----------------------------------------------------------------

    def next_entry(self, consumer: str, block_ms: int) -> tuple[str, str] | None:
        """(entry id, game id): first an entry idle past the lease (its worker died or was
        paused: ``XAUTOCLAIM``), else a new one (``XREADGROUP``, waiting ``block_ms``)."""
        lease_ms = int(self.lease_s * 1000)
        got = self.r.xautoclaim(self.stream, GROUP, consumer, lease_ms, "0-0", count=1)
        entries = got[1] if got and len(got) > 1 else []
        entries = [e for e in entries if e and e[1]]  # an entry deleted meanwhile: no fields
        if not entries:
            read = self.r.xreadgroup(GROUP, consumer, {self.stream: ">"}, count=1,
                                     block=block_ms)
            entries = read[0][1] if read else []
        if not entries:
            return None
        entry_id, fields = entries[0]
        return _text(entry_id), _text(fields.get(b"game", fields.get("game", b"")))

    def settle(self, entry_id: str) -> None:
        """The entry is dealt with: acknowledged and deleted (the stream stays small)."""
        pipe = self.r.pipeline(transaction=False)
        pipe.xack(self.stream, GROUP, entry_id)
        pipe.xdel(self.stream, entry_id)
        pipe.execute()

    def forget_consumers(self, idle_s: float = 3600) -> int:
        """Drop the group's consumers that hold nothing and were last seen ``idle_s``
        ago: each worker process is a consumer of its own name, and the dead ones would
        pile up in the group for ever. One holding entries is kept: ``XAUTOCLAIM``
        moves them to a live worker first."""
        gone = 0
        for c in self.r.xinfo_consumers(self.stream, GROUP):
            if int(c.get("pending", 0)) == 0 and int(c.get("idle", 0)) > idle_s * 1000:
                self.r.xgroup_delconsumer(self.stream, GROUP, _text(c["name"]))
                gone += 1
        return gone

    def claim(self, game_id: str, worker: str) -> int:
        return int(self._claim(keys=[self.key(game_id), self.store.game_key(game_id)],
                               args=[worker, repr(time.time()), self.lease_s]))

    def renew(self, game_id: str, worker: str, done: int, total: int,
              entry_id: str | None = None, consumer: str | None = None) -> bool:
        """Extend the lease and store the progress; keep the stream entry ours (``XCLAIM``
        by its own consumer resets its idle time, so ``XAUTOCLAIM`` leaves it alone)."""
        ours = int(self._renew(keys=[self.key(game_id)],
                               args=[worker, repr(time.time()), self.lease_s, done, total]))
        if ours and entry_id and consumer:
            self.r.xclaim(self.stream, GROUP, consumer, 0, [entry_id], justid=True)
        return bool(ours)

    def finish(self, game_id: str, worker: str, result: dict[str, Any] | None,
               error: str = "") -> bool:
        """Store ``result`` (or the failure) if ``worker`` still holds the game."""
        if result is not None:
            text = json.dumps(result, separators=(",", ":"), sort_keys=False)
            etag = hashlib.sha256(text.encode()).hexdigest()[:16]
            args = [worker, DONE, text, etag, repr(time.time())]
        else:
            args = [worker, FAILED, error[:500], "", repr(time.time())]
        return bool(int(self._finish(
            keys=[self.key(game_id), self.store.game_key(game_id)], args=args)))

    def count_for_bots(self, game: Game, result: dict[str, Any]) -> None:
        """Add the game's per-seat figures to its bots' sums, once (``counted`` is set
        first, so a worker killed between the two loses a game's figures rather than
        counting them twice). A bot in two seats (a 4-player entrant) counts both."""
        if not self.r.hsetnx(self.key(game.id), "counted", 1):
            return
        for bot_id in {b for b in game.seats if b}:
            incr: dict[str, float] = {}
            for seat, bot in enumerate(game.seats):
                figures = (result.get("seats") or {}).get(str(seat))
                if bot != bot_id or not figures:
                    continue
                n = int(figures.get("decisions") or 0)
                incr["decisions"] = incr.get("decisions", 0) + n
                incr["loss"] = incr.get("loss", 0) + float(figures.get("average_loss") or 0) * n
                for mark in MARKS:
                    incr[mark] = incr.get(mark, 0) + int(figures.get(mark) or 0)
                for kind, k in (figures.get("by_kind") or {}).items():
                    kn = int(k.get("decisions") or 0)
                    incr[f"n:{kind}"] = incr.get(f"n:{kind}", 0) + kn
                    incr[f"loss:{kind}"] = (incr.get(f"loss:{kind}", 0)
                                            + float(k.get("average_loss") or 0) * kn)
            if not incr:
                continue
            key = self.bot_key(bot_id)
            ttl = self.r.pttl(self.store.keys.bot(bot_id))
            pipe = self.r.pipeline(transaction=False)
            pipe.hincrby(key, "games", 1)
            for field, value in incr.items():
                pipe.hincrbyfloat(key, field, value)
            if ttl and ttl > 0:
                pipe.pexpire(key, ttl)
            pipe.execute()

    def bot_averages(self, bot_id: str) -> dict[str, Any]:
        """A bot's average loss per decision over its analysed games, by decision kind."""
        raw = {_text(k): float(v) for k, v in self.r.hgetall(self.bot_key(bot_id)).items()}
        decisions = int(raw.get("decisions", 0))
        kinds = {}
        for field, n in raw.items():
            if field.startswith("n:") and n:
                kind = field[2:]
                kinds[kind] = {"decisions": int(n),
                               "average_loss": round(raw.get(f"loss:{kind}", 0) / n, 4)}
        return {
            "games": int(raw.get("games", 0)),
            "decisions": decisions,
            "average_loss": round(raw.get("loss", 0) / decisions, 4) if decisions else None,
            **{mark: int(raw.get(mark, 0)) for mark in MARKS},
            "by_kind": dict(sorted(kinds.items())),
        }


def auto_analyse(analyses: Analyses, ladder: bool) -> Callable[[Game], None]:
    """The after-finish hook (``Arena.on_finish``, tournament and ladder games): queue
    the game if its tournament was created with ``analyse`` (copied into each game's meta)
    or, with ``ARENA_LADDER_ANALYSE=1``, if it is a ladder's."""
    def hook(game: Game) -> None:
        if (game.meta.get("tournament") or {}).get("analyse") or (
                ladder and game.meta.get("ladder")):
            analyses.ask(game.id)
    return hook


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


# --- the worker process ----------------------------------------------------------------------


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

        def on_progress(done: int, total: int) -> None:
            progress["done"], progress["total"] = done, total
            if lost.is_set():
                raise Lost(game.id)

        heart = threading.Thread(target=beat, name="analysis-heartbeat", daemon=True)
        heart.start()
        try:
            result = self.analyser(game.players, game.meta["seed"], game.variants,
                                   game.actions, quality=self.quality, progress=on_progress)
        except Lost:
            log.info("analysis of %s taken over by another worker", game.id)
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
    """One worker process (``python -m service.arena.analyses --worker``)."""
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
    return [subprocess.Popen([sys.executable, "-m", "service.arena.analyses", "--worker"],
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
    parser = argparse.ArgumentParser(prog="python -m service.arena.analyses")
    parser.add_argument("--worker", action="store_true", help="be one worker")
    parser.add_argument("--workers", type=int, default=None,
                        help="supervise this many workers (default ARENA_ANALYSIS_WORKERS)")
    args = parser.parse_args(argv)
    if args.worker:
        return run_worker()
    return supervise(worker_count() if args.workers is None else args.workers)


if __name__ == "__main__":
    sys.exit(main())
