"""Bounded storage: what a client creates expires unless something must keep it,
over a real Redis (a single one, or a cluster with ``ARENA_TEST_REDIS=cluster``).

TTLs are checked as values where that says it (settings of seconds or days); where the
removal itself is the point, a TTL of a second or two is let run out.
"""

from __future__ import annotations

import random
import time
from typing import Any

import pytest

from service.arena.accounts import house
from service.arena.games.deadlines import Sweeper
from service.http.app import create_app
from service.storage.keys import Keys
from tests.conftest import REDIS_URL
from tests.service.conftest import ADMIN_TOKEN, Api

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
FAST = {"target": 3}


def make(key_prefix: str, **settings: Any) -> Any:
    return create_app({"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix,
                       "ARENA_RATE_LIMIT": 0, "ARENA_ADMIN_TOKEN": ADMIN_TOKEN,
                       "TESTING": True, **settings})


def token_key(redis_client: Any, keys: Keys, bot_id: str) -> str:
    digest = redis_client.hget(keys.bot(bot_id), "token")
    assert digest, "a bot keeps its token's hash"
    return keys.token(digest.decode())


def wait_gone(redis_client: Any, *names: str, within: float = 20.0) -> None:
    """Until none of ``names`` exists (Redis expires a key lazily or within its 100 ms
    cycles: generous, not timed)."""
    end = time.monotonic() + within
    while any(redis_client.exists(n) for n in names):
        assert time.monotonic() < end, [n for n in names if redis_client.exists(n)]
        time.sleep(0.2)


def retention_pass(app: Any) -> int:
    """The sweeper's retention pass over the whole index (twice: in a cluster a missing
    game is a suspect the first time it is seen)."""
    sweeper = Sweeper(app.extensions["arena"])
    removed = 0
    for _ in range(2):
        while True:
            removed += sweeper.retain_once()
            if sweeper._retain_after == 0:
                break
    return removed


def indexed(redis_client: Any, keys: Keys, game_id: str) -> list[str]:
    """The game indexes that still name ``game_id``."""
    return [s for s in ("all", "waiting", "active", "finished")
            if redis_client.zscore(keys.index(s), game_id) is not None]


# --- bots ----------------------------------------------------------------------------------


def test_a_bot_that_never_played_expires_with_its_token(key_prefix, redis_client, keys):
    app = make(key_prefix, ARENA_BOT_UNUSED_TTL=300)
    c = app.test_client()
    bot = c.post("/bots", json={"name": "idle"}).json
    for name in (keys.bot(bot["id"]), token_key(redis_client, keys, bot["id"])):
        assert 290 <= redis_client.ttl(name) <= 300, name

    short = make(key_prefix, ARENA_BOT_UNUSED_TTL=1).test_client()
    gone = short.post("/bots", json={"name": "gone"}).json
    names = (keys.bot(gone["id"]), token_key(redis_client, keys, gone["id"]))
    wait_gone(redis_client, *names)
    assert short.get(f"/bots/{gone['id']}").status_code == 404
    fresh = make(key_prefix).test_client()  # a process that never cached the token
    r = fresh.get("/bots/me", headers={"Authorization": f"Bearer {gone['token']}"})
    assert r.status_code == 401


def test_a_bot_is_kept_once_seated_in_a_game_that_starts(key_prefix, redis_client, keys):
    app = make(key_prefix, ARENA_BOT_UNUSED_TTL=300)
    api = Api(app.test_client())
    a, ta = api.bot("a")
    b, tb = api.bot("b")
    # a's owner record (written by the owners' code: stood in for here)
    redis_client.hset(keys.bot(a), "owner", "own1")
    redis_client.set(keys.owner("own1"), "x", ex=300)
    game = api.game(ta, 2)  # a waits alone: not played yet
    assert game["status"] == "waiting"
    assert redis_client.ttl(keys.bot(a)) > 0
    r = api.c.post(f"/games/{game['id']}/seats/1", json={}, headers=api.auth(tb))
    assert r.status_code == 200 and r.json["status"] == "active"
    for bot in (a, b):
        assert redis_client.ttl(keys.bot(bot)) == -1
        assert redis_client.ttl(token_key(redis_client, keys, bot)) == -1
    assert redis_client.ttl(keys.owner("own1")) == -1


