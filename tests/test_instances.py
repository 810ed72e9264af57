"""Several service instances on one Redis (or one cluster): ``allfours serve --instances 2``.

Why: the scaled deployment is N independent service instances (separate gunicorn
processes, each with its own workers and wake-up listener) behind a load balancer, over
one Redis or Redis Cluster. Nothing of a game lives in an instance, so whatever one
instance commits must reach the waiters and streams of every other one through Redis:

- a bot's long-poll (``GET /games/{id}/turn``) and its ``GET /bots/me/turns`` on instance
  A wake for a move committed through instance B, move after move, for a whole game;
- a spectator's event stream on A follows a game played entirely through B, to its
  ``game_over``, with the same events as the finished game's stream read back from B;
- a tournament whose bots are spread over both instances (each bot long-polling its own
  instance) finishes with the standings its games' records give.

They run on the test session's Redis (``REDIS_URL``): a single Redis by default, the local
cluster under ``ARENA_TEST_REDIS=cluster`` (``tests/conftest.py``). The failover test
needs a cluster of its own to break and runs only in cluster mode: it kills a master
while bots play and checks that every request gets a clean answer (a 503 problem with
``Retry-After`` while the replica is promoted, never a 500 or a hang), that play resumes
without a restart of the service, and that every finished game's record replays exactly.

Every HTTP call has a timeout and every wait is bounded; every process started here is
stopped in a finalizer.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import requests

from service.storage.embedded import free_port
from service.storage.embedded_cluster import ports_free
from tests.conftest import CLUSTER, REDIS_URL
from tests.test_serve import (
    START_TIMEOUT,
    descendants,
    http_status,
    kill_leftovers,
    stop_process,
    wait_for,
)

EXPECTED_S = 50  # seconds, the whole module: the order workers take it in (tests/conftest.py)

HTTP_TIMEOUT = 30.0  # any single request; long-polls ask for less
ADMIN_TOKEN = "instances-admin-token"
FAST = {"target": 3}


class Instances:
    """One ``allfours serve --instances N`` process (N gunicorn processes on consecutive
    ports), its output captured to a file."""

    def __init__(self, tmp_path: Path, count: int, **env: str) -> None:
        self.count = count
        for _ in range(50):
            port = free_port()
            if ports_free("127.0.0.1", list(range(port, port + count))):
                break
        self.port = port
        self.log = tmp_path / f"serve-{uuid.uuid4().hex[:8]}.log"
        full_env = {**os.environ, "ARENA_HOUSE_BOTS": "0", "ARENA_RATE_LIMIT": "0",
                    "ARENA_ADMIN_TOKEN": ADMIN_TOKEN, **env}
        command = [sys.executable, "-m", "service.cli.main", "serve", "--port", str(port),
                   "--instances", str(count), "--workers", "1",
                   "--data-dir", str(tmp_path / "unused-data")]
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(command, env=full_env, stdout=out, stderr=out,
                                         cwd=tmp_path, start_new_session=True)
        self.seen: dict[int, str] = {}

    @property
    def bases(self) -> list[str]:
        return [f"http://127.0.0.1:{self.port + i}" for i in range(self.count)]

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_healthy(self) -> None:
        def up() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"serve exited early:\n{self.output()}")
            return all(http_status(f"{b}/readyz", 1) == 200 for b in self.bases)

        wait_for(up, START_TIMEOUT, f"every instance's /readyz; serve said:\n{self.output()}")
        self.seen = descendants(self.proc.pid)

    def stop(self) -> int:
        status = stop_process(self.proc)
        kill_leftovers(self.seen)
        return status


def start_instances(tmp_path: Path, redis_url: str, prefix: str, count: int = 2) -> Instances:
    process = Instances(tmp_path, count, REDIS_URL=redis_url, ARENA_KEY_PREFIX=prefix)
    try:
        process.wait_healthy()
    except BaseException:
        process.stop()
        raise
    return process


@pytest.fixture(scope="module")
def shared_two(tmp_path_factory: pytest.TempPathFactory, redis_client) -> Iterator[Instances]:
    """Two instances on the session's Redis under a key prefix of the module's (every key
    deleted at the end), for the tests that play through both with bots and games of
    their own: one start for all of them."""
    prefix = f"aftest:{uuid.uuid4().hex[:12]}:"
    process = start_instances(tmp_path_factory.mktemp("instances"), REDIS_URL, prefix)
    try:
        yield process
    finally:
        process.stop()
        found = list(redis_client.scan_iter(match=f"{prefix}*", count=1000))
        for i in range(0, len(found), 500):
            redis_client.delete(*found[i : i + 500])


@pytest.fixture
def two(tmp_path: Path, key_prefix: str) -> Iterator[Instances]:
    """Two instances on the session's Redis, under the test's key prefix (a test that
    stops them)."""
    process = start_instances(tmp_path, REDIS_URL, key_prefix)
    try:
        yield process
    finally:
        process.stop()


def auth(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


class Http:
    """requests against one instance, every call bounded by a timeout."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.session = requests.Session()

    def call(self, method: str, path: str, token: str | None = None, expect: int = 200,
             **kw: Any) -> Any:
        r = self.session.request(method, self.base + path, headers=auth(token),
                                 timeout=HTTP_TIMEOUT, **kw)
        assert r.status_code == expect, (self.base, method, path, r.status_code, r.text)
        return r.json()


