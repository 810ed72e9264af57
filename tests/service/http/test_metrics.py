"""``/metrics`` in one process (the Flask test client): the counters that the two-worker
test in tests/test_operations.py cannot provoke cheaply: rate-limit rejections and Redis
errors, the token, and X-Request-ID on every answer (errors included).

The default registry is shared by every app in the process, so each check compares the
value before and after."""

from __future__ import annotations

import time

from prometheus_client.parser import text_string_to_metric_families

from service.http.app import create_app
from service.storage.embedded import free_port
from tests.conftest import REDIS_URL


def sample(client, name: str, token: str | None = None, **labels: str) -> float:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    text = client.get("/metrics", headers=headers).get_data(as_text=True)
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
    return 0.0


def test_rate_limit_rejections_are_counted(key_prefix) -> None:
    app = create_app({"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix,
                      "ARENA_RATE_LIMIT": 2, "ARENA_RATE_WINDOW": 60})
    c = app.test_client()
    before = sample(c, "allfours_rate_limited_total")
    # the budget is a fixed window (unix time // 60): start well clear of its boundary so
    # that the four requests fall in one window however slow the machine is
    to_boundary = 60 - time.time() % 60
    if to_boundary < 15:
        time.sleep(to_boundary + 0.1)
    statuses = [c.get("/games").status_code for _ in range(4)]
    assert statuses == [200, 200, 429, 429]
    assert sample(c, "allfours_rate_limited_total") == before + 2
    assert sample(c, "allfours_http_requests_total", route="/games", status="429") >= 2
    refused = c.get("/games")
    assert refused.status_code == 429 and refused.headers["X-Request-ID"]


def test_redis_errors_are_counted_and_answered_503() -> None:
    dead = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    app = create_app({"REDIS_URL": dead, "ARENA_KEY_PREFIX": "nowhere:",
                      "ARENA_RATE_LIMIT": 0})
    c = app.test_client()
    labels = {"where": "request"}
    r = c.get("/readyz", headers={"X-Request-ID": "probe-1"})
    assert r.status_code == 503 and r.headers["X-Request-ID"] == "probe-1"
    # the scrape answers without Redis too (the games gauge is left out, and counted)
    first = sample(c, "allfours_redis_errors_total", **labels)
    assert first >= 1
    assert c.get("/games/abcdefabcdef").status_code == 503
    assert sample(c, "allfours_redis_errors_total", **labels) == first + 1
    assert sample(c, "allfours_redis_errors_total", where="scrape") >= 2
    assert sample(c, "allfours_games") == 0.0


def test_the_metrics_token(key_prefix) -> None:
    app = create_app({"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix,
                      "ARENA_METRICS_TOKEN": "s3cret"})
    c = app.test_client()
    assert c.get("/metrics").status_code == 401
    assert c.get("/metrics", headers={"Authorization": "Bearer nope"}).status_code == 403
    ok = c.get("/metrics", headers={"Authorization": "Bearer s3cret"})
    assert ok.status_code == 200 and "allfours_games" in ok.get_data(as_text=True)
