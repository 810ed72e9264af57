"""How big a tournament may be: the size rule, which the arena keeps when it plans a
tournament and the wire schema states and checks when one is created (so it lives below
both, in the arena)."""

from __future__ import annotations

import math
from typing import Any

MAX_ENTRANTS = 64
MAX_ROUNDS = 100  # swiss
MAX_GAMES_PER_PAIRING = 100
# A tournament is one JSON document, read and rewritten whole each time one of its games
# finishes and served whole by GET /tournaments/{id}: about 500 bytes a finished game with
# its result and rating change, so 1000 games keep it near 0.5 MB.
MAX_TOURNAMENT_GAMES = 1000
KNOCKOUT_TIEBREAK_GAMES = 4  # service.arena.tournaments.knockout.TIEBREAK_GAMES: at most, per match
SIZE_DOC = (
    f"Size limits: 2 to {MAX_ENTRANTS} entrants, 1 to {MAX_ROUNDS} Swiss rounds, 1 to "
    f"{MAX_GAMES_PER_PAIRING} games per pairing, and at most {MAX_TOURNAMENT_GAMES} games "
    "in all (round robin: entrants × (entrants − 1) / 2 × games_per_pairing; Swiss: rounds × "
    "floor(entrants / 2) × games_per_pairing; knockout: (entrants − 1) matches × "
    f"(games_per_pairing + {KNOCKOUT_TIEBREAK_GAMES}), counting every tiebreak game a match "
    "may need). A tournament over that total is refused (422) "
    "with the error under the fields sent that can bring it within the limit — rounds, "
    "games_per_pairing — each saying how far, or under entrants when only fewer entrants can"
)


def default_rounds(entrants: int) -> int:
    """A Swiss tournament's rounds when not given: enough to separate the entrants."""
    return max(1, math.ceil(math.log2(entrants)))


def tournament_games(fmt: str, entrants: int, rounds: int | None, games_per_pairing: int
                     ) -> int:
    """How many games a tournament may play (a bye is no game; a knockout's tiebreaks
    counted at their most)."""
    if fmt == "round_robin":
        return entrants * (entrants - 1) // 2 * games_per_pairing
    if fmt == "knockout":
        return (entrants - 1) * (games_per_pairing + KNOCKOUT_TIEBREAK_GAMES)
    return (rounds or default_rounds(entrants)) * (entrants // 2) * games_per_pairing


def size_errors(data: dict[str, Any], sent: Any = None) -> dict[str, list[str]]:
    """The total-size check of a tournament body, as ``errors`` (empty when it fits): see
    ``SIZE_DOC`` for which field an error is filed under (``sent``: the fields the request
    gave, default every one in ``data``)."""
    sent = data if sent is None else sent
    fmt, n = data.get("format"), len(data.get("entrants") or [])
    if fmt not in ("round_robin", "swiss", "knockout") or n < 2:
        return {}
    g, rounds = data.get("games_per_pairing", 2), data.get("rounds")
    total = tournament_games(fmt, n, rounds, g)
    if total <= MAX_TOURNAMENT_GAMES:
        return {}
    shown_rounds = rounds or default_rounds(n)
    how = (f"{n} entrants × {n - 1} / 2 pairings × {g} games per pairing" if fmt == "round_robin"
           else f"{n - 1} matches × ({g} games per pairing + {KNOCKOUT_TIEBREAK_GAMES} "
           f"tiebreak games at most)" if fmt == "knockout"
           else f"{shown_rounds} rounds × {n // 2} tables × {g} games per pairing")
    said = f"{total} games planned ({how}); at most {MAX_TOURNAMENT_GAMES} per tournament"
    errors: dict[str, list[str]] = {}
    tables = n * (n - 1) // 2 if fmt == "round_robin" else n // 2
    if "rounds" in sent and fmt == "swiss" and MAX_TOURNAMENT_GAMES // (tables * g) >= 1:
        errors["rounds"] = [f"{said}: at most {MAX_TOURNAMENT_GAMES // (tables * g)} rounds "
                            f"with {n} entrants and {g} games per pairing"]
    per_round = tables * (shown_rounds if fmt == "swiss" else 1)
    most_g = MAX_TOURNAMENT_GAMES // per_round
    if fmt == "knockout":
        most_g = MAX_TOURNAMENT_GAMES // (n - 1) - KNOCKOUT_TIEBREAK_GAMES
    if "games_per_pairing" in sent and most_g >= 1:
        errors["games_per_pairing"] = [
            f"{said}: at most {most_g} games per pairing with {n} "
            f"entrants" + (f" and {shown_rounds} rounds" if fmt == "swiss" else "")]
    if errors:
        return errors
    most = max((m for m in range(2, n)
                if tournament_games(fmt, m, rounds, g) <= MAX_TOURNAMENT_GAMES), default=None)
    if most is None:  # large rounds and games_per_pairing, both sent: either must shrink
        return {f: [f"{said}: fewer rounds or games per pairing"]
                for f in ("rounds", "games_per_pairing")}
    return {"entrants": [f"{said}: at most {most} entrants with {g} games per pairing"
                         + (f" and {rounds} rounds" if rounds else "")]}
