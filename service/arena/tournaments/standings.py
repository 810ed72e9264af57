"""Tournament results, standings and ratings (pure, but for the leaderboard's rows): what a
finished game contributes, the table recomputed from the recorded results, and the
ratings they give. ``service.arena.tournaments.service`` records the results; this reads them.

**Standings** are recomputed from the recorded results (never kept as counters that could
drift): games played/won/lost; hands won (a hand is won by the team that scored more
points in it, counting every score item — kick, give-one, High, Low, Jack, hang-Jack,
Game; a tied hand is nobody's); points for and against (final game scores); timeouts;
byes; the match score — per pairing per round, 1 to the entrant who won more of its games
(tie: more points scored in them; still tied: ½ each), 1 for a bye (a bye and its point
count once the bye's round is complete, i.e. in ``rounds_done``; never before); and the
duplicate comparison, **matchpoints**: for each deal played at several tables, on each team, every
entrant that held those cards is compared with every other that held them: 1 for a
larger margin (its final score minus its opponent's), ½ for an equal one, 0 for a
smaller; ``comparisons`` counts them (the most it could have scored). Order, each key a
tiebreak of the ones before: score, matchpoints, games won, point difference (points for
minus against), all higher first; then rating ordinal (higher first), which can separate
entrants whose results mirror each other; then bot id (ascending), which cannot tie.

**Ratings** stay OpenSkill over game results (``service.arena.core.ratings``: each game a win of one
entrant over the other; the duplicate comparison does not enter them), updated once per
game, both per tournament and on the global leaderboard. Sequential updates depend on
their order (two mirrored results, A then B or B then A, leave different ratings), so the
order is fixed: **slot order**, never the order the tables happened to finish. A deal's
games are recorded (their results shown) together when its last table finishes, so a
rating never moves on a result that is still embargoed; a recorded result then enters the
ratings once every earlier slot's has (``_rate_in_slot_order``). Each game publishes its
place in that order, ``recorded`` (1, 2, ... — equal to slot + 1), and both entrants'
ratings before and after it, so anyone can recompute every rating from the tournament's
detail alone (``tests/service/tournaments/test_tournament_order_and_limits.py`` does).

**Issue 23's rules** (docs/ratings.md, ``rating_plan``): a forfeit is a rated loss for the
entrant that forfeited (and a rated win for a credited opponent); a game both forfeited,
or between bots of one owner (the bot hash's ``owner``), is not rated. The leaderboard's
update of the *k*-th game against one owner within a day is weighted 1/*k*
(``ratings.rate_published``), and a bot is listed as provisional, unranked, until it has
``ARENA_PROVISIONAL_GAMES`` rated games against ``ARENA_PROVISIONAL_OWNERS`` owners; a
suspended bot is left off. The tournament's own ratings are not weighted.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from service.arena.core import ratings
from service.arena.tournaments import arena_format, control, knockout
from service.arena.tournaments.pairing import DONE, KNOCKOUT
from service.engine import build_record, team_of
from service.storage.store import Game


def game_result(game: Game) -> dict[str, Any] | None:
    """What a finished game contributes, per team: see the module docstring; None for a
    game voided by a cancel (``tournament_control``)."""
    if (game.meta.get("ended") or {}).get("reason") == "void":
        return None
    record = build_record(game.players, game.meta["seed"], game.variants, game.actions)
    hands = [0, 0]
    for hand in record["hands"]:
        pts = [0, 0]
        for item in hand["items"]:
            if item.get("team") is not None:  # a tied Game is scored to nobody (R20)
                pts[item["team"]] += item["points"]
        if pts[0] != pts[1]:
            hands[0 if pts[0] > pts[1] else 1] += 1
    timeouts = [0, 0]
    for t in game.meta.get("timeouts", []):
        timeouts[team_of(t["seat"])] += 1
    result = {
        "winner": record["winner"],
        "scores": list(record["scores"]),
        "hands_won": hands,
        "timeouts": timeouts,
        "hands": len(record["hands"]),
    }
    moves, clock = control.own_moves(game)
    result["moved"] = [m > c for m, c in zip(moves, clock, strict=True)]  # own moves made
    # forfeits (service.arena.tournaments.control): ended for an entrant that left, or
    # finished with one side's every decision played by the clock
    ended = game.meta.get("ended") or {}
    if ended.get("reason") == "forfeit":
        bots = control.team_bots(game)
        return control.forfeit_result([bots.index(b) for b in ended["by"] if b in bots],
                                      game, result)
    absent = [t for t in (0, 1) if moves[t] and moves[t] == clock[t]]
    if absent:
        return control.forfeit_result(absent, game, result)
    return result


def rating_plan(doc: dict[str, Any], slot: dict[str, Any], owners: Mapping[str, str],
                credited: AbstractSet[str]) -> tuple[str, str, bool] | None:
    """How a recorded game enters the ratings (docs/ratings.md): (winner, loser, whether
    the winner's rating moves), or None when it is not rated — and then ``slot["unrated"]``
    says why. The same rule for a live ``advance`` and for the migration's replay."""
    result = slot["result"]
    a, b = slot["teams"]
    if owners.get(a, a) == owners.get(b, b):
        slot["unrated"] = "same_owner"  # one owner's bots: a result nobody could trust
        return None
    forfeit = result.get("forfeit")
    if forfeit is not None and len(forfeit) == 2:
        slot["unrated"] = "both_forfeited"  # nobody played: nothing to learn
        return None
    if result.get("winner") is None:
        slot["unrated"] = "no_winner"
        return None
    slot.pop("unrated", None)
    winner = slot["teams"][result["winner"]]
    loser = slot["teams"][1 - result["winner"]]
    return winner, loser, forfeit is None or winner in credited


def ratings_after(doc: dict[str, Any], round_no: int) -> dict[str, ratings.Rating]:
    """Everyone's tournament rating after the rated games of rounds 1 .. ``round_no``: each
    entrant's rating after its last rated slot there (slots are rated in slot order). Not
    simply the ratings now: an entrant that leaves forfeits its games of later rounds at
    once, and those rated losses belong to their own rounds' snapshots."""
    rates = {e["bot_id"]: ratings.initial() for e in doc["entrants"]}
    for rnd in doc["rounds"][:round_no]:
        for slot in rnd["slots"]:
            for bot, (_m0, _s0, mu, sigma) in zip(slot["teams"], slot.get("rating") or ()):
                rates[bot] = {"mu": mu, "sigma": sigma}
    return rates


_COUNTERS = ("played", "won", "lost", "hands_won", "points_for", "points_against",
             "timeouts", "byes", "comparisons", "forfeits")


def standings(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The table, best first, recomputed from the recorded results."""
    rows: dict[str, dict[str, Any]] = {
        e["bot_id"]: {"bot_id": e["bot_id"], "bot_name": e["bot_name"], "score": 0.0,
                      "matchpoints": 0.0, **dict.fromkeys(_COUNTERS, 0),
                      "status": e["status"]}
        for e in control.entrants_out(doc)
    }
    left = doc.get("out") or {}
    shown = control.credited(doc)  # who may be credited with a forfeit's win
    for rnd in doc["rounds"]:
        for b in rnd["byes"] if round_complete(rnd) else ():
            if rnd["round"] > left.get(b, {}).get("rounds_done", rnd["round"]):
                continue  # it had left the tournament (tournament_control)
            rows[b]["byes"] += 1
            rows[b]["score"] += 1.0
        matches: dict[int, list[dict[str, Any]]] = {}
        deals: dict[int, list[dict[str, Any]]] = {}
        for slot in rnd["slots"]:
            matches.setdefault(slot["pairing"], []).append(slot)
            deals.setdefault(slot["seed"], []).append(slot)
            res = slot["result"]
            if res is None:
                continue
            for team, bot in enumerate(slot["teams"]):
                row = rows[bot]
                row["played"] += 1
                if "forfeit" in res:  # won (by an entrant that has moved) or lost, no more
                    row["won" if res["winner"] == team and bot in shown else "lost"] += 1
                    row["forfeits"] += team in res["forfeit"]
                    continue
                row["won" if res["winner"] == team else "lost"] += 1
                row["hands_won"] += res["hands_won"][team]
                row["points_for"] += res["scores"][team]
                row["points_against"] += res["scores"][1 - team]
                row["timeouts"] += res["timeouts"][team]
        for slots in matches.values():
            if any(s["result"] is None for s in slots):
                continue
            a, b = slots[0]["entrants"]
            forfeited = {s["teams"][t] for s in slots for t in s["result"].get("forfeit", ())}
            if forfeited:  # the match goes to the entrant that did not forfeit, if any
                for bot in ({a, b} - forfeited) & shown:
                    rows[bot]["score"] += 1.0
                continue
            key = {a: [0, 0], b: [0, 0]}  # games won, points scored in this match
            for s in slots:
                for team, bot in enumerate(s["teams"]):
                    key[bot][0] += s["result"]["winner"] == team
                    key[bot][1] += s["result"]["scores"][team]
            if key[a] == key[b]:
                rows[a]["score"] += 0.5
                rows[b]["score"] += 0.5
            else:
                rows[a if key[a] > key[b] else b]["score"] += 1.0
        for tables in deals.values():
            _compare(rows, tables)
    rates = doc["ratings"]
    out = []
    for row in rows.values():
        # an entrant of a tournament not yet started has no tournament rating yet
        row["rating"] = ratings.shown(rates.get(row["bot_id"]) or ratings.initial())
        out.append(row)
    if doc["settings"]["format"] == KNOCKOUT and "knockout" in doc:  # by round reached
        return knockout.standings(doc, rows)  # (a bracket exists once it has started)
    if doc["settings"]["format"] == arena_format.ARENA:  # its score, streaks, ranking
        return arena_format.standings(doc, rows, shown)
    out.sort(key=lambda r: (-r["score"], -r["matchpoints"], -r["won"],
                            -(r["points_for"] - r["points_against"]),
                            -r["rating"]["ordinal"], r["bot_id"]))
    for i, row in enumerate(out, 1):
        row["rank"] = i
    return out


def round_complete(rnd: dict[str, Any]) -> bool:
    """Every game of the round is recorded: the round counts in ``rounds_done``, and only
    then does its bye count. A round robin fixes all its rounds (and byes) at creation, so
    crediting a bye earlier would show every entrant a bye before a card is dealt."""
    return all(s["status"] == DONE for s in rnd["slots"])


def _compare(rows: dict[str, dict[str, Any]], tables: list[dict[str, Any]]) -> None:
    """Matchpoints of one deal played at several tables: on each team, every holder of
    those cards against every other holder, by margin (own final score minus the
    opponent's): 1 for a larger margin, ½ for an equal one. Results are recorded a whole
    deal at a time, so a deal here has all of its tables or none."""
    if any(s["result"] is None for s in tables):
        return
    tables = [s for s in tables if "forfeit" not in s["result"]]  # forfeits compare with none
    if len(tables) < 2:
        return
    for team in (0, 1):
        held = [(s["teams"][team], s["result"]["scores"][team] - s["result"]["scores"][1 - team])
                for s in tables]
        for i, (bot, margin) in enumerate(held):
            for j, (_other, theirs) in enumerate(held):
                if i != j:
                    rows[bot]["comparisons"] += 1
                    rows[bot]["matchpoints"] += (1.0 if margin > theirs
                                                 else 0.5 if margin == theirs else 0.0)


def published_rows(store: Any, raw: dict[str, dict[str, Any]], games: int, owners: int
                   ) -> list[dict[str, Any]]:
    """The leaderboard's rows from its entries (bot id → entry): see ``leaderboard``."""
    ids = sorted(raw)
    batch = store.r.pipeline(transaction=False)
    for b in ids:
        batch.hmget(store.keys.bot(b), ["name", "suspended"])
    found = dict(zip(ids, batch.execute(), strict=True)) if ids else {}
    items = []
    for bot, r in raw.items():
        name, suspended = found.get(bot) or (None, None)
        if suspended:
            continue  # suspended by the operator: off the leaderboard while it lasts
        items.append({"bot_id": bot, "bot_name": name.decode() if name else "",
                      **ratings.shown(r), "games": r["games"], "wins": r["wins"],
                      "provisional": ratings.provisional(r, games, owners)})
    items.sort(key=lambda i: (i["provisional"], -i["ordinal"], i["bot_id"]))
    rank = 0
    for item in items:
        if item["provisional"]:
            item["rank"] = None
        else:
            rank += 1
            item["rank"] = rank
    return items
