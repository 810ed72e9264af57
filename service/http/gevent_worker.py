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

**The drain answers or refuses every request** (never a reset, never an empty reply):
from SIGTERM on, a request on a kept-alive connection is served and answered with
``Connection: close`` (gunicorn's own rule), and gunicorn stops accepting within a second
(the master closed its copy of the listener first: a later connect is refused, and during
a single worker's restart the other workers take it). A connection idle between requests
gets ``DRAIN_IDLE_S`` for a request already on its way, then is closed, so an idle client
no longer holds the worker for its keep-alive timeout (5 s). Every close goes through
``ClientSocket.close``: during the drain, a request whose bytes had arrived but that got
no answer — its greenlet ended at the drain's end (a body still arriving), or bytes that
came as its idle connection was closed — is answered 503 ``shutting-down`` with
``Retry-After`` and ``Connection: close`` first; and always, the socket is half-closed and
read to its end for ``LINGER_S`` before it is closed, so bytes left unread do not turn the
close into a reset that destroys the answer before the client has read it.

At its connection cap (``worker_connections``, ``ARENA_WORKER_CONNECTIONS``, less the
probes' reserve ``ARENA_RESERVED_CONNECTIONS``) the worker answers a new connection at once
with a 503 ``over-capacity`` problem and ``Retry-After: 1``, and closes it (``shed``),
instead of leaving it to wait unseen in the kernel's listen queue until some open
connection ends: a client (a browser's ``EventSource`` reconnecting with backoff, a bot's
retry) learns in milliseconds that it should come back. Before refusing, it looks at the
request line (``MSG_PEEK``, at most ``SHED_READ_S``): ``GET /healthz``, ``/readyz`` and
``/metrics`` are served from the reserve (one request, then the connection closes), so a
probe answers even when one client has taken the rest. One client (an address, an IPv6
/64: ``connections.client_key``) may hold at most ``ARENA_CLIENT_SHARE`` of the general
budget; past it its new connections are refused with 429 ``too-many-connections`` (off
behind a trusted proxy, ``ARENA_TRUSTED_PROXIES``, where every connection is the proxy's).
gunicorn's accept pool is ``SHED_SLOTS`` larger than the cap, so the refusals themselves
have room.

Deadlines (``service.http.connections``): each write of a response must finish within
``ARENA_SEND_TIMEOUT`` seconds, or the connection is dropped (``HeldHeaders``); a request
body the app left unread is drained only until the body deadline (``ARENA_BODY_TIMEOUT``,
from the request's head) and 64 KB, else the connection closes. A request head gunicorn
cannot parse (a bad Content-Length, a malformed header, a request line too long) is
answered as a problem (``handle_error``), as the app answers everything else.

Configured in ``service.http.gunicorn_conf`` as ``worker_class``; gunicorn's own files are not
touched.
"""

from __future__ import annotations

import contextlib
import errno
import json
import socket
import time
from typing import Any

import gevent
from gevent.server import StreamServer
from gunicorn.workers import ggevent
from gunicorn.workers.ggevent import GeventWorker as _GeventWorker

SHED_SLOTS = 64  # accept-pool room above the cap for connections being refused
# Connections taken from the listen queue per wake-up (gevent's default). gunicorn takes
# one when it runs several workers (to spread them); under a flood of connections that
# left the queue full, a busy worker took one per turn of its loop, and the kernel
# dropped everyone's SYNs meanwhile, the probes' included (seconds of retransmits).
ACCEPT_BATCH = 100
SHED_READ_S = 1.0  # how long a refused connection's request head is waited for
RETRY_AFTER_S = 1
DRAIN_MAX_BYTES = 65536  # of a body the app left unread, drained to keep the connection
DRAIN_IDLE_S = 0.5  # after SIGTERM, how long an idle kept-alive connection stays open
LINGER_S = 0.25  # a closing connection is read to its end this long (no reset: see above)
# The drain's end, this long before gunicorn's graceful_timeout: the master SIGKILLs a
# worker still there at graceful_timeout (whose sockets then close with no answer), and
# gunicorn's own run loop looks for an empty pool only once a second.
DRAIN_END_MARGIN_S = 1.5
_PROBE_LINES = tuple(b"GET %s" % p for p in (b"/healthz", b"/readyz", b"/metrics"))

_REASONS = {400: "Bad Request", 408: "Request Timeout", 414: "URI Too Long",
            429: "Too Many Requests", 431: "Request Header Fields Too Large",
            503: "Service Unavailable"}
_TITLES = {  # as service.arena.problems.KINDS has them (not imported in gunicorn's master)
    "over-capacity": (503, "The service is at its connection limit; retry shortly"),
    "shutting-down": (503, "This server is shutting down; retry shortly"),
    "too-many-connections": (429, "Too many open streams, long-polls or connections"),
    "malformed-body": (400, "The request body cannot be read"),
    "bad-request": (400, "Bad request"),
    "uri-too-long": (414, "The request line is too long"),
    "header-fields-too-large": (431, "The request's header fields are too large"),
}


def request_path(head: bytes) -> str | None:
    """The path of the request line at the start of ``head`` (None: not one)."""
    line = head.split(b"\r\n", 1)[0].split(b" ")
    return line[1].split(b"?", 1)[0].decode("latin-1") if len(line) == 3 else None


def problem_answer(kind: str, detail: str, path: str | None,
                   retry_after: int | None = None) -> bytes:
    """A whole HTTP answer that closes the connection: a problem (RFC 9457), with the
    request's path as ``instance`` when its request line could be read."""
    status, title = _TITLES[kind]
    body = json.dumps({"type": f"/problems/{kind}", "title": title, "status": status,
                       "detail": detail, "instance": path},
                      separators=(",", ":")).encode()
    retry = b"Retry-After: %d\r\n" % retry_after if retry_after is not None else b""
    return (b"HTTP/1.1 %d %s\r\nContent-Type: application/problem+json\r\n%s"
            b"Connection: close\r\nCache-Control: no-store\r\n"
            b"Content-Length: %d\r\n\r\n%s"
            % (status, _REASONS[status].encode(), retry, len(body), body))


def shed_response(head: bytes, kind: str = "over-capacity") -> bytes:
    """The answer to a connection refused at the cap (503 ``over-capacity``) or past its
    client's share (429 ``too-many-connections``)."""
    if kind == "over-capacity":
        detail = ("this worker holds as many connections as it may "
                  "(ARENA_WORKER_CONNECTIONS); retry shortly")
    else:
        detail = ("this client holds as many of this worker's connections as it may "
                  "(ARENA_CLIENT_SHARE); retry shortly")
    return problem_answer(kind, detail, request_path(head), RETRY_AFTER_S)


def shed(client: Any, kind: str = "over-capacity") -> None:
    """Refuse ``client`` quickly: read what it sent (so closing does not reset the
    connection under the answer), answer, close."""
    head = b""
    try:
        client.settimeout(SHED_READ_S)
        with contextlib.suppress(OSError):
            head = client.recv(8192)
        client.sendall(shed_response(head, kind))
        client.shutdown(2)
    except OSError:
        pass
    finally:
        client.close()


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


def wants_probe(client: Any, wait_s: float = SHED_READ_S) -> bool:
    """Whether the connection's first request line is a probe (``GET /healthz``,
    ``/readyz``, ``/metrics``), looked at without taking it off the socket (``MSG_PEEK``),
    for at most ``wait_s`` seconds."""
    until = time.monotonic() + wait_s
    seen = b""
    try:
        while True:
            left = until - time.monotonic()
            if left <= 0:
                return False
            client.settimeout(left)
            seen = client.recv(256, socket.MSG_PEEK)
            if not seen:
                return False
            if b"\r\n" in seen or len(seen) >= 64:
                break
            gevent.sleep(0.005)  # the rest of the line is on its way
    except OSError:
        return False
    finally:
        with contextlib.suppress(OSError):
            client.settimeout(None)
    return any(seen.startswith(p) and seen[len(p):len(p) + 1] in (b" ", b"?")
               for p in _PROBE_LINES)


def head_error_answer(exc: BaseException) -> bytes | None:
    """The problem answer to a request head gunicorn could not parse (None: leave it to
    gunicorn, e.g. a TLS or proxy-protocol error)."""
    from gunicorn.http import errors

    text = str(exc)
    if isinstance(exc, errors.LimitRequestLine):
        return problem_answer("uri-too-long", text, None)
    if isinstance(exc, errors.LimitRequestHeaders):
        return problem_answer("header-fields-too-large", text, None)
    req = getattr(exc, "req", None)
    path = getattr(req, "path", None)
    if isinstance(exc, (errors.InvalidChunkSize, errors.ChunkMissingTerminator,
                        errors.InvalidChunkExtension, errors.UnsupportedTransferCoding)) or (
            isinstance(exc, errors.InvalidHeader)
            and getattr(exc, "hdr", "") in ("CONTENT-LENGTH", "TRANSFER-ENCODING")):
        return problem_answer("malformed-body", f"the request body cannot be read: {text}",
                              path)
    if isinstance(exc, (errors.InvalidRequestLine, errors.InvalidRequestMethod,
                        errors.InvalidHTTPVersion, errors.InvalidHeader,
                        errors.InvalidHeaderName, errors.ObsoleteFolding)):
        return problem_answer("bad-request", text, path)
    return None


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


class BatchAccept(StreamServer):
    """gevent's server, taking up to ``ACCEPT_BATCH`` connections per wake-up whatever
    gunicorn sets (see ``ACCEPT_BATCH``): refusals are cheap, and a client's share
    (``ARENA_CLIENT_SHARE``) bounds what one worker takes of one client."""

    @property  # type: ignore[override]
    def max_accept(self) -> int:
        return ACCEPT_BATCH

    @max_accept.setter
    def max_accept(self, value: int) -> None:
        pass


class GeventWorker(_GeventWorker):
    """``gevent`` as gunicorn ships it, with one send per small response, a graceful
    stop that does not wait for long-polls to time out, the probes' reserve, a share per
    client and deadlines on every connection (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cap = self.worker_connections  # the connections served at once
        self.worker_connections = self.cap + SHED_SLOTS  # gunicorn's accept pool
        self.open_connections = 0  # all served connections, the reserve's included
        self.general_open = 0
        self.probes_open = 0
        self.by_client: dict[str, int] = {}
        self.reserved: set[Any] = set()  # sockets admitted from the reserve
        self.reserve = 0
        self.general = self.cap
        self.per_client = 0  # 0: no share per client
        self.send_timeout_s = 0.0
        self.body_timeout_s = 0.0
        self.clients: set[ClientSocket] = set()  # the served connections, for the drain

    def load_wsgi(self) -> None:
        super().load_wsgi()
        from service.http import connections

        cfg = {**connections.DEFAULTS, **getattr(self.wsgi, "config", {})}
        self.reserve = max(0, min(int(cfg["ARENA_RESERVED_CONNECTIONS"]), self.cap - 1))
        self.general = self.cap - self.reserve
        share = float(cfg["ARENA_CLIENT_SHARE"] or 0)
        behind_proxy = int(cfg.get("ARENA_TRUSTED_PROXIES") or 0) > 0
        self.per_client = 0 if behind_proxy or share <= 0 else max(1, int(self.general * share))
        self.send_timeout_s = float(cfg["ARENA_SEND_TIMEOUT"] or 0)
        self.body_timeout_s = float(cfg["ARENA_BODY_TIMEOUT"] or 0)
        self._client_key = connections.client_key

    def run(self) -> None:
        ggevent.StreamServer = BatchAccept  # what gunicorn's run() builds its servers from
        super().run()

    def handle(self, listener: Any, client: Any, addr: Any) -> None:
        key = None
        if self.per_client and isinstance(addr, tuple) and addr:
            key = self._client_key(str(addr[0]))
        reserved = False
        if self.general_open >= self.general:
            if (self.probes_open >= self.reserve or self.open_connections >= self.cap
                    or not wants_probe(client)):
                shed(client)
                return
            reserved = True
        elif key is not None and self.by_client.get(key, 0) >= self.per_client:
            shed(client, "too-many-connections")
            return
        self.open_connections += 1
        if reserved:
            self.probes_open += 1
            self.reserved.add(client)  # the raw socket: handle_request unwraps it
        else:
            self.general_open += 1
            if key is not None:
                self.by_client[key] = self.by_client.get(key, 0) + 1
        conn = ClientSocket(client)
        conn.greenlet = gevent.getcurrent()
        self.clients.add(conn)
        try:
            super().handle(listener, conn, addr)
        finally:
            self.clients.discard(conn)
            conn.close()  # gunicorn has closed it already, unless it ended elsewhere
            self.open_connections -= 1
            if reserved:
                self.probes_open -= 1
                self.reserved.discard(client)
            else:
                self.general_open -= 1
                if key is not None:
                    left = self.by_client.get(key, 1) - 1
                    if left > 0:
                        self.by_client[key] = left
                    else:
                        self.by_client.pop(key, None)

    def handle_exit(self, sig: Any, frame: Any) -> None:
        super().handle_exit(sig, frame)  # alive = False: the run loop stops accepting
        DRAINING[0] = True
        wsgi = getattr(self, "wsgi", None)  # None: SIGTERM while the app is still loading
        if wsgi is not None:
            gevent.spawn(shut_down, wsgi)  # out of the signal handler
        gevent.spawn_later(DRAIN_IDLE_S, self.close_idle)
        ends_in = float(getattr(self.cfg, "graceful_timeout", 5)) - DRAIN_END_MARGIN_S
        gevent.spawn_later(max(DRAIN_IDLE_S, ends_in), self.end_drain)

    def close_idle(self) -> None:
        """End the connections idle between requests (after ``DRAIN_IDLE_S`` of the drain,
        for a request already on its way): their greenlets are told to exit, and
        ``ClientSocket.close`` answers any request that arrived meanwhile."""
        for conn in list(self.clients):
            if conn.idle and conn.greenlet is not None:
                conn.greenlet.kill(block=False)

    def end_drain(self) -> None:
        """The drain's end (``DRAIN_END_MARGIN_S`` before gunicorn's graceful timeout): every
        connection still open is ended here, where ``ClientSocket.close`` answers a request
        that got no answer 503, rather than by the master's SIGKILL, which answers nothing."""
        for conn in list(self.clients):
            if conn.greenlet is not None:
                conn.greenlet.kill(block=False)

    def handle_request(self, listener_name: Any, req: Any, sock: Any, addr: Any) -> Any:
        started = time.monotonic()
        body = getattr(req, "body", None)
        if body is not None:
            body.request = req  # a failed read of it closes the connection (connections.py)
        conn = sock if isinstance(sock, ClientSocket) else None
        if conn is not None:
            conn.begin(getattr(req, "path", None))
        out = HeldHeaders(sock, self.send_timeout_s)
        try:
            try:
                done = super().handle_request(listener_name, req, out, addr)
            finally:
                out.flush()
            if conn is not None and not conn.sent:
                # gunicorn swallows the end of a greenlet killed mid-request (the drain's
                # graceful timeout): no answer was begun, so close, and close answers 503
                raise StopIteration()
            raw = conn._sock if conn is not None else sock
            if raw in self.reserved:
                raise StopIteration()  # a probe from the reserve: one request, then close
            self.finish_body(req, started + self.body_timeout_s if self.body_timeout_s
                             else None)
        finally:
            if conn is not None and conn.sent:
                conn.end()  # answered: the bytes read from now on are the next request's
        return done

    @staticmethod
    def finish_body(req: Any, until: float | None) -> None:
        """Drain what the app left of the request's body, within the body deadline and
        ``DRAIN_MAX_BYTES``; a body that cannot be drained (too slow, too long, malformed)
        marks it failed, and gunicorn closes the connection instead of parsing the next
        request from the middle of this one (and instead of answering a second time)."""
        body = getattr(req, "body", None)
        if body is None or getattr(body, "failed", False):
            return
        drained = 0
        timer = gevent.Timeout(max(0.001, until - time.monotonic())) if until else None
        if timer is not None:
            timer.start()
        try:
            while drained < DRAIN_MAX_BYTES:
                data = body.read(8192)
                if not data:
                    return
                drained += len(data)
        except gevent.Timeout as exc:
            if exc is not timer:
                raise
        except Exception:  # any framing error: the connection closes
            pass
        finally:
            if timer is not None:
                timer.close()
        body.failed = True

    def handle_error(self, req: Any, client: Any, addr: Any, exc: BaseException) -> None:
        """A request head gunicorn cannot parse: a problem, logged as the client's error
        (one line, no traceback); anything else as gunicorn does it."""
        if isinstance(exc, gevent.GreenletExit):
            return  # ended by the drain (close_idle): ClientSocket.close answers, if needed
        answer = head_error_answer(exc)
        if answer is None:
            super().handle_error(req, client, addr, exc)
            return
        ip = addr[0] if isinstance(addr, tuple) and addr else "-"
        self.log.warning("Invalid request from ip=%s: %s: %s", ip, type(exc).__name__, exc)
        with contextlib.suppress(OSError):
            client.sendall(answer)
