"""One game's event stream per process, shared by every local viewer of it.

A spectator's event stream used to read the game from Redis on every change, and check
its version on every keep-alive: a move in a game watched by a thousand spectators cost a
thousand reads at once, each holding a pooled connection. Here each process keeps one
``Feed`` per watched game: **one** ``Waiter`` on the game's channel (``service.storage.wakeups``)
and one pump (a greenlet under gevent, a thread otherwise) that, when the channel says
the game moved on, reads the game's action log once (``HMGET version log``), replays the
new actions (``Arena._steps``) and appends their events. Streams wait on the feed, not on
Redis, and take what is new from it, encoded once per audience: the spectators' redaction
is the same for every spectator and each seat's for that seat, so a thousand spectators
at the same place in the stream are sent the very same bytes. An idle stream costs no
Redis command at all; its keep-alive is a timer.

Nothing changes for the viewer: event ids, resume after ``Last-Event-ID``, redaction per
viewer (``redact_event``, or the whole event once a finished game is open to all), the
embargo (``Arena.stream`` refuses a spectator before joining), the shutdown ``retry:``.

Ordering: the feed's waiter is registered before its first read, so a change committed
after that read reaches the pump. A reset (the listener reconnected: messages may have
been missed) makes the pump read again. If a read fails (Redis gone), the feed is marked
broken and its streams end; clients reconnect with ``Last-Event-ID`` to a fresh feed.
"""

from __future__ import annotations

import bisect
import logging
import threading
from typing import TYPE_CHECKING, Any, Protocol

import gevent

from service.engine import State, redact_event
from service.jsonio import dumps
from service.storage.wakeups import game_message

if TYPE_CHECKING:
    from collections.abc import Iterator

    from service.storage.store import Game, Store
    from service.storage.wakeups import Wakeups

log = logging.getLogger(__name__)

# The pump lets other greenlets run after this many direct writes: a move's fan-out to a
# thousand streams must not hold up the players' requests on the same worker.
YIELD_EVERY = 50
PUMP_POLL_S = 5.0  # how often an idle pump looks whether it still has streams
ALL = "all"  # the audience of a finished game open to everyone: events as they are


class FeedHost(Protocol):
    """What a feed uses of the ``Arena`` (``service.arena.games``) that keeps it: its
    store and wake-ups, the engine's steps, and forgetting the feed. Named by its shape
    because the arena imports this module."""

    store: Store
    wakeups: Wakeups

    def _steps(self, game: Game, actions: list[int], start: State | None, first_ply: int
               ) -> Iterator[tuple[int, list[dict[str, Any]], State]]: ...

    def _drop_feed(self, feed: Feed, force: bool = False) -> bool: ...