def table(c: Http, players: int, seed: int, **extra: Any) -> tuple[str, list[dict[str, Any]]]:
    # one owner's bots (the first's token): seated at once, no invitation
    bots = [c.call("POST", "/bots", json={"name": "inst0"}, expect=201)]
    bots += [c.call("POST", "/bots", bots[0]["token"], json={"name": f"inst{i}"}, expect=201)
             for i in range(1, players)]
    game = c.call("POST", "/games", bots[0]["token"], expect=201,
                  json={"players": players, "seed": seed,
                        "seats": [b["id"] for b in bots], **extra})
    return game["id"], bots


# --- the command -----------------------------------------------------------------------------


def test_serve_instances_runs_separate_processes_on_consecutive_ports(two: Instances) -> None:
    a, b = (Http(base) for base in two.bases)
    masters = [cmd for cmd in two.seen.values()
               if "gunicorn" in cmd and "--bind" in cmd]
    binds = sorted(cmd.split("--bind ")[1].split()[0] for cmd in masters)
    # one gunicorn master per instance (its worker has the same command line)
    assert sorted(set(binds)) == [f"127.0.0.1:{two.port}", f"127.0.0.1:{two.port + 1}"]
    # what one instance writes, the other reads: they share the Redis, nothing else
    bot = a.call("POST", "/bots", json={"name": "shared"}, expect=201)
    assert b.call("GET", f"/bots/{bot['id']}")["name"] == "shared"
    assert f"2 instances on http://127.0.0.1:{two.port}..{two.port + 1}" in two.output()
    assert two.stop() == 0
    assert all(http_status(f"{base}/healthz", 1) == 0 for base in two.bases)


# --- wake-ups across instances ------------------------------------------------------------------


def test_long_poll_and_my_turns_on_one_instance_wake_for_moves_through_the_other(
    shared_two: Instances,
) -> None:
    from service.engine import apply, current_seat, new_game, parse_action

    a, b = (Http(base) for base in shared_two.bases)
    game_id, bots = table(b, 2, seed=1313)
    state, _ = new_game(2, 1313)  # the engine, to know whom a move will give the turn to
    rng = random.Random(1313)
    woken = listed_games = 0
    with ThreadPoolExecutor(2) as pool:
        for _ in range(400):
            spectator = b.call("GET", f"/games/{game_id}")
            if spectator["status"] == "finished":
                break
            seat = spectator["turn"]
            assert seat == current_seat(state)
            mover, waiter = bots[seat], bots[1 - seat]
            mine = b.call("GET", f"/games/{game_id}", mover["token"])
            action = rng.choice(mine["legal_actions"])
            state, _ = apply(state, parse_action(action), seat=seat)
            passes = not state.is_over and current_seat(state) == 1 - seat
            # the other seat waits on instance A: for any change past this version, and,
            # when this move gives it the turn, for its turns in all its games
            turn = pool.submit(Http(a.base).call, "GET", f"/games/{game_id}/turn",
                               waiter["token"],
                               params={"after": mine["version"], "timeout": 20})
            turns = pool.submit(Http(a.base).call, "GET", "/bots/me/turns",
                                waiter["token"], params={"timeout": 20}) if passes else None
            time.sleep(0.2)  # let them reach the server and wait (not an assertion)
            pending = not turn.done() and (turns is None or not turns.done())
            after = b.call("POST", f"/games/{game_id}/actions", mover["token"],
                           json={"action": action, "version": mine["version"]})
            answer = turn.result(HTTP_TIMEOUT)
            assert not answer["timed_out"], answer
            assert answer["view"]["version"] >= after["version"]
            if turns is not None:
                listed = turns.result(HTTP_TIMEOUT)
                assert listed["games"] == [game_id], listed  # woken, not timed out
                listed_games += 1
            woken += pending
    assert b.call("GET", f"/games/{game_id}")["status"] == "finished"
    assert state.is_over
    assert woken > 10 and listed_games > 5  # most polls were waiting when the move came


