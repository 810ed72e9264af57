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

Configured in ``service.gunicorn_conf`` as ``worker_class``; gunicorn's own files are not
touched.
"""

from __future__ import annotations

from typing import Any

from gunicorn.workers.ggevent import GeventWorker as _GeventWorker


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


class GeventWorker(_GeventWorker):
    """``gevent`` as gunicorn ships it, with one send per small response."""

    def handle_request(self, listener_name: Any, req: Any, sock: Any, addr: Any) -> Any:
        out = HeldHeaders(sock)
        try:
            return super().handle_request(listener_name, req, out, addr)
        finally:
            out.flush()
