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
budget, and of those its streams and long-polls do not hold (by the app's counts), at
most that share of what the held budget leaves to ordinary requests, so that one address
cannot take that room from everyone when streams and polls fill the rest; past either its
new connections are refused with 429 ``too-many-connections`` (off behind a trusted proxy,
``ARENA_TRUSTED_PROXIES``, where every connection is the proxy's).
gunicorn's accept pool is ``SHED_SLOTS`` larger than the cap, so the refusals themselves
have room. These refusals never reach the app, whose ``after_request`` writes the access
line and counts requests (``service.http.observe``), and gunicorn's own access log is off:
so the worker writes each one's access line itself (``Refusals``: the same fields, the
route found in the app's URL map, a request id, and ``limit``: ``worker`` or
``client-share``) and counts it in the same metrics, and in
``allfours_connections_refused_total{limit}``. When the app's held budget of streams and
long-polls, or the client's network's share of it, has no room (``connections``), the
worker also looks at a new connection's request line (``MSG_PEEK``) and refuses a stream
or a long-poll itself, in the app's words (``refuse_held``): cheaper than the app's
refusal, with nothing left to linger, so a flood of them leaves the worker's time to the
requests it serves.

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
import time
from collections.abc import Callable
from typing import Any

import gevent
from gevent.server import StreamServer
from gunicorn.workers import ggevent
from gunicorn.workers.ggevent import GeventWorker as _GeventWorker

from service.http.worker_refusals import (
    SHED_READ_S,
    Refusals,
    head_error_answer,
    peek_line,
    problem_answer,
    request_path,
    shed,
    wants_probe,
)
from service.http.worker_sockets import DRAINING, ClientSocket, HeldHeaders

SHED_SLOTS = 64  # accept-pool room above the cap for connections being refused
# Connections taken from the listen queue per wake-up (gevent's default). gunicorn takes
# one when it runs several workers (to spread them); under a flood of connections that
# left the queue full, a busy worker took one per turn of its loop, and the kernel
# dropped everyone's SYNs meanwhile, the probes' included (seconds of retransmits).
ACCEPT_BATCH = 100
DRAIN_MAX_BYTES = 65536  # of a body the app left unread, drained to keep the connection
DRAIN_IDLE_S = 0.5  # after SIGTERM, how long an idle kept-alive connection stays open
# The drain's end, this long before gunicorn's graceful_timeout: the master SIGKILLs a
# worker still there at graceful_timeout (whose sockets then close with no answer), and
# gunicorn's own run loop looks for an empty pool only once a second.
DRAIN_END_MARGIN_S = 1.5


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


def settle(cfg: Any) -> None:
    """Each of gunicorn's settings as a plain attribute of this worker's ``Config``.
    gunicorn reads them per request (``self.cfg.keepalive``, some two dozen times), and
    ``Config`` answers through ``__getattr__``, which Python calls only once the ordinary
    lookup has failed and built an ``AttributeError`` with its message: the most costly
    way there is to read a constant. A worker's settings are fixed for its life (a reload
    starts new workers), so the values are put where the ordinary lookup finds them; the
    properties ``Config`` computes (``address``, ``worker_class``...) are left as they are."""
    kind = type(cfg)
    values = cfg.__dict__
    for name, setting in cfg.settings.items():
        if name not in values and not hasattr(kind, name):
            values[name] = setting.get()


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
        settle(self.cfg)
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
        # of a client's connections, those its streams and long-polls do not hold: at most
        # its share of what the held budget leaves to ordinary requests (0: no such bound)
        self.per_client_other = 0
        self._held_by: Callable[[str], int] = lambda key: 0
        self.send_timeout_s = 0.0
        self.body_timeout_s = 0.0
        self.clients: set[ClientSocket] = set()  # the served connections, for the drain
        self.refusals: Refusals | None = None  # the access lines of its own refusals
        # the held budget's room for a client address (None: room; else the full cap),
        # from the app's counts (``connections``): None until the app is loaded
        self.held_full: Callable[[str], tuple[str, int] | None] | None = None
        self._budget_refusal: Callable[[str, int], tuple[str, str, int]] | None = None

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
        self.refusals = Refusals(self.wsgi, str(cfg.get("ARENA_ACCESS_LOG", "1")).lower()
                                 not in ("0", "false", "no", "off"))
        slots = getattr(self.wsgi, "extensions", {}).get("slots")
        if slots is not None and not behind_proxy:  # behind one, the app knows the client
            app_cfg = self.wsgi.config
            held = connections.held_cap(app_cfg)
            if self.per_client and held:
                self.per_client_other = max(1, int((self.general - held) * share))
                counts = slots.counts

                def held_by(key: str) -> int:
                    return (counts.get(("polls-client", key), 0)
                            + counts.get(("streams-client", key), 0))

                self._held_by = held_by

            def held_full(address: str) -> tuple[str, int] | None:
                return slots.full(connections.budget_wanted(app_cfg, address))

            self.held_full = held_full
            self._budget_refusal = connections.budget_refusal

    def run(self) -> None:
        ggevent.StreamServer = BatchAccept  # what gunicorn's run() builds its servers from
        super().run()

    def handle(self, listener: Any, client: Any, addr: Any) -> None:
        key = None
        if self.per_client and isinstance(addr, tuple) and addr:
            key = self._client_key(str(addr[0]))
        reserved = False
        if self.general_open >= self.general:
            started = time.perf_counter()
            if (self.probes_open >= self.reserve or self.open_connections >= self.cap
                    or not wants_probe(client)):
                self.refuse(client, "over-capacity", "worker", started)
                return
            reserved = True
        elif key is not None and (
                self.by_client.get(key, 0) >= self.per_client or (
                    self.per_client_other and self.by_client.get(key, 0) - self._held_by(key)
                    >= self.per_client_other)):
            self.refuse(client, "too-many-connections", "client-share", time.perf_counter())
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
            if not reserved and self.refuse_held(client, addr):
                conn.closed = True
                return
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

    def refuse(self, client: Any, kind: str, limit: str, started: float) -> None:
        """``shed`` the connection, and log and count it (``Refusals``)."""
        refusals = self.refusals
        if refusals is None:  # the app is not loaded yet: nothing to log with
            shed(client, kind)
            return
        head, rid = shed(client, kind, refusals.request_id)
        try:
            refusals.noted(head, rid, kind, limit, started)
        except Exception:  # a log or a metric failing must not fail the refusal
            self.log.warning("a refusal was not logged", exc_info=True)

    def refuse_held(self, client: Any, addr: Any) -> bool:
        """When the held budget, or the client's network's share of it, has no room: a
        connection whose first request is a stream or a long-poll is refused here, as the
        app would refuse it (``connections.budget_refusal``), without gunicorn's parser,
        Flask or a lingering close, so that a flood of them leaves the worker's time to
        the requests it serves. False: not refused (the app admits or
        refuses as usual). Counted while it is looked at: see ``handle``."""
        held_full, refusals = self.held_full, self.refusals
        if held_full is None or refusals is None or not (isinstance(addr, tuple) and addr):
            return False
        full = held_full(str(addr[0]))
        if full is None:
            return False
        started = time.perf_counter()
        line = peek_line(client, SHED_READ_S, 2048)
        if not refusals.waits(line):
            return False
        name, cap = full
        assert self._budget_refusal is not None  # set with held_full
        kind, detail, retry_after = self._budget_refusal(name, cap)
        head, rid = shed(client, kind, refusals.request_id, lambda head, rid: problem_answer(
            kind, detail, request_path(head), retry_after, rid))
        try:
            refusals.noted(head, rid, kind, name, started)
        except Exception:  # a log or a metric failing must not fail the refusal
            self.log.warning("a refusal was not logged", exc_info=True)
        return True

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

