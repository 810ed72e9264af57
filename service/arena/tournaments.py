"""Tournaments: pairing, scheduling games as earlier ones finish, standings and ratings.

**The model.** A tournament is one JSON document in Redis, ``{p}tour:{id}``: its settings,
its entrants, and its rounds, each a list of game *slots* (who sits on which team, the
deal's seed, and — once scheduled — the game id and, once played, the result), plus the
ratings after every recorded game and a snapshot of them after every round. Other keys:
``{p}tours:all`` (sorted set by creation sequence, for listing), ``{p}tours:seq``,
``{p}tours:running`` (set of open tournaments, which the sweeper re-checks) and
``{p}leaderboard`` (hash: bot id → JSON global rating over all tournament games),
``{p}embargoed`` (set of shared deals not yet finished at every table: see below),
``{p}tours:seeds`` (set of every tournament seed used, permanent: a seed is never reused
unless ``trusted``, ``_claim_seed``) and ``{p}ratings:version`` (the rating rules the
published ratings follow: ``service.arena.rating_migration``).

**Never twice, never skipped.** Every change to a tournament is one optimistic
transaction, ``advance``: WATCH the document (and the leaderboard), read it and the games
of its live slots, decide (record finished games, close a round, pair the next, create
the next games), then MULTI/EXEC the new document *together with the new games' writes*.
A game therefore exists exactly when its slot names it: if anyone else changed the
tournament in between (another process, another finishing game) EXEC fails, nothing is
written, and ``advance`` starts again from the fresh document — where that slot is now
taken. A finished game is recorded in the same transaction that marks its slot done, so
its result counts once.

**Triggers.** ``advance`` runs (a) right after an action or a timeout finishes one of the
tournament's games (``Arena.on_finish``), and (b) every few seconds from every sweeper
(``advance_all`` over ``{p}tours:running``), so a process that died between finishing a
game and scheduling the next is repaired, and a restarted service simply carries on:
nothing about a tournament lives outside Redis. At most ``parallel`` games of one
tournament are being played at once (a finished game waiting for the other tables of its
deal does not count); games are created in slot order.

**Knockout** (``service.arena.knockout``): single elimination, seeded by the leaderboard's
rating ordinal, byes to the top seeds; each round is made when the previous one is
decided, from the winners, through ``round_slots`` like any round (so its deals are shared
and embargoed the same way); a level match gets tiebreak games appended to its round
before the round counts as complete. The bracket lives in this document.

**Stopping and leaving** (``service.arena.tournament_control``): a tournament is
``running``, ``paused`` (nothing starts; live games play on and are recorded),
``finished`` or ``cancelled`` (live games voided, nothing scheduled, every deal's embargo
lifted). Entrants that withdraw, fall under the no-show rule or are disqualified forfeit
their live and unplayed games; ``advance`` applies all of it first (``before_step``), in
the same transaction as everything else.

**Rounds.** Round robin: all rounds are fixed at creation by the circle method (each
entrant plays at most once per round; with an odd number, one sits out — a bye). Swiss:
each round is paired when the previous one is complete, by the current standings,
avoiding rematches where possible (a bounded backtracking search); the bye goes to the
lowest-ranked entrant with the fewest byes. When no pairing avoids every rematch, an exact
minimum-cost matching (``fewest_rematches``) pairs the round and picks the bye among the
fewest-byes entrants: as few rematches as possible, then the least repeated pairs, then
those that met longest ago (so a pair meets in back-to-back rounds only when every other
pairing is worse by those measures), then the score grouping. A Swiss of more rounds
than entrants − 1 is accepted with a ``warnings`` entry: rematches are then certain. Both
formats play round by round (a round's games start only when the previous round is
complete), so the rating history per round is exact.

**Pairings.** A pairing is a table: two entrants, one per team (in a 4-player game an
entrant holds both seats of its team, 0 and 2 or 1 and 3). It plays ``games_per_pairing``
games in its round, each a different deal (a game seed, which fixes the cut and every
hand's shuffle); at each table the entrants take turns on team 0, game by game and round by
round.

**Duplicate deals, the bridge way (``duplicate``).** The same deal is played at different
tables by different entrants, never twice by one entrant, and results are compared
across tables. Deal *k* of a round (k = 0 .. games_per_pairing − 1) is dealt at *every*
table of the round: its seed is ``deal_seed(tournament seed, round, k)``, so at every hand
the tables reach, team 0 holds the same cards at each table, and so does team 1. A
round's tables are disjoint (each entrant sits at one, or has the bye), so each entrant
plays each deal exactly once, from one seat; a new round brings new deals. This needs
two tables a round — 4 entrants or more, in round robin and Swiss alike (Swiss pairs each
round when the last is complete; its deals are assigned the same way). ``duplicate``
omitted (or null) means on wherever possible and off otherwise; ``true`` with fewer than
4 entrants is refused (422, explained under ``errors.duplicate``); ``false`` gives every
game its own deal.

**Why it leaks nothing.** An entrant's own cards in deal *k* are, at the other tables,
the cards of someone it is not playing, so what it holds tells it nothing hidden in its
own game. What it could learn of its opponent's cards would come from the *other* tables:
their hands, seeds, records, played cards, even their scores. So while any table of a
shared deal is not finished — live, or not yet started — the deal is *embargoed*: every
game of it carries ``embargo: <tournament>:<round>:<deal>`` in its meta, and the deal is in
the Redis set ``{p}embargoed`` (``arena.embargo_key``). For such a game the arena answers
a viewer without a seat at that table (a spectator, or a bot seated elsewhere) 403
``/problems/embargoed`` for its view, turn long-poll, record and event stream; its own
seats get their views and their redacted record and stream, but a finished game's view
loses ``hands`` and ``seed`` and its record stays the partial one; the game list shows its
``scores`` and ``winner`` as null; the tournament shows its slot ``live`` with no seed and
no result. A live game of a shared deal is embargoed without asking Redis (its own table
is live); only a finished one costs a ``SISMEMBER``. The deal enters the set with its first
game (same MULTI/EXEC as the game's creation) and leaves it in the MULTI/EXEC that
records its results, which ``advance`` does only once every table of the deal has
finished — a whole deal at a time, in slot order. So the embargo can end late (until the
next ``advance``: at once after the finishing action, else the sweeper's next pass) but
never early, and nothing needs a counter that could drift. What stays visible while
embargoed: that the game exists, who sits where, its status and version. What cannot be
prevented by a service: entrants that are run by one owner and share what they saw at
different tables (as in bridge, players at different tables must not talk).

**Trusted twins (``trusted``).** For bots one trusts not to use what a game showed them in
another (comparing one's own strategies, as ``allfours tournament`` can with
``--trusted``), a pairing's games come in twins: each deal is played twice by the same
two entrants with the teams swapped, so each entrant holds, hand for hand, the cards its
opponent held in the twin. This works with any number of entrants (even 2) but needs an
even ``games_per_pairing``; the twins are embargoed from spectators like any shared deal.
An entrant sees each deal from both seats: never use it between bots you do not control.

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

**Ratings** stay OpenSkill over game results (``service.arena.ratings``: each game a win of one
entrant over the other; the duplicate comparison does not enter them), updated once per
game, both per tournament and on the global leaderboard. Sequential updates depend on
their order (two mirrored results, A then B or B then A, leave different ratings), so the
order is fixed: **slot order**, never the order the tables happened to finish. A deal's
games are recorded (their results shown) together when its last table finishes, so a
rating never moves on a result that is still embargoed; a recorded result then enters the
ratings once every earlier slot's has (``_rate_in_slot_order``). Each game publishes its
place in that order, ``recorded`` (1, 2, ... — equal to slot + 1), and both entrants'
ratings before and after it, so anyone can recompute every rating from the tournament's
detail alone (``tests/service/test_tournament_order_and_limits.py`` does).

**Issue 23's rules** (docs/ratings.md, ``rating_plan``): a forfeit is a rated loss for the
entrant that forfeited (and a rated win for a credited opponent); a game both forfeited,
or between bots of one owner (the bot hash's ``owner``), is not rated. The leaderboard's
update of the *k*-th game against one owner within a day is weighted 1/*k*
(``ratings.rate_published``), and a bot is listed as provisional, unranked, until it has
``ARENA_PROVISIONAL_GAMES`` rated games against ``ARENA_PROVISIONAL_OWNERS`` owners; a
suspended bot is left off. The tournament's own ratings are not weighted.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import random
import secrets
import time
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from hashlib import shake_256
from typing import Any

import redis

from service.arena import deals, knockout, ratings
from service.arena import tournament_control as control
from service.arena.games import Arena
from service.arena.status import ACTIVE, FINISHED, deadline_for, embargo_key, status_of, turn_bot
from service.engine import Variants, build_record, new_game, team_of
from service.engine.game import MAX_SEED
from service.http.problems import Problem
from service.http.schemas import MAX_TOURNAMENT_GAMES, size_errors
from service.storage.store import Game

log = logging.getLogger(__name__)

ROUND_ROBIN, SWISS, KNOCKOUT = "round_robin", "swiss", "knockout"
RUNNING = "running"
PENDING, LIVE, DONE = "pending", "live", "done"
TABLES, TWINS, SINGLE = "tables", "twins", "single"  # how deals are shared: deal_mode
ATTEMPTS = 200
MAX_GAMES = MAX_TOURNAMENT_GAMES  # per tournament: keeps the document small


# --- pairing (pure) ------------------------------------------------------------------------


def round_robin_rounds(ids: list[str]) -> list[tuple[list[tuple[str, str]], list[str]]]:
    """(pairs, byes) for every round, by the circle method: each pair meets once."""
    xs: list[str | None] = [*ids, None] if len(ids) % 2 else list(ids)
    n = len(xs)
    rounds = []
    for _ in range(n - 1):
        pairs, byes = [], []
        for i in range(n // 2):
            a, b = xs[i], xs[n - 1 - i]
            if a is None or b is None:
                byes.append(b if a is None else a)
            else:
                pairs.append((a, b))
        rounds.append((pairs, [b for b in byes if b is not None]))
        xs = [xs[0], xs[-1], *xs[1:-1]]
    return rounds


Meetings = Mapping[frozenset[str], Sequence[int]] | AbstractSet[frozenset[str]]


def swiss_pairs(
    ranked: list[str], met: Meetings, byes: dict[str, int]
) -> tuple[list[tuple[str, str]], list[str]]:
    """Pair ``ranked`` (best first) top-down, avoiding pairs in ``met`` where possible.

    ``met``: the pairs that have met, each with the rounds it met in (a plain set: met
    once, in no known round). The bye goes to the lowest-ranked entrant with the fewest
    byes and the rest are paired top-down, each with the nearest entrant below it that it
    has not met (a bounded backtracking search). When that finds nothing — a rematch is
    forced — ``fewest_rematches`` pairs instead, exactly."""
    pool = list(ranked)
    bye: list[str] = []
    if len(pool) % 2:
        fewest = min(byes.get(b, 0) for b in pool)
        out = next(b for b in reversed(pool) if byes.get(b, 0) == fewest)
        pool.remove(out)
        bye = [out]
    pairs = _pair(pool, set(met), [10_000])
    if pairs is None:
        return fewest_rematches(ranked, met, byes)
    return pairs, bye


def fewest_rematches(
    ranked: list[str], met: Meetings, byes: dict[str, int]
) -> tuple[list[tuple[str, str]], list[str]]:
    """The Swiss pairing once a rematch cannot be avoided (issue 16): a minimum-cost
    perfect matching (networkx's ``max_weight_matching``, exact on integer weights) of
    ``ranked`` (best first) — plus a bye node when the count is odd, joined only to the
    entrants with the fewest byes, so who sits out is chosen with the pairs. The cost is
    lexicographic, each level outweighing everything below it:

    1. the number of rematches;
    2. the rematches themselves, worst first: a pair's k-th meeting is worse than any
       number of (k−1)-th meetings, and among equal counts, the more recent their last
       meeting the worse — so no pair meets more often than it must, and a pair that met
       last round meets again only when every other pairing is worse by these measures;
    3. Swiss's score grouping: the squared distance in the standings between partners (and
       between the bye and the bottom of the standings).

    Exact search would be exponential in the worst case (n ≤ 64 entrants: 63!! pairings);
    the blossom algorithm is O(n³). The weights are Python integers (as large as the
    levels need), so the optimum is exact, not rounded."""
    import networkx as nx

    n = len(ranked)
    history = _meeting_rounds(met)
    fewest = min((byes.get(b, 0) for b in ranked), default=0)
    # level 2: every (meetings, last round) a candidate rematch can have, in order
    everyone = set(ranked)
    classes = sorted({(len(r), max(r)) for p, r in history.items() if p <= everyone})
    grade = {c: k for k, c in enumerate(classes)}
    edges_per_matching = n // 2 + 1
    score_scale = n * n * edges_per_matching + 1  # above any matching's level-3 total
    base = edges_per_matching + 1
    rematch_scale = base ** len(classes) * score_scale * edges_per_matching
    costs: dict[tuple[int | str, int], int] = {}
    for i, j in itertools.combinations(range(n), 2):
        rounds = history.get(frozenset((ranked[i], ranked[j])))
        cost = (j - i) ** 2
        if rounds:
            cost += rematch_scale + base ** grade[(len(rounds), max(rounds))] * score_scale
        costs[(i, j)] = cost
    if n % 2:
        for i in range(n):
            if byes.get(ranked[i], 0) == fewest:
                costs[("bye", i)] = (n - 1 - i) ** 2
    top = max(costs.values()) + 1
    graph = nx.Graph()
    for (u, v), cost in costs.items():
        graph.add_edge(u, v, weight=top - cost)  # the heaviest perfect matching: cheapest
    matching = nx.max_weight_matching(graph, maxcardinality=True)
    pairs, bye = [], []
    for u, v in matching:
        if "bye" in (u, v):
            bye.append(ranked[v if u == "bye" else u])  # type: ignore[index]
        else:
            a, b = sorted((u, v))  # type: ignore[type-var]
            pairs.append((ranked[a], ranked[b]))  # type: ignore[index]
    pairs.sort(key=lambda p: ranked.index(p[0]))
    return pairs, bye


def _meeting_rounds(met: Meetings) -> dict[frozenset[str], list[int]]:
    if isinstance(met, Mapping):
        return {p: sorted(r) or [0] for p, r in met.items()}
    return {p: [0] for p in met}


def _pair(pool: list[str], met: set[frozenset[str]], budget: list[int]
          ) -> list[tuple[str, str]] | None:
    if not pool:
        return []
    first, rest = pool[0], pool[1:]
    for i, other in enumerate(rest):
        if frozenset((first, other)) in met:
            continue
        budget[0] -= 1
        if budget[0] < 0:
            return None
        sub = _pair(rest[:i] + rest[i + 1:], met, budget)
        if sub is not None:
            return [(first, other), *sub]
    return None


def swiss_warnings(settings: dict[str, Any], n: int) -> list[str]:
    """What the organizer is told (``warnings``) about settings the service accepts but
    that cannot play as they might expect. A Swiss of more than n − 1 rounds is accepted
    (five bots over seven rounds is a fair way to get more games than a round robin) but
    some pairs must then meet again: ``fewest_rematches`` keeps that as rare and as long
    ago as it can."""
    rounds = settings["rounds"]
    if settings["format"] != SWISS or rounds <= n - 1:
        return []
    return [f"{rounds} Swiss rounds for {n} entrants: more than {n - 1} (entrants - 1), "
            f"so some entrants must meet more than once; each round is paired with as few "
            f"rematches as possible, and those between entrants that met longest ago. A "
            f"round robin meets everyone exactly once"]


def deal_seed(tournament_seed: int, round_no: int, deal: int) -> int:
    """The game seed of one deal of a round: a pure function of the tournament's seed."""
    digest = shake_256(b"allfours/tournament/deal/%d/%d/%d"
                       % (tournament_seed, round_no, deal)).digest(8)
    return int.from_bytes(digest, "little") % (MAX_SEED + 1)


