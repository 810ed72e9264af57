"""A bot's games, home: ``GET /bots/{id}/games`` over many finished games of one bot.

    python bench/export.py [--games 10000] [--page 100]

Starts its own Redis and the service as deployed (gunicorn, one gevent worker, so the
serving process is one process whose memory can be read), registers two bots, and writes
``--games`` finished games of the first straight through the store (a handful of games
played to their end by the engine, copied under new ids, and indexed as the commit that
finishes a game indexes it: playing 10,000 games through HTTP would take an hour here).
Then, one after the other:

1. ``ndjson``: one ``Accept: application/x-ndjson`` request, every game with its full
   record (the record is replayed from the seed and actions for each game, as ``GET
   /games/{id}/record`` does), read line by line;
2. ``pages``: the paged JSON (``limit=--page``), following ``next_cursor``.

For each: games per second (wall clock, so under load it is noisy), the answer's bytes,
and the serving process's peak memory growth during the export: its RSS
(``/proc/<pid>/status`` VmRSS) sampled every 10 ms, the largest value less the value
just before the export. The target is flat, at most 50 MB whatever the count: the export
holds one batch of games at a time. ``--games`` at two sizes shows the growth does not
follow the count.

Prints one JSON line.
"""

from __future__ import annotations

import sys
from pathlib import Path

# this file's directory holds bench/http.py, which would shadow the standard library's
# ``http`` package: drop it from the path, put the repository first
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import argparse  # noqa: E402
import http.client  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from typing import Any  # noqa: E402

import redis  # noqa: E402

from bench.harness import HOST, children, rss_kb, start_redis, start_service, stop  # noqa: E402
from bench.http import Client, one_owners_bots  # noqa: E402
from service import jsonio  # noqa: E402
from service.engine import (  # noqa: E402
    Variants,
    apply,
    current_seat,
    legal_actions,
    new_game,
)
from service.storage.store import Store  # noqa: E402

TARGET_MB = 50
DISTINCT = 16  # games played by the engine; the rest are copies of them under new ids


def played(seed: int) -> tuple[str, str]:
    """A 2-player game to 7 played to its end at random: (final state JSON, action log)."""
    state, _ = new_game(2, seed, Variants.from_dict({"target": 7}))
    rng = random.Random(seed)
    log = []
    while not state.is_over:
        action = rng.choice(legal_actions(state))
        state, _ = apply(state, action, seat=current_seat(state))
        log.append(chr(48 + action))
    return jsonio.dumps(state.to_dict()), "".join(log)


def write_games(store: Store, bots: list[dict[str, Any]], n: int) -> float:
    """``n`` finished games of ``bots[0]`` against ``bots[1]``, one a second apart (the
    newest now), written and indexed in batches; the seconds it took."""
    t0 = time.perf_counter()
    games = [played(s) for s in range(DISTINCT)]
    seats = [bots[0]["id"], bots[1]["id"]]
    names = [bots[0]["name"], bots[1]["name"]]
    now = time.time()
    pipe = store.r.pipeline(transaction=False)
    for i in range(n):
        seed = i % DISTINCT
        state_json, log = games[seed]
        gid = uuid.uuid4().hex[:12]
        at = now - (n - i)
        meta = {"players": 2, "seed": seed, "variants": {"target": 7},
                "seats": seats if i % 2 else seats[::-1],
                "names": names if i % 2 else names[::-1], "created": int(at) - 60}
        pipe.hset(store.game_key(gid), mapping={
            "state": state_json, "meta": jsonio.dumps(meta), "status": "finished",
            "version": len(log) + 1, "log": log, "updated": repr(at)})
        pipe.zadd(store.keys.index("all"), {gid: i})
        pipe.zadd(store.keys.index("finished"), {gid: i})
        for b in seats:
            pipe.zadd(store.bot_finished_key(b), {gid: at})
        if i % 1000 == 999:
            pipe.execute()
    pipe.execute()
    return time.perf_counter() - t0


