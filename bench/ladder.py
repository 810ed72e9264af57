"""Ladder matchmaking latency: from a bot's join to its game, with N bots queued at once.

Starts ``allfours serve`` (gunicorn, ``--workers`` processes, each running a matchmaker)
against a Redis (default the local one, under a fresh key prefix that is deleted after),
registers N bots, has them all join the ``2p`` ladder at the same moment, and waits until
every one is seated. A bot's latency is its game's creation (the game's ``updated_at`` on
the service's clock: nobody moves in this bench) minus the moment its join request was
sent (same machine, same clock), so no client polling enters the figure. Rounds repeat the
burst with fresh bots.

    python -m bench.ladder [--bots 50] [--rounds 3] [--workers 2] [--redis URL]

Prints one JSON line: join-to-seated p50/p90/max in milliseconds per round and overall,
and the same for the join requests alone (the burst of 50 concurrent POSTs is part of the
figure; the matchmaker looks every 0.25 s, ``PASS_S``).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import redis
import requests

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def burst(base: str, n: int, tag: str) -> tuple[list[float], list[float]]:
    s = requests.Session()
    bots = []
    for i in range(n):
        r = s.post(f"{base}/bots", json={"name": f"{tag}{i}"}, timeout=10)
        bots.append(r.json()["token"])
    since: list[float] = [0.0] * n
    answered: list[float] = [0.0] * n
    go = threading.Barrier(n)

    def join(i: int) -> None:
        go.wait()
        since[i] = time.time()
        r = requests.post(f"{base}/ladders/2p/entry", json={"games": 1},
                          headers={"Authorization": f"Bearer {bots[i]}"}, timeout=10)
        assert r.status_code == 200, r.text
        answered[i] = time.time()

    threads = [threading.Thread(target=join, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    games: dict[int, str] = {}
    end = time.monotonic() + 120
    while len(games) < n and time.monotonic() < end:
        for i, tok in enumerate(bots):
            if i in games:
                continue
            e = s.get(f"{base}/ladders/2p/entry", headers={"Authorization": f"Bearer {tok}"},
                      timeout=10).json()
            if e["game_id"]:
                games[i] = e["game_id"]
        time.sleep(0.05)
    if len(games) < n:
        raise SystemExit(f"only {len(games)} of {n} bots were seated")
    created = {g: s.get(f"{base}/games/{g}", timeout=10).json()["updated_at"]
               for g in set(games.values())}
    return ([(created[games[i]] - since[i]) * 1000 for i in range(n)],
            [(answered[i] - since[i]) * 1000 for i in range(n)])


def summary(ms: list[float]) -> dict[str, float]:
    q = statistics.quantiles(ms, n=10)
    return {"n": len(ms), "p50_ms": round(statistics.median(ms), 1),
            "p90_ms": round(q[8], 1), "max_ms": round(max(ms), 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bots", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    args = ap.parse_args()
    prefix = f"benchladder:{uuid.uuid4().hex[:8]}:"
    port = free_port()
    env = {**os.environ, "REDIS_URL": args.redis, "ARENA_KEY_PREFIX": prefix,
           "ARENA_RATE_LIMIT": "0", "ARENA_HOUSE_BOTS": "0", "ARENA_ACCESS_LOG": "0",
           "ARENA_QUOTA_BOTS": "0",  # --bots per round, every round, from one address
           "ARENA_NEW_ACCOUNTS_PER_MINUTE": "0", "ARENA_NEW_GAMES_PER_MINUTE": "0",
           "ARENA_LOG_LEVEL": "warning", "PYTHONPATH": str(ROOT),
           # the bots are owners of their own (a ladder never matches one owner's),
           # all from this machine: no per-network cap on owners
           "ARENA_OWNERS_PER_NETWORK": "0",
           # owners made a moment ago: established at once, so their games are rated
           "ARENA_ESTABLISHED_AGE": "0"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "service.cli.main", "serve", "--port", str(port),
         "--workers", str(args.workers), "--data-dir", "/tmp/bench-ladder-unused"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=str(ROOT),
        start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                if requests.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except requests.RequestException:
                pass
            time.sleep(0.1)
        rounds = [burst(base, args.bots, f"r{k}-") for k in range(args.rounds)]
    finally:
        proc.terminate()
        proc.wait(30)
        client = redis.Redis.from_url(args.redis)
        keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
        for i in range(0, len(keys), 500):
            client.delete(*keys[i:i + 500])
    print(json.dumps({"bench": "ladder_matchmaking", "bots": args.bots,
                      "workers": args.workers, "pass_s": 0.25,
                      "rounds": [summary(seated) for seated, _ in rounds],
                      "overall": summary([x for seated, _ in rounds for x in seated]),
                      # the join requests alone (answered, client clock): part of the above
                      "join_request": summary([x for _, join in rounds for x in join])}))


if __name__ == "__main__":
    main()
