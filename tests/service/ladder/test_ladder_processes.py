"""The ladder across two real service processes on one Redis.

Each process runs its own matchmaker (in its gunicorn worker, as deployed), so every
claim, binding and rating races the other process's:

- bots played by the real runner (``BotRunner(ladder=...)``, what ``allfours bot
  --ladder`` runs), half talking to each process, finish their games; each bot's games
  never overlap (each was claimed after the previous one was rated); ratings equal a replay
  of the results in rating order; every result is the game's own;
- forty bots join at once through both processes: each is seated in exactly one game;
- a bot that never moves is paused after its timeouts, with the reason in its entry.

Every wait is bounded; both processes are stopped in the fixture's finalizer.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from clients.api import ArenaClient
from clients.runner import BotRunner
from service.arena.core import ratings
from tests.conftest import REDIS_URL
from tests.test_serve import Serve, kill_leftovers

# each test starts what it needs (no module-wide service): pytest-xdist may run them on
# different workers (tests/conftest.py)
SPREAD_OVER_WORKERS = True
EXPECTED_S = 75  # seconds, the whole module: the order workers take it in (tests/conftest.py)

LADDERS = {"quick": {"players": 2, "variants": {"target": 5}, "move_limit": 20},
           # no time bank: the idle bot's timeouts come every half second, not after a
           # ladder's default bank of its own has drained
           "strict": {"players": 2, "move_limit": 0.5, "time_bank": 0}}
T = 15.0


@pytest.fixture
def services(tmp_path: Path, key_prefix: str, redis_client) -> Iterator[list[str]]:
    env = {"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix, "ARENA_RATE_LIMIT": "0",
           "ARENA_HOUSE_BOTS": "0", "ARENA_LADDERS": json.dumps(LADDERS),
           "ARENA_LADDER_REMATCH_WAIT": "0.5",
           # every bot here is an owner of its own (one owner's bots never meet on a
           # ladder), all registered from this machine: no per-network cap on owners
           "ARENA_OWNERS_PER_NETWORK": "0"}
    started = [Serve(tmp_path, tmp_path / "unused-data", **env) for _ in range(2)]
    try:
        for process in started:
            process.wait_healthy()
        yield [process.url("") for process in started]
    finally:
        for process in started:
            process.stop()
            kill_leftovers(process.seen)


def register(base: str, name: str) -> tuple[str, str]:
    r = requests.post(f"{base}/bots", json={"name": name}, timeout=T)
    assert r.status_code == 201, r.text
    return r.json()["id"], r.json()["token"]


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def until(check, seconds: float, what: str):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        got = check()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_runners_on_two_processes_finish_and_ratings_replay(services, redis_client,
                                                             key_prefix, keys):
    games_each = 3
    runners, threads = [], []
    ids = []
    for i in range(6):
        base = services[i % 2]
        bot_id, token = register(base, f"r{i}")
        ids.append(bot_id)
        runner = BotRunner(ArenaClient(base, token=token), "random", max_games=games_each,
                           poll_timeout=2.0, act_wait=2.0, check_every=0.5, ladder="quick",
                           name=f"r{i}")
        runners.append(runner)
        threads.append(threading.Thread(target=runner.run, daemon=True))
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not any(t.is_alive() for t in threads), "a runner did not finish"
    assert all(r.stats.games_finished == games_each for r in runners)
    base = services[0]
    table = requests.get(f"{base}/ladders/quick/standings", timeout=T).json()
    rows = {row["bot_id"]: row for row in table["items"]}
    assert set(rows) == set(ids) and all(r["games"] == games_each for r in rows.values())
    # the results in rating order, from the ladder's own list (what a replay needs)
    tag = f"{key_prefix}{{ladder:quick}}"
    results = [json.loads(x) for x in redis_client.lrange(f"{tag}:results", 0, -1)]
    assert len(results) == len(ids) * games_each // 2
    assert len({r["game_id"] for r in results}) == len(results)
    # under the published rules (docs/ratings.md): each bot is an owner of its own here, so
    # a rematch within a day weighs 1/k (``ratings.rate_published``, at the rating's time)
    replay = {b: ratings.blank() for b in ids}
    for res in results:
        game = requests.get(f"{base}/games/{res['game_id']}", timeout=T).json()
        assert game["status"] == "finished"
        assert game["seats"][game["winner"]]["bot_id"] == res["winner"]
        w = res["winner"]
        lo = next(b for b in res["sides"] if b != w)
        replay[w], replay[lo], _ = ratings.rate_published(replay[w], replay[lo], (w, lo),
                                                          res["at"])
    for b, r in replay.items():
        shown = ratings.shown(r)
        assert (rows[b]["mu"], rows[b]["sigma"]) == (shown["mu"], shown["sigma"])
    # no bot was in two ladder games at once: each claim came after the previous rating
    for b in ids:
        hist = requests.get(f"{services[1]}/ladders/quick/bots/{b}/history",
                            timeout=T).json()["items"][::-1]
        assert len(hist) == games_each
        claims = []
        for h in hist:
            meta = json.loads(redis_client.hget(keys.game(h["game_id"]), "meta"))
            claims.append(meta["ladder"]["claimed"])
        for prev, nxt in zip(hist, claims[1:], strict=False):
            assert prev["finished"] <= nxt
        entry = requests.get(f"{base}/ladders/quick", timeout=T).json()
        assert b not in {q["bot_id"] for q in entry["queue"]}  # all off: games done


def test_forty_bots_joining_through_both_processes_are_seated_once(services):
    bots = [register(services[i % 2], f"q{i}") for i in range(40)]
    go = threading.Barrier(len(bots))

    def join(i: int) -> None:
        go.wait()
        r = requests.post(f"{services[i % 2]}/ladders/quick/entry", json={"games": 1},
                          headers=auth(bots[i][1]), timeout=T)
        assert r.status_code == 200, r.text

    threads = [threading.Thread(target=join, args=(i,)) for i in range(len(bots))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(T)

    def all_playing():
        entries = [requests.get(f"{services[i % 2]}/ladders/quick/entry",
                                headers=auth(tok), timeout=T).json()
                   for i, (_, tok) in enumerate(bots)]
        return entries if all(e["state"] == "playing" for e in entries) else None

    entries = until(all_playing, 120, "every bot seated")
    games = requests.get(f"{services[1]}/games?status=active&limit=100", timeout=T).json()
    seated = [s["bot_id"] for g in games["items"] for s in g["seats"]]
    ids = sorted(b for b, _ in bots)
    assert sorted(seated) == ids  # each bot in exactly one game, no bot twice
    assert len(games["items"]) == 20
    assert {e["game_id"] for e in entries} == {g["id"] for g in games["items"]}


def test_a_bot_that_never_moves_is_paused_with_a_reason(services):
    idle_id, idle = register(services[0], "idle")
    _, active = register(services[1], "active")
    runner = BotRunner(ArenaClient(services[1], token=active), "random", poll_timeout=1.0,
                       act_wait=1.0, ladder="strict", name="active")
    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()
    try:
        r = requests.post(f"{services[0]}/ladders/strict/entry", json={},
                          headers=auth(idle), timeout=T)
        assert r.status_code == 200

        def paused():
            e = requests.get(f"{services[0]}/ladders/strict/entry", headers=auth(idle),
                             timeout=T).json()
            return e if e["state"] == "paused" else None

        e = until(paused, 120, "the idle bot paused")
        # paused by the repair pass that first sees 3 timeouts: on a loaded machine the
        # sweeper may have played one more by then, and the reason counts what happened
        timed_out = re.search(r"timed out (\d+) times", e["reason"])
        assert timed_out and int(timed_out[1]) >= 3, e["reason"]
        assert "(the limit is 3 in one game)" in e["reason"] and "join again" in e["reason"]
        queue = requests.get(f"{services[1]}/ladders/strict", timeout=T).json()["queue"]
        assert any(q["bot_id"] == idle_id and q["state"] == "paused" for q in queue)
    finally:
        runner.stop()
        thread.join(30)


def test_allfours_bot_ladder_plays_its_games_and_exits(services):
    """``allfours bot --ladder quick --games 2``, twice (one per process): each registers,
    joins, plays its two rated games against the other and exits 0."""
    import subprocess
    import sys

    procs = [subprocess.Popen(
        [sys.executable, "-m", "service.cli.main", "bot", "--strategy", "heuristic",
         "--server", base, "--name", f"cli{i}", "--ladder", "quick", "--games", "2",
         "--poll", "2", "--log-level", "warning"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i, base in enumerate(services)]
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=240)
            assert p.returncode == 0, err
            outs.append([json.loads(line) for line in out.splitlines() if line.strip()])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    ids = [o[0]["id"] for o in outs]
    assert all(o[-1]["games"] == 2 and o[-1]["errors"] == 0 for o in outs)
    rows = {r["bot_id"]: r for r in requests.get(
        f"{services[0]}/ladders/quick/standings", timeout=T).json()["items"]}
    assert [rows[b]["games"] for b in ids] == [2, 2]
    assert rows[ids[0]]["wins"] + rows[ids[1]]["wins"] == 2
