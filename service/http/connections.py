"""Connection limits and deadlines: what one client may hold open, and for how long.

The arena faces strangers' programs, so no client may keep a connection busy without
sending, or hold more than its share of the connections a worker serves at once
(``ARENA_WORKER_CONNECTIONS``). The limits live in three places, each where the thing it
limits is known:

- **The request head** (``ARENA_HEAD_TIMEOUT``, gunicorn's ``keepalive``): every head,
  the first on a connection included, must arrive within that many seconds of the
  connection being ready for it; else the connection is closed (gunicorn's own timeout
  around its parser, ``service.http.gunicorn_conf``).
- **The request body** (``ARENA_BODY_TIMEOUT``): from the moment the head is parsed, the
  whole body must arrive within that many seconds. ``BodyDeadline`` wraps ``wsgi.input`` so
  that each read of it waits only for what is left of that time (a ``gevent.Timeout``
  under the gevent worker); past it the answer is ``408 request-timeout`` and the
  connection closes. A body the server cannot frame (a malformed chunk size, a missing
  chunk terminator, a bad trailer: gunicorn's ``http.errors`` raised while the app reads)
  is ``400 malformed-body``, logged as a client error, never a traceback. Bodies are at
  most ``MAX_CONTENT_LENGTH`` (16 KB) here, so a total time, not a rate, is the bound.
- **Responses** (``ARENA_SEND_TIMEOUT``): every write of a response to the client socket
  must finish within that many seconds, or the connection is dropped
  (``service.http.gevent_worker.HeldHeaders``); event streams have their own
  ``ARENA_SSE_WRITE_TIMEOUT`` on the writes they make themselves.

**Shares of the connection budget** (counted per worker process, in memory: a process
that dies takes its counts with its connections, so nothing leaks; a client may hold a
cap in each worker, so the service-wide cap is the cap times ``WEB_CONCURRENCY``):

- each client (``client_key``: an IPv4 address; an IPv6 /64, IPv4-mapped addresses as the
  IPv4 they map) and each bot may hold at most ``ARENA_STREAMS_PER_CLIENT`` /
  ``ARENA_STREAMS_PER_BOT`` open event streams and ``ARENA_POLLS_PER_CLIENT`` /
  ``ARENA_POLLS_PER_BOT`` long-polls (``/bots/me/turns?timeout``, ``/turn?timeout``,
  actions with ``?wait``); past it ``429 too-many-connections`` with ``Retry-After``;
- anonymous event streams (spectators) together hold at most ``ARENA_SPECTATOR_SHARE`` of a
  worker's budget, so seats' streams and players' requests always have the rest (past it
  ``503 over-capacity``);
- at the socket (``service.http.gevent_worker``), one client may hold at most
  ``ARENA_CLIENT_SHARE`` of a worker's connections (off behind a trusted proxy, where every
  connection comes from the proxy), and ``ARENA_RESERVED_CONNECTIONS`` of the budget serve
  only ``/healthz``, ``/readyz`` and ``/metrics``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from flask import Flask, Response, current_app

from service.addresses import client_of
from service.arena.problems import Problem

log = logging.getLogger(__name__)

# Seconds a request head may take (gunicorn's keepalive, which also closes an idle
# keep-alive connection): 5 s is gunicorn's default and what a bot on any network needs.
HEAD_TIMEOUT_S = 5  # whole seconds (gunicorn takes an int)
# Seconds a whole request body may take once the head is in. The largest body is 16 KB
# (MAX_CONTENT_LENGTH), a real one under 2 KB: even 1.6 KB/s carries the largest in 10 s.
BODY_TIMEOUT_S = 10.0
# Seconds one write of a response may take (a client that does not read is dropped): the
# same as the event streams' ARENA_SSE_WRITE_TIMEOUT.
SEND_TIMEOUT_S = 10.0
# Connections of each worker that serve only the probes (/healthz, /readyz, /metrics).
RESERVED_CONNECTIONS = 16
# Per worker process (see the module docstring and docs/operations.md for the figures).
STREAMS_PER_CLIENT = 64
STREAMS_PER_BOT = 16
POLLS_PER_CLIENT = 256
POLLS_PER_BOT = 64
SPECTATOR_SHARE = 0.5  # of a worker's general budget: anonymous event streams together
# of a worker's general budget, one client's open connections: 496 of 1,984, room for a
# client at both its caps (64 streams + 256 polls) and more, and one address's burst of
# requests stays a quarter of what a worker would have to answer at once
CLIENT_SHARE = 0.25
RETRY_AFTER_S = 5  # a 429 at a cap: a slot frees when a poll ends or a stream closes

PROBES = ("/healthz", "/readyz", "/metrics")

BACKLOG = 8192  # connections the kernel queues for the workers (gunicorn's ``backlog``)

DEFAULTS: dict[str, Any] = {
    "ARENA_HEAD_TIMEOUT": HEAD_TIMEOUT_S,
    "ARENA_BACKLOG": BACKLOG,
    "ARENA_BODY_TIMEOUT": BODY_TIMEOUT_S,
    "ARENA_SEND_TIMEOUT": SEND_TIMEOUT_S,
    "ARENA_RESERVED_CONNECTIONS": RESERVED_CONNECTIONS,
    "ARENA_STREAMS_PER_CLIENT": STREAMS_PER_CLIENT,
    "ARENA_STREAMS_PER_BOT": STREAMS_PER_BOT,
    "ARENA_POLLS_PER_CLIENT": POLLS_PER_CLIENT,
    "ARENA_POLLS_PER_BOT": POLLS_PER_BOT,
    "ARENA_SPECTATOR_SHARE": SPECTATOR_SHARE,
    "ARENA_CLIENT_SHARE": CLIENT_SHARE,
}


# The client an address belongs to, for counting (service.addresses: an IPv6 /64 is one).
client_key = client_of


# --- the body deadline and malformed bodies --------------------------------------------------

try:  # gunicorn's errors for a body it cannot frame (absent: no gunicorn, nothing to map)
    from gunicorn.http.errors import NoMoreData, ParseException

    _BODY_ERRORS: tuple[type[BaseException], ...] = (ParseException, NoMoreData)
except ImportError:  # pragma: no cover - gunicorn is a dependency
    _BODY_ERRORS = ()


def malformed_body(exc: BaseException) -> Problem:
    """The one answer to a body that cannot be framed (and the log line that says so):
    the client's error, so a warning without a traceback."""
    log.warning("malformed request body: %s: %s", type(exc).__name__, exc)
    return Problem("malformed-body", f"the request body cannot be read: {_describe(exc)}")


