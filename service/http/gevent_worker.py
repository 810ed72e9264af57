"""gunicorn's gevent worker, sending each response's header block with its first body bytes.

gunicorn writes a response's status line and headers with one ``sendall`` and each body
chunk with another, so a small JSON answer costs two writes to the socket, two loopback
deliveries, and two wake-ups of a client blocked in ``recv`` (it reads the headers, then
blocks again for the body). Here the worker hands the response a thin wrapper of the
client socket: the first write of each response that is a whole header block (starts
``HTTP/``, ends with a blank line) is held back and prepended to the next write, so a
response with a body leaves in one ``sendall``. Whatever is still held when the request
is done (a response without body bytes) is sent then; ``sendfile`` and ``send`` send it
first. Nothing else changes: streaming responses (SSE) still send each chunk as the app
yields it — only their first chunk carries the headers.

On SIGTERM (``handle_exit``) the worker also ends its open long-polls and event streams
at once (``shut_down``): gunicorn would otherwise wait ``graceful_timeout`` for them and
then cut them off.

At its connection cap (``worker_connections``, ``ARENA_WORKER_CONNECTIONS``) the worker
answers a new connection at once with a 503 ``service-unavailable`` problem and
``Retry-After: 1``, and closes it (``shed``), instead of leaving it to wait unseen in the
kernel's listen queue until some open connection ends: a client (a browser's
``EventSource`` reconnecting with backoff, a bot's retry) learns in milliseconds that it
should come back. gunicorn's accept pool is ``SHED_SLOTS`` larger than the cap, so the
refusals themselves have room.

Configured in ``service.http.gunicorn_conf`` as ``worker_class``; gunicorn's own files are not
touched.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import gevent
from gunicorn.workers.ggevent import GeventWorker as _GeventWorker

SHED_SLOTS = 64  # accept-pool room above the cap for connections being refused
SHED_READ_S = 1.0  # how long a refused connection's request head is waited for
RETRY_AFTER_S = 1


def shed_response(head: bytes) -> bytes:
    """The whole HTTP answer to a connection over the cap: a problem (RFC 9457) with the
    request's path as ``instance`` when its request line could be read."""
    line = head.split(b"\r\n", 1)[0].split(b" ")
    path = line[1].split(b"?", 1)[0].decode("latin-1") if len(line) == 3 else None
    body = json.dumps({
        "type": "/problems/service-unavailable",
        "title": "The game store is unavailable; retry shortly",
        "status": 503,
        "detail": "this worker holds as many connections as it may "
                  "(ARENA_WORKER_CONNECTIONS); retry shortly",
        "instance": path,
    }, separators=(",", ":")).encode()
    return (b"HTTP/1.1 503 Service Unavailable\r\n"
            b"Content-Type: application/problem+json\r\n"
            b"Retry-After: %d\r\nConnection: close\r\nCache-Control: no-store\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (RETRY_AFTER_S, len(body), body))


def shed(client: Any) -> None:
    """Refuse ``client`` quickly: read what it sent (so closing does not reset the
    connection under the answer), answer 503, close."""
    head = b""
    try:
        client.settimeout(SHED_READ_S)
        with contextlib.suppress(OSError):
            head = client.recv(8192)
        client.sendall(shed_response(head))
        client.shutdown(2)
    except OSError:
        pass
    finally:
        client.close()


class HeldHeaders:
    """The client socket as one response sees it (see the module docstring)."""

    __slots__ = ("_held", "_sock")

    def __init__(self, sock: Any) -> None:
        self._sock = sock
        self._held: bytes | None = None

    def sendall(self, data: Any, *args: Any) -> None:
        held = self._held
        if held is not None:
            self._held = None
            self._sock.sendall(held + bytes(data), *args)
            return
        if (isinstance(data, bytes) and data.startswith(b"HTTP/")
                and data.endswith(b"\r\n\r\n")):
            self._held = data  # the header block: wait for the body
            return
        self._sock.sendall(data, *args)

    def flush(self) -> None:
        held = self._held
        if held is not None:
            self._held = None
            self._sock.sendall(held)

    def send(self, data: Any, *args: Any) -> int:
        self.flush()
        return self._sock.send(data, *args)

    def sendfile(self, *args: Any, **kwargs: Any) -> Any:
        self.flush()
        return self._sock.sendfile(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


def shut_down(app: Any) -> None:
    """The worker was told to stop (SIGTERM): stop the deadline sweeper and answer every
    open long-poll and stream now (``Arena.shut_down``). Requests in flight, commits
    included, run to their end; gunicorn stops accepting and waits for them (up to
    ``graceful_timeout``)."""
    extensions = getattr(app, "extensions", {})
    sweeper = extensions.get("sweeper")
    if sweeper is not None:
        sweeper.stop(0)
    arena = extensions.get("arena")
    if arena is not None:
        arena.shut_down()


class GeventWorker(_GeventWorker):
    """``gevent`` as gunicorn ships it, with one send per small response, and a graceful
    stop that does not wait for long-polls to time out."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cap = self.worker_connections  # the connections served at once
        self.worker_connections = self.cap + SHED_SLOTS  # gunicorn's accept pool
        self.open_connections = 0

    def handle(self, listener: Any, client: Any, addr: Any) -> None:
        if self.open_connections >= self.cap:
            shed(client)
            return
        self.open_connections += 1
        try:
            super().handle(listener, client, addr)
        finally:
            self.open_connections -= 1

    def handle_exit(self, sig: Any, frame: Any) -> None:
        super().handle_exit(sig, frame)  # alive = False: the run loop stops accepting
        gevent.spawn(shut_down, self.wsgi)  # out of the signal handler

    def handle_request(self, listener_name: Any, req: Any, sock: Any, addr: Any) -> Any:
        out = HeldHeaders(sock)
        try:
            return super().handle_request(listener_name, req, out, addr)
        finally:
            out.flush()
