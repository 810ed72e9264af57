"""What an action costs the service next to the floor request, in CPU instructions.

    python bench/http_cost.py [--games 4] [--floor 400]

``bench/http.py`` measures throughput against the wall clock, and this host's speed flips
by half within a minute, so two runs of it rarely settle a small change. Instructions do
not flip: this runs the one gunicorn worker under ``valgrind --tool=callgrind`` (as
deployed otherwise: gevent worker class, its own Redis), zeroes its counters with
``callgrind_control`` when the load starts and dumps them when it ends, so setup and
warm-up are left out. Two loads, one after the other:

1. four seats of one table play ``--games`` whole 4-player games to 7, each move one
   ``POST /games/{id}/actions?wait=`` as bots do (plus a ``GET …/turn`` per seat and game);
2. ``--floor`` requests to ``GET /readyz`` (one Redis round trip), from one connection.

``--keys``: every action carries an ``Idempotency-Key`` (``{game}-{version}``), so the
retry memory's cost is counted too.

Prints one JSON line: ``instructions_per_action``, ``instructions_per_floor_request`` and
``cost_ratio`` (floor / action). With one worker and the worker the bottleneck,
``cost_ratio`` is what ``bench/http.py --workers 1`` reports as ``ratio``. Deterministic to
about 1%; slow (valgrind runs Python some 50 times slower: a few minutes). No sweeper runs
(``ARENA_SWEEPER=0``): its timer would add instructions that belong to no request.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.http import HOST, Client, one_owners_bots, start_redis, stop  # noqa: E402
from service.cli.serve import gunicorn_command  # noqa: E402
from service.storage.embedded import free_port  # noqa: E402


def instructions(out: Path, pid: int, since: int) -> tuple[int, int]:
    """Dump the worker's counters; (instructions since the last zeroing, dump number)."""
    subprocess.run(["callgrind_control", "-d", str(pid)], check=True, capture_output=True)
    for _ in range(100):
        dumps = sorted(out.parent.glob(f"{out.name}.{pid}.*"),
                       key=lambda p: int(p.name.rsplit(".", 1)[1]))
        if dumps and int(dumps[-1].name.rsplit(".", 1)[1]) > since:
            text = dumps[-1].read_text(errors="replace")
            found = re.search(r"^(?:summary|totals): (\d+)", text, re.M)
            if found:
                return int(found.group(1)), int(dumps[-1].name.rsplit(".", 1)[1])
        time.sleep(0.2)
    raise RuntimeError("callgrind wrote no dump")


def play_games(port: int, tokens: list[str], seat_ids: list[str], games: int,
               keys: bool = False) -> int:
    """Whole 4-player games, each seat in its own thread; returns the actions played.
    ``keys``: every action carries an ``Idempotency-Key`` (as careful bots send)."""
    played = [0]
    lock = threading.Lock()
    for g in range(games):
        game = Client(port, tokens[0], timeout=600).json(
            "POST", "/games", {"players": 4, "seats": seat_ids, "seed": 1000 + g,
                               "variants": {"target": 7}}, expect=201)

        def seat(i: int, game_id: str = game["id"], g: int = g) -> None:
            client = Client(port, tokens[i], timeout=600)
            rng = random.Random(i * 1000 + g)
            view = client.json("GET", f"/games/{game_id}/turn?timeout=30")["view"]
            while view["status"] != "finished":
                if not view["your_turn"]:
                    view = client.json("GET", f"/games/{game_id}/turn?timeout=30")["view"]
                    continue
                if keys:
                    client.headers["Idempotency-Key"] = f"{game_id}-{view['version']}"
                view = client.json("POST", f"/games/{game_id}/actions?wait=30", {
                    "action": rng.choice(view["legal_actions"]), "version": view["version"]})
                client.headers.pop("Idempotency-Key", None)
                with lock:
                    played[0] += 1

        threads = [threading.Thread(target=seat, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return played[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", type=int, default=4, help="4-player games to 7")
    parser.add_argument("--floor", type=int, default=400, help="GET /readyz requests")
    parser.add_argument("--keys", action="store_true",
                        help="every action carries an Idempotency-Key")
    parser.add_argument("--redis-url", default="",
                        help="use this Redis (a cluster node: the cluster) instead of "
                             "starting one; keys under a prefix of this run's own")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="arena-cost-") as tmp:
        if args.redis_url:
            redis_proc, url = None, args.redis_url
        else:
            redis_proc, redis_port = start_redis(Path(tmp))
            url = f"redis://{HOST}:{redis_port}/0"
        port = free_port()
        out = Path(tmp) / "callgrind.out"
        env = {**os.environ, "REDIS_URL": url,
               "ARENA_KEY_PREFIX": f"cost{os.getpid()}:", "ARENA_RATE_LIMIT": str(10**9),
               "ARENA_LOG_LEVEL": "warning", "ARENA_SWEEPER": "0"}
        # sys.executable is the interpreter itself (not a launcher script valgrind would
        # trace instead); gunicorn's heartbeat timeout is raised for valgrind's pace
        command = ["valgrind", "--tool=callgrind", "--trace-children=yes",
                   f"--callgrind-out-file={out}.%p",
                   *gunicorn_command(HOST, port, 1), "--timeout", "600"]
        gunicorn = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 600
            while True:
                try:
                    if Client(port, timeout=60).get("/healthz")[0] == 200:
                        break
                except OSError:
                    pass
                if time.monotonic() > deadline or gunicorn.poll() is not None:
                    raise RuntimeError("the service did not start under valgrind")
                time.sleep(1)
            workers = subprocess.run(["pgrep", "-P", str(gunicorn.pid)], capture_output=True,
                                     text=True).stdout.split()
            pid = int(workers[0])
            setup = Client(port, timeout=600)
            bots = one_owners_bots(setup, 4, "cost")
            tokens, ids = [b["token"] for b in bots], [b["id"] for b in bots]
            play_games(port, tokens, ids, 1, args.keys)  # warm every code path up
            for _ in range(50):
                setup.get("/readyz")

            subprocess.run(["callgrind_control", "-z", str(pid)], check=True,
                           capture_output=True)
            actions = play_games(port, tokens, ids, args.games, args.keys)
            per_game, seen = instructions(out, pid, 0)
            subprocess.run(["callgrind_control", "-z", str(pid)], check=True,
                           capture_output=True)
            for _ in range(args.floor):
                setup.get("/readyz")
            floor, _ = instructions(out, pid, seen)
        finally:
            stop(gunicorn, 60)
            if redis_proc is not None:
                stop(redis_proc)
    per_action = per_game / max(1, actions)
    per_floor = floor / max(1, args.floor)
    print(json.dumps({
        "bench": "http_cost", "games": args.games, "actions": actions, "keys": args.keys,
        "redis": "given" if args.redis_url else "own",
        "instructions_per_action": round(per_action),
        "instructions_per_floor_request": round(per_floor),
        "cost_ratio": round(per_floor / per_action, 3),
    }))


if __name__ == "__main__":
    main()