def _describe(exc: BaseException) -> str:
    name = type(exc).__name__
    if name == "NoMoreData":
        return "the connection ended before the body did"
    text = str(exc).strip()
    return f"{name} ({text})" if text else name


class DeadlineInput:
    """``wsgi.input`` whose reads wait at most until ``until`` (monotonic seconds) and whose
    framing errors are problems (see the module docstring)."""

    def __init__(self, stream: Any, until: float, timeout_s: float) -> None:
        self._stream = stream
        self._until = until
        self._timeout_s = timeout_s

    def _fail(self) -> None:
        """Where the next request starts is unknown: the connection must carry no other.
        gunicorn closes one whose body failed; the request (``request``, set by
        ``service.http.gevent_worker``) is marked so that the answer says
        ``Connection: close``."""
        if hasattr(self._stream, "failed"):
            self._stream.failed = True
        req = getattr(self._stream, "request", None)
        if req is not None:
            req.must_close = True

    def _timed_out(self) -> Problem:
        self._fail()
        log.info("request body not received within %.1f s", self._timeout_s)
        return Problem("request-timeout",
                       f"the request body did not arrive within {self._timeout_s:g} s")

    def _call(self, read: Callable[..., Any], *args: Any) -> Any:
        left = self._until - time.monotonic()
        if left <= 0:
            raise self._timed_out()
        import gevent

        timer = gevent.Timeout(left)
        timer.start()
        try:
            return read(*args)
        except gevent.Timeout as exc:
            if exc is not timer:
                raise
            raise self._timed_out() from None
        except _BODY_ERRORS as exc:
            self._fail()
            raise malformed_body(exc) from None
        finally:
            timer.close()

    def read(self, *args: Any) -> bytes:
        return self._call(self._stream.read, *args)

    def readline(self, *args: Any) -> bytes:
        return self._call(self._stream.readline, *args)

    def readlines(self, *args: Any) -> list[bytes]:
        return self._call(self._stream.readlines, *args)

    def __iter__(self) -> DeadlineInput:
        return self

    def __next__(self) -> bytes:
        line = self.readline()
        if not line:
            raise StopIteration
        return line


class BodyDeadline:
    """WSGI middleware: ``wsgi.input`` as a ``DeadlineInput`` from the moment the app is
    called (the head has been parsed)."""

    def __init__(self, app: Any, timeout_s: float) -> None:
        self.app = app
        self.timeout_s = timeout_s

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        stream = environ.get("wsgi.input")
        if stream is not None and self.timeout_s > 0:
            environ["wsgi.input"] = DeadlineInput(
                stream, time.monotonic() + self.timeout_s, self.timeout_s)
        return self.app(environ, start_response)


# --- shares of the connection budget ---------------------------------------------------------


