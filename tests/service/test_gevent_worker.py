"""The worker class sends a response's header block together with its first body bytes."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from service.http import gunicorn_conf
from service.http.gevent_worker import GeventWorker, HeldHeaders

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
