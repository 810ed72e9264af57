"""The validation game: a bot's first ladder entry first plays one unrated game against a
house bot, as Kaggle validates a submission before it is ranked (issue 24).

Why: a bot that cannot keep the clock (it times out, or never moves) costs every
opponent it is matched with a game decided by the default action, and its rating says
nothing. One game against the house shows whether it plays at all, before anyone else's
rating depends on it.

**What a bot sees** (``GET /ladders/{name}/entry``, docs/ladder.md). Joining a ladder for
the first time gives the entry the state ``validating`` and ``validation_game``, a game
with the ladder's rules, move limit and time bank, the bot in team 0 (seat 0, and seat 2
with 4 players) and the house bot ``house-heuristic`` in the other seats. It is an
ordinary game (found through ``GET /bots/me/turns``), unrated: it has no ``ladder`` in
its meta, so no rating, leaderboard or history changes. Then:

- the clock played any of the bot's decisions (it timed out, or never moved): the game is
  ended at once, the entry is ``not_admitted`` with a ``reason`` saying what happened and
  what to change; joining again starts a new validation game;
- the game ended with every decision of the bot its own: the bot is validated for good
  (the field ``validated`` of its bot hash: the game's id) and its entry is ``waiting``
  (queued) — it is never validated again, on any ladder;
- it ended before the bot had a decision to make (a first kick can end a game, R22): a
  new validation game.

A bot that leaves while validating is ``off``; its game is played out and, if it passed,
still validates the bot.

**When.** ``ARENA_LADDER_VALIDATION`` (default 1) and a house bot playing here (the
house process's ``house:alive``, ``service.arena.accounts.house``): a service that runs no house
bots (``ARENA_HOUSE_BOTS=0``) cannot validate, and queues bots at once as before.

**Across processes.** The entry lives in the ladder's hash (one hash tag), changed by the
ladder's compare-and-set (``ladder.Tx``); the game is created before the entry names it.
A finished validation game is judged by the process that finished it (``Arena.on_finish``,
off the request path) and, for a process that died first and for a timeout in a live game, by every
matchmaker's repair pass (``check_all``, every ``ladder.REPAIR_S``): each change is a
compare-and-set on the entry naming that game, so it happens once.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Callable
from typing import Any, Protocol

from service.arena.accounts import house
from service.arena.core import deals
from service.arena.core.problems import Problem
from service.arena.core.status import ACTIVE, FINISHED, deadline_for, status_of, turn_bot
from service.arena.games.ending import FORFEIT, VOID, moved_teams
from service.engine import Variants, new_game
from service.engine.game import MAX_SEED
from service.storage.store import Game


class Ladder(Protocol):
    """What a validation game takes of a ladder's rules
    (``service.arena.ladder.ladders.Ladder``)."""

    name: str
    players: int
    variants: dict[str, Any]
    move_limit: float
    time_bank: float


class Tx(Protocol):
    """The ladder's optimistic change (``service.arena.ladder.ladders.Tx``): read, then write."""

    def hget(self, key: str, field_: str) -> bytes | None: ...

    def multi(self) -> None: ...


class Ladders(Protocol):
    """What validation uses of ``service.arena.ladder.ladders.Ladders``, named here so that the
    ladder imports this module and not the other way round (no import circle)."""

    arena: Any
    store: Any
    r: Any
    ladders: dict[str, Any]

    def ladder(self, name: str) -> Ladder: ...

    def k_entries(self, name: str) -> str: ...

    def k_on(self, name: str) -> str: ...

    def _put(self, tx: Any, name: str, bot: str, entry: dict[str, Any]) -> None: ...

    def _transact(self, name: str, decide: Callable[[Any], str | None]) -> str | None: ...

log = logging.getLogger(__name__)

VALIDATING, NOT_ADMITTED = "validating", "not_admitted"
HOUSE_STRATEGY = "heuristic"
DEFAULTS: dict[str, Any] = {
    "ARENA_LADDER_VALIDATION": 1,  # 0: a bot's first ladder entry is queued at once
}


