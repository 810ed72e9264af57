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
  (``service.http.worker_sockets.HeldHeaders``); event streams have their own
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
- **the held budget**: a stream or a long-poll holds its connection for seconds to a whole
  game, an ordinary request for milliseconds, so what is held is bounded apart from what
  is served. Streams and long-polls together (spectators', seats' and bots', every
  client's) hold at most ``ARENA_HELD_SHARE`` of a worker's budget: the rest is always
  there for new connections with ordinary requests, actions first, whoever holds the
  held part. Past it a stream or long-poll is ``503 over-capacity`` with
  ``Retry-After`` (``HELD_RETRY_AFTER_S``: a place frees whenever any poll of the worker
  ends). And no network (``service.addresses.network_of``: an IPv4 /24, an IPv6 /64) holds
  more than ``ARENA_HELD_NETWORK_SHARE`` of the held budget, so that filling it takes many
  networks, not a dozen addresses; past it ``429 too-many-connections`` (the network's own
  doing, as a client's cap is). An action with ``?wait`` is never refused for the held
  budget: it is applied and answered at once, as a wait that timed out (its view says
  whose turn it is), since an action must find room whoever holds the rest. Both checks
  come before the caller's token is looked up (``install``), so a refusal costs no Redis
  command and its connection is closed at once: a refused client keeps no socket;
- at the socket (``service.http.gevent_worker``), one client may hold at most
  ``ARENA_CLIENT_SHARE`` of a worker's connections, and of those that its streams and
  long-polls do not hold at most the same share of what the held budget leaves to ordinary
  requests (off behind a trusted proxy, where every connection comes from the proxy), and
  ``ARENA_RESERVED_CONNECTIONS`` of the budget serve only ``/healthz``, ``/readyz`` and
  ``/metrics``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, NoReturn

from flask import Flask, Response, current_app, request
from werkzeug.datastructures import ImmutableMultiDict

from service import metrics
from service.addresses import client_of, network_of
from service.arena.core.problems import Problem
from service.http.limits import client_address

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
# of a worker's general budget, what streams and long-polls hold together: the quarter
# left always serves ordinary requests (each lasts milliseconds, so that many at once are
# more than a worker computes), while the box still holds thousands of waiting bots and
# spectators; and above the spectators' share, so seats' streams and polls keep a part
# that spectators can never take
HELD_SHARE = 0.75
# of the held budget, one network's streams and long-polls: eight networks are needed to
# fill it (a dozen addresses of one network count once), and one NAT still has room for
# dozens of bots, each with a poll and a waiting action per game it plays
HELD_NETWORK_SHARE = 0.125
RETRY_AFTER_S = 5  # a 429 at a cap: a slot frees when a poll ends or a stream closes
# a 503 at the held budget: any poll of the worker that ends frees a place, and the
# refusal costs the service nothing, so an honest bot may come back soon
HELD_RETRY_AFTER_S = 2

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
    "ARENA_HELD_SHARE": HELD_SHARE,
    "ARENA_HELD_NETWORK_SHARE": HELD_NETWORK_SHARE,
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


def read_body(environ: dict[str, Any], length: int) -> bytes:
    """The request's body of ``length`` bytes (its Content-Length), read from the WSGI
    input in one call (under the body deadline, ``DeadlineInput``). A body that ends
    before ``length`` (the client went away) is a malformed body, as it is when the
    server notices, and its connection is not used again."""
    stream = environ["wsgi.input"]
    data = stream.read(length)
    if len(data) < length:
        if isinstance(stream, DeadlineInput):
            stream._fail()
        log.warning("malformed request body: %d of %d bytes", len(data), length)
        raise Problem("malformed-body", "the request body cannot be read: the connection "
                      "ended before the body did")
    return data


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

    def readinto(self, buffer: Any) -> int:
        """``read`` into ``buffer``: werkzeug reads a body this way when the stream offers
        it (and asks whether it does, at the price of an ``AttributeError``, when not)."""
        data = self.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)

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

    def full(self, wanted: list[tuple[str, str, int]]) -> tuple[str, int] | None:
        """The first (cap name, cap) of ``wanted`` that is full, taking nothing (None: all
        have room): a refusal decided before the request is worth more work."""
        with self._lock:
            for name, key, cap in wanted:
                if cap > 0 and self.counts.get((name, key), 0) >= cap:
                    return name, cap
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
    ``query`` is the raw query (strings; before validation, which comes after). A turn
    poll without ``timeout`` waits its default (some seconds, ``schemas``): a poll too,
    or leaving the parameter out would hold a connection that no cap counts."""
    q = query or {}
    if endpoint in ("games.events", "tournaments.events"):
        return "stream"
    if endpoint in ("games.turn", "games.my_turns") and (
            q.get("timeout") is None or _positive(q.get("timeout"))):
        return "poll"
    if endpoint == "games.act" and _positive(q.get("wait")):
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


# The held budget's counts (see the module docstring): every stream and long-poll of the
# worker, and each network's.
BUDGET = ("held-network", "held")


def budget_wanted(cfg: Any, address: str | None) -> list[tuple[str, str, int]]:
    """The held budget's slots a stream or a long-poll from ``address`` takes: its
    network's share, then the worker's whole held budget."""
    return [("held-network", network_of(address), held_network_cap(cfg)),
            ("held", "", held_cap(cfg))]


def admit(endpoint: str | None, bot_id: str | None, query: Any,
          address: str | None) -> Held | None:
    """Take this request's slots if it is a stream or a long-poll (None if it is neither);
    429 ``too-many-connections`` past a client's or a bot's cap or its network's share of
    the held budget, 503 ``over-capacity`` when spectators' streams fill their share or
    streams and polls fill the held budget. An action with ``?wait`` past the held budget
    is let through without its wait (None), never refused: see the module docstring."""
    kind = waiting_kind(endpoint, query)
    if kind is None:
        return None
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    cfg = app.config
    slots: Slots = app.extensions["slots"]
    plural = "streams" if kind == "stream" else "polls"
    wanted = [(f"{plural}-client", client_key(address),
               int(cfg[_CAP_NAMES[f"{plural}-client"][0]]))]
    if bot_id is not None:
        wanted.append((f"{plural}-bot", bot_id, int(cfg[_CAP_NAMES[f"{plural}-bot"][0]])))
    elif kind == "stream":
        wanted.append(("spectators", "", spectator_cap(cfg)))
    wanted.extend(budget_wanted(cfg, address))
    full = slots.take(wanted)
    if full is None:
        return Held(slots, wanted)
    name, cap = full
    if name in BUDGET and endpoint == "games.act":
        skip_wait(name)
        return None
    refuse(name, cap)


def skip_wait(limit: str) -> None:
    """This action is served without its ``?wait`` (the held budget, or its network's
    share of it, is full): the query the operation reads next says ``wait=0``."""
    args = request.args.to_dict()
    args["wait"] = "0"
    request.args = ImmutableMultiDict(args)  # type: ignore[misc]
    metrics.wait_skipped(limit)


def budget_refusal(name: str, cap: int) -> tuple[str, str, int]:
    """(problem kind, detail, Retry-After seconds) of a refusal at the held budget
    (``name`` "held") or a network's share of it ("held-network"): one wording, whether
    the app refuses or the worker does, at the socket (``service.http.gevent_worker``)."""
    if name == "held":
        return ("over-capacity",
                f"open event streams and long-polls hold their share of this worker ({cap}: "
                "ARENA_HELD_SHARE); ordinary requests and actions are still served; retry "
                "shortly", HELD_RETRY_AFTER_S)
    return ("too-many-connections",
            f"your network (an IPv4 /24 or IPv6 /64) holds its share of this worker's open "
            f"event streams and long-polls ({cap}: ARENA_HELD_NETWORK_SHARE)", RETRY_AFTER_S)


def refuse(name: str, cap: int) -> NoReturn:
    """Refuse this request at the cap ``name`` (a problem with ``Retry-After``), counted
    by which cap, and have its connection closed after the answer."""
    metrics.connection_refused(name)
    close_connection()  # a refused client must not hold its connection idle meanwhile
    if name in BUDGET:
        kind, detail, retry_after = budget_refusal(name, cap)
        raise Problem(kind, detail, headers={"Retry-After": str(retry_after)})
    if name == "spectators":
        raise Problem("over-capacity",
                      f"spectators' event streams hold their share of this worker ({cap}); "
                      "retry shortly", headers={"Retry-After": str(RETRY_AFTER_S)})
    setting, what = _CAP_NAMES[name]
    raise Problem("too-many-connections", f"at most {cap} {what} at once ({setting})",
                  headers={"Retry-After": str(RETRY_AFTER_S)})


def refuse_early() -> None:
    """Before the request is authenticated: a stream or a long-poll the held budget, or
    its network's share of it, has no room for is refused now, at no Redis command (the
    token is not looked up). ``admit`` checks again, and takes the slots, after
    authentication; an action with ``?wait`` is left to it (it is served, without the
    wait)."""
    req = request._get_current_object()  # type: ignore[attr-defined]
    endpoint = req.endpoint
    if endpoint == "games.act" or waiting_kind(endpoint, req.args) is None:
        return
    app = current_app._get_current_object()  # type: ignore[attr-defined]
    slots: Slots = app.extensions["slots"]
    full = slots.full(budget_wanted(app.config, client_address()))
    if full is not None:
        refuse(*full)


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


def held_cap(cfg: Any) -> int:
    """Streams and long-polls a worker holds at once (0: no cap)."""
    share = float(cfg.get("ARENA_HELD_SHARE") or 0)
    return max(1, int(general_budget(cfg) * share)) if 0 < share < 1 else 0


def held_network_cap(cfg: Any) -> int:
    """Streams and long-polls one network holds at once in a worker (0: no cap)."""
    share = float(cfg.get("ARENA_HELD_NETWORK_SHARE") or 0)
    if share <= 0:
        return 0
    held = held_cap(cfg) or general_budget(cfg)
    return max(1, int(held * share))


def install(app: Flask) -> None:
    """The body deadline around the app, this process's slot counts, and the held
    budget's refusals before authentication."""
    app.extensions["slots"] = Slots()
    app.before_request(refuse_early)
    timeout_s = float(app.config["ARENA_BODY_TIMEOUT"])
    app.wsgi_app = BodyDeadline(app.wsgi_app, timeout_s)  # type: ignore[method-assign]
