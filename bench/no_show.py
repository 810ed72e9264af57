"""What the absence rules cost a tournament pass, offline (``service.arena.tournaments.control``).

Every ``advance`` pass (after each finished game, and every ``REPAIR_S`` seconds from each
sweeper) reads the live games; where an entrant has not yet made a move of its own, or a
live game may hold an absent side (the no-show rule), it replays the game's log to count
each side's own moves (``own_moves``), and every finished game is replayed once more when
it is recorded. This measures one such replay on whole games played to the end by random
moves, with some moves played by "the clock", for 2- and 4-player games to 11 points.

    python bench/no_show.py [--games 50] [--seed 1]

Prints one JSON line: per table size (``p2``, ``p4``) games, mean_plies, replay_us_mean and
replay_us_p95 (one game's replay, µs, best of 3).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

# the repository, in place of bench/ (whose http.py would hide the standard library's)
sys.path[0] = str(Path(__file__).resolve().parent.parent)

from service.arena.tournaments.control import own_moves  # noqa: E402
from service.engine import Variants, apply, legal_actions, new_game  # noqa: E402
from service.storage.store import Game  # noqa: E402


def played_game(players: int, seed: int, rng: random.Random) -> Game:
    state, _ = new_game(players, seed, Variants.from_dict({"target": 11}))
    log, timeouts = [], []
    while not state.is_over:
        action = rng.choice(legal_actions(state))
        seat = state.turn
        state, _ = apply(state, action)
        log.append(action)
        if rng.random() < 0.1:
            timeouts.append({"seat": seat, "ply": len(log), "action": ""})
    meta = {"players": players, "seed": seed, "variants": {"target": 11},
            "seats": ["a", "b"] * (players // 2), "timeouts": timeouts}
    return Game("g", 1, "finished", meta, "{}", "".join(chr(48 + a) for a in log))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--games", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    out: dict[str, object] = {}
    for players in (2, 4):
        times, plies = [], []
        for k in range(args.games):
            game = played_game(players, args.seed * 1000 + k, rng)
            plies.append(len(game.log))
            best = float("inf")
            for _ in range(3):
                t0 = time.perf_counter()
                own_moves(game)
                best = min(best, time.perf_counter() - t0)
            times.append(best * 1e6)
        times.sort()
        out[f"p{players}"] = {"games": args.games, "mean_plies": round(statistics.mean(plies), 1),
                              "replay_us_mean": round(statistics.mean(times), 1),
                              "replay_us_p95": round(times[int(0.95 * (len(times) - 1))], 1)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
