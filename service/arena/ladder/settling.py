"""Settling a ladder's games: rating a finished game exactly once (``settle``: the match is
deleted in the same change), how it is rated (``ladder_plan``), and pausing a bot whose
timeouts reached the limit — whose live game then ends at once as its forfeit, through
the arena's one door for every end (``service.arena.games.ending``), so its opponent does
not sit through the clock playing the rest. ``Settling`` is a part of ``Ladders`` (which
inherits it); see ``service.arena.ladder.ladders``' module docstring."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from service.arena.core import ratings
from service.arena.core.status import FINISHED
from service.arena.games.ending import FORFEIT, absent_teams
from service.arena.ladder.tx import (
    CLAIM_LEASE_S,
    FORM,
    OFF,
    PAUSED,
    RESULTS_KEPT,
    WAITING,
    Tx,
    _dump,
)
from service.storage.store import Game

log = logging.getLogger(__name__)


def timeouts_by_bot(game: Game) -> dict[str, int]:
    out: dict[str, int] = {}
    for t in game.meta.get("timeouts", ()):
        bot = game.seats[t["seat"]]
        if bot:
            out[bot] = out.get(bot, 0) + 1
    return out


def ladder_plan(game: Game, sides: list[str], owners: dict[str, str]) -> dict[str, Any]:
    """How a finished ladder game is rated (docs/ratings.md): a side whose every decision
    (at least one) the move clock played never made one of its own and forfeits — a rated
    loss, whatever the board said; both sides so: unrated; bots of one owner: unrated.
    ``winner``: the team credited with the win (the game's winner unless it forfeited;
    None when both forfeited);
    ``forfeit``: the bots that forfeited; ``unrated``: why not rated, or None."""
    by = set((game.meta.get("ended") or {}).get("by") or ())  # ended at once (``forfeit``)
    absent = sorted(set(absent_teams(game)) | {t for t in (0, 1) if sides[t] in by})
    winner = game.state.winner if game.state.winner is not None else 0
    unrated = None
    if game.meta.get("seed_chosen"):
        unrated = "seed_chosen"  # never on a ladder today; a rule for any rated path
    elif owners[sides[0]] == owners[sides[1]]:
        unrated = "same_owner"
    elif len(absent) == 2:
        unrated = "both_forfeited"
        winner = None  # nobody won it (as the game's own ``ended`` says)
    elif absent:
        winner = 1 - absent[0]
    return {"winner": winner, "forfeit": [sides[t] for t in absent],
            "rated": unrated is None, "unrated": unrated}


class Settling:
    """The settling half of ``Ladders`` (which inherits it): see the module docstring."""

    # --- settling finished games -------------------------------------------------------------

    def _game_finished(self, game: Game) -> None:
        info = game.meta.get("ladder")
        if info and info.get("name") in self.ladders:
            self.settle(info["name"], info["match"])

    def settle(self, name: str, mid: str) -> bool:
        """Rate match ``mid``'s game if it has finished (exactly once: the match is deleted
        in the same transaction); pause a bot whose timeouts reached the limit. True if
        this call rated it."""
        raw = self.r.hget(self.k_matches(name), mid)
        if raw is None:
            return False
        match = json.loads(raw)
        gid = match.get("game")
        if gid is None:
            if time.time() - match["at"] > CLAIM_LEASE_S:  # its claimer died (or stalls)
                self._create(self.ladder(name), mid, match)
            return False
        # read afresh: the hook's game object is the one the finishing action started from
        game = self.store.get_game(gid)
        if game is None:
            return False
        late = {b: n for b, n in timeouts_by_bot(game).items() if n >= self.pause_timeouts}
        if game.status != FINISHED:
            paused = self._pause(name, mid, late, gid) if late else []
            if paused:  # its opponent does not wait for it: a forfeit now, rated at once
                self.arena.ending.end(game, FORFEIT, forfeit_by=paused, why=PAUSED)
            return False
        if game.state.winner is None and not (game.meta.get("ended") or {}).get("by"):
            return False  # over with no winner and nobody to blame: nothing to rate
        sides = match["sides"]
        owners = self.owners(sides)
        plan = ladder_plan(game, sides, owners)
        scores = list(game.state.scores)
        outs = timeouts_by_bot(game)
        now = time.time()
        standing = self.standings_of(owners, now)
        rated = [False]

        def decide(tx: Tx) -> None:
            rated[0] = False
            raw = tx.hget(self.k_matches(name), mid)
            if raw is None or json.loads(raw).get("game") != gid:
                return
            entries = tx.hmget(self.k_entries(name), sides)
            rates = tx.hmget(self.k_ratings(name), sides)
            rs = [json.loads(r) if r else {**ratings.blank(), "form": ""} for r in rates]
            w = plan["winner"]
            new = [dict(r) for r in rs]
            if plan["rated"] and w is not None:
                lo = 1 - w
                new[w], new[lo], _ = ratings.rate_published(
                    rs[w], rs[lo], (owners[sides[w]], owners[sides[lo]]), now,
                    standing=(standing[owners[sides[w]]], standing[owners[sides[lo]]]))
            tx.multi()
            tx.hdel(self.k_matches(name), mid)
            if plan["rated"] and w is not None:  # :results: the rated games, in rating order
                result = {"game_id": gid, "at": now, "sides": sides, "winner": sides[w],
                          "scores": scores, "forfeit": plan["forfeit"]}
                tx.rpush(self.k_results(name), _dump(result))
                tx.ltrim(self.k_results(name), -RESULTS_KEPT, -1)
            for i, bot in enumerate(sides):
                won = i == w
                r = new[i]
                if plan["rated"] and w is not None:
                    r["form"] = (rs[i].get("form", "") + ("W" if won else "L"))[-FORM:]
                    tx.hset(self.k_ratings(name), bot, _dump(r))
                tx.lpush(self.k_history(name, bot), _dump({
                    "game_id": gid, "finished": now, "opponent": sides[1 - i],
                    "won": won, "team": i, "scores": [scores[i], scores[1 - i]],
                    "timeouts": outs.get(bot, 0),
                    "before": [rs[i]["mu"], rs[i]["sigma"]], "after": [r["mu"], r["sigma"]],
                    "forfeit": sides[i] in plan["forfeit"], "unrated": plan["unrated"],
                }))
                e = json.loads(entries[i]) if entries[i] else None
                if e is None or e.get("match") != mid:
                    continue
                e.update(match=None, busy=False, last=sides[1 - i])
                if e.get("games_left") is not None:
                    e["games_left"] = max(0, e["games_left"] - 1)
                if outs.get(bot, 0) >= self.pause_timeouts and e.get("forgiven") != gid:
                    e["state"] = PAUSED
                    e["reason"] = e.get("reason") or self._pause_reason(outs[bot], gid)
                elif e["state"] in (PAUSED, OFF):
                    pass
                elif e.get("leaving") or e.get("games_left") == 0:
                    e.update(state=OFF, leaving=False)
                else:
                    e.update(state=WAITING, since=now)
                self._put(tx, name, bot, e)
            rated[0] = True

        self._transact(name, decide)
        return rated[0]

    def _pause_reason(self, n: int, gid: str) -> str:
        return (f"timed out {n} times in ladder game {gid} (the limit is "
                f"{self.pause_timeouts} in one game); join again to resume")

    def _pause(self, name: str, mid: str, late: dict[str, int], gid: str) -> list[str]:
        """Pause the bots of ``late`` still in match ``mid`` (unless joining again forgave
        their timeouts in game ``gid``): the bots paused for this game, now or before."""
        def decide(tx: Tx) -> list[str]:
            bots = list(late)
            entries = tx.hmget(self.k_entries(name), bots)
            todo, paused = [], []
            for bot, raw in zip(bots, entries, strict=True):
                e = json.loads(raw) if raw else None
                if not e or e.get("match") != mid or e.get("forgiven") == gid:
                    continue
                paused.append(bot)
                if e["state"] != PAUSED:
                    e["state"] = PAUSED
                    e["reason"] = self._pause_reason(late[bot], gid)
                    todo.append((bot, e))
            if todo:
                tx.multi()
                for bot, e in todo:
                    self._put(tx, name, bot, e)
            return paused

        return list(self._transact(name, decide) or [])

    def settle_all(self) -> None:
        """Look at every live match of every ladder: rate the finished games nobody rated
        (their process died), pause bots over the timeout limit, create the games of claims
        whose claimer died."""
        for name in self.ladders:
            self.validation.check_all(name)  # validation games (arena.validation)
            for mid in self.r.hkeys(self.k_matches(name)):
                try:
                    self.settle(name, mid.decode())
                except Exception:
                    log.exception("settling ladder %s match %s failed", name, mid)


__all__ = ["Settling", "ladder_plan", "timeouts_by_bot"]
