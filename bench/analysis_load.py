"""What running post-game analyses do to play: a player's action latency with analyses
being computed beside it, against without, in the same run (issue 25; target: p99 with
at most 1.2 x without).

    python bench/analysis_load.py [--seconds 3] [--rounds 10] [--games 6] [--http-workers 1]

1. Starts its own ``redis-server`` (free port, no persistence) and the service under
   gunicorn as deployed (``bench.harness.start_service``), with the analysis workers the
   arbiter starts (``ARENA_ANALYSIS_WORKERS``, default 1, at the default quality).
2. Plays ``--games`` 4-player games to 14 points with random moves (the analyses' work).
3. Asks for their analyses, then alternates short phases of ``--seconds`` without and
   with analyses running (``--rounds`` of each, so that the machine's drift, and other
   sessions' load, fall on both alike): "without" stops the analysis workers (SIGSTOP),
   "with" lets them run (SIGCONT; a pause is far shorter than their lease). In each
   phase one player (both seats of a 2-player game; a new game when one ends) reads its
   view and posts a random legal action, over and over; each action POST's latency is
   kept. During "with" phases the bench checks in Redis that an analysis is running
   (``busy``: the share of its checks that found one).
4. Prints one JSON line: action p50/p99 (ms) without and with, ``p99_ratio``, counts.

At most one core's worth of work besides the service: one player thread.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as ``python bench/analysis_load.py``, this file's directory comes first on sys.path,
# where bench/http.py would shadow the standard library's ``http`` package: drop it.
_HERE = Path(__file__).resolve().parent
ROOT = _HERE.parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(ROOT))

import argparse  # noqa: E402
import http.client  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import signal  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import redis  # noqa: E402

from bench.harness import HOST, pct, request, start_redis, start_service, stop  # noqa: E402


def bots(port: int, n: int) -> list[tuple[str, str]]:
    owner = None
    out = []
    for i in range(n):
        status, b = request(port, "POST", "/bots", {"name": f"load{i}"}, owner)
        assert status == 201, b
        owner = owner or b["token"]
        out.append((b["id"], b["token"]))
    return out


def play_out(port: int, gid: str, tokens: dict[str, str], rng: random.Random) -> None:
    conn = http.client.HTTPConnection(HOST, port, timeout=30)
    while True:
        _, v = request(port, "GET", f"/games/{gid}", conn=conn)
        if v["status"] == "finished":
            return
        seat = v["turn"]
        token = tokens[v["seats"][seat]["bot_id"]]
        _, mine = request(port, "GET", f"/games/{gid}?seat={seat}", token=token, conn=conn)
        request(port, "POST", f"/games/{gid}/actions",
                {"action": rng.choice(mine["legal_actions"]), "version": mine["version"]},
                token, conn=conn)


def player(port: int, table: list[tuple[str, str]], seconds: float, rng: random.Random
           ) -> list[float]:
    """Act for ``seconds``; the latency (s) of every accepted action POST."""
    conn = http.client.HTTPConnection(HOST, port, timeout=30)
    tokens = dict(table)
    lat: list[float] = []
    gid = None
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if gid is None:
            _, g = request(port, "POST", "/games", {"players": 2, "seats": [b for b, _ in table]},
                           table[0][1], conn=conn)
            gid = g["id"]
        _, v = request(port, "GET", f"/games/{gid}", conn=conn)
        if v["status"] == "finished":
            gid = None
            continue
        seat = v["turn"]
        token = tokens[v["seats"][seat]["bot_id"]]
        _, mine = request(port, "GET", f"/games/{gid}?seat={seat}", token=token, conn=conn)
        body = {"action": rng.choice(mine["legal_actions"]), "version": mine["version"]}
        t0 = time.perf_counter()
        status, _ = request(port, "POST", f"/games/{gid}/actions", body, token, conn=conn)
        if status == 200:
            lat.append(time.perf_counter() - t0)
    return lat


def analysis_workers(pid: int) -> list[int]:
    """The analysis worker processes under the gunicorn arbiter ``pid`` (from /proc)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            todo.append(child)
            try:
                line = (Path("/proc") / str(child) / "cmdline").read_bytes()
            except OSError:
                continue
            if b"--worker" in line and b"service.arena.analyses.worker" in line:
                found.append(child)
    return found


