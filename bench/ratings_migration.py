"""How long the ratings migration takes, and what a leaderboard read costs (issue 23).

    REDIS_URL=redis://127.0.0.1:6379/0 python bench/ratings_migration.py \
        [--tournaments 200] [--bots 300] [--entrants 8]

Writes synthetic finished round robins (every game recorded, one in ten a forfeit, one
owner for every fourth pair of bots) under a fresh key prefix, replays them with
``rating_migration.migrate(force=True)``, reads ``GET /leaderboard``'s rows 20 times, and
prints one JSON line: games replayed, seconds for the replay, games per second,
milliseconds per leaderboard read. The keys are deleted at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
import uuid
from pathlib import Path

# the repository, not bench/ (whose http.py would shadow the standard library's)
sys.path[0] = str(Path(__file__).resolve().parents[1])

from service.arena.migrations import ratings as rating_migration  # noqa: E402
from service.arena.tournaments.pairing import round_robin_rounds  # noqa: E402
from service.http.app import create_app  # noqa: E402


def synthetic(tid: str, entrants: list[str], rng: random.Random, at: int) -> dict:
    rounds, k = [], 0
    for n, (pairs, byes) in enumerate(round_robin_rounds(entrants), 1):
        slots = []
        for p, (a, b) in enumerate(pairs):
            forfeit = [rng.randrange(2)] if rng.random() < 0.1 else None
            winner = 1 - forfeit[0] if forfeit else rng.randrange(2)
            result = {"winner": winner, "scores": [7, 3] if winner == 0 else [3, 7],
                      "hands_won": [2, 1], "timeouts": [0, 0], "hands": 3,
                      "moved": [True, True]}
            if forfeit:
                result["forfeit"] = forfeit
            slots.append({"slot": k, "round": n, "pairing": p, "deal": 0, "seed": k,
                          "teams": [a, b], "entrants": [a, b], "status": "done",
                          "game": f"g{tid}{k}", "result": result, "recorded": k + 1})
            k += 1
        rounds.append({"round": n, "byes": byes, "slots": slots})
    return {"id": tid, "name": "bench", "status": "finished", "created": at, "finished": at,
            "settings": {"format": "round_robin", "seed": rng.getrandbits(62)},
            "entrants": [{"bot_id": b, "bot_name": b} for b in entrants],
            "rounds": rounds, "ratings": {}, "recorded": k,
            "history": [{"round": r["round"], "ratings": {}} for r in rounds],
            "warnings": []}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tournaments", type=int, default=200)
    ap.add_argument("--bots", type=int, default=300)
    ap.add_argument("--entrants", type=int, default=8)
    args = ap.parse_args()
    prefix = f"afbench:{uuid.uuid4().hex[:10]}:"
    app = create_app({"REDIS_URL": os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"),
                      "ARENA_KEY_PREFIX": prefix, "ARENA_RATINGS_MIGRATE": "0"})
    tours, ladders = app.extensions["tournaments"], app.extensions["ladders"]
    r = tours.r
    rng = random.Random(1)
    bots = [f"{i:012x}" for i in range(args.bots)]
    try:
        for i in range(0, args.bots, 8):  # every fourth pair of bots shares an owner
            r.hset(tours.store.keys.bot(bots[i]), "owner", f"owner{i}")
            if i + 1 < args.bots:
                r.hset(tours.store.keys.bot(bots[i + 1]), "owner", f"owner{i}")
        games = 0
        for n in range(args.tournaments):
            doc = synthetic(f"t{n:05d}", rng.sample(bots, args.entrants), rng, 1_700_000_000 + n)
            games += sum(len(x["slots"]) for x in doc["rounds"])
            r.set(tours.key(doc["id"]), json.dumps(doc))
            r.zadd(f"{tours.p}tours:all", {doc["id"]: n})
        t0 = time.perf_counter()
        out = rating_migration.migrate(tours, ladders, force=True)
        replay_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        for _ in range(20):
            rows = tours.leaderboard()["items"]
        read_ms = (time.perf_counter() - t0) / 20 * 1000
        t0 = time.perf_counter()
        for _ in range(20):
            r.hgetall(tours.lb_key)
        fetch_ms = (time.perf_counter() - t0) / 20 * 1000
        print(json.dumps({
            "bench": "ratings_migration", "tournaments": args.tournaments, "games": games,
            "rated": out["tournament_games_rated"], "replay_s": round(replay_s, 3),
            "games_per_s": round(games / replay_s), "leaderboard_rows": len(rows),
            "leaderboard_read_ms": round(read_ms, 2),
            "leaderboard_hgetall_ms": round(fetch_ms, 2)}))
    finally:
        keys = list(r.scan_iter(match=f"{prefix}*", count=1000))
        for i in range(0, len(keys), 500):
            r.delete(*keys[i:i + 500])


if __name__ == "__main__":
    main()
