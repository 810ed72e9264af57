"""Shared fixtures: a real Redis, and a key prefix of its own for every test.

Tests never FLUSHDB: each gets a unique prefix and deletes only its own keys at the end,
so they can share a Redis with anything else (a developer's running service included).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")


def missing(reason: str) -> None:
    """Something a test needs is not on this machine: skip with the reason on a developer's
    machine, but fail in CI (``CI=true``), where .ci/run installs and starts everything, so
    that no check is ever skipped there unnoticed."""
    if os.environ.get("CI"):
        pytest.fail(f"CI must provide this: {reason}")
    pytest.skip(reason)


def _redis():
    """A client for the test Redis: a cluster client when it is a cluster's node."""
    from service.storage.redis_client import connect

    return connect(REDIS_URL, 2)


@pytest.fixture(scope="session")
def redis_client():
    """A client for the test Redis; service tests are skipped with a reason if none runs."""
    client = _redis()
    try:
        client.ping()
    except Exception as exc:
        missing(f"no Redis at {REDIS_URL}: {exc}")
    return client


@pytest.fixture
def key_prefix(redis_client) -> Iterator[str]:
    """A unique key prefix; at teardown every key under it (and only those) is deleted."""
    prefix = f"aftest:{uuid.uuid4().hex[:12]}:"
    yield prefix
    batch = []
    for key in redis_client.scan_iter(match=f"{prefix}*", count=1000):
        batch.append(key)
        if len(batch) >= 500:
            redis_client.delete(*batch)
            batch.clear()
    if batch:
        redis_client.delete(*batch)


@pytest.fixture(autouse=True)
def contract_checked(monkeypatch) -> Iterator[None]:
    """Every answer this test receives (Flask test client, ``requests``) must fit
    ``openapi.yaml``: a violation fails the test where it shows up (``tests/contract.py``),
    and one that arrived in another thread fails it here."""
    from tests.contract import CONTRACT, install

    since = len(CONTRACT.violations)
    install(monkeypatch, CONTRACT)
    yield
    missed = CONTRACT.elsewhere(since)
    if missed:
        pytest.fail("answers outside openapi.yaml:\n" + "\n".join(missed), pytrace=False)
