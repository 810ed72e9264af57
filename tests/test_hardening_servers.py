"""Limits that only real servers show: a chunked body beyond
the size limit, under werkzeug's development server and under gunicorn (they frame a
chunked body differently), and a frozen Redis.

Every server here is a real process or thread on a free port, stopped in a finalizer.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from werkzeug.serving import make_server

from service.http.app import DEFAULTS, create_app
from service.storage.embedded import find_server_binary, free_port, ping
from tests.conftest import REDIS_URL
from tests.test_serve import Serve, kill_leftovers, stop_process, wait_for

# each test starts what it needs (no module-wide service): pytest-xdist may run them on
# different workers (tests/conftest.py)
SPREAD_OVER_WORKERS = True
EXPECTED_S = 45  # seconds, the whole module: the order workers take it in (tests/conftest.py)

LIMIT = DEFAULTS["MAX_CONTENT_LENGTH"]


def chunked_post(port: int, path: str, total: int, chunk: int = 64 * 1024) -> tuple[int, bytes]:
    """POST ``total`` bytes of a JSON string with Transfer-Encoding: chunked and no
    Content-Length; (status, body) of the answer. The server may answer (and close)
    before the whole body is sent: sending then stops and the answer is read."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(b"POST " + path.encode() + b" HTTP/1.1\r\nHost: t\r\n"
                     b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        body = b'{"name": "' + b"x" * (total - 12) + b'"}'
        try:
            for i in range(0, len(body), chunk):
                part = body[i:i + chunk]
                sock.sendall(b"%x\r\n%s\r\n" % (len(part), part))
            sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # answered and closed early: fine, read the answer
        data = b""
        while b"\r\n\r\n" not in data or not _complete(data):
            more = sock.recv(65536)
            if not more:
                break
            data += more
    head, _, rest = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), rest


def _complete(data: bytes) -> bool:
    head, _, rest = data.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(rest) >= int(line.split(b":")[1])
    return False


@pytest.fixture
def dev_server(key_prefix) -> Iterator[int]:
    """The app under werkzeug's development server (what ``flask run`` uses)."""
    app = create_app({"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix,
                      "ARENA_RATE_LIMIT": 0})
    server = make_server("127.0.0.1", free_port(), app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.port
    finally:
        server.shutdown()
        thread.join(10)


@pytest.fixture
def gunicorn(tmp_path: Path, key_prefix: str, redis_client) -> Iterator[int]:
    """``allfours serve`` (gunicorn, gevent worker) on the shared Redis, own prefix."""
    process = Serve(tmp_path, tmp_path / "unused-data", REDIS_URL=REDIS_URL,
                    ARENA_KEY_PREFIX=key_prefix, ARENA_RATE_LIMIT="0", ARENA_SWEEPER="0")
    try:
        process.wait_healthy()
        yield process.port
    finally:
        process.stop()
        kill_leftovers(process.seen)


@pytest.mark.parametrize("server", ["dev_server", "gunicorn"])
def test_chunked_body_over_the_limit_is_413(request, server) -> None:
    """A chunked body carries no Content-Length, so werkzeug reads it only up to the
    limit and returned the truncated text: a 100 MB body answered 400 malformed-json."""
    port = request.getfixturevalue(server)
    for total in (100 * 1024 * 1024, LIMIT + 1):
        status, body = chunked_post(port, "/bots", total)
        assert status == 413, (total, body[:300])
        assert b'"/problems/payload-too-large"' in body
    # at the limit exactly: read whole, parsed (a name that long is invalid: 422)
    status, body = chunked_post(port, "/bots", LIMIT)
    assert status == 422 and b"/problems/validation" in body, body[:300]
    status, body = chunked_post(port, "/bots", 40)
    assert status == 201, body


def test_body_limit_is_stated_in_the_contract() -> None:
    spec = (Path(__file__).resolve().parent.parent / "openapi.yaml").read_text()
    assert f"at most {LIMIT} bytes" in spec


# --- 8: a frozen Redis --------------------------------------------------------------------------

# How long the tests wait for an answer from a service on a frozen Redis: far beyond any
# wait the service means (its command timeout, a long-poll's own), so running out of it
# says "hung", never "slow machine"
PATIENCE_S = 120


def socket_timeouts(client) -> set[float]:
    """The socket and connect timeouts of a redis-py client's pooled connections."""
    kwargs = client.connection_pool.connection_kwargs
    return {kwargs["socket_timeout"], kwargs["socket_connect_timeout"]}


def redis_failures(call) -> float:
    """The service's count of Redis failures (requests answered 503, listeners that lost
    their connection), from its metrics."""
    text = call("GET", "/metrics").text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("allfours_redis_errors_total{")
               and 'where="scrape"' not in line)


