"""The drain answers or refuses every request: from SIGTERM until the worker exits, a
request gets its answer, or a 503 ``shutting-down`` problem with ``Retry-After`` and
``Connection: close`` — never a reset, never an empty reply
(``service.http.gevent_worker``, "The drain answers or refuses every request").

Why real sockets and a real gunicorn: what is judged is what a client's socket sees —
bytes, FIN or RST — while gunicorn's worker stops. Keep-alive connections are opened and
used before the SIGTERM; requests are then sent on them at spread times during the drain.
A connection the server has closed (its FIN seen before the request is sent) is replaced
by a new one, as HTTP clients do with a pooled connection; a refused connect sent no
request and is fine (the service is gone). One worker, so the drain is one process's.
"""

from __future__ import annotations

import json
import select
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REDIS_URL
from tests.test_serve import Serve, kill_leftovers

EXPECTED_S = 35  # seconds, the whole module: the order workers take it in (tests/conftest.py)

STOP_BOUND_S = 30.0


@pytest.fixture
def service(tmp_path: Path, key_prefix: str, redis_client) -> Iterator[Serve]:
    process = Serve(tmp_path, None, 1, REDIS_URL=REDIS_URL, ARENA_KEY_PREFIX=key_prefix,
                    ARENA_RATE_LIMIT="0", ARENA_SWEEPER="0", ARENA_CALLBACKS="0",
                    ARENA_HOUSE_BOTS="0")
    process.wait_healthy("/readyz")
    yield process
    process.stop()
    kill_leftovers(process.seen)


def _read_answer(sock: socket.socket, timeout: float = 15.0) -> tuple[str, Any]:
    """("answer", (status, headers, body)) for a whole HTTP answer; else ("empty", n) or
    ("reset", n) with the bytes read before it."""
    sock.settimeout(timeout)
    data = b""
    try:
        while True:
            head, sep, rest = data.partition(b"\r\n\r\n")
            if sep:
                lines = head.decode("latin-1").split("\r\n")
                headers = {k.strip().lower(): v.strip() for k, _, v in
                           (line.partition(":") for line in lines[1:])}
                size = int(headers.get("content-length", "0"))
                if len(rest) >= size:
                    return "answer", (int(lines[0].split()[1]), headers, rest[:size])
            chunk = sock.recv(65536)
            if not chunk:
                return "empty", len(data)
            data += chunk
    except ConnectionResetError:
        return "reset", len(data)


def _request(sock: socket.socket, path: str, token: str | None = None) -> None:
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: t\r\n{auth}\r\n".encode())


def _closed_by_server(sock: socket.socket) -> bool:
    return bool(select.select([sock], [], [], 0)[0])


def _judge(outcome: tuple[str, Any]) -> str | None:
    """None when the outcome keeps the rule; else what was wrong."""
    kind, what = outcome
    if kind != "answer":
        return f"{kind} after {what} bytes"
    status, headers, body = what
    if status == 503:
        problem = json.loads(body)
        if (problem.get("type") != "/problems/shutting-down"
                or headers.get("content-type") != "application/problem+json"
                or not headers.get("retry-after")
                or headers.get("connection", "").lower() != "close"):
            return f"a 503 that is not a shutting-down refusal: {headers} {problem}"
    return None


