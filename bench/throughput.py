"""Tournament throughput: a whole Swiss of instant bots over HTTP, in games a second,
beside the engine's own rate for the same deals in-process: the stack's overhead as one
ratio, and which process's CPU bounds it.

    python bench/throughput.py [--entrants 64] [--rounds 6] [--games 2] [--parallel 64]
                               [--workers 2] [--seed 7]

1. A real ``allfours serve`` (``python -m service.cli.main serve``: gunicorn as deployed,
   ``--workers`` gevent workers, over its own embedded valkey with append-only persistence
   in a temporary directory; ``--no-house-bots``: nobody else plays), with the per-address
   caps and creation quotas out of reach (every bot here comes from one address, as in the
   other HTTP benches, ``bench.harness.ONE_ADDRESS_LOAD``); the request budget stays on.
2. ``--entrants`` bots of one owner, each an instant bot in this process: a thread
   long-polls ``GET /bots/me/turns`` (``playing`` = the games it is at already) and each
   game it is given is played in a thread of its own — its first legal action, always,
   ``POST /games/{id}/actions?wait=`` (one request a move; ``GET …/turn`` after a wait
   that timed out). Plain ``http.client`` keep-alive connections: the load client shares
   the 2 cores with the service, so it is kept light (its CPU is reported).
3. Its owner organizes a 2-player Swiss of them all (``--rounds`` rounds of ``--games``
   games a pairing, duplicate deals as by default, at most ``--parallel`` games at once:
   64 lets every game of a round run at once; the service's default is 8), which starts
   at once. Measured from its creation to the first read in which it is ``finished``
   (read every 0.2 s): ``games_per_s`` and ``actions_per_s``.
4. The engine alone: every game the tournament played, from its seed and variants (read
   from the finished games' views), played again in this process with the same choices
   (the first legal action) through ``service.engine`` as ``allfours simulate`` plays
   (``new_game``, ``legal_actions``, ``apply``): ``engine_games_per_s`` on one core
   (best of three passes, CPU time). ``same_games`` counts the games whose final scores
   and action count match the served ones: the two figures are of the same games.
   ``ratio`` = ``games_per_s`` / ``engine_games_per_s``.
5. What bounds it: ``cpu_s`` per process role over the tournament (the gunicorn workers,
   the arbiter, valkey, the serve supervisor, the analysis workers, this client) from
   ``/proc/<pid>/stat``, ``cores_busy`` (their sum over the wall time; the machine has
   ``cores``), ``other_cpu_s`` (what the rest of the machine used meanwhile, ``/proc/stat``:
   the machine is shared) and ``bound_by``: the role that used the most CPU, and whether
   the cores were full (``cpu_full``: all parties together used at least 90% of them).

Prints one JSON line. The machine is shared: ``loadavg_1m_before`` says how busy it was.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as ``python bench/throughput.py``, this file's directory comes first on sys.path,
# where bench/http.py would shadow the standard library's ``http`` package: drop it.
_HERE = Path(__file__).resolve().parent
ROOT = _HERE.parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(ROOT))

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

from bench.harness import (  # noqa: E402
    HOST,
    ONE_ADDRESS_LOAD,
    box_busy_s,
    children,
    cpu_seconds,
    own_cpu,
    stop,
    wait_until,
)
from bench.http import Client, one_owners_bots  # noqa: E402
from service.engine import OVER, apply, legal_actions, new_game  # noqa: E402
from service.engine.variants import Variants  # noqa: E402
from service.storage.embedded import free_port  # noqa: E402

WAIT_S = 10  # a move's ``?wait`` and a turn poll's timeout
SETTINGS = {
    **ONE_ADDRESS_LOAD,
    "ARENA_QUOTA_BOTS": str(10**9), "ARENA_QUOTA_GAMES": str(10**9),
    "ARENA_QUOTA_CLIENT_GAMES": str(10**9),
    "ARENA_NEW_ACCOUNTS_PER_MINUTE": "0", "ARENA_NEW_GAMES_PER_MINUTE": "0",
    "ARENA_OWNERS_PER_NETWORK": "0",
    "ARENA_LOG_LEVEL": "warning",
}  # fmt: skip


def start_serve(tmp: Path, workers: int) -> tuple[subprocess.Popen[bytes], int]:
    """``allfours serve`` on a free port over an embedded valkey in ``tmp``; once ready."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), **SETTINGS}
    env.pop("REDIS_URL", None)
    log = (tmp / "serve.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "service.cli.main", "serve", "--port", str(port),
         "--workers", str(workers), "--no-house-bots", "--data-dir", str(tmp / "data")],
        env=env, stdout=log, stderr=log, cwd=tmp, start_new_session=True)

    def up() -> bool:
        if proc.poll() is not None:
            raise RuntimeError((tmp / "serve.log").read_text(errors="replace")[-2000:])
        try:
            return Client(port, timeout=2).get("/readyz")[0] == 200
        except OSError:
            return False

    wait_until(up, 90, "allfours serve /readyz")
    return proc, port


