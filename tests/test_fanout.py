"""Event streams fan out once per worker: a move in a watched game is read from Redis a
bounded number of times however many spectators watch it, and idle streams cost Redis
nothing between keep-alives.

Against the real service (``allfours serve``, one gevent worker) on a Redis of the test's
own (another port, so ``INFO commandstats`` counts only this service's commands), with a
few hundred real SSE connections (aiohttp). Every spectator must get every event exactly
once and in order, identical to every other spectator's; a seat's stream shows that seat
its own cards only (R7: nobody sees another's hand); a spectator that drops and comes back with
``Last-Event-ID`` resumes exactly. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import random
import time
from collections import Counter
from typing import Any

import pytest

from tests.test_operations import Service
from tests.test_serve import (  # own_redis: a fixture
    own_redis,  # noqa: F401
    wait_for,
)

EXPECTED_S = 25  # seconds, the whole module: the order workers take it in (tests/conftest.py)

aiohttp = pytest.importorskip("aiohttp")

SPECTATORS = int(os.environ.get("FANOUT_SPECTATORS", "200"))
KEEPALIVE_S = 0.5
DEALS = ("deal", "run_deal")  # the events that carry hidden cards (R7)


def commands(client: Any) -> Counter[str]:
    """Commands this Redis has run so far, by name, ``INFO`` itself not counted (asked on
    one open connection, so the counting adds no handshake)."""
    stats = client.info("commandstats")
    return Counter({k[len("cmdstat_"):]: v["calls"] for k, v in stats.items()
                    if k != "cmdstat_info"})


def parse(text: str) -> list[tuple[str, str, Any]]:
    """(id, type, data) of every event in an SSE text."""
    out = []
    for block in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.split("\n"):
            name, sep, value = line.partition(": ")
            if sep and name in ("id", "event", "data"):
                fields[name] = value
        if "id" in fields:
            out.append((fields["id"], fields["event"], json.loads(fields["data"])))
    return out


class Watcher:
    """One SSE connection, its text kept."""

    def __init__(self, session: Any, url: str, headers: dict[str, str] | None = None) -> None:
        self.session, self.url, self.headers = session, url, headers or {}
        self.text = ""
        self.status = 0
        self.done = asyncio.Event()
        self.task = asyncio.ensure_future(self.run())

    async def run(self) -> None:
        try:
            async with self.session.get(self.url, headers=self.headers) as r:
                self.status = r.status
                async for chunk in r.content.iter_any():
                    self.text += chunk.decode()
        finally:
            self.done.set()

    def ids(self) -> list[str]:
        return [e[0] for e in parse(self.text)]


async def until(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.05)


STAGES = ("heard", "woken", "known", "replayed", "first_write", "last_write")


def fanout_figures(text: str) -> dict[str, float]:
    """The fan-out histograms' counts and sums in a ``/metrics`` text: ``count``, ``sum``
    (``allfours_fanout_seconds``) and ``{stage}_count``, ``{stage}_sum`` of its stages."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        name, _, value = line.rpartition(" ")
        for kind in ("count", "sum"):
            if name == f"allfours_fanout_seconds_{kind}":
                out[kind] = float(value)
            for stage in STAGES:
                if name == f'allfours_fanout_stage_seconds_{kind}{{stage="{stage}"}}':
                    out[f"{stage}_{kind}"] = float(value)
            for part in ("wall", "cpu"):
                if name == f'allfours_fanout_write_seconds_{kind}{{kind="{part}"}}':
                    out[f"write_{part}_{kind}"] = float(value)
    return out


