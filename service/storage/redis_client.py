"""The service's Redis client: redis-py with one cheaper check per command under gevent.

Before it lends a pooled connection out, redis-py asks the connection's parser whether
the socket is readable (``can_read(timeout=0)``: leftover data means a broken
connection). It asks with ``select.poll``, which gunicorn's gevent worker has
monkey-patched: the patched poll registers watchers and goes through the gevent hub, a
share of every request's instructions worth saving (``bench/http_cost.py`` measures it;
the figures are in docs/benchmarks.md). A zero-timeout check never waits, so it needs
nothing from gevent:
``FastCheckParser`` makes it with the operating system's own ``poll``, and leaves every
check that may wait (the pub/sub listener's) to the parser it extends.

**Cluster mode.** ``connect`` asks the server (``INFO cluster``): a node of a Redis/Valkey
Cluster (``cluster_enabled:1``) gets redis-py's ``RedisCluster`` (it learns the slots
from that one node and follows MOVED and failovers), anything else the plain client.
``ARENA_REDIS_MODE`` (``auto``, the default, ``single`` or ``cluster``) forces either.
A server that does not answer at start is taken as a single Redis (the service starts
and answers 503 until it does): set ``ARENA_REDIS_MODE=cluster`` where that matters.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import socket
from typing import Any

import redis
from redis.cluster import RedisCluster

log = logging.getLogger(__name__)
SERVER_CLOSED = "Connection closed by server."  # redis-py's words for it
MODES = ("auto", "single", "cluster")

try:
    from gevent.monkey import get_original
    from gevent.socket import wait_read as _wait_read

    _os_poll: Any = get_original("select", "poll")  # the unpatched one, patched or not
except ImportError:  # pragma: no cover - gevent is a dependency
    _os_poll = select.poll

try:
    import hiredis
    from redis._parsers.hiredis import _HiredisParser
except ImportError:  # pragma: no cover - hiredis is a dependency (redis[hiredis])
    _HiredisParser = None


def _green() -> bool:
    """Whether gevent has patched ``select`` in this process (gunicorn's gevent worker):
    then a wait must go through its hub, and its own ``wait_read`` is the cheapest."""
    if _GREEN[0] is None:
        try:
            from gevent.monkey import is_module_patched
        except ImportError:  # pragma: no cover - gevent is a dependency
            _GREEN[0] = False
        else:
            _GREEN[0] = bool(is_module_patched("select"))
    return bool(_GREEN[0])


_GREEN: list[bool | None] = [None]  # decided on first use, after the worker has patched


def _raise_if_closed(sock: Any) -> None:
    """A readable socket that holds the server's close (EOF) or an error rather than data
    raises the connection error redis-py raises for it; told apart by a peek, as
    redis-py's own check does after its polls."""
    try:
        closed = sock.recv(1, socket.MSG_PEEK) == b""
    except BlockingIOError:
        return  # nothing after all: the connection is kept, as redis-py keeps it
    except OSError:
        closed = True  # an errored socket: nothing left to read
    if closed:
        raise redis.ConnectionError(SERVER_CLOSED)


if _HiredisParser is not None:

    class FastCheckParser(_HiredisParser):  # type: ignore[misc,valid-type]
        """hiredis's parser, with the zero-timeout readiness check done by ``poll(2)``."""

        def can_read(self, timeout: float = 0) -> bool:
            reader, sock = self._reader, self._sock
            if reader is None or sock is None or reader.has_data():
                return super().can_read(timeout)
            if timeout == 0:
                poller = _os_poll()
                poller.register(sock.fileno(), select.POLLIN)
                if not poller.poll(0):
                    return False  # the common case: nothing pending, the connection is fine
            elif timeout is not None and _green() and not hasattr(sock, "pending"):
                # the pub/sub listener's wait for its next message: gevent's own wait on
                # the one descriptor, then the check that it is data, not the server's
                # close, by the same peek redis-py makes after its patched polls
                try:
                    _wait_read(sock.fileno(), timeout)
                except TimeoutError:  # nothing came
                    return False
                _raise_if_closed(sock)
                return True
            # data, EOF or an error is waiting (or this check may wait): the full check
            return super().can_read(timeout)

        def handle_pubsub_push_response(self, response: Any) -> Any:
            """The message as it came. redis-py's looks its logger up (a lock) to log each
            pub/sub message at debug level, and the listener hears one per action."""
            return response

    PARSER: dict[str, Any] = {"parser_class": FastCheckParser}

    class FastCheckConnection(redis.Connection):
        """A connection with ``FastCheckParser``: the cluster client builds its nodes'
        connections from a class, not from a ``parser_class`` argument."""

        def __init__(self, **kwargs: Any) -> None:
            kwargs.setdefault("parser_class", FastCheckParser)
            super().__init__(**kwargs)

    CLUSTER_PARSER: dict[str, Any] = {"connection_class": FastCheckConnection}
else:  # pragma: no cover
    PARSER = {}
    CLUSTER_PARSER = {}


# How long a request waits for Redis before it answers 503 service-unavailable (with
# Retry-After). Commands take well under a millisecond, so this only ever fires on a
# Redis that is gone or frozen; it was 10 s, and a SIGSTOPped Redis held every request
# that long (the app's ARENA_REDIS_TIMEOUT).
COMMAND_TIMEOUT_S = 1.5
# The pub/sub listener (``service.storage.wakeups``) waits for messages by design: quiet
# stretches must not count as failures. It never waits on its socket's timeout: it polls
# (``get_message(timeout=...)``, a readiness check with its own timeout) and reads only
# once data is there, and each waiter waits on its own deadline. So its socket timeout
# bounds only its connection handshake and a half-read message (a frozen Redis held a
# first long-poll 10 s in the handshake): the command timeout, on a connection of its own.


# Connections a process needs beyond one per open client connection: the pub/sub
# listener, the deadline sweeper, the event feeds' reads (``service.arena.games.fanout``), spare.
POOL_HEADROOM = 32


def pool_size(worker_connections: int) -> int:
    """The most pooled Redis connections one process may open: one per client connection
    it may hold (``ARENA_WORKER_CONNECTIONS``: each request has at most one command in
    flight) plus ``POOL_HEADROOM``. redis-py's default of 100 refused the 101st concurrent
    command ("Too many connections": a 503, a cut stream) long before the worker was
    full. Connections are opened only when that many commands are in flight at once."""
    return max(1, worker_connections) + POOL_HEADROOM


def mode_of(url: str, mode: str | None = None, timeout: float = COMMAND_TIMEOUT_S) -> str:
    """``single`` or ``cluster`` for ``url``: ``mode`` (default ``ARENA_REDIS_MODE``) unless
    it is ``auto``, else what the server says of itself."""
    mode = (mode or os.environ.get("ARENA_REDIS_MODE") or "auto").lower()
    if mode not in MODES:
        raise ValueError(f"ARENA_REDIS_MODE must be one of {', '.join(MODES)}, not {mode!r}")
    if mode != "auto":
        return mode
    probe = redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)
    try:
        enabled = probe.info("cluster").get("cluster_enabled")
    except redis.RedisError as exc:
        log.warning("cannot ask %s whether it is a cluster (%s): using it as one Redis",
                    url.rpartition("@")[2], exc)
        return "single"
    finally:
        probe.close()
    return "cluster" if str(enabled) == "1" else "single"


