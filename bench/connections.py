"""Connections at scale (issue 17): thousands of spectators and waiting bots on one box,
a reconnect storm, and slow consumers.

    python bench/connections.py                      # all three scenarios, ~3 minutes
    python bench/connections.py --scenario scale [--games 20] [--spectators 5000]
                                [--pollers 5000] [--workers 2] [--worker-connections 8000]
    python bench/connections.py --scenario storm [--spectators 1000]
    python bench/connections.py --scenario slow [--slow 100] [--spectators 100]
                                [--send-buffer 4096] [--write-timeout 2]

Each scenario starts its own ``redis-server`` and the service under gunicorn as deployed
(``bench/harness.py``; gevent workers, ``--workers``), with ``ARENA_WORKER_CONNECTIONS``
at ``--worker-connections`` and this process's soft open-file limit raised to its hard
limit (gunicorn and the client processes inherit it: each holds thousands of sockets).
The load client is asyncio (uvloop when installed, ``pip install -e '.[bench]'``) in
``--client-procs`` processes, plus the bots of ``bench/sse.py`` (a thread per seat,
``--think`` s per move, plain action POSTs). Everything shares the machine's cores with the
service: each party's CPU is printed. One JSON line per scenario.

**scale**: ``--games`` two-player games played to their end by bots while ``--spectators``
event streams (spread evenly over the games, opened before the first move) and
``--pollers`` waiting bots (each its own account, ``GET /bots/me/turns`` with a timeout
drawn from 10–25 s, polling again at once on each answer, one keep-alive connection each)
are open. A prober opens a fresh connection for ``GET /healthz`` every 0.5 s, from before
the connections open to the end of play. Reported: ``errors`` (target 0: connections
refused or failed, non-200 answers, streams cut before ``game_over``, streams whose events
differ from the game's, polls dropped or answered late, failed probes, player errors);
player action p50/p99 (target p99 <= 50 ms); the probes' latency; move -> last spectator
p50/p99; **RSS per connection**: each worker's resident memory after the connections
opened minus before, over the descriptors it gained (``/proc/<pid>/fd``), and the same for
the client. Why players wait, as in ``bench/sse.py``: ``action_split_ms`` (before and after
the commit), ``contention`` (each party's CPU and run-queue wait per second, and ``other``:
the rest of the machine's CPU), and with ``--gc-pauses`` the workers' garbage collections.

**storm**: one game with ``--spectators`` (default 1,000) exact streams while bots play
it (and three other tables play on); a third of the way in, every stream is closed at
once and reopened at once with ``Last-Event-ID``: the reconnect storm. Reported: time
from the storm to each stream's 200 (p50/p99/max), refusals, **resume exactness** (every
stream's event ids, across both connections, equal the finished game's: no gap, no
duplicate; compared as a count and a CRC of the id sequence) and the workers' RSS before,
at its peak during and after.

**slow**: one game with ``--slow`` spectators that never read (a 1 KB receive buffer)
beside ``--spectators`` normal ones, under ``ARENA_SSE_SEND_BUFFER`` = ``--send-buffer``
and ``ARENA_SSE_WRITE_TIMEOUT`` = ``--write-timeout`` (a game's ~30 KB of events is more
than the socket buffers hold, so the drop is exercised). Reported: slow consumers dropped
by the service, each slow consumer resumed with ``Last-Event-ID`` from the last complete
event it had and compared with the game (**resume exact**), the normal spectators' move
-> last p99 and exactness, and **memory bounded**: the workers' RSS before, peak during,
after, and the kernel's unsent bytes on the service's sockets (peak).
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as ``python bench/connections.py``, this file's directory comes first on sys.path,
# where bench/http.py would shadow the standard library's ``http`` package: drop it.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse  # noqa: E402
import asyncio  # noqa: E402
import contextlib  # noqa: E402
import faulthandler  # noqa: E402
import http.client  # noqa: E402
import json  # noqa: E402
import multiprocessing as mp  # noqa: E402
import os  # noqa: E402
import queue  # noqa: E402
import random  # noqa: E402
import re  # noqa: E402
import resource  # noqa: E402
import socket  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import zlib  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402
from typing import Any  # noqa: E402

from bench.harness import (  # noqa: E402
    HOST,
    children,
    gc_pauses,
    gc_probe,
    own_cpu,
    pct,
    raise_open_files,
    request,
    rss_kb,
    send_queue_bytes,
    start_redis,
    start_service,
    stop,
    wait_until,
)
from bench.sse import (  # noqa: E402
    client_loop,
    contention,
    new_game,
    play,
    run_client,
    split_ms,
    usage,
)

TARGETS = {"errors_max": 0, "action_p99_ms_max": 50}
IDS_RE = re.compile(rb"^id: (\d+\.\d+)$", re.M)
BATCH = 200  # connections opened at once by one client process
RETRY_S = (0.5, 10.0)  # a refused stream's backoff, as the pages do
FINISH_S = 120  # how long a client may take to report once told to stop


_TASKS: set[asyncio.Task[None]] = set()


def spawn(coro: Any) -> None:
    """Run ``coro`` on the running loop, keeping a reference until it is done."""
    task = asyncio.get_running_loop().create_task(coro)
    _TASKS.add(task)
    task.add_done_callback(_TASKS.discard)


def quantiles(values: list[float], scale: float = 1000.0) -> dict[str, Any]:
    ms = [v * scale for v in values]
    return {"p50": pct(ms, 0.5, 3), "p99": pct(ms, 0.99, 3),
            "max": round(max(ms), 3) if ms else None, "n": len(ms)}


# --- the client: exact event streams and long-polls (asyncio) --------------------------------


class Stream:
    """One spectator's event stream, reopened with ``Last-Event-ID`` when the service cuts
    it or refuses it (backoff as the pages do), or when the storm says so. It keeps every
    complete event's id as a running count and CRC, so that its whole sequence, over all
    its connections, can be compared with the game's (a gap or a duplicate changes it),
    and the arrival time of each new ply's first event (``arrivals``)."""

    def __init__(self, port: int, game: int, game_id: str, arrivals: dict[int, list[float]]
                 ) -> None:
        self.port, self.game, self.game_id, self.arrivals = port, game, game_id, arrivals
        self.last = b""  # the last complete event's id
        self.last_ply = -1
        self.count = 0
        self.crc = 0
        self.over = False
        self.statuses: list[int] = []
        self.failures: list[str] = []  # connections that could not be made
        self.cuts = 0  # connections that ended before game_over, not by us
        self.connects = 0
        self.reconnected_at: float | None = None  # the storm's: when its 200 came
        self.conn: StreamConnection | None = None

    async def connect(self, delay: float = 0.0) -> None:
        if delay:
            await asyncio.sleep(delay)
        self.connects += 1
        conn = self.conn = StreamConnection(self)
        try:
            await asyncio.get_running_loop().create_connection(lambda: conn, HOST, self.port)
        except OSError as exc:
            self.failures.append(repr(exc))

    def events(self, ids: list[bytes], complete: bytes) -> None:
        now = time.time()
        self.count += len(ids)
        self.crc = zlib.crc32(b",".join(ids) + b",", self.crc)
        self.last = ids[-1]
        first, last = int(ids[0].split(b".")[0]), int(ids[-1].split(b".")[0])
        if first > self.last_ply:
            self.arrivals.setdefault(first, []).append(now)
        self.last_ply = max(self.last_ply, last)
        if b"event: game_over" in complete:
            self.over = True

    def lost(self, conn: StreamConnection, refused: bool) -> None:
        """A connection ended: unless the game is over or we closed it, reopen it."""
        if self.over or (conn.closing and not refused) or conn is not self.conn:
            return
        if not refused:
            self.cuts += 1
        backoff = min(RETRY_S[1], RETRY_S[0] * 2 ** min(self.connects, 5))
        spawn(self.connect(random.uniform(0.5, 1) * backoff))

    def close(self) -> None:
        """Close the connection on purpose (the storm): no cut, no reopening by ``lost``."""
        if self.conn is not None:
            self.conn.close()

    def result(self) -> dict[str, Any]:
        return {"game": self.game, "count": self.count, "crc": self.crc, "over": self.over,
                "statuses": self.statuses, "failures": self.failures, "cuts": self.cuts}


