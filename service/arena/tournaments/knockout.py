"""Knockout tournaments (issue 16): single elimination, seeded by rating, byes to the top.

A knockout is an ordinary tournament document (``service.arena.tournaments.service``: one JSON
document, every change one optimistic transaction, games created in slot order, ratings in
slot order, duplicate deals embargoed until every table of a deal has finished); this module
only decides *who meets whom* and *who goes through*. It adds no Redis key: the bracket
lives in the document (``doc["knockout"]``: the size and the seeds; each round's ``lines``:
who stands on each line of the bracket in that round), so it changes in the same
transaction as the games, and everything else is derived from the recorded results.

**Seeding**, fixed at creation: entrants on the leaderboard (``{p}leaderboard``, rated over
every tournament game so far) first, by their rating ordinal (mu − 3 sigma), higher first;
then unrated entrants (no leaderboard entry); ties — equal ordinals, and all unrated
entrants — in the order the ``entrants`` list gives them (so an organizer seeds a fresh
field by listing it). Seed 1 is the best.

**The bracket** has ``size`` lines, the smallest power of two that holds every entrant,
laid out the standard way (1 v size, 2 v size − 1, …, arranged so that seeds 1 and 2 can
meet only in the final, 1–4 only in the semifinals, and so on). The ``size − entrants``
missing lines are byes, which fall to the top seeds: seed k has a bye in round 1 when
``size − k`` ≥ ``entrants``. A bye goes through without playing (in the standings: a bye,
counted as a match won, once round 1 is complete). There are ``log2(size)`` rounds.

**A match** is ``games_per_pairing`` games between the two entrants (2 or 4 players a
table: in a 4-player game an entrant holds both seats of its team, as in every format, so a
knockout is always entrant against entrant; no partnerships of different entrants). Its
deals follow the tournament's deal mode (``tournaments.round_slots``): with duplicate deals
(4 entrants or more) deal k of a round is played at every table of the round, so nobody
plays a deal twice and the deal is embargoed until every one of its tables has finished; a
round of one table (a final) plays each deal once. With ``trusted`` the deals come in twins
inside a match — each deal played twice by the same two entrants, the teams swapped, so
both sides play every deal from both seats (embargoed from everyone else until both twins
finish). At each table the entrants take turns on team 0, game by game.

**Who goes through**, decided once every game of the match is recorded (results show only
when every table of their deal has finished, so no decision rests on an embargoed result):

1. more games won in the match;
2. level: more game points scored in the match's games (final scores, summed);
3. still level: a *tiebreak pair* — two more games at that table, one more deal each side
   on team 0 (with trusted twins: one more deal, played from both seats; with duplicate
   deals, tied tables of one round share their tiebreak deals) — and 1. and 2. are
   applied again over all the match's games; at most ``TIEBREAK_PAIRS`` pairs
   (``TIEBREAK_GAMES`` games);
4. still level after them: the higher seed (the smaller seed number).

The next round is paired when every match of the round is decided, the winners keeping
their places in the bracket.

**Forfeits** (``service.arena.tournaments.control``): a match in which an entrant forfeited
a game (it withdrew, was a no-show or was disqualified) goes to the other entrant
(``decided_by`` ``forfeit``); when both forfeited, to the higher seed, whose next match is
then forfeited in turn. A bracket needs someone on every line, so here a forfeit's winner
goes through even if it has not moved yet (it wins no game by it in the standings).

**Standings** (``standings``): placement by the round reached — the champion, then the
runner-up, then the losers of each earlier round, later rounds first; entrants knocked out
in the same round share a place (``place``: e.g. ``"3-4"``, ``"5-8"``; null while still
in) and are ordered among themselves: those still in the tournament before those that left
it (tournament_control), then by matchpoints, games won, point difference, rating
ordinal (higher first), then bot id. ``score`` is the matches won (a bye counts as one).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

KNOCKOUT = "knockout"
TIEBREAK_PAIRS = 2  # at most this many tiebreak pairs per match, then the higher seed
TIEBREAK_GAMES = 2 * TIEBREAK_PAIRS
PENDING, LIVE, DONE = "pending", "live", "done"


# --- the bracket (pure) ---------------------------------------------------------------------


def bracket_size(n: int) -> int:
    """The smallest power of two that holds ``n`` entrants."""
    return 1 << max(0, math.ceil(math.log2(n)))


def rounds_for(n: int) -> int:
    return max(1, bracket_size(n).bit_length() - 1)


def bracket_order(size: int) -> list[int]:
    """Seed numbers (1-based) line by line: 1, size, …, so that the top two seeds can meet
    only in the final, the top four only from the semifinals, and so on."""
    order = [1]
    while len(order) < size:
        mirror = 2 * len(order) + 1
        order = [x for s in order for x in (s, mirror - s)]
    return order


def seed_order(entrants: list[str], board: Mapping[str, Mapping[str, Any] | None]
               ) -> list[dict[str, Any]]:
    """The seeds, best first: rated entrants (a leaderboard entry) by ordinal, higher
    first, then unrated ones; ties in the order ``entrants`` gives (see the docstring).
    ``board``: bot id → its leaderboard entry (mu, sigma, ...), or None."""
    rows = []
    for i, bot in enumerate(entrants):
        entry = board.get(bot)
        ordinal = round(entry["mu"] - 3 * entry["sigma"], 4) if entry else None
        rows.append((0 if entry else 1, -(ordinal or 0.0), i, bot, ordinal))
    rows.sort()
    return [{"bot_id": bot, "ordinal": ordinal} for *_, bot, ordinal in rows]


def first_lines(seeds: list[dict[str, Any]]) -> list[str | None]:
    """Round 1's lines: the entrant on each line of the bracket, None for a bye's line."""
    n = len(seeds)
    return [seeds[s - 1]["bot_id"] if s <= n else None for s in bracket_order(bracket_size(n))]


def pairs_of(lines: list[str | None]) -> tuple[list[tuple[str, str]], list[str]]:
    """A round's lines as (the matches to play, in bracket order; the byes)."""
    pairs, byes = [], []
    for a, b in zip(lines[::2], lines[1::2], strict=True):
        if a is not None and b is not None:
            pairs.append((a, b))
        elif a is not None or b is not None:
            byes.append(a if a is not None else b)
    return pairs, byes  # type: ignore[return-value]


