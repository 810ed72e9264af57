"""What one anonymous address can store in the arena (issue 22), against ``allfours serve``.

    python bench/abuse_storage.py [--bots 10000] [--house-games 1000] [--games 2000]
                                  [--retention 20] [--port 7620]

Starts a Redis of its own (free port, no persistence: what is measured is only this run's)
and ``allfours serve`` on it with every default except the retention, which is
``--retention`` seconds for everything that expires (``ARENA_BOT_UNUSED_TTL``,
``ARENA_PERSON_TTL``, ``ARENA_GAME_RETENTION``, ``ARENA_PERSON_GAME_RETENTION``,
``ARENA_WAITING_GAME_TTL``, ``ARENA_IDLE_GAME_TTL``), so that the end of the retention is
seen within the run. Then, from one address (loopback), as fast as 16 keep-alive
connections go (waiting for the request budget's next 10 s window between attacks):

1. ``attack_bots``: ``--bots`` anonymous ``POST /bots``;
2. ``attack_games``: ``--games`` ``POST /games`` (a 2-player game left waiting) spread over
   the tokens that step 1 got;
3. ``attack_house``: ``--house-games`` anonymous ``POST /house/games`` (each registers a
   person's account and starts a game the house bots play; the person never moves).

Each reports how many were accepted (201), refused by a creation quota (429
``ARENA_QUOTA_*``), by the request budget (429 ``ARENA_RATE_LIMIT``) or otherwise, and
the keys and bytes it left under the prefix (``MEMORY USAGE`` of every key, by family; and
``used_memory``'s growth). ``after_retention`` waits out the retention (and the sweeper's
retention pass) and counts what is left of it all. Prints ONE JSON line; every attack is a
function returning a dict, for ``bench/abuse.py`` to call.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as ``python bench/abuse_storage.py``, this file's directory comes first on sys.path,
# where bench/http.py would shadow the standard library's ``http``.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))
ROOT = _HERE.parent

import argparse  # noqa: E402
import http.client  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from collections import Counter  # noqa: E402
from typing import Any  # noqa: E402

import redis  # noqa: E402

from bench.harness import HOST, start_redis, stop, wait_until  # noqa: E402

PREFIX = "af:"
CONNECTIONS = 16
RETENTION = ("ARENA_BOT_UNUSED_TTL", "ARENA_PERSON_TTL", "ARENA_GAME_RETENTION",
             "ARENA_PERSON_GAME_RETENTION", "ARENA_WAITING_GAME_TTL", "ARENA_IDLE_GAME_TTL")
# key families, by what follows the prefix (the order matters: first match)
FAMILIES = [
    ("game", re.compile(r"game:[^:]+$")), ("game:idem", re.compile(r"game:[^:]+:idem$")),
    ("bot", re.compile(r"bot:[^:]+$")), ("bot:turns", re.compile(r"bot:[^:]+:(turns|games)$")),
    ("token", re.compile(r"token:")), ("games:seq", re.compile(r"games:seq$")),
    ("games index", re.compile(r"games:")),
    ("deadlines", re.compile(r"deadlines$")), ("rate counter", re.compile(r"rl:")),
    ("quota counter", re.compile(r"quota:")), ("house", re.compile(r"house")),
]


def family(key: str) -> str:
    rest = key[len(PREFIX):]
    for name, pattern in FAMILIES:
        if pattern.match(rest):
            return name
    return "other"


def snapshot(r: redis.Redis) -> dict[str, Any]:
    """Every key under the prefix: count, bytes (MEMORY USAGE) and count without expiry,
    by family; and the server's used_memory."""
    fam: dict[str, dict[str, int]] = {}
    for raw in r.scan_iter(match=f"{PREFIX}*", count=1000):
        key = raw.decode()
        pipe = r.pipeline(transaction=False)
        pipe.memory_usage(key, samples=0)
        pipe.ttl(key)
        size, ttl = pipe.execute()
        if size is None:
            continue  # expired meanwhile
        f = fam.setdefault(family(key), {"keys": 0, "bytes": 0, "no_expiry": 0})
        f["keys"] += 1
        f["bytes"] += int(size)
        f["no_expiry"] += ttl == -1
    return {"families": fam, "used_memory": int(r.info("memory")["used_memory"])}