@pytest.fixture
def frozen_redis(tmp_path: Path) -> Iterator[subprocess.Popen]:
    """A private Redis (never the shared one) that the test may SIGSTOP; always resumed
    and stopped at teardown."""
    port = free_port()
    workdir = tmp_path / "frozen-redis"
    workdir.mkdir()
    proc = subprocess.Popen(
        [find_server_binary(), "--bind", "127.0.0.1", "--port", str(port), "--save", "",
         "--appendonly", "no", "--dir", str(workdir)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    proc.port = port  # type: ignore[attr-defined]
    try:
        wait_for(lambda: ping("127.0.0.1", port), 20, "the test's own Redis")
        yield proc
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        stop_process(proc, signal.SIGTERM)


def test_a_frozen_redis_is_a_503_and_long_polls_still_wait(tmp_path, frozen_redis):
    """SIGSTOP leaves Redis's socket open and silent: every request is answered 503 with
    Retry-After (how long it waits for Redis, and how often, is
    ``test_a_request_waits_for_a_frozen_redis_once_on_the_command_timeout``), and the
    pub/sub listener's waiting is its own, so long-polls still wait their full time and
    are still woken. No elapsed time is asserted: a loaded machine may be slow, but a
    hang shows as the client's read timeout, far beyond any wait the service means."""
    service = Serve(tmp_path, tmp_path / "unused-data",
                    REDIS_URL=f"redis://127.0.0.1:{frozen_redis.port}/0", ARENA_SWEEPER="0")
    try:
        service.wait_healthy()
        s = requests.Session()
        base = service.url("")

        def call(method: str, path: str, token: str | None = None, **kw) -> requests.Response:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            return s.request(method, base + path, headers=headers, timeout=PATIENCE_S, **kw)

        a = call("POST", "/bots", json={"name": "a"}).json()
        b = call("POST", "/bots", a["token"], json={"name": "b"}).json()  # a's owner
        game = call("POST", "/games", a["token"],
                    json={"players": 2, "seats": [a["id"], b["id"]], "seed": 1}).json()
        path = f"/games/{game['id']}"
        tokens = {a["id"]: a["token"], b["id"]: b["token"]}
        view = call("GET", path).json()
        mover = tokens[view["seats"][view["turn"]]["bot_id"]]
        idle = b["token"] if mover == a["token"] else a["token"]
        mine = call("GET", path, mover).json()

        # healthy: a quiet long-poll, longer than the command timeout, runs to its own
        # deadline: the service says it timed out (its clock, not ours), and no
        # listener or request failed on the way (the short command timeout does not
        # cut the listener's waiting)
        quiet = 2 * float(DEFAULTS["ARENA_REDIS_TIMEOUT"])
        failures = redis_failures(call)
        r = call("GET", path + "/turn", idle, params={"timeout": quiet})
        assert r.status_code == 200 and r.json()["timed_out"] is True, r.text
        assert r.json()["view"]["version"] == mine["version"]
        assert redis_failures(call) == failures, service.output()[-3000:]

        os.kill(frozen_redis.pid, signal.SIGSTOP)
        requests_ = [
            ("GET", path, None, {}),
            ("GET", path, mover, {}),
            ("POST", path + "/actions", mover, {"json": {"action": mine["legal_actions"][0]}}),
            ("GET", path + "/turn", idle, {"params": {"timeout": 20}}),
            ("GET", "/bots/me/turns", idle, {"params": {"timeout": 20}}),
            ("GET", "/readyz", None, {}),
            ("POST", "/bots", None, {"json": {"name": "c"}}),
        ]
        for method, p, token, kw in requests_:
            # answered, not held: a request that hung on the frozen socket would raise
            # the client's read timeout. A long-poll is a 503 too, not a 200 timed out:
            # it failed on Redis rather than waiting out its poll on a cached game
            r = call(method, p, token, **kw)
            assert r.status_code == 503, (method, p, r.status_code, r.text)
            assert r.json()["type"] == "/problems/service-unavailable"
            assert int(r.headers["Retry-After"]) >= 1
        os.kill(frozen_redis.pid, signal.SIGCONT)

        # resumed: the action applies, and a waiting long-poll hears it
        def wait_ready() -> bool:
            return call("GET", "/readyz").status_code == 200
        wait_for(wait_ready, 20, "the service to see Redis again")
        # (the action answered 503 may have been applied all the same: its script reached
        # Redis before the freeze showed. Only an Idempotency-Key makes a retry safe.)
        view = call("GET", path).json()
        mover = tokens[view["seats"][view["turn"]]["bot_id"]]
        mine = call("GET", path, mover).json()
        result: dict[str, requests.Response] = {}
        waiter = threading.Thread(target=lambda: result.setdefault(
            "r", call("GET", path + "/turn", params={"timeout": 20,
                                                     "after": view["version"]})))
        waiter.start()
        time.sleep(1.0)
        act = call("POST", path + "/actions", mover, json={"action": mine["legal_actions"][0]})
        assert act.status_code == 200, act.text
        waiter.join(PATIENCE_S + 5)
        assert not waiter.is_alive()
        # woken: a poll that ran out its time instead answers timed_out with the game
        # as it was
        assert result["r"].status_code == 200, result["r"].text
        assert result["r"].json()["timed_out"] is False
        assert result["r"].json()["view"]["version"] > view["version"]
    finally:
        os.kill(frozen_redis.pid, signal.SIGCONT)
        service.stop()
        kill_leftovers(service.seen)


def test_a_first_long_poll_on_a_frozen_redis_is_a_503(key_prefix, frozen_redis):
    """No listener running yet (no long-poll so far in this process): subscribing is
    part of the long-poll, and its connection handshake used the listener's long socket
    timeout. Now the listener's connection, and its wait for the subscription's
    confirmation, have the command timeout, and the long-poll fails on that one wait.
    (The bot's token is known to the process already, so the long-poll gets that far
    without Redis.)"""
    app = create_app({"REDIS_URL": f"redis://127.0.0.1:{frozen_redis.port}/0",
                      "ARENA_RATE_LIMIT": 0})
    timeout = float(app.config["ARENA_REDIS_TIMEOUT"])
    wakeups = app.extensions["arena"].wakeups
    assert socket_timeouts(wakeups.client) == {timeout}
    assert wakeups.confirm_s == timeout
    c = app.test_client()
    bot = c.post("/bots", json={"name": "a"}).json
    auth = {"Authorization": f"Bearer {bot['token']}"}
    game = c.post("/games", json={"players": 2}, headers=auth).json
    os.kill(frozen_redis.pid, signal.SIGSTOP)
    try:
        for path in (f"/games/{game['id']}/turn", "/bots/me/turns"):
            # a 503, not a 200 timed out: it failed on Redis rather than waiting out its
            # poll (a hang would be the test's own timeout)
            r = c.get(path, headers=auth, query_string={"timeout": 20})
            assert r.status_code == 503 and r.headers["Retry-After"], (path, r.status_code)
            assert r.json["type"] == "/problems/service-unavailable"
    finally:
        os.kill(frozen_redis.pid, signal.SIGCONT)


def test_a_request_waits_for_a_frozen_redis_once_on_the_command_timeout(
        key_prefix, frozen_redis, monkeypatch):
    """Every Redis connection a request uses gives up after ARENA_REDIS_TIMEOUT (a client
    built with a socket timeout of its own held every request on a frozen Redis for
    that long), and a request waits for it once: a 503's rate-limit hit is not counted
    in the teardown, which would wait out the timeout a second time before the answer.
    Checked by what the clients are given and what the request calls, not by a clock."""
    app = create_app({"REDIS_URL": f"redis://127.0.0.1:{frozen_redis.port}/0",
                      "ARENA_KEY_PREFIX": key_prefix})
    assert app.config["ARENA_RATE_LIMIT"], "the rate limit's hit is part of the check"
    timeout = float(app.config["ARENA_REDIS_TIMEOUT"])
    assert timeout == DEFAULTS["ARENA_REDIS_TIMEOUT"]
    store = app.extensions["arena"].store
    assert socket_timeouts(store.r) == {timeout}
    c = app.test_client()
    a = c.post("/bots", json={"name": "a"}).json
    owner = {"Authorization": f"Bearer {a['token']}"}
    b = c.post("/bots", json={"name": "b"}, headers=owner).json
    game = c.post("/games", json={"players": 2, "seats": [a["id"], b["id"]], "seed": 1},
                  headers=owner).json
    view = c.get(f"/games/{game['id']}").json
    tokens = {a["id"]: a["token"], b["id"]: b["token"]}
    auth = {"Authorization": f"Bearer {tokens[view['seats'][view['turn']]['bot_id']]}"}
    mine = c.get(f"/games/{game['id']}", headers=auth).json
    hits: list[tuple] = []
    counted = store.hit
    monkeypatch.setattr(store, "hit", lambda *args: hits.append(args) or counted(*args))
    os.kill(frozen_redis.pid, signal.SIGSTOP)
    try:
        # the first long-poll of the process fails on its subscription, before the game
        # read its rate-limit hit rides with; the action fails on that read itself
        for method, path, kw in [
            ("GET", f"/games/{game['id']}/turn", {"query_string": {"timeout": 20}}),
            ("POST", f"/games/{game['id']}/actions",
             {"json": {"action": mine["legal_actions"][0]}}),
        ]:
            r = c.open(path, method=method, headers=auth, **kw)
            assert r.status_code == 503 and r.headers["Retry-After"], (path, r.status_code)
            assert hits == [], (path, "after the 503, its rate-limit hit went to Redis")
    finally:
        os.kill(frozen_redis.pid, signal.SIGCONT)