# --- who uses the CPU ------------------------------------------------------------------------


def roles(serve_pid: int) -> dict[int, str]:
    """Every process of the service, by role."""
    out = {serve_pid: "serve"}
    todo = [serve_pid]
    while todo:
        pid = todo.pop()
        for child in children(pid):
            try:
                cmd = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            if b"valkey" in cmd or b"redis-server" in cmd:
                role = "valkey"
            elif b"analyses.worker" in cmd:
                role = "analysis"
            elif b"gunicorn" in cmd:
                role = "gunicorn_arbiter" if out.get(pid) == "serve" else "gunicorn_workers"
            else:
                role = "other_service"
            out[child] = role
            todo.append(child)
    return out


def cpu_by_role(procs: dict[int, str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for pid, role in procs.items():
        out[role] = out.get(role, 0.0) + cpu_seconds(pid)
    return out


# --- instant bots ----------------------------------------------------------------------------


class Tally:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.errors: list[str] = []
        self.actions = 0


def play_game(port: int, token: str, game_id: str, tally: Tally) -> None:
    """Play one game to its end: the first legal action on each turn, one request a move."""
    c = Client(port, token, timeout=WAIT_S + 50)
    view = None
    actions = 0
    while view is None or view["status"] not in ("finished", "cancelled"):
        try:
            if view is None:
                view = c.json("GET", f"/games/{game_id}")
            elif not view["your_turn"]:
                view = c.json("GET", f"/games/{game_id}/turn?timeout={WAIT_S}")["view"]
            else:
                status, data = c.request(
                    "POST", f"/games/{game_id}/actions?wait={WAIT_S}",
                    {"action": view["legal_actions"][0], "version": view["version"]})
                if status != 200:
                    raise RuntimeError(f"{status} {data[:200]!r}")
                actions += 1
                view = json.loads(data)
        except (RuntimeError, OSError) as exc:  # counted; the game is read again
            with tally.lock:
                tally.errors.append(f"{type(exc).__name__}: {str(exc)[:200]}")
            c = Client(port, token, timeout=WAIT_S + 50)
            view = None
            time.sleep(0.2)
    with tally.lock:
        tally.actions += actions


def bot(port: int, token: str, done: threading.Event, tally: Tally) -> None:
    """One instant bot: learns of its games by the long-poll; plays each in a thread."""
    c = Client(port, token, timeout=WAIT_S + 50)
    playing: dict[str, threading.Thread] = {}
    while not done.is_set():
        for gid in [g for g, t in playing.items() if not t.is_alive()]:
            del playing[gid]
        query = "timeout=1"
        if playing:
            query += "&playing=" + ",".join(playing)
        try:
            turns = c.json("GET", f"/bots/me/turns?{query}")
        except (RuntimeError, OSError) as exc:
            with tally.lock:
                tally.errors.append(str(exc)[:200])
            time.sleep(0.2)
            continue
        for gid in turns["games"]:
            if gid not in playing:
                t = threading.Thread(target=play_game, args=(port, token, gid, tally),
                                     daemon=True)
                playing[gid] = t
                t.start()


# --- the engine alone --------------------------------------------------------------------------


def engine_game(players: int, seed: int, variants: dict[str, Any]) -> tuple[list[int], int]:
    """A game played in-process as the bots play it: (final scores, actions)."""
    state, _ = new_game(players, seed, Variants.from_dict(variants))
    actions = 0
    while state.phase != OVER:
        state, _ = apply(state, legal_actions(state)[0])
        actions += 1
    return list(state.scores), actions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entrants", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--games", type=int, default=2, help="games per pairing")
    parser.add_argument("--parallel", type=int, default=64, help="games at once at most")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="arena-throughput-") as tmp_name:
        tmp = Path(tmp_name)
        serve, port = start_serve(tmp, args.workers)
        done = threading.Event()
        tally = Tally()
        try:
            setup = Client(port, timeout=60)
            bots = one_owners_bots(setup, args.entrants, "tp")
            for b in bots:
                threading.Thread(target=bot, args=(port, b["token"], done, tally),
                                 daemon=True).start()
            organizer = Client(port, bots[0]["token"], timeout=60)
            procs = roles(serve.pid)
            cpu0, own0, box0 = cpu_by_role(procs), own_cpu(), box_busy_s()
            t0 = time.monotonic()
            tour = organizer.json("POST", "/tournaments", {
                "name": "throughput", "format": "swiss", "players": 2,
                "entrants": [b["id"] for b in bots], "rounds": args.rounds,
                "games_per_pairing": args.games, "parallel": args.parallel,
                "seed": args.seed}, expect=201)
            viewer = Client(port, timeout=60)
            while True:
                doc = viewer.json("GET", f"/tournaments/{tour['id']}")
                if doc["status"] in ("finished", "cancelled"):
                    break
                time.sleep(0.2)
            wall = time.monotonic() - t0
            cpu1, own1, box1 = cpu_by_role(procs), own_cpu(), box_busy_s()
            done.set()
            game_ids = [s["game_id"] for r in doc["rounds"] for s in r["games"]
                        if s.get("game_id")]
            served = [viewer.json("GET", f"/games/{g}") for g in game_ids]
        finally:
            done.set()
            stop(serve, 30, sig=2)
    finished = [v for v in served if v["status"] == "finished"]
    deals = [(v["players"] if "players" in v else len(v["seats"]), v["seed"], v["variants"])
             for v in finished]
    same = 0
    for v, deal in zip(finished, deals):
        scores, actions = engine_game(*deal)
        same += scores == list(v["scores"]) and actions == v["ply"]
    best = float("inf")
    for _ in range(3):
        c0 = time.process_time()
        for deal in deals:
            engine_game(*deal)
        best = min(best, time.process_time() - c0)
    engine_rate = len(deals) / best if best > 0 else 0.0
    cpu = {k: round(cpu1.get(k, 0.0) - cpu0.get(k, 0.0), 2) for k in sorted(cpu1)}
    cpu["client"] = round(own1 - own0, 2)
    ours = sum(cpu.values())
    cores = os.cpu_count() or 1
    games_per_s = len(finished) / wall
    print(json.dumps({
        "bench": "throughput", "entrants": args.entrants, "rounds": args.rounds,
        "games_per_pairing": args.games, "parallel": args.parallel, "workers": args.workers,
        "tournament": doc["status"], "games": len(finished),
        "actions": sum(v["ply"] for v in finished), "wall_s": round(wall, 2),
        "games_per_s": round(games_per_s, 2),
        "actions_per_s": round(sum(v["ply"] for v in finished) / wall, 1),
        "engine_games_per_s": round(engine_rate, 1),
        "ratio": float(f"{games_per_s / engine_rate:.3g}") if engine_rate else None,
        # the service's own CPU per action, all its processes and the client apart
        "service_cpu_ms_per_action": round(
            1000 * sum(v for k, v in cpu.items() if k != "client")
            / max(1, sum(v["ply"] for v in finished)), 3),
        "same_games": f"{same}/{len(finished)}",
        "cpu_s": cpu, "cores": cores, "cores_busy": round(ours / wall, 2),
        "other_cpu_s": round(max(0.0, (box1 - box0) - ours), 2),
        "bound_by": max(cpu, key=lambda k: cpu[k]),
        "cpu_full": (box1 - box0) >= 0.9 * cores * wall,
        "client_errors": len(tally.errors), "client_error_sample": tally.errors[:3],
        "loadavg_1m_before": round(load_before, 2), "host": HOST,
    }))


if __name__ == "__main__":
    main()
