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
"""

from __future__ import annotations

import select
from typing import Any

import redis

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
else:  # pragma: no cover
    PARSER = {}


# Connections a process needs beyond one per open client connection: the pub/sub
# listener, the deadline sweeper, the event feeds' reads (``service.fanout``), spare.
POOL_HEADROOM = 32


def pool_size(worker_connections: int) -> int:
    """The most pooled Redis connections one process may open: one per client connection
    it may hold (``ARENA_WORKER_CONNECTIONS``: each request has at most one command in
    flight) plus ``POOL_HEADROOM``. redis-py's default of 100 refused the 101st concurrent
    command ("Too many connections": a 503, a cut stream) long before the worker was
    full. Connections are opened only when that many commands are in flight at once."""
    return max(1, worker_connections) + POOL_HEADROOM


def connect(url: str, max_connections: int | None = None) -> redis.Redis:
    """A client for ``url`` with the service's timeouts; at most ``max_connections``
    pooled connections (None: redis-py's default)."""
    sizing: dict[str, Any] = {} if max_connections is None else {
        "max_connections": max_connections}
    return redis.Redis.from_url(
        url,
        socket_connect_timeout=2,
        socket_timeout=10,
        health_check_interval=30,
        **sizing,
        **PARSER,
    )