class StreamConnection(asyncio.Protocol):
    """One connection of a ``Stream``: its response head, and the part of its body that
    is not a complete event yet (dropped with the connection: the resume starts after the
    last complete event)."""

    def __init__(self, stream: Stream) -> None:
        self.stream = stream
        self.transport: Any = None
        self.head: bytes | None = b""
        self.body = b""
        self.closing = False
        self.refused = False

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        s = self.stream
        resume = b"Last-Event-ID: %s\r\n" % s.last if s.last else b""
        transport.write(b"GET /games/%s/events HTTP/1.1\r\nHost: %s\r\n"
                        b"Accept: text/event-stream\r\n%s\r\n"
                        % (s.game_id.encode(), HOST.encode(), resume))

    def data_received(self, data: bytes) -> None:
        s = self.stream
        if self.head is not None:
            self.head += data
            if b"\r\n\r\n" not in self.head:
                return
            head, _, data = self.head.partition(b"\r\n\r\n")
            self.head = None
            status = int(head.split(b" ", 2)[1])
            s.statuses.append(status)
            if status != 200:
                self.refused = True
                self.close()
                return
            if s.reconnected_at is None:
                s.reconnected_at = time.time()
        body = self.body + data
        end = body.rfind(b"\n\n")
        if end < 0:
            self.body = body
            return
        complete, self.body = body[:end + 2], body[end + 2:]
        ids = IDS_RE.findall(complete)
        if ids:
            s.events(ids, complete)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.stream.lost(self, self.refused)

    def close(self) -> None:
        self.closing = True
        if self.transport is not None:
            self.transport.close()


