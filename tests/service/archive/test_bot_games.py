"""``GET /bots/{id}/games``: a bot's finished games, indexed when a game finishes, newest
first, filtered, as pages (the one list shape) and as an NDJSON stream of full records;
embargoed deals withheld until the embargo lifts."""

from __future__ import annotations

import json
import random
import time
from typing import Any

from service.arena.core.status import embargo_key
from service.engine import Variants, apply, build_record, current_seat, legal_actions, new_game

NDJSON = {"Accept": "application/x-ndjson"}


def write_finished(store: Any, seats: list[str], names: list[str], at: float, seed: int = 1,
                   **extra: Any) -> str:
    """A finished game written straight through the store (played by the engine at
    random to its end, R1-R23 as the engine applies them), indexed as a commit would."""
    variants = Variants.from_dict({"target": 7})
    state, _ = new_game(len(seats), seed, variants)
    rng = random.Random(seed)
    log = []
    while not state.is_over:
        action = rng.choice(legal_actions(state))
        state, _ = apply(state, action, seat=current_seat(state))
        log.append(chr(48 + action))
    meta = {"players": len(seats), "seed": seed, "variants": {"target": 7}, "seats": seats,
            "names": names, "created": int(at) - 60, **extra}
    pipe = store.r.pipeline(transaction=True)
    game = store.add_game(pipe, meta, state, "finished", None)
    pipe.hset(store.game_key(game.id), mapping={"log": "".join(log), "updated": at})
    pipe.execute()
    store.index_finished(game.id, meta, at)
    return game.id


def test_a_game_finished_by_play_is_indexed_with_its_full_record(api):
    game_id, tokens = api.table(2, 5)
    played = api.play_out(game_id, tokens, random.Random(5))
    bot = api.c.get("/bots/me", headers=api.auth(tokens[0])).json["id"]
    page = api.c.get(f"/bots/{bot}/games").json
    assert [g["id"] for g in page["items"]] == [game_id]
    assert page["next_cursor"] is None
    item = page["items"][0]
    assert item["status"] == "finished" and item["embargoed"] is False
    assert item["finished_at"] == api.view(game_id).json["updated_at"]
    lines = api.c.get(f"/bots/{bot}/games", headers=NDJSON)
    assert lines.mimetype == "application/x-ndjson"
    rows = [json.loads(x) for x in lines.get_data(as_text=True).splitlines()]
    assert len(rows) == 1 and rows[0]["id"] == game_id
    assert rows[0]["record"]["actions"] == played
    assert rows[0]["record"] == api.c.get(f"/games/{game_id}/record").json


def test_pages_newest_first_with_cursor_and_link(app, api):
    store = app.extensions["arena"].store
    me, _ = api.bot("me")
    other, _ = api.bot("other")
    now = time.time()
    ids = [write_finished(store, [me, other], ["me", "other"], now - 100 + i, seed=i)
           for i in range(5)]
    # two games finishing at the same instant keep an exact order across pages
    ids.append(write_finished(store, [other, me], ["other", "me"], now, seed=7))
    ids.append(write_finished(store, [me, other], ["me", "other"], now, seed=8))
    expected = sorted(ids[:5], reverse=False)
    seen, url, links = [], f"/bots/{me}/games?limit=2", 0
    while url:
        r = api.c.get(url)
        assert r.status_code == 200
        seen += [g["id"] for g in r.json["items"]]
        link = r.headers.get("Link")
        if r.json["next_cursor"] is None:
            assert link is None
            url = None
        else:
            links += 1
            assert link.endswith('; rel="next"') and "limit=2" in link
            url = link[1:link.index(">")]
            assert r.json["next_cursor"] in url
    assert len(seen) == 7 and len(set(seen)) == 7 and links == 3
    assert seen[2:] == list(reversed(ids[:5])) and set(seen[:2]) == set(ids[5:])
    assert expected  # the five older games come last, newest first