class Slots:
    """Open streams and long-polls of this process, counted per (cap, key)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: dict[tuple[str, str], int] = {}

    def take(self, wanted: list[tuple[str, str, int]]) -> tuple[str, int] | None:
        """Take one slot of each (cap name, key, cap) in ``wanted`` (cap 0: unlimited),
        all or none; None when taken, else the (cap name, cap) that is full."""
        with self._lock:
            for name, key, cap in wanted:
                if cap > 0 and self.counts.get((name, key), 0) >= cap:
                    return name, cap
            for name, key, _cap in wanted:
                self.counts[(name, key)] = self.counts.get((name, key), 0) + 1
            return None

    def give_back(self, wanted: list[tuple[str, str, int]]) -> None:
        with self._lock:
            for name, key, _cap in wanted:
                left = self.counts.get((name, key), 0) - 1
                if left > 0:
                    self.counts[(name, key)] = left
                else:
                    self.counts.pop((name, key), None)


class Held:
    """The slots one request holds; given back once, when its response is closed."""

    __slots__ = ("_slots", "_wanted")

    def __init__(self, slots: Slots, wanted: list[tuple[str, str, int]]) -> None:
        self._slots = slots
        self._wanted: list[tuple[str, str, int]] | None = wanted

    def release(self) -> None:
        wanted, self._wanted = self._wanted, None
        if wanted:
            self._slots.give_back(wanted)

    def attach(self, resp: Response) -> Response:
        """Give the slots back when the server closes ``resp`` (a stream's end, or a
        long-poll's answer sent)."""
        resp.call_on_close(self.release)
        return resp


def waiting_kind(endpoint: str | None, query: Any) -> str | None:
    """"stream" or "poll" when this operation holds its connection waiting, else None.
    ``query`` is the raw query (strings; before validation, which comes after)."""
    q = query or {}
    if endpoint == "api.events":
        return "stream"
    if endpoint in ("api.turn", "api.my_turns") and _positive(q.get("timeout")):
        return "poll"
    if endpoint == "api.act" and _positive(q.get("wait")):
        return "poll"
    return None


def _positive(value: Any) -> bool:
    try:
        return float(value) > 0
    except (TypeError, ValueError):
        return False


_CAP_NAMES = {
    "streams-client": ("ARENA_STREAMS_PER_CLIENT", "open event streams from this client"),
    "streams-bot": ("ARENA_STREAMS_PER_BOT", "open event streams of this bot"),
    "polls-client": ("ARENA_POLLS_PER_CLIENT", "open long-polls from this client"),
    "polls-bot": ("ARENA_POLLS_PER_BOT", "open long-polls of this bot"),
}


def admit(endpoint: str | None, bot_id: str | None, query: Any,
          address: str | None) -> Held | None:
    """Take this request's slots if it is a stream or a long-poll (None if it is neither);
    429 ``too-many-connections`` past a client's or a bot's cap, 503 ``over-capacity``
    when spectators' streams fill their share."""
    kind = waiting_kind(endpoint, query)
    if kind is None:
        return None
    cfg = current_app.config
    slots: Slots = current_app.extensions["slots"]
    plural = "streams" if kind == "stream" else "polls"
    wanted = [(f"{plural}-client", client_key(address),
               int(cfg[_CAP_NAMES[f"{plural}-client"][0]]))]
    if bot_id is not None:
        wanted.append((f"{plural}-bot", bot_id, int(cfg[_CAP_NAMES[f"{plural}-bot"][0]])))
    elif kind == "stream":
        wanted.append(("spectators", "", spectator_cap(cfg)))
    full = slots.take(wanted)
    if full is None:
        return Held(slots, wanted)
    name, cap = full
    close_connection()  # a refused client must not hold its connection idle meanwhile
    if name == "spectators":
        raise Problem("over-capacity",
                      f"spectators' event streams hold their share of this worker ({cap}); "
                      "retry shortly", headers={"Retry-After": str(RETRY_AFTER_S)})
    setting, what = _CAP_NAMES[name]
    raise Problem("too-many-connections", f"at most {cap} {what} at once ({setting})",
                  headers={"Retry-After": str(RETRY_AFTER_S)})


def close_connection() -> None:
    """Have the server close this request's connection after its answer (under gunicorn:
    the request that ``service.http.gevent_worker`` hangs on its body, ``request``)."""
    from flask import request

    stream = request.environ.get("wsgi.input")
    inner = getattr(stream, "_stream", stream)
    req = getattr(inner, "request", None)
    if req is not None:
        req.must_close = True


def general_budget(cfg: Any) -> int:
    """A worker's connections for everything but the probes' reserve."""
    total = int(cfg.get("ARENA_WORKER_CONNECTIONS") or 0)
    return max(1, total - int(cfg.get("ARENA_RESERVED_CONNECTIONS") or 0))


def spectator_cap(cfg: Any) -> int:
    share = float(cfg.get("ARENA_SPECTATOR_SHARE") or 0)
    return max(1, int(general_budget(cfg) * share)) if share > 0 else 0


def install(app: Flask) -> None:
    """The body deadline around the app, and this process's slot counts."""
    app.extensions["slots"] = Slots()
    timeout_s = float(app.config["ARENA_BODY_TIMEOUT"])
    app.wsgi_app = BodyDeadline(app.wsgi_app, timeout_s)  # type: ignore[method-assign]