def connect(url: str, timeout: float = COMMAND_TIMEOUT_S,
            max_connections: int | None = None, mode: str | None = None) -> Any:
    """A client for ``url`` whose commands (and connects) give up after ``timeout`` s; at
    most ``max_connections`` pooled connections (None: redis-py's default; per node in a
    cluster). ``mode``: see ``mode_of``."""
    sizing: dict[str, Any] = {} if max_connections is None else {
        "max_connections": max_connections}
    if mode_of(url, mode, timeout) == "cluster":
        return RedisCluster.from_url(
            url,
            socket_connect_timeout=timeout,
            socket_timeout=timeout,
            **sizing,
            **CLUSTER_PARSER,
        )
    return redis.Redis.from_url(
        url,
        socket_connect_timeout=timeout,
        socket_timeout=timeout,
        health_check_interval=30,
        **sizing,
        **PARSER,
    )


def listener(url: str, timeout: float = COMMAND_TIMEOUT_S, mode: str | None = None) -> Any:
    """A client for the pub/sub listener: a pool of its own, so the subscription neither
    takes a slot of the commands' pool nor goes when that pool drops its connections.
    For a cluster, its ``pubsub()`` is a live node's (``NodePubSub``)."""
    client = connect(url, timeout, mode=mode)
    return NodePubSub(client, timeout) if isinstance(client, RedisCluster) else client


