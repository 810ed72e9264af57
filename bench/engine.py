"""Engine speed: random 4-player hands and games on one core, and the state round trip.

Prints one JSON line. Targets (issue 2): hands_per_s >= 10,000 and
state_roundtrip_us <= 30 on the project's 2-core machine.

    python bench/engine.py [--seconds 3]
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from service.engine import COMPILED, OVER, PLAY, State, apply, legal_actions, new_game


def random_games(seconds: float, players: int = 4) -> dict[str, float]:
    """Play seeded games between random players until ``seconds`` pass.

    Every action goes through the public API: ``legal_actions`` then ``apply`` (which
    validates the action and returns a new state and events). A hand counts once it is
    complete, deal to scoring; the unfinished last hand of each game is timed but not
    counted, so ``hands_per_s`` errs low.

    Rates are per second of this process's CPU time (``time.process_time``): "on one
    core", and unmoved by whatever else the shared 2-core machine runs meanwhile, which
    can halve a wall-clock rate. The wall-clock rate is reported beside it.
    """
    rng = random.Random(2)
    choice = rng.choice
    games = hands = actions = 0
    seed = 0
    start = time.perf_counter()
    cpu_start = time.process_time()
    deadline = start + seconds
    while time.perf_counter() < deadline:
        for _ in range(20):
            seed += 1
            state, _ = new_game(players, seed)
            while state.phase != OVER:
                state, _ = apply(state, choice(legal_actions(state)))
                actions += 1
            games += 1
            hands += state.hand_no
    cpu = time.process_time() - cpu_start
    wall = time.perf_counter() - start
    return {
        "hands_per_s": round(hands / cpu),
        "games_per_s": round(games / cpu, 1),
        "actions_per_s": round(actions / cpu),
        "hands_per_wall_s": round(hands / wall),
        "cpu_share": round(cpu / wall, 2),
        "hands_per_game": round(hands / games + 1, 2),
        "games": games,
    }


def mid_hand_state() -> State:
    """A 4-player state in the middle of a hand: a trick under way, some tricks played."""
    rng = random.Random(3)
    state, _ = new_game(4, 12345)
    while not (state.phase == PLAY and len(state.tricks) == 3 and len(state.trick) == 2):
        state, _ = apply(state, rng.choice(legal_actions(state)))
    return state


def roundtrip_us(state: State, repeat: int = 20000) -> float:
    dumps, loads, from_dict = json.dumps, json.loads, State.from_dict
    best = float("inf")
    for _ in range(5):  # CPU time, best of five, for the reason given in random_games
        t = time.process_time()
        for _ in range(repeat):
            from_dict(loads(dumps(state.to_dict(), separators=(",", ":"))))
        best = min(best, (time.process_time() - t) / repeat * 1e6)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=3.0, help="time per measure")
    args = parser.parse_args()
    games = random_games(args.seconds)
    state = mid_hand_state()
    result = {
        "bench": "engine",
        "python": platform.python_version(),
        "players": 4,
        "compiled": COMPILED,
        **games,
        "state_roundtrip_us": round(roundtrip_us(state), 2),
        "state_bytes": len(json.dumps(state.to_dict(), separators=(",", ":"))),
        "targets": {"hands_per_s": 10000, "state_roundtrip_us": 30},
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
