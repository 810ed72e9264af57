"""One pub/sub listener per process, shared by every waiting request.

A long-poll (``GET /games/{id}/turn``, ``GET /bots/me/turns``, ``POST .../actions?wait=``)
or an event stream needs to hear when its game changes. Opening a Redis subscription per
request costs a new TCP connection each time (redis-py's ``PubSub.close()`` disconnects),
so instead each process keeps **one** subscription connection with pattern subscriptions
for every game channel and every bot-turn channel of its key prefix, read by one listener
thread (a greenlet under gunicorn's gevent worker, a real thread under the Flask test
client or werkzeug). A request registers a ``Waiter`` for its channel (an in-process dict
entry, no Redis call), re-reads what it waits for, and blocks on the waiter's
``threading.Event``; the listener appends each message for that channel and sets the
event. ``threading.Event`` is cooperative once gevent has monkey-patched ``threading``,
and an ordinary event without it, so the same code serves both.

Nothing is lost between a request's read and its wait: the subscription is live before
any waiter is registered, and a waiter is registered before the read, so a change
committed after the read is published after it too and reaches the waiter.

If the connection breaks (Redis restarted), the listener wakes every waiter with a
*reset* (``None``) — messages may have been missed — and stops; the next ``wait`` starts
it again (or raises the Redis error, which the service answers with 503), and a waiter
that sees the listener's generation change treats it as a reset as well, so it re-reads
after the new subscription is live. With no waiters for ``idle_s`` seconds the listener
closes its connection and ends; the next waiter starts it again.

Game channels carry ``"{version}:{seat in turn}:{bot}"`` (the seat empty when nobody is
to act, or when the writer did not say; the bot when the game has just become its turn),
so a waiter whose seat is not in turn can skip the re-read and a bot waiting for a turn in
any game is woken, and after an action also the new status, deadline, commit time and
state, so a waiter whose turn it is can answer from the message (see ``game_message``).
A process that commits a change hands that message to its own waiters itself
(``Wakeups.deliver``) rather than wait for Redis to echo it back to the listener.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from typing import Any, NamedTuple

import redis

from service.metrics import REDIS_ERRORS
from service.storage.redis_client import next_message

log = logging.getLogger(__name__)


def glob_escape(text: str) -> str:
    """``text`` matched literally inside a Redis glob pattern."""
    return "".join("\\" + ch if ch in "*?[]\\" else ch for ch in text)

IDLE_S = 20.0  # the listener ends after this long with no waiters
POLL_S = 1.0  # how often an idle listener looks at its waiters
# What ``on_message`` returns for a message this process's waiters had already (it was
# handed to them when this process committed it, see ``Wakeups.deliver``).
SKIP = object()


class GameMessage(NamedTuple):
    """One message of a game channel. ``state_json`` is None when the change carried no
    state (a join, a timeout: the meta changed, or an older writer): the waiter re-reads.
    ``turn_bot``: the bot whose turn the game has just become (it joined the bot's turn
    set), else None."""

    version: int
    seat: int | None
    status: str | None = None
    deadline: float | None = None
    state_json: str | None = None
    updated: float | None = None  # when the version was committed (unix seconds)
    turn_bot: str | None = None


def game_message(data: bytes | str | None) -> GameMessage | None:
    """``b"12:3"`` → (12, 3); ``b"12:"`` or ``b"12"`` → (12, None); ``b"12:3:ab12"`` →
    (12, 3) whose turn is now bot ``ab12``'s;
    ``b"12:3::active:1700000000.000:1699999990.123456:{...}"`` → with status, deadline,
    commit time and the state JSON (left as it came, bytes or str: only the header is
    decoded). None for a reset or anything unreadable, a writer's older format included
    (the waiter then re-reads, which is always safe)."""
    if data is None:
        return None
    if isinstance(data, GameMessage):
        return data
    if not isinstance(data, bytes):
        data = str(data)
    parts = data.split(b":" if isinstance(data, bytes) else ":", 6)  # type: ignore[arg-type]
    try:
        version = int(parts[0])
        seat = int(parts[1]) if len(parts) > 1 and parts[1] else None
        bot = parts[2] if len(parts) > 2 and parts[2] else None
        if isinstance(bot, bytes):
            bot = bot.decode()
        if len(parts) <= 3:
            return GameMessage(version, seat, turn_bot=bot)  # type: ignore[arg-type]
        if len(parts) < 7 or not parts[6]:
            return None
        status = parts[3].decode() if isinstance(parts[3], bytes) else parts[3]
        deadline = float(parts[4]) if parts[4] else None
        updated = float(parts[5])
    except (ValueError, UnicodeDecodeError):
        return None
    return GameMessage(version, seat, status, deadline, parts[6], updated,  # type: ignore[arg-type]
                       bot)  # type: ignore[arg-type]


class Waiter:
    """One waiting request's mailbox on one channel. Use as a context manager."""

    def __init__(self, hub: Wakeups, channel: str) -> None:
        self.hub = hub
        self.channel = channel
        self.event = threading.Event()
        self.messages: list[bytes | None] = []
        self.generation = -1
        # when the first message not taken yet arrived (unix seconds): what a waiter's
        # own wake-up added to it is measurable (the event streams' fan-out metric)
        self.heard_at = 0.0

    def __enter__(self) -> Waiter:
        self.generation = self.hub._register(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self.hub._unregister(self)

    def wait(self, timeout: float) -> list[bytes | None]:
        """The messages that arrived (``None`` in the list: re-check, something may have
        been missed); an empty list when ``timeout`` passed with none."""
        if self.hub.closing:  # shutting down: nobody waits any more (see ``shut_down``)
            return [None]
        generation = self.hub._ensure()
        if generation != self.generation:  # the listener restarted after this waiter's read
            self.generation = generation
            self.hub.resubscribe(self)
            return [None]
        if not self.messages:
            self.event.wait(max(0.0, timeout))
        self.event.clear()
        taken, self.messages = self.messages, []
        return taken

    def _deliver(self, data: bytes | None) -> None:
        if not self.messages:
            self.heard_at = time.time()
        self.messages.append(data)
        self.event.set()

    def follow(self, channels: list[str]) -> None:
        """Also hear ``channels`` while waiting (sharded pub/sub: ``ShardedWakeups``); a
        no-op where one listener hears every game."""
        self.hub.follow(self, channels)


class Wakeups:
    """The per-process listener over ``patterns`` (glob patterns of channel names)."""

    def __init__(self, client: redis.Redis, patterns: list[str], idle_s: float = IDLE_S) -> None:
        self.client = client
        self.patterns = patterns
        self.idle_s = idle_s
        # How long a new subscription may take to be confirmed before the waiter's
        # request fails (503): a frozen Redis must not hold it longer than a command.
        self.confirm_s = 5.0
        # Called by the listener with (channel, data, generation) for every message,
        # before the waiters hear it (``Arena`` keeps its game cache current with it).
        # What it returns, unless None, is delivered to the waiters instead of the raw
        # data (a message parsed once per process, not once per waiter).
        self.on_message: Any = None
        # Set by ``shut_down``: every wait answers at once, so open long-polls and streams
        # end with the state as it is and the worker can exit without cutting them off.
        self.closing = False
        self._reset_process()

    def _reset_process(self) -> None:
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._waiters: dict[str, set[Waiter]] = {}
        self._count = 0
        self._pubsub: Any = None
        self._running = False
        self._generation = 0
        self._last_used = time.monotonic()

    def waiter(self, channel: str) -> Waiter:
        return Waiter(self, channel)

    def has_waiters(self, channel: str) -> bool:
        return bool(self._waiters.get(channel))

    def deliver(self, channel: str, data: Any) -> None:
        """Hand ``data`` to this process's waiters on ``channel``. The listener calls it
        for each message; a request that has just committed a change calls it too, so
        waiters in its own process hear at once rather than after Redis echoes the
        message back (``on_message`` then answers ``SKIP`` for the echo)."""
        group = self._waiters.get(channel)
        if group:
            for w in list(group):
                w._deliver(data)

    def follow(self, w: Waiter, channels: list[str]) -> None:
        """Every game channel is heard already (one pattern subscription)."""

    def resubscribe(self, w: Waiter) -> None:
        """The new listener's patterns cover every channel already."""

    def live_generation(self, channel: str | None = None) -> int | None:
        """The running listener's generation, None when none runs in this process
        (``channel``: the game's channel; every one is heard here)."""
        if self._running and self._pid == os.getpid():
            return self._generation
        return None

    def start(self) -> None:
        """Make sure the listener runs (raises the Redis error if Redis is unreachable)."""
        self._ensure()

    # --- waiters ---------------------------------------------------------------------------

    def _register(self, w: Waiter) -> int:
        generation = self._ensure()
        with self._lock:
            self._waiters.setdefault(w.channel, set()).add(w)
            self._count += 1
        return generation

    def _unregister(self, w: Waiter) -> None:
        with self._lock:
            group = self._waiters.get(w.channel)
            if group is not None and w in group:
                group.discard(w)
                self._count -= 1
                if not group:
                    del self._waiters[w.channel]
            self._last_used = time.monotonic()

    # --- the listener ------------------------------------------------------------------------

    def _ensure(self) -> int:
        """Start the listener if it is not running; its generation (bumped per start).
        Raises the Redis error if Redis cannot be reached."""
        if self._pid != os.getpid():  # forked after use: nothing of the parent's is ours
            self._reset_process()
        if self._running:
            return self._generation
        with self._lock:
            if self._running:
                return self._generation
            pubsub = self.client.pubsub()
            try:
                pubsub.psubscribe(*self.patterns)
                # read the confirmations, so the subscription is live when we return
                confirmed = 0
                deadline = time.monotonic() + self.confirm_s
                while confirmed < len(self.patterns):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise redis.ConnectionError("no pub/sub confirmation")
                    msg = pubsub.get_message(timeout=min(1.0, left))
                    if msg is not None and msg.get("type") == "psubscribe":
                        confirmed += 1
            except BaseException:
                pubsub.close()
                raise
            self._pubsub = pubsub
            self._generation += 1
            self._running = True
            self._last_used = time.monotonic()
            thread = threading.Thread(target=self._run, args=(pubsub, self._generation),
                                      name="allfours-wakeups", daemon=True)
            thread.start()
            return self._generation

    def _run(self, pubsub: Any, generation: int) -> None:
        try:
            while True:
                msg = next_message(pubsub, POLL_S)
                if msg is None:
                    if self._idle_stop(generation):
                        pubsub.close()
                        return
                    continue
                if msg.get("type") != "pmessage":
                    continue
                channel = msg["channel"]
                if isinstance(channel, bytes):
                    channel = channel.decode()
                self._dispatch(channel, msg["data"], generation)
        except Exception as exc:  # the connection broke: everyone re-checks
            log.warning("wake-up listener lost its connection: %s", exc)
            REDIS_ERRORS.labels("listener").inc()
            with self._lock:
                if self._generation == generation:
                    self._running = False
                    self._pubsub = None
                waiters = [w for group in self._waiters.values() for w in group]
            for w in waiters:
                w._deliver(None)
            with contextlib.suppress(Exception):
                pubsub.close()

    def _dispatch(self, channel: str, data: Any, generation: int) -> None:
        """Deliver a message heard on ``channel`` to its waiters: as ``on_message`` reads
        it when that hook is set (``SKIP``: not at all), else as it came."""
        if self.on_message is not None:
            try:
                parsed = self.on_message(channel, data, generation)
            except Exception:
                log.exception("wake-up hook failed")
            else:
                if parsed is SKIP:
                    return
                if parsed is not None:  # the hook's reading: waiters get that
                    data = parsed
        self.deliver(channel, data)

    def _idle_stop(self, generation: int) -> bool:
        """True when this listener should end: replaced by a newer one, or idle."""
        with self._lock:
            if self._generation != generation:
                return True
            if self._count or time.monotonic() - self._last_used < self.idle_s:
                return False
            self._running = False
            self._pubsub = None
        return True

    def shut_down(self) -> None:
        """The process is stopping (SIGTERM): wake every waiter, and let no wait block
        again. Waiters treat the wake as a reset, re-read, and the callers answer with
        the state as it is (``Arena``, which checks ``closing``)."""
        self.closing = True
        with self._lock:
            waiters = [w for group in self._waiters.values() for w in group]
        for w in waiters:
            w._deliver(None)

    def close(self) -> None:
        """Stop listening (tests); waiters still registered are woken with a reset."""
        with self._lock:
            pubsub, self._pubsub, self._running = self._pubsub, None, False
            self._generation += 1
            waiters = [w for group in self._waiters.values() for w in group]
        for w in waiters:
            w._deliver(None)
        if pubsub is not None:
            with contextlib.suppress(Exception):
                pubsub.close()


class _Shard:
    """One node's pub/sub connection for ``ShardedWakeups``, read by a thread of its own."""

    def __init__(self, hub: ShardedWakeups, name: str, host: str, port: int) -> None:
        self.hub = hub
        self.name = name
        client = redis.Redis.from_url(f"redis://{host}:{port}",
                                      socket_connect_timeout=hub.confirm_s,
                                      socket_timeout=hub.confirm_s)
        self.pubsub = client.pubsub()
        self.channels: set[str] = set()  # confirmed
        self.pending: dict[str, threading.Event] = {}
        self.broken = False
        self._send = threading.Lock()
        self._thread: threading.Thread | None = None

    def subscribe(self, channels: list[str]) -> list[threading.Event]:
        events = []
        with self._send:
            todo = [c for c in channels if c not in self.channels and c not in self.pending]
            for c in todo:
                self.pending[c] = threading.Event()
            events = [self.pending[c] for c in channels if c in self.pending]
            for c in todo:  # one a command: a command's channels must share a slot
                self.pubsub.ssubscribe(c)
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, daemon=True,
                                                    name=f"allfours-wakeups-{self.name}")
                    self._thread.start()
        return events

    def unsubscribe(self, channels: list[str]) -> None:
        with self._send:
            gone = [c for c in channels if c in self.channels]
            for c in gone:
                self.channels.discard(c)
            for c in gone:
                self.pubsub.sunsubscribe(c)

    def _run(self) -> None:
        try:
            while not self.broken:
                msg = self.pubsub.get_message(timeout=POLL_S)
                if msg is None:
                    continue
                kind = msg.get("type")
                channel = msg.get("channel")
                if isinstance(channel, bytes):
                    channel = channel.decode()
                if kind == "smessage":
                    self.hub._dispatch(channel, msg["data"], self.hub._generation)
                elif kind == "ssubscribe":
                    with self._send:
                        event = self.pending.pop(channel, None)
                        self.channels.add(channel)
                    if event is not None:
                        event.set()
                elif kind == "sunsubscribe" and channel in self.channels:
                    # not asked for: its slot moved to another node (resharding)
                    self.hub._lost(self, [channel])
        except Exception as exc:  # the node failed or went away: everyone re-checks
            log.warning("wake-up listener lost node %s: %s", self.name, exc)
            REDIS_ERRORS.labels("listener").inc()
        finally:
            self.broken = True
            with contextlib.suppress(Exception):
                self.pubsub.close()
            self.hub._lost(self, None)