class Poller(asyncio.Protocol):
    """A waiting bot: ``GET /bots/me/turns?timeout=T`` on one keep-alive connection,
    again as soon as it is answered, T drawn from 10–25 s (real bots' polls are not in
    step). Counts answers, non-200s, connections lost, and answers later than T + 5 s."""

    def __init__(self, port: int, token: str, rng: random.Random, stats: dict[str, Any]
                 ) -> None:
        self.port, self.token, self.rng, self.stats = port, token, rng, stats
        self.transport: Any = None
        self.buffer = b""
        self.sent = 0.0
        self.timeout = 0.0
        self.stopping = False

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.poll()

    def poll(self) -> None:
        self.timeout = round(self.rng.uniform(10, 25), 1)
        self.sent = time.monotonic()
        self.transport.write(b"GET /bots/me/turns?timeout=%.1f HTTP/1.1\r\nHost: %s\r\n"
                             b"Authorization: Bearer %s\r\n\r\n"
                             % (self.timeout, HOST.encode(), self.token.encode()))

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        head_end = self.buffer.find(b"\r\n\r\n")
        if head_end < 0:
            return
        head = self.buffer[:head_end].lower()
        match = re.search(rb"content-length: (\d+)", head)
        length = int(match.group(1)) if match else 0
        if len(self.buffer) < head_end + 4 + length:
            return
        self.buffer = self.buffer[head_end + 4 + length:]
        status = int(head.split(b" ", 2)[1])
        took = time.monotonic() - self.sent
        self.stats["answers"] += 1
        if status != 200:
            self.stats["non_200"].append(status)
        if took > self.timeout + 5:
            self.stats["late"] += 1
        self.stats["max_over_s"] = max(self.stats["max_over_s"], took - self.timeout)
        if not self.stopping:
            self.poll()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if self.stopping:
            return
        self.stats["dropped"] += 1
        spawn(open_one(asyncio.get_running_loop(), self, self.port, self.stats))


async def open_one(loop: Any, proto: asyncio.Protocol, port: int, stats: dict[str, Any]
                   ) -> None:
    try:
        await loop.create_connection(lambda: proto, HOST, port)
    except OSError as exc:
        stats["failures"].append(repr(exc))


async def client(port: int, streams: list[tuple[int, str]], tokens: list[str], ctl: Any,
                 ready: Any) -> dict[str, Any]:
    """One client process's share: ``streams`` (game index, id) and a poller per token,
    opened ``BATCH`` at a time; then wait for ``ctl['storm']`` (close every stream and
    reopen them all at once) and ``ctl['stop']``."""
    loop = asyncio.get_running_loop()
    rss0, cpu0 = rss_kb(os.getpid()), own_cpu()
    fds0 = len(os.listdir("/proc/self/fd"))
    arrivals: dict[int, dict[int, list[float]]] = {}
    specs = [Stream(port, g, gid, arrivals.setdefault(g, {})) for g, gid in streams]
    stats: dict[str, Any] = {"answers": 0, "non_200": [], "late": 0, "dropped": 0,
                             "max_over_s": 0.0, "failures": []}
    pollers = [Poller(port, t, random.Random(t), stats) for t in tokens]
    for start in range(0, len(specs), BATCH):
        await asyncio.gather(*(s.connect() for s in specs[start:start + BATCH]))
        await asyncio.sleep(0.02)
    for start in range(0, len(pollers), BATCH):
        await asyncio.gather(*(open_one(loop, p, port, stats)
                               for p in pollers[start:start + BATCH]))
        await asyncio.sleep(0.02)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not all(s.statuses or s.failures for s in specs):
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)
    ready.put({"rss_kb": rss_kb(os.getpid()) - rss0,
               "fds": len(os.listdir("/proc/self/fd")) - fds0})
    storm_at = None
    while not ctl["stop"].is_set():
        if storm_at is None and ctl["storm"].is_set():
            storm_at = time.time()
            for s in specs:
                s.close()
                s.reconnected_at = None
            await asyncio.gather(*(s.connect() for s in specs))
        await asyncio.sleep(0.05)
    for p in pollers:
        p.stopping = True
        if p.transport is not None:
            p.transport.close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not all(s.over for s in specs):
        await asyncio.sleep(0.05)
    for s in specs:
        s.close()
    await asyncio.sleep(0.1)
    return {"streams": [s.result() for s in specs], "polls": stats, "arrivals": arrivals,
            "cpu": own_cpu() - cpu0,
            "storm_s": [s.reconnected_at - storm_at for s in specs
                        if storm_at is not None and s.reconnected_at is not None]}


