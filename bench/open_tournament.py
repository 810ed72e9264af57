"""Tournaments that run themselves, measured end to end over HTTP: a Swiss that 64 bots
enter by themselves, and a time-scaled arena of 16.

The service runs under gunicorn as deployed (two gevent workers, each with its sweeper and
tournament clock) on a Redis of this run's own, with **no admin token configured**. Every
bot is a ``clients.runner.BotRunner`` (random strategy) of an owner of its own, in this
process, long-polling its turns like any bot.

1. **Swiss.** An owner's bot organizes an open Swiss (``--rounds`` rounds of
   ``--games`` games a pairing, ``--move-limit`` s a move) starting ``--window`` s later;
   the 64 bots enter it concurrently (``entered_s``: from the first entry sent to the
   last answered; all must be in before ``starts_at``). From ``starts_at`` the tournament is
   read every ``POLL_S``: ``first_games_s`` is from ``starts_at`` to the first read in which
   every entrant has a game (the clock loop starts it; the first round's games are made in
   the start's pass). At the end: every game's timeouts (``clock_moves``: moves the clock
   played; every bot here answers, so the target is 0) and the time to finish.
2. **Arena.** A 30-minute arena scaled by ``--scale`` (default 1/30: 60 s), 16 bots. For
   every entrant and each of its games after the first: the wait from its previous game's
   end (the game's last commit) to its pairing (the slot's ``paired_at``), read from the
   tournament's document in Redis at the end: ``wait_p50_s``, ``wait_p90_s``,
   ``wait_max_s``, and the games played.

    python bench/open_tournament.py [--bots 64] [--rounds 6] [--games 1] [--arena-bots 16]

Prints one JSON line. The machine is shared: figures are of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parent.parent)  # bench/http.py hides http

from bench.harness import pct, start_redis, start_service, stop  # noqa: E402
from clients.api import ArenaClient  # noqa: E402
from clients.runner import BotRunner  # noqa: E402
from service.storage import redis_client  # noqa: E402
from service.storage.store import Store  # noqa: E402

POLL_S = 0.02
PREFIX = "bench:"


def bots(url: str, n: int, stop_event: threading.Event) -> list[tuple[ArenaClient, str]]:
    """``n`` bots, each of an owner of its own, playing at random until ``stop_event``."""
    out = []
    for i in range(n):
        c = ArenaClient(url, pool_size=8)
        b = c.register(f"bench-{i}")
        runner = BotRunner(c, "random", workers=2, stop_event=stop_event, poll_timeout=5.0,
                           name=f"bench-{i}")
        threading.Thread(target=runner.run, daemon=True).start()
        out.append((c, b.id))
    return out


def swiss(url: str, args: argparse.Namespace, stop_event: threading.Event) -> dict:
    org = ArenaClient(url)
    org.register("organizer")
    field = bots(url, args.bots, stop_event)
    starts_at = time.time() + args.window
    t = org.organize("swiss", name="bench", registration="open", starts_at=starts_at,
                     rounds=args.rounds, games_per_pairing=args.games, players=2,
                     move_limit=args.move_limit, min_entrants=2, max_entrants=64,
                     variants={"target": args.target})
    began = time.time()
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda cb: cb[0].enter(t.id), field))
    entered = time.time()
    assert entered < starts_at, "the entries took longer than the registration window"
    assert org.tournament(t.id).raw["entrant_count"] == args.bots
    viewer = ArenaClient(url)
    while time.time() < starts_at:
        time.sleep(0.005)
    first_games = None
    while first_games is None:
        d = viewer.tournament(t.id).raw
        seated = {b for r in d["rounds"] for g in r["games"] if g["game_id"]
                  for b in g["teams"]}
        byes = {b for r in d["rounds"][:1] for b in r["byes"]}
        if d["status"] == "running" and len(seated | byes) == args.bots:
            first_games = time.time() - starts_at
        time.sleep(POLL_S)
    while (d := viewer.tournament(t.id).raw)["status"] == "running":
        time.sleep(0.5)
    stop_event.set()  # its bots stop polling before the arena is measured
    games = [g for r in d["rounds"] for g in r["games"]]
    return {"swiss_bots": args.bots, "swiss_rounds": args.rounds, "swiss_status": d["status"],
            "swiss_games": len(games), "entered_s": round(entered - began, 3),
            "window_s": args.window, "first_games_s": round(first_games, 3),
            "clock_moves": sum(sum(g["timeouts"] or (0, 0)) for g in games),
            "swiss_finished_s": round(time.time() - starts_at, 1)}


def arena(url: str, redis_url: str, args: argparse.Namespace,
          stop_event: threading.Event) -> dict:
    org = ArenaClient(url)
    org.register("arena-organizer")
    field = bots(url, args.arena_bots, stop_event)
    duration = 1800 * args.scale
    t = org.organize("arena", name="bench-arena", registration="open", duration=duration,
                     players=2, move_limit=args.move_limit, min_entrants=2,
                     variants={"target": args.target})
    for c, _ in field:
        c.enter(t.id)
    org.start_tournament(t.id)
    viewer = ArenaClient(url)
    while viewer.tournament(t.id).raw["status"] == "running":
        time.sleep(0.5)
    store = Store(redis_client.connect(redis_url), PREFIX)
    doc = json.loads(store.r.get(f"{store.tours_prefix}tour:{t.id}"))
    slots = doc["rounds"][0]["slots"]
    ended = {}
    for s in slots:
        game = store.get_game(s["game"])
        ended[s["slot"]] = game.updated if game is not None else None
    waits, last_end = [], {}
    for s in sorted(slots, key=lambda s: s["paired_at"]):
        for b in s["entrants"]:
            if b in last_end and last_end[b] is not None:
                waits.append(max(0.0, s["paired_at"] - last_end[b]))
            last_end[b] = ended[s["slot"]]
    return {"arena_bots": args.arena_bots, "arena_duration_s": duration,
            "arena_games": len(slots), "wait_p50_s": pct(waits, 0.5, 3),
            "wait_p90_s": pct(waits, 0.9, 3), "wait_max_s": round(max(waits), 3),
            "waits": len(waits),
            "arena_status": doc["status"]}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bots", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--games", type=int, default=1, help="games per pairing")
    ap.add_argument("--target", type=int, default=7, help="points a game is played to")
    ap.add_argument("--move-limit", type=float, default=10.0)
    ap.add_argument("--window", type=float, default=20.0,
                    help="seconds from the tournament's creation to its start")
    ap.add_argument("--arena-bots", type=int, default=16)
    ap.add_argument("--scale", type=float, default=1 / 30,
                    help="the arena's 30 minutes, scaled")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--only", choices=("swiss", "arena"), default=None)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-open-tournament-"))
    redis_proc, redis_port = start_redis(work)
    service = None
    stop_event = threading.Event()
    try:
        service, port = start_service(redis_port, args.workers, work / "gunicorn.log", {
            "ARENA_KEY_PREFIX": PREFIX, "ARENA_ADMIN_TOKEN": "", "ARENA_RATE_LIMIT": "0",
            "ARENA_OWNERS_PER_NETWORK": "0", "ARENA_ANALYSIS_WORKERS": "0",
            "ARENA_TOURNAMENT_SCHEDULE": "[]", "ARENA_ACCESS_LOG": "0"})
        url = f"http://127.0.0.1:{port}"
        out: dict = {"admin_token": None}
        if args.only != "arena":
            out.update(swiss(url, args, threading.Event()))
        if args.only != "swiss":
            out.update(arena(url, f"redis://127.0.0.1:{redis_port}/0", args, stop_event))
        out["load_avg"] = round(os.getloadavg()[0], 1)  # the machine is shared
        print(json.dumps(out))
        return 0
    finally:
        stop_event.set()
        stop(service)
        stop(redis_proc)


if __name__ == "__main__":
    sys.exit(main())
