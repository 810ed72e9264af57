"""The client socket as the gevent worker hands it on: ``ClientSocket`` knows whether a
request is waiting for its answer, so that no close leaves one unanswered (the drain:
``service.http.gevent_worker``), and closes by lingering, never by a reset
(``linger_close``); ``HeldHeaders`` holds a response's header block back for its first body
bytes (one write for a small answer) and puts every write under the send deadline."""

from __future__ import annotations

import contextlib
import errno
import socket
import time
from typing import Any

import gevent
import gevent.socket

from service.http.worker_refusals import RETRY_AFTER_S, SHED_READ_S, problem_answer, request_path

LINGER_S = 0.25  # a closing connection is read to its end this long (no reset: linger_close)


DRAINING = [False]  # this worker process was told to stop (set once, by handle_exit)
SHUTTING_DOWN_DETAIL = ("this server process is stopping; retry shortly (the same request, "
                        "with the same Idempotency-Key)")


def linger_close(sock: Any, linger_s: float = LINGER_S) -> None:
    """Half-close ``sock`` (our FIN after whatever was sent), read what the peer still
    sends for up to ``linger_s`` or until it closes, then close: closing with unread bytes
    makes the kernel send a reset, which can destroy an answer the peer has not read."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)
    until = time.monotonic() + linger_s
    try:
        while True:
            left = until - time.monotonic()
            if left <= 0:
                break
            sock.settimeout(left)
            if not sock.recv(65536):
                break
    except (OSError, gevent.Timeout):
        pass
    finally:
        with contextlib.suppress(OSError):
            sock.close()


class ClientSocket:
    """A client connection as gunicorn's handler sees it, knowing whether a request is
    waiting for its answer, so that closing it (a drain, a keep-alive timeout, a greenlet
    ended) never leaves that request unanswered: see the module docstring."""

    __slots__ = ("_sock", "busy", "closed", "greenlet", "path", "pending", "sent")

    def __init__(self, sock: Any) -> None:
        self._sock = sock
        self.busy = False  # a request is being handled
        self.sent = False  # and its answer has started
        self.pending = False  # request bytes read while no request was being handled
        self.closed = False
        self.greenlet: Any = None
        self.path: str | None = None  # the request being handled, for a refusal's instance

    @property
    def idle(self) -> bool:
        return not (self.busy or self.pending or self.closed)

    def begin(self, path: str | None = None) -> None:
        self.busy, self.sent, self.pending, self.path = True, False, False, path

    def end(self) -> None:
        self.busy = False

    def recv(self, *args: Any) -> bytes:
        data = self._sock.recv(*args)
        if data and not self.busy:
            self.pending = True
        return data

    def recv_into(self, buffer: Any, *args: Any) -> int:
        n = self._sock.recv_into(buffer, *args)
        if n and not self.busy:
            self.pending = True
        return n

    def sendall(self, data: Any, *args: Any) -> None:
        self.sent = True
        self._sock.sendall(data, *args)

    def send(self, data: Any, *args: Any) -> int:
        self.sent = True
        return self._sock.send(data, *args)

    def sendfile(self, *args: Any, **kwargs: Any) -> Any:
        self.sent = True
        return self._sock.sendfile(*args, **kwargs)

    def _waiting_bytes(self) -> bytes:
        try:  # a timeout of 0: gevent's recv would otherwise wait for the bytes
            self._sock.settimeout(0.0)
            return self._sock.recv(8192, socket.MSG_PEEK)
        except OSError:
            return b""

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            # the refusal is for the drain only: outside it, a head that stalled until the
            # keep-alive timer (a slow or idle client) is closed as before, with no answer
            cut = DRAINING[0] and ((self.busy and not self.sent) or self.pending)
            waiting = b"" if cut or not DRAINING[0] else self._waiting_bytes()
            if cut or waiting:
                with contextlib.suppress(OSError):
                    self._sock.settimeout(SHED_READ_S)
                    self._sock.sendall(problem_answer(
                        "shutting-down", SHUTTING_DOWN_DETAIL,
                        request_path(waiting) if waiting else self.path, RETRY_AFTER_S))
            linger_close(self._sock)
        except BaseException:  # a greenlet killed while closing: close at least
            with contextlib.suppress(OSError):
                self._sock.close()
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)



def _send_now(sock: Any, data: Any) -> int:
    """The bytes of ``data`` the kernel takes at once on ``sock`` (a ``ClientSocket`` or a
    gevent socket), sent with the operating system's non-blocking ``send`` (gevent keeps
    its sockets non-blocking underneath); 0 when it takes none or when the socket is not
    one of those (the caller then sends it all as before). Errors are the send's own, as
    gevent's ``sendall`` would raise them."""
    client = sock if isinstance(sock, ClientSocket) else None
    green = client._sock if client is not None else sock
    if type(green) is not gevent.socket.socket or not isinstance(data, bytes | bytearray):
        return 0  # a TLS socket among others: its bytes must go through its own send
    raw = green._sock
    if raw.gettimeout() != 0.0:
        return 0
    if client is not None:
        client.sent = True
    try:
        return int(raw.send(data))
    except BlockingIOError:
        return 0


class HeldHeaders:
    """The client socket as one response sees it (see the module docstring): the header
    block held back for the body, and every write under the send deadline."""

    __slots__ = ("_held", "_sock", "_timeout_s")

    def __init__(self, sock: Any, timeout_s: float = 0.0) -> None:
        self._sock = sock
        self._held: bytes | None = None
        self._timeout_s = timeout_s

    def _sendall(self, data: Any, *args: Any) -> None:
        if self._timeout_s <= 0:
            self._sock.sendall(data, *args)
            return
        if not args:
            # a small answer fits the socket's buffer: one write that cannot wait, so no
            # deadline to arm; what did not fit is sent under the deadline below
            sent = _send_now(self._sock, data)
            if sent >= len(data):
                return
            if sent:
                data = memoryview(data)[sent:]
        timer = gevent.Timeout(self._timeout_s)
        timer.start()
        try:
            self._sock.sendall(data, *args)
        except gevent.Timeout as exc:
            if exc is not timer:
                raise
            # a client that does not read: drop it, as a client that left (EPIPE: gunicorn
            # ends the request quietly, where another error would be logged with a traceback)
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)
            raise BrokenPipeError(errno.EPIPE, "slow reader dropped") from None
        finally:
            timer.close()

    def sendall(self, data: Any, *args: Any) -> None:
        held = self._held
        if held is not None:
            self._held = None
            self._sendall(held + bytes(data), *args)
            return
        if (isinstance(data, bytes) and data.startswith(b"HTTP/")
                and data.endswith(b"\r\n\r\n")):
            self._held = data  # the header block: wait for the body
            return
        self._sendall(data, *args)

    def flush(self) -> None:
        held = self._held
        if held is not None:
            self._held = None
            self._sendall(held)

    def send(self, data: Any, *args: Any) -> int:
        self.flush()
        return self._sock.send(data, *args)

    def sendfile(self, *args: Any, **kwargs: Any) -> Any:
        self.flush()
        return self._sock.sendfile(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


