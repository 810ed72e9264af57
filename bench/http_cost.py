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

``--mode conditional``: instead, the cost of a conditional GET. One live 4-player game;
``--polls`` requests of a seated bot's ``GET /games/{id}`` answered 200 (no
``If-None-Match``), then as many with the ETag it got, answered 304 (decided before the
view is rendered). Prints ``instructions_per_200``, ``instructions_per_304`` and
``ratio_304_to_200``; the floor as above.

Prints one JSON line: ``instructions_per_action``, ``instructions_per_floor_request`` and
``cost_ratio`` (floor / action), ``redis_calls_per_action`` (Redis's own count of each
command during the actions, with its own Redis; the commands a script runs are counted
too, so the round trips are ``evalsha`` and the commands no script runs; a count that
follows ``play_s`` rather than the actions is a cost per second, such as a cache refreshed
once a second, and valgrind's pace, which the machine's load sets, makes it weigh more
per action: compare runs with similar ``play_s``, or base and change side by side); then
``--idle`` seconds with no load measure what the worker spends by the clock alone
(``idle_instructions_per_s``: its listener, its metrics' flush), and ``net_*`` are the
same figures with that rate times each phase's wall time taken off: under valgrind a
phase lasts longer the busier the machine, and the clock's share per request with it.
With one worker and the worker the bottleneck, ``cost_ratio`` is what ``bench/http.py
--workers 1`` reports as ``ratio``. Deterministic to about 1% between runs of similar
``play_s`` (the per-second costs above are not in ``net_*``: they run only while
requests come); slow (valgrind runs Python some 50 times slower: a few minutes). No sweeper and
no webhook dispatcher run (``ARENA_SWEEPER=0``, ``ARENA_CALLBACKS=0``): their timers would
add instructions that belong to no request, more of them the slower the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

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


def command_counts(url: str) -> dict[str, int]:
    """Redis's own count of each command it has run (``INFO commandstats``)."""
    import redis

    client = redis.Redis.from_url(url)
    try:
        stats = client.info("commandstats")
    finally:
        client.close()
    return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}


def gunicorn_worker(arbiter: int) -> int:
    """The pid of the one gunicorn worker among the arbiter's children (the arbiter also
    starts the analysis workers' supervisor, ``gunicorn_conf.when_ready``: counting that
    process instead measured nothing of the requests)."""
    for child in subprocess.run(["pgrep", "-P", str(arbiter)], capture_output=True,
                                text=True).stdout.split():
        try:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"gunicorn" in cmdline and b"service.arena.analyses.worker" not in cmdline:
            return int(child)
    raise RuntimeError("no gunicorn worker found")


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


