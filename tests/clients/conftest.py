"""The live service for client tests: gunicorn (gevent workers, as deployed) on a free port,
on a Redis key prefix of its own; a TCP proxy that can cut a connection on purpose; and
helpers for bots run as processes of their own (the shell and TypeScript bots).

One service serves the whole session (starting gunicorn costs a second or two); every
test registers bots of its own, so tests never see each other's games. At the end the
process group is stopped (bounded waits, SIGKILL as a last resort) and every key under
the prefix is deleted.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from service.storage.embedded import free_port
from tests.conftest import REDIS_URL

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 30.0
ADMIN_TOKEN = "client-tests-admin-token"


def first_line(proc: subprocess.Popen[str], seconds: float) -> str:
    """The first line a bot process prints (the shell and TypeScript bots: the id and token
    they registered), read on a thread of its own so that a silent bot fails the test after
    ``seconds`` instead of hanging it."""
    assert proc.stdout is not None
    stdout = proc.stdout
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(stdout.readline()))
    reader.start()
    reader.join(seconds)
    return line[0]


def kill_bots(*procs: subprocess.Popen[str]) -> None:
    """Kill and reap what still runs of ``procs`` (a test that failed half-way)."""
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/readyz", timeout=1) as r:
            return r.status == 200
    except OSError:
        return False


@pytest.fixture(scope="session")
def live_url(redis_client, tmp_path_factory) -> Iterator[str]:
    """Base URL of a real ``gunicorn service.http.wsgi:app`` against the test Redis."""
    prefix = f"aftest:{uuid.uuid4().hex[:12]}:"
    port = free_port()
    env = {
        **os.environ,
        "REDIS_URL": REDIS_URL,
        "ARENA_KEY_PREFIX": prefix,
        "ARENA_RATE_LIMIT": "0",
        "ARENA_ADMIN_TOKEN": ADMIN_TOKEN,
        "ARENA_SSE_KEEPALIVE": "1",
        "ARENA_LOG_LEVEL": "warning",
    }
    log_path = tmp_path_factory.mktemp("live") / "gunicorn.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", "python:service.http.gunicorn_conf",
             "--bind", f"127.0.0.1:{port}", "--workers", "2", "service.http.wsgi:app"],
            cwd=ROOT, env=env, stdout=log, stderr=log, start_new_session=True,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not _healthy(url):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"gunicorn did not start:\n{log_path.read_text()}")
            time.sleep(0.1)
        yield url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        keys = list(redis_client.scan_iter(match=f"{prefix}*", count=1000))
        for i in range(0, len(keys), 500):
            redis_client.delete(*keys[i : i + 500])


class TcpProxy:
    """A localhost TCP proxy in front of ``upstream``: bytes pass through unchanged, except
    that when ``drop_next_action`` is set, the next ``POST .../actions`` is forwarded to the
    service and its answer is thrown away: the connection is cut after the service has
    acted (the worst moment for a client). It records each request's head."""

    def __init__(self, upstream_port: int, port: int = 0) -> None:
        self.upstream = ("127.0.0.1", upstream_port)
        self.listener = socket.create_server(("127.0.0.1", port))
        self.listener.settimeout(0.2)
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.drop_next_action = threading.Event()
        self.heads: list[str] = []
        self.dropped = 0
        self._closed = threading.Event()
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def action_heads(self) -> list[str]:
        with self._lock:
            return [h for h in self.heads if h.startswith("POST ") and "/actions" in h]

    def close(self) -> None:
        self._closed.set()
        self._thread.join(5)
        self.listener.close()
        with self._lock:
            socks, self._socks = self._socks, []
        for s in socks:
            _kill(s)

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self.listener.accept()
            except (TimeoutError, OSError):
                continue
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
                upstream.settimeout(None)
            except OSError:
                _kill(client)
                continue
            with self._lock:
                self._socks += [client, upstream]
            drop = threading.Event()
            threading.Thread(target=self._up, args=(client, upstream, drop), daemon=True).start()
            threading.Thread(target=self._down, args=(upstream, client, drop),
                             daemon=True).start()

    def _up(self, client: socket.socket, upstream: socket.socket, drop: threading.Event) -> None:
        try:
            while data := client.recv(65536):
                if data[:5] in (b"POST ", b"GET /"):
                    head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1")
                    with self._lock:
                        self.heads.append(head)
                    first_line = head.split("\r\n", 1)[0]
                    action = first_line.startswith("POST ") and "/actions" in first_line
                    if action and self.drop_next_action.is_set():
                        self.drop_next_action.clear()
                        drop.set()
                upstream.sendall(data)
        except OSError:
            pass
        finally:
            _kill(upstream)

    def _down(self, upstream: socket.socket, client: socket.socket,
              drop: threading.Event) -> None:
        try:
            while data := upstream.recv(65536):
                if drop.is_set():  # the service has answered, so it has acted: cut now
                    with self._lock:
                        self.dropped += 1
                    break
                client.sendall(data)
        except OSError:
            pass
        finally:
            _kill(client)
            _kill(upstream)


def _kill(s: socket.socket) -> None:
    with contextlib.suppress(OSError):
        s.shutdown(socket.SHUT_RDWR)
    s.close()


@pytest.fixture
def make_proxy(live_url) -> Iterator[Callable[..., TcpProxy]]:
    """A factory of proxies to the live service (``port``: listen there), closed at the end."""
    made: list[TcpProxy] = []

    def make(port: int = 0) -> TcpProxy:
        made.append(TcpProxy(int(live_url.rsplit(":", 1)[1]), port))
        return made[-1]

    yield make
    for p in made:
        p.close()


@pytest.fixture
def proxy(make_proxy) -> TcpProxy:
    return make_proxy()
