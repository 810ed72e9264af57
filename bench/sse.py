"""Server-sent spectating at scale: one game watched by many spectators while bots play.

    python bench/sse.py [--spectators 1000] [--addresses 125] [--tables 4] [--think 0.1]
                        [--seconds 15] [--workers 2] [--worker-connections N]
                        [--base REV | --no-base] [--head REV] [--gc-pauses]
    python bench/sse.py --spectators 5000 --workers 4 --worker-connections 4000 --no-base

For each version of the code under test — a copy of ``--base`` (default ``main``: the
code before this bench's changes, extracted with ``git archive`` into a temporary
directory, the compiled engine copied in) and this checkout — in the same run, on the same
machine, one after the other:

1. Its own ``redis-server`` (free port, no persistence; the shared 6379 is never touched)
   and the service under gunicorn as deployed (``service.cli.serve.gunicorn_command``, gevent
   workers, ``--workers``), with that code first on ``PYTHONPATH``.
2. **Without spectators**: ``--tables`` two-player tables, each seat a bot (a thread of a
   separate process, one keep-alive connection each) that waits for its turn with the
   long-poll, thinks ``--think`` seconds and posts a random legal action; for
   ``--seconds``. Measured: each action POST's latency, actions, and the gunicorn workers'
   CPU (utime + stime from ``/proc/<pid>/stat``).
3. **With spectators**: a new game at table 0 (the watched one) gets ``--spectators``
   event streams (``GET /games/{id}/events``, opened 100 at a time before its first move),
   then the bots play it to the end while the other tables play on. The spectators come
   from ``--addresses`` loopback addresses (127.100.0.1, 127.100.1.1, ...: each a /24 of
   its own, as a final's viewers come from many networks; 1,000 from 125 is 8 each), with
   the per-client and per-network connection caps as deployed, so every refusal counts
   (``--addresses 0``: all from 127.0.0.1, those caps lifted). The spectators are
   plain asyncio connections spread over ``--client-procs`` processes (default 2), on
   uvloop when it is installed (``pip install -e '.[bench]'``), each a ``Protocol`` that
   only looks at the event ids of what arrives: an HTTP client library's parsing would
   make the client, not the service, the bottleneck on 2 cores (the client's CPU per move
   is reported, ``client_cpu_ms_per_move``). Measured: for each move of the watched game,
   the time from its commit (``updated_at`` of the action's answer: the service's clock, this
   machine's) to its first event's arrival at each spectator — the first, the median and
   the **last** spectator per move, p50/p99 over moves; **cuts** (a stream that ended
   before ``game_over``), **non-200** answers (spectators and bots), events missing or
   duplicated against the full game; the bots' action p99 (to compare with step 2); and
   **worker CPU per spectator per move**: the workers' CPU during the watched game, minus
   what the same number of moves cost in step 2, over (watched moves x spectators).
   **The service's own figure** (``server_fanout_ms``, from ``/metrics`` scraped before
   and after the watched game): ``allfours_fanout_seconds``, each move's commit to its
   last write in each worker, p50/p99 as bucket upper bounds; ``server_stages_ms`` the
   same up to each stage (heard, woken, known, replayed, first and last write), and
   ``server_writes_ms`` the writes' wall and CPU time: where the time goes.
   ``healthz_during``: ``GET /healthz`` every 50 ms meanwhile.
4. **Why players slow down** (both phases): ``contention_*`` gives each party's CPU per
   second (the workers, Redis, the bots, the spectator clients, and ``other``: what the
   rest of the machine used meanwhile, from ``/proc/stat``) and the milliseconds per
   second its threads spent runnable but waiting for a core (``schedstat``);
   ``action_split_ms_*`` splits each action's latency at its commit: request -> commit
   (the service's queueing and work) and commit -> answer received (the answer's write
   and the bot's wake-up). With ``--gc-pauses`` (``bench/gcprobe``), the workers'
   garbage collections per phase: a gevent worker serves nobody while it collects.

One JSON line per code version (``"code": "base"`` / ``"head"``), then a summary line with
the targets. The machine is shared: the load average is printed with each.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as ``python bench/sse.py``, this file's directory comes first on sys.path, where
# bench/http.py would shadow the standard library's ``http`` package: drop it.
_HERE = Path(__file__).resolve().parent
ROOT = _HERE.parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(ROOT))

import argparse  # noqa: E402
import asyncio  # noqa: E402
import contextlib  # noqa: E402
import functools  # noqa: E402
import http.client  # noqa: E402
import json  # noqa: E402
import multiprocessing as mp  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import tarfile  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from collections.abc import Collection  # noqa: E402
from typing import Any  # noqa: E402

from bench import harness  # noqa: E402
from bench.harness import (  # noqa: E402
    HOST,
    box_busy_s,
    children,
    cpu_seconds,
    own_cpu,
    request,
    runqueue_s,
    start_redis,
    stop,
    thread_runqueue_s,
)
from service.http.connections import DEFAULTS  # noqa: E402

TARGETS = {"last_p99_ms_max": 100, "server_fanout_p99_ms_max": 50, "cuts_max": 0,
           "non_200_max": 0, "cpu_us_per_spectator_move_max": 20,
           "action_p99_ratio_max": 1.5}
ID_RE = re.compile(rb"id: (\d+)\.(\d+)\n")
pct = functools.partial(harness.pct, digits=3)


# --- the code under test ---------------------------------------------------------------------


def base_copy(rev: str, into: Path) -> Path:
    """``rev``'s tree in ``into``, with this checkout's compiled modules (the engine is the
    same; without them it would run uncompiled and the comparison would be unfair)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True,
                             capture_output=True).stdout
    tar = into / "base.tar"
    tar.write_bytes(archive)
    with tarfile.open(tar) as t:
        t.extractall(into / "code", filter="data")
    for so in ROOT.rglob("*.so"):
        rel = so.relative_to(ROOT)
        if rel.parts[0] in (".venv", "build"):
            continue
        (into / "code" / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(so, into / "code" / rel)
    return into / "code"


def start_service(code: Path, redis_port: int, workers: int, log: Path,
                  gc_log: Path | None = None, caps: bool = False,
                  worker_connections: int = 0) -> tuple[subprocess.Popen[bytes], int]:
    """The service; with ``caps`` the per-client and per-network connection caps as
    deployed (``service.http.connections.DEFAULTS``: spectators from many addresses must
    all be admitted), else lifted as for any one-address load (``harness.ONE_ADDRESS_LOAD``).
    ``worker_connections``: each worker's connection cap, when not the deployed one."""
    probe = {} if gc_log is None else harness.gc_probe(gc_log, code)
    limits = {k: str(DEFAULTS[k]) for k in harness.ONE_ADDRESS_LOAD} if caps else {}
    if worker_connections:
        limits["ARENA_WORKER_CONNECTIONS"] = str(worker_connections)
    return harness.start_service(redis_port, workers, log, {
        "ARENA_KEY_PREFIX": "ssebench:", "ARENA_RATE_LIMIT": "0", "ARENA_ACCESS_LOG": "0",
        "ARENA_LOG_LEVEL": "warning", **limits, **probe}, code)


def source_addresses(n: int) -> list[str | None]:
    """``n`` loopback source addresses for the spectators, each in a /24 of its own (the
    held budget's per-network share counts a /24 once: a final's viewers come from many
    networks); ``[None]`` (the kernel's choice, 127.0.0.1) when ``n`` is 0."""
    if n <= 0:
        return [None]
    return [f"127.{100 + i // 256}.{i % 256}.1" for i in range(n)]


# --- bots (a process of their own) -----------------------------------------------------------


def new_game(port: int, bots: list[dict[str, Any]], seed: int) -> str:
    status, game = request(port, "POST", "/games",
                           {"players": 2, "seats": [b["id"] for b in bots], "seed": seed},
                           bots[0]["token"])
    assert status == 201, (status, game)
    return game["id"]


def outcome() -> dict[str, Any]:
    """What a group of seats measured: each action's latency, split at its commit (the
    view's ``updated_at``, the service's clock, which is this machine's): from the
    request to the commit (``to_commit``: the service's queueing and work) and from the
    commit to the answer's arrival (``from_commit``: the answer's write and this
    client's wake-up, which a busy box delays)."""
    return {"latencies": [], "to_commit": [], "from_commit": [], "moves": 0, "non_200": [],
            "errors": [], "commits": {}, "runqueue": []}


def seat_loop(port: int, table: dict[str, Any], seat: int, think: float, ctl: dict[str, float],
              out: dict[str, Any], watched: bool, rng: random.Random) -> None:
    """One seat: wait for the turn, think, act; a finished game starts the next one at an
    unwatched table (seat 0 creates it). A failed request (a refused or cut connection)
    is counted in ``errors`` and the seat carries on with a new connection."""
    queued0 = thread_runqueue_s()
    try:
        seat_moves(port, table, seat, think, ctl, out, watched, rng)
    finally:
        out["runqueue"].append(thread_runqueue_s() - queued0)


def seat_moves(port: int, table: dict[str, Any], seat: int, think: float,
               ctl: dict[str, float], out: dict[str, Any], watched: bool, rng: random.Random
               ) -> None:
    bot = table["bots"][seat]
    conn = http.client.HTTPConnection(HOST, port, timeout=30)
    while time.time() < ctl["stop_at"]:
        game_id = table["game"]
        try:
            status, answer = request(port, "GET",
                                     f"/games/{game_id}/turn?timeout=2&seat={seat}",
                                     token=bot["token"], conn=conn)
            if status != 200:
                out["non_200"].append(status)
                conn.close()
                continue
            view = answer["view"]
            if view["status"] == "finished":
                if watched:
                    return
                if seat == 0 and table["game"] == game_id:
                    table["game"] = new_game(port, table["bots"], rng.randrange(10**6))
                else:
                    time.sleep(0.02)
                continue
            if not view["your_turn"]:
                continue
            time.sleep(think)
            sent, sent_wall = time.perf_counter(), time.time()
            status, after = request(port, "POST", f"/games/{game_id}/actions",
                                    {"action": rng.choice(view["legal_actions"]),
                                     "version": view["version"]}, bot["token"], conn=conn)
            took, answered = time.perf_counter() - sent, time.time()
        except (OSError, http.client.HTTPException) as exc:
            out["errors"].append(repr(exc))
            conn.close()
            time.sleep(0.1)
            continue
        if status != 200:
            out["non_200"].append(status)
            continue
        out["latencies"].append(took)
        out["moves"] += 1
        commit = after.get("updated_at")
        if commit is not None:
            out["to_commit"].append(commit - sent_wall)
            out["from_commit"].append(answered - commit)
        if watched:
            out["commits"][(game_id, after["version"] - 1)] = commit  # ply -> commit
    conn.close()


def bots_process(port: int, tables: list[dict[str, Any]], think: float, seconds: float,
                 watched: Collection[int], results: Any) -> None:
    """Every seat of every table a thread; the ``watched`` tables played to the end of
    their game, the others until those end (or for ``seconds`` when none is watched).
    Also reports this process's CPU and run-queue wait (``runqueue_s``)."""
    out, watched_out = outcome(), outcome()
    ctl = {"stop_at": time.time() + seconds}
    cpu0 = own_cpu()
    threads = []
    for t, table in enumerate(tables):
        for seat in range(2):
            is_watched = t in watched
            th = threading.Thread(target=seat_loop, daemon=True, args=(
                port, table, seat, think, ctl, watched_out if is_watched else out,
                is_watched, random.Random(1000 * t + seat)))
            th.start()
            threads.append((th, is_watched))
    if watched:
        for th, is_watched in threads:
            if is_watched:
                th.join(seconds + 30)
        ctl["stop_at"] = 0  # the others stop with the watched games
    for th, _ in threads:
        th.join(40)
    results.put({"others": out, "watched": watched_out, "cpu": own_cpu() - cpu0,
                 "runqueue": sum(out["runqueue"]) + sum(watched_out["runqueue"])})


def play(port: int, tables: list[dict[str, Any]], think: float, seconds: float,
         watched: Collection[int] = ()) -> dict[str, Any]:
    ctx = mp.get_context("fork")
    results = ctx.Queue()
    proc = ctx.Process(target=bots_process, args=(port, tables, think, seconds, watched,
                                                  results), daemon=True)
    proc.start()
    out = results.get(timeout=seconds + 120)
    proc.join(10)
    return out


# --- spectators (asyncio, in this process) ---------------------------------------------------


class Spectator(asyncio.Protocol):
    """One event stream; it looks only at the first and last event id of what arrives
    (the service writes a move's events in one piece) and counts the others."""

    def __init__(self, request: bytes, arrivals: dict[int, list[float]]) -> None:
        self.request = request
        self.arrivals = arrivals
        self.status = 0
        self.head = b""
        self.last = (-1, -1)
        self.events = 0
        self.duplicates = 0
        self.over = False
        self.closed = False
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        now = time.time()
        if not self.status:
            self.head += data
            if b"\r\n" not in self.head:
                return
            self.status = int(self.head.split(b" ", 2)[1])
            data, self.head = self.head, b""
        count = data.count(b"id: ")
        if not count:
            return
        first = ID_RE.search(data)
        if first is None:
            return
        key = (int(first.group(1)), int(first.group(2)))
        if key <= self.last:
            self.duplicates += count
            return
        if key[0] > self.last[0]:
            self.arrivals.setdefault(key[0], []).append(now)
        if count > 1:
            at = data.rfind(b"id: ")
            m = ID_RE.match(data, at)
            if m is not None:
                key = (int(m.group(1)), int(m.group(2)))
        self.last = key
        self.events += count
        if b"event: game_over" in data:
            self.over = True

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True


async def spectate(port: int, game_id: str, n: int, ready: Any, go: Any,
                   seconds: float, addresses: list[str | None]) -> dict[str, Any]:
    """``n`` spectators, the i-th from ``addresses[i % len(addresses)]``."""
    loop = asyncio.get_running_loop()
    arrivals: dict[int, list[float]] = {}
    req = (f"GET /games/{game_id}/events HTTP/1.1\r\nHost: {HOST}\r\n"
           "Accept: text/event-stream\r\n\r\n").encode()
    specs: list[Spectator] = []
    for start in range(0, n, 100):
        batch = [Spectator(req, arrivals) for _ in range(start, min(n, start + 100))]
        sources = [addresses[i % len(addresses)] for i in range(start, start + len(batch))]
        await asyncio.gather(*(loop.create_connection(
            lambda s=s: s, HOST, port, local_addr=None if a is None else (a, 0))
            for s, a in zip(batch, sources)), return_exceptions=True)
        specs += batch
        await asyncio.sleep(0.05)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not all(s.events or s.closed or s.status not in
                                                  (0, 200) for s in specs):
        await asyncio.sleep(0.05)
    ready.put(len(specs))
    await loop.run_in_executor(None, go.wait, 60)
    cpu0, queued0 = own_cpu(), runqueue_s(os.getpid())
    deadline = time.monotonic() + seconds + 60
    while time.monotonic() < deadline and not all(s.over or s.closed for s in specs):
        await asyncio.sleep(0.1)
    cpu, queued = own_cpu() - cpu0, runqueue_s(os.getpid()) - queued0
    for s in specs:
        if s.transport is not None:
            s.transport.close()
    return {"arrivals": arrivals, "cpu": cpu, "runqueue": queued,
            "status": [s.status for s in specs], "over": [s.over for s in specs],
            "events": [s.events for s in specs], "duplicates": sum(s.duplicates for s in specs)}


def spectators_process(port: int, game_id: str, n: int, ready: Any, go: Any, seconds: float,
                       addresses: list[str | None], results: Any) -> None:
    """A share of the spectators, on uvloop when it is installed (the bench note in
    pyproject.toml): the client shares the 2 cores with the service, and asyncio's own
    loop spends about 28 us per stream per move (``client_cpu_ms_per_move``)."""
    results.put(run_client(spectate(port, game_id, n, ready, go, seconds, addresses)))


def run_client(coro: Any) -> Any:
    """Run a load client's coroutine on uvloop when it is installed, else asyncio's loop
    (``client_loop`` says which)."""
    try:
        import uvloop

        run: Any = uvloop.run
    except ImportError:
        run = asyncio.run
    return run(coro)


def client_loop() -> str:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return "asyncio"
    return "uvloop"


class Spectated:
    """The spectators' outcome, merged over the client processes."""

    def __init__(self, parts: list[dict[str, Any]]) -> None:
        self.arrivals: dict[int, list[float]] = {}
        self.status: list[int] = []
        self.over: list[bool] = []
        self.events: list[int] = []
        self.duplicates = 0
        self.cpu = sum(p["cpu"] for p in parts)
        self.runqueue = sum(p["runqueue"] for p in parts)
        for p in parts:
            for ply, times in p["arrivals"].items():
                self.arrivals.setdefault(ply, []).extend(times)
            self.status += p["status"]
            self.over += p["over"]
            self.events += p["events"]
            self.duplicates += p["duplicates"]


def spectated_phase(port: int, tables: list[dict[str, Any]], n: int, procs: int,
                    think: float, seconds: float, parties: dict[str, list[int]],
                    addresses: list[str | None]) -> dict[str, Any]:
    ctx = mp.get_context("fork")
    ready, results, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    shares = [n // procs + (1 if i < n % procs else 0) for i in range(procs)]
    # each process its own addresses, so that every address has the same number of streams
    clients = [ctx.Process(target=spectators_process, daemon=True,
                           args=(port, tables[0]["game"], k, ready, go, seconds,
                                 addresses[i::procs] or addresses, results))
               for i, k in enumerate(shares) if k]
    for c in clients:
        c.start()
    for _ in clients:
        ready.get(timeout=120)
    time.sleep(1.0)  # the backlog delivered
    before, played_at = usage(parties), time.time()
    scraped = scrape(port)
    probes = HealthProbe(port)
    t0 = time.monotonic()
    go.set()
    result = play(port, tables, think, seconds, {0})
    elapsed = time.monotonic() - t0
    used = usage(parties, before)
    probed = probes.stop()
    time.sleep(2 * 1.0 + 0.5)  # every worker's metrics flushed (``service.metrics.FLUSH_S``)
    server = fanout_figures(scraped, scrape(port))
    parts = [results.get(timeout=seconds + 120) for _ in clients]
    for c in clients:
        c.join(10)
    return {"result": result, "seen": Spectated(parts), "cpu": used["gunicorn"][0],
            "used": used, "elapsed": elapsed, "played_at": played_at, "server": server,
            "healthz": probed}


# --- the server's own figures --------------------------------------------------------------

BUCKET_RE = re.compile(r'^(allfours_fanout(?:_stage|_write)?_seconds)_bucket\{([^}]*)\} (\S+)$')


def scrape(port: int) -> dict[tuple[str, str], dict[float, float]]:
    """The fan-out histograms of ``/metrics`` (every worker's, summed): (metric, stage) ->
    {upper bound: cumulative count}. Empty for a version of the service without them."""
    conn = http.client.HTTPConnection(HOST, port, timeout=30)
    try:
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
    finally:
        conn.close()
    out: dict[tuple[str, str], dict[float, float]] = {}
    for line in text.splitlines():
        m = BUCKET_RE.match(line)
        if m is None:
            continue
        labels = dict(kv.split("=", 1) for kv in m.group(2).split(","))
        le = labels["le"].strip('"')
        stage = labels.get("stage", labels.get("kind", '""')).strip('"')
        out.setdefault((m.group(1), stage), {})[float(le)] = float(m.group(3))
    return out


def bucket_quantile(counts: dict[float, float], q: float) -> float | None:
    """The upper bound (ms) of the bucket holding the ``q`` quantile: a histogram's
    quantile is known to its bucket, and the upper bound never flatters."""
    total = counts.get(float("inf"), 0.0)
    if total <= 0:
        return None
    for bound in sorted(counts):
        if counts[bound] >= q * total:
            return round(bound * 1000, 1)
    return None


def fanout_figures(before: dict[tuple[str, str], dict[float, float]],
                   after: dict[tuple[str, str], dict[float, float]]) -> dict[str, Any]:
    """The watched game's fan-out as the service measured it (``allfours_fanout_seconds``,
    its stages and its writes' wall and CPU time, between two scrapes): observations (a
    move in a worker with streams of it) and p50/p99 in ms, as bucket upper bounds; None
    from a service without them."""
    if not after:
        return {"server_fanout_ms": None, "server_stages_ms": None, "server_writes_ms": None}
    figures: dict[str, Any] = {}
    for (metric, stage), counts in after.items():
        old = before.get((metric, stage), {})
        diff = {b: c - old.get(b, 0.0) for b, c in counts.items()}
        figures[stage or "fanout"] = {"n": int(diff.get(float("inf"), 0)),
                                      "p50": bucket_quantile(diff, 0.5),
                                      "p99": bucket_quantile(diff, 0.99)}
    fanout = figures.pop("fanout", None)
    order = ("heard", "woken", "known", "replayed", "first_write", "last_write")
    return {"server_fanout_ms": fanout,
            "server_stages_ms": {k: figures[k] for k in order if k in figures},
            "server_writes_ms": {k: figures[k] for k in ("wall", "cpu") if k in figures}
            or None}


class HealthProbe:
    """``GET /healthz`` every 50 ms on a connection of its own while the watched game is
    played: spectators must not starve the probes."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.times: list[float] = []
        self.failures = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.done.wait(0.05):
            t0 = time.perf_counter()
            try:
                status, _ = request(self.port, "GET", "/healthz", timeout=5)
            except (OSError, http.client.HTTPException):
                status = 0
            if status == 200:
                self.times.append((time.perf_counter() - t0) * 1000)
            else:
                self.failures += 1

    def stop(self) -> dict[str, Any]:
        self.done.set()
        self.thread.join(10)
        return {"n": len(self.times), "failures": self.failures,
                "p50_ms": pct(self.times, 0.5), "p99_ms": pct(self.times, 0.99)}


def usage(parties: dict[str, list[int]], since: dict[str, tuple[float, float]] | None = None
          ) -> dict[str, tuple[float, float]]:
    """(CPU seconds, run-queue seconds) of each party's processes, since ``since``."""
    now = {name: (sum(cpu_seconds(p) for p in pids), sum(runqueue_s(p) for p in pids))
           for name, pids in parties.items()}
    now["box"] = (box_busy_s(), 0.0)
    if since is None:
        return now
    return {name: (c - since[name][0], q - since[name][1]) for name, (c, q) in now.items()}


def contention(used: dict[str, tuple[float, float]], bots: dict[str, Any], seconds: float,
               clients: tuple[float, float] | None = None) -> dict[str, Any]:
    """Each party's share of the box during a phase: CPU seconds per second (2.0 is both
    cores) and milliseconds per second spent runnable but waiting for a core; ``other``
    is the CPU the rest of the machine used meanwhile (another job on a shared box)."""
    figures = {**used, "bots": (bots["cpu"], bots["runqueue"])}
    if clients is not None:
        figures["spectator_clients"] = clients
    box = figures.pop("box")[0]
    figures["other"] = (box - sum(c for c, _ in figures.values()), 0.0)
    seconds = max(seconds, 1e-9)
    return {name: {"cpu_per_s": round(c / seconds, 3), "runqueue_ms_per_s": round(
        q * 1000 / seconds, 1)} for name, (c, q) in figures.items()}


def split_ms(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Where an action's time went (``outcome``): p50/p99 in ms of the whole, of request
    to commit and of commit to answer received."""
    out = {}
    for key in ("latencies", "to_commit", "from_commit"):
        values = [x * 1000 for r in runs for x in r[key]]
        out[key] = {"p50": pct(values, 0.5), "p99": pct(values, 0.99)}
    return out


def measure(code: Path, name: str, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    redis_proc, redis_port = start_redis(tmp, maxclients=20000)
    gunicorn = None
    try:
        gc_log = tmp / "gc" if args.gc_pauses else None
        gunicorn, port = start_service(code, redis_port, args.workers, tmp / f"{name}.log",
                                       gc_log, caps=args.addresses > 0,
                                       worker_connections=args.worker_connections)
        time.sleep(1.0)
        workers = children(gunicorn.pid)
        parties = {"gunicorn": workers, "redis": [redis_proc.pid]}
        tables = []
        for t in range(args.tables):
            bots = []
            for i in range(2):  # one owner's two bots: seated at once (issue 23)
                status, bot = request(port, "POST", "/bots", {"name": f"sse{t}{i}"},
                                      bots[0]["token"] if bots else None)
                assert status == 201, (status, bot)
                bots.append(bot)
            tables.append({"bots": bots, "game": new_game(port, bots, 100 + t)})
        load_before = os.getloadavg()

        # without spectators
        before, quiet_at = usage(parties), time.time()
        quiet_run = play(port, tables, args.think, args.seconds)
        quiet_until = time.time()
        quiet = quiet_run["others"]
        quiet_used = usage(parties, before)
        quiet_cpu = quiet_used["gunicorn"][0]
        cpu_per_move = quiet_cpu / max(1, quiet["moves"])

        # with spectators on a new game at table 0
        tables[0]["game"] = new_game(port, tables[0]["bots"], 7)
        seen = spectated_phase(port, tables, args.spectators, args.client_procs, args.think,
                               args.max_seconds, parties, source_addresses(args.addresses))
        watched, others = seen["result"]["watched"], seen["result"]["others"]
        spec: Spectated = seen["seen"]
        commits: dict[int, float] = {ply: v for (_, ply), v in watched["commits"].items()}
        last, first, median = [], [], []
        for ply, commit in commits.items():
            got = spec.arrivals.get(ply, [])
            if not got or commit is None:
                continue
            lat = sorted((t - commit) * 1000 for t in got)
            first.append(lat[0])
            median.append(lat[len(lat) // 2])
            last.append(lat[-1])
        full = max(spec.events, default=0)
        moves = watched["moves"] + others["moves"]
        extra_cpu = seen["cpu"] - cpu_per_move * moves
        spectator_moves = max(1, watched["moves"]) * max(1, args.spectators)
        spec_non_200 = [st for st in spec.status if st != 200]
        out = {
            "code": name,
            "spectators": args.spectators,
            "addresses": args.addresses,
            "workers": args.workers,
            "watched_moves": watched["moves"],
            "watched_seconds": round(seen["elapsed"], 2),
            "moves_per_s_watched": round(watched["moves"] / max(seen["elapsed"], 1e-9), 2),
            "move_to_first_ms": {"p50": pct(first, 0.5), "p99": pct(first, 0.99)},
            "move_to_median_ms": {"p50": pct(median, 0.5), "p99": pct(median, 0.99)},
            "move_to_last_ms": {"p50": pct(last, 0.5), "p99": pct(last, 0.99)},
            # the service's own: commit -> last write, per move and worker, and its stages
            **seen["server"],
            "healthz_during": seen["healthz"],
            "moves_heard_by_all": sum(1 for p in commits
                                      if len(spec.arrivals.get(p, [])) == args.spectators),
            "cuts": sum(1 for st, over in zip(spec.status, spec.over) if st == 200 and not over),
            "non_200_spectators": len(spec_non_200),
            "non_200_players": len(watched["non_200"]) + len(others["non_200"])
            + len(quiet["non_200"]),
            "events_per_stream": full,
            "streams_missing_events": sum(1 for st, ev in zip(spec.status, spec.events)
                                          if st == 200 and ev < full),
            "duplicates": spec.duplicates,
            "client_processes": args.client_procs,
            "client_loop": client_loop(),
            "action_p99_ms_without": pct([x * 1000 for x in quiet["latencies"]], 0.99),
            "action_p99_ms_with": pct([x * 1000 for x in watched["latencies"]
                                       + others["latencies"]], 0.99),
            "action_p50_ms_without": pct([x * 1000 for x in quiet["latencies"]], 0.5),
            "action_p50_ms_with": pct([x * 1000 for x in watched["latencies"]
                                       + others["latencies"]], 0.5),
            "worker_cpu_s_with": round(seen["cpu"], 3),
            # this client's spectators, for scale: they share the 2 cores with the service
            "client_cpu_ms_per_move": round(spec.cpu / max(1, watched["moves"]) * 1000, 2),
            "worker_cpu_ms_per_move_without": round(cpu_per_move * 1000, 3),
            "cpu_us_per_spectator_move": round(extra_cpu / spectator_moves * 1e6, 2),
            # why players slow down with spectators (issue 17): each party's CPU and
            # wait for a core, and the actions' time before and after their commit
            "contention_without": contention(quiet_used, quiet_run, args.seconds),
            "contention_with": contention(seen["used"], seen["result"], seen["elapsed"],
                                          (spec.cpu, spec.runqueue)),
            "action_split_ms_without": split_ms([quiet]),
            "action_split_ms_with": split_ms([watched, others]),
            "player_errors": len(watched["errors"]) + len(others["errors"])
            + len(quiet["errors"]),
            "loadavg_before_after": [round(x, 2) for x in (*load_before[:1],
                                                           *os.getloadavg()[:1])],
        }
        if gc_log is not None:
            # the workers' collections: each stalls every request the worker holds
            out["gc_pauses_without"] = harness.gc_pauses(gc_log, workers, quiet_at,
                                                         quiet_until)
            out["gc_pauses_with"] = harness.gc_pauses(gc_log, workers, seen["played_at"],
                                                      time.time())
        return out
    finally:
        stop(gunicorn)
        stop(redis_proc)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spectators", type=int, default=1000)
    parser.add_argument("--tables", type=int, default=4, help="two-player tables of bots")
    parser.add_argument("--think", type=float, default=0.1, help="seconds a bot thinks")
    parser.add_argument("--seconds", type=float, default=15,
                        help="length of the phase without spectators")
    parser.add_argument("--max-seconds", type=float, default=120,
                        help="cap on the watched game's length")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--worker-connections", type=int, default=0,
                        help="each worker's connection cap (ARENA_WORKER_CONNECTIONS), "
                        "when not the deployed one")
    parser.add_argument("--addresses", type=int, default=125,
                        help="loopback source addresses the spectators come from, each a "
                        "/24 of its own, with the per-client and per-network caps as "
                        "deployed; 0: all from 127.0.0.1 with those caps lifted")
    parser.add_argument("--client-procs", type=int, default=2,
                        help="processes the spectators are spread over")
    parser.add_argument("--base", default="main", help="the code before (a git revision)")
    parser.add_argument("--no-base", action="store_true", help="measure this checkout only")
    parser.add_argument("--head", default=None, help="measure this git revision as the code "
                        "after, not the checkout as it is (its tree extracted like --base's)")
    parser.add_argument("--gc-pauses", action="store_true",
                        help="log the workers' garbage collections (bench/gcprobe) and "
                        "report them per phase")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="ssebench-") as tmp_name:
        tmp = Path(tmp_name)
        versions: list[tuple[str, Path]] = []
        if not args.no_base:
            (tmp / "base").mkdir()
            versions.append(("base", base_copy(args.base, tmp / "base")))
        if args.head:
            (tmp / "headcode").mkdir()
            versions.append(("head", base_copy(args.head, tmp / "headcode")))
        else:
            versions.append(("head", ROOT))
        for name, code in versions:
            (tmp / name / "run").mkdir(parents=True, exist_ok=True)
            row = measure(code, name, args, tmp / name / "run")
            rows.append(row)
            print(json.dumps(row), flush=True)
    head = rows[-1]
    ratio = (head["action_p99_ms_with"] or 0) / max(head["action_p99_ms_without"] or 1e-9, 1e-9)
    summary = {
        "summary": "sse",
        "targets": TARGETS,
        "head_meets": {
            "last_p99_ms": (head["move_to_last_ms"]["p99"] or 1e9) <= TARGETS["last_p99_ms_max"],
            "server_fanout_p99_ms": ((head["server_fanout_ms"] or {}).get("p99") or 1e9)
            <= TARGETS["server_fanout_p99_ms_max"],
            "cuts": head["cuts"] <= TARGETS["cuts_max"],
            "non_200": head["non_200_spectators"] + head["non_200_players"]
            <= TARGETS["non_200_max"],
            "cpu_us_per_spectator_move": head["cpu_us_per_spectator_move"]
            <= TARGETS["cpu_us_per_spectator_move_max"],
            "action_p99_ratio": round(ratio, 2) <= TARGETS["action_p99_ratio_max"],
        },
        "action_p99_ratio_head": round(ratio, 2),
    }
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
