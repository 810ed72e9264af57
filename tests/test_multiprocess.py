"""Two real service processes sharing one Redis: statelessness and cross-process races.

Each test starts two ``allfours serve`` processes (gunicorn, gevent worker, as deployed;
``Serve`` from ``test_serve``) on different free ports, both pointed at the test Redis with
the test's own key prefix. Nothing of a game may live in a process:

- a game played by alternating every request between the two processes (and woken
  across them) ends exactly as the engine's replay of its actions says;
- many threads, split over the two processes, race conflicting actions for the same
  games: each version accepts exactly one action, every loser gets a documented problem
  (never a 5xx), and the stored game equals a replay of the accepted actions.

Every HTTP call has a timeout, every wait is bounded, and both processes (with their
gunicorn children) are stopped in the fixture's finalizer.
"""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests

from service.engine import CARD_NAMES, build_record, parse_action, replay
from service.engine.variants import Variants
from service.storage.store import Store
from tests.conftest import REDIS_URL
from tests.test_serve import Serve, kill_leftovers

EXPECTED_S = 45  # seconds, the whole module: the order workers take it in (tests/conftest.py)

HTTP_TIMEOUT = 15.0  # any single request (long-polls ask for less)
LOSER_PROBLEMS = {
    (409, "/problems/version-conflict"),
    (409, "/problems/not-your-turn"),
    (409, "/problems/illegal-action"),
    (412, "/problems/precondition-failed"),
}


@pytest.fixture(scope="module")
def shared_prefix(redis_client) -> Iterator[str]:
    """The module's key prefix (every key under it deleted at the end): its tests share
    the two processes below, each test with bots and games of its own."""
    prefix = f"aftest:{uuid.uuid4().hex[:12]}:"
    yield prefix
    found = list(redis_client.scan_iter(match=f"{prefix}*", count=1000))
    for i in range(0, len(found), 500):
        redis_client.delete(*found[i : i + 500])


@pytest.fixture(scope="module")
def services(tmp_path_factory: pytest.TempPathFactory, shared_prefix: str) -> Iterator[list[str]]:
    """Base URLs of two service processes on one Redis and one key prefix."""
    env = {"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": shared_prefix, "ARENA_RATE_LIMIT": "0"}
    tmp_path = tmp_path_factory.mktemp("multiprocess")
    started = [Serve(tmp_path, tmp_path / "unused-data", **env) for _ in range(2)]
    try:
        for process in started:
            process.wait_healthy()
        assert started[0].port != started[1].port
        assert started[0].proc.pid != started[1].proc.pid
        yield [process.url("") for process in started]
    finally:
        for process in started:
            process.stop()
            kill_leftovers(process.seen)