def test_filters(app, api):
    store = app.extensions["arena"].store
    me, _ = api.bot("me")
    a, _ = api.bot("a")
    b, _ = api.bot("b")
    now = time.time()
    casual = write_finished(store, [me, a], ["me", "a"], now - 50, seed=1)
    tour = write_finished(store, [me, b], ["me", "b"], now - 40, seed=2,
                          tournament={"id": "0123456789ab", "slot": 1})
    ladder = write_finished(store, [b, me], ["b", "me"], now - 30, seed=3,
                            ladder={"name": "2p"})
    four = write_finished(store, [me, a, me, b], ["me", "a", "me", "b"], now - 20, seed=4)

    def ids(**q: Any) -> list[str]:
        r = api.c.get(f"/bots/{me}/games", query_string=q)
        assert r.status_code == 200, r.json
        return [g["id"] for g in r.json["items"]]

    assert ids() == [four, ladder, tour, casual]
    assert ids(rated="true") == [ladder, tour]
    assert ids(rated="false") == [four, casual]
    assert ids(tournament="0123456789ab") == [tour]
    assert ids(ladder="2p") == [ladder]
    assert ids(opponent=a) == [four, casual]
    assert ids(opponent=b) == [four, ladder, tour]
    assert ids(players=4) == [four]
    assert ids(since=now - 45, until=now - 25) == [ladder, tour]
    lines = api.c.get(f"/bots/{me}/games", query_string={"rated": "true", "records": "false"},
                      headers=NDJSON).get_data(as_text=True).splitlines()
    assert [json.loads(x)["id"] for x in lines] == [ladder, tour]
    assert all("record" not in json.loads(x) for x in lines)


def test_embargoed_deal_is_withheld_until_it_lifts(app, api):
    arena = app.extensions["arena"]
    store = arena.store
    me, _ = api.bot("me")
    a, _ = api.bot("a")
    gid = write_finished(store, [me, a], ["me", "a"], time.time(), seed=3, embargo="deal-1")
    store.r.sadd(embargo_key(store.tours_prefix), "deal-1")
    item = api.c.get(f"/bots/{me}/games").json["items"][0]
    assert item["id"] == gid and item["embargoed"] is True
    assert item["scores"] is None and item["winner"] is None
    line = json.loads(api.c.get(f"/bots/{me}/games", headers=NDJSON).get_data())
    assert line["embargoed"] is True and line["record"] is None
    store.r.srem(embargo_key(store.tours_prefix), "deal-1")
    line = json.loads(api.c.get(f"/bots/{me}/games", headers=NDJSON).get_data())
    assert line["embargoed"] is False and line["record"]["complete"] is True
    game = store.get_game(gid)
    assert line["record"]["scores"] == build_record(2, 3, game.variants, game.actions)["scores"]


def test_expired_games_leave_the_index_and_repair_restores_it(app, api):
    store = app.extensions["arena"].store
    me, _ = api.bot("me")
    a, _ = api.bot("a")
    keep = write_finished(store, [me, a], ["me", "a"], time.time() - 5, seed=1)
    gone = write_finished(store, [me, a], ["me", "a"], time.time(), seed=2)
    store.r.delete(store.game_key(gone))
    assert [g["id"] for g in api.c.get(f"/bots/{me}/games").json["items"]] == [keep]
    assert store.r.zrange(store.bot_finished_key(me), 0, -1) == [keep.encode()]
    store.r.delete(store.bot_finished_key(me), store.bot_finished_key(a))
    assert api.c.get(f"/bots/{me}/games").json["items"] == []
    assert store.repair_finished() >= 1
    assert [g["id"] for g in api.c.get(f"/bots/{a}/games").json["items"]] == [keep]


def test_errors_are_problems(api):
    me, _ = api.bot("me")
    for url in ("/bots/0123456789ab/games", "/bots/0123456789ab/games?limit=1"):
        r = api.c.get(url)
        assert r.status_code == 404 and r.mimetype == "application/problem+json"
    r = api.c.get("/bots/0123456789ab/games", headers=NDJSON)
    assert r.status_code == 404 and r.mimetype == "application/problem+json"
    for bad in ({"cursor": "nope"}, {"rated": "yes"}, {"players": 3}, {"limit": 0},
                {"opponent": "x"}):
        r = api.c.get(f"/bots/{me}/games", query_string=bad)
        assert r.status_code == 422 and r.mimetype == "application/problem+json", bad


def test_conditional_get_of_a_page(app, api):
    store = app.extensions["arena"].store
    me, _ = api.bot("me")
    a, _ = api.bot("a")
    write_finished(store, [me, a], ["me", "a"], time.time() - 5, seed=1)
    first = api.c.get(f"/bots/{me}/games")
    tag = first.headers["ETag"]
    again = api.c.get(f"/bots/{me}/games", headers={"If-None-Match": tag})
    assert again.status_code == 304 and again.get_data() == b"" and again.headers["ETag"] == tag
    write_finished(store, [me, a], ["me", "a"], time.time(), seed=2)
    changed = api.c.get(f"/bots/{me}/games", headers={"If-None-Match": tag})
    assert changed.status_code == 200 and changed.headers["ETag"] != tag
