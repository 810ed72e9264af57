"""Limits that only real servers show (issue 12, points 6 and 8): a chunked body beyond
the size limit, under werkzeug's development server and under gunicorn (they frame a
chunked body differently), and a frozen Redis.

Every server here is a real process or thread on a free port, stopped in a finalizer.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from werkzeug.serving import make_server

from service.app import DEFAULTS, create_app
from service.embedded_redis import free_port
from tests.conftest import REDIS_URL
from tests.test_serve import Serve, kill_leftovers

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