def _sse(resp: requests.Response) -> list[dict[str, str]]:
    """Events of a server-sent event stream, read to its end (id, event, data)."""
    events, current = [], {}
    for raw in resp.iter_lines(decode_unicode=True):
        if raw is None:
            continue
        if not raw:
            if "data" in current:
                events.append(current)
                if current.get("event") == "game_over":
                    break
            current = {}
            continue
        if raw.startswith(":"):
            continue
        field, _, value = raw.partition(":")
        current[field] = value.lstrip(" ")
    return events


def test_event_stream_on_one_instance_follows_a_game_played_through_the_other(
    shared_two: Instances,
) -> None:
    a, b = (Http(base) for base in shared_two.bases)
    game_id, bots = table(b, 4, seed=2424, variants=FAST)
    stream = requests.get(f"{a.base}/games/{game_id}/events", stream=True,
                          timeout=HTTP_TIMEOUT)
    assert stream.status_code == 200
    assert stream.headers["Content-Type"].startswith("text/event-stream")
    with ThreadPoolExecutor(1) as pool:
        live = pool.submit(_sse, stream)
        rng = random.Random(2424)
        played = 0
        for _ in range(2000):
            spectator = b.call("GET", f"/games/{game_id}")
            if spectator["status"] == "finished":
                break
            token = bots[spectator["turn"]]["token"]
            mine = b.call("GET", f"/games/{game_id}", token)
            b.call("POST", f"/games/{game_id}/actions", token,
                   json={"action": rng.choice(mine["legal_actions"]),
                         "version": mine["version"]})
            played += 1
        events = live.result(120)
    stream.close()
    assert events and events[-1]["event"] == "game_over"
    ids = [tuple(map(int, e["id"].split("."))) for e in events]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    # every action's events arrived, in order: plies 0 (the deal) .. the last action
    assert sorted({ply for ply, _ in ids}) == list(range(played + 1))
    # the finished game's stream read back from B has the same events
    with requests.get(f"{b.base}/games/{game_id}/events", stream=True,
                      timeout=HTTP_TIMEOUT) as again:
        after = _sse(again)
    assert [(e["id"], e.get("event")) for e in after] == \
        [(e["id"], e.get("event")) for e in events]
    played_cards = [json.loads(e["data"]) for e in events if e.get("event") == "card_played"]
    assert played_cards == [json.loads(e["data"]) for e in after
                            if e.get("event") == "card_played"]


# --- a tournament over both instances ---------------------------------------------------------


class Adapter:
    """``client.get(path, query_string=...).json`` over requests, for the standings checks
    of tests/service/tournaments/test_tournaments.py."""

    class Answer:
        def __init__(self, r: requests.Response) -> None:
            self.status_code = r.status_code
            self.json = r.json()

    def __init__(self, base: str) -> None:
        self.base = base
        self.session = requests.Session()

    def get(self, path: str, query_string: dict[str, Any] | None = None,
            headers: dict[str, str] | None = None) -> Adapter.Answer:
        return self.Answer(self.session.get(self.base + path, params=query_string,
                                            headers=headers, timeout=HTTP_TIMEOUT))