def pause(pids: list[int], sig: int) -> None:
    for pid in pids:
        os.kill(pid, sig)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--games", type=int, default=6)
    ap.add_argument("--http-workers", type=int, default=1)
    ap.add_argument("--analysis-workers", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(1)
    with tempfile.TemporaryDirectory(prefix="analysis-load-") as tmp:
        redis_proc, redis_port = start_redis(Path(tmp))
        svc = None
        try:
            svc, port = start_service(redis_port, args.http_workers, Path(tmp) / "svc.log", {
                "ARENA_KEY_PREFIX": "bench:", "ARENA_RATE_LIMIT": "0",
                "ARENA_OWNERS_PER_NETWORK": "0", "ARENA_QUOTA_GAMES": "0",
                "ARENA_QUOTA_CLIENT_GAMES": "0", "ARENA_QUOTA_BOTS": "0",
                "ARENA_NEW_ACCOUNTS_PER_MINUTE": "0", "ARENA_NEW_GAMES_PER_MINUTE": "0",
                "ARENA_ANALYSIS_WORKERS": str(args.analysis_workers)})
            r = redis.Redis(host=HOST, port=redis_port)
            four = bots(port, 4)
            finished = []
            for i in range(args.games):
                _, g = request(port, "POST", "/games", {"players": 4, "seed": 100 + i,
                                                        "seats": [b for b, _ in four]},
                               four[0][1])
                play_out(port, g["id"], dict(four), rng)
                finished.append(g["id"])
            table = bots(port, 2)
            workers = analysis_workers(svc.pid)
            assert workers, "no analysis worker under the service"
            pause(workers, signal.SIGSTOP)
            for gid in finished:  # a player asks: queued now, computed while the workers run
                request(port, "GET", f"/games/{gid}/analysis", None, four[0][1])
            without: list[float] = []
            with_: list[float] = []
            busy = [0, 0]
            for _ in range(args.rounds):
                pause(workers, signal.SIGSTOP)
                without += player(port, table, args.seconds, rng)
                pause(workers, signal.SIGCONT)
                stop_checks = threading.Event()

                def check(stop_checks: threading.Event = stop_checks) -> None:  # from Redis
                    while not stop_checks.wait(0.5):
                        states = [r.hget(f"bench:game:{g}:analysis", "status")
                                  for g in finished]
                        busy[1] += 1
                        busy[0] += b"running" in states
                checker = threading.Thread(target=check, daemon=True)
                checker.start()
                with_ += player(port, table, args.seconds, rng)
                stop_checks.set()
                checker.join()
            pause(workers, signal.SIGCONT)
            done = sum(request(port, "GET", f"/games/{g}/analysis")[0] == 200 for g in finished)
            p99_without = pct(without, 0.99)
            p99_with = pct(with_, 0.99)
            print(json.dumps({
                "bench": "analysis_load", "seconds": args.seconds, "rounds": args.rounds,
                "http_workers": args.http_workers, "analysis_workers": args.analysis_workers,
                "actions_without": len(without), "actions_with": len(with_),
                "p50_without_ms": round(pct(without, 0.5) * 1000, 2),
                "p50_with_ms": round(pct(with_, 0.5) * 1000, 2),
                "p99_without_ms": round(p99_without * 1000, 2),
                "p99_with_ms": round(p99_with * 1000, 2),
                "p99_ratio": round(p99_with / p99_without, 3),
                "busy": round(busy[0] / busy[1], 3) if busy[1] else None,
                "analysed_games": done, "games": len(finished),
            }))
        finally:
            stop(svc)
            stop(redis_proc)


if __name__ == "__main__":
    main()