def start(doc: dict[str, Any], board: Mapping[str, Mapping[str, Any] | None]) -> list[str | None]:
    """Seed a new knockout document; returns round 1's lines."""
    seeds = seed_order([e["bot_id"] for e in doc["entrants"]], board)
    doc["knockout"] = {"size": bracket_size(len(seeds)), "seeds": seeds}
    return first_lines(seeds)


def seed_numbers(doc: dict[str, Any]) -> dict[str, int]:
    return {s["bot_id"]: i for i, s in enumerate(doc["knockout"]["seeds"], 1)}


# --- deciding a match (pure) ----------------------------------------------------------------


def match_games(rnd: dict[str, Any], pairing: int) -> list[dict[str, Any]]:
    return [s for s in rnd["slots"] if s["pairing"] == pairing]


def decide(slots: list[dict[str, Any]], seeds: Mapping[str, int]) -> dict[str, Any]:
    """A match from its games (slots): ``winner`` (None while undecided), ``decided_by``
    (``games``, ``points``, ``seed``; None), ``wins`` and ``points`` per entrant (in the
    order of the pairing's ``entrants``; recorded results only), ``tiebreak_games``
    (played or scheduled) and ``needs_tiebreak`` (level when every game is recorded, with
    fewer than ``TIEBREAK_PAIRS`` pairs played)."""
    a, b = slots[0]["entrants"]
    wins, points = {a: 0, b: 0}, {a: 0, b: 0}
    forfeited = set()
    for s in slots:
        res = s["result"]
        if res is None:
            continue
        if "forfeit" in res:  # an entrant that left (service.arena.tournaments.control)
            forfeited |= {s["teams"][t] for t in res["forfeit"]}
            continue
        for team, bot in enumerate(s["teams"]):
            wins[bot] += res["winner"] == team
            points[bot] += res["scores"][team]
    extra = sum(1 for s in slots if s.get("tiebreak"))
    out: dict[str, Any] = {"entrants": [a, b], "wins": [wins[a], wins[b]],
                           "points": [points[a], points[b]], "tiebreak_games": extra,
                           "winner": None, "decided_by": None, "needs_tiebreak": False}
    if any(s["result"] is None for s in slots):
        return out
    if forfeited:  # the entrant that did not forfeit goes through; both did: the higher seed
        stayed = [x for x in (a, b) if x not in forfeited] or [a, b]
        out.update(winner=min(stayed, key=lambda bot: seeds[bot]), decided_by="forfeit")
    elif wins[a] != wins[b]:
        out.update(winner=a if wins[a] > wins[b] else b, decided_by="games")
    elif points[a] != points[b]:
        out.update(winner=a if points[a] > points[b] else b, decided_by="points")
    elif extra < TIEBREAK_GAMES:
        out["needs_tiebreak"] = True
    else:
        out.update(winner=min((a, b), key=lambda bot: seeds[bot]), decided_by="seed")
    return out