async def watch_and_play(base: str, redis_port: int) -> None:
    import redis

    counter = redis.Redis(port=redis_port, socket_timeout=5, single_connection_client=True)
    timeout = aiohttp.ClientTimeout(total=120)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(timeout=timeout, connector=connector) as http:
        async def call(method: str, path: str, token: str | None = None, **kw: Any) -> Any:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            async with http.request(method, base + path, headers=headers, **kw) as r:
                body = await r.json()
                assert r.status in (200, 201), (method, path, r.status, body)
                return body

        async def scrape() -> str:
            async with http.get(base + "/metrics") as r:
                assert r.status == 200
                return await r.text()

        bots = [await call("POST", "/bots", json={"name": "fan0"})]
        bots.append(await call("POST", "/bots", bots[0]["token"],  # one owner's bots
                               json={"name": "fan1"}))
        game = await call("POST", "/games", bots[0]["token"],
                          json={"players": 2, "seats": [b["id"] for b in bots], "seed": 17})
        url = f"{base}/games/{game['id']}/events"
        watchers = [Watcher(http, url) for _ in range(SPECTATORS)]
        seats = [Watcher(http, f"{url}?seat={i}", {"Authorization": f"Bearer {b['token']}"})
                 for i, b in enumerate(bots)]
        everyone = watchers + seats
        await until(lambda: all(w.ids() for w in everyone), 60, "every stream's backlog")
        backlog = len(watchers[0].ids())
        rng = random.Random(17)

        async def move() -> dict[str, Any]:
            view = await call("GET", f"/games/{game['id']}")
            token = bots[view["turn"]]["token"]
            mine = await call("GET", f"/games/{game['id']}", token)
            return await call("POST", f"/games/{game['id']}/actions", token,
                              json={"action": rng.choice(mine["legal_actions"]),
                                    "version": mine["version"]})

        def caught_up(n: int) -> bool:
            return all(len(w.ids()) > n for w in watchers)

        # one move: a bounded number of Redis commands, whatever the number of spectators
        await move()  # warm: scripts loaded, connections open
        await until(lambda: caught_up(backlog), 30, "every spectator hearing a move")
        backlog = len(watchers[0].ids())
        metrics_before = fanout_figures(await scrape())
        before = commands(counter)
        await move()
        await until(lambda: caught_up(backlog), 30, "every spectator hearing the move")
        await asyncio.sleep(0.3)  # anything late still counted
        spent = commands(counter) - before
        # the move's fan-out, as the service measured it: one observation (one worker),
        # commit -> last write, and each stage once, in order (commit -> each stage, so
        # every later stage took at least as long)
        text = await scrape()
        assert "# TYPE allfours_fanout_seconds histogram" in text
        assert 'allfours_fanout_seconds_bucket{le="0.05"}' in text
        after = fanout_figures(text)
        assert after["count"] - metrics_before.get("count", 0) == 1, (metrics_before, after)
        took = after["sum"] - metrics_before.get("sum", 0.0)
        assert took > 0  # measured, whatever the machine's speed made it
        spans = []
        for stage in STAGES:
            assert after[f"{stage}_count"] - metrics_before.get(f"{stage}_count", 0) == 1
            spans.append(after[f"{stage}_sum"] - metrics_before.get(f"{stage}_sum", 0.0))
        assert spans == sorted(spans), spans
        assert abs(spans[-1] - took) < 1e-6
        for part in ("wall", "cpu"):  # the writes' own time: once, within the whole
            assert after[f"write_{part}_count"] - metrics_before.get(f"write_{part}_count",
                                                                     0) == 1
        wall = after["write_wall_sum"] - metrics_before.get("write_wall_sum", 0.0)
        assert abs(wall - (spans[-1] - spans[-2])) < 1e-6
        moved = spent.total()
        # the move's own requests (two views, the action: about a dozen, the commands the
        # action's script runs included); the streams share one read per worker, where
        # one per spectator would be hundreds
        assert moved <= 20, f"{spent} for one move seen by {SPECTATORS}"

        # idle streams: keep-alives every 0.5 s, and no Redis command for them
        before = commands(counter)
        await asyncio.sleep(6 * KEEPALIVE_S)
        idle = commands(counter) - before
        assert idle.total() <= 2, f"{idle} while {SPECTATORS} streams idled"
        assert watchers[0].text.count(": keep-alive") >= 3

        # a spectator drops mid-game and resumes with Last-Event-ID
        dropper = watchers.pop()
        dropper.task.cancel()
        await asyncio.sleep(0.05)
        for _ in range(5):
            await move()
        last = dropper.ids()[-1]
        resumed = Watcher(http, url, {"Last-Event-ID": last})

        # play to the end: every stream ends after game_over
        for _ in range(3000):
            view = await call("GET", f"/games/{game['id']}")
            if view["status"] == "finished":
                break
            await move()
        await asyncio.wait_for(asyncio.gather(*(w.done.wait() for w in
                                                [*watchers, *seats, resumed])), 60)

        full = watchers[0].text
        events = parse(full)
        ids = [e[0] for e in events]
        assert events[-1][1] == "game_over"
        assert len(ids) == len(set(ids))  # each once
        keys = [tuple(int(x) for x in i.split(".")) for i in ids]
        assert keys == sorted(keys)
        for w in watchers:
            assert w.status == 200
            assert parse(w.text) == events  # every spectator: every event, once, the same
        assert dropper.ids() + resumed.ids() == ids  # resumed exactly
        assert parse(resumed.text) == events[len(dropper.ids()):]

        # redaction: a spectator sees no card in a deal; a seat only its own (R7)
        deals = [d for _, kind, d in events if kind in DEALS]
        assert deals
        for d in deals:
            assert all(c is None for c in d["cards"]), d
        for i, w in enumerate(seats):
            seat_events = parse(w.text)
            assert [e[0] for e in seat_events] == ids
            dealt = [d for _, kind, d in seat_events if kind in DEALS]
            assert dealt
            for d in dealt:
                assert all(c is None for s, c in enumerate(d["cards"]) if s != i), d
                assert d["cards"][i] is not None