class ShardedWakeups(Wakeups):
    """The listener for a Redis/Valkey Cluster: sharded pub/sub (SSUBSCRIBE, Redis >= 7).

    A game's changes are published by the node that owns the game's slot
    (``SPUBLISH`` in the commit script), to the subscribers of that node only, so a
    process subscribes to the channels it has waiters for (and keeps them ``idle_s``
    after the last waiter left, so a game played here keeps its cache warm), one
    connection per node that owns one of them. A waiter on a bot's turns also follows
    the channels of the bot's live games (``Waiter.follow``) and the bot's own channel,
    published when the bot joins a game. When a node fails, or a channel's slot moves
    (the node says ``sunsubscribe``), the generation is bumped: every waiter re-reads
    and subscribes again, on the node the cluster now names for the slot.

    The game cache is trusted only for games whose channel is subscribed here
    (``live_generation(channel)``): a game nobody here watches may have moved on
    unheard."""

    def __init__(self, client: Any, patterns: list[str], idle_s: float = IDLE_S) -> None:
        super().__init__(client, patterns, idle_s)

    def _reset_process(self) -> None:
        super()._reset_process()
        self._shards: dict[str, _Shard] = {}
        self._idle: dict[str, float] = {}  # channel -> when its last waiter left
        self._followed: dict[Waiter, list[str]] = {}
        self._running = True  # there is no one listener to start: shards start on demand

    @property
    def _cluster(self) -> Any:
        return getattr(self.client, "cluster", self.client)

    def live_generation(self, channel: str | None = None) -> int | None:
        if self._pid != os.getpid() or channel is None:
            return None
        return self._generation if self._heard_here(channel) else None

    def _ensure(self) -> int:
        if self._pid != os.getpid():
            self._reset_process()
        return self._generation

    def _register(self, w: Waiter) -> int:
        generation = self._ensure()
        with self._lock:
            self._waiters.setdefault(w.channel, set()).add(w)
            self._count += 1
            self._idle.pop(w.channel, None)
        if not self._heard_here(w.channel):  # the common case: subscribed already
            try:
                self._subscribe([w.channel])
            except BaseException:
                self._unregister(w)
                raise
        if self._idle:
            self._sweep_idle()
        return generation

    def _heard_here(self, channel: str) -> bool:
        for shard in tuple(self._shards.values()):  # (another thread may add one)
            if channel in shard.channels and not shard.broken:
                return True
        return False

    def _unregister(self, w: Waiter) -> None:
        super()._unregister(w)
        now = time.monotonic()
        with self._lock:
            channels = [w.channel, *self._followed.pop(w, [])]
            for c in channels:
                if not self._waiters.get(c) and not self._followers(c):
                    self._idle[c] = now

    def _followers(self, channel: str) -> bool:
        return any(channel in chans for chans in self._followed.values())

    def follow(self, w: Waiter, channels: list[str]) -> None:
        """Keep ``channels`` subscribed while ``w`` waits: their messages reach the hook
        (``on_message``), which wakes ``w`` when they concern it."""
        with self._lock:
            old = set(self._followed.get(w, []))
            self._followed[w] = list(channels)
            for c in channels:
                self._idle.pop(c, None)
            now = time.monotonic()
            for c in old - set(channels):
                if not self._waiters.get(c) and not self._followers(c):
                    self._idle[c] = now
        self._subscribe(list(channels))

    def _subscribe(self, channels: list[str]) -> None:
        """Subscribe ``channels`` on their slots' nodes; returns once confirmed. Raises
        the Redis error (a 503) when a node does not answer within ``confirm_s``."""
        by_node: dict[str, list[str]] = {}
        nodes: dict[str, Any] = {}
        for c in channels:
            node = self._cluster.get_node_from_key(c)
            by_node.setdefault(node.name, []).append(c)
            nodes[node.name] = node
        events: list[threading.Event] = []
        for name, chans in by_node.items():
            with self._lock:
                shard = self._shards.get(name)
                if shard is None or shard.broken:
                    node = nodes[name]
                    shard = self._shards[name] = _Shard(self, name, node.host, node.port)
            try:
                events += shard.subscribe(chans)
            except redis.RedisError:
                shard.broken = True
                raise
        deadline = time.monotonic() + self.confirm_s
        for e in events:
            if not e.wait(max(0.0, deadline - time.monotonic())):
                raise redis.ConnectionError("no pub/sub confirmation")

    def _sweep_idle(self) -> None:
        """Unsubscribe the channels nobody has waited on for ``idle_s``."""
        now = time.monotonic()
        with self._lock:
            old = [c for c, t in self._idle.items() if now - t >= self.idle_s]
            for c in old:
                del self._idle[c]
            shards = list(self._shards.values())
        if not old:
            return
        for shard in shards:
            mine = [c for c in old if c in shard.channels]
            if mine:
                with contextlib.suppress(redis.RedisError):
                    shard.unsubscribe(mine)

    def _lost(self, shard: _Shard, channels: list[str] | None) -> None:
        """A node broke (``channels`` None: all of its) or dropped ``channels``: bump the
        generation and wake every waiter with a reset; each re-subscribes when it waits
        again (``Waiter.wait`` -> ``resubscribe``)."""
        with self._lock:
            if channels is None:
                if self._shards.get(shard.name) is shard:
                    del self._shards[shard.name]
            else:
                for c in channels:
                    shard.channels.discard(c)
            self._generation += 1
            waiters = [w for group in self._waiters.values() for w in group]
        for w in waiters:
            w._deliver(None)

    def resubscribe(self, w: Waiter) -> None:
        """After a reset: ``w``'s channels again, on the nodes that own them now."""
        with contextlib.suppress(Exception):
            self._cluster.get_nodes()  # let the cluster client notice a failover
        self._subscribe([w.channel, *self._followed.get(w, [])])

    def close(self) -> None:
        with self._lock:
            shards, self._shards = list(self._shards.values()), {}
            self._generation += 1
            waiters = [w for group in self._waiters.values() for w in group]
        for w in waiters:
            w._deliver(None)
        for shard in shards:
            shard.broken = True
            with contextlib.suppress(Exception):
                shard.pubsub.close()
