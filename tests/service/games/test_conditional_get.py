"""Conditional GET of a game's view: its ETag is the version, and ``If-None-Match`` with
it answers 304 with no body, decided before the view is rendered; never where the view
can change without the version (a duplicate deal's embargo, a failed turn delivery)."""

from __future__ import annotations

import json

from service.arena.webhooks.callbacks import failed_key


def test_unchanged_view_is_304_and_a_move_makes_it_200(api):
    game_id, tokens = api.table(2, 11)
    first = api.view(game_id)
    tag = first.headers["ETag"]
    assert tag == f'"{first.json["version"]}"'
    for sent in (tag, f"W/{tag}", f'"999999", {tag}', "*"):
        again = api.c.get(f"/games/{game_id}", headers={"If-None-Match": sent})
        assert again.status_code == 304, sent
        assert again.get_data() == b"" and again.headers["ETag"] == tag
        assert again.headers["Cache-Control"] == "no-store"
    seat = first.json["turn"]
    mine = api.view(game_id, tokens[seat])
    assert mine.headers["ETag"] == tag
    same = api.c.get(f"/games/{game_id}", headers={**api.auth(tokens[seat]),
                                                   "If-None-Match": tag})
    assert same.status_code == 304 and "Authorization" in same.headers["Vary"]
    moved = api.act(game_id, tokens[seat], mine.json["legal_actions"][0],
                    version=mine.json["version"])
    assert moved.status_code == 200
    after = api.c.get(f"/games/{game_id}", headers={"If-None-Match": tag})
    assert after.status_code == 200 and after.headers["ETag"] != tag
    assert after.json["version"] == mine.json["version"] + 1


def test_a_failed_delivery_is_never_hidden_by_a_304(app, api):
    game_id, tokens = api.table(2, 12)
    view = api.view(game_id, tokens[0])
    tag = view.headers["ETag"]
    bot = view.json["seats"][0]["bot_id"]
    store = app.extensions["arena"].store
    store.r.hset(failed_key(store.p, bot), game_id,
                 json.dumps({"event": "turn", "game_id": game_id,
                             "version": view.json["version"], "seat": 0, "at": 1.0,
                             "outcome": "timeout", "status": None, "action": None,
                             "problem": None, "detail": None, "attempts": 1,
                             "latency_ms": None}))
    again = api.c.get(f"/games/{game_id}", headers={**api.auth(tokens[0]),
                                                    "If-None-Match": tag})
    assert again.status_code == 200
    spectator = api.c.get(f"/games/{game_id}", headers={"If-None-Match": tag})
    assert spectator.status_code == 304


def test_a_duplicate_deal_is_always_rendered(app, api):
    game_id, tokens = api.table(2, 13)
    store = app.extensions["arena"].store
    game = store.get_game(game_id)
    meta = {**game.meta, "embargo": "d1"}
    store.r.hset(store.game_key(game_id), "meta", json.dumps(meta))
    view = api.view(game_id, tokens[0])
    again = api.c.get(f"/games/{game_id}", headers={**api.auth(tokens[0]),
                                                    "If-None-Match": view.headers["ETag"]})
    assert again.status_code == 200


def test_a_complete_record_is_304_before_it_is_built(api):
    import random

    game_id, tokens = api.table(2, 14)
    live = api.c.get(f"/games/{game_id}/record")
    assert live.status_code == 200 and "ETag" not in live.headers  # still changing
    api.play_out(game_id, tokens, random.Random(14))
    done = api.c.get(f"/games/{game_id}/record")
    tag = done.headers["ETag"]
    again = api.c.get(f"/games/{game_id}/record", headers={"If-None-Match": tag})
    assert again.status_code == 304 and again.get_data() == b""
    other = api.c.get(f"/games/{game_id}/record", headers={"If-None-Match": '"1"'})
    assert other.status_code == 200 and other.json == done.json
