"""Limits that only real servers show (issue 12, points 6 and 8): a chunked body beyond
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


def test_a_frozen_redis_is_a_quick_503_and_long_polls_still_wait(tmp_path, frozen_redis):
    """SIGSTOP leaves Redis's socket open and silent: every request waited out the
    client's 10 s socket timeout (an action 20 s: its rate-limit hit went to Redis again
    after the failure) before its 503. Now ~1.5 s, with Retry-After; and the long
    timeout that waiting needs is the pub/sub listener's own, so long-polls still wait
    their full time and are still woken."""
    service = Serve(tmp_path, tmp_path / "unused-data",
                    REDIS_URL=f"redis://127.0.0.1:{frozen_redis.port}/0", ARENA_SWEEPER="0")
    try:
        service.wait_healthy()
        s = requests.Session()
        base = service.url("")

        def call(method: str, path: str, token: str | None = None, **kw) -> requests.Response:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            return s.request(method, base + path, headers=headers, timeout=60, **kw)

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

        # healthy: a long-poll waits its whole timeout (the short command timeout does
        # not cut it), and one is woken by the action it waits for
        started = time.monotonic()
        r = call("GET", path + "/turn", idle, params={"timeout": 3})
        assert r.status_code == 200 and r.json()["timed_out"]
        assert 2.9 <= time.monotonic() - started < 15

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
            started = time.monotonic()
            r = call(method, p, token, **kw)
            took = time.monotonic() - started
            assert r.status_code == 503, (method, p, r.status_code, r.text)
            assert r.json()["type"] == "/problems/service-unavailable"
            assert int(r.headers["Retry-After"]) >= 1
            # quick; the defect waited out a 10 s socket timeout (or the poll's 20 s): a
            # bound far from both, so that a loaded machine's stall does not decide it
            assert took < 6.0, (method, p, took)
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
        started = time.monotonic()
        act = call("POST", path + "/actions", mover, json={"action": mine["legal_actions"][0]})
        assert act.status_code == 200, act.text
        waiter.join(25)
        assert time.monotonic() - started < 10  # woken, not the poll's 20 s timeout
        assert result["r"].status_code == 200
        assert result["r"].json()["view"]["version"] > view["version"]
    finally:
        os.kill(frozen_redis.pid, signal.SIGCONT)
        service.stop()
        kill_leftovers(service.seen)


def test_a_first_long_poll_on_a_frozen_redis_is_a_quick_503(key_prefix, frozen_redis):
    """No listener running yet (no long-poll so far in this process): subscribing is
    part of the long-poll, and its connection handshake waited out a 10 s socket
    timeout. (The bot's token is known to the process already, so the long-poll gets
    that far without Redis.)"""
    app = create_app({"REDIS_URL": f"redis://127.0.0.1:{frozen_redis.port}/0",
                      "ARENA_RATE_LIMIT": 0})
    c = app.test_client()
    bot = c.post("/bots", json={"name": "a"}).json
    auth = {"Authorization": f"Bearer {bot['token']}"}
    game = c.post("/games", json={"players": 2}, headers=auth).json
    os.kill(frozen_redis.pid, signal.SIGSTOP)
    try:
        for path in (f"/games/{game['id']}/turn", "/bots/me/turns"):
            started = time.monotonic()
            r = c.get(path, headers=auth, query_string={"timeout": 20})
            took = time.monotonic() - started
            assert r.status_code == 503 and r.headers["Retry-After"], (path, r.status_code)
            assert took < 6.0, (path, took)  # not the 10 s socket timeout, nor the 20 s poll
    finally:
        os.kill(frozen_redis.pid, signal.SIGCONT)