def round_winners(doc: dict[str, Any], rnd: dict[str, Any]) -> list[str | None]:
    """The entrant going through from each match of the round, in bracket order (None
    where undecided)."""
    seeds = seed_numbers(doc)
    pairing = 0
    out: list[str | None] = []
    lines = rnd["lines"]
    for a, b in zip(lines[::2], lines[1::2], strict=True):
        if a is None or b is None:
            out.append(a if a is not None else b)
            continue
        out.append(decide(match_games(rnd, pairing), seeds)["winner"])
        pairing += 1
    return out


# --- hooks called by tournaments.Tournaments -------------------------------------------------


def add_tiebreaks(doc: dict[str, Any], rnd: dict[str, Any]) -> bool:
    """Every game of ``rnd`` recorded: give each level match (see the docstring) one
    tiebreak pair, at its own table, appended to the round. Returns whether any was added
    (the round is then not complete)."""
    from service.arena.tournaments.pairing import TABLES, TWINS, deal_mode, deal_seed

    seeds = seed_numbers(doc)
    pairings = sorted({s["pairing"] for s in rnd["slots"]})
    level = [p for p in pairings if decide(match_games(rnd, p), seeds)["needs_tiebreak"]]
    if not level:
        return False
    settings = doc["settings"]
    mode = deal_mode(settings)
    base = max(s["deal"] for s in rnd["slots"]) + 1
    slot_no = sum(len(r["slots"]) for r in doc["rounds"])
    for t, p in enumerate(level):
        games = match_games(rnd, p)
        a, b = games[0]["entrants"]
        k0 = len(games)  # continues the turns on team 0 at this table
        for j in range(2):
            if mode == TABLES:
                deal = base + j  # shared by every level table of this round
            elif mode == TWINS:
                deal = base + t  # one deal, from both seats
            else:
                deal = base + 2 * t + j
            k = k0 + j
            rnd["slots"].append({
                "round": rnd["round"], "pairing": p, "entrants": [a, b], "deal": deal,
                "seed": deal_seed(settings["seed"], rnd["round"], deal),
                "teams": [a, b] if (k + rnd["round"] - 1) % 2 == 0 else [b, a],
                "game": None, "status": PENDING, "result": None, "recorded": None,
                "slot": slot_no, "tiebreak": True,
            })
            slot_no += 1
    return True


def next_lines(doc: dict[str, Any]) -> list[str | None] | None:
    """The last round decided: the next round's lines, or None when it was the final."""
    winners = round_winners(doc, doc["rounds"][-1])
    return winners if len(winners) > 1 else None


def tiebreak_games(doc: dict[str, Any]) -> int:
    """Tiebreak games scheduled so far (planned on top of the regular ones)."""
    return sum(1 for r in doc["rounds"] for s in r["slots"] if s.get("tiebreak"))


def round_name(matches: int) -> str:
    return {1: "final", 2: "semifinals", 4: "quarterfinals"}.get(matches,
                                                                  f"round of {2 * matches}")


