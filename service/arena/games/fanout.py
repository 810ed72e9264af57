"""One game's event stream per process, shared by every local viewer of it.

A spectator's event stream used to read the game from Redis on every change, and check
its version on every keep-alive: a move in a game watched by a thousand spectators cost a
thousand reads at once, each holding a pooled connection. Here each process keeps one
``Feed`` per watched game: **one** ``Waiter`` on the game's channel (``service.storage.wakeups``)
and one pump (a greenlet under gevent, a thread otherwise) that, when the channel says
the game moved on, appends the new actions' events: an action's message carries the state
after it, so the pump finds the action (the one legal action that gives that state) and
its events with no Redis command (``Feed._from_messages``); any other change, or a message
missed, makes it read the game's action log once (``HMGET version log``) and replay the
new actions (``Arena._steps``). Streams wait on the feed, not on
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
import time
from typing import TYPE_CHECKING, Any, Protocol

import gevent

from service import jsonio, metrics
from service.arena.core.status import FINISHED
from service.arena.games.ending import ended_of
from service.engine import State, apply, legal_actions, redact_event
from service.jsonio import dumps
from service.storage.wakeups import game_message

if TYPE_CHECKING:
    from collections.abc import Iterator

    from service.storage.store import Game, Store
    from service.storage.wakeups import Wakeups

log = logging.getLogger(__name__)

# The pump lets other greenlets run once its writes of a move have used this much CPU
# (seconds of the process's CPU time, not of the clock): a move's fan-out to a thousand
# streams must not hold up the players' requests on the same worker for long, and
# yielding more often only puts other requests' work between its writes, which the last
# stream waits for. On a busy machine the clock runs on while the worker waits for a
# core: a wall-clock budget would yield at every look, for no one's benefit.
YIELD_AFTER_CPU_S = 0.005
CLOCK_EVERY = 64  # direct writes between two looks at the CPU clock
PUMP_POLL_S = 5.0  # how often an idle pump looks whether it still has streams
ALL = "all"  # the audience of a finished game open to everyone: events as they are


class FeedHost(Protocol):
    """What a feed uses of the ``Arena`` (``service.arena.games.commands``) that keeps it: its
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

    def _advance(self, trace: dict[str, float] | None = None) -> None:
        """Read the game's version and action log (one command) and append the events of
        the actions not replayed yet. ``trace``: when each stage of a move's fan-out was
        reached (``metrics.FANOUT_STAGES``), filled in here as it goes on."""
        store = self.arena.store
        key = store.game_key(self.game_id)
        raw_version, raw_log, raw_status = store.r.hmget(key, "version", "log", "status")
        if trace is not None:
            trace["known"] = time.time()
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
        finished = raw_status == FINISHED.encode() and state is not None
        meta = jsonio.loads(store.r.hget(key, "meta") or b"{}") if finished else None
        self._append(new, state, len(actions), version, trace, meta)

    def _from_messages(self, messages: list[Any], trace: dict[str, float] | None) -> bool:
        """Append the moves that ``messages`` carry, without reading Redis: each message
        one version on from the one before, with the state after it (what an action
        publishes). Its action is the one legal action that turns the state before into
        that state (the engine is deterministic), and its events are that step's. False,
        with nothing appended, when a message does not allow it (a change without a
        state, a version skipped, a reset, two actions giving one state): the pump then
        reads the action log, as it always may."""
        state = self.state
        if state is None or self.over:
            return False
        parsed = [game_message(m) for m in messages]
        if any(m is None for m in parsed):
            return False
        news = sorted((m for m in parsed if m is not None and m.version > self.version),
                      key=lambda m: m.version)
        version, ply = self.version, self.ply
        new: list[tuple[int, int, dict[str, Any]]] = []
        for msg in news:
            if (msg.version != version + 1 or msg.state_json is None
                    or msg.status == FINISHED):  # an ending: the read brings its reason
                return False
            try:
                target = self._state_at(msg)
            except (ValueError, KeyError, TypeError):  # not a state this engine reads
                return False
            if target.ply != ply + 1:
                return False
            found: tuple[State, list[Any]] | None = None
            for action in legal_actions(state):
                after, events = apply(state, action)
                if after == target:
                    if found is not None:
                        return False
                    found = (after, events)
            if found is None:
                return False
            state, events = found
            ply, version = ply + 1, msg.version
            new.extend((ply, i, e) for i, e in enumerate(events))
        if trace is not None:
            trace["known"] = time.time()
        self._append(new, state, ply, version, trace, None)
        return True

    def _state_at(self, msg: Any) -> State:
        """The state a message carries: the game cache's decoded copy when it holds that
        version (the listener or the commit put it there), else decoded here."""
        game = self.arena.store.games.at(self.game_id, msg.version)
        if game is not None:
            return game.state
        return State.from_dict(jsonio.loads(msg.state_json))

    def _append(self, new: list[tuple[int, int, dict[str, Any]]], state: State | None,
                ply: int, version: int, trace: dict[str, float] | None,
                ended_meta: dict[str, Any] | None) -> None:
        """Add ``new`` events, the feed now at ``ply`` actions and ``version``; write them
        to the direct streams and wake the others. ``ended_meta``: the finished game's
        meta, whose ``ended`` the ``game_over`` event carries."""
        finished = ended_meta is not None and state is not None
        if finished:
            assert state is not None and ended_meta is not None
            self._ending(new, state, ended_meta)
        with self._lock:
            self.events.extend(new)
            self.keys.extend((k, i) for k, i, _ in new)
            self.state = state
            self.ply = ply
            self.version = version
            self.over = finished or (state is not None and state.is_over)
        if new:
            if trace is not None:
                trace["replayed"] = time.time()
            self._write_direct(trace)
            self._wake()

    def _ending(self, new: list[tuple[int, int, dict[str, Any]]], state: State,
                meta: dict[str, Any]) -> None:
        """The finished game's ``game_over`` says why it ended (``ending.ended_of``), as its
        view does: the engine's own event for a game played to its end, or one added
        after the last event for a game ended before it (a forfeit, a void, a cancel)."""
        ended = ended_of(meta, state.is_over, state.winner, meta.get("seats"))
        if ended is None:
            return
        why = {"winner": ended["winner"], "reason": ended["reason"],
               "forfeit_by": ended["forfeit_by"], "why": ended["why"]}
        for n, (k, i, e) in enumerate(new):
            if e["type"] == "game_over":
                new[n] = (k, i, {**e, **why})
                return
        if state.is_over:
            return  # its game_over was sent before (a feed never misses one)
        last = new[-1] if new else (self.events[-1] if self.events else None)
        ply, index = (last[0], last[1] + 1) if last is not None else (self.ply, 0)
        new.append((ply, index, {"type": "game_over", "winner": ended["winner"],
                                 "scores": list(state.scores), **why}))

    def _wake(self) -> None:
        """Every stream waiting on this feed looks again."""
        changed, self._changed = self._changed, threading.Event()
        changed.set()
        if self.over or self.broken or self.ended:
            for d in list(self.direct):
                d.event.set()

    def _write_direct(self, trace: dict[str, float] | None = None) -> None:
        """Send what is new to every direct stream from here, without waking its
        greenlet: one non-blocking ``send`` each of bytes framed once per audience and
        position. A stream whose socket takes only part (a slow consumer), or whose
        greenlet is writing itself, is left to its greenlet, which catches up from its
        position. Other greenlets run between writes only every ``YIELD_AFTER_CPU_S``.
        ``trace`` gets the times of the first and the last write."""
        end = len(self.events)
        frames: dict[tuple[Any, int], bytes] = {}
        clock = time.process_time
        since = clock()
        first = cpu = 0.0
        written = 0
        for d in list(self.direct):
            if d.busy or d.pending or d.dead or d.position >= end:
                if d.position < end:
                    d.event.set()
                continue
            key = (d.audience, d.position)
            data = frames.get(key)
            if data is None:
                data = frames[key] = self.frame(d.audience, d.position, end)
            try:
                sent = d.raw.send(data)
            except BlockingIOError:
                sent = 0
            except OSError:
                d.dead = True
                d.event.set()
                continue
            d.position = end
            if sent < len(data):
                d.pending = data[sent:]
                d.event.set()
            written += 1
            if written == 1 and trace is not None:
                first, cpu = time.time(), clock()
            if written % CLOCK_EVERY == 0 and clock() - since >= YIELD_AFTER_CPU_S:
                gevent.sleep(0)  # let requests waiting on this worker run: players too
                since = clock()
        if trace is not None and written:
            trace["first_write"], trace["last_write"] = first, time.time()
            trace["write_cpu"] = clock() - cpu

    def _pump(self) -> None:
        waiter = self._waiter
        hub = self.arena.wakeups
        try:
            while not self.over:
                messages = waiter.wait(PUMP_POLL_S)
                if hub.closing:  # shutting down: the streams end themselves
                    break
                committed = self._news(messages) if messages else None
                if committed:  # a move, and when it was committed: its fan-out measured
                    trace = {"heard": waiter.heard_at, "woken": time.time()}
                    if not self._from_messages(messages, trace):
                        self._advance(trace)
                    if "last_write" in trace:
                        metrics.observe_fanout(committed, trace)
                elif committed is not None and not self._from_messages(messages, None):
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

    def _news(self, messages: list[Any]) -> float | None:
        """None when no message may say something this feed does not have yet; else the
        earliest commit time of those that do (unix seconds), 0.0 when none says it."""
        news = False
        committed = 0.0
        for m in messages:
            msg = game_message(m)
            if msg is None or msg.version > self.version:
                news = True
                if msg is not None and msg.updated and (not committed
                                                         or msg.updated < committed):
                    committed = msg.updated
        return committed if news else None

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
