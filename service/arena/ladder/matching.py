"""Matching a ladder's waiting bots: the rule (``pair_up``, pure) and the three steps that
seat a pair exactly once across processes — claim, create, bind (``Matching``, a part of
``Ladders``, which inherits it). See ``service.arena.ladder.ladders``' module docstring."""

from __future__ import annotations

import json
import secrets
import time
from typing import Any

from service.arena.core import deals
from service.arena.core.status import ACTIVE, deadline_for, status_of, turn_bot
from service.arena.ladder.tx import MATCHED, PLAYING, WAITING, WIDEN_PER_S, WINDOW, Tx, _dump
from service.arena.ladder.validation import Ladder
from service.engine import Variants, new_game
from service.engine.game import MAX_SEED


def ordinal(r: dict[str, Any]) -> float:
    return float(r["mu"]) - 3 * float(r["sigma"])


def pair_up(waiting: list[dict[str, Any]], now: float, rematch_wait: float,
            window: float = WINDOW, widen: float = WIDEN_PER_S) -> list[tuple[str, str]]:
    """Pairs of bots to seat now (see the module docstring). Each item of ``waiting``:
    ``bot``, ``ordinal``, ``since`` (when it began waiting), ``last`` (its last opponent)."""
    order = sorted(waiting, key=lambda w: (w["since"], w["bot"]))
    taken: set[str] = set()
    pairs = []
    for a in order:
        if a["bot"] in taken:
            continue
        best = None
        for b in order:
            if b["bot"] == a["bot"] or b["bot"] in taken:
                continue
            if (a.get("owner") or a["bot"]) == (b.get("owner") or b["bot"]):
                continue  # never two bots of one owner (service.arena.accounts.owners)
            waited = now - min(a["since"], b["since"])
            gap = abs(a["ordinal"] - b["ordinal"])
            if gap > window + widen * max(0.0, waited):
                continue
            rematch = a.get("last") == b["bot"] or b.get("last") == a["bot"]
            if rematch and now - max(a["since"], b["since"]) < rematch_wait:
                continue
            key = (rematch, gap, b["since"], b["bot"])
            if best is None or key < best[0]:
                best = (key, b)
        if best is not None:
            taken.update((a["bot"], best[1]["bot"]))
            pairs.append((a["bot"], best[1]["bot"]))
    return pairs


