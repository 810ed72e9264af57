"""Two strategies judged decision by decision: far fewer games than win rates need.

Win rates separate two bots only over hundreds of games (600 games give +-0.04), because
the cards decide most games. This bench removes the cards from the comparison: positions
come from games of the heuristic against itself; at each decision of one team, both
strategies choose from the same seat view; where they disagree, each choice is valued on
the game's *true* deal (the hidden cards and the stock as they really are) by playing the
hand out from it with the search bot's open-handed rollout policy, a few times with a
little randomness, the same rollouts for both choices. Averaged over the positions, the
difference is how much better one strategy's decisions are, in points of the hand.

It measured, for example (``--seed 1``): search over heuristic at 100 samples a move,
200 games, 13,497 decisions, 5,828 of them different: +0.026 [0.005, 0.047] points a
decision, most of it from standing where the heuristic begs (209 decisions, +0.95 each,
R8) and giving one where it runs (23, +1.55, R9), the card play +0.01-0.05 a differing
card; and search at 100 samples over 25: +0.033 [0.002, 0.064] in 60 games (36 s).
Inference from the bidding and the cards played (issue 25), ``--a search@100 --b
'search@100~infer=0,infer_plays=0' --games 10``: 4 players +0.023 [-0.101, 0.147] points
a decision (216 of 748 differ; leads +0.43 each), 2 players +0.034 [-0.020, 0.087] (82 of
435; leads +0.29), 878 s on a heavily loaded machine.
The valuation shares the search bot's rollout policy, so it favours choices that policy
likes: use it to compare variants of one bot, and confirm a change with
``bench/strength.py``.

    python bench/judge.py --a search --b heuristic [--games 200] [--simulations 100]
                          [--players 4,2] [--seed 1] [--jobs 1]

A strategy is a built-in name or ``module:Class``; ``name@N`` gives a search-like bot N
samples a move instead of ``--simulations``, and ``~key=value,...`` options
(``search@200~infer=0``). Search bots get a fixed number of samples, not a time budget,
so the figures do not move with the machine's load. Positions come from 4-player and
2-player games, reported apart. Prints one JSON line: per table size, decisions, how many
differed, the mean difference per decision (A minus B) with a 95% interval clustered by
game, and the same by kind of decision.
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import random
import sys
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.strength import Z95, parse_spec
from clients.strategies import Strategy, get_strategy
from clients.strategies.playout import rollout
from service.engine import (
    OVER,
    PLAY,
    State,
    action_name,
    apply,
    legal_actions,
    new_game,
    parse_action,
)
from service.engine.views import seat_view

ROLLOUTS = 4  # rollouts a choice is valued on
EPSILON = 0.15  # their share of random cards, so one lucky line does not decide


def make(spec: str, simulations: int, seed: int) -> Strategy:
    spec, options = parse_spec(spec)
    name, _, n = spec.partition("@")
    if name in ("random", "heuristic") and not n:
        return get_strategy(name, **({"seed": seed} if name == "random" else {}), **options)
    return get_strategy(name, seed=seed, simulations=int(n) if n else simulations, **options)


def value(state: State, action: int, seed: int) -> float:
    """The hand's point margin for the mover's team after ``action``, on the true deal."""
    rng = random.Random(seed)
    team = state.turn & 1
    total = 0.0
    for _ in range(ROLLOUTS):
        after, _ = apply(state, action, None, False)
        total += rollout(after, team, rng, EPSILON)
    return total / ROLLOUTS


def kind(state: State) -> str:
    """The kind of decision: the phase, and for a card its place in the trick."""
    if state.phase != PLAY:
        return state.phase
    return f"play, card {len(state.trick) + 1} of the trick"


def judge_game(
    game: int, a: str, b: str, simulations: int, seed: int, players: int = 4
) -> list[tuple]:
    """(kind, A's value minus B's, or None where they agree) for one team's decisions."""
    driver = get_strategy("heuristic")
    state, _ = new_game(players, seed * 1_000_003 + game)
    judged_team = game & 1
    out: list[tuple] = []
    n = 0
    while state.phase != OVER:
        legal = [action_name(x) for x in legal_actions(state)]
        view = seat_view(state, state.turn)
        if len(legal) > 1 and state.turn & 1 == judged_team:
            n += 1
            key = game * 10_000 + n
            choice_a = make(a, simulations, key).choose(view, legal)
            choice_b = make(b, simulations, key).choose(view, legal)
            diff = None
            if choice_a != choice_b:
                diff = value(state, parse_action(choice_a), key) - value(
                    state, parse_action(choice_b), key
                )
            out.append((kind(state), diff))
        state, _ = apply(state, parse_action(driver.choose(view, legal)))
    return out


def summary(games: list[list[tuple]]) -> dict[str, object]:
    """Mean difference per decision over ``games`` (a ratio over games, since decisions
    within a game are not independent), with its 95% interval, and by kind."""
    sums = [sum(d for _, d in g if d is not None) for g in games]
    counts = [len(g) for g in games]
    n, total = len(games), sum(counts)
    mean = sum(sums) / total
    var = sum((s - mean * c) ** 2 for s, c in zip(sums, counts)) / (n - 1) / n / (total / n) ** 2
    half = Z95 * math.sqrt(var)
    by_kind: dict[str, list[float]] = {}
    for g in games:
        for k, d in g:
            if d is not None:
                by_kind.setdefault(k, []).append(d)
    return {
        "games": n,
        "decisions": total,
        "differ": sum(len(v) for v in by_kind.values()),
        "mean_per_decision": round(mean, 4),
        "mean_per_decision_ci95": [round(mean - half, 4), round(mean + half, 4)],
        "where_they_differ": {
            k: {"decisions": len(v), "mean": round(sum(v) / len(v), 3)}
            for k, v in sorted(by_kind.items())
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--a", default="search", help="strategy A")
    parser.add_argument("--b", default="heuristic", help="strategy B")
    parser.add_argument("--games", type=int, default=200, help="games to take positions from")
    parser.add_argument("--simulations", type=int, default=100, help="search samples a move")
    parser.add_argument("--players", default="4,2", help="table sizes, e.g. 4,2 or 2")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=1, choices=(1, 2), help="processes (<= 2)")
    args = parser.parse_args()
    start = time.perf_counter()
    tables = {}
    for players in [int(p) for p in args.players.split(",")]:
        work = partial(
            judge_game,
            a=args.a,
            b=args.b,
            simulations=args.simulations,
            seed=args.seed,
            players=players,
        )
        if args.jobs > 1:
            with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
                games = pool.map(work, range(args.games), chunksize=1)
        else:
            games = [work(g) for g in range(args.games)]
        tables[str(players)] = summary(games)
    print(
        json.dumps(
            {
                "bench": "judge",
                "a": args.a,
                "b": args.b,
                "simulations": args.simulations,
                "players": tables,
                "seconds": round(time.perf_counter() - start, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
