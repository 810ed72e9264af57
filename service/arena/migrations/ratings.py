"""The ratings migration (issue 23): recompute every published rating from the stored
results under the current rules (docs/ratings.md), once.

**Why a replay.** The rules changed what a result does to a rating (a forfeit is a rated
loss, games of one owner are unrated, the k-th game against one owner within a day weighs
1/k) and what an entry keeps (the distinct opponent owners, the recent games per owner).
Ratings are sequential updates, so the only honest way to apply new rules to old games is
to start every bot again at the initial rating and replay every stored result, in order.

**What is replayed.**

- *Tournaments*, each in creation order (``{p}tours:all``): every recorded slot, in slot
  order (the order its ratings always took), through ``tournaments.rating_plan`` — the
  same function a live ``advance`` uses. The tournament's own ratings, each slot's
  ``rating`` (before/after) and ``unrated``, and the per-round snapshots (``history``)
  are rewritten. A forfeit's winner is credited as the tournament's document says now
  (``tournament_control.credited``). Every tournament's seed joins the set of used seeds
  (``{p}tours:seeds``), so a seed from before the rule cannot be reused either.
- *The leaderboard* (``{p}leaderboard``) is rebuilt from those same results across all
  tournaments, ordered by when each was rated: a slot's ``rated_at`` (written since this
  version), else — data written the old way — its tournament's finish time (else creation
  time); ties by tournament creation order, then slot order. Old results therefore keep
  their order within a tournament and tournaments their order among themselves.
- *Each declared ladder* (``:results``, oldest first): each rated game again, through
  ``ladder.ladder_plan`` when the game is still stored (so a side whose every decision
  the clock played now forfeits), else as recorded. ``:ratings`` (``form`` included),
  ``:results`` (the rated ones, the winner as credited) and each bot's ``:history``
  (``won``, ``before``, ``after``, ``forfeit``, ``unrated``) are rewritten. A ladder keeps
  its newest ``RESULTS_KEPT`` results only; a bot whose games all fell out of that list
  keeps its entry as it was.

*Owners' standing and suspensions* (version 3): each game is weighed by its owners'
standing at the game's own time (``ratings.Standing``, from the owners' creation times),
so a replay weighs an old game as it would have been weighed when played; a game of a
bot suspended at the time of the replay moves no published rating (the result is kept,
and the suspended bot's own entry stays as it was: a replay after the suspension is
lifted rates the game again).

**Versioned and idempotent.** ``{p}T(tours)ratings:version`` (a string, no expiry) holds the
rules version the published ratings follow; ``migrate`` does nothing when it is current,
so running it again (another worker's startup, the CLI twice) changes nothing. The
replay is a function of the stored results alone, so ``--force`` gives the same ratings
again. It takes a lock (``...ratings:migrating``, ``SET NX``, expiring after
``LOCK_S``) so two processes never replay at once. Tournaments and the leaderboard are
written in one MULTI watched on every document read: a tournament that recorded a game
meanwhile makes it start again. Run it with the service stopped, or let the service run it
at startup (``create_app`` does, before its background loops start); ``allfours migrate
ratings`` runs it by hand.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import redis

from service.arena.core import ratings
from service.arena.ladder.ladders import FORM, Ladders, ladder_plan
from service.arena.tournaments import control
from service.arena.tournaments.pairing import DONE
from service.arena.tournaments.service import Tournaments
from service.arena.tournaments.standings import rating_plan, ratings_after

log = logging.getLogger(__name__)

# 1: the ratings before issue 23 (an absent key); 2: its rules; 3: owners' standing (a game
# against a new owner weighs ``ARENA_NEW_OWNER_WEIGHT``, and only established owners count
# towards the ranking) and a suspended bot's games left out of the published ratings
VERSION = 3
LOCK_S = 600
ATTEMPTS = 20


def version_key(t: Tournaments) -> str:
    return f"{t.p}ratings:version"


def current_version(t: Tournaments) -> int:
    raw = t.r.get(version_key(t))
    return int(raw) if raw else 1


def migrate(t: Tournaments, ladders: Ladders, force: bool = False) -> dict[str, Any]:
    """Replay every rated result under the current rules unless the published ratings
    follow them already (see the module docstring). Returns what it did."""
    was = current_version(t)
    if was >= VERSION and not force:
        return {"version": was, "migrated": False}
    lock = f"{t.p}ratings:migrating"
    if not t.r.set(lock, str(time.time()), nx=True, ex=LOCK_S):
        return {"version": was, "migrated": False, "busy": True}
    try:
        for _ in range(ATTEMPTS):
            try:
                done = _tournaments(t)
                break
            except redis.WatchError:
                continue
        else:
            raise RuntimeError("tournaments kept changing during the ratings migration")
        laddered = {name: _ladder(ladders, name) for name in ladders.ladders}
        t.r.set(version_key(t), VERSION)
        out = {"version": VERSION, "migrated": True, "from": was, **done,
               "ladders": laddered}
        log.info("ratings migrated: %s", out)
        return out
    finally:
        t.r.delete(lock)


def ensure(t: Tournaments, ladders: Ladders) -> None:
    """Startup: migrate if needed; a failure is logged, never fatal (the CLI can retry)."""
    try:
        if current_version(t) < VERSION:
            migrate(t, ladders)
    except Exception:
        log.exception("the ratings migration failed; run `allfours migrate ratings`")


# --- tournaments and the leaderboard -------------------------------------------------------


def _tournaments(t: Tournaments) -> dict[str, Any]:
    with t.r.pipeline(transaction=True) as pipe:
        tids = [x.decode() for x in t.r.zrange(f"{t.p}tours:all", 0, -1)]
        keys = [t.key(tid) for tid in tids]
        pipe.watch(t.lb_key, *keys)
        # one GET a tournament, not MGET: a cluster's pipeline refuses MGET (the keys share
        # the tours tag, so the WATCH and the MULTI below are one slot all the same)
        raws = [pipe.get(k) for k in keys]
        docs = [json.loads(raw) for raw in raws if raw]
        owners: dict[str, str] = {}
        bots = sorted({e["bot_id"] for d in docs for e in d["entrants"]})
        owners = t._owners(bots) if bots else {}
        created = t.arena.owners.created_of(list(owners.values()))
        suspended = t.arena.owners.suspended_now()
        events: list[tuple[float, int, int, dict[str, Any], tuple[str, str, bool]]] = []
        for seq, doc in enumerate(docs):
            for slot, plan in _replay_doc(doc, owners):
                when = slot.get("rated_at") or doc.get("finished") or doc["created"]
                events.append((float(when), seq, slot["slot"], slot, plan))
        events.sort(key=lambda e: e[:3])
        board: dict[str, dict[str, Any]] = {}
        for when, _seq, _k, _slot, (winner, loser, winner_moves) in events:
            if winner in suspended or loser in suspended:
                continue  # a suspended bot's games move no published rating
            w = board.setdefault(winner, ratings.blank())
            lo = board.setdefault(loser, ratings.blank())
            ow, ol = owners[winner], owners[loser]
            board[winner], board[loser], _ = ratings.rate_published(
                w, lo, (ow, ol), when, winner_moves,
                (t.standing.of(created.get(ow), when), t.standing.of(created.get(ol), when)))
        # a suspended bot keeps its entry as it was (off the board while suspended)
        held = {b: pipe.hget(t.lb_key, b) for b in sorted(suspended)}
        pipe.multi()
        for doc in docs:
            pipe.set(t.key(doc["id"]), json.dumps(doc, separators=(",", ":")))
        seeds = {doc["settings"]["seed"] for doc in docs if "seed" in doc["settings"]}
        if seeds:  # tournaments made before the rule: their seeds are used too
            pipe.sadd(t.seeds_key, *sorted(seeds))
        pipe.delete(t.lb_key)
        out = {b: json.dumps(e, separators=(",", ":")) for b, e in board.items()}
        out.update({b: raw for b, raw in held.items() if raw is not None})
        if out:
            pipe.hset(t.lb_key, mapping=out)
        pipe.execute()
    return {"tournaments": len(docs), "tournament_games_rated": len(events),
            "leaderboard": len(board)}


def _replay_doc(doc: dict[str, Any], owners: dict[str, str]
                ) -> list[tuple[dict[str, Any], tuple[str, str, bool]]]:
    """Rewrite one tournament's ratings from its results; the rated slots and their plans."""
    rates = {e["bot_id"]: ratings.initial() for e in doc["entrants"]}
    credited = control.credited(doc)
    snapped = {h["round"] for h in doc.get("history") or ()}
    history = []
    rated = []
    for rnd in doc["rounds"]:
        for slot in rnd["slots"]:
            slot.pop("rating", None)
            if slot["status"] != DONE or slot.get("recorded") is None or not slot["result"]:
                continue
            plan = rating_plan(doc, slot, owners, credited)
            if plan is None:
                continue
            winner, loser, winner_moves = plan
            before = [dict(rates[b]) for b in slot["teams"]]
            new_w, new_l = ratings.rate(rates[winner], rates[loser])
            if winner_moves:
                rates[winner] = new_w
            rates[loser] = new_l
            slot["rating"] = [[r["mu"], r["sigma"], rates[b]["mu"], rates[b]["sigma"]]
                              for b, r in zip(slot["teams"], before, strict=True)]
            rated.append((slot, plan))
    for rnd in doc["rounds"]:
        if rnd["round"] in snapped:
            history.append({"round": rnd["round"], "ratings": {
                b: ratings.shown(r) for b, r in ratings_after(doc, rnd["round"]).items()}})
    doc["ratings"] = rates
    doc["history"] = history
    return rated


