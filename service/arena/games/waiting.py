"""Waiting for a game to move: long-polls for a seat's turn, a bot's turns in any game,
and server-sent event streams for players and spectators.

Why a module of its own: waiting is where the service holds connections open (thousands
at once), so its costs and limits (keep-alives, write timeouts, send buffers, the shared
per-worker feeds of ``service.arena.games.fanout``) are a concern apart from the game commands
in ``service.arena.games.commands``. ``Waiting`` is a part of ``Arena``: it uses the arena's
store, listener (``wakeups``) and views, and answers through the same problems.
"""


from __future__ import annotations

import contextlib
import errno
import logging
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import gevent

from service import metrics
from service.arena.core.problems import Problem
from service.arena.core.status import ACTIVE, EMBARGOED, FINISHED
from service.arena.games.fanout import ALL, Direct, Feed, frame
from service.engine import (
    State,
    apply,
    new_game,
)
from service.storage.store import Game
from service.storage.wakeups import GameMessage, game_message

log = logging.getLogger(__name__)

KEEPALIVE_S = 5.0
SHUTDOWN_RETRY_MS = 2000  # the ``retry:`` of a stream ended by a shutdown
# A stream's write that takes longer drops it (a consumer that does not read); the
# client resumes with Last-Event-ID.
WRITE_TIMEOUT_S = 10.0
# A stream socket's kernel send buffer, in bytes (the kernel doubles it): fixed rather than
# autotuned (up to 4 MB a socket), so what a slow consumer holds unsent is bounded and its
# writes block, and time out, soon. A whole game's events are a few tens of KB.
SEND_BUFFER_BYTES = 65536
KEEPALIVE_FRAME = frame(b": keep-alive\n\n")


def parse_event_id(text: str | None) -> tuple[int, int] | None:
    """``"ply.index"`` → (ply, index); a bare ``"ply"`` means all of that ply's events;
    None when absent or not of that shape."""
    if not text:
        return None
    ply, sep, idx = text.strip().partition(".")
    if not ply.isdigit():
        return None
    if not sep:  # "12": everything ply 12 caused
        return int(ply), 10**9
    if not idx.isdigit():
        return None
    return int(ply), int(idx)


def game_from_message(game_id: str, meta: dict[str, Any], msg: GameMessage) -> Game:
    """The game at ``msg.version`` from a game-channel message that carries its state,
    given the meta it had (a change of meta publishes no state). It has no action log
    (``log`` is None): it serves views and turn checks, not replays."""
    assert msg.state_json is not None and msg.status is not None
    return Game(game_id, msg.version, msg.status, meta, msg.state_json, None,  # type: ignore[arg-type]
                msg.deadline, msg.updated)