class RssPeak:
    """The largest RSS of ``pid`` while running, sampled every 10 ms."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.base = rss_kb(pid)
        self.peak = self.base
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            self.peak = max(self.peak, rss_kb(self.pid))
            self.samples += 1

    def __enter__(self) -> RssPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_kb(self.pid))

    @property
    def growth_mb(self) -> float:
        return round((self.peak - self.base) / 1024, 1)


def export_ndjson(port: int, bot_id: str) -> dict[str, Any]:
    conn = http.client.HTTPConnection(HOST, port, timeout=600)
    t0 = time.perf_counter()
    conn.request("GET", f"/bots/{bot_id}/games", headers={"Accept": "application/x-ndjson"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"export: {resp.status} {resp.read()[:300]!r}")
    lines = size = 0
    first = None
    for line in resp:
        size += len(line)
        lines += 1
        if first is None:
            first = json.loads(line)
    took = time.perf_counter() - t0
    conn.close()
    assert first is not None and first["record"]["complete"] is True
    return {"games": lines, "seconds": round(took, 2), "games_per_s": round(lines / took, 1),
            "bytes": size}


def export_pages(port: int, bot_id: str, page: int) -> dict[str, Any]:
    client = Client(port, timeout=600)
    t0 = time.perf_counter()
    games = pages = size = 0
    path: str | None = f"/bots/{bot_id}/games?limit={page}"
    while path:
        status, body = client.get(path)
        if status != 200:
            raise RuntimeError(f"page: {status} {body[:300]!r}")
        doc = json.loads(body)
        games += len(doc["items"])
        pages += 1
        size += len(body)
        path = (f"/bots/{bot_id}/games?limit={page}&cursor={doc['next_cursor']}"
                if doc["next_cursor"] else None)
    took = time.perf_counter() - t0
    return {"games": games, "pages": pages, "seconds": round(took, 2),
            "games_per_s": round(games / took, 1), "bytes": size}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", type=int, default=10_000)
    parser.add_argument("--page", type=int, default=100, help="items per page (pages)")
    args = parser.parse_args()
    prefix = f"export{os.getpid()}:"
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="arena-export-") as tmp:
        redis_proc, redis_port = start_redis(Path(tmp))
        gunicorn = None
        try:
            gunicorn, port = start_service(redis_port, 1, Path(tmp) / "gunicorn.log", {
                "ARENA_KEY_PREFIX": prefix, "ARENA_RATE_LIMIT": str(10**9),
                "ARENA_LOG_LEVEL": "warning", "ARENA_SWEEPER": "0",
                "ARENA_OWNERS_PER_NETWORK": "0"})
            # the worker is forked from the arbiter (its command line); the analysis
            # supervisor the arbiter also starts is a command of its own
            workers = [p for p in children(gunicorn.pid)
                       if b"gunicorn" in Path(f"/proc/{p}/cmdline").read_bytes()]
            if len(workers) != 1:
                raise RuntimeError(f"expected one gunicorn worker, found {workers}")
            worker = workers[0]
            bots = one_owners_bots(Client(port), 2, "export")
            store = Store(redis.Redis(host=HOST, port=redis_port), prefix)
            wrote = write_games(store, bots, args.games)
            warm = Client(port)  # the worker's code paths, not its heap: a few games only
            for _ in range(3):
                warm.get(f"/bots/{bots[0]['id']}/games?limit=5")
                conn = http.client.HTTPConnection(HOST, port, timeout=60)
                oldest = time.time() - args.games + 3  # the three oldest games
                conn.request("GET", f"/bots/{bots[0]['id']}/games?until={oldest}",
                             headers={"Accept": "application/x-ndjson"})
                conn.getresponse().read()
                conn.close()
            with RssPeak(worker) as nd_mem:
                ndjson = export_ndjson(port, bots[0]["id"])
            with RssPeak(worker) as pg_mem:
                pages = export_pages(port, bots[0]["id"], args.page)
            for out, mem in ((ndjson, nd_mem), (pages, pg_mem)):
                out.update(rss_peak_growth_mb=mem.growth_mb, rss_samples=mem.samples,
                           rss_peak_mb=round(mem.peak / 1024, 1))
            result = {
                "bench": "export", "games": args.games, "page": args.page,
                "write_s": round(wrote, 2), "rss_before_mb": round(nd_mem.base / 1024, 1),
                "ndjson": ndjson, "pages": pages, "target_mb": TARGET_MB,
                "met": {"ndjson": ndjson["rss_peak_growth_mb"] <= TARGET_MB
                        and ndjson["games"] == args.games,
                        "pages": pages["rss_peak_growth_mb"] <= TARGET_MB
                        and pages["games"] == args.games},
                "loadavg_1m_before": round(load, 2),
            }
        finally:
            stop(gunicorn)
            stop(redis_proc)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