# --- a ladder ------------------------------------------------------------------------------


def _ladder(ladders: Ladders, name: str) -> dict[str, int]:
    r = ladders.r
    k_ratings, k_results = ladders.k_ratings(name), ladders.k_results(name)
    results = [json.loads(x) for x in r.lrange(k_results, 0, -1)]
    bots = sorted({b for res in results for b in res["sides"]})
    owners = ladders.owners(bots)
    created = ladders.arena.owners.created_of(list(owners.values()))
    suspended = ladders.arena.owners.suspended_now()
    board: dict[str, dict[str, Any]] = {}
    kept = []
    changes: dict[str, dict[str, dict[str, Any]]] = {}  # bot -> game id -> history fields
    for res in results:
        sides = res["sides"]
        game = ladders.store.get_game(res["game_id"])
        if game is not None and game.state.winner is not None:
            plan = ladder_plan(game, sides, owners)
        else:  # the game is gone: its result as recorded
            forfeit = res.get("forfeit") or []
            same = owners[sides[0]] == owners[sides[1]]
            plan = {"winner": sides.index(res["winner"]), "forfeit": forfeit,
                    "rated": not same, "unrated": "same_owner" if same else None}
        rs = [board.get(b) or {**ratings.blank(), "form": ""} for b in sides]
        new = [dict(x) for x in rs]
        w = plan["winner"]
        if plan["rated"] and suspended & set(sides):
            # a suspended bot's games move no published rating; the result is kept (a
            # replay after the suspension is lifted rates it again)
            kept.append({**res, "winner": sides[w], "forfeit": plan["forfeit"]})
            continue
        if plan["rated"]:
            at = float(res["at"])
            ow, ol = owners[sides[w]], owners[sides[1 - w]]
            new[w], new[1 - w], _ = ratings.rate_published(
                rs[w], rs[1 - w], (ow, ol), at, standing=(
                    ladders.standing.of(created.get(ow), at),
                    ladders.standing.of(created.get(ol), at)))
            for i, bot in enumerate(sides):
                new[i]["form"] = (rs[i].get("form", "") + ("W" if i == w else "L"))[-FORM:]
                board[bot] = new[i]
            kept.append({**res, "winner": sides[w], "forfeit": plan["forfeit"]})
        for i, bot in enumerate(sides):
            changes.setdefault(bot, {})[res["game_id"]] = {
                "won": i == w, "before": [rs[i]["mu"], rs[i]["sigma"]],
                "after": [new[i]["mu"], new[i]["sigma"]],
                "forfeit": bot in plan["forfeit"], "unrated": plan["unrated"]}
    pipe = r.pipeline(transaction=True)
    for bot, rows in changes.items():
        key = ladders.k_history(name, bot)
        history = [json.loads(x) for x in r.lrange(key, 0, -1)]
        pipe.delete(key)
        if history:
            pipe.rpush(key, *[json.dumps({**x, **rows.get(x["game_id"], {})},
                                         separators=(",", ":")) for x in history])
    for bot, entry in board.items():
        pipe.hset(k_ratings, bot, json.dumps(entry, separators=(",", ":")))
    for bot in set(bots) - set(board) - suspended:  # every game of it is unrated now
        pipe.hdel(k_ratings, bot)
    pipe.delete(k_results)
    if kept:
        pipe.rpush(k_results, *[json.dumps(x, separators=(",", ":")) for x in kept])
    pipe.execute()
    return {"results": len(results), "rated": len(kept), "bots": len(board)}


__all__ = ["VERSION", "current_version", "ensure", "migrate", "version_key"]