def test_a_move_is_read_once_per_worker_whatever_the_spectators(
    tmp_path, own_redis  # noqa: F811 (the fixture)
) -> None:
    s = Service(tmp_path, workers=1, REDIS_URL=f"redis://127.0.0.1:{own_redis}/0",
                ARENA_KEY_PREFIX="fan:", ARENA_RATE_LIMIT="0", ARENA_SWEEPER="0",
                ARENA_CALLBACKS="0",  # the webhook dispatcher's own polls are not the streams'
                ARENA_ANALYSIS_WORKERS="0",  # nor the analysis workers' reads of their queue
                # every spectator comes from this one address: no cap per client
                ARENA_STREAMS_PER_CLIENT="0", ARENA_CLIENT_SHARE="0",
                ARENA_SPECTATOR_SHARE="0", ARENA_HELD_NETWORK_SHARE="0",
                ARENA_SSE_KEEPALIVE=str(KEEPALIVE_S), ARENA_ACCESS_LOG="0")
    try:
        s.wait_healthy()
        # in a thread of its own: a worker that ran the browser tests first still has
        # Playwright's event loop running in its main thread (pytest-xdist)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run,
                        asyncio.wait_for(watch_and_play(s.url(""), own_redis), 240)).result()
        assert "Traceback" not in s.output(), s.output()[-3000:]
    finally:
        s.stop()


def test_the_redis_pool_is_sized_from_the_worker_connection_budget(redis_client) -> None:
    """Each open client connection may have one Redis command in flight: the pool must
    not refuse the 101st (redis-py's default cap), as it did with 200 spectators."""
    from service.http.app import create_app
    from service.storage.redis_client import POOL_HEADROOM
    from tests.conftest import REDIS_URL

    for budget in (50, 3000):
        app = create_app({"REDIS_URL": REDIS_URL, "ARENA_WORKER_CONNECTIONS": budget})
        pool = app.extensions["arena"].store.r.connection_pool
        assert pool.max_connections == budget + POOL_HEADROOM
    app = create_app({"REDIS_URL": REDIS_URL})  # gunicorn_conf's default, 2000
    assert app.extensions["arena"].store.r.connection_pool.max_connections == 2000 + POOL_HEADROOM


def test_at_the_connection_cap_a_new_connection_is_answered_503_at_once(
    tmp_path, own_redis  # noqa: F811 (the fixture)
) -> None:
    """A worker holding ARENA_WORKER_CONNECTIONS connections (here 20 event streams)
    answers the next one at once with a 503 problem and Retry-After, instead of leaving
    it in the listen queue until a stream ends; with room again, it serves."""
    import http.client
    import socket

    cap = 20
    s = Service(tmp_path, workers=1, REDIS_URL=f"redis://127.0.0.1:{own_redis}/0",
                ARENA_KEY_PREFIX="cap:", ARENA_RATE_LIMIT="0", ARENA_SWEEPER="0",
                ARENA_WORKER_CONNECTIONS=str(cap), ARENA_ACCESS_LOG="0",
                # all of the cap for the streams of this one address: no probes' reserve,
                # no share per client (tests/test_connections.py has those)
                ARENA_RESERVED_CONNECTIONS="0", ARENA_CLIENT_SHARE="0",
                ARENA_STREAMS_PER_CLIENT="0", ARENA_SPECTATOR_SHARE="0",
                ARENA_HELD_SHARE="0", ARENA_HELD_NETWORK_SHARE="0",
                ARENA_SSE_KEEPALIVE="0.5")  # a closed stream is noticed at its next write
    streams: list[socket.socket] = []
    try:
        s.wait_healthy()
        bots = [requests_json("POST", s.url("/bots"), json={"name": "cap0"})]
        bots.append(requests_json("POST", s.url("/bots"), bots[0]["token"],  # one owner's
                                  json={"name": "cap1"}))
        game = requests_json("POST", s.url("/games"), bots[0]["token"],
                             json={"players": 2, "seats": [b["id"] for b in bots]})
        for _ in range(cap):
            sock = socket.create_connection(("127.0.0.1", s.port), timeout=10)
            sock.sendall(f"GET /games/{game['id']}/events HTTP/1.1\r\nHost: x\r\n\r\n"
                         .encode())
            assert sock.recv(4096).startswith(b"HTTP/1.1 200"), "a stream under the cap"
            streams.append(sock)

        # answered, not held: a request left in the listen queue waits for a stream to
        # end, and none does while the test holds them, so it would run out the client's
        # patience (a timeout that raises; far beyond a slow machine's answer)
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=120)
        conn.request("GET", f"/games/{game['id']}")
        answer = conn.getresponse()
        body = json.loads(answer.read())
        assert answer.status == 503, (answer.status, body)
        assert answer.getheader("Retry-After") == "1"
        assert answer.getheader("Content-Type") == "application/problem+json"
        assert body["type"] == "/problems/over-capacity"
        assert body["instance"] == f"/games/{game['id']}"
        conn.close()

        for sock in streams[:5]:
            sock.close()
        streams = streams[5:]

        def served() -> bool:
            c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=5)
            try:
                c.request("GET", "/healthz")
                return c.getresponse().status == 200
            finally:
                c.close()

        wait_for(served, 10, "room under the cap")
    finally:
        for sock in streams:
            sock.close()
        s.stop()


def requests_json(method: str, url: str, token: str | None = None, **kw: Any) -> Any:
    import requests

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    r = requests.request(method, url, headers=headers, timeout=15, **kw)
    assert r.status_code in (200, 201), (r.status_code, r.text)
    return r.json()
