"""The client paces itself by the service's ``RateLimit`` fields: it sleeps
until the window resets rather than send a request that would get a 429, and still
honours ``Retry-After`` when one comes."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from werkzeug.serving import make_server

from clients.api import ArenaClient, RetryPolicy, _ratelimit
from service.http.app import create_app
from tests.conftest import REDIS_URL


def test_the_ratelimit_field_is_read_as_the_draft_writes_it() -> None:
    assert _ratelimit('"default";r=50;t=30') == (50, 30.0)
    assert _ratelimit('"burst";r=1;t=2, "default";r=7;t=9') == (7, 9.0)
    assert _ratelimit('"burst";r=1;t=2') == (1, 2.0)
    assert _ratelimit(None) is None and _ratelimit("garbage") is None


@pytest.fixture
def small_budget(redis_client) -> Iterator[str]:
    """The real service on a real socket, with a budget of 20 requests per 2 s."""
    prefix = f"aftest:{uuid.uuid4().hex[:12]}:"
    app = create_app({"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": prefix,
                      "ARENA_RATE_LIMIT": 20, "ARENA_RATE_WINDOW": 2})
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        keys = list(redis_client.scan_iter(match=f"{prefix}*"))
        if keys:
            redis_client.delete(*keys)


def test_against_the_service_a_paced_client_never_gets_a_429(small_budget) -> None:
    client = ArenaClient(small_budget, retry=RetryPolicy(attempts=1))  # a 429 would raise
    client.register("pacer")
    started = time.monotonic()
    threads = [threading.Thread(target=lambda: [client.me() for _ in range(15)])
               for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(30)
    assert client.rate_limited == 0
    assert time.monotonic() - started > 1.0  # 60 requests at 20 per 2 s: it waited
    left, reset = client.budget
    assert left is not None and 0 <= left < 20 and reset <= 2.0