class Validation:
    """The validation games of one service's ladders (see the module docstring)."""

    def __init__(self, ladders: Ladders, config: dict[str, Any] | None = None) -> None:
        config = config or {}
        self.ladders = ladders
        self.store = ladders.store
        self.on = bool(int(config.get("ARENA_LADDER_VALIDATION",
                                      DEFAULTS["ARENA_LADDER_VALIDATION"])))
        ladders.arena.on_finish.append(self._finished)

    # --- who needs one ----------------------------------------------------------------------

    def validated(self, bot: str) -> bool:
        return self.store.r.hget(self.store.keys.bot(bot), "validated") is not None

    def start(self, lad: Ladder, bot: str, charge: bool = True) -> str | None:
        """A new validation game of ``bot`` on ``lad``'s rules: its id, or None when the
        bot needs none (validated, validation off, or no house bot playing here).

        With ``charge`` (a join) the game is one of the house games its owner may have
        an hour (``ARENA_HOUSE_GAMES_PER_CHALLENGER``): past them the join is refused
        (429) before anything is written, so failing and joining again cannot keep the
        house busy. The new game after one that ended before the bot had a decision is
        not the bot's doing, and is not charged."""
        if not self.on or self.validated(bot):
            return None
        try:
            seats = house.seats_for(self.store, None, 2, HOUSE_STRATEGY, None)
        except Problem:  # no house process: nothing to validate against
            return None
        opp = seats[1]
        assert opp is not None
        if opp == bot:
            return None  # a house account itself
        arena = self.ladders.arena
        if charge and arena.invitations.house_limit:
            arena.invitations.count_house_game(arena.owners.owner_of(bot))
        seats = [bot, opp] if lad.players == 2 else [bot, opp, bot, opp]
        for _ in range(100):  # a first kick can end a game at once (R22): not a test
            seed = secrets.randbelow(MAX_SEED + 1)
            state, _ = new_game(lad.players, seed, Variants.from_dict(lad.variants))
            status = status_of(state, seats)
            if status == ACTIVE:
                break
        names = self.store.bot_names([bot, opp])
        meta: dict[str, Any] = {
            "players": lad.players, "seed": seed, "variants": lad.variants,
            "seats": seats, "names": [names.get(s or "", "") for s in seats],
            "created": int(time.time()), "creator": None, "move_limit": lad.move_limit,
            "time_bank": lad.time_bank, "validation": {"ladder": lad.name, "bot": bot},
        }
        deals.seal(meta, chosen=False)
        game = self.store.create_game(meta, state, status, turn_bot(state, seats, status),
                                      deadline_for(meta, state, status))
        if game.status == ACTIVE:
            self.ladders.arena.announce_status(game, game.status)
        return game.id

    def drop(self, gid: str) -> None:
        """End a validation game no entry names (a join that raced another change)."""
        game = self.store.get_game(gid)
        if game is not None:
            self.ladders.arena.ending.end(game, VOID, why="validation")

    # --- judging ------------------------------------------------------------------------------

    @staticmethod
    def verdict(game: Game, bot: str) -> tuple[str, str | None] | None:
        """("passed", None), ("failed", reason), ("again", None) — or None while the game
        is live and the clock has not played for the bot."""
        clock = sum(1 for t in game.meta.get("timeouts", ()) if game.seats[t["seat"]] == bot)
        limit, bank = game.meta.get("move_limit"), game.meta.get("time_bank") or 0
        if clock:
            moved = moved_teams(game)[0]
            if not moved:
                return "failed", (
                    f"your bot never moved in its validation game {game.id}: the clock "
                    f"played its first decision after {limit:g} s (+{bank:g} s of time "
                    "bank). Check that it finds its turns (GET /bots/me/turns, or a verified "
                    "callback URL) and acts, then join again")
            return "failed", (
                f"the clock played {clock} of your bot's decisions in its validation game "
                f"{game.id}: each decision has {limit:g} s, and {bank:g} s of time bank in "
                "all for the slow ones (docs/bots.md, \"The clock\"). Answer within the "
                "move limit, then join again")
        if game.status != FINISHED:
            return None
        if not moved_teams(game)[0]:
            return "again", None
        return "passed", None

    def _finished(self, game: Game) -> None:
        info = game.meta.get("validation")
        if info and info.get("ladder") in self.ladders.ladders:
            self.check(info["ladder"], info["bot"])

    def check(self, name: str, bot: str) -> str | None:
        """Judge ``bot``'s validation game on ladder ``name`` if its entry waits on one:
        the entry's new state, or None if nothing changed."""
        lad = self.ladders
        raw = lad.r.hget(lad.k_entries(name), bot)
        entry = json.loads(raw) if raw else None
        gid = (entry or {}).get("validation")
        game = self.store.get_game(gid) if gid else None
        if game is None:
            return None
        verdict = self.verdict(game, bot)
        if verdict is None:
            return None
        outcome, reason = verdict
        if outcome == "failed" and game.status != FINISHED:
            # a forfeit through the door; its after-finish hook judges it again (``_finished``)
            ended = self.ladders.arena.ending.end(game, FORFEIT, forfeit_by=[bot],
                                                  why="validation")
            game = ended or game
        if outcome == "passed":  # for good, whatever the entry says now
            self.store.r.hset(self.store.keys.bot(bot), "validated", game.id)
        again = self.start(lad.ladder(name), bot, charge=False) if outcome == "again" else None
        now = time.time()

        def decide(tx: Tx) -> str | None:
            raw = tx.hget(lad.k_entries(name), bot)
            e = json.loads(raw) if raw else None
            if e is None or e.get("state") != VALIDATING or e.get("validation") != gid:
                return None  # left meanwhile, or another process judged it
            if outcome == "passed":
                e.update(state="waiting", since=now, reason=None)
            elif outcome == "failed":
                e.update(state=NOT_ADMITTED, reason=reason)
            elif again is not None:
                e["validation"] = again
            else:  # validated meanwhile, or the house went away: queued
                e.update(state="waiting", since=now)
            tx.multi()
            lad._put(tx, name, bot, e)
            return str(e["state"])

        state = lad._transact(name, decide)
        if again is not None and state is None:  # raced: nobody's game
            self.drop(again)
        if state is None and outcome == "failed":  # the door's hook judged it first
            raw = lad.r.hget(lad.k_entries(name), bot)
            e = json.loads(raw) if raw else {}
            if e.get("validation") == gid and e.get("state") == NOT_ADMITTED:
                state = NOT_ADMITTED
        return state

    def check_all(self, name: str) -> None:
        """The repair pass over ladder ``name``: every entry still validating."""
        lad = self.ladders
        on = [b.decode() for b in lad.r.zrange(lad.k_on(name), 0, -1)]
        raws = lad.r.hmget(lad.k_entries(name), on) if on else []
        for bot, raw in zip(on, raws, strict=True):
            if raw and json.loads(raw).get("state") == VALIDATING:
                try:
                    self.check(name, bot)
                except Exception:
                    log.exception("judging the validation game of %s on %s failed", bot, name)