class NodePubSub:
    """``pubsub()`` on one live node of a cluster, a different one after a failure.

    A PUBLISH in a cluster reaches the subscribers of every node, so the listener's
    pattern subscriptions may live on any node; when that node fails, the listener's next
    start asks the cluster client (which has followed the failover) for its nodes again
    and takes the next one that answers."""

    def __init__(self, cluster: RedisCluster, timeout: float) -> None:
        self.cluster = cluster
        self.timeout = timeout
        self._turn = 0

    def pubsub(self) -> Any:
        last: Exception | None = None
        nodes = self.cluster.get_nodes()
        for i in range(len(nodes)):
            node = nodes[(self._turn + i) % len(nodes)]
            client = redis.Redis.from_url(f"redis://{node.host}:{node.port}",
                                          socket_connect_timeout=self.timeout,
                                          socket_timeout=self.timeout, **PARSER)
            try:
                client.ping()
            except redis.RedisError as exc:
                last = exc
                continue
            self._turn = (self._turn + i + 1) % max(1, len(nodes))
            return client.pubsub()
        with contextlib.suppress(redis.RedisError):  # the cluster client finds the
            self.cluster.ping()                       # promoted replicas on its next command
        raise last or redis.ConnectionError("no cluster node answers")


def run_script(script: Any, keys: list[str], args: list[Any], client: Any = None) -> Any:
    """``script(keys=keys, args=args, client=client)``, for a plain client the same
    EVALSHA on one of its pooled connections with fewer of redis-py's layers: redis-py
    takes each command through a dozen calls (its argument checks, observability hooks,
    response callbacks, a per-argument encoder) that cost more instructions than the
    command's own packing and round trip, and the service runs a script on every
    request that changes or reads a game. Kept: the pool, its health check, the
    connection's retry policy (a connection error disconnects and retries as redis-py
    does), the reconnect it asks for, and its errors (a NOSCRIPT reply loads the script
    through ``script`` itself, which runs it again). Anything else (a cluster client, a
    pinned connection, RESP3, a response callback, an argument hiredis does not pack the
    way redis-py does) goes through ``script``."""
    target = script.registered_client if client is None else client
    if not _lean(target):
        return script(keys=keys, args=args, client=client)
    try:
        packed = [hiredis.pack_command(("EVALSHA", script.sha, len(keys), *keys, *args))]
    except TypeError:  # a bool, say: redis-py's own error for it
        return script(keys=keys, args=args, client=client)
    pool = target.connection_pool
    conn = pool.get_connection()

    def attempt() -> Any:
        conn.send_packed_command(packed)
        return conn.read_response()

    try:
        return conn.retry.call_with_retry(attempt, lambda _error: conn.disconnect())
    except redis.exceptions.NoScriptError:
        pass
    finally:
        try:
            if conn.should_reconnect():
                conn.disconnect()
                conn.connect()
        finally:
            pool.release(conn)
    return script(keys=keys, args=args, client=client)  # loads it, runs it


def _lean(client: Any) -> bool:
    """Whether ``run_script`` may send a script to ``client`` itself (see there)."""
    if type(client) is not redis.Redis or _HiredisParser is None:
        return False
    known = _LEAN.get(id(client))
    if known is None or known[0] is not client:
        kwargs = client.connection_pool.connection_kwargs
        ok = (client.connection is None and not client._single_connection_client
              and client.get_cache() is None
              and str(kwargs.get("protocol") or 2) == "2"
              and str(kwargs.get("encoding", "utf-8")).lower() in ("utf-8", "utf8")
              and kwargs.get("encoding_errors", "strict") == "strict"
              and client.response_callbacks.get("EVALSHA") is None)
        known = _LEAN[id(client)] = (client, ok)
    return known[1]


_LEAN: dict[int, tuple[Any, bool]] = {}  # id(client) -> (client, whether lean)


def next_message(pubsub: Any, timeout: float) -> dict[str, Any] | None:
    """``pubsub.get_message(timeout=timeout)`` with fewer of redis-py's layers: the
    listener reads one message per action, and redis-py takes each through its retry
    and reconnect machinery first. The same steps otherwise: the health check's PING
    when due, a wait of at most ``timeout`` for data, a read that keeps a half-arrived
    message for the next call, the same parsed message. A connection error is raised
    rather than retried: redis-py's retry would reconnect and subscribe again silently,
    after messages may have been lost, where the listener's own handling wakes every
    waiter to re-read (``wakeups.Wakeups._run``). Anything unusual (not subscribed, a push
    handler, a connection asking to reconnect) goes through ``get_message``."""
    conn = pubsub.connection
    if (conn is None or not pubsub.subscribed or pubsub.push_handler_func is not None
            or conn.should_reconnect()):
        return pubsub.get_message(timeout=timeout)  # type: ignore[no-any-return]
    pubsub.check_health()
    if not conn.can_read(timeout=timeout):
        return None
    try:
        response = conn.read_response(disconnect_on_error=False, push_request=True,
                                      timeout=timeout)
    except redis.TimeoutError:  # a part of a message: the parser keeps it for next time
        return None
    return pubsub.handle_message(response)  # type: ignore[no-any-return]


def is_cluster(client: Any) -> bool:
    """Whether ``client`` is redis-py's cluster client."""
    return isinstance(client, RedisCluster)
