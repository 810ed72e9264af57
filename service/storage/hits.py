"""A rate-limit hit a request carries to its first game read (``PendingHit``): the app sets
one for requests that read a game first, and the read or the commit counts it in its own
round trip (``service.storage.store``, ``service.storage.commits``).
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass
class PendingHit:
    """A rate-limit hit the request has not counted yet: the app sets one (``pending_hit``)
    for requests that read a game first, and the first game read counts it in the same
    round trip (``READ``), then calls ``check(count, ttl_ms)``, which may raise."""

    who: str
    window_s: int
    check: Callable[[int, int], None]
    limit: int = 0  # the count above which ``check`` raises (0: unknown; COMMIT never refuses)


pending_hit: ContextVar[PendingHit | None] = ContextVar("pending_hit", default=None)
