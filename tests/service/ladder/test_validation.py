"""The validation game (service/arena/ladder/validation.py): a bot's first ladder entry plays one
unrated game against a house bot before it is queued — real Redis, the real Flask app.

The house process is stood in for by what it leaves in Redis (its accounts, with fresh
tokens, and its "alive" key: ``service.arena.accounts.house`` itself writes them), and the house
bot's moves are made here with its token; the matchmaker's repair pass and the sweeper are
called directly, with explicit clocks. The same with real bots over HTTP (BotRunner, the
house process, gunicorn): tests/service/ladder/test_validation_service.py."""

from __future__ import annotations

import json
import random
import time

import pytest

from service.arena.accounts import house
from service.arena.games.deadlines import Sweeper
from service.arena.ladder.validation import HOUSE_STRATEGY
from service.http.app import create_app
from service.storage.store import Store
from tests.conftest import REDIS_URL
from tests.service.conftest import Api, settle

QUICK = json.dumps({"quick": {"players": 2, "variants": {"target": 3}, "move_limit": 30,
                              "time_bank": 5},
                    "quad": {"players": 4, "variants": {"target": 3}}})


@pytest.fixture
def app(key_prefix):
    return create_app({"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix,
                       "ARENA_RATE_LIMIT": 0, "TESTING": True, "ARENA_LADDERS": QUICK,
                       "ARENA_LADDER_REMATCH_WAIT": 0.0, "ARENA_OWNERS_PER_NETWORK": 0})


@pytest.fixture
def api(client):
    return Api(client, one_owner=False)


@pytest.fixture
def house_token(app) -> str:
    """The house is up: its accounts exist and say they play. The opponent's token."""
    store: Store = app.extensions["arena"].store
    accounts = house.ensure_accounts(store)
    house.beat(store)
    return accounts[(HOUSE_STRATEGY, "opponent")][1]


def join(api: Api, token: str, name: str = "quick"):
    r = api.c.post(f"/ladders/{name}/entry", json={}, headers=api.auth(token))
    assert r.status_code == 200, r.json
    return r.json


def entry(api: Api, token: str, name: str = "quick"):
    return api.c.get(f"/ladders/{name}/entry", headers=api.auth(token)).json


def play(api: Api, gid: str, tokens: dict[str, str], rng: random.Random,
         until: int | None = None) -> None:
    """Random legal moves for every seat (by its bot's token), to the end or ``until``
    actions have been played."""
    for _ in range(3000):
        spec = api.view(gid).json
        if spec["status"] == "finished" or (until is not None and spec["ply"] >= until):
            settle(api.c)
            return
        seat = spec["turn"]
        token = tokens[spec["seats"][seat]["bot_id"]]
        v = api.view(gid, token, seat=seat).json
        r = api.act(gid, token, rng.choice(v["legal_actions"]), version=v["version"],
                    seat=seat)
        assert r.status_code == 200, r.json
    raise AssertionError("the game did not end")


_CLOCK = [0.0]


def later() -> float:
    _CLOCK[0] = max(_CLOCK[0], time.time()) + 3600
    return _CLOCK[0]


@pytest.mark.parametrize("ladder", ["quick", "quad"])
def test_a_bot_that_plays_its_validation_game_is_queued_unrated_and_never_again(
        api, app, house_token, ladder):
    lad = app.extensions["ladders"]
    arena = app.extensions["arena"]
    bot, token = api.bot("newcomer")
    e = join(api, token, ladder)
    assert e["state"] == "validating" and e["validation_game"]
    gid = e["validation_game"]
    game = arena.store.get_game(gid)
    house_id = game.seats[1]
    players = lad.ladder(ladder).players
    assert game.seats == ([bot, house_id] if players == 2 else [bot, house_id] * 2)
    assert game.meta.get("ladder") is None  # an ordinary, unrated game
    assert game.meta["move_limit"] == lad.ladder(ladder).move_limit
    assert game.meta.get("time_bank") == lad.ladder(ladder).time_bank
    listed = {g["id"]: g for g in api.c.get("/games").json["items"]}
    assert listed[gid]["ladder"] is None and listed[gid]["time_bank"] == game.meta["time_bank"]
    # it is found like any game: the bot's turns
    assert lad.pass_once() == []  # validating: not matched
    assert entry(api, token, ladder)["state"] == "validating"
    play(api, gid, {bot: token, house_id: house_token}, random.Random(5))
    e = entry(api, token, ladder)
    assert e["state"] == "waiting" and e["validation_game"] is None and e["reason"] is None
    assert e["rating"]["games"] == 0
    assert api.c.get(f"/ladders/{ladder}/standings").json["items"] == []
    assert api.c.get(f"/ladders/{ladder}/bots/{bot}/history").json["games"] == 0
    # passed once: not validated again, on this ladder or another
    api.c.delete(f"/ladders/{ladder}/entry", headers=api.auth(token))
    assert join(api, token, ladder)["state"] == "waiting"
    other = "quad" if ladder == "quick" else "quick"
    assert join(api, token, other)["state"] == "waiting"