def test_every_request_sent_during_the_drain_is_answered_or_refused(service: Serve) -> None:
    port = service.port
    token = json.loads(_post(port, "/bots", {"name": "drain-bot"}))["token"]
    conns = []
    for _ in range(10):
        sock = socket.create_connection(("127.0.0.1", port))
        _request(sock, "/healthz")
        assert _read_answer(sock)[0] == "answer"
        conns.append(sock)
    # one long-poll open across the signal: the drain answers it at once
    poll = socket.create_connection(("127.0.0.1", port))
    _request(poll, "/bots/me/turns?timeout=25", token)
    time.sleep(0.3)

    outcomes: list[tuple[float, str, tuple[str, Any]]] = []
    lock = threading.Lock()
    began = time.monotonic()

    def client(sock: socket.socket, at: float) -> None:
        time.sleep(max(0.0, began + at - time.monotonic()))
        how = "kept-alive"
        if _closed_by_server(sock):  # as a client pool does with a connection found closed
            sock.close()
            how = "new"
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            except OSError:
                return  # refused: no request was sent
        try:
            _request(sock, "/healthz")
        except OSError as exc:  # the send itself failed: the connection was closed
            outcome: tuple[str, Any] = ("reset", repr(exc))
        else:
            outcome = _read_answer(sock)
        with lock:
            outcomes.append((at, how, outcome))
        sock.close()

    service.proc.send_signal(signal.SIGTERM)
    times = [0.0, 0.05, 0.1, 0.2, 0.35, 0.5, 0.7, 1.0, 1.5, 2.5]
    threads = [threading.Thread(target=client, args=(c, t)) for c, t in zip(conns, times)]
    for t in threads:
        t.start()
    long_poll = _read_answer(poll)
    for t in threads:
        t.join(STOP_BOUND_S)
    assert service.proc.wait(STOP_BOUND_S) == 0

    assert long_poll[0] == "answer" and _judge(long_poll) is None, long_poll
    wrong = [(at, how, outcome, _judge(outcome)) for at, how, outcome in outcomes
             if _judge(outcome) is not None]
    assert not wrong, (wrong, outcomes)
    # the drain did happen while they were sent: some were told the connection closes
    # (served during the drain) or refused (sent on a new connection)
    ends = [o for _, _, o in outcomes
            if o[1][0] == 503 or o[1][1].get("connection", "").lower() == "close"]
    assert ends, outcomes
    assert outcomes, "no request was sent during the drain"


def test_a_request_still_arriving_when_the_drain_ends_gets_a_503(service: Serve) -> None:
    """A request whose body is still on its way at the drain's end (gunicorn's
    ``graceful_timeout``, 5 s: its handler is ended) is answered 503 ``shutting-down`` with
    ``Retry-After`` and ``Connection: close`` — before, its connection was closed with no
    answer at all."""
    sock = socket.create_connection(("127.0.0.1", service.port))
    body = json.dumps({"name": "slow-body-bot"}).encode()
    sock.sendall(b"POST /bots HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n" % len(body) + body[:3])
    time.sleep(0.3)  # the app is reading the body
    service.proc.send_signal(signal.SIGTERM)
    outcome = _read_answer(sock, timeout=STOP_BOUND_S)  # the rest of the body never comes
    assert outcome[0] == "answer", outcome
    assert outcome[1][0] == 503 and _judge(outcome) is None, outcome
    assert service.proc.wait(STOP_BOUND_S) == 0


def test_sigterm_while_the_worker_still_loads_the_app_exits_cleanly(tmp_path: Path,
                                                                    key_prefix: str,
                                                                    redis_client) -> None:
    """The drain's handler runs even before the app is loaded: no 'Exception in worker
    process', no 'Worker failed to boot' (the handler once read the app before it was
    there), exit status 0."""
    process = Serve(tmp_path, None, 1, REDIS_URL=REDIS_URL, ARENA_KEY_PREFIX=key_prefix,
                    ARENA_SWEEPER="0", ARENA_CALLBACKS="0", ARENA_HOUSE_BOTS="0")
    try:
        deadline = time.monotonic() + 60
        while "Booting worker" not in process.output():
            assert time.monotonic() < deadline and process.proc.poll() is None, \
                process.output()
            time.sleep(0.01)
        # the worker installs its signal handlers at once, then loads the app (seconds)
        time.sleep(0.8)
        process.proc.send_signal(signal.SIGTERM)
        assert process.proc.wait(STOP_BOUND_S) == 0, process.output()
        out = process.output()
        assert "Exception in worker process" not in out and "Traceback" not in out, out
    finally:
        process.stop()


def _post(port: int, path: str, body: dict) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        data = json.dumps(body).encode()
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode()
                     + data)
        kind, what = _read_answer(sock)
        assert kind == "answer" and what[0] == 201, (kind, what)
        return what[2]
