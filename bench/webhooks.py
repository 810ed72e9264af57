"""Webhook move latency next to the pulled ``?wait`` path, in one run.

    python bench/webhooks.py [--games 8] [--tables 4] [--workers 2] [--target 7]

What it does:

1. Starts its own Redis (``redis-server`` or the embedded valkey, on a free port, no
   persistence; the shared 127.0.0.1:6379 is never touched) and the service under gunicorn
   exactly as deployed (gevent workers, each running its callback dispatcher), with
   ``ARENA_CALLBACK_NETWORKS=127.0.0.0/8`` so it may call a bot on this machine.
2. Serves the copyable example bot (``clients/examples/webhook_bot.py``: Flask, checking
   every signature, timestamp and delivery id) on loopback with werkzeug's threaded server,
   and registers it as the callback of bot H.
3. Phase ``webhook``: ``--games`` 2-player games, ``--tables`` at a time, H (called by the
   service) against a pulling opponent. Phase ``pull_wait``: the same games (same seeds)
   with H pulling instead: ``POST /games/{id}/actions?wait=25`` answers when its turn comes
   again, and it posts its next action at once (one request per move, the fastest pull).
   Both H's choose the first legal action, as does the opponent (which pulls in both).
4. Measured, service-side, for every turn of H: from the commit that made it H's turn to
   the commit of H's action. Both instants are the ``updated`` stamps the service writes
   with each commit and publishes on the game's channel (one clock, the service's); this
   process reads them from a pub/sub subscription on its private Redis. Turns whose start
   was not an action (the game's creation) are left out. Reported: n, p50, p99, mean (ms).

Everything shares the machine's cores (the bots, the service, Redis): the figures are for
comparing the two paths in the same conditions, not absolute capacity. Prints one JSON
object.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

# Run as ``python bench/webhooks.py``, bench/ comes first on sys.path, where bench/http.py
# would shadow the standard library's ``http`` package: drop it.
_HERE = Path(__file__).resolve().parent
ROOT = _HERE.parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402
import requests  # noqa: E402
from werkzeug.serving import make_server  # noqa: E402

from bench.harness import HOST, stop, wait_until  # noqa: E402
from clients.examples import webhook_bot  # noqa: E402
from service.arena.webhooks.callbacks import DEFAULTS as CALLBACK_DEFAULTS  # noqa: E402
from service.cli.serve import gunicorn_command  # noqa: E402
from service.storage.embedded import die_with_parent, find_server_binary, free_port, ping  # noqa: E402
from service.storage.wakeups import game_message  # noqa: E402


class Api:
    def __init__(self, url: str, token: str | None = None) -> None:
        self.url = url
        self.s = requests.Session()
        if token:
            self.s.headers["Authorization"] = f"Bearer {token}"

    def call(self, method: str, path: str, body: Any = None, **params: Any) -> Any:
        r = self.s.request(method, self.url + path, json=body, params=params, timeout=60)
        if r.status_code >= 500:
            raise RuntimeError(f"{method} {path}: {r.status_code} {r.text}")
        return r.status_code, (r.json() if r.content else None)


def pull_player(url: str, token: str, game_id: str) -> None:
    """Play to the end by pull: act with ``?wait`` (first legal action), long-poll only to
    start or after a conflict."""
    api = Api(url, token)
    _, ans = api.call("GET", f"/games/{game_id}/turn", timeout=25)
    view = ans["view"]
    while view["status"] != "finished":
        if not view["your_turn"]:
            _, ans = api.call("GET", f"/games/{game_id}/turn", timeout=25,
                              after=view["version"])
            view = ans["view"]
            continue
        code, body = api.call("POST", f"/games/{game_id}/actions",
                              {"action": view["legal_actions"][0], "version": view["version"]},
                              wait=25)
        if code == 200:
            view = body
        else:  # moved on (a timeout played for us): look again
            _, ans = api.call("GET", f"/games/{game_id}/turn", timeout=25)
            view = ans["view"]


class Stamps:
    """Every action commit of every game, from the game channels: game -> version ->
    (seat in turn, commit time)."""

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self.games: dict[str, dict[int, tuple[int | None, float]]] = {}
        self.client = client
        self.pattern = f"{prefix}game:*:changed"
        self.head = f"{prefix}game:"
        self._stop = threading.Event()
        self._ready = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("no pub/sub subscription")

    def run(self) -> None:
        pubsub = self.client.pubsub()
        pubsub.psubscribe(self.pattern)
        while not self._stop.is_set():
            msg = pubsub.get_message(timeout=0.5)
            if msg and msg["type"] == "psubscribe":
                self._ready.set()
            if not msg or msg["type"] != "pmessage":
                continue
            channel = msg["channel"].decode()
            game_id = channel[len(self.head):].split(":", 1)[0]
            parsed = game_message(msg["data"])
            if parsed is None or parsed.updated is None:
                continue
            self.games.setdefault(game_id, {})[parsed.version] = (parsed.seat, parsed.updated)

    def latencies(self, game_id: str, seat: int) -> list[float]:
        """Seconds from each commit that made it ``seat``'s turn to the next commit."""
        got = self.games.get(game_id, {})
        out = []
        for v, (turn, at) in got.items():
            if turn == seat and v + 1 in got:
                out.append(got[v + 1][1] - at)
        return out

    def close(self) -> None:
        self._stop.set()
        self.thread.join(2)