def test_a_bot_that_never_moves_is_not_admitted_and_told_why(api, app, house_token):
    lad = app.extensions["ladders"]
    arena = app.extensions["arena"]
    bot, token = api.bot("silent")
    e = join(api, token)
    gid = e["validation_game"]
    house_id = arena.store.get_game(gid).seats[1]
    sweeper = Sweeper(arena)
    for _ in range(20):  # the house moves when it is its turn; the bot never does
        game = arena.store.get_game(gid)
        if game.status == "finished" or any(game.seats[t["seat"]] == bot
                                            for t in game.meta.get("timeouts", ())):
            break
        if game.seats[game.state.turn] == house_id:
            play(api, gid, {house_id: house_token}, random.Random(1), until=game.state.ply + 1)
        else:
            assert sweeper.sweep_once(later()) == 1
    lad.pass_once()  # the repair pass judges it
    e = entry(api, token)
    assert e["state"] == "not_admitted" and e["validation_game"] == gid
    assert "never moved" in e["reason"] and gid in e["reason"]
    assert arena.store.get_game(gid).status == "finished"  # ended at once
    # ... as its forfeit, through the one door for every end: the view and record say so
    view = api.view(gid, token).json
    assert view["phase"] == "over" and view["turn"] is None and view["legal_actions"] == []
    assert view["ended"] == {"reason": "forfeit", "winner": 1, "forfeit_by": [bot],
                             "why": "validation"} and view["winner"] == 1
    assert api.c.get(f"/games/{gid}/record").json["ended"] == view["ended"]
    assert api.c.get("/ladders/quick").json["queue"] == []  # not queued
    # joining again: another validation game
    again = join(api, token)
    assert again["state"] == "validating" and again["validation_game"] not in (None, gid)


def test_a_bot_that_times_out_mid_game_is_not_admitted(api, app, house_token):
    lad = app.extensions["ladders"]
    arena = app.extensions["arena"]
    bot, token = api.bot("slow")
    gid = join(api, token)["validation_game"]
    house_id = arena.store.get_game(gid).seats[1]
    rng = random.Random(3)
    tokens = {bot: token, house_id: house_token}
    sweeper = Sweeper(arena)
    moved = False
    for _ in range(400):  # the bot makes a decision of its own, then times out once
        game = arena.store.get_game(gid)
        if game.status == "finished":
            break
        mine = game.seats[game.state.turn] == bot
        if mine and moved:
            assert sweeper.sweep_once(later()) == 1
            break
        moved = moved or mine
        play(api, gid, tokens, rng, until=game.state.ply + 1)
    lad.settle_all()
    e = entry(api, token)
    if arena.store.get_game(gid).meta.get("timeouts"):
        assert e["state"] == "not_admitted" and e["validation_game"] == gid
        assert "the clock played 1 of" in e["reason"] and "move limit" in e["reason"]
        assert arena.store.get_game(gid).status == "finished"
    else:  # the game ended before a second decision of the bot (a short game): passed
        assert e["state"] == "waiting"


def house_api(key_prefix: str, **config) -> Api:
    """An app of its own (``config`` on top of the fixture's), with the house up."""
    app = create_app({"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix,
                      "ARENA_RATE_LIMIT": 0, "TESTING": True, "ARENA_LADDERS": QUICK,
                      "ARENA_OWNERS_PER_NETWORK": 0, **config})
    store = app.extensions["arena"].store
    house.ensure_accounts(store)
    house.beat(store)
    return Api(app.test_client(), one_owner=False)


def test_validation_games_are_house_games_of_the_owners_hourly_allowance(key_prefix):
    """Each join that starts a validation game is one of the house games its owner may
    have an hour (ARENA_HOUSE_GAMES_PER_CHALLENGER): leaving and joining again cannot keep
    the house playing; past the allowance the join is refused (429) and changes nothing."""
    api = house_api(key_prefix, ARENA_HOUSE_GAMES_PER_CHALLENGER=2)
    _, token = api.bot("restless")
    games = {join(api, token)["validation_game"]}
    assert api.c.delete("/ladders/quick/entry", headers=api.auth(token)).status_code == 200
    games.add(join(api, token, "quad")["validation_game"])  # another ladder: counted too
    assert None not in games and len(games) == 2
    assert api.c.delete("/ladders/quad/entry", headers=api.auth(token)).status_code == 200
    before = entry(api, token)
    listed = api.c.get("/games").json["items"]
    r = api.c.post("/ladders/quick/entry", json={}, headers=api.auth(token))
    assert r.status_code == 429 and r.json["type"] == "/problems/rate-limited", r.json
    assert "house" in r.json["detail"] and int(r.headers["Retry-After"]) >= 1
    assert entry(api, token) == before and before["state"] == "off"
    assert api.c.get("/games").json["items"] == listed  # no game made
    # a new bot of the same owner: refused too, and its account not made permanent
    sibling, sibling_token = api.bot("sibling", owner=token)
    r = api.c.post("/ladders/quick/entry", json={}, headers=api.auth(sibling_token))
    assert r.status_code == 429, r.json
    store = api.c.application.extensions["arena"].store
    assert store.r.ttl(store.keys.bot(sibling)) > 0  # still expires, as an unused bot does


def test_no_house_bots_no_validation(api, app):
    _, token = api.bot("early")
    e = join(api, token)
    assert e["state"] == "waiting" and e["validation_game"] is None


def test_validation_can_be_turned_off(key_prefix, client):
    api = house_api(key_prefix, ARENA_LADDER_VALIDATION=0)
    _, token = api.bot("trusted")
    assert join(api, token)["state"] == "waiting"
