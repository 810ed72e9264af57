"""Tournament pairing and deals (pure): who meets whom in each round, which deal each
table plays, and how deals are shared between tables. ``service.arena.tournaments.service`` keeps
the tournament (its document, its transaction); it asks this module how to fill a round.

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
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from hashlib import shake_256
from typing import Any

from service.arena.core.problems import Problem
from service.engine.game import MAX_SEED

ROUND_ROBIN, SWISS, KNOCKOUT = "round_robin", "swiss", "knockout"
PENDING, LIVE, DONE = "pending", "live", "done"
TABLES, TWINS, SINGLE = "tables", "twins", "single"  # how deals are shared: deal_mode


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
    if settings["format"] == "arena":
        return 0  # the clock decides how many: those paired so far are counted
    return settings["rounds"] * (n // 2) * g
