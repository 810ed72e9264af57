"""The fast paths: the rate limit counted with the game read, the token cache, the
shared pub/sub listener, and actions that wait for the next turn (``?wait=``)."""

from __future__ import annotations

import contextlib
import os
import random
import threading
import time
import uuid
from typing import Any

import pytest

from service.http.app import create_app
from service.storage.redis_client import mode_of
from tests.conftest import REDIS_URL
from tests.service.conftest import Api
from tests.service.games.test_retries_and_waiting import record_waits

# Tests of the single Redis's one pattern-subscribed listener and of the game cache it keeps
# warm for every game; a cluster's listener subscribes per watched game (sharded pub/sub,
# ``service.storage.wakeups.ShardedWakeups``), tested by the cluster tests instead.
single_listener = pytest.mark.skipif(
    mode_of(REDIS_URL) == "cluster",
    reason="the single Redis's one pattern listener (a cluster subscribes per game)")


def own_pattern_subscribers(r: Any) -> int:
    """The Redis connections of this process that hold a pattern subscription: the
    server's clients (``CLIENT LIST``) whose address is one of this process's sockets."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            link = os.readlink(f"/proc/self/fd/{fd}")
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    ports = set()
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as f:
            for line in list(f)[1:]:
                cols = line.split()
                if cols[9] in inodes:
                    ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return sum(1 for c in r.client_list()
               if int(c.get("psub", 0)) > 0 and int(c["addr"].rsplit(":", 1)[1]) in ports)


def test_rate_limit_counted_with_the_game_read(key_prefix):
    app = create_app({"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix,
                      "ARENA_RATE_LIMIT": 3, "ARENA_RATE_WINDOW": 60})
    api = Api(app.test_client())
    _bot, token = api.bot()  # counted for the address, not the token
    game = api.game(token, 2)  # 1
    assert api.view(game["id"], token).status_code == 200  # 2: fused with the read
    assert api.c.get(f"/games/{game['id']}/turn", query_string={"timeout": 0},
                     headers=api.auth(token)).status_code == 200  # 3
    r = api.view(game["id"], token)
    assert r.status_code == 429 and r.json["type"].endswith("/rate-limited")
    assert 1 <= int(r.headers["Retry-After"]) <= 60
    # a fused request that fails before reading a game is still counted
    r = api.c.post(f"/games/{game['id']}/actions", json={"action": "nope"},
                   headers=api.auth(token))
    assert r.status_code == 422
    r = app.extensions["arena"].store.r
    assert max(int(r.get(k)) for k in r.scan_iter(match=f"{key_prefix}rl:b*")) == 5


def mid_trick(api, game_id, tokens, rng):
    """Play on to a 4-player trick with one card on it, where the seat in turn's card
    passes the turn to the next seat; (that seat, its view)."""
    while True:
        s = api.view(game_id).json
        w = api.view(game_id, tokens[s["turn"]]).json
        if s["phase"] == "play" and len(s["trick"]["cards"]) == 1:
            return s["turn"], w
        api.act(game_id, tokens[s["turn"]], rng.choice(w["legal_actions"]))


def test_act_wait_answers_on_the_next_turn(api):
    game_id, tokens = api.table(4, seed=11)
    rng = random.Random(3)
    first, v = mid_trick(api, game_id, tokens, rng)
    answers: dict[str, object] = {}
    action = rng.choice(v["legal_actions"])  # drawn here: the thread shares no rng

    def act_and_wait():
        r = api.c.post(f"/games/{game_id}/actions", query_string={"wait": 10},
                       json={"action": action, "version": v["version"]},
                       headers=api.auth(tokens[first]))
        answers["view"] = r.json
        answers["at"] = time.monotonic()

    th = threading.Thread(target=act_and_wait)
    th.start()
    # the others play until it is `first`'s turn again; the turn is first's until its own
    # action lands, and a loaded machine may start the thread late, so a view counts only
    # once the version has moved past it
    moved_at = None
    for _ in range(400):
        time.sleep(0.05)
        s = api.view(game_id).json
        if s["version"] <= v["version"]:
            continue
        if s["status"] == "finished" or s["turn"] == first:
            break
        w = api.view(game_id, tokens[s["turn"]]).json
        assert "view" not in answers
        sent = time.monotonic()  # the waiter may hear before this request returns
        r = api.act(game_id, tokens[s["turn"]], rng.choice(w["legal_actions"]),
                    version=w["version"])
        assert r.status_code == 200
        moved_at = sent
    th.join(10)
    view = answers["view"]
    assert view["seat"] == first and view["your_turn"] is True
    assert view["version"] == api.view(game_id).json["version"]
    assert moved_at is not None and answers["at"] >= moved_at


def test_act_wait_times_out_with_the_view_after_the_action(api, monkeypatch):
    game_id, tokens = api.table(4, seed=5)
    seat, v = mid_trick(api, game_id, tokens, random.Random(2))
    s = {"turn": seat}
    key = uuid.uuid4().hex
    began = record_waits(monkeypatch)
    r = api.c.post(f"/games/{game_id}/actions", query_string={"wait": 0.3},
                   json={"action": v["legal_actions"][0], "version": v["version"]},
                   headers={**api.auth(tokens[s["turn"]]), "Idempotency-Key": key})
    assert r.status_code == 200 and began  # it waited (on the game) for its time
    after = r.json
    assert after["version"] == v["version"] + 1 and after["your_turn"] is False
    # the retry applies nothing and waits as the first did: nobody moves, so after its
    # wait it answers with the view right after the action, saying it is a replay
    began.clear()
    again = api.c.post(f"/games/{game_id}/actions", query_string={"wait": 0.3},
                       json={"action": v["legal_actions"][0], "version": v["version"]},
                       headers={**api.auth(tokens[s["turn"]]), "Idempotency-Key": key})
    assert again.status_code == 200 and began
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json == {**after, "time_left": again.json["time_left"]}
    assert api.view(game_id).json["version"] == v["version"] + 1


def test_act_wait_answers_at_once_when_the_game_ends_or_stays_yours(api):
    game_id, tokens = api.table(2, seed=8)
    rng = random.Random(1)
    while True:
        s = api.view(game_id).json
        if s["status"] == "finished":
            break
        w = api.view(game_id, tokens[s["turn"]]).json
        r = api.c.post(f"/games/{game_id}/actions", query_string={"wait": 0.05},
                       json={"action": rng.choice(w["legal_actions"]), "version": w["version"]},
                       headers=api.auth(tokens[s["turn"]]))
        assert r.status_code == 200
        if r.json["status"] == "finished":
            assert r.json["version"] == w["version"] + 1
            break


def test_act_wait_is_validated(api):
    game_id, tokens = api.table(2, seed=2)
    r = api.c.post(f"/games/{game_id}/actions", query_string={"wait": 31},
                   json={"action": "stand"}, headers=api.auth(tokens[0]))
    assert r.status_code == 422 and "wait" in r.json["errors"]


@single_listener
def test_one_listener_serves_many_waiters(app, api):
    game_id, tokens = api.table(4, seed=4)
    arena = app.extensions["arena"]
    seat, w = mid_trick(api, game_id, tokens, random.Random(4))
    s = {"turn": seat}
    got = []

    def wait(token):
        c = app.test_client()
        got.append(c.get(f"/games/{game_id}/turn", query_string={"timeout": 5},
                         headers=api.auth(token)).json)

    others = [t for i, t in enumerate(tokens) if i != s["turn"]]
    threads = [threading.Thread(target=wait, args=(t,)) for t in others]
    for th in threads:
        th.start()
    time.sleep(0.3)
    r = arena.store.r
    subscribers = own_pattern_subscribers(r)
    assert subscribers >= 1
    assert api.act(game_id, tokens[s["turn"]], w["legal_actions"][0]).status_code == 200
    time.sleep(0.3)
    # no subscription per request: this process's count does not grow (it may shrink, when
    # an earlier test's idle listener ends meanwhile); other processes' tests share the
    # server, so the server's own count is not this app's
    assert own_pattern_subscribers(r) <= subscribers
    # the seat now in turn was answered; the others still wait, then time out
    for th in threads:
        th.join(10)
    assert sum(1 for a in got if not a["timed_out"]) == 1


@single_listener
def test_a_stale_game_cache_costs_a_retry_never_a_wrong_answer(app, api):
    """The per-process game cache is a guess: an action judged on a stale entry is judged
    again on a fresh read, whether the guess accepted it (the compare-and-set fails) or
    refused it."""
    arena = app.extensions["arena"]
    store = arena.store
    game_id, tokens = api.table(2, seed=5)
    generation = arena.wakeups.start() or arena.wakeups.live_generation()
    assert generation is not None
    old = store.get_game(game_id)
    first = api.view(game_id).json["turn"]
    w = api.view(game_id, tokens[first]).json
    assert api.act(game_id, tokens[first], w["legal_actions"][0]).status_code == 200
    now = api.view(game_id).json
    assert now["version"] == old.version + 1
    # stale entry: the seat that just acted looks in turn, the seat in turn does not
    stale_seat = first
    if now["turn"] != first:
        store.games.clear()
        store.games.put(old, generation)
        r = api.act(game_id, tokens[stale_seat], w["legal_actions"][-1])
        assert r.status_code == 409 and r.json["type"].endswith("/not-your-turn"), r.json
        assert api.view(game_id).json["version"] == now["version"]
    store.games.clear()
    store.games.put(old, generation)
    mine = api.view(game_id, tokens[now["turn"]]).json
    r = api.act(game_id, tokens[now["turn"]], mine["legal_actions"][0], version=now["version"])
    assert r.status_code == 200, r.json
    assert r.json["version"] == now["version"] + 1
    assert store.get_game(game_id).version == now["version"] + 1
    assert store.games.get(game_id, generation).version == now["version"] + 1


@single_listener
def test_rate_limit_counted_by_the_commit_of_a_cached_game(key_prefix):
    app = create_app({"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix,
                      "ARENA_RATE_LIMIT": 1000, "ARENA_RATE_WINDOW": 60})
    api = Api(app.test_client())
    arena = app.extensions["arena"]
    arena.wakeups.start()
    game_id, tokens = api.table(2, seed=9)
    r = arena.store.r
    counted = 0
    for _ in range(6):
        s = api.view(game_id).json
        w = api.view(game_id, tokens[s["turn"]]).json
        before = sum(int(r.get(k)) for k in r.scan_iter(match=f"{key_prefix}rl:b*"))
        assert api.act(game_id, tokens[s["turn"]], w["legal_actions"][0]).status_code == 200
        after = sum(int(r.get(k)) for k in r.scan_iter(match=f"{key_prefix}rl:b*"))
        assert after == before + 1  # counted exactly once, cached game or not
        counted += arena.store.games.get(game_id, arena.wakeups.live_generation()) is not None
    assert counted  # the cache was in use
    s = api.view(game_id).json
    w = api.view(game_id, tokens[s["turn"]]).json
    version = s["version"]
    assert arena.store.games.get(game_id, arena.wakeups.live_generation()) is not None
    app.config["ARENA_RATE_LIMIT"] = 1  # every token is over it now
    r2 = api.act(game_id, tokens[s["turn"]], w["legal_actions"][0])
    assert r2.status_code == 429 and r2.json["type"].endswith("/rate-limited")
    app.config["ARENA_RATE_LIMIT"] = 0
    assert api.view(game_id).json["version"] == version


@single_listener
def test_a_commit_wakes_this_process_waiters_once_without_the_redis_echo(app, api):
    """A change committed by this process reaches its own waiters at the commit (no trip
    through Redis pub/sub), and the listener does not hand them Redis's echo of it again;
    a change committed elsewhere still arrives through the listener."""
    from service.storage.wakeups import GameMessage

    arena = app.extensions["arena"]
    store = arena.store
    game_id, tokens = api.table(4, seed=4)
    arena.wakeups.start()
    seat = api.view(game_id).json["turn"]
    w = api.view(game_id, tokens[seat]).json
    waiter = arena.wakeups.waiter(store.game_channel(game_id)).__enter__()
    try:
        # the listener is held at its first message: only the commit itself can deliver
        gate = threading.Event()
        hook = arena.wakeups.on_message

        def held(channel, data, generation):
            gate.wait(10)
            return hook(channel, data, generation)

        arena.wakeups.on_message = held
        try:
            assert api.act(game_id, tokens[seat], w["legal_actions"][0]).status_code == 200
            heard = list(waiter.messages)
        finally:
            arena.wakeups.on_message = hook
            gate.set()  # now Redis's echo of that change goes through: not delivered again
        assert [m.version for m in heard] == [w["version"] + 1]
        assert isinstance(heard[0], GameMessage) and heard[0].state_json
        assert heard[0].seat == api.view(game_id).json["turn"]
        time.sleep(0.5)
        assert [m.version for m in waiter.messages] == [w["version"] + 1]
        # a change this process did not commit (another worker's, say) comes via Redis
        store.r.publish(store.game_channel(game_id), f"{w['version'] + 2}:1")
        deadline = time.monotonic() + 5
        while len(waiter.messages) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert [m.version for m in waiter.messages] == [w["version"] + 1, w["version"] + 2]
    finally:
        waiter.__exit__(None, None, None)


def test_the_game_cache_keeps_a_committers_decoded_state(app, api):
    """When the listener stores a version from its message before the commit that made it
    gets to, the commit's decoded state joins that entry: the next action on the game
    decodes nothing."""
    from service.storage.store import GameCache
    from service.storage.wakeups import game_message

    store = app.extensions["arena"].store
    game_id, _ = api.table(2, seed=5)
    old = store.get_game(game_id)
    cache = GameCache()
    cache.put(old, 1)
    state = old.state
    message = game_message(f"{old.version + 1}:1::active::1700000000.5:{old.state_json}".encode())
    cache.heard(game_id, message, 1)  # the echo of the commit arrives first
    heard = cache.get(game_id, 1)
    assert heard.version == old.version + 1 and heard._state is None
    committed = type(old)(game_id, old.version + 1, "active", old.meta, old.state_json, None,
                          None, 1700000000.5, state)
    cache.put(committed, 1)  # then the committer stores what it committed
    assert cache.get(game_id, 1)._state is state