def summary(samples: list[float]) -> dict[str, Any]:
    ms = sorted(x * 1000 for x in samples)
    if not ms:
        return {"n": 0}
    return {"n": len(ms), "p50_ms": round(statistics.median(ms), 2),
            "p99_ms": round(ms[min(len(ms) - 1, int(len(ms) * 0.99))], 2),
            "mean_ms": round(statistics.fmean(ms), 2), "max_ms": round(ms[-1], 2)}


def run_phase(url: str, stamps: Stamps, hook: tuple[str, str] | None, games: int,
              tables: int, target: int, move_limit: float) -> dict[str, Any]:
    """``hook``: (bot id, token) of the webhook bot; None: H pulls."""
    lock = threading.Lock()
    samples: list[float] = []
    timeouts = [0]
    todo = list(range(games))

    def table() -> None:
        while True:
            with lock:
                if not todo:
                    return
                seed = todo.pop()
            api = Api(url)
            if hook is None:
                _, h = api.call("POST", "/bots", {"name": "h"})
            h_id, h_token = hook if hook is not None else (h["id"], h["token"])
            # the hook bot's owner: seated with it at once (issue 23)
            _, o = Api(url, h_token).call("POST", "/bots", {"name": "o"})
            _, game = Api(url, o["token"]).call(
                "POST", "/games", {"players": 2, "seats": [h_id, o["id"]], "seed": seed,
                                   "variants": {"target": target}, "move_limit": move_limit})
            threads = [threading.Thread(target=pull_player, args=(url, o["token"], game["id"]))]
            if hook is None:
                threads.append(threading.Thread(target=pull_player,
                                                args=(url, h_token, game["id"])))
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            _, record = api.call("GET", f"/games/{game['id']}/record")
            last = len(record["actions"]) + 1  # the final version (no joins: seats given)
            wait_until(lambda last=last, gid=game["id"]: last in stamps.games.get(gid, {}),
                       10, "the stamps")
            with lock:
                samples.extend(stamps.latencies(game["id"], 0))
                timeouts[0] += sum(1 for t in record["timeouts"] if t["seat"] == 0)

    started = time.monotonic()
    workers = [threading.Thread(target=table) for _ in range(tables)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return {**summary(samples), "timeouts": timeouts[0],
            "seconds": round(time.monotonic() - started, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--games", type=int, default=8, help="games per phase")
    ap.add_argument("--tables", type=int, default=4, help="games at a time")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--target", type=int, default=7, help="points a game is played to")
    ap.add_argument("--move-limit", type=float, default=10.0)
    ap.add_argument("--host-rate", type=int, default=None,
                    help="ARENA_CALLBACK_HOST_RATE for the service (default: the service's)")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench-webhooks-"))
    redis_proc = service = None
    server = None
    try:
        binary = find_server_binary()
        rport = free_port()
        redis_proc = subprocess.Popen(
            [binary, "--bind", HOST, "--port", str(rport), "--save", "", "--appendonly", "no",
             "--dir", str(tmp)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=die_with_parent)
        wait_until(lambda: ping(HOST, rport), 20, "redis")
        prefix = f"bench:{uuid.uuid4().hex[:8]}:"
        port = free_port()
        env = {**os.environ, "REDIS_URL": f"redis://{HOST}:{rport}/0", "ARENA_KEY_PREFIX": prefix,
               "ARENA_RATE_LIMIT": "0", "ARENA_LOG_LEVEL": "warning", "ARENA_ACCESS_LOG": "0",
               "ARENA_CALLBACK_NETWORKS": "127.0.0.0/8", "PYTHONPATH": str(ROOT)}
        if args.host_rate is not None:
            env["ARENA_CALLBACK_HOST_RATE"] = str(args.host_rate)
        log = (tmp / "service.log").open("wb")
        service = subprocess.Popen(gunicorn_command(HOST, port, args.workers), env=env,
                                   stdout=log, stderr=log, cwd=ROOT, preexec_fn=die_with_parent)
        url = f"http://{HOST}:{port}"

        def up() -> bool:
            try:
                return requests.get(url + "/healthz", timeout=1).status_code == 200
            except OSError:
                return False

        wait_until(up, 60, "the service")
        stamps = Stamps(redis.Redis(host=HOST, port=rport), prefix)

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
        _, hook = Api(url).call("POST", "/bots", {"name": "webhook"})
        box: dict[str, Any] = {}
        server = make_server(HOST, 0, lambda e, s: box["app"](e, s), threaded=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        _, reg = Api(url, hook["token"]).call(
            "PUT", "/bots/me/callback", {"url": f"http://{HOST}:{server.server_port}/"})
        webhook_bot.choose = lambda view, legal: legal[0]  # the same games as by pull
        box["app"] = webhook_bot.create_app(reg["secret"])
        # nothing but the verification reaches the URL until it has echoed the challenge
        # (about a second after the registration): wait for it, outside the measurement
        started = time.monotonic()

        def verified() -> bool:
            return bool(Api(url, hook["token"]).call("GET", "/bots/me/callback")[1]["verified"])

        wait_until(verified, 30, "the callback URL's verification")
        verify_s = round(time.monotonic() - started, 2)

        webhook = run_phase(url, stamps, (hook["id"], hook["token"]), args.games, args.tables,
                            args.target, args.move_limit)
        _, deliveries = Api(url, hook["token"]).call("GET", "/bots/me/callback/deliveries",
                                                     limit=200)
        outcomes: dict[str, int] = {}
        for d in deliveries["deliveries"]:
            outcomes[d["outcome"]] = outcomes.get(d["outcome"], 0) + 1
        webhook["latest_200_outcomes"] = outcomes
        pull = run_phase(url, stamps, None, args.games, args.tables, args.target,
                         args.move_limit)
        stamps.close()
        print(json.dumps({
            "bench": "webhooks",
            "measure": "service-side ms from the commit that made it H's turn to the commit "
                       "of H's action",
            "config": {"games": args.games, "tables": args.tables, "workers": args.workers,
                       "target": args.target, "move_limit": args.move_limit,
                       "host_rate": args.host_rate if args.host_rate is not None else
                       CALLBACK_DEFAULTS["ARENA_CALLBACK_HOST_RATE"],
                       "cpus": os.cpu_count(), "host": socket.gethostname()},
            "verified_after_s": verify_s,
            "webhook": webhook,
            "pull_wait": pull,
        }, indent=2))
    finally:
        if server is not None:
            server.shutdown()
        stop(service, 15)
        stop(redis_proc, 15)


if __name__ == "__main__":
    main()