def auth(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


class Alternating:
    """A client that sends each request to the next process in turn."""

    def __init__(self, bases: list[str]) -> None:
        self.bases = bases
        self.n = 0
        self.session = requests.Session()
        self.served = [0] * len(bases)

    def next_base(self) -> str:
        i = self.n % len(self.bases)
        self.n += 1
        self.served[i] += 1
        return self.bases[i]

    def call(
        self, method: str, path: str, token: str | None = None, expect: int = 200, **kw: Any
    ) -> Any:
        r = self.session.request(
            method, self.next_base() + path, headers=auth(token), timeout=HTTP_TIMEOUT, **kw
        )
        assert r.status_code == expect, (method, path, r.status_code, r.text)
        return r.json()


# 7 points, not 14: what is proved (every process serves the same game, every race has one
# winner) needs a game played to its end, not a long one
VARIANTS = {"target": 7}


def table(c: Alternating, players: int, seed: int) -> tuple[str, list[str]]:
    """A new game with a distinct bot in every seat: (game id, token per seat)."""
    # one owner's bots (the first's token): seated at once, no invitation
    bots = [c.call("POST", "/bots", json={"name": "mp0"}, expect=201)]
    bots += [c.call("POST", "/bots", bots[0]["token"], json={"name": f"mp{i}"}, expect=201)
             for i in range(1, players)]
    game = c.call(
        "POST",
        "/games",
        bots[0]["token"],
        expect=201,
        json={"players": players, "seed": seed, "seats": [b["id"] for b in bots],
              "variants": VARIANTS},
    )
    assert game["status"] == "active" and game["version"] == 1
    return game["id"], [b["token"] for b in bots]


def check_against_replay(
    store: Store, c: Alternating, game_id: str, players: int, seed: int, accepted: list[str]
) -> None:
    """The stored game, both processes' record and views agree with the engine's replay."""
    actions = [parse_action(a) for a in accepted]
    expected, _ = replay(players, seed, Variants.from_dict(VARIANTS), actions)
    stored = store.get_game(game_id)
    assert stored is not None
    assert stored.actions == actions
    assert stored.state == expected
    assert expected.is_over
    assert stored.status == "finished" and stored.version == 1 + len(actions)
    want = build_record(players, seed, Variants.from_dict(VARIANTS), actions)
    records = [c.call("GET", f"/games/{game_id}/record") for _ in c.bases]
    for record in records:
        assert record["complete"] is True
        assert record["actions"] == accepted
        assert {k: record.get(k) for k in want} == json.loads(json.dumps(want))
        assert not record.get("timeouts")  # no move deadline here: every action was a bot's
    views = [c.call("GET", f"/games/{game_id}") for _ in c.bases]
    assert views[0] == views[1]
    assert views[0]["status"] == "finished"
    assert views[0]["winner"] == expected.winner
    assert views[0]["scores"] == list(expected.scores)


# --- the statelessness proof ---------------------------------------------------------------


@pytest.mark.parametrize("players,seed", [(4, 4101), (2, 2202)])
def test_a_game_alternating_between_two_processes_ends_as_its_replay(
    services: list[str], shared_prefix: str, redis_client, players: int, seed: int
) -> None:
    c = Alternating(services)
    rng = random.Random(seed)
    game_id, tokens = table(c, players, seed)
    waiter = Alternating(services[::-1])  # long-polls on the process the action skips
    accepted: list[str] = []
    view = c.call("GET", f"/games/{game_id}")
    with ThreadPoolExecutor(1) as pool:
        for step in range(2000):
            if view["status"] == "finished":
                break
            seat = view["turn"]
            # Its turn already: the seat's long-poll answers at once, from either process.
            turn = c.call("GET", f"/games/{game_id}/turn", tokens[seat], params={"timeout": 5})
            mine = turn["view"]
            assert not turn["timed_out"] and mine["your_turn"] and mine["seat"] == seat
            assert mine["version"] == view["version"] == 1 + len(accepted)
            action = rng.choice(mine["legal_actions"])
            woken = None
            if step % 8 == 0:
                # A spectator waits on one process for the change posted to the other:
                # only Redis (pub/sub) can carry that wake-up across.
                woken = pool.submit(
                    waiter.call,
                    "GET",
                    f"/games/{game_id}/turn",
                    params={"after": mine["version"], "timeout": 10},
                )
                time.sleep(0.05)
            view = c.call(
                "POST",
                f"/games/{game_id}/actions",
                tokens[seat],
                json={"action": action, "version": mine["version"]},
            )
            accepted.append(action)
            assert view["version"] == mine["version"] + 1 and view["seat"] == seat
            if woken is not None:
                answer = woken.result(timeout=HTTP_TIMEOUT)
                assert not answer["timed_out"]
                assert answer["view"]["version"] >= view["version"]
    assert view["status"] == "finished", "the game did not finish"
    assert min(c.served) > len(accepted)  # both processes really served the game
    check_against_replay(Store(redis_client, shared_prefix), c, game_id, players, seed, accepted)


# --- races across processes ----------------------------------------------------------------


class Racer:
    """One thread's connection to one of the processes."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.session = requests.Session()

    def post(
        self, game_id: str, token: str, body: dict[str, Any], headers: dict[str, str]
    ) -> tuple[int, dict[str, Any], str]:
        r = self.session.post(
            f"{self.base}/games/{game_id}/actions",
            json=body,
            headers={**auth(token), **headers},
            timeout=HTTP_TIMEOUT,
        )
        return r.status_code, r.json(), r.text


def candidates(
    rng: random.Random, view: dict[str, Any], tokens: list[str], round_no: int
) -> list[tuple[str, dict[str, Any], dict[str, str]]]:
    """Conflicting requests for one turn: (token, body, headers) each."""
    seat, version, legal = view["seat"], view["version"], view["legal_actions"]
    mover = tokens[seat]
    other = tokens[(seat + 1) % len(tokens)]
    same = rng.choice(legal)
    repeat = rng.choice(legal)
    key = f"race-{round_no}-{rng.getrandbits(32)}"
    hand = set(view["hand"] or [])
    illegal = sorted(
        a
        for a in ["stand", "beg", "give_one", "run_pack", *CARD_NAMES]
        if a not in legal and a not in hand
    )
    return [
        (mover, {"action": same, "version": version}, {}),
        (mover, {"action": same, "version": version}, {}),  # the very same request
        (mover, {"action": rng.choice(legal), "version": version}, {}),
        (mover, {"action": rng.choice(legal)}, {"If-Match": f'"{version}"'}),
        (mover, {"action": rng.choice(legal)}, {}),  # unversioned: meets whatever is there
        (mover, {"action": repeat, "version": version}, {"Idempotency-Key": key}),
        (mover, {"action": repeat, "version": version}, {"Idempotency-Key": key}),  # retry
        (other, {"action": rng.choice(legal), "version": version}, {}),  # not its turn
        (mover, {"action": rng.choice(illegal), "version": version}, {}),  # against rules
    ]


def race_game(
    bases: list[str],
    game_id: str,
    tokens: list[str],
    seed: int,
    seen: Counter[str],
    max_rounds: int = 600,
) -> list[tuple[int, str]]:
    """Race candidates at every turn until the game ends: (version, action) accepted.
    ``seen`` counts the outcomes (problem types, idempotent replays)."""
    rng = random.Random(seed)
    look = Alternating(bases)
    racers: list[Racer] = []
    accepted: list[tuple[int, str]] = []
    for round_no in range(max_rounds):
        spectator = look.call("GET", f"/games/{game_id}")
        if spectator["status"] == "finished":
            return accepted
        view = look.call("GET", f"/games/{game_id}", tokens[spectator["turn"]])
        assert view["your_turn"], view
        reqs = candidates(rng, view, tokens, round_no)
        while len(racers) < len(reqs):
            racers.append(Racer(bases[len(racers) % len(bases)]))
        rng.shuffle(racers)  # which process serves which candidate changes every round
        barrier = threading.Barrier(len(reqs))
        results: list[Any] = [None] * len(reqs)

        def go(
            i: int,
            token: str,
            body: dict[str, Any],
            headers: dict[str, str],
            results: list[Any] = results,
            barrier: threading.Barrier = barrier,
        ) -> None:
            try:
                barrier.wait(timeout=HTTP_TIMEOUT)
                results[i] = racers[i].post(game_id, token, body, headers)
            except Exception as exc:  # reported by the assertion below
                results[i] = exc

        threads = [threading.Thread(target=go, args=(i, *req)) for i, req in enumerate(reqs)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(HTTP_TIMEOUT + 5)
        assert not any(t.is_alive() for t in threads), "a racer hung"
        wins: dict[int, tuple[str, str]] = {}
        idem_answers = []
        for (_token, body, headers), result in zip(reqs, results):
            assert isinstance(result, tuple), result
            status, payload, text = result
            if status != 200:
                assert (status, payload.get("type")) in LOSER_PROBLEMS, (body, status, payload)
                seen[payload["type"]] += 1
                continue
            new_version = payload["version"]
            if "Idempotency-Key" in headers:
                idem_answers.append(text)
            if body.get("version") is not None or "If-Match" in headers:
                assert new_version == view["version"] + 1, (body, payload)
            if new_version in wins:
                # Only an idempotent retry may share a version, with the identical answer.
                assert "Idempotency-Key" in headers and wins[new_version][1] == text, body
            else:
                wins[new_version] = (body["action"], text)
        assert len(set(idem_answers)) <= 1  # a retry gets the first answer, byte for byte
        seen["idempotent replay"] += len(idem_answers) == 2
        assert view["version"] + 1 in wins, "no candidate applied at this version"
        accepted.extend((v, a) for v, (a, _) in wins.items())
    raise AssertionError("the raced game did not finish")


def test_conflicting_actions_from_many_threads_over_two_processes(
    services: list[str], shared_prefix: str, redis_client
) -> None:
    setup = Alternating(services)
    games = [(4, 7301), (4, 7302), (2, 7303)]
    tables = [table(setup, players, seed) for players, seed in games]
    seen: Counter[str] = Counter()
    with ThreadPoolExecutor(len(games)) as pool:
        futures = [
            pool.submit(race_game, services, game_id, tokens, seed, seen)
            for (_, seed), (game_id, tokens) in zip(games, tables)
        ]
        outcomes = [f.result(timeout=120) for f in futures]
    store = Store(redis_client, shared_prefix)
    for (players, seed), (game_id, _), accepted in zip(games, tables, outcomes):
        accepted.sort()
        # Versions 2, 3, ... with no gap and no repeat: each applied once, none lost.
        assert [v for v, _ in accepted] == list(range(2, 2 + len(accepted)))
        check_against_replay(store, setup, game_id, players, seed, [a for _, a in accepted])
    # The races really were races: every kind of loser, and retries that raced their twin.
    kinds = {t for _, t in LOSER_PROBLEMS} | {"idempotent replay"}
    assert all(seen[k] for k in kinds), seen
