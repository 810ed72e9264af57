"""Does the move that ends a tournament game wait for the tournament to advance?

The last move of a tournament game used to run the tournament's advance (record the
result, close the round, pair and create the next) inside its own request; now the
request hands the game to the process's after-finish loop (``service.arena.games.
after_finish``) and answers. This measures the answer time of moves that end a game
against moves that do not, in a 16-entrant Swiss played by instant bots over HTTP (each
bot a thread: ``GET /bots/me/turns`` long-poll, ``GET /games/{id}``, ``POST
/games/{id}/actions``; the POST is what is timed).

``--base DIR``: the same Swiss on a second service running the code in ``DIR`` (a
checkout of main with its compiled modules copied in), in the same run, both services on
one Redis of this run's own (under their own prefixes), the tournaments alternating
between them (``--repeat`` each), so the host's drift falls on both alike.

    python bench/advance.py [--base /tmp/base-advance] [--repeat 2] [--rounds 4]

Prints one JSON line: per tree (``after``; ``before`` with ``--base``) the number of
ending and other moves and the p50/p99 of each, in ms, the p50 of each kind's time to its
commit and after it (``updated_at`` in the answer splits a move), and
``ending_over_other_p50``.
Target: ``after``'s ending moves answer like its other moves, within noise.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

# the repository, in place of bench/ (whose http.py would hide the standard library's)
sys.path[0] = str(Path(__file__).resolve().parent.parent)

from bench.harness import ROOT, pct, start_redis, start_service, stop  # noqa: E402
from bench.http import Client, one_owners_bots  # noqa: E402

ADMIN = "bench-advance-admin"
ENTRANTS = 16


def settings(prefix: str) -> dict[str, str]:
    return {
        "ARENA_KEY_PREFIX": prefix, "ARENA_ADMIN_TOKEN": ADMIN,
        "ARENA_RATE_LIMIT": "0", "ARENA_LOG_LEVEL": "warning", "ARENA_ACCESS_LOG": "0",
        "ARENA_QUOTA_BOTS": str(10**9), "ARENA_QUOTA_GAMES": str(10**9),
        "ARENA_QUOTA_CLIENT_GAMES": str(10**9),
        "ARENA_NEW_ACCOUNTS_PER_MINUTE": "0", "ARENA_NEW_GAMES_PER_MINUTE": "0",
        "ARENA_OWNERS_PER_NETWORK": "0", "ARENA_HOUSE_BOTS": "0",
        "ARENA_TOURNAMENT_SCHEDULE": "[]", "ARENA_ANALYSIS_WORKERS": "0",
    }  # fmt: skip


Move = tuple[bool, float, float, float]  # ends a game?, seconds, to its commit, after it


def bot(port: int, token: str, done: threading.Event, out: list[Move],
        lock: threading.Lock) -> None:
    """An instant bot: the first legal action of every turn, timed per POST."""
    c = Client(port, token)
    while not done.is_set():
        status, data = c.request("GET", "/bots/me/turns?timeout=1")
        if status != 200:
            time.sleep(0.05)
            continue
        for gid in json.loads(data)["games"]:
            status, data = c.request("GET", f"/games/{gid}")
            view = json.loads(data)
            if status != 200 or not view["your_turn"]:
                continue
            start, sent = time.perf_counter(), time.time()
            status, data = c.request("POST", f"/games/{gid}/actions",
                                     {"action": view["legal_actions"][0],
                                      "version": view["version"]})
            took, answered = time.perf_counter() - start, time.time()
            if status == 200:
                got = json.loads(data)
                # the commit's time (the service's clock, this machine's) splits the move
                # into the part before its commit and the part after
                commit = got["updated_at"]
                with lock:
                    out.append((got["status"] == "finished", took, commit - sent,
                                answered - commit))


def swiss(port: int, bots: list[dict[str, Any]], rounds: int, seed: int) -> list[Move]:
    """One Swiss of ``bots`` to its end; every timed move (``Move``)."""
    admin = Client(port, ADMIN)
    t = admin.json("POST", "/tournaments", {
        "entrants": [b["id"] for b in bots], "format": "swiss", "rounds": rounds,
        "games_per_pairing": 2, "parallel": 2 * ENTRANTS, "seed": seed,
        "variants": {"target": 3}}, expect=201)
    done, lock = threading.Event(), threading.Lock()
    out: list[Move] = []
    threads = [threading.Thread(target=bot, args=(port, b["token"], done, out, lock),
                                daemon=True) for b in bots]
    for th in threads:
        th.start()
    end = time.monotonic() + 600
    try:
        while admin.json("GET", f"/tournaments/{t['id']}")["status"] != "finished":
            if time.monotonic() > end:
                raise RuntimeError("the Swiss did not finish in 10 minutes")
            time.sleep(0.2)
    finally:
        done.set()
        for th in threads:
            th.join(10)
    return out


def summary(moves: list[Move]) -> dict[str, Any]:
    out: dict[str, Any] = {"ending_moves": sum(1 for m in moves if m[0]),
                           "other_moves": sum(1 for m in moves if not m[0])}
    for name, ending in (("ending", True), ("other", False)):
        mine = [m for m in moves if m[0] == ending]
        took = [m[1] * 1000 for m in mine]
        out[f"{name}_p50_ms"] = round(pct(took, 0.5) or 0.0, 2)
        out[f"{name}_p99_ms"] = round(pct(took, 0.99) or 0.0, 2)
        out[f"{name}_to_commit_p50_ms"] = round(pct([m[2] * 1000 for m in mine], 0.5) or 0.0, 2)
        out[f"{name}_after_commit_p50_ms"] = round(
            pct([m[3] * 1000 for m in mine], 0.5) or 0.0, 2)
    out["ending_over_other_p50"] = round(out["ending_p50_ms"] / out["other_p50_ms"], 2) \
        if out["other_p50_ms"] else None
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", type=Path, help="a checkout to measure as `before`")
    ap.add_argument("--repeat", type=int, default=2, help="Swiss tournaments per tree")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--workers", type=int, default=1, help="gunicorn workers per service")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-advance-"))
    redis_proc, redis_port = start_redis(work)
    trees = {"after": ROOT, **({"before": args.base.resolve()} if args.base else {})}
    procs, ports, players = [], {}, {}
    moves: dict[str, list[Move]] = {name: [] for name in trees}
    try:
        for name, code in trees.items():
            proc, port = start_service(redis_port, args.workers, work / f"{name}.log",
                                       settings(f"adv:{uuid.uuid4().hex[:8]}:"), code)
            procs.append(proc)
            ports[name] = port
            players[name] = one_owners_bots(Client(port), ENTRANTS, f"adv-{name}")
        for rep in range(args.repeat):
            for name in (trees if rep % 2 == 0 else reversed(list(trees))):
                moves[name] += swiss(ports[name], players[name], args.rounds, 1000 + rep)
    finally:
        for proc in procs:
            stop(proc)
        stop(redis_proc)
    print(json.dumps({"bench": "advance", "entrants": ENTRANTS, "rounds": args.rounds,
                      "repeat": args.repeat, "workers": args.workers,
                      **{name: summary(m) for name, m in moves.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