def client_process(port: int, streams: list[tuple[int, str]], tokens: list[str], ctl: Any,
                   ready: Any, results: Any) -> None:
    raise_open_files(len(streams) + len(tokens) + 256)

    def watchdog() -> None:  # a client that does not finish says where it is
        ctl["stop"].wait()
        faulthandler.dump_traceback_later(FINISH_S - 10, exit=False)

    threading.Thread(target=watchdog, daemon=True).start()
    results.put(run_client(client(port, streams, tokens, ctl, ready)))
    faulthandler.cancel_dump_traceback_later()


class Clients:
    """The client processes, each given an equal share of the streams and pollers."""

    def __init__(self, port: int, streams: list[tuple[int, str]], tokens: list[str],
                 procs: int) -> None:
        ctx = mp.get_context("fork")
        self.ctl = {"storm": ctx.Event(), "stop": ctx.Event()}
        self.ready, self.results = ctx.Queue(), ctx.Queue()
        self.procs = [ctx.Process(target=client_process, daemon=True, args=(
            port, streams[i::procs], tokens[i::procs], self.ctl, self.ready, self.results))
            for i in range(procs)]
        for p in self.procs:
            p.start()
        self.opened = [self.ready.get(timeout=300) for _ in self.procs]

    def finish(self) -> list[dict[str, Any]]:
        self.ctl["stop"].set()
        try:
            parts = [self.results.get(timeout=FINISH_S) for _ in self.procs]
        except queue.Empty:
            raise RuntimeError("a client did not finish; exit codes: "
                               f"{[p.exitcode for p in self.procs]}") from None
        for p in self.procs:
            p.join(10)
        return parts

    def pids(self) -> list[int]:
        return [p.pid for p in self.procs if p.pid is not None]


# --- the service side ------------------------------------------------------------------------


class Service:
    """Redis and the service of one scenario, and the figures read from their processes."""

    def __init__(self, tmp: Path, args: argparse.Namespace, **settings: str) -> None:
        self.gc_log = tmp / "gc" if args.gc_pauses else None
        if self.gc_log is not None:
            settings = {**settings, **gc_probe(self.gc_log)}
        self.redis, redis_port = start_redis(tmp, maxclients=args.redis_maxclients)
        self.gunicorn = None
        try:
            self.gunicorn, self.port = start_service(redis_port, args.workers, tmp / "log", {
                "ARENA_KEY_PREFIX": "connbench:", "ARENA_RATE_LIMIT": "0",
                # thousands of bots and games from one address: the creation quotas off
                "ARENA_QUOTA_BOTS": "0", "ARENA_QUOTA_GAMES": "0",
                "ARENA_QUOTA_CLIENT_GAMES": "0",
                "ARENA_NEW_ACCOUNTS_PER_MINUTE": "0", "ARENA_NEW_GAMES_PER_MINUTE": "0",
                "ARENA_ACCESS_LOG": "0", "ARENA_LOG_LEVEL": "warning",
                "ARENA_WORKER_CONNECTIONS": str(args.worker_connections), **settings})
            wait_until(lambda: len(children(self.gunicorn.pid)) == args.workers, 30, "workers")
            self.workers = sorted(children(self.gunicorn.pid))
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        stop(self.gunicorn)
        stop(self.redis)

    def gc_pauses(self, since: float) -> dict[str, Any] | None:
        """The workers' garbage collections since ``since`` (``--gc-pauses``)."""
        if self.gc_log is None:
            return None
        return gc_pauses(self.gc_log, self.workers, since, time.time())

    def rss(self) -> list[int]:
        return [rss_kb(p) for p in self.workers]

    def fds(self) -> list[int]:
        return [len(os.listdir(f"/proc/{p}/fd")) for p in self.workers]



