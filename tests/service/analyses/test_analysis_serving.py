"""The post-game analysis served (``GET /games/{id}/analysis``), queued in a
Redis Stream with a consumer group and computed once by worker processes (a killed worker's
game finished by another, two workers never computing one game), stored with the game.
The analyser is the real one (``service.analysis.analyse``) at its ``fast`` quality, on
short games (3 points)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import zlib
from typing import Any

import pytest

from service.analysis import analyse
from service.arena.analyses.queue import Analyses
from service.arena.analyses.worker import Worker
from service.http.app import create_app
from tests.conftest import REDIS_URL
from tests.service.tournaments.test_tournament_cancel_embargo import FAST, play_out
from tests.service.tournaments.test_tournaments import ADMIN, register

EXPECTED_S = 40  # seconds, the whole module: the order workers take it in (tests/conftest.py)


def finished_game(api: Any, seed: int, players: int = 2) -> tuple[str, list[str]]:
    """A finished game at the default target: a few hundred decisions."""
    gid, tokens = api.table(players, seed)
    play_out(api.c, gid, tokens, random.Random(seed))
    return gid, tokens


def short_game(api: Any, seed: int, players: int = 2) -> tuple[str, list[str]]:
    """A finished game to 3 points: a few dozen decisions."""
    bots = [api.bot(f"b{i}") for i in range(players)]
    game = api.game(bots[0][1], players, seats=[b for b, _ in bots], seed=seed,
                    variants=FAST)
    tokens = [t for _, t in bots]
    play_out(api.c, game["id"], tokens, random.Random(seed))
    return game["id"], tokens


def queue(app: Any) -> Analyses:
    return app.extensions["analyses"]


def test_a_live_game_is_refused_and_an_unknown_one_is_404(api: Any, app: Any) -> None:
    bots = [api.bot(f"b{i}") for i in range(2)]
    game = api.game(bots[0][1], 2, seats=[b for b, _ in bots], seed=3, variants=FAST)
    r = api.c.get(f"/games/{game['id']}/analysis")
    assert r.status_code == 409 and r.json["type"] == "/problems/game-not-over"
    assert queue(app).state(game["id"]) is None  # refused: nothing queued
    assert queue(app).waiting() == 0
    r = api.c.get("/games/nosuchgame/analysis")
    assert r.status_code == 404 and r.json["type"] == "/problems/not-found"


def test_only_a_bot_that_played_the_game_may_queue_its_analysis(api: Any, app: Any,
                                                                 redis_client: Any) -> None:
    """An analysis costs seconds of CPU and is stored with the game: a stranger (no token,
    or another bot's) cannot queue one, so nobody can queue every public game; the refusal
    changes nothing. A bot that played asks; from then on anyone reads it."""
    gid, tokens = short_game(api, 5)
    q = queue(app)
    _, stranger = api.bot("stranger")
    for headers in ({}, api.auth(stranger)):
        r = api.c.get(f"/games/{gid}/analysis", headers=headers)
        assert r.status_code == 403, r.json
        assert r.json["type"] == "/problems/not-a-player"
        assert "token" in r.json["detail"]
        assert q.state(gid) is None
        assert q.waiting() == 0  # nothing queued
    r = api.c.get(f"/games/{gid}/analysis", headers=api.auth(tokens[1]))
    assert r.status_code == 202 and r.json["status"] == "queued"
    for headers in ({}, api.auth(stranger)):
        r = api.c.get(f"/games/{gid}/analysis", headers=headers)
        assert r.status_code == 202 and r.json["status"] == "queued", r.json
    assert q.waiting() == 1


def test_a_strangers_refused_asks_count_against_its_rate_limit(api: Any, key_prefix: str,
                                                                 redis_client: Any) -> None:
    """A refused ask is a request like any other: a stranger that keeps asking for others'
    analyses is limited by its own budget (per bot, or per address without a token), and
    neither the 403s nor the 429 queue anything."""
    gid, _tokens = short_game(api, 4)
    _, stranger = api.bot("stranger")
    limited = create_app({"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix,
                          "ARENA_RATE_LIMIT": 3, "ARENA_RATE_WINDOW": 60,
                          "ARENA_OWNERS_PER_NETWORK": 0, "TESTING": True})
    c = limited.test_client()
    q = queue(limited)
    for headers in (api.auth(stranger), {}):
        answers = [c.get(f"/games/{gid}/analysis", headers=headers) for _ in range(4)]
        assert [r.status_code for r in answers] == [403, 403, 403, 429], \
            [r.json for r in answers]
        last = answers[-1]
        assert last.json["type"] == "/problems/rate-limited"
        assert 1 <= int(last.headers["Retry-After"]) <= 60
        assert q.state(gid) is None and q.waiting() == 0


def test_asked_once_computed_once_served_with_an_etag(api: Any, app: Any,
                                                      redis_client: Any) -> None:
    gid, tokens = short_game(api, 7)
    q = queue(app)
    first = api.c.get(f"/games/{gid}/analysis", headers=api.auth(tokens[0]))  # a player asks
    assert first.status_code == 202, first.json
    assert first.json["status"] == "queued" and first.json["game_id"] == gid
    assert first.headers["Location"] == f"/games/{gid}/analysis"
    assert int(first.headers["Retry-After"]) > 0
    again = api.c.get(f"/games/{gid}/analysis")  # once asked, anyone reads the progress
    assert again.status_code == 202 and again.json["status"] == "queued"
    assert q.waiting() == 1  # asked twice, queued once

    worker = Worker(q, quality="fast", name="w-test")
    q.ensure_group()
    assert worker.once() is True
    assert q.waiting() == 0  # acknowledged and deleted
    done = api.c.get(f"/games/{gid}/analysis")
    assert done.status_code == 200, done.json
    body = done.json
    game = app.extensions["arena"].get(gid)
    expected = analyse(game.players, game.meta["seed"], game.variants, game.actions,
                       quality="fast")
    assert body == {"game_id": gid, **expected}  # the analyser's answer, reproducible
    assert body["decisions"] and body["teams"]["0"]
    etag = done.headers["ETag"]
    cached = api.c.get(f"/games/{gid}/analysis", headers={"If-None-Match": etag})
    assert cached.status_code == 304 and cached.headers["ETag"] == etag
    assert q.waiting() == 0  # a done analysis is never queued again
    assert int(redis_client.hget(q.key(gid), "attempts")) == 1
    # stored with the game: the same TTL (a casual game's retention)
    game_ttl = redis_client.pttl(app.extensions["arena"].store.game_key(gid))
    assert game_ttl > 0 and abs(redis_client.pttl(q.key(gid)) - game_ttl) < 60_000

    # the bots' averages (a small hash per bot), counted once
    Worker(q, quality="fast", name="w-2").a.count_for_bots(game, expected)
    for seat, bot_id in enumerate(game.seats):
        mine = expected["seats"][str(seat)]
        r = api.c.get(f"/bots/{bot_id}/analysis")
        assert r.status_code == 200, r.json
        assert r.json["games"] == 1 and r.json["decisions"] == mine["decisions"]
        assert r.json["average_loss"] == pytest.approx(mine["average_loss"], abs=1e-3)
        assert set(r.json["by_kind"]) == set(mine["by_kind"])
    assert api.c.get("/bots/nosuchbot/analysis").status_code == 404


def test_stored_compressed_and_a_record_stored_plain_is_still_served(
        api: Any, app: Any, redis_client: Any) -> None:
    gid, tokens = short_game(api, 11)
    q = queue(app)
    assert api.c.get(f"/games/{gid}/analysis", headers=api.auth(tokens[0])).status_code == 202
    q.ensure_group()
    assert Worker(q, quality="fast", name="w-z").once() is True
    stored = redis_client.hget(q.key(gid), "result")
    text = zlib.decompress(stored).decode()  # zlib, not the JSON itself
    assert len(stored) * 4 < len(text)
    served = api.c.get(f"/games/{gid}/analysis")
    assert served.status_code == 200 and served.json == {"game_id": gid, **json.loads(text)}
    assert q.state(gid)["result"] == q.result(gid) == text
    # a record from before the compression: plain JSON (a new etag: not this process's cache)
    redis_client.hset(q.key(gid), mapping={"result": text, "etag": "0123456789abcdef"})
    old = api.c.get(f"/games/{gid}/analysis")
    assert old.status_code == 200 and old.json == served.json
    assert old.headers["ETag"] == '"0123456789abcdef"'
    assert q.state(gid)["result"] == q.result(gid) == text


def test_the_lease_is_one_workers_at_a_time(api: Any, app: Any) -> None:
    gid, _ = short_game(api, 5)
    q = queue(app)
    q.lease_s = 0.5
    assert q.claim(gid, "w1") == 1
    assert q.claim(gid, "w2") == -1  # held: w2 leaves the entry pending
    time.sleep(0.6)  # w1 went quiet past its lease (no heartbeat)
    assert q.claim(gid, "w2") == 1
    assert q.renew(gid, "w1", 1, 2) is False  # w1 hears it lost the game
    assert q.finish(gid, "w1", {"x": 1}) is False  # and may not store a result
    assert q.finish(gid, "w2", {"x": 2}) is True
    assert q.claim(gid, "w3") == 0  # done: acknowledge


def test_dead_consumers_are_forgotten_once_they_hold_nothing(api: Any, app: Any) -> None:
    q = queue(app)
    q.ensure_group()
    gid, _ = short_game(api, 6)
    q.ask(gid)
    assert q.next_entry("busy-worker", 0) is not None  # holds the entry (pending)
    q.r.xgroup_createconsumer(q.stream, "workers", "idle-worker")  # holds nothing
    time.sleep(0.05)
    assert q.forget_consumers(idle_s=0.01) == 1
    names = {c["name"].decode() if isinstance(c["name"], bytes) else c["name"]
             for c in q.r.xinfo_consumers(q.stream, "workers")}
    assert names == {"busy-worker"}


def test_refused_while_the_deal_is_embargoed_and_a_tournament_analyses_every_game(
        client: Any, app: Any) -> None:
    bots = register(client, 4)
    r = client.post("/tournaments", headers=ADMIN,
                    json={"entrants": list(bots), "format": "round_robin", "variants": FAST,
                          "games_per_pairing": 2, "parallel": 1, "seed": 12,
                          "analyse": True})
    assert r.status_code == 201, r.json
    assert r.json["settings"]["analyse"] is True
    first = r.json["rounds"][0]["games"][0]
    play_out(client, first["game_id"], [bots[b] for b in first["teams"]], random.Random(2))
    # finished, its deal still to be played at the other table: as the record, hidden
    assert client.get(f"/games/{first['game_id']}/record").status_code == 403
    r = client.get(f"/games/{first['game_id']}/analysis",
                   headers={"Authorization": f"Bearer {bots[first['teams'][0]]}"})
    assert r.status_code == 403 and r.json["type"] == "/problems/embargoed"
    # ... yet queued when it finished (``analyse``), so it is ready when the deal is public
    assert queue(app).state(first["game_id"])["status"] == "queued"


# --- worker processes -------------------------------------------------------------------


def start_worker(key_prefix: str, lease: float, quality: str = "fast"
                 ) -> subprocess.Popen[bytes]:
    env = {**os.environ, "REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix,
           "ARENA_ANALYSIS_LEASE": str(lease), "ARENA_ANALYSIS_QUALITY": quality,
           "ARENA_ANALYSIS_NICE": "0"}
    return subprocess.Popen([sys.executable, "-m", "service.arena.analyses.worker", "--worker"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop(*procs: subprocess.Popen[bytes]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_for(check: Any, seconds: float, what: str) -> None:
    end = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < end, what
        time.sleep(0.05)


def test_two_workers_never_both_compute_one_game(api: Any, app: Any, key_prefix: str,
                                                 redis_client: Any) -> None:
    games = [short_game(api, seed)[0] for seed in (21, 22, 23)]
    q = queue(app)
    for gid in games:
        assert q.ask(gid)
        # a spare entry per game (as a racing request or a taken-over entry makes)
        redis_client.xadd(q.stream, {"game": gid})
    workers = [start_worker(key_prefix, 5.0), start_worker(key_prefix, 5.0)]
    try:
        wait_for(lambda: all((q.state(g) or {}).get("status") == "done" for g in games),
                 120, "the workers did not finish")
        wait_for(lambda: q.waiting() == 0, 30, "entries left behind")
    finally:
        stop(*workers)
    for gid in games:
        assert int(redis_client.hget(q.key(gid), "attempts")) == 1, gid


def test_a_worker_killed_mid_analysis_leaves_it_to_another(api: Any, app: Any,
                                                           key_prefix: str,
                                                           redis_client: Any) -> None:
    # a longer game at the default quality: long enough to be killed in the middle
    gid, _ = finished_game(api, 31)
    q = queue(app)
    assert q.ask(gid)
    lease = 1.5
    doomed = start_worker(key_prefix, lease, quality="default")
    try:
        wait_for(lambda: int((q.state(gid) or {}).get("done") or 0) >= 1, 120,
                 "the first worker never started")
        total = int(q.state(gid)["total"])
        assert q.state(gid)["status"] == "running" and int(q.state(gid)["done"]) < total
        os.kill(doomed.pid, signal.SIGKILL)
        doomed.wait()
        assert q.state(gid)["status"] == "running"  # left half done
        heir = start_worker(key_prefix, lease, quality="default")
        try:
            wait_for(lambda: q.state(gid)["status"] == "done", 600, "nobody finished it")
            # (the entry is acknowledged right after the result is stored)
            wait_for(lambda: q.waiting() == 0, 30, "the entry left behind")
        finally:
            stop(heir)
    finally:
        stop(doomed)
    assert int(redis_client.hget(q.key(gid), "attempts")) == 2  # the killed one, the heir
    r = api.c.get(f"/games/{gid}/analysis")
    assert r.status_code == 200
    assert len(r.json["decisions"]) == total


# --- as deployed: the gunicorn arbiter starts the workers ---------------------------------


def analysis_processes(pid: int) -> list[int]:
    from tests.test_serve import descendants

    return [p for p, line in descendants(pid).items()
            if "service.arena.analyses.worker --worker" in line]


def test_gunicorn_starts_the_configured_analysis_workers_and_stops_them(
        key_prefix: str) -> None:
    from tests.service.conftest import gunicorn

    with gunicorn(ARENA_KEY_PREFIX=key_prefix, ARENA_ANALYSIS_WORKERS="2") as (_, proc):
        wait_for(lambda: len(analysis_processes(proc.pid)) == 2, 60, "two workers")
        workers = analysis_processes(proc.pid)
        # a worker that dies is started again by the supervisor
        os.kill(workers[0], signal.SIGKILL)
        wait_for(lambda: len(analysis_processes(proc.pid)) == 2
                 and workers[0] not in analysis_processes(proc.pid), 60, "a new worker")
        everyone = analysis_processes(proc.pid)
    from tests.test_serve import alive

    wait_for(lambda: not any(alive(p) for p in everyone), 30, "the workers to stop")


def test_no_analysis_worker_with_none_configured(key_prefix: str) -> None:
    from tests.service.conftest import gunicorn
    from tests.test_serve import descendants

    with gunicorn(ARENA_KEY_PREFIX=key_prefix, ARENA_ANALYSIS_WORKERS="0") as (_, proc):
        # the arbiter runs ``when_ready`` before its first worker, so before /healthz
        # answers: a supervisor it started would be its child by now
        assert not [line for line in descendants(proc.pid).values()
                    if "service.arena.analyses.worker" in line]


def test_the_ladder_setting_queues_ladder_games_only_when_on(api: Any, app: Any) -> None:
    """``ARENA_LADDER_ANALYSE``: the after-finish hook (``Arena.on_finish``) queues a
    ladder's game when on; a tournament's only with ``analyse``; nothing else."""
    from service.arena.analyses.queue import auto_analyse

    gid, _ = short_game(api, 8)
    q = queue(app)
    game = app.extensions["arena"].get(gid)
    game.meta = {**game.meta, "tournament": {"id": "t", "slot": 0, "round": 1}}
    auto_analyse(q, ladder=True)(game)
    assert q.state(gid) is None  # a tournament created without ``analyse``
    game.meta = {k: v for k, v in game.meta.items() if k != "tournament"}
    game.meta["ladder"] = {"name": "2p"}
    auto_analyse(q, ladder=False)(game)
    assert q.state(gid) is None  # ARENA_LADDER_ANALYSE off
    auto_analyse(q, ladder=True)(game)
    assert q.state(gid)["status"] == "queued"