def test_entering_a_tournament_or_a_ladder_keeps_the_bot(key_prefix, redis_client, keys):
    app = make(key_prefix, ARENA_BOT_UNUSED_TTL=300)
    api = Api(app.test_client())
    bots = [api.bot(f"e{i}") for i in range(3)]
    r = api.c.post("/tournaments", headers=ADMIN,
                   json={"entrants": [bots[0][0], bots[1][0]], "variants": FAST,
                         "format": "round_robin"})
    assert r.status_code == 201, r.json
    r = api.c.post("/ladders/2p/entry", json={}, headers=api.auth(bots[2][1]))
    assert r.status_code == 200, r.json
    for bot, _ in bots:
        assert redis_client.ttl(keys.bot(bot)) == -1
        assert redis_client.ttl(token_key(redis_client, keys, bot)) == -1


# --- games ---------------------------------------------------------------------------------


def test_a_finished_casual_game_expires_then_leaves_no_index_entry(
        key_prefix, redis_client, keys):
    app = make(key_prefix, ARENA_GAME_RETENTION=3)
    api = Api(app.test_client())
    gid, tokens = api.table(2, seed=5)
    other, _ = api.table(2, seed=6)  # a live game: kept
    api.play_out(gid, tokens, random.Random(1), limit=5000)
    # gets its retention with the commit that finished it
    assert 0 < redis_client.ttl(keys.game(gid)) <= 3
    assert redis_client.ttl(keys.game(other)) > 3
    assert indexed(redis_client, keys, gid) == ["all", "finished"]
    wait_gone(redis_client, keys.game(gid), keys.retry(gid))
    assert retention_pass(app) == 1
    assert indexed(redis_client, keys, gid) == []
    assert indexed(redis_client, keys, other) == ["all", "active"]
    assert api.view(gid).status_code == 404
    listed = [g["id"] for g in api.c.get("/games").json["items"]]
    assert listed == [other]
    assert not list(redis_client.scan_iter(match=f"{key_prefix}*{gid}*"))
    # the bots that played it are kept, and can play on
    assert redis_client.ttl(keys.bot(api.c.get("/bots/me", headers=api.auth(tokens[0]))
                                     .json["id"])) == -1


def test_a_waiting_game_expires_and_an_idle_game_leaves_its_turn_set(
        key_prefix, redis_client, keys):
    app = make(key_prefix, ARENA_WAITING_GAME_TTL=40, ARENA_IDLE_GAME_TTL=1)
    api = Api(app.test_client())
    _, t = api.bot("w")
    waiting = api.game(t, 2)
    assert 30 <= redis_client.ttl(keys.game(waiting["id"])) <= 40
    gid, tokens = api.table(2, seed=3)  # active, nobody moves: idle
    seat = api.view(gid).json["turn"]
    turns = api.c.get("/bots/me/turns", query_string={"timeout": 0},
                      headers=api.auth(tokens[seat])).json["games"]
    assert turns == [gid]
    wait_gone(redis_client, keys.game(gid))
    turns = api.c.get("/bots/me/turns", query_string={"timeout": 0},
                      headers=api.auth(tokens[seat])).json["games"]
    assert turns == []
    retention_pass(app)
    assert indexed(redis_client, keys, gid) == []


