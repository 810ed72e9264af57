"""The worker class sends a response's header block together with its first body bytes."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from service.http import gunicorn_conf
from service.http.gevent_worker import GeventWorker
from service.http.worker_sockets import HeldHeaders

HEAD = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n"


class FakeSocket:
    def __init__(self) -> None:
        self.writes: list[bytes] = []

    def sendall(self, data: bytes, *args: Any) -> None:
        self.writes.append(bytes(data))

    def send(self, data: bytes, *args: Any) -> int:
        self.writes.append(bytes(data))
        return len(data)

    def sendfile(self, *args: Any, **kwargs: Any) -> int:
        self.writes.append(b"<file>")
        return 0

    def fileno(self) -> int:
        return 42


def test_headers_leave_with_the_body() -> None:
    sock = FakeSocket()
    out = HeldHeaders(sock)
    out.sendall(HEAD)
    assert sock.writes == []
    out.sendall(b"{}")
    out.flush()
    assert sock.writes == [HEAD + b"{}"]


def test_streamed_chunks_after_the_first_are_sent_as_they_come() -> None:
    sock = FakeSocket()
    out = HeldHeaders(sock)
    out.sendall(HEAD)
    out.sendall(b"a")
    out.sendall(b"b")
    assert sock.writes == [HEAD + b"a", b"b"]


def test_held_headers_are_sent_without_a_body_and_before_other_writes() -> None:
    sock = FakeSocket()
    out = HeldHeaders(sock)
    out.sendall(HEAD)
    out.flush()
    assert sock.writes == [HEAD]
    out.flush()
    assert sock.writes == [HEAD]
    for other in (lambda: out.sendfile(None), lambda: out.send(b"x")):
        sock.writes.clear()
        out.sendall(HEAD)
        other()
        assert sock.writes[0] == HEAD and len(sock.writes) == 2
    assert out.fileno() == 42


def test_anything_but_a_header_block_is_not_held() -> None:
    sock = FakeSocket()
    out = HeldHeaders(sock)
    page = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 1\r\n\r\nx"
    out.sendall(page)
    out.sendall(b"plain")
    assert sock.writes == [page, b"plain"]


def test_the_deployed_config_uses_it() -> None:
    module, _, name = gunicorn_conf.worker_class.rpartition(".")
    assert (module, name) == (GeventWorker.__module__, GeventWorker.__name__)


def test_a_worker_sets_its_import_time_objects_aside_from_garbage_collection() -> None:
    """``post_worker_init`` freezes what exists once the app is loaded (``gc.freeze``): a
    full collection, during which a gevent worker serves none of its connections, no
    longer walks it. ``ARENA_GC_FREEZE=0`` keeps Python's default."""
    code = (f"import gc, {gunicorn_conf.__name__} as conf; "
            "conf.post_worker_init(None); print(gc.get_freeze_count())")

    def frozen(setting: str) -> int:
        env = {**os.environ, "ARENA_SWEEPER": "0", "ARENA_CALLBACKS": "0",
               "ARENA_GC_FREEZE": setting}
        run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, timeout=60, check=True)
        return int(run.stdout.strip())

    assert frozen("1") > 1000
    assert frozen("0") == 0


# --- deadlines and the probes' reserve ---------------------------------------------


def test_a_reader_that_reads_nothing_is_dropped_at_the_send_deadline() -> None:
    """A response write that the client does not take (its receive window full) ends
    within ARENA_SEND_TIMEOUT as a broken pipe (what gunicorn ignores quietly), and the
    socket is shut down, where it would wait for ever. (Without the deadline the write
    blocks until the test's own timeout fails it: no clock is read here.)"""
    import pytest
    from gevent import socket as gsocket

    server, client = gsocket.socketpair()
    try:
        server.setsockopt(gsocket.SOL_SOCKET, gsocket.SO_SNDBUF, 4096)
        out = HeldHeaders(server, timeout_s=0.5)
        # the send deadline's broken pipe, not another error of the socket
        with pytest.raises(BrokenPipeError, match="slow reader dropped"):
            out.sendall(HEAD)
            for _ in range(10_000):  # far more than any socket buffer holds
                out.sendall(b"x" * 65536)
        client.settimeout(5)
        received = 0
        while True:  # the reader gets what was sent, then the end: the server shut it
            data = client.recv(1 << 20)
            if not data:
                break
            received += len(data)
        assert received < 10_000 * 65536
    finally:
        server.close()
        client.close()


def test_a_probe_is_recognized_by_its_request_line_and_left_unread() -> None:
    from gevent import socket as gsocket

    from service.http.worker_refusals import wants_probe

    for line, probe in ((b"GET /healthz HTTP/1.1\r\n", True),
                        (b"GET /readyz?x=1 HTTP/1.1\r\n", True),
                        (b"GET /metrics HTTP/1.1\r\n", True),
                        (b"GET /healthzzz HTTP/1.1\r\n", False),
                        (b"POST /healthz HTTP/1.1\r\n", False),
                        (b"GET /games HTTP/1.1\r\n", False)):
        server, client = gsocket.socketpair()
        try:
            client.sendall(line + b"Host: t\r\n\r\n")
            assert wants_probe(server, 2.0) is probe, line
            assert server.recv(4096).startswith(line)  # still there for the parser
        finally:
            server.close()
            client.close()
    server, client = gsocket.socketpair()
    try:  # nothing sent: not a probe, after the wait
        assert wants_probe(server, 0.2) is False
    finally:
        server.close()
        client.close()


def test_a_head_gunicorn_cannot_parse_is_answered_as_a_problem() -> None:
    import json

    from gunicorn.http import errors

    from service.arena.core.problems import KINDS
    from service.http.worker_refusals import head_error_answer

    cases = [
        (errors.InvalidHeader("CONTENT-LENGTH"), 400, "malformed-body"),
        (errors.InvalidHeader("TRANSFER-ENCODING"), 400, "malformed-body"),
        (errors.UnsupportedTransferCoding("gzip"), 400, "malformed-body"),
        (errors.InvalidChunkSize(b"zz"), 400, "malformed-body"),
        (errors.InvalidRequestLine("GARBAGE"), 400, "bad-request"),
        (errors.LimitRequestLine(9000, 4094), 414, "uri-too-long"),
        (errors.LimitRequestHeaders("too many"), 431, "header-fields-too-large"),
    ]
    for exc, status, kind in cases:
        answer = head_error_answer(exc)
        assert answer is not None, exc
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 %d " % status), head
        assert b"Content-Type: application/problem+json" in head
        assert b"Connection: close" in head
        problem = json.loads(body)
        assert problem["type"] == f"/problems/{kind}" and problem["status"] == status
        assert KINDS[kind] == (status, problem["title"])  # the worker's titles are the kinds'
        # never null (a client reading it as a string): the path, or the occurrence's id
        assert isinstance(problem["instance"], str) and problem["instance"], problem


def test_the_workers_own_problems_are_kinds_of_the_contract() -> None:
    """The worker answers some problems before the app (at the cap, a client's share, a
    bad head): each is a kind of ``KINDS`` with the same status and title."""
    from service.arena.core.problems import KINDS
    from service.http.worker_refusals import _TITLES, shed_response

    for kind, status_title in _TITLES.items():
        assert KINDS[kind] == status_title, kind
    assert b"/problems/over-capacity" in shed_response(b"GET /x HTTP/1.1\r\n")
    assert b"game store" not in shed_response(b"")
    assert b"HTTP/1.1 429 " in shed_response(b"", "too-many-connections")
