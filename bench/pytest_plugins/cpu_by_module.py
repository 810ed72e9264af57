"""A pytest plugin for bench/suite.py: the CPU seconds each test module used, its own and
its waited-for children's (the services, bots and browsers its fixtures started and
stopped), summed from ``getrusage`` around every test's setup, call and teardown.

Module-scoped fixtures stop in their module's last teardown, so their CPU lands on their
module; a session-wide fixture's lands on no module (the total says how much that is).
Each pytest-xdist worker writes its own JSON file into ``$SUITE_CPU_DIR``.
"""

from __future__ import annotations

import json
import os
import resource
from collections.abc import Generator
from pathlib import Path

import pytest

_cpu: dict[str, float] = {}


def _now() -> float:
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator:
    began = _now()
    yield
    module = item.nodeid.split("::", 1)[0]
    _cpu[module] = _cpu.get(module, 0.0) + _now() - began


def pytest_sessionfinish(session: pytest.Session) -> None:
    out = os.environ.get("SUITE_CPU_DIR")
    if not out:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    Path(out, f"{worker}.json").write_text(json.dumps({"modules": _cpu, "total": _now()}))