def bracket(doc: dict[str, Any]) -> dict[str, Any]:
    """The bracket as the API shows it: every round (those to come too), every match with
    its entrants and seeds, games, recorded score, winner and why."""
    ko = doc["knockout"]
    seeds = seed_numbers(doc)
    size = ko["size"]
    total = rounds_for(len(ko["seeds"]))
    played = {r["round"]: r for r in doc["rounds"]}
    lines: list[str | None] = first_lines(ko["seeds"])
    out_rounds = []
    champion = None
    for no in range(1, total + 1):
        rnd = played.get(no)
        if rnd is not None:
            lines = rnd["lines"]
        matches, winners = [], []
        pairing = 0
        for m, (a, b) in enumerate(zip(lines[::2], lines[1::2], strict=True)):
            match: dict[str, Any] = {
                "match": m, "entrants": [a, b],
                "seeds": [seeds.get(a) if a else None, seeds.get(b) if b else None],
                "pairing": None, "status": "waiting", "wins": None, "points": None,
                "tiebreak_games": 0, "winner": None, "decided_by": None, "games": []}
            is_bye = no == 1 and (a is None) != (b is None)
            if is_bye:
                match.update(status="bye", winner=a or b, decided_by="bye")
            elif rnd is not None and a is not None and b is not None:
                games = match_games(rnd, pairing)
                d = decide(games, seeds)
                match.update(pairing=pairing, wins=d["wins"], points=d["points"],
                             tiebreak_games=d["tiebreak_games"], winner=d["winner"],
                             decided_by=d["decided_by"])
                match["games"] = [
                    {"slot": s["slot"], "game_id": s["game"], "status": s["status"],
                     "tiebreak": bool(s.get("tiebreak")),
                     "winner": s["teams"][s["result"]["winner"]]
                     if s["result"] and s["result"]["winner"] is not None else None}
                    for s in games]
                match["status"] = ("done" if d["winner"] else
                                   "void" if any(s["status"] == "void" for s in games)
                                   else "pending" if all(s["status"] == PENDING for s in games)
                                   else "live")
                pairing += 1
            matches.append(match)
            winners.append(match["winner"])
        out_rounds.append({"round": no, "name": round_name(len(matches)), "matches": matches})
        lines = winners
        if no == total:
            champion = winners[0]
    return {
        "size": size,
        "seeds": [{"seed": i, "bot_id": s["bot_id"], "ordinal": s["ordinal"]}
                  for i, s in enumerate(ko["seeds"], 1)],
        "tiebreak_pairs": TIEBREAK_PAIRS,
        "champion": champion,
        "rounds": out_rounds,
    }


def standings(doc: dict[str, Any], rows: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Order the generic standings rows (see the docstring): placement by round reached.
    ``rows``' counters stay as computed; ``score``, ``place`` and ``eliminated`` are set."""
    seeds = seed_numbers(doc)
    n = len(seeds)
    size = doc["knockout"]["size"]
    total = rounds_for(n)
    won = dict.fromkeys(rows, 0)
    out_in: dict[str, int | None] = dict.fromkeys(rows)
    for rnd in doc["rounds"]:
        pairings = sorted({s["pairing"] for s in rnd["slots"]})
        for p in pairings:
            d = decide(match_games(rnd, p), seeds)
            if d["winner"] is None:
                continue
            won[d["winner"]] += 1
            loser = next(x for x in d["entrants"] if x != d["winner"])
            out_in[loser] = rnd["round"]
    # entrants before round r: n, then size / 2, size / 4, ...; its losers share the places
    # below those still in after it
    places: dict[int, str] = {}
    before = n
    for r in range(1, total + 1):
        after = size >> r
        lo, hi = after + 1, before
        places[r] = str(lo) if lo == hi else f"{lo}-{hi}"
        before = after
    finished = doc["status"] == "finished"
    for bot, row in rows.items():
        row["score"] = float(row["byes"] + won[bot])
        row["eliminated"] = out_in[bot]
        row["place"] = (places[out_in[bot]] if out_in[bot] is not None
                        else "1" if finished else None)
    out = sorted(rows.values(), key=lambda r: (
        -(r["eliminated"] or total + 1), r.get("status", "in") != "in",  # left: last of its
        -r["matchpoints"], -r["won"],
        -(r["points_for"] - r["points_against"]), -r["rating"]["ordinal"], r["bot_id"]))
    for i, row in enumerate(out, 1):
        row["rank"] = i
    return out