def deal_mode(settings: dict[str, Any]) -> str:
    """How a tournament's rounds share deals (see the module docstring)."""
    if not settings["duplicate"]:
        return SINGLE
    return TWINS if settings.get("trusted") else TABLES


def round_slots(settings: dict[str, Any], round_no: int, pairs: list[tuple[str, str]]
                ) -> list[dict[str, Any]]:
    """The games of one round: ``games_per_pairing`` per pairing, each with its deal.

    ``tables``: deal k of the round is played by every pairing (table) of the round, so each
    entrant plays it once; ``twins`` (trusted): deals come in twins within a pairing, the
    teams swapped; ``single``: every game its own deal. At each table the entrants take
    turns on team 0, game by game (and round by round, so an odd ``games_per_pairing``
    does not always give the same entrant team 0). Any format that makes its own rounds
    (a knockout) gets the same guarantee by calling this with each round's pairs: a round
    of two tables or more shares its deals between them, a round of one table (a final)
    plays each deal once, and ``_add_game`` embargoes whatever is shared."""
    g = settings["games_per_pairing"]
    mode = deal_mode(settings)
    out = []
    for i, (a, b) in enumerate(pairs):
        for k in range(g):
            if mode == TABLES:
                deal = k
            elif mode == TWINS:
                deal = i * ((g + 1) // 2) + k // 2
            else:
                deal = i * g + k
            out.append({
                "round": round_no, "pairing": i, "entrants": [a, b], "deal": deal,
                "seed": deal_seed(settings["seed"], round_no, deal),
                "teams": [a, b] if (k + round_no - 1) % 2 == 0 else [b, a],
                "game": None, "status": PENDING, "result": None, "recorded": None,
            })
    return out


def tables_of(rnd: dict[str, Any], slot: dict[str, Any]) -> list[dict[str, Any]]:
    """Every slot of ``rnd`` dealt the same cards as ``slot``, in slot order."""
    return [s for s in rnd["slots"] if s["seed"] == slot["seed"]]


def embargo_id(doc: dict[str, Any], slot: dict[str, Any]) -> str:
    """The name of a shared deal in the embargo set (``arena.embargo_key``)."""
    return f"{doc['id']}:{slot['round']}:{slot['deal']}"


def duplicate_setting(asked: bool | None, entrants: int, trusted: bool) -> bool:
    """``duplicate`` as played: asked for (or, when not given, wherever it is possible).
    Without ``trusted`` a deal is shared only between disjoint tables of one round, which
    needs two tables a round: four entrants. Asking for it with fewer is refused."""
    possible = trusted or entrants >= 4
    if asked is None:
        return possible
    if asked and not possible:
        msg = (f"duplicate deals need at least 4 entrants (two tables a round) and there "
               f"are {entrants}: a deal is replayed only at another table, by other "
               f"entrants, so nobody sees a deal from two seats. Leave duplicate out (or "
               f"false) to give every game its own deal, or set trusted to true to replay "
               f"each deal with the teams swapped — only for bots you trust not to use what "
               f"they saw in one game in the other")
        raise Problem("validation", msg, errors={"duplicate": [msg]})
    return asked


def planned_games(settings: dict[str, Any], n: int) -> int:
    """The regular games (a knockout's tiebreak games come on top, as they are added)."""
    g = settings["games_per_pairing"]
    if settings["format"] == ROUND_ROBIN:
        return n * (n - 1) // 2 * g
    if settings["format"] == KNOCKOUT:
        return (n - 1) * g  # one match per entrant knocked out
    return settings["rounds"] * (n // 2) * g


# --- results and standings (pure) -----------------------------------------------------------


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
    # forfeits (service.arena.tournament_control): ended for an entrant that left, or
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
        row["rating"] = ratings.shown(rates[row["bot_id"]])
        out.append(row)
    if doc["settings"]["format"] == KNOCKOUT:  # placement by round reached
        return knockout.standings(doc, rows)
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


# --- the service ----------------------------------------------------------------------------


class Tournaments:
    """Tournament use cases over the arena's store (see the module docstring)."""

    def __init__(self, arena: Arena) -> None:
        self.arena = arena
        self.store = arena.store
        self.r: redis.Redis = arena.store.r
        # the tournaments' keys, the leaderboard's and the embargo set's: one hash tag in
        # a cluster, so their WATCH/MULTI is one slot (service.storage.keys)
        self.p = arena.store.tours_prefix
        arena.on_finish.append(self._game_finished)
        # when a bot is ranked (docs/ratings.md); the app sets them from its config
        self.provisional_games = int(ratings.DEFAULTS["ARENA_PROVISIONAL_GAMES"])
        self.provisional_owners = int(ratings.DEFAULTS["ARENA_PROVISIONAL_OWNERS"])

    def key(self, tid: str) -> str:
        return f"{self.p}tour:{tid}"

    @property
    def lb_key(self) -> str:
        return f"{self.p}leaderboard"

    @property
    def running_key(self) -> str:
        return f"{self.p}tours:running"

    # --- creating ---------------------------------------------------------------------------

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        entrants: list[str] = body["entrants"]
        names = self.store.bot_names(entrants)
        unknown = sorted(b for b, n in names.items() if not n)
        if unknown:
            msg = f"no such bot: {', '.join(unknown)}"
            raise Problem("not-found", msg, errors={"entrants": [msg]})
        suspended = sorted(b for b in set(entrants) if self.arena.owners.is_suspended(b))
        if suspended:  # the operator's suspension keeps a bot out of new tournaments too
            msg = f"suspended: {', '.join(suspended)}"
            raise Problem("suspended", msg, errors={"entrants": [msg]})
        self.store.bots_played(entrants)  # entered: kept for ever (service.storage.store)
        try:
            variants = Variants.from_dict(body.get("variants") or {})
        except Exception as exc:
            raise Problem("validation", str(exc), errors={"variants": [str(exc)]}) from None
        n = len(entrants)
        fmt = body["format"]
        trusted = bool(body.get("trusted", False))
        settings = {
            "format": fmt,
            "players": body.get("players", 2),
            "games_per_pairing": body.get("games_per_pairing", 2),
            "duplicate": duplicate_setting(body.get("duplicate"), n, trusted),
            "trusted": trusted,
            "rounds": (body.get("rounds") or max(1, math.ceil(math.log2(n))))
            if fmt == SWISS else knockout.rounds_for(n) if fmt == KNOCKOUT
            else n - 1 + n % 2,
            "variants": variants.changed(),
            "move_limit": body.get("move_limit"),
            "parallel": body.get("parallel", 8),
            "seed": body["seed"] if body.get("seed") is not None
            else secrets.randbelow(MAX_SEED + 1),
            # absent and failing entrants: service.arena.tournament_control
            "no_show": body.get("no_show", control.DEFAULT_NO_SHOW_S),
            "max_timeouts": body.get("max_timeouts"),
            "analyse": bool(body.get("analyse", False)),  # service.arena.analyses
        }
        too_big = size_errors(body)  # TournamentCreate refuses it first (the contract)
        if too_big:
            raise Problem("validation", next(iter(too_big.values()))[0], errors=too_big)
        self._claim_seed(settings, body.get("seed") is not None, trusted)
        tid = secrets.token_hex(6)
        warnings = swiss_warnings(settings, n)
        doc: dict[str, Any] = {
            "id": tid,
            "name": body.get("name") or "tournament",
            "status": RUNNING,
            "created": int(time.time()),
            "finished": None,
            "settings": settings,
            "entrants": [{"bot_id": b, "bot_name": names[b]} for b in entrants],
            "rounds": [],
            "ratings": {b: ratings.initial() for b in entrants},
            "history": [],
            "recorded": 0,
            "warnings": warnings,
        }
        if fmt == ROUND_ROBIN:
            for pairs, byes in round_robin_rounds(entrants):
                self._add_round(doc, pairs, byes)
        elif fmt == KNOCKOUT:  # seeded by the leaderboard as it is now
            board = dict(zip(entrants, self.r.hmget(self.lb_key, entrants), strict=True))
            lines = knockout.start(doc, {b: json.loads(v) if v else None
                                         for b, v in board.items()})
            self._add_round(doc, *knockout.pairs_of(lines))
            doc["rounds"][-1]["lines"] = lines
        else:
            self._add_round(doc, *swiss_pairs(entrants, set(), {}))
        seq = self.r.incr(f"{self.p}tours:seq")
        pipe = self.r.pipeline(transaction=True)
        pipe.set(self.key(tid), json.dumps(doc, separators=(",", ":")))
        pipe.zadd(f"{self.p}tours:all", {tid: seq})
        pipe.sadd(self.running_key, tid)
        pipe.execute()
        self.advance(tid)
        return self.detail(tid)

    @property
    def seeds_key(self) -> str:
        return f"{self.p}tours:seeds"

    def _claim_seed(self, settings: dict[str, Any], chosen: bool, trusted: bool) -> None:
        """A tournament's seed fixes every deal, and it is public once the tournament is
        over, so an earlier tournament's seed would replay deals someone has seen: refused
        (409 ``seed-reused``) unless ``trusted`` (the organizer's own comparisons). The
        set of used seeds is permanent (``{p}tours:seeds``: one member per tournament, no
        expiry). A random seed that happens to be used already is drawn again."""
        for _ in range(ATTEMPTS):
            if self.r.sadd(self.seeds_key, settings["seed"]) or trusted:
                return
            if chosen:
                raise Problem("seed-reused", f"seed {settings['seed']} was used by an earlier "
                              "tournament, whose deals are public once it is over; omit it "
                              "(random) or create the tournament with trusted: true",
                              errors={"seed": ["used by an earlier tournament"]})
            settings["seed"] = secrets.randbelow(MAX_SEED + 1)
        raise Problem("service-unavailable", "no unused seed found; retry",
                      headers={"Retry-After": "1"})

    @staticmethod
    def _add_round(doc: dict[str, Any], pairs: list[tuple[str, str]], byes: list[str]) -> None:
        round_no = len(doc["rounds"]) + 1
        slots = round_slots(doc["settings"], round_no, pairs)
        first = sum(len(r["slots"]) for r in doc["rounds"])
        for k, slot in enumerate(slots, first):
            slot["slot"] = k
        doc["rounds"].append({"round": round_no, "byes": byes, "slots": slots})

    # --- advancing --------------------------------------------------------------------------

    def _game_finished(self, game: Game) -> None:
        if game.meta.get("tournament"):  # the hook hears ladder games too
            self.advance(game.meta["tournament"]["id"])

    def advance_all(self) -> None:
        """Re-check every open tournament (the sweeper's safety net)."""
        for raw in self.r.smembers(self.running_key):
            try:
                self.advance(raw.decode())
            except Exception:
                log.exception("advancing tournament %s failed", raw)

    def advance(self, tid: str) -> int:
        """Record finished games, close rounds, pair the next, start games up to
        ``parallel``: one optimistic transaction (see the module docstring). Returns the
        number of games created."""
        for _ in range(ATTEMPTS):
            try:
                with self.r.pipeline(transaction=True) as pipe:
                    pipe.watch(self.key(tid), self.lb_key)
                    raw = pipe.get(self.key(tid))
                    if raw is None:
                        return 0
                    doc = json.loads(raw)
                    if not control.steps(doc):
                        pipe.unwatch()
                        self.r.srem(self.running_key, tid)
                        return 0
                    return self._step(pipe, doc)
            except redis.WatchError:
                time.sleep(random.uniform(0.001, 0.01))
        log.warning("tournament %s: too much contention; the sweeper will retry", tid)
        return 0

    def _step(self, pipe: Any, doc: dict[str, Any]) -> int:
        # 0. who left, games of leavers (or of a cancelled tournament) ended: see
        # service.arena.tournament_control
        changed = control.before_step(self, doc)
        # 1. record the live games that have finished, a whole deal at a time: a deal's
        # games are recorded (and its embargo lifted) once every table of it has finished
        over: dict[int, Game] = {}
        playing = 0  # live games not yet over: what `parallel` limits
        for rnd in doc["rounds"]:
            for slot in rnd["slots"]:
                if slot["status"] != LIVE:
                    continue
                game = self.store.get_game(slot["game"])
                if game is None or game.status != FINISHED:
                    playing += 1
                else:
                    over[slot["slot"]] = game
        lb_updates: dict[str, dict[str, Any]] = {}
        lifted: list[str] = []
        for rnd in doc["rounds"]:
            for slot in rnd["slots"]:
                if slot["slot"] not in over or slot["status"] == DONE:
                    continue
                tables = tables_of(rnd, slot)
                if not all(s["status"] in (DONE, control.VOID) or s["slot"] in over
                           for s in tables):
                    continue  # another table still plays (or will play) this deal
                for s in tables:
                    if s["status"] not in (DONE, control.VOID):
                        self._record(pipe, doc, s, game_result(over[s["slot"]]), lb_updates)
                if len(tables) > 1:
                    lifted.append(embargo_id(doc, slot))
                changed = True
        self._rate_in_slot_order(pipe, doc, lb_updates)  # forfeits made by step 0
        if doc.get("closing") and not any(s["status"] == LIVE for r in doc["rounds"]
                                          for s in r["slots"]):
            lifted = control.close_out(doc)  # a cancel's last pass: no deal stays embargoed
            changed = True
        # 2. close complete rounds; pair the next Swiss round; finish
        if doc["status"] != control.CANCELLED:
            changed |= self._close_rounds(doc)
        # 3. start pending games of the current round, up to `parallel` live
        new_games = []
        if control.schedules(doc):
            live_n = playing
            current = next(r for r in doc["rounds"]
                           if any(s["status"] != DONE for s in r["slots"]))
            for slot in current["slots"]:
                if live_n >= doc["settings"]["parallel"]:
                    break
                if slot["status"] == PENDING:
                    new_games.append(slot)
                    live_n += 1
        if not changed and not new_games:
            pipe.unwatch()
            return 0
        pipe.multi()
        if lifted:
            pipe.srem(embargo_key(self.p), *lifted)
        born_over = False
        started = []
        for slot in new_games:
            game = self._add_game(pipe, doc, slot)
            slot["game"] = game.id
            slot["status"] = LIVE
            # a first kick can end a game at once (R22): nobody will act to finish it
            born_over |= game.status != ACTIVE
            if game.status == ACTIVE:
                started.append(game)
        pipe.set(self.key(doc["id"]), json.dumps(doc, separators=(",", ":")))
        for bot, rating in lb_updates.items():
            pipe.hset(self.lb_key, bot, json.dumps(rating, separators=(",", ":")))
        if not control.steps(doc):
            pipe.srem(self.running_key, doc["id"])
        pipe.execute()
        for game in started:  # the step's transaction held: these games are under way
            self.arena.announce_status(game, ACTIVE)
        if born_over:
            return len(new_games) + self.advance(doc["id"])
        return len(new_games)

    def _record(self, pipe: Any, doc: dict[str, Any], slot: dict[str, Any],
                result: dict[str, Any] | None, lb_updates: dict[str, dict[str, Any]]
                ) -> None:
        slot["status"] = DONE if result is not None else control.VOID
        slot["result"] = result
        self._rate_in_slot_order(pipe, doc, lb_updates)

    def _rate_in_slot_order(self, pipe: Any, doc: dict[str, Any],
                            lb_updates: dict[str, dict[str, Any]]) -> None:
        """Apply to the ratings every recorded result whose earlier slots all have been:
        ratings take the games in slot order, whichever table finished first, so they
        are a function of the results alone. Each game keeps its place in that order
        (``recorded``) and both entrants' ratings before and after it (``rating``)."""
        step: dict[str, Any] = {}  # owners and credited entrants, read once per pass
        for rnd in doc["rounds"]:
            for slot in rnd["slots"]:
                if slot.get("recorded") is not None or slot["status"] == control.VOID:
                    continue  # rated already, or never will be
                if slot["status"] != DONE:
                    return  # a later result waits for this one
                doc["recorded"] += 1
                slot["recorded"] = doc["recorded"]
                if not step:
                    step["owners"] = self._owners([e["bot_id"] for e in doc["entrants"]])
                    step["credited"] = control.credited(doc)
                self._rate(pipe, doc, slot, lb_updates, step["owners"], step["credited"])

    def _rate(self, pipe: Any, doc: dict[str, Any], slot: dict[str, Any],
              lb_updates: dict[str, dict[str, Any]], owners: Mapping[str, str],
              credited: AbstractSet[str]) -> None:
        """One recorded game into the tournament's ratings and the leaderboard, under the
        rules of docs/ratings.md: a forfeit is a rated loss for the side that forfeited
        (a win for its opponent only when credited); a game both forfeited, or between
        bots of one owner, is not rated (``unrated`` says why)."""
        at = time.time()
        plan = rating_plan(doc, slot, owners, credited)
        if plan is None:
            return
        lb = {b: self._lb_entry(pipe, b, lb_updates) for b in slot["teams"]}
        winner, loser, winner_moves = plan
        rates = doc["ratings"]
        before = [dict(rates[b]) for b in slot["teams"]]
        new_w, new_l = ratings.rate(rates[winner], rates[loser])
        if winner_moves:
            rates[winner] = new_w
        rates[loser] = new_l
        slot["rating"] = [[r["mu"], r["sigma"], rates[b]["mu"], rates[b]["sigma"]]
                          for b, r in zip(slot["teams"], before, strict=True)]
        slot["rated_at"] = at
        lb_updates[winner], lb_updates[loser], _ = ratings.rate_published(
            lb[winner], lb[loser], (owners[winner], owners[loser]), at, winner_moves)

    def _lb_entry(self, pipe: Any, bot: str, lb_updates: dict[str, dict[str, Any]]
                  ) -> dict[str, Any]:
        if bot not in lb_updates:
            raw = pipe.hget(self.lb_key, bot)  # immediate: the pipeline is watching
            lb_updates[bot] = json.loads(raw) if raw else ratings.blank()
        return lb_updates[bot]

    def _owners(self, bots: Sequence[str]) -> dict[str, str]:
        """Each bot's owner (read from the bot hashes, outside the watched transaction:
        another slot in a cluster, and an owner never changes)."""
        batch = self.store.r.pipeline(transaction=False)
        for b in bots:
            batch.hget(self.store.keys.bot(b), "owner")
        return {b: ratings.owner_of({"owner": o}, b)
                for b, o in zip(bots, batch.execute(), strict=True)}

    def _close_rounds(self, doc: dict[str, Any]) -> bool:
        changed = False
        while True:
            snapped = {h["round"] for h in doc["history"]}
            for rnd in doc["rounds"]:
                if any(s["status"] != DONE for s in rnd["slots"]):
                    return changed
                if rnd["round"] not in snapped:
                    if doc["settings"]["format"] == KNOCKOUT and knockout.add_tiebreaks(doc,
                                                                                        rnd):
                        return True  # a level match plays a tiebreak pair first
                    doc["history"].append({
                        "round": rnd["round"],
                        "ratings": {b: ratings.shown(r)
                                    for b, r in ratings_after(doc, rnd["round"]).items()},
                    })
                    changed = True
            # every round so far is complete
            settings = doc["settings"]
            if settings["format"] == SWISS and len(doc["rounds"]) < settings["rounds"]:
                table = standings(doc)
                met: dict[frozenset[str], list[int]] = {}
                for r in doc["rounds"]:
                    for pair in {frozenset(s["entrants"]) for s in r["slots"]}:
                        met.setdefault(pair, []).append(r["round"])
                byes = {row["bot_id"]: row["byes"] for row in table}
                still = [row["bot_id"] for row in table if row["bot_id"] not in doc.get("out", {})]
                if len(still) >= 2:  # entrants that left are not paired again
                    self._add_round(doc, *swiss_pairs(still, met, byes))
                    changed = True
                    continue
            lines = knockout.next_lines(doc) if settings["format"] == KNOCKOUT else None
            if lines is not None:  # the winners, in their places in the bracket
                self._add_round(doc, *knockout.pairs_of(lines))
                doc["rounds"][-1]["lines"] = lines
                changed = True
                continue
            doc["status"] = FINISHED
            doc["finished"] = int(time.time())
            return True

    def _add_game(self, pipe: Any, doc: dict[str, Any], slot: dict[str, Any]) -> Game:
        settings = doc["settings"]
        players = settings["players"]
        a, b = slot["teams"]
        seats: list[str | None] = [a, b] if players == 2 else [a, b, a, b]
        names = {e["bot_id"]: e["bot_name"] for e in doc["entrants"]}
        variants = Variants.from_dict(settings["variants"])
        state, _ = new_game(players, slot["seed"], variants)
        status = status_of(state, seats)
        meta: dict[str, Any] = {
            "players": players,
            "seed": slot["seed"],
            "variants": settings["variants"],
            "seats": seats,
            "names": [names[s] for s in seats if s],
            "created": int(time.time()),
            "creator": None,
            "tournament": {"id": doc["id"], "slot": slot["slot"], "round": slot["round"],
                           **({"analyse": True} if doc["settings"].get("analyse") else {})},
        }
        deals.seal(meta, chosen=False)  # derived from the tournament's seed: committed to
        rnd = doc["rounds"][slot["round"] - 1]
        if len(tables_of(rnd, slot)) > 1:
            # its cards are dealt at another table too: embargoed until all have finished
            meta["embargo"] = embargo_id(doc, slot)
            pipe.sadd(embargo_key(self.p), meta["embargo"])
        if settings.get("move_limit"):
            meta["move_limit"] = settings["move_limit"]
        return self.store.add_game(pipe, meta, state, status, turn_bot(state, seats, status),
                                   deadline_for(meta, state, status))

    # --- reading ----------------------------------------------------------------------------

    def doc(self, tid: str) -> dict[str, Any]:
        raw = self.r.get(self.key(tid))
        if raw is None:
            raise Problem("not-found", "no such tournament")
        return json.loads(raw)

    @staticmethod
    def _summary(doc: dict[str, Any]) -> dict[str, Any]:
        settings = doc["settings"]
        slots = [s for r in doc["rounds"] for s in r["slots"]]
        shown = {k: v for k, v in settings.items() if k != "seed"}
        if doc["status"] in (FINISHED, control.CANCELLED) and not doc.get("closing"):
            shown["seed"] = settings["seed"]  # it fixes every deal: secret until the end
        return {
            "id": doc["id"],
            "name": doc["name"],
            "status": doc["status"],
            "created": doc["created"],
            "finished": doc["finished"],
            "settings": shown,
            "entrants": control.entrants_out(doc),
            "warnings": doc.get("warnings", []),
            "progress": {
                "games_planned": planned_games(settings, len(doc["entrants"]))
                + knockout.tiebreak_games(doc),
                "games_done": sum(1 for s in slots if s["status"] == DONE),
                "games_live": sum(1 for s in slots if s["status"] == LIVE),
                "rounds_planned": settings["rounds"],
                "rounds_done": len(doc["history"]),
            },
        }

    def detail(self, tid: str) -> dict[str, Any]:
        return self._detail(self.doc(tid))

    def _detail(self, doc: dict[str, Any]) -> dict[str, Any]:
        out = self._summary(doc)
        out["bracket"] = knockout.bracket(doc) if "knockout" in doc else None
        out["rounds"] = [
            {
                "round": rnd["round"],
                "byes": rnd["byes"],
                "games": [self._slot_out(s) for s in rnd["slots"]],
            }
            for rnd in doc["rounds"]
        ]
        control.credit(doc, out["rounds"])
        return out

    @staticmethod
    def _slot_out(slot: dict[str, Any]) -> dict[str, Any]:
        res = slot["result"]
        return {
            "slot": slot["slot"],
            "pairing": slot["pairing"],
            "deal": slot["deal"],
            "teams": slot["teams"],
            "recorded": slot.get("recorded"),
            "game_id": slot["game"],
            "status": slot["status"],
            # a game's seed fixes its cards: shown only once the game is over (a forfeit
            # never played, or a void game never started, was dealt no cards here)
            "seed": slot["seed"] if res is not None and slot["game"] else None,
            "winner": slot["teams"][res["winner"]] if res and res["winner"] is not None
            else None,
            "forfeit": [slot["teams"][t] for t in res["forfeit"]]
            if res and "forfeit" in res else None,
            "scores": res["scores"] if res else None,
            "hands_won": res["hands_won"] if res else None,
            "timeouts": res["timeouts"] if res else None,
            "rating": [
                {"bot_id": bot, "before": ratings.shown({"mu": m0, "sigma": s0}),
                 "after": ratings.shown({"mu": m1, "sigma": s1})}
                for bot, (m0, s0, m1, s1) in zip(slot["teams"], slot["rating"], strict=True)
            ] if slot.get("rating") else None,
        }

    def list(self, limit: int, cursor: int | None) -> dict[str, Any]:
        hi = f"({cursor}" if cursor is not None else "+inf"
        rows = self.r.zrevrangebyscore(f"{self.p}tours:all", hi, "-inf", start=0,
                                       num=limit + 1, withscores=True)
        more = len(rows) > limit
        rows = rows[:limit]
        raws = self.r.mget([self.key(t.decode()) for t, _ in rows]) if rows else []
        items = [self._summary(json.loads(raw)) for raw in raws if raw]
        return {"items": items, "next_cursor": int(rows[-1][1]) if more and rows else None}

    def standings(self, tid: str) -> dict[str, Any]:
        return self._standings(self.doc(tid))

    @staticmethod
    def _standings(doc: dict[str, Any]) -> dict[str, Any]:
        return {
            "tournament_id": doc["id"],
            "status": doc["status"],
            "rounds_done": len(doc["history"]),
            "items": standings(doc),
            "history": [
                {"round": h["round"],
                 "ratings": [{"bot_id": b, **r} for b, r in h["ratings"].items()]}
                for h in doc["history"]
            ],
        }

    def export(self, tid: str) -> dict[str, Any]:
        """The whole tournament in one answer, for archives and spreadsheets: the summary,
        the standings, every game (flat, with its round and its record's path) and the
        rating history. Built from one read of the document by the same code as the
        detail and the standings, so it shows exactly what they show — and hides what
        they hide (a game's seed and result while any table of its deal is live)."""
        doc = self.doc(tid)
        out = self._detail(doc)
        table = self._standings(doc)
        rounds = out.pop("rounds")
        out["standings"] = table["items"]
        out["games"] = [
            {"round": rnd["round"], **game,
             "record": f"/games/{game['game_id']}/record" if game["game_id"] else None}
            for rnd in rounds for game in rnd["games"]
        ]
        out["byes"] = [{"round": rnd["round"], "bot_id": bot}
                       for rnd in rounds for bot in rnd["byes"]]
        out["history"] = table["history"]
        return out

    def leaderboard(self) -> dict[str, Any]:
        """Every bot with a leaderboard entry, ranked ones first by ordinal (then bot id);
        a provisional bot (too few rated games, or against too few distinct owners) is
        listed after them with ``rank`` null; a suspended bot is left off (docs/ratings.md)."""
        raw = {k.decode(): json.loads(v) for k, v in self.r.hgetall(self.lb_key).items()}
        return {"items": published_rows(self.store, raw, self.provisional_games,
                                        self.provisional_owners)}


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
