"""How many requests the project's own bots send: what the default rate limit is sized from.

    python bench/request_rates.py [--games 8] [--bots random,random,heuristic,heuristic]
                                  [--bot-games 6] [--target 14]

Two loads, each against its own service started as ``allfours tournament`` starts one
(embedded valkey-server + gunicorn) with the rate limit **off** (``ARENA_RATE_LIMIT=0``),
so what is measured is what the bots ask for at full speed, not what a limit lets through:

1. ``tournament``: ``allfours tournament --players 4 --games N --bots ...`` run in this
   process (``service.cli.tournament.run``), its entrants' ``BotRunner`` threads as the
   command uses them (turn long-poll of 1 s, ``?wait`` actions).
2. ``bots``: two ``BotRunner`` with the defaults of ``allfours bot`` (poll 10 s, act wait
   10 s, 4 workers) playing ``--bot-games`` 2-player games against each other at once.

Every request of every ``ArenaClient`` is recorded (time, token, operation). Per bot:
requests, actions (moves), requests per move, the mean rate and the peak number of
requests in any 1 s, 10 s and 60 s window. Prints one JSON line per load and a summary
line with the highest per-bot peak over 60 s and the highest moves per second of one bot.

The machine's speed bounds the rates (the bots wait for the service and for each other):
on a faster or idle host they are higher, which is why the defaults leave headroom.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # not bench/, whose http.py would shadow the standard library's

from clients.api import ArenaClient  # noqa: E402

LOG: list[tuple[float, str, str]] = []  # (monotonic time, token, operation id)
_LOCK = threading.Lock()
_send = ArenaClient._send


def _recording_send(self: ArenaClient, name: str, *args: Any, **kw: Any) -> Any:
    with _LOCK:
        LOG.append((time.monotonic(), self.token or "", name))
    return _send(self, name, *args, **kw)


ArenaClient._send = _recording_send  # type: ignore[method-assign]


def peak(times: list[float], window: float) -> int:
    """The most requests in any ``window`` seconds (sliding)."""
    best = 0
    for i, t in enumerate(times):
        best = max(best, bisect.bisect_right(times, t + window) - i)
    return best


def summarize(load: str, log: list[tuple[float, str, str]]) -> dict[str, Any]:
    per: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for t, token, name in log:
        if token:
            per[token].append((t, name))
    bots = []
    for rows in per.values():
        times = sorted(t for t, _ in rows)
        acts = sum(1 for _, n in rows if n == "act")
        span = max(times[-1] - times[0], 1e-9)
        by_op: dict[str, int] = defaultdict(int)
        for _, n in rows:
            by_op[n] += 1
        bots.append({
            "requests": len(times), "actions": acts, "seconds": round(span, 1),
            "requests_per_action": round(len(times) / max(acts, 1), 3),
            "mean_rps": round(len(times) / span, 2),
            "moves_per_s": round(acts / span, 2),
            "peak_1s": peak(times, 1.0), "peak_10s": peak(times, 10.0),
            "peak_60s": peak(times, 60.0), "by_operation": dict(by_op),
        })
    anon = sorted(t for t, token, _ in log if not token)
    return {"load": load, "bots": bots,
            "anonymous": {"requests": len(anon), "peak_60s": peak(anon, 60.0)},
            "max_peak_60s": max(b["peak_60s"] for b in bots),
            "max_peak_1s": max(b["peak_1s"] for b in bots),
            "max_moves_per_s": max(b["moves_per_s"] for b in bots),
            "max_requests_per_action": max(b["requests_per_action"] for b in bots)}


def tournament_load(args: argparse.Namespace) -> dict[str, Any]:
    from service.cli import tournament as tournament_cli

    parser = argparse.ArgumentParser()
    tournament_cli.add_arguments(parser)
    with tempfile.TemporaryDirectory() as tmp:
        targs = parser.parse_args([
            "--bots", args.bots, "--players", "4", "--games", str(args.games), "--quiet",
            "--json-out", str(Path(tmp) / "t.json"), "--timeout", "900"])
        started = len(LOG)
        t0 = time.monotonic()
        code = tournament_cli.run(targs, {"target": args.target} if args.target else {})
        elapsed = time.monotonic() - t0
        doc = json.loads((Path(tmp) / "t.json").read_text())
    out = summarize("tournament", LOG[started:])
    out.update({"exit": code, "games": doc["progress"]["games_done"],
                "elapsed_s": round(elapsed, 1)})
    return out


def bots_load(args: argparse.Namespace) -> dict[str, Any]:
    from clients.runner import BotRunner
    from service.cli.embedded_service import EmbeddedService

    service = EmbeddedService("bench-admin", None, None)
    url = service.start()
    started = len(LOG)
    try:
        clients = [ArenaClient(url) for _ in range(2)]
        first = clients[0].register("bot0")  # one owner's bots: seated at once (issue 23)
        ids = [first.id, clients[1].register("bot1", owner=first.token).id]
        for _ in range(args.bot_games):
            clients[0].create_game(2, seats=ids,
                                   variants={"target": args.target} if args.target else None)
        runners = [BotRunner(c, "random", max_games=args.bot_games) for c in clients]
        threads = [threading.Thread(target=r.run) for r in runners]
        t0 = time.monotonic()
        for th in threads:
            th.start()
        for th in threads:
            th.join(900)
        elapsed = time.monotonic() - t0
        for r in runners:
            r.stop()
        for c in clients:
            c.close()
    finally:
        service.stop()
    out = summarize("bots", LOG[started:])
    out.update({"games": args.bot_games, "elapsed_s": round(elapsed, 1)})
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--games", type=int, default=8, help="tournament games per pairing")
    p.add_argument("--bots", default="random,random,heuristic,heuristic")
    p.add_argument("--bot-games", type=int, default=6)
    p.add_argument("--target", type=int, default=None, help="points to win (default 14)")
    p.add_argument("--only", choices=("tournament", "bots"), default=None)
    args = p.parse_args()
    os.environ["ARENA_RATE_LIMIT"] = "0"  # measure the demand, not what a limit lets through
    results = []
    if args.only in (None, "tournament"):
        results.append(tournament_load(args))
    if args.only in (None, "bots"):
        results.append(bots_load(args))
    for r in results:
        print(json.dumps(r))
    print(json.dumps({"summary": True,
                      "max_peak_60s": max(r["max_peak_60s"] for r in results),
                      "max_peak_1s": max(r["max_peak_1s"] for r in results),
                      "max_moves_per_s": max(r["max_moves_per_s"] for r in results),
                      "max_requests_per_action": max(r["max_requests_per_action"]
                                                     for r in results)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