def play_bot(base: str, token: str, tid: str, seed: int, done: threading.Event,
             errors: list[str]) -> int:
    """One bot's loop on one instance: long-poll its turns there, play them at random,
    until the tournament is finished. Returns the actions it had accepted."""
    c = Http(base)
    rng = random.Random(seed)
    moved = 0
    try:
        while not done.is_set():
            turns = c.call("GET", "/bots/me/turns", token, params={"timeout": 5})
            for gid in turns["games"]:
                view = c.call("GET", f"/games/{gid}", token)
                if not view["your_turn"]:
                    continue
                r = c.session.post(f"{base}/games/{gid}/actions", headers=auth(token),
                                   json={"action": rng.choice(view["legal_actions"]),
                                         "version": view["version"]}, timeout=HTTP_TIMEOUT)
                assert r.status_code in (200, 409), r.text
                moved += r.status_code == 200
            if c.call("GET", f"/tournaments/{tid}")["status"] == "finished":
                done.set()
    except Exception as exc:  # reported by the test
        errors.append(repr(exc))
        done.set()
    return moved


def test_a_tournament_with_bots_on_both_instances_finishes_with_correct_standings(
    shared_two: Instances,
) -> None:
    from tests.service.tournaments.test_tournaments import all_games, check_standings

    a, b = (Http(base) for base in shared_two.bases)
    bots = [(a if i < 2 else b).call("POST", "/bots", json={"name": f"spread-{i}"},
                                     expect=201) for i in range(4)]
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    r = requests.post(f"{a.base}/tournaments", headers=admin, timeout=HTTP_TIMEOUT,
                      json={"entrants": [x["id"] for x in bots], "variants": FAST,
                            "name": "spread", "format": "round_robin",
                            "games_per_pairing": 1, "seed": 21})
    assert r.status_code == 201, r.text
    tid = r.json()["id"]
    done = threading.Event()
    errors: list[str] = []
    with ThreadPoolExecutor(4) as pool:
        # bots 0 and 1 wait and play on instance A, bots 2 and 3 on instance B
        futures = [pool.submit(play_bot, shared_two.bases[0 if i < 2 else 1], bot["token"], tid,
                               i, done, errors) for i, bot in enumerate(bots)]
        moves = [f.result(timeout=280) for f in futures]
    assert not errors, errors
    assert all(m > 0 for m in moves), moves  # every bot played, on its own instance
    t = a.call("GET", f"/tournaments/{tid}")
    assert t["status"] == "finished"
    assert b.call("GET", f"/tournaments/{tid}") == t
    games = all_games(t)
    assert len(games) == t["progress"]["games_planned"] == t["progress"]["games_done"]
    check_standings(Adapter(b.base), t)


# --- failover (cluster mode) -------------------------------------------------------------------

CLEAN = {200, 201, 409, 503}


class Careful:
    """A bot's careful client for play through a failover: every action carries an
    ``Idempotency-Key`` and is retried on 503 after ``Retry-After``; every answer is
    recorded as (status, problem type, has Retry-After)."""

    def __init__(self, base: str, seen: list[tuple[int, str | None, bool]]) -> None:
        self.base = base
        self.session = requests.Session()
        self.seen = seen

    def request(self, method: str, path: str, token: str | None = None,
                key: str | None = None, **kw: Any) -> requests.Response:
        headers = auth(token)
        if key:
            headers["Idempotency-Key"] = key
        for _ in range(120):
            r = self.session.request(method, self.base + path, headers=headers,
                                     timeout=HTTP_TIMEOUT, **kw)
            problem = r.json().get("type") if r.headers.get("Content-Type", "").startswith(
                "application/problem+json") else None
            self.seen.append((r.status_code, problem, "Retry-After" in r.headers))
            if r.status_code != 503:
                return r
            time.sleep(min(1.0, float(r.headers.get("Retry-After", "1"))))
        raise AssertionError(f"{method} {path}: 503 for two minutes")


