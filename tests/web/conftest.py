"""Browser tests: the real service (gunicorn, gevent workers, real Redis), bots playing over
HTTP in threads, and headless Chromium driven by Playwright.

Chromium comes from the system (``apt-get install -y chromium``): Playwright's own browser
download is not used. The tests are skipped, with the reason, when either is missing.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REDIS_URL, missing
from tests.web.support import (
    CHROMIUM,
    CHROMIUM_ARGS,
    DESKTOP,
    Api,
    RandomBot,
    Service,
    new_page,
)


@pytest.fixture(scope="session")
def service(tmp_path_factory) -> Iterator[Service]:
    import redis

    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
    try:
        client.ping()
    except Exception as exc:
        missing(f"no Redis at {REDIS_URL}: {exc}")
    prefix = f"aftest:web:{uuid.uuid4().hex[:10]}:"
    svc = Service(prefix, tmp_path_factory.mktemp("web") / "gunicorn.log")
    try:
        yield svc
    finally:
        svc.stop()
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        for i in range(0, len(keys), 500):
            client.delete(*keys[i : i + 500])


@pytest.fixture
def api(service) -> Api:
    return Api(service.base)


@pytest.fixture
def bots(service) -> Iterator[Callable[..., RandomBot]]:
    """Start random bots; all are stopped at the end of the test."""
    started: list[RandomBot] = []

    def start(token: str, **kw: Any) -> RandomBot:
        bot = RandomBot(service.base, token, seed=len(started), **kw)
        bot.start()
        started.append(bot)
        return bot

    yield start
    for b in started:
        b.stop()
    for b in started:
        b.join(10)


# --- the browser ---------------------------------------------------------------------------


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    try:
        from playwright import sync_api
    except ImportError:
        missing("no Playwright: pip install -e '.[test]'")
    if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
        missing(f"no Chromium at {CHROMIUM}: apt-get install -y chromium")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser, service) -> Iterator[Any]:
    """A fresh browser tab (desktop size) on the service; console errors fail the test."""
    pg = new_page(browser, service, DESKTOP)
    problems = pg.problems
    yield pg
    pg.context.close()
    assert not problems, problems