class Waiting:
    """The waiting half of ``Arena`` (which inherits it): see the module docstring."""

    def wait_turn(
        self, game_id: str, bot_id: str | None, seat: int | None, after: int | None,
        timeout: float,
    ) -> dict[str, Any]:
        """Answer when it is the viewer's turn, the game passed ``after``, or it is over.

        Registers with the process's listener (``service.storage.wakeups``) before reading, so a
        change after the read still wakes us; then blocks on it (no polling). A change
        that gives the turn to another seat is skipped without a read.
        """
        if timeout <= 0:
            game, _, ready = self._read_for_turn(game_id, bot_id, seat, after)
            return {"timed_out": not ready(game), "view": self.view(game, bot_id, seat)}
        metrics.LIVE.polls += 1
        try:
            return self._wait_turn(game_id, bot_id, seat, after, time.monotonic() + timeout)
        finally:
            metrics.LIVE.polls -= 1

    def _wait_turn(self, game_id: str, bot_id: str | None, seat: int | None,
                   after: int | None, deadline: float) -> dict[str, Any]:
        with self.wakeups.waiter(self.store.game_channel(game_id)) as waiter:
            game, after, ready = self._read_for_turn(game_id, bot_id, seat, after)
            timed_out = False
            if not ready(game):
                newer, timed_out = self._await(waiter, deadline, game_id, game.version,
                                               game.meta, self._held(game, bot_id, seat),
                                               after, ready, bot_id, seat)
                game = newer or game
            return {"timed_out": timed_out, "view": self.view(game, bot_id, seat)}

    def _read_for_turn(self, game_id: str, bot_id: str | None, seat: int | None,
                       after: int | None) -> tuple[Game, int | None, Callable[[Game], bool]]:
        """Read the game for ``wait_turn``: the game, the version to wait past (a
        spectator without ``after`` waits past the one read now) and the check that the
        wait is over."""
        game = self.get(game_id)
        viewer = self.viewer_seat(game, bot_id, seat)
        self._spectating(game, viewer)
        if after is None and viewer is None:
            after = game.version
        return game, after, self._ready_check(bot_id, seat, viewer is not None, after)

    def _ready_check(self, bot_id: str | None, seat: int | None, seated: bool,
                     after: int | None) -> Callable[[Game], bool]:
        def ready(g: Game) -> bool:
            if g.status == FINISHED or (after is not None and g.version > after):
                return True
            if not seated or g.status != ACTIVE:
                return False
            return g.state.turn in self._held(g, bot_id, seat)

        return ready

    def _await(
        self, waiter: Any, deadline: float, game_id: str, version: int,
        meta: dict[str, Any], held: list[int], after: int | None,
        ready: Callable[[Game], bool], bot_id: str | None, seat: int | None,
    ) -> tuple[Game | None, bool]:
        """Block on ``waiter`` until the game, as a wake-up shows it, is ``ready``.

        ``version``, ``meta`` and ``held`` describe the game as last seen. A message is
        worth a look when it may make the game ready: newer than ``after``, the turn of a
        seat in ``held``, or saying no seat (over, waiting, or an unknown writer). The
        game is then taken from the newest message (``game_from_message``), which costs
        no Redis read, unless some message since the game was last read carried no state
        (the meta changed, or a reset): then it is read. Returns (the game last seen here,
        or None if none was; whether time ran out). When time runs out after skipped
        messages the game is read once more, so the answer is current.
        """
        skipped = False
        stale = False  # a message since the last read said: the meta may have changed
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                if not skipped:
                    return None, True
                g = self.get(game_id)
                return g, not ready(g)
            messages = waiter.wait(left)
            if self.wakeups.closing:  # shutting down: answer now, with the game as it is
                g = self.get(game_id)
                return g, not ready(g)
            if not messages:
                continue
            worth, latest, blind = self._scan(messages, version, held, after)
            stale = stale or blind
            if not worth:
                skipped = True
                continue
            if stale or latest is None:
                g = self.get(game_id)
                stale = False
            else:
                g = (self.store.games.at(game_id, latest.version)
                     or game_from_message(game_id, meta, latest))
            skipped = False
            if ready(g):
                return g, False
            version, meta, held = g.version, g.meta, self._held(g, bot_id, seat)

    @staticmethod
    def _scan(messages: list[Any], version: int, held: list[int], after: int | None
              ) -> tuple[bool, GameMessage | None, bool]:
        """(worth a look, the newest message newer than ``version``, whether one of
        those came without a state)."""
        worth = blind = False
        latest: GameMessage | None = None
        for m in messages:
            parsed = game_message(m)
            if parsed is None:
                worth = blind = True
                continue
            if parsed.version <= version:
                continue  # already seen
            if parsed.state_json is None:
                blind = True
            elif latest is None or parsed.version > latest.version:
                latest = parsed
            turn = parsed.seat
            if turn is None or turn in held or (after is not None and parsed.version > after):
                worth = True
        if latest is not None and blind:
            latest = None
        return worth, latest, blind

    def _after_action(
        self, waiter: Any, wait_until: float, game: Game, state: State, seat: int,
        version: int, status: str, deadline: float | None, updated: float | None,
        bot_id: str,
    ) -> dict[str, Any]:
        """The answer of an action sent with ``wait``: at once if the game is over or it is
        still this bot's turn, else when its turn comes again (read once, when the
        listener says it is), the game ends, or the time is up — then the view as it is
        (the view right after the action, if nothing happened since).

        "Its turn" is the turn of any seat the bot holds in the game, whichever seat the
        action was for (a body's ``seat`` says who acts, not whom to wait for): a bot
        holding both seats of a team is woken for its partner seat too, and the answer is
        that seat's view (``seat`` says which), as a view without ``?seat`` is."""
        held = self._held(game, bot_id, None)
        if status != ACTIVE or state.turn in held:
            answer_seat = state.turn if status == ACTIVE else seat
            return self.render(game, state, answer_seat, version, status, deadline, updated)
        newer, _ = self._await_turn(waiter, wait_until, game, version, bot_id)
        if newer is None:
            return self.render(game, state, seat, version, status, deadline, updated)
        return self.view(newer, bot_id, self._answer_seat(newer, bot_id, seat))

    def _await_turn(self, waiter: Any, wait_until: float, game: Game, version: int,
                    bot_id: str) -> tuple[Game | None, bool]:
        """Wait (``_await``) from ``version`` of ``game`` until it is the turn of any seat
        ``bot_id`` holds there, or the game is over, or ``wait_until``."""
        ready = self._ready_check(bot_id, None, True, None)
        return self._await(waiter, wait_until, game.id, version, game.meta,
                           self._held(game, bot_id, None), None, ready, bot_id, None)

    def _answer_seat(self, game: Game, bot_id: str, seat: int) -> int:
        """The seat whose view answers a waiting action on ``game`` as it is now: the
        bot's seat in turn, else the seat it acted for."""
        if game.status == ACTIVE and game.seats[game.state.turn] == bot_id:
            return game.state.turn
        return seat

    @staticmethod
    def _held(game: Game, bot_id: str | None, seat: int | None) -> list[int]:
        if seat is not None:
            return [seat]
        return [i for i, b in enumerate(game.seats) if b == bot_id]

    def wait_bot_turns(self, bot_id: str, timeout: float,
                       playing: frozenset[str] = frozenset(),
                       also: Callable[[], bool] | None = None) -> dict[str, Any]:
        """Games where it is ``bot_id``'s turn, except those in ``playing`` (games the
        caller is already playing, each waiting on its own request); waits (pub/sub) until
        there is one. Without ``playing`` a runner that holds one game's turn while it
        decides would be answered at once, over and over, and could only slow down — and
        then miss a new game's first turn (issue 16). ``also``: something else that ends
        the wait when true (a new invitation), checked whenever the bot's channel wakes."""

        def turns(waiter: Any = None) -> list[str]:
            live: list[str] = []
            games = [g for g in self.store.bot_turns(bot_id, live) if g not in playing]
            if waiter is not None and live:  # sharded channels: hear the bot's games
                waiter.follow([self.store.game_channel(g) for g in live])
            return games

        if timeout <= 0:
            games = turns()
            return {"timed_out": not games, "games": games}
        deadline = time.monotonic() + timeout
        metrics.LIVE.polls += 1
        try:
            with self.wakeups.waiter(self.store.bot_turn_channel(bot_id)) as waiter:
                games = turns(waiter)
                while not games and not (also is not None and also()):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return {"timed_out": True, "games": []}
                    if waiter.wait(left):
                        games = turns(waiter)
                    if self.wakeups.closing and not games:  # shutting down: answer now
                        return {"timed_out": True, "games": []}
                return {"timed_out": False, "games": games}
        finally:
            metrics.LIVE.polls -= 1

    # --- events and records ----------------------------------------------------------------

    @staticmethod
    def _steps(game: Game, actions: list[int], start: State | None, first_ply: int
               ) -> Iterator[tuple[int, list[dict[str, Any]], State]]:
        """(ply, events, state after) for each step: ply 0 is the new game."""
        if start is None:
            state, events = new_game(game.players, game.meta["seed"], game.variants)
            yield 0, events, state
        else:
            state = start
        for k, a in enumerate(actions, first_ply):
            state, events = apply(state, a)
            yield k, events, state

    def stream(
        self, game_id: str, bot_id: str | None, seat: int | None, last_id: str | None,
        sock: Any = None,
    ) -> StreamBody:
        """Server-sent events for one viewer, from just after ``last_id`` to game_over.

        Event ids are ``ply.index`` (the index of the event among those the ply caused),
        so a reconnecting client resumes exactly where it broke off. Events are recomputed
        by replay, once per process for all its viewers of the game
        (``service.arena.games.fanout``);
        after the backlog the stream waits on that shared feed and sends ``: keep-alive``
        every few seconds while nothing happens (no Redis command while idle). With
        ``sock`` (the client's socket, ``fanout.direct_socket``), what follows the first
        chunk is written to it by the feed itself (see ``_stream_direct``).
        """
        game = self.get(game_id)
        viewer = self.viewer_seat(game, bot_id, seat)
        embargoed = self.embargoed(game)
        if embargoed and viewer is None:
            raise Problem("embargoed", EMBARGOED)
        after = parse_event_id(last_id) or (-1, -1)
        reveal = game.status == FINISHED and not embargoed
        audience: Any = ALL if reveal else viewer
        feed = self._join_feed(game)
        try:
            feed.open()  # Redis unreachable: 503 now, not a broken stream later
        except BaseException:
            self._leave_feed(feed)
            raise
        events = (self._stream(feed, audience, after) if sock is None
                  else self._stream_direct(feed, audience, after, sock))
        return StreamBody(events, lambda: self._leave_feed(feed))

    def _stream_direct(self, feed: Feed, audience: Any, after: tuple[int, int], sock: Any
                       ) -> Iterator[bytes]:
        """One viewer's stream whose new events the feed's pump writes to the socket
        itself (``Feed._write_direct``): a move costs a watching process one ``send`` per
        stream, not a greenlet switch and a trip through the server's write path each.
        The first chunk (the response's headers and ``retry:``) and the end (the last
        chunk, written by the server when this generator returns) go through the server
        as usual; in between this greenlet writes the backlog and what the pump left to
        it (a socket that took part of a frame, events that came while it was writing),
        keep-alives, and the shutdown's ``retry:``, each as one chunk. A write that takes
        longer than ``WRITE_TIMEOUT_S`` drops the stream (a slow consumer: it resumes with
        Last-Event-ID); what waits for it is the feed's events, not a buffer of its own.
        """
        metrics.LIVE.streams += 1
        direct = Direct(sock, audience, feed.position_after(after))
        if self.send_buffer > 0:
            # not a TCP socket (a test's socketpair): the kernel's default
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer)
        # each move one small write, sent at once rather than held for the previous
        # one's acknowledgement (Nagle); accepted sockets usually inherit it from the
        # listener, which a deployment's own server may not set
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            # the headers and a few bytes through the server; the backlog, like the rest,
            # under the write timeout (a client that reads nothing is dropped)
            yield b"retry: 1000\n\n"
            feed.direct.add(direct)
            keepalive = self.keepalive_s
            while True:
                if direct.dead:
                    return
                pending, direct.pending = direct.pending, None
                if pending:
                    self._send(direct, pending)
                end = len(feed.events)
                if direct.position < end:
                    start, direct.position = direct.position, end
                    self._send(direct, feed.frame(audience, start, end))
                    continue
                if feed.over:
                    return
                if self.wakeups.closing or feed.broken:
                    self._send(direct, frame((": the server is restarting\nretry: "
                                              f"{SHUTDOWN_RETRY_MS}\n\n").encode()))
                    return
                if direct.event.wait(keepalive):
                    direct.event.clear()
                else:
                    self._send(direct, KEEPALIVE_FRAME)
        finally:
            feed.direct.discard(direct)
            metrics.LIVE.streams -= 1

    def _send(self, direct: Direct, data: bytes) -> None:
        """Write ``data`` (framed) from the stream's greenlet; the pump keeps off
        meanwhile. A slow consumer that takes longer than ``write_timeout_s`` is cut."""
        direct.busy = True
        try:
            with gevent.Timeout(self.write_timeout_s, TimeoutError):
                direct.sock.sendall(data)
        except TimeoutError:
            # a slow consumer: close its connection (what the kernel holds for it is
            # freed) and end the response as a client that left would (EPIPE: gunicorn
            # ignores it, where any other error would be logged with its traceback)
            direct.dead = True
            log.info("dropped an event stream that took no write for %.1f s "
                     "(a slow consumer; it may resume with Last-Event-ID)",
                     self.write_timeout_s)
            with contextlib.suppress(OSError):
                direct.sock.shutdown(socket.SHUT_RDWR)
            raise BrokenPipeError(errno.EPIPE, "slow consumer dropped") from None
        except OSError:
            direct.dead = True
            raise
        finally:
            direct.busy = False

    def _stream(self, feed: Feed, audience: Any, after: tuple[int, int]) -> Iterator[bytes]:
        """One viewer's stream over the process's shared ``feed`` of the game: what is new
        since its position, as its audience sees it, then a wait on the feed (no Redis)."""
        metrics.LIVE.streams += 1
        try:
            yield b"retry: 1000\n\n"
            position = feed.position_after(after)
            keepalive = self.keepalive_s
            while True:
                end = len(feed.events)
                if end > position:
                    yield feed.chunk(audience, position, end)
                    position = end
                if feed.over and position >= len(feed.events):
                    return
                if self.wakeups.closing or feed.broken:
                    # shutting down (or Redis lost): end the stream, saying when to
                    # reconnect (with Last-Event-ID, to this or another process)
                    yield (": the server is restarting\nretry: "
                           f"{SHUTDOWN_RETRY_MS}\n\n").encode()
                    return
                if not feed.wait(position, keepalive):
                    yield b": keep-alive\n\n"
        finally:
            metrics.LIVE.streams -= 1

    def _join_feed(self, game: Game) -> Feed:
        with self._feeds_lock:
            feed = self._feeds.get(game.id)
            if feed is None or feed.ended:
                feed = self._feeds[game.id] = Feed(self, game)
            feed.streams += 1
            return feed

    def _leave_feed(self, feed: Feed) -> None:
        with self._feeds_lock:
            feed.streams -= 1

    def _drop_feed(self, feed: Feed, force: bool = False) -> bool:
        """Forget ``feed`` (its pump is ending) unless a stream has joined it meanwhile
        (``force``: the pump ends anyway; streams still on it are told by ``ended``)."""
        with self._feeds_lock:
            if feed.streams > 0 and not force:
                return False
            feed.ended = True
            if self._feeds.get(feed.game_id) is feed:
                del self._feeds[feed.game_id]
            return True


class StreamBody:
    """A stream's response body: its events, and ``close`` (called by the server when the
    response ends or the client goes away) that releases its place on the feed even if
    the body was never iterated."""

    def __init__(self, events: Iterator[bytes], on_close: Callable[[], None]) -> None:
        self._events = events
        self._on_close: Callable[[], None] | None = on_close

    def __iter__(self) -> Iterator[bytes]:
        return self._events

    def close(self) -> None:
        self._events.close()  # type: ignore[attr-defined]
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()


