"""What an owner does with its own bots: rotate or revoke a bot's token, retire a bot, and
see them all at once (``GET /owners/me``).

Any bot of an owner acts for the owner: its token may rotate, revoke or retire any bot of
the same owner (itself included), so a leaked token is replaced from another bot, and a
bot whose token was revoked gets a new one the same way.

Retiring is for good: the bot plays no more (it is suspended with the reason
``RETIRED``, so every refusal of a suspended bot holds: no joins, games, invitations,
ladders or tournaments; it is withdrawn from the open ones as a suspended bot is), while
its games, ratings and name stay as they are. Only the operator could lift it.
"""

from __future__ import annotations

import json
import time
from typing import Any

from service.arena.accounts.owners import HOUSE_OWNER
from service.arena.core import ratings
from service.arena.core.problems import Problem
from service.arena.games.commands import Arena
from service.storage.bots import TOKEN_CACHE_S

RETIRED = "retired by its owner"


class OwnedBots:
    """An owner's bots over ``arena`` (with its tournaments and ladders set)."""

    def __init__(self, arena: Arena) -> None:
        self.arena = arena
        self.store = arena.store

    def _mine(self, caller: str, bot_id: str) -> None:
        """``bot_id`` exists and belongs to ``caller``'s owner (404 otherwise: another
        owner's bot is none of the caller's business, not even whether it exists)."""
        if self.store.get_bot(bot_id) is None:
            raise Problem("not-found", "no such bot")
        owners = self.arena.owners.owners_of([caller, bot_id])
        if owners[caller] != owners[bot_id] or owners[caller] == HOUSE_OWNER:
            raise Problem("not-found", "no such bot of your owner")

    def rotate(self, caller: str, bot_id: str) -> dict[str, Any]:
        self._mine(caller, bot_id)
        if self.arena.owners.suspension(bot_id) == RETIRED:
            raise Problem("suspended", "this bot is retired: it needs no token")
        token = self.store.rotate_token(bot_id)
        return {"id": bot_id, "token": token, "old_token_grace": TOKEN_CACHE_S}

    def revoke(self, caller: str, bot_id: str) -> dict[str, Any]:
        self._mine(caller, bot_id)
        self.store.rotate_token(bot_id, revoke=True)
        return {"id": bot_id, "token": None, "old_token_grace": TOKEN_CACHE_S}

    def retire(self, caller: str, bot_id: str) -> dict[str, Any]:
        """Retire ``bot_id`` (a repeat answers it as it is)."""
        self._mine(caller, bot_id)
        owners = self.arena.owners
        if owners.suspension(bot_id) != RETIRED:
            self.store.r.hset(self.store.keys.bot(bot_id), "retired", round(time.time(), 3))
            owners.suspend_bots([bot_id], RETIRED, {"bot": bot_id})
            self.arena._withdraw_everywhere([bot_id])  # as a suspension withdraws it
        return self.bot(bot_id)

    def bot(self, bot_id: str) -> dict[str, Any]:
        out = self.arena.bot(bot_id)
        raw = self.store.r.hget(self.store.keys.bot(bot_id), "retired")
        out["retired"] = float(raw) if raw else None
        return out

    def owner(self, caller: str) -> dict[str, Any]:
        """The caller's owner: every bot of it with its ratings (the leaderboard's and
        each ladder's; null where it has none) and the live games it sits in."""
        owner_id = self.arena.owners.owner_of(caller)
        record = self.arena.owners.record(owner_id) or {"id": owner_id, "created": 0,
                                                        "bots": [], "suspended": None}
        ids = sorted(set(record["bots"]) | ({caller} if owner_id == caller else set()))
        board = self._ratings(getattr(self.arena.tournaments, "lb_key", None), ids)
        lads = self.arena.ladders
        ladder_boards = {name: self._ratings(lads.k_ratings(name), ids)
                         for name in sorted(getattr(lads, "ladders", {}) or {})}
        bots = []
        for b in ids:
            if self.store.get_bot(b) is None:
                continue  # expired unused
            bot = self.bot(b)
            bot["ratings"] = {"leaderboard": board.get(b),
                              "ladders": {n: r[b] for n, r in ladder_boards.items()
                                          if b in r}}
            bot["live_games"] = [self.arena.summary(g) for g in self.store.live_games(b)]
            bots.append(bot)
        return {"id": owner_id, "created": record["created"],
                "suspended": record["suspended"], "bots": bots}

    def _ratings(self, key: str | None, ids: list[str]) -> dict[str, dict[str, Any]]:
        if not key or not ids:
            return {}
        out = {}
        for b, raw in zip(ids, self.store.r.hmget(key, ids)):
            if raw:
                r = json.loads(raw)
                out[b] = {**ratings.shown(r), "games": r.get("games", 0),
                          "wins": r.get("wins", 0)}
        return out


__all__ = ["RETIRED", "OwnedBots"]