class Matching:
    """The matching half of ``Ladders`` (which inherits it): see the module docstring."""

    # --- matching ----------------------------------------------------------------------------

    def match_once(self, name: str, now: float | None = None) -> list[str]:
        """Claim pairs of waiting bots, create their games, bind them: the ids of the
        games created by this call."""
        lad = self.ladder(name)
        now = time.time() if now is None else now
        claimed: list[tuple[str, dict[str, Any]]] = []

        def decide(tx: Tx) -> None:
            claimed.clear()
            on = [b.decode() for b in self.r.zrange(self.k_on(name), 0, -1)]
            raw_entries = {b: v for b, v in zip(on, self.r.hmget(self.k_entries(name), on)
                                                if on else [], strict=True) if v}
            entries = {k: json.loads(v) for k, v in raw_entries.items()}
            waiting = [e for e in entries.values() if e["state"] == WAITING]
            if len(waiting) < 2:
                return
            rates = self.r.hmget(self.k_ratings(name), [e["bot"] for e in waiting])
            owners = self.arena.owners.owners_of([e["bot"] for e in waiting])
            pool = [{"bot": e["bot"], "since": e["since"], "last": e.get("last"),
                     "ordinal": ordinal(json.loads(r)) if r else 0.0,
                     "owner": owners.get(e["bot"])}
                    for e, r in zip(waiting, rates, strict=True)]
            pairs = pair_up(pool, now, self.rematch_wait)
            if not pairs:
                return
            tx.multi()
            for a, b in pairs:
                mid = secrets.token_hex(6)
                sides = [a, b] if secrets.randbelow(2) else [b, a]
                match = {"id": mid, "sides": sides, "seed": secrets.randbelow(MAX_SEED + 1),
                         "at": now, "game": None}
                for bot in sides:
                    tx.expect(self.k_entries(name), bot, raw_entries[bot])  # still waiting
                    entries[bot].update(state=MATCHED, match=mid, busy=True, game=None)
                    entries[bot]["waited"] = now - entries[bot]["since"]
                    self._put(tx, name, bot, entries[bot])
                tx.hset(self.k_matches(name), mid, _dump(match))
                claimed.append((mid, match))

        self._transact(name, decide)
        made = []
        for mid, match in claimed:
            gid = self._create(lad, mid, match)
            if gid is not None:
                made.append(gid)
        return made

    def _create(self, lad: Ladder, mid: str, match: dict[str, Any]) -> str | None:
        """Step 2: create the claimed match's game, or find it made already, and bind it
        (see the module docstring): the game's id if this call bound it."""
        raw = self.r.hget(self.k_matches(lad.name), mid)
        if raw is None or json.loads(raw).get("game"):
            return None  # bound (and perhaps rated) already: another process was quicker
        return self._seat(lad, mid, match)

    def _seat(self, lad: Ladder, mid: str, match: dict[str, Any]) -> str | None:
        """Create match ``mid``'s game if absent and bind it: safe however late (a
        process that stalled here after seeing the match unbound finds the game made
        and the match bound by another, and makes nothing)."""
        a, b = match["sides"]
        seats: list[str | None] = [a, b] if lad.players == 2 else [a, b, a, b]
        names = self.store.bot_names([a, b])
        state, _ = new_game(lad.players, match["seed"], Variants.from_dict(lad.variants))
        status = status_of(state, seats)
        meta: dict[str, Any] = {
            "players": lad.players, "seed": match["seed"], "variants": lad.variants,
            "seats": seats, "names": [names.get(s or "", "") for s in seats],
            "created": int(time.time()), "creator": None, "move_limit": lad.move_limit,
            "time_bank": lad.time_bank,
            "ladder": {"name": lad.name, "match": mid, "claimed": match["at"]},
        }
        deals.seal(meta, chosen=False)  # a random seed, committed to (docs/ratings.md)
        game = self.store.create_game(meta, state, status, turn_bot(state, seats, status),
                                      deadline_for(meta, state, status),
                                      game_id=self.store.derived_id("ladder", lad.name, mid))
        if not self._bind(lad.name, mid, match["sides"], game.id):
            return None  # another process bound it (the same game: its id is the match's)
        if game.status != ACTIVE:  # a first kick can end a game at once (R22)
            self.settle(lad.name, mid)
        else:  # bound: the game is under way (webhook bots get their start notification)
            self.arena.announce_status(game, game.status)
        return game.id

    def _bind(self, name: str, mid: str, sides: list[str], gid: str) -> bool:
        """The match gets its game and its bots become ``playing``: False if the match is
        bound already (or gone: settled)."""
        def bind(tx: Tx) -> bool:
            entries = tx.hmget(self.k_entries(name), sides)
            raw = tx.hget(self.k_matches(name), mid)
            if raw is None or json.loads(raw).get("game"):
                return False
            m = json.loads(raw)
            m["game"] = gid
            tx.multi()
            tx.hset(self.k_matches(name), mid, _dump(m))
            for bot, eraw in zip(sides, entries, strict=True):
                e = json.loads(eraw) if eraw else None
                if e is not None and e.get("match") == mid:
                    e["game"] = gid
                    if e["state"] == MATCHED:
                        e["state"] = PLAYING
                    self._put(tx, name, bot, e)
            return True

        return bool(self._transact(name, bind))

    def match_all(self, now: float | None = None) -> list[str]:
        """Match the waiting bots of every ladder: the ids of the games created."""
        made: list[str] = []
        for name in self.ladders:
            made += self.match_once(name, now)
        return made


__all__ = ["Matching", "ordinal", "pair_up"]
