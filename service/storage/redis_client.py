"""The service's Redis client: redis-py with one cheaper check per command under gevent.

Before it lends a pooled connection out, redis-py asks the connection's parser whether
the socket is readable (``can_read(timeout=0)``: leftover data means a broken
connection). It asks with ``select.poll``, which gunicorn's gevent worker has
monkey-patched: the patched poll registers watchers and goes through the gevent hub,
about a tenth of the instructions of a whole ``GET /readyz`` (measured with
``bench/http_cost.py``: 1.28 M -> 1.15 M instructions per floor request, 3.37 M ->
3.08 M per action). A zero-timeout check never waits, so it needs nothing from gevent:
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
from typing import Any

import redis
from redis.cluster import RedisCluster

log = logging.getLogger(__name__)
MODES = ("auto", "single", "cluster")

try:
    from gevent.monkey import get_original

    _os_poll: Any = get_original("select", "poll")  # the unpatched one, patched or not
except ImportError:  # pragma: no cover - gevent is a dependency
    _os_poll = select.poll

try:
    from redis._parsers.hiredis import _HiredisParser
except ImportError:  # pragma: no cover - hiredis is a dependency (redis[hiredis])
    _HiredisParser = None


if _HiredisParser is not None:

    class FastCheckParser(_HiredisParser):  # type: ignore[misc,valid-type]
        """hiredis's parser, with the zero-timeout readiness check done by ``poll(2)``."""

        def can_read(self, timeout: float = 0) -> bool:
            reader, sock = self._reader, self._sock
            if timeout == 0 and reader is not None and sock is not None and not reader.has_data():
                poller = _os_poll()
                poller.register(sock.fileno(), select.POLLIN)
                if not poller.poll(0):
                    return False  # the common case: nothing pending, the connection is fine
            # data, EOF or an error is waiting (or this check may wait): the full check
            return super().can_read(timeout)

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
# listener, the deadline sweeper, the event feeds' reads (``service.arena.fanout``), spare.
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


def is_cluster(client: Any) -> bool:
    """Whether ``client`` is redis-py's cluster client."""
    return isinstance(client, RedisCluster)