class Feed:
    """The events of one game this process has, from its creation to what Redis said last.

    ``events`` holds (ply, index, event) in stream order; ``_encoded[audience]`` the SSE
    text of each, as that audience sees it, filled on demand. Streams keep their own
    position (an index into ``events``) and ask ``chunk`` for what is new."""

    def __init__(self, arena: FeedHost, game: Game) -> None:
        self.arena = arena
        self.game_id = game.id
        self.game = game  # players, seed and variants: what replaying needs
        self.events: list[tuple[int, int, dict[str, Any]]] = []
        self.keys: list[tuple[int, int]] = []
        self.state: State | None = None
        self.ply = 0  # actions replayed
        self.version = 0
        self.over = False
        self.broken = False
        self.ended = False  # the pump is gone: new streams make a new feed
        self.streams = 0  # streams using this feed (``Arena._join_feed``)
        self._lock = threading.Lock()
        self._encoded: dict[Any, list[bytes]] = {}
        self._chunks: dict[Any, tuple[int, int, bytes]] = {}
        self._changed = threading.Event()
        self._frames: dict[Any, tuple[int, int, bytes]] = {}
        # streams written to directly from the pump (``Direct``), see ``_write_direct``
        self.direct: set[Direct] = set()
        self._waiter: Any = None
        self._opened = False
        self._open_lock = threading.Lock()

    # --- the pump ------------------------------------------------------------------------

    def open(self) -> None:
        """Register on the game's channel and read the game once (first stream only);
        raises the Redis error when Redis cannot be reached."""
        if self._opened:
            return
        with self._open_lock:
            if self._opened:
                return
            hub = self.arena.wakeups
            waiter = hub.waiter(self.arena.store.game_channel(self.game_id)).__enter__()
            try:
                self._advance()
            except BaseException:
                waiter.__exit__()
                raise
            self._waiter = waiter
            self._opened = True
            if self.over:  # nothing will be added: no pump
                waiter.__exit__()
                self._waiter = None
                self.arena._drop_feed(self, force=True)
                return
            threading.Thread(target=self._pump, name=f"allfours-feed-{self.game_id}",
                             daemon=True).start()

    def _advance(self) -> None:
        """Read the game's version and action log (one command) and append the events of
        the actions not replayed yet."""
        store = self.arena.store
        raw_version, raw_log = store.r.hmget(store.game_key(self.game_id), "version", "log")
        if raw_version is None:
            return
        version = int(raw_version)
        if version <= self.version:
            return
        actions = [ord(ch) - 48 for ch in (raw_log or b"").decode()]
        new: list[tuple[int, int, dict[str, Any]]] = []
        state = self.state
        start = self.ply + 1 if state is not None else 1
        for k, events, after in self.arena._steps(self.game, actions[self.ply:], state, start):
            state = after
            new.extend((k, i, e) for i, e in enumerate(events))
        with self._lock:
            self.events.extend(new)
            self.keys.extend((k, i) for k, i, _ in new)
            self.state = state
            self.ply = len(actions)
            self.version = version
            self.over = state is not None and state.is_over
        if new:
            self._write_direct()
            self._wake()

    def _wake(self) -> None:
        """Every stream waiting on this feed looks again."""
        changed, self._changed = self._changed, threading.Event()
        changed.set()
        if self.over or self.broken or self.ended:
            for d in list(self.direct):
                d.event.set()

    def _write_direct(self) -> None:
        """Send what is new to every direct stream from here, without waking its
        greenlet: one non-blocking ``send`` each of bytes framed once per audience. A
        stream whose socket takes only part (a slow consumer), or whose greenlet is
        writing itself, is left to its greenlet, which catches up from its position."""
        end = len(self.events)
        for n, d in enumerate(list(self.direct), 1):
            if n % YIELD_EVERY == 0:
                gevent.sleep(0)  # let requests waiting on this worker run: players first
            if d.busy or d.pending or d.dead or d.position >= end:
                if d.position < end:
                    d.event.set()
                continue
            frame = self.frame(d.audience, d.position, end)
            try:
                sent = d.raw.send(frame)
            except BlockingIOError:
                sent = 0
            except OSError:
                d.dead = True
                d.event.set()
                continue
            d.position = end
            if sent < len(frame):
                d.pending = frame[sent:]
                d.event.set()

    def _pump(self) -> None:
        waiter = self._waiter
        hub = self.arena.wakeups
        try:
            while not self.over:
                messages = waiter.wait(PUMP_POLL_S)
                if hub.closing:  # shutting down: the streams end themselves
                    break
                if messages and self._news(messages):
                    self._advance()
                if self.streams <= 0 and self.arena._drop_feed(self):
                    return
        except Exception:
            log.exception("event feed of game %s failed", self.game_id)
            self.broken = True
        finally:
            waiter.__exit__()
            self._waiter = None
            self.arena._drop_feed(self, force=True)
            self._wake()

    def _news(self, messages: list[Any]) -> bool:
        """Whether a message may say something this feed does not have yet."""
        for m in messages:
            msg = game_message(m)
            if msg is None or msg.version > self.version:
                return True
        return False

    # --- what streams use ---------------------------------------------------------------

    def position_after(self, after: tuple[int, int]) -> int:
        """The index of the first event after the event id ``after``."""
        return bisect.bisect_right(self.keys, after)

    def chunk(self, audience: Any, start: int, end: int) -> bytes:
        """Events ``start:end`` as SSE text for ``audience`` (a seat, None for spectators,
        ``ALL``); the same bytes object for every stream asking the same."""
        cached = self._chunks.get(audience)
        if cached is not None and cached[0] == start and cached[1] == end:
            return cached[2]
        with self._lock:
            encoded = self._encoded.setdefault(audience, [])
            for k, i, e in self.events[len(encoded):end]:
                shown = e if audience == ALL else redact_event(e, audience)
                encoded.append(f"id: {k}.{i}\nevent: {e['type']}\ndata: {dumps(shown)}\n\n"
                               .encode())
            text = b"".join(encoded[start:end])
            self._chunks[audience] = (start, end, text)
        return text

    def frame(self, audience: Any, start: int, end: int) -> bytes:
        """``chunk`` framed as one HTTP/1.1 chunk (what gunicorn would make of it)."""
        cached = self._frames.get(audience)
        if cached is not None and cached[0] == start and cached[1] == end:
            return cached[2]
        text = frame(self.chunk(audience, start, end))
        self._frames[audience] = (start, end, text)
        return text

    def wait(self, position: int, timeout: float) -> bool:
        """Block until there are events past ``position``, the feed ends, or ``timeout``
        passes (False: a keep-alive is due)."""
        changed = self._changed
        if len(self.events) > position or self.broken or self.arena.wakeups.closing:
            return True
        if self.ended:
            return True
        return changed.wait(timeout)


