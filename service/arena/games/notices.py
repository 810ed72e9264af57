"""Notices for a bot that are not a game's turn: news of the competitions it entered
("your tournament is starting", "... has finished", "... was cancelled, and why"), carried
by ``GET /bots/me/turns`` the way pending invitations are, so a bot that long-polls hears
of its tournaments without polling each one.

Why here, in the games' domain: the turn long-poll is the games', and a notice is only
text for it. Who sends what (the tournaments) is above; this keeps, lists and wakes.

**Keys.** ``{p}bot:{id}:notices``: a sorted set of JSON notices by the time they were
made, the newest ``KEEP`` kept, expiring ``TTL_S`` after the last. A notice wakes the
bot's turn long-poll as an invitation does (a message naming the bot on a game channel, or
in a sharded cluster the bot's turn channel), and a notice newer than the poll's
``notices_after`` (default: its start) ends the wait: a bot hears at once, and one that
ignores notices is not answered over and over for an old one.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable
from typing import Any

from service.storage.store import Store

log = logging.getLogger(__name__)

KEEP = 20  # notices kept per bot: a day of hourly tournaments' news
TTL_S = 86400  # a notice is news for a day


class Notices:
    """A bot's notices over one ``Store`` (see the module docstring)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.r = store.r

    def key(self, bot_id: str) -> str:
        return f"{self.store.p}bot:{bot_id}:notices"

    def add(self, bots: Iterable[str], notice: dict[str, Any],
            wake_via: str | None = None) -> None:
        """Give every bot of ``bots`` ``notice`` (made now, ``at``) and wake its poll
        (``wake_via``: the channel id to publish the wake-up on; any id works, it names no
        game any waiter watches)."""
        bots = sorted(set(bots))
        if not bots:
            return
        now = time.time()
        text = json.dumps({**notice, "at": round(now, 3)}, separators=(",", ":"))
        pipe = self.r.pipeline(transaction=False)
        for bot in bots:
            pipe.zadd(self.key(bot), {text: now})
            pipe.zremrangebyrank(self.key(bot), 0, -(KEEP + 1))
            pipe.expire(self.key(bot), TTL_S)
        pipe.execute()
        for bot in bots:
            self._wake(bot, wake_via or "notice")

    def _wake(self, bot: str, via: str) -> None:
        try:
            if self.store.publish == "SPUBLISH":
                self.r.spublish(self.store.bot_turn_channel(bot), "notice")
            else:
                self.r.publish(self.store.game_channel(via), f"0::{bot}")
        except Exception:
            log.warning("could not wake bot %s for its notice", bot)

    def recent(self, bot_id: str) -> list[dict[str, Any]]:
        """The bot's notices of the last ``TTL_S``, oldest first."""
        raw = self.r.zrangebyscore(self.key(bot_id), time.time() - TTL_S, "+inf")
        return [json.loads(x) for x in raw]

    def has_new(self, bot_id: str, after: float | None) -> bool:
        """Whether a notice was made after ``after`` (None: none counts as new)."""
        if after is None:
            return False
        return bool(self.r.zcount(self.key(bot_id), f"({after}", "+inf"))