def conditional_cost(port: int, out: Path, pid: int, tokens: list[str], ids: list[str],
                     polls: int, floor_n: int, setup: Client) -> dict[str, Any]:
    """Instructions per GET /games/{id} answered 200 and per one answered 304."""
    game = Client(port, tokens[0], timeout=600).json(
        "POST", "/games", {"players": 4, "seats": ids, "seed": 77}, expect=201)
    path = f"/games/{game['id']}"
    seat = Client(port, tokens[0], timeout=600)
    _, _, headers = seat.request_full("GET", path)
    etag = headers["ETag"]
    for _ in range(20):  # warm both paths
        seat.request("GET", path)
    seat.headers["If-None-Match"] = etag
    for _ in range(20):
        assert seat.request("GET", path)[0] == 304
    seat.headers.pop("If-None-Match")
    counts: dict[str, int] = {}
    seen = 0
    for kind in ("200", "304"):
        if kind == "304":
            seat.headers["If-None-Match"] = etag
        subprocess.run(["callgrind_control", "-z", str(pid)], check=True, capture_output=True)
        for _ in range(polls):
            got = seat.request("GET", path)[0]
            if str(got) != kind:
                raise RuntimeError(f"expected {kind}, got {got}")
        counts[kind], seen = instructions(out, pid, seen)
    subprocess.run(["callgrind_control", "-z", str(pid)], check=True, capture_output=True)
    for _ in range(floor_n):
        setup.get("/readyz")
    floor, _ = instructions(out, pid, seen)
    per = {k: v / polls for k, v in counts.items()}
    return {"polls": polls, "instructions_per_200": round(per["200"]),
            "instructions_per_304": round(per["304"]),
            "ratio_304_to_200": round(per["304"] / per["200"], 3),
            "instructions_per_floor_request": round(floor / max(1, floor_n))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", type=int, default=4, help="4-player games to 7")
    parser.add_argument("--floor", type=int, default=400, help="GET /readyz requests")
    parser.add_argument("--keys", action="store_true",
                        help="every action carries an Idempotency-Key")
    parser.add_argument("--start-timeout", type=float, default=600,
                        help="seconds the service may take to start under valgrind")
    parser.add_argument("--mode", choices=["actions", "conditional"], default="actions")
    parser.add_argument("--polls", type=int, default=200,
                        help="--mode conditional: GETs of each kind (200, 304)")
    parser.add_argument("--idle", type=float, default=20.0,
                        help="seconds of no load after the floor, whose instruction rate is "
                             "taken off both phases in the net_* figures (0: none)")
    parser.add_argument("--dump", default="",
                        help="keep the worker's callgrind dump of the actions here (for "
                             "callgrind_annotate: where the instructions went, by C function)")
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
               "ARENA_LOG_LEVEL": "warning", "ARENA_SWEEPER": "0",
               # nor the webhook dispatcher's repair pass (two Redis calls every half
               # second): under valgrind an action takes some 50 times longer, so a timer's
               # share per action grew with the machine's load
               "ARENA_CALLBACKS": "0",
               # no analysis supervisor: the arbiter's only child is then the worker
               # (``pgrep -P`` below), not a process that serves no request
               "ARENA_ANALYSIS_WORKERS": "0"}
        # sys.executable is the interpreter itself (not a launcher script valgrind would
        # trace instead); gunicorn's heartbeat timeout is raised for valgrind's pace
        command = ["valgrind", "--tool=callgrind", "--trace-children=yes",
                   f"--callgrind-out-file={out}.%p",
                   *gunicorn_command(HOST, port, 1), "--timeout", "600"]
        gunicorn = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + args.start_timeout
            while True:
                try:
                    if Client(port, timeout=60).get("/healthz")[0] == 200:
                        break
                except OSError:
                    pass
                if time.monotonic() > deadline or gunicorn.poll() is not None:
                    raise RuntimeError("the service did not start under valgrind")
                time.sleep(1)
            pid = gunicorn_worker(gunicorn.pid)
            setup = Client(port, timeout=600)
            bots = one_owners_bots(setup, 4, "cost")
            tokens, ids = [b["token"] for b in bots], [b["id"] for b in bots]
            play_games(port, tokens, ids, 1, args.keys)  # warm every code path up
            for _ in range(50):
                setup.get("/readyz")
            if args.mode == "conditional":
                result = conditional_cost(port, out, pid, tokens, ids, args.polls,
                                          args.floor, setup)
                print(json.dumps({"bench": "http_cost", "mode": "conditional",
                                  "redis": "given" if args.redis_url else "own", **result}))
                return

            subprocess.run(["callgrind_control", "-z", str(pid)], check=True,
                           capture_output=True)
            calls_before = command_counts(url) if redis_proc is not None else {}
            began = time.monotonic()
            actions = play_games(port, tokens, ids, args.games, args.keys)
            play_s = time.monotonic() - began
            calls_after = command_counts(url) if redis_proc is not None else {}
            per_game, seen = instructions(out, pid, 0)
            if args.dump:
                shutil.copy(f"{out}.{pid}.{seen}", args.dump)
            subprocess.run(["callgrind_control", "-z", str(pid)], check=True,
                           capture_output=True)
            began = time.monotonic()
            for _ in range(args.floor):
                setup.get("/readyz")
            floor_s = time.monotonic() - began
            floor, seen = instructions(out, pid, seen)
            idle = 0
            if args.idle > 0:
                subprocess.run(["callgrind_control", "-z", str(pid)], check=True,
                               capture_output=True)
                began = time.monotonic()
                time.sleep(args.idle)
                idle, _ = instructions(out, pid, seen)
                idle_s = time.monotonic() - began
        finally:
            stop(gunicorn, 60)
            if redis_proc is not None:
                stop(redis_proc)
    per_action = per_game / max(1, actions)
    per_floor = floor / max(1, args.floor)
    out_line: dict[str, object] = {
        "bench": "http_cost", "games": args.games, "actions": actions, "keys": args.keys,
        "redis": "given" if args.redis_url else "own",
        "instructions_per_action": round(per_action),
        "instructions_per_floor_request": round(per_floor),
        "cost_ratio": round(per_floor / per_action, 3),
    }
    if calls_after:
        # the round trips behind an action (the client's own setup calls included: few);
        # a command that grows with play_s rather than with actions is a per-second cost
        # (a cache refreshed every second), which valgrind's pace makes look larger
        out_line["redis_calls_per_action"] = {
            name: round((n - calls_before.get(name, 0)) / max(1, actions), 2)
            for name, n in sorted(calls_after.items()) if n > calls_before.get(name, 0)
            and name not in ("info",)}
    if args.idle > 0:
        # what the worker does by the clock (its timers, its listener's rounds) runs
        # whether requests come or not, and under valgrind a request takes longer the
        # busier the machine: net of the idle rate over each phase's wall time, the
        # figures are the requests' own
        rate = idle / idle_s
        net_action = (per_game - rate * play_s) / max(1, actions)
        net_floor = (floor - rate * floor_s) / max(1, args.floor)
        out_line.update({
            "idle_instructions_per_s": round(rate),
            "play_s": round(play_s, 1), "floor_s": round(floor_s, 1),
            "net_instructions_per_action": round(net_action),
            "net_instructions_per_floor_request": round(net_floor),
            "net_cost_ratio": round(net_floor / net_action, 3),
        })
    print(json.dumps(out_line))


if __name__ == "__main__":
    main()