def frame(data: bytes) -> bytes:
    """``data`` as one chunk of a chunked HTTP/1.1 body."""
    return b"%X\r\n%s\r\n" % (len(data), data)


class Direct:
    """A stream the pump writes to directly: its socket, audience and position (the
    index of the first event not sent yet), and what its own greenlet has to do."""

    __slots__ = ("audience", "busy", "dead", "event", "pending", "position", "raw", "sock")

    def __init__(self, sock: Any, audience: Any, position: int) -> None:
        self.sock = sock  # the gevent socket: cooperative ``sendall`` for the greenlet
        self.raw = sock._sock  # the non-blocking OS socket under it: the pump's ``send``
        self.audience = audience
        self.position = position
        self.busy = False  # its greenlet is writing: the pump leaves it alone
        self.pending: bytes | None = None  # the rest of a frame the socket did not take
        self.dead = False  # a send failed: the client is gone
        self.event = threading.Event()  # set: the greenlet has something to do


def direct_socket(environ: dict[str, Any]) -> Any:
    """The client's gevent socket when a stream's body may be written to it directly:
    under gunicorn's gevent worker (``gunicorn.socket``, inside the worker's ``HeldHeaders``
    and ``ClientSocket``), for a GET over HTTP/1.1, whose body gunicorn sends chunked (the
    pump frames its writes the same way). None otherwise (the Flask test client, the
    development server, HTTP/1.0): the stream then yields everything through the server.
    """
    if environ.get("REQUEST_METHOD") != "GET" or environ.get("SERVER_PROTOCOL") != "HTTP/1.1":
        return None
    try:
        from gevent.socket import socket as gevent_socket
    except ImportError:  # pragma: no cover - gevent is a dependency
        return None
    sock = environ.get("gunicorn.socket")
    # the worker's wrappers around the client's socket (HeldHeaders, around the drain's
    # ClientSocket): the gevent socket inside them
    for _ in range(3):
        inner = getattr(sock, "_sock", None)
        if inner is None or isinstance(sock, gevent_socket):
            break
        sock = inner
    # exactly gevent's socket: a TLS socket (a subclass) must not be written around TLS
    if type(sock) is not gevent_socket or getattr(sock, "_sock", None) is None:
        return None
    return sock
