"""What the post-game analysis costs, how stable its values are, and what they are worth.

Modes (each prints one JSON line):

    python bench/analysis.py [--quality default]           # cost and stability
    python bench/analysis.py --losses [--games 6]          # losses of random/heuristic/search
    python bench/analysis.py --worth [--pairs 60]          # analysis-best player vs search

* cost: CPU seconds (``time.process_time``, one core) to analyse a 2-player and a 4-player
  14-point game of the heuristic bot against itself, the bytes of the analysis as compact
  JSON and as stored (zlib-compressed, ``queue.pack_result``), and analyses per second
  with 1 and 2 worker processes (wall time, the same games; on a shared machine the
  2-worker figure is only as good as the idle core).
* stability: the decisions of one game valued with two sampling seeds: the mean and the
  largest difference of an action's expected margin, and how often the best action agrees
  (a decision whose two best are within the inaccuracy threshold counts as agreeing when
  either seed's best is the other's best or near it).
* losses: every decision of one team valued, that team played by the random, the
  heuristic and the search bot (100 samples a move) against the heuristic, 2 players: the
  distribution of losses (quantiles, share at or above each threshold) the thresholds in
  docs/analysis.md were chosen from.
* worth: duplicate 2-player games against the heuristic (clients/strategies/duel.py) of a
  player that plays the analysis's best action at each decision (the evaluator at the
  analysis's quality, best by expected margin then chance of winning) and of the search
  bot at the same number of samples a move; win rates with 95% Wilson intervals.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.strength import wilson
from clients.strategies import HeuristicStrategy, RandomStrategy, SearchStrategy
from clients.strategies.duel import duplicate_pair
from service.analysis import QUALITIES, THRESHOLDS, analyse
from service.analysis.core import decisions_of, ranked, value_decision
from service.arena.analyses.queue import pack_result
from service.engine import OVER, action_name, apply, legal_actions, new_game, parse_action
from service.engine.views import seat_view


def play(players: int, seed: int, bots: tuple) -> list[int]:
    """The actions of one game, team t played by ``bots[t]``."""
    state, _ = new_game(players, seed)
    actions = []
    while state.phase != OVER:
        legal = [action_name(a) for a in legal_actions(state)]
        a = parse_action(bots[state.turn & 1].choose(seat_view(state, state.turn), legal))
        actions.append(a)
        state, _ = apply(state, a)
    return actions


def heuristic_game(players: int, seed: int) -> list[int]:
    return play(players, seed, (HeuristicStrategy(), HeuristicStrategy()))


def _analyse(job: tuple[int, int, list[int], str]) -> float:
    players, seed, actions, quality = job
    start = time.process_time()
    analyse(players, seed, None, actions, quality=quality)
    return time.process_time() - start


def cost(quality: str, seed: int) -> dict:
    out: dict = {}
    for players in (2, 4):
        actions = heuristic_game(players, seed)
        start = time.process_time()
        result = analyse(players, seed, None, actions, quality=quality)
        cpu = time.process_time() - start
        text = json.dumps(result, separators=(",", ":"))
        out[f"{players}p"] = {
            "cpu_s": round(cpu, 2),
            "plies": len(actions),
            "decisions": len(result["decisions"]),
            "cpu_ms_per_decision": round(1000 * cpu / len(result["decisions"]), 1),
            "bytes": len(text),
            "stored_bytes": len(pack_result(text)),
        }
    jobs = [(2, seed + i, heuristic_game(2, seed + i), quality) for i in range(4)]
    for workers in (1, 2):
        start = time.perf_counter()
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            pool.map(_analyse, jobs)
        wall = time.perf_counter() - start
        out[f"throughput_{workers}w_2p_games_per_s"] = round(len(jobs) / wall, 3)
    return out


def stability(quality: str, seed: int) -> dict:
    samples = QUALITIES[quality][0]
    diffs: list[float] = []
    agree = near = n = 0
    for state, _a in decisions_of(2, seed, None, heuristic_game(2, seed)):
        one = value_decision(state, samples, 0)
        two = value_decision(state, samples, 1)
        diffs.extend(abs(one[a][1] - two[a][1]) for a in one)
        b1, b2 = ranked(one)[0], ranked(two)[0]
        n += 1
        agree += b1 == b2
        near += b1 == b2 or two[b2][1] - two[b1][1] < THRESHOLDS["inaccuracy"]
    diffs.sort()
    return {
        "decisions": n,
        "margin_diff_mean": round(sum(diffs) / len(diffs), 3),
        "margin_diff_p90": round(diffs[int(0.9 * len(diffs))], 3),
        "margin_diff_max": round(diffs[-1], 3),
        "best_agrees": round(agree / n, 3),
        "best_agrees_within_inaccuracy": round(near / n, 3),
    }


def losses(quality: str, games: int, seed: int) -> dict:
    bots = {
        "random": lambda s: RandomStrategy(seed=s),
        "heuristic": lambda s: HeuristicStrategy(),
        "search": lambda s: SearchStrategy(seed=s, simulations=100),
    }
    out: dict = {}
    for name, make in bots.items():
        values: list[float] = []
        start = time.process_time()
        for g in range(games):
            game_seed = seed + g
            actions = play(2, game_seed, (make(game_seed), HeuristicStrategy()))
            result = analyse(2, game_seed, None, actions, quality=quality)
            values.extend(d["loss"] for d in result["decisions"] if d["seat"] == 0)
        values.sort()
        q = {
            f"p{p}": values[min(len(values) - 1, int(p / 100 * len(values)))]
            for p in (50, 75, 90, 95, 99)
        }
        out[name] = {
            "decisions": len(values),
            "average_loss": round(sum(values) / len(values), 3),
            **q,
            **{
                f"share_{m}": round(sum(v >= THRESHOLDS[m] for v in values) / len(values), 3)
                for m in ("inaccuracy", "mistake", "blunder")
            },
            "cpu_s": round(time.process_time() - start, 1),
        }
    return out


class AnalysisBest:
    """Plays the analysis's best action: the evaluator at the analysis's quality, best by
    expected hand margin, then chance of winning (``core.ranked``)."""

    def __init__(self, seed: int, samples: int) -> None:
        self.seed = seed
        self.samples = samples

    def choose(self, view: dict, legal: list[str]) -> str:
        if len(legal) == 1:
            return legal[0]
        evaluator = SearchStrategy(
            seed=self.seed * 1_000_003 + view["ply"], simulations=self.samples
        )
        values = evaluator.values(view, legal)
        return ranked({a: (v.points, v.margin, v.win) for a, v in values.items()})[0]


def worth(quality: str, pairs: int, seed: int) -> dict:
    """Both players on the same duplicate deals, pair by pair; after each pair the figures
    so far go to stderr (a JSON line), so a run cut short still says something."""
    samples = QUALITIES[quality][0]
    makers = {
        "analysis_best": lambda s: AnalysisBest(s, samples),
        "search": lambda s: SearchStrategy(seed=s, simulations=samples),
    }
    tally = {name: [0, 0, 0.0] for name in makers}  # wins, games, cpu s
    out: dict = {}
    for p in range(pairs):
        s = seed + p
        for name, make in makers.items():
            start = time.process_time()
            for r in duplicate_pair(partial(make, s), HeuristicStrategy, s, players=2):
                tally[name][0] += r.winner == 0
                tally[name][1] += 1
            tally[name][2] += time.process_time() - start
        out = {"players": 2, "pairs": p + 1, "samples_a_move": samples}
        for name, (wins, games, cpu) in tally.items():
            low, high = wilson(wins, games)
            out[name] = {
                "games": games,
                "win_rate": round(wins / games, 3),
                "interval95": [round(low, 3), round(high, 3)],
                "cpu_s": round(cpu, 1),
            }
        print(json.dumps(out), file=sys.stderr, flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quality", default="default", choices=sorted(QUALITIES))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--losses", action="store_true", help="loss distributions by bot")
    parser.add_argument("--games", type=int, default=6, help="games a bot for --losses")
    parser.add_argument("--worth", action="store_true", help="analysis-best player vs search")
    parser.add_argument("--pairs", type=int, default=60, help="duplicate pairs for --worth")
    args = parser.parse_args()
    out: dict = {
        "bench": "analysis",
        "quality": args.quality,
        "samples": QUALITIES[args.quality][0],
    }
    if args.losses:
        out["losses"] = losses(args.quality, args.games, args.seed)
    elif args.worth:
        out["worth"] = worth(args.quality, args.pairs, args.seed)
    else:
        out["cost"] = cost(args.quality, args.seed)
        out["stability"] = stability(args.quality, args.seed)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
