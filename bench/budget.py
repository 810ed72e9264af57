"""What a search move loses to its sample budget: is a faster search a stronger one?

    python bench/budget.py [--reference 4000] [--samples 250,1000] [--move-time 0.1]
                           [--games 6] [--players 4] [--seed 1] [--jobs 1]

The search bot values each action by the mean of a few hundred sampled deals; with more
it would pick the action its own model prefers more often. This bench measures how much
that costs: positions come from games of the heuristic against itself; at every decision
of team 0 the search values each legal action with ``--reference`` samples (the model's
own best, nearly free of sampling noise), and then chooses again, on other samples, with
each budget of ``--samples`` (fixed counts) and ``--move-time`` (CPU seconds of the
deciding thread, as the strength bench gives it). A choice's loss is the reference value
of the reference's best action minus that of the action chosen. It is the model's own
view, not the truth of the deal (``bench/judge.py`` and ``bench/strength.py`` measure
that): it says how far more samples could take *this* search, and so whether making it
faster is worth the work.

Prints one JSON line: per budget the mean loss per decision (95% interval clustered by
game, as the judge's), by kind of decision, and for a time budget the samples it got.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import sys
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.judge import kind, summary
from clients.strategies import get_strategy
from clients.strategies.search import SearchStrategy
from service.engine import OVER, action_name, apply, legal_actions, new_game, parse_action
from service.engine.views import seat_view


def budgets(samples: list[int], move_time: float | None) -> list[str]:
    return [f"n{n}" for n in samples] + ([f"t{move_time:g}"] if move_time else [])


def searcher(budget: str, seed: int) -> SearchStrategy:
    if budget.startswith("n"):
        return SearchStrategy(seed=seed, simulations=int(budget[1:]))
    return SearchStrategy(seed=seed, move_time=float(budget[1:]), clock="cpu")


def budget_game(game: int, reference: int, names: list[str], seed: int,
                players: int) -> dict[str, dict[str, list]]:
    """For one heuristic game: ``losses``, per budget the (kind, loss) of each decision of
    team 0, and ``samples``, per budget the samples behind each choice."""
    driver = get_strategy("heuristic")
    state, _ = new_game(players, seed * 1_000_003 + game)
    out: dict[str, list[tuple]] = {b: [] for b in names}
    got: dict[str, list[int]] = {b: [] for b in names}
    n = 0
    while state.phase != OVER:
        legal = [action_name(x) for x in legal_actions(state)]
        view = seat_view(state, state.turn)
        if len(legal) > 1 and state.turn & 1 == 0:
            n += 1
            key = game * 10_000 + n
            ref = SearchStrategy(seed=key, simulations=reference).values(view, legal)
            top = max(ref[a].score for a in legal)
            for b in names:
                vals = searcher(b, key + 1).values(view, legal)
                chosen = max(legal, key=lambda a, v=vals: v[a].score)
                out[b].append((kind(state), top - ref[chosen].score))
                got[b].append(vals[chosen].samples)
        state, _ = apply(state, parse_action(driver.choose(view, legal)))
    return {"losses": out, "samples": got}


def report(games: list[dict], names: list[str]) -> dict[str, object]:
    out: dict[str, object] = {}
    for b in names:
        per_game = [g["losses"][b] for g in games]
        s = summary(per_game)
        by_kind: dict[str, list[float]] = {}
        for g in per_game:
            for k, loss in g:
                by_kind.setdefault(k, []).append(loss)
        samples = [x for g in games for x in g["samples"][b]]
        out[b] = {
            "decisions": s["decisions"],
            "loss_per_decision": s["mean_per_decision"],
            "loss_per_decision_ci95": s["mean_per_decision_ci95"],
            "by_kind": {k: {"decisions": len(v), "loss": round(sum(v) / len(v), 4)}
                        for k, v in sorted(by_kind.items())},
            "samples_median": statistics.median(samples) if samples else 0,
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--reference", type=int, default=4000, help="samples of the reference")
    parser.add_argument("--samples", default="250,1000", help="fixed budgets, e.g. 100,250,1000")
    parser.add_argument("--move-time", type=float, default=0.1,
                        help="a CPU-time budget too (seconds; 0: none)")
    parser.add_argument("--games", type=int, default=6, help="games to take positions from")
    parser.add_argument("--players", type=int, choices=(4, 2), default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=1, choices=(1, 2), help="processes (<= 2)")
    args = parser.parse_args()
    if args.games < 2:
        parser.error("--games must be at least 2 (the interval is clustered by game)")
    names = budgets([int(x) for x in args.samples.split(",") if x], args.move_time or None)
    work = partial(budget_game, reference=args.reference, names=names, seed=args.seed,
                   players=args.players)
    start = time.perf_counter()
    if args.jobs > 1:
        with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
            games = pool.map(work, range(args.games), chunksize=1)
    else:
        games = [work(g) for g in range(args.games)]
    print(json.dumps({
        "bench": "budget", "players": args.players, "reference": args.reference,
        "games": args.games, "budgets": report(games, names),
        "seconds": round(time.perf_counter() - start, 1),
    }))


if __name__ == "__main__":
    main()
