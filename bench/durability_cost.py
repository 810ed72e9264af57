"""What ``ARENA_DURABILITY=replica`` costs an action: the commit waits for a replica.

    python bench/durability_cost.py --redis-url redis://127.0.0.1:7101 [--games 6]

Plays ``--games`` 4-player games through ``Arena.act`` in this process (no HTTP), once
without and once with the setting, on the Redis named (a cluster node with replicas:
``WAIT 1`` needs one), and prints one JSON line per mode: actions, CPU microseconds and
wall milliseconds per ``act``. Keys under a prefix of this run's own, deleted after.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

# the repository, not bench/ (its http.py would shadow the standard library's http)
sys.path[0] = str(Path(__file__).resolve().parents[1])

from service.arena.games.commands import Arena  # noqa: E402
from service.storage.redis_client import connect  # noqa: E402
from service.storage.store import Store  # noqa: E402


def measure(url: str, games: int, durability: str) -> dict[str, object]:
    os.environ["ARENA_DURABILITY"] = durability
    prefix = f"durbench{os.getpid()}:"
    store = Store(connect(url), prefix)
    arena = Arena(store)
    bots = [store.create_bot(f"d{i}")[0]["id"] for i in range(4)]
    for b in bots:  # one owner's bots: seated at once (issue 23)
        arena.owners.add_bot("o-bench", b)
    n, cpu, wall = 0, 0.0, 0.0
    try:
        for g in range(games):
            game_id = arena.create_game(bots[0], {"players": 4, "seats": bots, "seed": g})["id"]
            rng = random.Random(g)
            while True:
                game = arena.get(game_id)
                if game.status != "active":
                    break
                seat = game.state.turn
                view = arena.view(game, bots[seat], seat)
                action = {"action": rng.choice(view["legal_actions"])}
                t, c = time.perf_counter(), time.process_time()
                arena.act(game_id, bots[seat], action, None, None)
                wall += time.perf_counter() - t
                cpu += time.process_time() - c
                n += 1
    finally:
        keys = list(store.r.scan_iter(match=f"{prefix}*"))
        for key in keys:
            store.r.delete(key)
    return {"bench": "durability_cost", "durability": durability or "none", "actions": n,
            "act_cpu_us": round(cpu / max(1, n) * 1e6),
            "act_wall_ms": round(wall / max(1, n) * 1e3, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--games", type=int, default=6)
    args = parser.parse_args()
    for durability in ("", "replica"):
        print(json.dumps(measure(args.redis_url, args.games, durability)))


if __name__ == "__main__":
    main()
