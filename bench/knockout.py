"""The largest knockout the service accepts, offline: how big its document grows and what
reading it costs (the bracket and the standings are derived on every read, never stored).

64 entrants and the most games per pairing the size limit allows with every tiebreak game
counted (``service.http.tournaments.schemas.size_errors``: (64 − 1) × (11 + 4) ≤ 1000), made even
(10), so that a match can be level (with an odd number of games it cannot). Every match
is played out with made-up results in which every other match is level after its regular
games, and half of those after the first tiebreak pair too (the most tiebreak games a
plausible field needs), so the document reaches the size it would in the service. Then,
best of ``--repeat``: the time to build the bracket, the standings, and the JSON size of
the stored document and of ``GET /tournaments/{id}`` (its detail).

    python bench/knockout.py [--entrants 64] [--games 10] [--repeat 20]

Prints one JSON line: entrants, games, tiebreak_games, doc_bytes, detail_bytes,
bracket_ms, standings_ms.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

# the repository, in place of bench/ (whose http.py would hide the standard library's)
sys.path[0] = str(Path(__file__).resolve().parent.parent)

from service.arena.core import ratings  # noqa: E402
from service.arena.tournaments import knockout  # noqa: E402
from service.arena.tournaments.pairing import planned_games  # noqa: E402
from service.arena.tournaments.service import Tournaments  # noqa: E402
from service.arena.tournaments.standings import standings  # noqa: E402


def build(n: int, g: int) -> dict:
    """A finished knockout document of ``n`` entrants, as ``Tournaments._step`` leaves it."""
    entrants = [f"{i:012x}" for i in range(n)]
    doc = {"id": "bench", "name": "bench", "status": "running", "created": 0,
           "finished": None,
           "settings": {"format": "knockout", "players": 2, "games_per_pairing": g,
                        "duplicate": True, "trusted": False,
                        "rounds": knockout.rounds_for(n), "variants": {}, "move_limit": None,
                        "parallel": 8, "seed": 1},
           "entrants": [{"bot_id": b, "bot_name": f"bot {b}"} for b in entrants],
           "rounds": [], "ratings": {b: ratings.initial() for b in entrants},
           "history": [], "recorded": 0, "warnings": []}
    lines = knockout.start(doc, {})
    while True:
        Tournaments._add_round(doc, *knockout.pairs_of(lines))
        rnd = doc["rounds"][-1]
        rnd["lines"] = lines
        for tries in range(knockout.TIEBREAK_PAIRS + 1):
            for s in rnd["slots"]:
                if s["status"] == "done":
                    continue
                level = s["pairing"] % 2 == 0 and (tries == 0 or s["pairing"] % 4 == 0)
                # level: the entrant on team 0 wins 3-2 (each side holds team 0 as often)
                winner = 0 if level else int(s["teams"][0] != s["entrants"][0])
                s.update(status="done", game="%012x" % (s["slot"] + 1),
                         result={"winner": winner,
                                 "scores": [3, 2] if winner == 0 else [2, 3],
                                 "hands_won": [2, 1], "timeouts": [0, 0], "hands": 3})
                s["recorded"] = s["slot"] + 1
                a, b = s["teams"]
                w, lo = (a, b) if winner == 0 else (b, a)
                before = [dict(doc["ratings"][x]) for x in (a, b)]
                doc["ratings"][w], doc["ratings"][lo] = ratings.rate(doc["ratings"][w],
                                                                     doc["ratings"][lo])
                s["rating"] = [[r["mu"], r["sigma"], doc["ratings"][x]["mu"],
                                doc["ratings"][x]["sigma"]]
                               for x, r in zip((a, b), before, strict=True)]
            if not knockout.add_tiebreaks(doc, rnd):
                break
        doc["history"].append({"round": rnd["round"], "ratings": {
            b: ratings.shown(r) for b, r in doc["ratings"].items()}})
        lines = knockout.next_lines(doc)
        if lines is None:
            break
    doc["status"] = "finished"
    return doc


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times) * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--entrants", type=int, default=64)
    ap.add_argument("--games", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    doc = build(args.entrants, args.games)
    detail = Tournaments._detail(Tournaments.__new__(Tournaments), doc)
    slots = [s for r in doc["rounds"] for s in r["slots"]]
    print(json.dumps({
        "entrants": args.entrants,
        "games": len(slots),
        "regular_games": planned_games(doc["settings"], args.entrants),
        "tiebreak_games": knockout.tiebreak_games(doc),
        "champion_decided": knockout.bracket(doc)["champion"] is not None,
        "doc_bytes": len(json.dumps(doc, separators=(",", ":"))),
        "detail_bytes": len(json.dumps(detail, separators=(",", ":"))),
        "bracket_ms": round(best(lambda: knockout.bracket(doc), args.repeat), 3),
        "standings_ms": round(best(lambda: standings(doc), args.repeat), 3),
    }))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