def play_careful(c: Careful, game_id: str, bots: list[dict[str, Any]], seed: int,
                 moved: Counter[str]) -> None:
    rng = random.Random(seed)
    for _ in range(3000):
        spectator = c.request("GET", f"/games/{game_id}").json()
        if spectator["status"] == "finished":
            return
        token = bots[spectator["turn"]]["token"]
        r = c.request("GET", f"/games/{game_id}", token)
        mine = r.json()
        if r.status_code != 200 or not mine.get("your_turn"):
            continue
        r = c.request("POST", f"/games/{game_id}/actions", token,
                      key=f"move-{mine['version']}",
                      json={"action": rng.choice(mine["legal_actions"]),
                            "version": mine["version"]})
        moved[game_id] += r.status_code == 200
    raise AssertionError(f"game {game_id} did not finish")


@pytest.mark.skipif(not CLUSTER, reason="a failover needs a cluster with replicas: "
                    "ARENA_TEST_REDIS=cluster (.ci/run's cluster pass)")
def test_a_master_killed_during_play_gives_clean_answers_and_play_resumes(
    tmp_path: Path,
) -> None:
    from service.engine import build_record, parse_action
    from service.engine.variants import Variants
    from service.storage.embedded_cluster import LocalCluster

    with LocalCluster(shards=3, replicas=1, node_timeout_ms=2000) as cluster:
        service = start_instances(tmp_path, cluster.url, f"failover:{uuid.uuid4().hex[:8]}:")
        try:
            setup = Http(service.bases[0])
            games = [table(setup, 4, seed=5100 + i, variants=FAST) for i in range(6)]
            seen: list[tuple[int, str | None, bool]] = []
            moved: Counter[str] = Counter()
            with ThreadPoolExecutor(len(games)) as pool:
                futures = [pool.submit(play_careful, Careful(service.bases[i % 2], seen),
                                       gid, bots, i, moved)
                           for i, (gid, bots) in enumerate(games)]
                wait_for(lambda: sum(moved.values()) >= 30 or any(f.done() for f in futures),
                         120, "the first moves")
                victim = cluster.masters()[0]
                killed = time.monotonic()
                cluster.kill(victim)  # SIGKILL: a crash, nothing flushed
                assert cluster.wait_ok(60), "the replica was not promoted"
                promoted = time.monotonic() - killed
                assert victim not in cluster.masters()
                for f in futures:
                    f.result(timeout=280)
            statuses = Counter(s for s, _, _ in seen)
            # for the record (pytest -rA shows it): what the failover cost the bots
            print(json.dumps({"statuses": statuses, "promoted_after_s": round(promoted, 1),
                              "accepted_moves": sum(moved.values())}))
            assert set(statuses) <= CLEAN, statuses  # never a 500, never anything else
            for status, problem, retry_after in seen:
                if status == 503:
                    assert problem == "/problems/service-unavailable" and retry_after
            # the referee: every finished game's record replays exactly
            for gid, _bots in games:
                record = setup.call("GET", f"/games/{gid}/record")
                assert record["complete"] is True
                want = build_record(4, record["seed"], Variants.from_dict(FAST),
                                    [parse_action(a) for a in record["actions"]])
                assert {k: record.get(k) for k in want} == json.loads(json.dumps(want))
        finally:
            service.stop()


def test_each_instance_keeps_its_metrics_apart_and_zero_instances_is_refused(
    tmp_path: Path,
) -> None:
    """Each gunicorn empties ``$PROMETHEUS_MULTIPROC_DIR`` as it starts, so N instances
    get a subdirectory each (one instance keeps the operator's directory as it is)."""
    from service.cli.serve import instance_env

    env = {"PROMETHEUS_MULTIPROC_DIR": "/var/metrics", "X": "1"}
    assert instance_env(env, 8001, 2) == {"PROMETHEUS_MULTIPROC_DIR":
                                          "/var/metrics/instance-8001", "X": "1"}
    assert instance_env(env, 8000, 1) == env
    assert instance_env({"X": "1"}, 8001, 2) == {"X": "1"}
    done = subprocess.run([sys.executable, "-m", "service.cli.main", "serve",
                           "--instances", "0", "--port", str(free_port())],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "ARENA_HOUSE_BOTS": "0"})
    assert done.returncode == 1
    assert "--instances must be 1 or more" in done.stderr
