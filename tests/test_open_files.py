"""``allfours serve`` raises the soft open-file limit to the connection budget.

A real ``allfours serve`` is started with a low soft limit (as a login shell's 1,024
default) under a given hard limit, and the gunicorn worker's own ``/proc/<pid>/limits``
is read: what a worker holding ``ARENA_WORKER_CONNECTIONS`` connections actually gets.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from service.cli.serve import open_files_needed
from service.storage.embedded import free_port
from tests.conftest import REDIS_URL
from tests.test_serve import (
    START_TIMEOUT,
    _proc_stat,
    descendants,
    http_status,
    kill_leftovers,
    stop_process,
    wait_for,
)


def soft_open_files(pid: int) -> int:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return int(line.split()[3])
    raise AssertionError("no 'Max open files' line")


@pytest.fixture
def serve_under(tmp_path: Path) -> Iterator:
    """Start ``allfours serve`` (one worker, the shared Redis) with RLIMIT_NOFILE set to
    ``(soft, hard)`` before it runs; return (process, gunicorn worker pid, its output)."""
    started: list[tuple[subprocess.Popen, dict[int, str]]] = []

    def start(soft: int, hard: int, **env: str) -> tuple[int, str]:
        port = free_port()
        log = tmp_path / f"serve-{uuid.uuid4().hex[:8]}.log"

        def lower() -> None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "service.cli.main", "serve", "--port", str(port),
                 "--workers", "1", "--no-house-bots"],
                env={**os.environ, "REDIS_URL": REDIS_URL, **env}, stdout=out, stderr=out,
                cwd=tmp_path, start_new_session=True, preexec_fn=lower,
            )  # fmt: skip
        seen: dict[int, str] = {}
        started.append((proc, seen))

        def up() -> bool:
            assert proc.poll() is None, log.read_text()
            return http_status(f"http://127.0.0.1:{port}/healthz", 1) == 200

        wait_for(up, START_TIMEOUT, "/healthz")
        seen.update(descendants(proc.pid))
        workers = [pid for pid, cmd in seen.items() if "gunicorn" in cmd]
        # the arbiter and its worker: the worker is the one whose parent is gunicorn
        worker = next(pid for pid in workers if (_proc_stat(pid) or ("", 0))[1] in workers)
        return worker, log.read_text()

    yield start
    for proc, seen in started:
        stop_process(proc)
        kill_leftovers(seen)


def test_serve_raises_the_soft_limit_to_what_the_budget_needs(serve_under) -> None:
    env = {"ARENA_WORKER_CONNECTIONS": "1000"}
    needed = open_files_needed(env)
    assert 1024 < needed < 4096
    worker, output = serve_under(1024, 4096, **env)
    assert soft_open_files(worker) == needed
    assert "open-file limit" not in output


def test_serve_says_in_one_line_when_the_hard_limit_is_too_low(serve_under) -> None:
    env = {"ARENA_WORKER_CONNECTIONS": "2000"}
    needed = open_files_needed(env)
    assert needed > 4096
    worker, output = serve_under(1024, 4096, **env)
    assert soft_open_files(worker) == 4096  # as far as the hard limit allows
    lines = [line for line in output.splitlines() if "open-file limit" in line]
    assert len(lines) == 1, output
    assert "is 4096" in lines[0] and str(needed) in lines[0]
    assert "ulimit -Hn" in lines[0] and "ARENA_WORKER_CONNECTIONS" in lines[0]
