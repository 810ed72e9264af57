"""An owner's own bots: rotating and revoking a token (the old one refused at once by the
process that answered, within ``TOKEN_CACHE_S`` by any other), retiring a bot (it plays no
more; its games, ratings and name kept), and ``GET /owners/me``."""

from __future__ import annotations

import random

from service.storage.bots import TOKEN_CACHE_S


def problem(r, status: int, kind: str) -> None:
    assert r.status_code == status, r.json
    assert r.mimetype == "application/problem+json"
    assert r.json["type"].endswith("/" + kind), r.json


def test_rotate_shows_a_new_token_once_and_refuses_the_old(api):
    bot, token = api.bot("rot")
    r = api.c.post("/bots/me/token", headers=api.auth(token))
    assert r.status_code == 200
    new = r.json["token"]
    assert r.json["id"] == bot and new.startswith("af_") and new != token
    assert r.json["old_token_grace"] == TOKEN_CACHE_S
    problem(api.c.get("/bots/me", headers=api.auth(token)), 401, "unauthorized")
    assert api.c.get("/bots/me", headers=api.auth(new)).json["id"] == bot
    assert new not in api.c.get(f"/bots/{bot}").get_data(as_text=True)


def test_another_process_stops_taking_the_old_token_after_the_grace(app, api, monkeypatch):
    """Two processes share one Redis: the one that did not rotate holds the old token in
    its cache, and takes it until the cache entry's time is up, never after."""
    import time as real_time

    from service.http.app import create_app
    from service.storage import bots as bots_module

    other = create_app({**app.config})
    bot, token = api.bot("two")
    store = other.extensions["arena"].store
    assert store.bot_for_token(token) == bot  # cached there now
    api.c.post("/bots/me/token", headers=api.auth(token))
    assert store.bot_for_token(token) == bot  # within the grace
    later = real_time.monotonic() + TOKEN_CACHE_S + 1
    monkeypatch.setattr(bots_module.time, "monotonic", lambda: later)
    assert store.bot_for_token(token) is None


def test_revoke_then_rotate_in_from_a_sibling(api):
    _, first_token = api.bot("first")
    second, second_token = api.bot("second")
    r = api.c.delete(f"/bots/{second}/token", headers=api.auth(first_token))
    assert r.status_code == 200 and r.json["token"] is None
    problem(api.c.get("/bots/me", headers=api.auth(second_token)), 401, "unauthorized")
    r = api.c.post(f"/bots/{second}/token", headers=api.auth(first_token))
    assert r.status_code == 200
    assert api.c.get("/bots/me", headers=api.auth(r.json["token"])).json["id"] == second


def test_another_owners_bot_is_not_found(api):
    _, mine = api.bot("mine")
    theirs, their_token = api.bot("theirs", new_owner=True)
    for r in (api.c.post(f"/bots/{theirs}/token", headers=api.auth(mine)),
              api.c.delete(f"/bots/{theirs}/token", headers=api.auth(mine)),
              api.c.post(f"/bots/{theirs}/retirement", headers=api.auth(mine)),
              api.c.post("/bots/0123456789ab/token", headers=api.auth(mine))):
        problem(r, 404, "not-found")
    assert api.c.get("/bots/me", headers=api.auth(their_token)).status_code == 200
    problem(api.c.post(f"/bots/{theirs}/token"), 401, "unauthorized")


def test_a_retired_bot_plays_no_more_and_keeps_its_games(api):
    game_id, tokens = api.table(2, 21)
    api.play_out(game_id, tokens, random.Random(21))
    retiree = api.view(game_id).json["seats"][1]["bot_id"]
    r = api.c.post(f"/bots/{retiree}/retirement", headers=api.auth(tokens[0]))
    assert r.status_code == 200 and r.json["retired"] is not None
    assert r.json["suspended"] == "retired by its owner" and r.json["name"] == "b1"
    again = api.c.post(f"/bots/{retiree}/retirement", headers=api.auth(tokens[0]))
    assert again.json["retired"] == r.json["retired"]
    # refused: joining, being seated, entering the ladder, acting in any way
    fresh = api.game(tokens[0], 2, seats=[None, None])
    problem(api.c.post(f"/games/{fresh['id']}/seats/1", headers=api.auth(tokens[1])),
            403, "suspended")
    r = api.c.post("/games", json={"players": 2, "seats": [None, retiree]},
                   headers=api.auth(tokens[0]))
    assert r.status_code == 403 and r.mimetype == "application/problem+json"
    problem(api.c.post("/ladders/2p/entry", headers=api.auth(tokens[1])), 403, "suspended")
    # kept: its name, its finished games
    assert api.c.get(f"/bots/{retiree}").json["name"] == "b1"
    assert [g["id"] for g in api.c.get(f"/bots/{retiree}/games").json["items"]] == [game_id]


def test_owner_me_lists_bots_ratings_and_live_games(api):
    a, a_token = api.bot("a")
    b, _ = api.bot("b")
    _, stranger = api.bot("c", new_owner=True)
    live = api.game(a_token, 2, seats=[a, b])
    waiting = api.game(a_token, 2, seats=[a, None])
    me = api.c.get("/owners/me", headers=api.auth(a_token))
    assert me.status_code == 200
    bots = {x["id"]: x for x in me.json["bots"]}
    assert set(bots) == {a, b}
    assert [g["id"] for g in bots[a]["live_games"]] == [live["id"], waiting["id"]] or \
        {g["id"] for g in bots[a]["live_games"]} == {live["id"], waiting["id"]}
    assert [g["id"] for g in bots[b]["live_games"]] == [live["id"]]
    assert bots[a]["ratings"] == {"leaderboard": None, "ladders": {}}
    assert bots[a]["retired"] is None
    other = api.c.get("/owners/me", headers=api.auth(stranger)).json
    assert [x["name"] for x in other["bots"]] == ["c"] and other["id"] != me.json["id"]
    problem(api.c.get("/owners/me"), 401, "unauthorized")


def test_revoke_your_own_token(api):
    _, owner_token = api.bot("owner")
    bot, token = api.bot("self")
    r = api.c.delete("/bots/me/token", headers=api.auth(token))
    assert r.status_code == 200 and r.json == {"id": bot, "token": None,
                                               "old_token_grace": TOKEN_CACHE_S}
    problem(api.c.get("/bots/me", headers=api.auth(token)), 401, "unauthorized")
    assert api.c.post(f"/bots/{bot}/token", headers=api.auth(owner_token)).status_code == 200