def test_tournament_and_ladder_games_are_kept(key_prefix, redis_client, keys):
    app = make(key_prefix, ARENA_GAME_RETENTION=1, ARENA_IDLE_GAME_TTL=1,
               ARENA_WAITING_GAME_TTL=1)
    api = Api(app.test_client())
    bots = dict(api.bot(f"t{i}") for i in range(2))
    r = api.c.post("/tournaments", headers=ADMIN,
                   json={"entrants": list(bots), "variants": FAST, "games_per_pairing": 1,
                         "format": "round_robin"})
    assert r.status_code == 201, r.json
    t = r.json
    gid = next(g["game_id"] for rnd in t["rounds"] for g in rnd["games"] if g.get("game_id"))
    assert redis_client.ttl(keys.game(gid)) == -1
    store = app.extensions["arena"].store
    rng = random.Random(2)
    while (game := store.get_game(gid)).status != "finished":
        token = bots[game.seats[game.state.turn]]
        v = api.view(gid, token).json
        assert api.act(gid, token, rng.choice(v["legal_actions"])).status_code == 200
    assert redis_client.ttl(keys.game(gid)) == -1
    # a ladder's game, as the matchmaker writes it: no expiry by construction
    assert store.game_ttl({"ladder": {"name": "2p"}}, "finished") == 0
    assert store.game_ttl({"tournament": {"id": "x"}}, "waiting") == 0
    assert store.game_ttl({}, "finished") == 1


def test_person_house_games_expire_sooner_and_people_who_stop_playing_too(
        key_prefix, redis_client, keys):
    app = make(key_prefix, ARENA_GAME_RETENTION=5000, ARENA_PERSON_GAME_RETENTION=30,
               ARENA_PERSON_TTL=600)
    from service.storage.store import Store

    accounts = house.ensure_accounts(Store(redis_client, key_prefix))
    house.beat(Store(redis_client, key_prefix))
    house_bot, house_token = accounts[("heuristic", "opponent")]
    assert redis_client.ttl(keys.bot(house_bot)) == -1  # the house's own accounts
    api = Api(app.test_client())
    r = api.c.post("/house/games", json={"players": 2, "variants": FAST, "name": "Ana"})
    assert r.status_code == 201, r.json
    person, gid = r.json["player"], r.json["game"]["id"]
    for name in (keys.bot(person["id"]), token_key(redis_client, keys, person["id"])):
        assert 590 <= redis_client.ttl(name) <= 600  # counted from the game it started
    api.play_out(gid, [person["token"], house_token], random.Random(4))
    assert 0 < redis_client.ttl(keys.game(gid)) <= 30
    # a program's casual game keeps the long retention
    casual, tokens = api.table(2, seed=8)
    api.play_out(casual, tokens, random.Random(5))
    assert 30 < redis_client.ttl(keys.game(casual)) <= 5000


def test_a_game_cancelled_before_it_started_gets_the_short_retention(
        key_prefix, redis_client, keys):
    """A declined (or expired) invitation ends its game unplayed: kept as long as a
    person's game (``ARENA_CANCELLED_GAME_RETENTION``), not a played game's month;
    strangers can make such games by the thousand, one challenge each."""
    app = make(key_prefix, ARENA_GAME_RETENTION=5000, ARENA_CANCELLED_GAME_RETENTION=40,
               ARENA_OWNERS_PER_NETWORK=0)
    api = Api(app.test_client())
    me, my_token = api.bot("me")
    other, other_token = api.bot("other", new_owner=True)
    game = api.game(my_token, 2, seats=[me, other])
    invitation = api.c.get("/bots/me/invitations", headers=api.auth(other_token)
                           ).json["invitations"][0]
    r = api.c.post(f"/invitations/{invitation['id']}/decline", headers=api.auth(other_token))
    assert r.status_code == 200, r.json
    assert api.view(game["id"]).json["status"] == "finished"
    assert 30 <= redis_client.ttl(keys.game(game["id"])) <= 40
    assert app.extensions["arena"].store.game_ttl({"cancelled": {"reason": "expired"}},
                                                  "finished") == 40


@pytest.mark.parametrize("status", ["waiting", "active", "finished"])
def test_retention_settings_of_zero_keep_for_ever(key_prefix, status):
    app = make(key_prefix, ARENA_GAME_RETENTION=0, ARENA_WAITING_GAME_TTL=0,
               ARENA_IDLE_GAME_TTL=0, ARENA_PERSON_GAME_RETENTION=0)
    assert app.extensions["arena"].store.game_ttl({"person": 1}, status) == 0