def diff(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in sorted(set(before["families"]) | set(after["families"])):
        a = before["families"].get(name, {"keys": 0, "bytes": 0, "no_expiry": 0})
        b = after["families"].get(name, {"keys": 0, "bytes": 0, "no_expiry": 0})
        d = {k: b[k] - a[k] for k in b}
        if any(d.values()):
            out[name] = d
    return {"by_family": out, "keys": sum(d["keys"] for d in out.values()),
            "bytes": sum(d["bytes"] for d in out.values()),
            "used_memory": after["used_memory"] - before["used_memory"]}


def flood(port: int, n: int, make: Any) -> tuple[Counter[str], list[Any], float]:
    """``n`` requests ``make(i) -> (method, path, body, token)`` over ``CONNECTIONS``
    keep-alive connections: (outcomes, the accepted answers, seconds)."""
    outcomes: Counter[str] = Counter()
    accepted: list[Any] = []
    lock = threading.Lock()
    counter = iter(range(n))

    def worker() -> None:
        conn = http.client.HTTPConnection(HOST, port, timeout=30)
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                break
            method, path, body, token = make(i)
            headers = {"Content-Type": "application/json"}
            if token:
                headers["Authorization"] = f"Bearer {token}"
            try:
                conn.request(method, path, json.dumps(body), headers)
                resp = conn.getresponse()
                data = json.loads(resp.read() or b"null")
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = http.client.HTTPConnection(HOST, port, timeout=30)
                with lock:
                    outcomes["connection error"] += 1
                continue
            if resp.status == 201:
                what = "accepted"
            elif resp.status == 429:
                detail = (data or {}).get("detail", "")
                what = ("refused by quota" if "ARENA_QUOTA" in detail
                        else "refused by request budget")
            else:
                what = f"status {resp.status}"
            with lock:
                outcomes[what] += 1
                if resp.status == 201:
                    accepted.append(data)
        conn.close()

    start = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(CONNECTIONS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcomes, accepted, time.perf_counter() - start


def attack(r: redis.Redis, port: int, n: int, make: Any) -> tuple[dict[str, Any], list[Any]]:
    before = snapshot(r)
    outcomes, accepted, seconds = flood(port, n, make)
    made = diff(before, snapshot(r))
    ok = outcomes.get("accepted", 0)
    return {"requests": n, "seconds": round(seconds, 1), **dict(outcomes),
            "stored": made,
            "bytes_per_accepted": round(made["bytes"] / ok) if ok else None,
            "used_memory_per_accepted": round(made["used_memory"] / ok) if ok else None,
            }, accepted


def attack_bots(r: redis.Redis, port: int, n: int = 10_000) -> tuple[dict[str, Any], list[str]]:
    """``n`` anonymous ``POST /bots``: the figures, and the tokens it got."""
    out, bots = attack(r, port, n, lambda i: ("POST", "/bots", {"name": f"flood{i}"}, None))
    return out, [b["token"] for b in bots]


def attack_games(r: redis.Redis, port: int, tokens: list[str], n: int = 2000
                 ) -> dict[str, Any]:
    """``n`` ``POST /games`` (waiting 2-player games) spread over ``tokens``."""
    if not tokens:
        return {"requests": 0}
    out, _ = attack(r, port, n, lambda i: ("POST", "/games", {"players": 2},
                                          tokens[i % len(tokens)]))
    return out


def attack_house(r: redis.Redis, port: int, n: int = 1000) -> dict[str, Any]:
    """``n`` anonymous ``POST /house/games``, nobody playing the person's seat."""
    out, _ = attack(r, port, n, lambda i: ("POST", "/house/games",
                                          {"players": 2, "name": "guest"}, None))
    return out


def after_retention(r: redis.Redis, baseline: dict[str, Any], retention_s: float,
                    timeout_s: float) -> dict[str, Any]:
    """Wait until nothing the attacks made is left (but the counters of the hour's
    window, which expire with it), at most ``timeout_s``: what is left, and when."""
    start = time.monotonic()

    def left() -> dict[str, Any]:
        made = diff(baseline, snapshot(r))
        made["by_family"] = {k: v for k, v in made["by_family"].items()
                             if k not in ("quota counter", "rate counter", "house",
                                          "games:seq")}
        return made

    now = left()
    while time.monotonic() - start < timeout_s:
        if not any(v["keys"] > 0 for v in now["by_family"].values()):
            break
        time.sleep(2)
        now = left()
    counters = {k: v for k, v in diff(baseline, snapshot(r))["by_family"].items()
                if k in ("quota counter", "rate counter")}
    return {"retention_s": retention_s,
            "waited_s": round(time.monotonic() - start, 1),
            "left_by_family": {k: v for k, v in now["by_family"].items() if v["keys"] > 0},
            "left_keys": sum(max(0, v["keys"]) for v in now["by_family"].values()),
            "counters_left_with_expiry": counters}


def next_window(window_s: int = 10) -> None:
    """Wait for the request budget's next window (``ARENA_RATE_WINDOW``, fixed windows of
    unix time): each attack meets the quotas with a budget of its own."""
    time.sleep(window_s - time.time() % window_s + 0.1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bots", type=int, default=10_000)
    ap.add_argument("--games", type=int, default=2000)
    ap.add_argument("--house-games", type=int, default=1000)
    ap.add_argument("--retention", type=int, default=45,
                    help="seconds, every retention: longer than an attack takes (what it "
                    "stored is counted before it expires), shorter than the house games' "
                    "move limit (60 s: a house game whose person never moves is played by "
                    "the clock until it ends, so it idles out only if its idle expiry is "
                    "shorter)")
    ap.add_argument("--port", type=int, default=7620)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="abuse-storage-") as tmp:
        redis_proc, redis_port = start_redis(Path(tmp))
        url = f"redis://{HOST}:{redis_port}/0"
        env = {**os.environ, "REDIS_URL": url, "PYTHONPATH": str(ROOT),
               "ARENA_ACCESS_LOG": "0", **{k: str(args.retention) for k in RETENTION}}
        log = Path(tmp) / "serve.log"
        with log.open("wb") as out:
            serve = subprocess.Popen([sys.executable, "-m", "service.cli.main", "serve",
                                      "--port", str(args.port)], env=env, stdout=out,
                                     stderr=out, cwd=tmp)
        r = redis.Redis.from_url(url)
        try:
            wait_until(lambda: r.exists(f"{PREFIX}house:alive"), 90, "the house bots")
            baseline = snapshot(r)
            bots, tokens = attack_bots(r, args.port, args.bots)
            next_window()
            games = attack_games(r, args.port, tokens, args.games)
            next_window()
            house = attack_house(r, args.port, args.house_games)
            gone = after_retention(r, baseline, args.retention, 6 * args.retention + 60)
            print(json.dumps({"bench": "abuse_storage", "address": "127.0.0.1",
                              "retention_s": args.retention, "bots": bots, "games": games,
                              "house_games": house, "after_retention": gone}))
        finally:
            stop(serve, sig=2)
            stop(redis_proc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
