"""Prometheus metrics (``prometheus_client``), served at ``GET /metrics`` by
``service.http.metrics_route``.

Under gunicorn every worker is its own process with its own counters, so the client runs
in its **multiprocess mode**: each process writes its values to memory-mapped files in
``$PROMETHEUS_MULTIPROC_DIR`` and a scrape, answered by whichever worker gets it, sums the
files of all of them. ``service.http.gunicorn_conf`` makes that directory (or empties the one
the operator named) before any worker starts (``on_starting``), and marks a dead worker's
gauges dead (``child_exit``). Without the variable (the Flask test client, one process) the same
metrics live in the process's default registry.

Cheap on the request path by design: a request adds to plain Python tallies, which a
flusher writes to the metrics once a second (see ``flush``). Nothing here reads Redis per
request; the games-by-status gauge
is read from Redis when scraped (``GamesCollector``), which is once per scrape, not per
change.

Every name is documented in docs/operations.md ("Metrics"). ``/metrics`` is not part of the
bots' API contract (``openapi.yaml``): it is an operator's endpoint, in Prometheus' text
format, optionally behind ``ARENA_METRICS_TOKEN``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from bisect import bisect_left
from collections.abc import Iterator
from typing import Any, Protocol

from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from redis.exceptions import RedisError


class Scraped(Protocol):
    """What a scrape reads of the store (a ``service.storage.store.Store``; the storage layer
    imports this module, so only the shape is named here): its client and its key prefix."""

    r: Any
    p: str

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
# Request latencies: from well under a millisecond (a cached view) to a full long-poll.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                   2.5, 5.0, 10.0, 30.0)
# Wake-up latency: commit in one process to the listener of another hearing it.
WAKEUP_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
# Fan-out: a move's commit to its events' writes, fine around the tens of milliseconds
# that a spectator notices.
FANOUT_BUCKETS = (0.001, 0.002, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04,
                  0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 1.0, 2.5)
# The fan-out's stages, in the order a move passes them in a process (``observe_fanout``).
FANOUT_STAGES = ("heard", "woken", "known", "replayed", "first_write", "last_write")

REQUESTS = Counter("allfours_http_requests", "HTTP requests answered, by route (the URL "
                   "rule, not the raw path), method and status", ["route", "method", "status"])
LATENCY = Histogram("allfours_http_request_duration_seconds", "Time from the request to "
                    "its response (for a stream: to its first bytes), by route and method",
                    ["route", "method"], buckets=LATENCY_BUCKETS)
PROBLEMS = Counter("allfours_problems", "Problem (error) answers by problem type: "
                   "conflicts, illegal actions, validation, ...", ["type"])
ACTIONS = Counter("allfours_actions_applied", "Actions applied to games, by bots "
                  "(source=bot) or by the move clock (source=timeout)", ["source"])
TIMEOUTS = Counter("allfours_move_timeouts", "Default actions played because a seat's "
                   "move time ran out")
RATE_LIMITED = Counter("allfours_rate_limited", "Requests refused with 429 by the rate "
                       "limiter")
REDIS_ERRORS = Counter("allfours_redis_errors", "Redis failures: requests answered 503 "
                       "(request), pub/sub listeners that lost their connection (listener), "
                       "scrapes that could not count the games (scrape)", ["where"])
STORAGE_GUARD = Counter("allfours_storage_guard_refusals", "Creations by anonymous "
                        "visitors and new owners refused with 503 because Redis was above "
                        "ARENA_MEMORY_GUARD of its maxmemory")
LONG_POLLS = Gauge("allfours_open_long_polls", "Requests waiting for a turn or change "
                   "(/turn, /bots/me/turns, actions with ?wait)", multiprocess_mode="livesum")
STREAMS = Gauge("allfours_open_event_streams", "Open server-sent event streams "
                "(/games/{id}/events)", multiprocess_mode="livesum")
REFUSED = Counter("allfours_connections_refused", "Connections and requests refused at a "
                  "connection limit, by limit: worker (a worker at its connection cap), "
                  "client-share (one client's share of a worker's connections), held (the "
                  "held budget of streams and long-polls), held-network (a network's share "
                  "of it), spectators, streams-client, streams-bot, polls-client, polls-bot",
                  ["limit"])
WAITS_SKIPPED = Counter("allfours_action_waits_skipped", "Actions with ?wait served without "
                        "their wait: the held budget (held) or the network's share of it "
                        "(held-network) had no room", ["limit"])
WAKEUP = Histogram("allfours_wakeup_latency_seconds", "From a game change's commit to "
                   "a process's pub/sub listener hearing it", buckets=WAKEUP_BUCKETS)
FANOUT = Histogram("allfours_fanout_seconds", "From a move's commit to its events' write "
                   "to the last event stream a process writes them to itself (one "
                   "observation per move and process with streams of the game)",
                   buckets=FANOUT_BUCKETS)
FANOUT_STAGE = Histogram("allfours_fanout_stage_seconds", "From a move's commit to each "
                         "stage of its fan-out in a process: heard (the process has the "
                         "change), woken (the game's feed runs), known (its action: "
                         "from the message, or the action log read from Redis), replayed "
                         "(its events made), first_write and last_write "
                         "(to its event streams)", ["stage"], buckets=FANOUT_BUCKETS)
FANOUT_WRITE = Histogram("allfours_fanout_write_seconds", "A move's writes to a process's "
                         "event streams, first to last: their wall time (wall) and the CPU "
                         "the process used meanwhile (cpu); wall well above cpu is time "
                         "the process waited for a core or ran other requests",
                         ["kind"], buckets=FANOUT_BUCKETS)

# --- the request path: tallies in plain Python, written to the metrics every second ------
#
# A prometheus_client value in multiprocess mode is a locked write to a memory-mapped file:
# a counter increment and a histogram observation cost some 7 us a request. The request
# path instead adds to plain counters here (a dict lookup and a few additions), and
# ``flush`` moves the sums into the real metrics: once a second (``start_flusher``), when
# this process answers a scrape, and when a worker exits. A scrape may therefore miss up
# to a second of another worker's requests. Under gevent nothing preempts a greenlet
# between these additions; under real threads (the development server) an increment can
# rarely be lost to a race, which a metric tolerates.

# seconds between flushes; a benchmark that stretches time (valgrind) may raise it
FLUSH_S = float(os.environ.get("ARENA_METRICS_FLUSH_S") or 1.0)


class _Tally:
    """Increments of one counter child not yet written to it."""

    __slots__ = ("child", "n")

    def __init__(self, child: Any) -> None:
        self.child = child
        self.n = 0.0


class _Observations:
    """Observations of one histogram child not yet written to it."""

    __slots__ = ("bounds", "child", "counts", "total")

    def __init__(self, child: Any, bounds: tuple[float, ...]) -> None:
        self.child = child
        self.bounds = bounds  # the finite upper bounds; one more count for +Inf
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value

    def flush(self) -> None:
        if not any(self.counts):
            return
        counts, self.counts = self.counts, [0] * len(self.counts)
        total, self.total = self.total, 0.0
        # a histogram child's own values (prometheus_client keeps one per bucket and the
        # sum): the one way to add many observations at once
        for value, n in zip(self.child._buckets, counts):
            if n:
                value.inc(n)
        self.child._sum.inc(total)


class _Live:
    """Requests open now in this process (written to the live gauges on each flush)."""

    __slots__ = ("polls", "streams")

    def __init__(self) -> None:
        self.polls = 0
        self.streams = 0


LIVE = _Live()
_requests: dict[tuple[str, str, int], tuple[_Tally, _Observations]] = {}
_problems: dict[str, _Tally] = {}
_refused: dict[str, _Tally] = {}
_skipped: dict[str, _Tally] = {}
_actions = _Tally(ACTIONS.labels("bot"))
_wakeups = _Observations(WAKEUP, WAKEUP_BUCKETS)
_fanout = _Observations(FANOUT, FANOUT_BUCKETS)
_fanout_stages = {stage: _Observations(FANOUT_STAGE.labels(stage), FANOUT_BUCKETS)
                  for stage in FANOUT_STAGES}
_fanout_write = {kind: _Observations(FANOUT_WRITE.labels(kind), FANOUT_BUCKETS)
                 for kind in ("wall", "cpu")}
ACTION_BY_CLOCK = ACTIONS.labels("timeout")


def observe_request(route: str, method: str, status: int, seconds: float) -> None:
    """Count one answered request and its latency."""
    key = (route, method, status)
    pair = _requests.get(key)
    if pair is None:
        pair = _requests[key] = (_Tally(REQUESTS.labels(route, method, str(status))),
                                 _Observations(LATENCY.labels(route, method),
                                               LATENCY_BUCKETS))
    pair[0].n += 1
    pair[1].observe(seconds)


def count_problem(kind: str) -> None:
    tally = _problems.get(kind)
    if tally is None:
        tally = _problems[kind] = _Tally(PROBLEMS.labels(kind))
    tally.n += 1


def connection_refused(limit: str) -> None:
    """Count one connection or request refused at ``limit`` (``REFUSED``'s label): the
    refusals at the socket never reach the app, so its request counts miss them."""
    tally = _refused.get(limit)
    if tally is None:
        tally = _refused[limit] = _Tally(REFUSED.labels(limit))
    tally.n += 1


def wait_skipped(limit: str) -> None:
    """Count one action served without its ``?wait`` at ``limit``."""
    tally = _skipped.get(limit)
    if tally is None:
        tally = _skipped[limit] = _Tally(WAITS_SKIPPED.labels(limit))
    tally.n += 1


def action_applied() -> None:
    _actions.n += 1


def observe_wakeup(committed_at: float) -> None:
    """A listener heard a change committed at ``committed_at`` (unix seconds)."""
    _wakeups.observe(max(0.0, time.time() - committed_at))


def observe_fanout(committed_at: float, stages: dict[str, float]) -> None:
    """A move committed at ``committed_at`` reached this process's streams: ``stages``
    maps each of ``FANOUT_STAGES`` it passed to when (unix seconds); ``last_write`` is
    the fan-out's own figure. Where the time goes is the difference of two stages;
    ``write_cpu`` (seconds) the CPU the process used from the first write to the last."""
    for stage, at in stages.items():
        seen = _fanout_stages.get(stage)
        if seen is not None:
            seen.observe(max(0.0, at - committed_at))
    last = stages.get("last_write")
    if last is not None:
        _fanout.observe(max(0.0, last - committed_at))
        _fanout_write["wall"].observe(max(0.0, last - stages["first_write"]))
        _fanout_write["cpu"].observe(stages.get("write_cpu", 0.0))


_flush_lock = threading.Lock()


def flush() -> None:
    """Write this process's tallies to its metrics (see above)."""
    with _flush_lock:
        tallies = [_actions, *_problems.values(), *_refused.values(), *_skipped.values()]
        observations = [_wakeups, _fanout, *_fanout_stages.values(),
                        *_fanout_write.values()]
        for tally, seen in list(_requests.values()):
            tallies.append(tally)
            observations.append(seen)
        for tally in tallies:
            n, tally.n = tally.n, 0.0
            if n:
                tally.child.inc(n)
        for seen in observations:
            seen.flush()
        LONG_POLLS.set(LIVE.polls)
        STREAMS.set(LIVE.streams)


_flusher_pid: list[int] = []


def start_flusher() -> None:
    """Flush every ``FLUSH_S`` seconds in this process (a greenlet under gevent)."""
    if _flusher_pid and _flusher_pid[0] == os.getpid():
        return
    _flusher_pid[:] = [os.getpid()]

    def run() -> None:
        while True:
            time.sleep(FLUSH_S)
            try:
                flush()
            except Exception:  # a full disk, say: the metrics wait, requests do not
                logging.getLogger(__name__).warning("metrics flush failed", exc_info=True)

    threading.Thread(target=run, name="allfours-metrics", daemon=True).start()


class GamesCollector:
    """``allfours_games{status}``: the size of each status index, read at scrape time."""

    STATUSES = ("waiting", "active", "finished")

    def __init__(self, store: Scraped) -> None:
        self.store = store

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily("allfours_games", "Games by status", labels=["status"])
        pipe = self.store.r.pipeline(transaction=False)
        for status in self.STATUSES:
            pipe.zcard(f"{self.store.p}games:{status}")
        try:
            counts = pipe.execute()
        except RedisError:  # Redis down: the other metrics matter most now; omit this one
            REDIS_ERRORS.labels("scrape").inc()
            return
        for status, count in zip(self.STATUSES, counts):
            family.add_metric([status], count)
        yield family


def read_memory(r: Any) -> tuple[int, int]:
    """``INFO memory`` now: (used_memory, maxmemory; 0: no cap), the fullest node's in a
    cluster (the one whose writes fail first)."""
    info = r.info("memory")
    nodes = list(info.values()) if info and all(isinstance(v, dict)
                                                 for v in info.values()) else [info]
    best = (0, 0)
    for node in nodes:
        used, cap = int(node.get("used_memory", 0)), int(node.get("maxmemory", 0))
        if cap and (not best[1] or used / cap > best[0] / best[1]):
            best = (used, cap)
        elif not best[1]:
            best = (max(best[0], used), 0)
    return best


class MemoryCollector:
    """Redis' memory at scrape time: ``allfours_redis_used_memory_bytes``,
    ``allfours_redis_maxmemory_bytes`` (0: no cap) and ``allfours_redis_memory_alarm``,
    1 from ``alarm`` (``ARENA_MEMORY_ALARM``) of the cap on: the warning well before the
    cap, where every write would fail (docs/operations.md)."""

    def __init__(self, store: Scraped, alarm: float) -> None:
        self.store = store
        self.alarm = alarm

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            used, cap = read_memory(self.store.r)
        except RedisError:
            REDIS_ERRORS.labels("scrape").inc()
            return
        yield GaugeMetricFamily("allfours_redis_used_memory_bytes", "Redis used_memory "
                                "(the fullest node's in a cluster)", value=used)
        yield GaugeMetricFamily("allfours_redis_maxmemory_bytes", "Redis maxmemory (0: no "
                                "cap)", value=cap)
        alarm = 1 if cap and self.alarm and used >= self.alarm * cap else 0
        yield GaugeMetricFamily("allfours_redis_memory_alarm", "1 when Redis uses "
                                "ARENA_MEMORY_ALARM of its maxmemory or more", value=alarm)


class HouseCollector:
    """``allfours_house_decisions_total{strategy, reason}``: the search bot's decisions in
    the house process, searched (``search``) or played by the heuristic past a budget
    (``heuristic`` with ``game``, ``owner`` or ``load``); the house process adds its
    counts to ``{p}house:decisions`` every beat (``service.arena.accounts.house``)."""

    def __init__(self, store: Scraped) -> None:
        self.store = store

    def collect(self) -> Iterator[CounterMetricFamily]:
        try:
            raw = self.store.r.hgetall(f"{self.store.p}house:decisions")
        except RedisError:
            REDIS_ERRORS.labels("scrape").inc()
            return
        family = CounterMetricFamily(
            "allfours_house_decisions", "The house search bot's decisions: searched, or "
            "played by the heuristic past its CPU budget (reason: game, owner, load)",
            labels=["strategy", "reason"])
        for field, n in sorted(raw.items()):
            strategy, _, reason = field.decode().partition(":")
            family.add_metric([strategy, reason], int(n))
        yield family


def exposition(store: Scraped, memory_alarm: float = 0.7) -> bytes:
    """The text a scrape gets: every process's metrics (or this one's), then the games and
    Redis' memory."""
    if os.environ.get(MULTIPROC_ENV):
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    else:
        registry = REGISTRY
    flush()
    games = CollectorRegistry()
    games.register(GamesCollector(store))  # type: ignore[arg-type]
    games.register(MemoryCollector(store, memory_alarm))  # type: ignore[arg-type]
    games.register(HouseCollector(store))  # type: ignore[arg-type]
    return generate_latest(registry) + generate_latest(games)