def register(port: int, n: int, prefix: str, owner: bool = False) -> list[dict[str, Any]]:
    """``n`` bot accounts, registered over 8 keep-alive connections; ``owner``: all of one
    owner (the first's), so games naming them seat them at once (issue 23)."""
    local = threading.local()
    first: dict[str, Any] | None = None
    if owner and n:
        status, first = request(port, "POST", "/bots", {"name": f"{prefix}0"})
        assert status == 201, (status, first)

    def one(i: int) -> dict[str, Any]:
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = http.client.HTTPConnection(HOST, port, timeout=30)
        status, bot = request(port, "POST", "/bots", {"name": f"{prefix}{i}"},
                              first["token"] if first else None, conn=conn)
        assert status == 201, (status, bot)
        return bot

    with ThreadPoolExecutor(8) as pool:
        rest = list(pool.map(one, range(1 if first else 0, n)))
    return ([first] if first else []) + rest


def tables_of(port: int, games: int, seed: int) -> list[dict[str, Any]]:
    tables = []
    players = register(port, 2 * games, "player", owner=True)
    for t, pair in enumerate(zip(*[iter(players)] * 2)):
        bots = list(pair)
        tables.append({"bots": bots, "game": new_game(port, bots, seed + t)})
    return tables


def reference(port: int, game_id: str) -> tuple[int, int]:
    """(count, CRC) of a finished game's event ids, as ``Stream`` computes them."""
    conn = http.client.HTTPConnection(HOST, port, timeout=30)
    conn.request("GET", f"/games/{game_id}/events")
    body = conn.getresponse().read()
    conn.close()
    ids = IDS_RE.findall(body)
    return len(ids), zlib.crc32(b",".join(ids) + b",") if ids else 0


def compare(port: int, tables: list[dict[str, Any]], streams: list[dict[str, Any]]
            ) -> dict[str, int]:
    """Streams whose ids are exactly the game's, and those that differ."""
    refs = {g: reference(port, t["game"]) for g, t in enumerate(tables)}
    exact = sum(1 for s in streams if (s["count"], s["crc"]) == refs[s["game"]])
    return {"exact": exact, "differ": len(streams) - exact,
            "events_per_stream": max((c for c, _ in refs.values()), default=0)}


class Sampler(threading.Thread):
    """Every 0.2 s: the workers' summed RSS and the kernel's unsent bytes on the port."""

    def __init__(self, service: Service) -> None:
        super().__init__(daemon=True)
        self.service = service
        self.samples: list[tuple[float, int, int]] = []
        self.running = True
        self.start()

    def run(self) -> None:
        while self.running:
            self.samples.append((time.monotonic(), sum(self.service.rss()),
                                 send_queue_bytes(self.service.port)))
            time.sleep(0.2)

    def peak(self, since: float = 0.0, until: float = float("inf")) -> tuple[int, int]:
        window = [(r, q) for t, r, q in self.samples if since <= t <= until] or [(0, 0)]
        return max(r for r, _ in window), max(q for _, q in window)

    def stop(self) -> None:
        self.running = False
        self.join(2)


