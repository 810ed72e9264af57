"""A person's account (``POST /bots`` with ``person``, as the play page registers one) that
sits down in a game without a move limit gives it one, so an abandoned browser tab cannot
hold the game and its bots forever. Programs' accounts change nothing."""

from __future__ import annotations

from service.http.app import create_app
from tests.conftest import REDIS_URL
from tests.service.conftest import ADMIN_TOKEN, Api


def test_a_person_joining_gives_a_game_without_a_limit_the_person_move_limit(api):
    bot_id, bot_token = api.bot("bot")
    game = api.game(bot_token, 2, seats=[bot_id, None])
    assert game["move_limit"] is None
    person = api.c.post("/bots", json={"name": "ann", "person": True}).json
    r = api.c.post(f"/games/{game['id']}/seats/1", headers=api.auth(person["token"]))
    assert r.status_code == 200, r.json
    assert r.json["move_limit"] == 60.0
    assert r.json["status"] == "active" and r.json["deadline"] is not None


def test_a_program_joining_leaves_the_game_without_a_limit(api):
    bot_id, bot_token = api.bot("bot")
    game = api.game(bot_token, 2, seats=[bot_id, None])
    _, other = api.bot("other")
    r = api.c.post(f"/games/{game['id']}/seats/1", headers=api.auth(other))
    assert r.status_code == 200 and r.json["move_limit"] is None and r.json["deadline"] is None


def test_a_game_created_with_a_person_seated_gets_the_limit_and_a_set_limit_is_kept(api):
    person = api.c.post("/bots", json={"name": "ann", "person": True}).json
    bot_id, _ = api.bot("bot", owner=person["token"])  # ann's own bot: seated at once
    made = api.game(person["token"], 2, seats=[person["id"], bot_id])
    assert made["move_limit"] == 60.0
    kept = api.game(person["token"], 2, seats=[person["id"], bot_id], move_limit=300)
    assert kept["move_limit"] == 300


def test_the_person_move_limit_is_a_setting(key_prefix):
    app = create_app({"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix,
                      "ARENA_RATE_LIMIT": 0, "ARENA_ADMIN_TOKEN": ADMIN_TOKEN,
                      "ARENA_PERSON_MOVE_LIMIT": 15, "TESTING": True})
    api = Api(app.test_client())
    bot_id, bot_token = api.bot("bot")
    game = api.game(bot_token, 2, seats=[bot_id, None])
    person = api.c.post("/bots", json={"name": "ann", "person": True}).json
    r = api.c.post(f"/games/{game['id']}/seats/1", headers=api.auth(person["token"]))
    assert r.json["move_limit"] == 15.0


def test_a_bot_says_whether_it_is_a_persons_account(api):
    """The bot page titles a person's account as a player's, not a bot's."""
    person = api.c.post("/bots", json={"name": "ann", "person": True}).json
    bot_id, _ = api.bot("bot")
    assert api.c.get(f"/bots/{person['id']}").json["person"] is True
    assert api.c.get(f"/bots/{bot_id}").json["person"] is False
    assert api.c.get("/bots/me", headers=api.auth(person["token"])).json["person"] is True