class Prober(threading.Thread):
    """``GET /healthz`` on a fresh connection every ``every`` seconds."""

    def __init__(self, port: int, every: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.port, self.every = port, every
        self.latencies: list[float] = []
        self.failures: list[str] = []
        self.running = True
        self.start()

    def run(self) -> None:
        while self.running:
            t0 = time.perf_counter()
            try:
                status, _ = request(self.port, "GET", "/healthz", timeout=10)
                if status != 200:
                    self.failures.append(str(status))
            except (OSError, http.client.HTTPException) as exc:
                self.failures.append(repr(exc))
            self.latencies.append(time.perf_counter() - t0)
            time.sleep(max(0.0, self.every - (time.perf_counter() - t0)))

    def stop(self) -> dict[str, Any]:
        self.running = False
        self.join(15)
        return {**quantiles(self.latencies), "failed": len(self.failures),
                "failures": self.failures[:5]}


def move_to_last(tables: list[dict[str, Any]], played: dict[str, Any],
                 parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Per move of every watched game: its commit to its first event's arrival at the last
    of that game's spectators; p50/p99 over moves, ms."""
    index = {t["game"]: g for g, t in enumerate(tables)}
    arrivals: dict[tuple[int, int], list[float]] = {}
    for p in parts:
        for g, plies in p["arrivals"].items():
            for ply, times in plies.items():
                arrivals.setdefault((g, ply), []).extend(times)
    lasts = [max(arrivals[(index[gid], ply)]) - commit
             for (gid, ply), commit in played["watched"]["commits"].items()
             if commit is not None and (index[gid], ply) in arrivals]
    return quantiles(lasts)


def stream_figures(parts: list[dict[str, Any]]) -> dict[str, Any]:
    streams = [s for p in parts for s in p["streams"]]
    statuses = [st for s in streams for st in s["statuses"]]
    return {"streams": streams, "opened": len(streams),
            "non_200": sum(1 for st in statuses if st != 200),
            "failed": sum(len(s["failures"]) for s in streams),
            "cuts": sum(s["cuts"] for s in streams),
            "not_over": sum(1 for s in streams if not s["over"])}


def player_figures(played: dict[str, Any]) -> dict[str, Any]:
    runs = [played["watched"], played["others"]]
    latencies = [x for r in runs for x in r["latencies"]]
    return {"moves": sum(r["moves"] for r in runs), "action_ms": quantiles(latencies),
            "non_200": sum(len(r["non_200"]) for r in runs),
            "errors": sum(len(r["errors"]) for r in runs)}


# --- scenarios -------------------------------------------------------------------------------


def scale(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    service = Service(tmp, args)
    try:
        port = service.port
        t_setup = time.monotonic()
        tables = tables_of(port, args.games, 300)
        tokens = [b["token"] for b in register(port, args.pollers, "waiting")]
        setup_s = time.monotonic() - t_setup
        streams = [(i % args.games, tables[i % args.games]["game"])
                   for i in range(args.spectators)]
        time.sleep(1.0)
        rss0, fds0 = service.rss(), service.fds()
        prober = Prober(port)  # from before the connections open to the end of play
        t_open, opened_at = time.monotonic(), time.time()
        clients = Clients(port, streams, tokens, args.client_procs)
        open_s = time.monotonic() - t_open
        time.sleep(2.0)
        rss1, fds1 = service.rss(), service.fds()
        gc_while_opening = service.gc_pauses(opened_at)
        parties = {"gunicorn": service.workers, "redis": [service.redis.pid],
                   "clients": clients.pids()}
        before, played_at = usage(parties), time.time()
        t0 = time.monotonic()
        played = play(port, tables, args.think, args.max_seconds, range(len(tables)))
        elapsed = time.monotonic() - t0
        used = usage(parties, before)
        gc_during_play = service.gc_pauses(played_at)
        rss2 = service.rss()
        probes = prober.stop()
        parts = clients.finish()
        seen = stream_figures(parts)
        exact = compare(port, tables, seen["streams"])
        polls = [p["polls"] for p in parts]
        players = player_figures(played)
        conns = [b - a for a, b in zip(fds0, fds1)]
        grown = [b - a for a, b in zip(rss0, rss1)]
        client_conns = sum(o["fds"] for o in clients.opened)
        poll_figures = {
            "answers": sum(p["answers"] for p in polls),
            "non_200": sum(len(p["non_200"]) for p in polls),
            "dropped": sum(p["dropped"] for p in polls),
            "late": sum(p["late"] for p in polls),
            "failed": sum(len(p["failures"]) for p in polls),
            "max_over_timeout_s": round(max(p["max_over_s"] for p in polls), 3)}
        errors = {
            "streams_failed": seen["failed"], "streams_non_200": seen["non_200"],
            "streams_cut": seen["cuts"], "streams_not_over": seen["not_over"],
            "streams_differ": exact["differ"], "polls_failed": poll_figures["failed"],
            "polls_non_200": poll_figures["non_200"], "polls_dropped": poll_figures["dropped"],
            "polls_late": poll_figures["late"], "healthz_failed": probes["failed"],
            "player_non_200": players["non_200"], "player_errors": players["errors"]}
        total_errors = sum(errors.values())
        return {
            "scenario": "scale",
            "games": args.games, "spectators": args.spectators, "pollers": args.pollers,
            "workers": args.workers, "worker_connections": args.worker_connections,
            "open_files_soft": resource.getrlimit(resource.RLIMIT_NOFILE)[0],
            "client_processes": args.client_procs, "client_loop": client_loop(),
            "setup_s": round(setup_s, 1), "open_s": round(open_s, 1),
            "play_s": round(elapsed, 1),
            "errors": total_errors, "error_kinds": errors,
            "player_moves": players["moves"], "action_ms": players["action_ms"],
            "healthz_ms": probes,
            "move_to_last_spectator_ms": move_to_last(tables, played, parts),
            "polls": poll_figures,
            "events_per_stream": exact["events_per_stream"],
            "server_connections_per_worker": conns,
            "rss_kb_per_worker_before_after": [rss0, rss1],
            "rss_kb_per_worker_end_of_play": rss2,
            "rss_kb_per_connection_server": round(sum(grown) / max(1, sum(conns)), 2),
            "rss_kb_per_connection_client": round(
                sum(o["rss_kb"] for o in clients.opened) / max(1, client_conns), 2),
            # where the players' time goes: before and after the commit, and each
            # party's CPU and wait for a core (per second of play; 2.0 is both cores)
            "action_split_ms": split_ms([played["watched"], played["others"]]),
            "contention": contention(used, played, elapsed),
            "gc_pauses_while_opening": gc_while_opening,
            "gc_pauses_during_play": gc_during_play,
            "targets": TARGETS,
            "met": {"errors": total_errors <= TARGETS["errors_max"],
                    "action_p99_ms": (players["action_ms"]["p99"] or 1e9)
                    <= TARGETS["action_p99_ms_max"],
                    "healthz_always_answered": probes["failed"] == 0},
            "loadavg_1m": round(os.getloadavg()[0], 2),
        }
    finally:
        service.close()


def storm(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    service = Service(tmp, args)
    try:
        port = service.port
        tables = tables_of(port, 4, 500)
        streams = [(0, tables[0]["game"])] * args.spectators
        clients = Clients(port, streams, [], args.client_procs)
        time.sleep(1.0)
        sampler = Sampler(service)
        rss_before = sum(service.rss())
        result: dict[str, Any] = {}
        bots = threading.Thread(target=lambda: result.update(
            play(port, tables, args.think, args.max_seconds, {0})), daemon=True)
        bots.start()
        game = tables[0]["game"]
        wait_until(lambda: request(port, "GET", f"/games/{game}")[1]["version"] >= 30,
                   args.max_seconds, "a third of the game")
        storm_at = time.monotonic()
        clients.ctl["storm"].set()
        bots.join(args.max_seconds + 60)
        rss_after = sum(service.rss())
        sampler.stop()
        parts = clients.finish()
        seen = stream_figures(parts)
        exact = compare(port, tables[:1], seen["streams"])
        storm_s = [x for p in parts for x in p["storm_s"]]
        peak, _ = sampler.peak(storm_at)
        players = player_figures(result)
        return {
            "scenario": "storm", "spectators": args.spectators, "workers": args.workers,
            "client_loop": client_loop(),
            "reconnect_ms": quantiles(storm_s), "reconnected": len(storm_s),
            "refused": seen["non_200"], "failed": seen["failed"], "cuts": seen["cuts"],
            "not_over": seen["not_over"],
            "resume_exact": exact["exact"], "resume_differ": exact["differ"],
            "events_per_stream": exact["events_per_stream"],
            "rss_kb_workers": {"before": rss_before, "peak_during": peak, "after": rss_after},
            "player_moves": players["moves"], "action_ms": players["action_ms"],
            "player_errors": players["non_200"] + players["errors"],
            "loadavg_1m": round(os.getloadavg()[0], 2),
        }
    finally:
        service.close()


def slow_consumer(port: int, game_id: str) -> socket.socket:
    """A stream opened and never read, with a receive buffer as small as the kernel
    allows (so the service's writes block soon)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)  # before connect: the window
    sock.connect((HOST, port))
    sock.sendall(f"GET /games/{game_id}/events HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
    return sock


def drained(sock: socket.socket) -> tuple[bytes, bool]:
    """The events of what the service sent before it closed the connection, de-chunked
    and cut after the last complete event; and whether the response ended properly (its
    last chunk) rather than being dropped."""
    sock.settimeout(10)
    raw = b""
    with contextlib.suppress(OSError):
        while chunk := sock.recv(65536):
            raw += chunk
    sock.close()
    body = raw.partition(b"\r\n\r\n")[2]
    text, ended = b"", False
    while body:
        size_line, _, body = body.partition(b"\r\n")
        try:
            size = int(size_line or b"0", 16)
        except ValueError:
            break
        if size == 0:
            ended = True
            break
        if len(body) < size:
            break
        text += body[:size]
        body = body[size + 2:]
    return text[: text.rfind(b"\n\n") + 2], ended


def resumed(port: int, game_id: str, text: bytes) -> tuple[int, int]:
    """(count, CRC) of the ids in ``text`` followed by a resumed stream's after the last."""
    ids = IDS_RE.findall(text)
    conn = http.client.HTTPConnection(HOST, port, timeout=30)
    headers = {"Last-Event-ID": ids[-1].decode()} if ids else {}
    conn.request("GET", f"/games/{game_id}/events", headers=headers)
    ids += IDS_RE.findall(conn.getresponse().read())
    conn.close()
    return len(ids), zlib.crc32(b",".join(ids) + b",") if ids else 0


def slow(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    service = Service(tmp, args, ARENA_SSE_SEND_BUFFER=str(args.send_buffer),
                      ARENA_SSE_WRITE_TIMEOUT=str(args.write_timeout))
    try:
        port = service.port
        tables = tables_of(port, 1, 700)
        game = tables[0]["game"]
        clients = Clients(port, [(0, game)] * args.spectators, [], args.client_procs)
        sockets = [slow_consumer(port, game) for _ in range(args.slow)]
        time.sleep(1.0)
        sampler = Sampler(service)
        rss_before, queued_before = sum(service.rss()), send_queue_bytes(port)
        t0 = time.monotonic()
        played = play(port, tables, args.think, args.max_seconds, {0})
        time.sleep(args.write_timeout + 3)  # the last writes time out
        rss_after = sum(service.rss())
        sampler.stop()
        peak, queued_peak = sampler.peak(t0)
        parts = clients.finish()
        seen = stream_figures(parts)
        ref = reference(port, game)
        exact = compare(port, tables, seen["streams"])
        outcomes = [drained(s) for s in sockets]
        dropped = sum(1 for _, ended in outcomes if not ended)
        resumes = [resumed(port, game, text) for text, _ in outcomes]
        players = player_figures(played)
        return {
            "scenario": "slow", "slow_consumers": args.slow, "spectators": args.spectators,
            "workers": args.workers, "send_buffer": args.send_buffer,
            "write_timeout_s": args.write_timeout,
            "slow_dropped": dropped,
            "slow_resume_exact": sum(1 for r in resumes if r == ref),
            "slow_events_before_drop": quantiles(
                [float(len(IDS_RE.findall(t))) for t, _ in outcomes], 1.0),
            "events_per_stream": ref[0],
            "spectators_exact": exact["exact"], "spectators_cut": seen["cuts"],
            "spectators_non_200": seen["non_200"] + seen["failed"],
            "move_to_last_spectator_ms": move_to_last(tables, played, parts),
            "rss_kb_workers": {"before": rss_before, "peak_during": peak, "after": rss_after},
            "kernel_unsent_bytes": {"before": queued_before, "peak_during": queued_peak,
                                    "after": send_queue_bytes(port)},
            "player_moves": players["moves"], "action_ms": players["action_ms"],
            "player_errors": players["non_200"] + players["errors"],
            "loadavg_1m": round(os.getloadavg()[0], 2),
        }
    finally:
        service.close()


SCENARIOS = {"scale": scale, "storm": storm, "slow": slow}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", choices=[*SCENARIOS, "all"], default="all")
    parser.add_argument("--games", type=int, default=20, help="scale: games played at once")
    parser.add_argument("--spectators", type=int, default=None,
                        help="event streams (scale 5000, storm 1000, slow 100)")
    parser.add_argument("--pollers", type=int, default=5000,
                        help="scale: waiting bots, each a long-poll")
    parser.add_argument("--slow", type=int, default=100, help="slow: never-reading streams")
    parser.add_argument("--send-buffer", type=int, default=4096,
                        help="slow: ARENA_SSE_SEND_BUFFER")
    parser.add_argument("--write-timeout", type=float, default=2.0,
                        help="slow: ARENA_SSE_WRITE_TIMEOUT")
    parser.add_argument("--think", type=float, default=0.1, help="seconds a bot thinks")
    parser.add_argument("--max-seconds", type=float, default=120, help="cap on a game's play")
    parser.add_argument("--workers", type=int, default=2, help="WEB_CONCURRENCY")
    parser.add_argument("--worker-connections", type=int, default=8000,
                        help="ARENA_WORKER_CONNECTIONS (each worker may get most of them)")
    parser.add_argument("--redis-maxclients", type=int, default=10000)
    parser.add_argument("--client-procs", type=int, default=2,
                        help="processes the streams and polls are spread over")
    parser.add_argument("--gc-pauses", action="store_true",
                        help="scale: log the workers' garbage collections (bench/gcprobe) "
                        "and report those during play")
    args = parser.parse_args()
    limit = raise_open_files(args.worker_connections + 2000)
    if limit < args.worker_connections + 200:
        parser.error(f"the open-file limit ({limit}) is below --worker-connections: "
                     "raise it (ulimit -n) or lower --worker-connections")
    defaults = {"scale": 5000, "storm": 1000, "slow": 100}
    chosen = list(SCENARIOS) if args.scenario == "all" else [args.scenario]
    spectators = args.spectators
    for name in chosen:
        args.spectators = defaults[name] if spectators is None else spectators
        with tempfile.TemporaryDirectory(prefix="connbench-") as tmp:
            print(json.dumps(SCENARIOS[name](args, Path(tmp))), flush=True)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
