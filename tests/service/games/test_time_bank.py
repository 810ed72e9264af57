"""The time bank (service/arena/core/clock.py): a decision slower than the move limit draws the
excess from its seat's bank, and the clock plays only once the bank is empty too — real
Redis, the real Flask app. The sweeper is called with explicit clocks
(``Sweeper.sweep_once(now)``), so what "past the limit" and "past the bank" mean never
depends on the machine's speed; the one real wait (a slow decision) is bounded from both
sides by clocks read around the request. The cross-process and webhook cases are in
tests/service/games/test_time_bank_service.py."""

from __future__ import annotations

import time

from service.arena.games.deadlines import Sweeper
from tests.service.conftest import ADMIN_TOKEN

EPS = 0.002  # the clock's rounding: deadlines and banks are kept to the millisecond


def seat_view(api, gid: str, token: str, seat: int) -> dict:
    r = api.view(gid, token, seat=seat)
    assert r.status_code == 200, r.json
    return r.json


def test_a_slow_decision_within_the_bank_is_not_timed_out_and_draws_the_excess(app, api):
    (a, ta), (b, tb) = api.bot("a"), api.bot("b")
    tokens = {a: ta, b: tb}
    g = api.game(ta, 2, seats=[a, b], seed=4, move_limit=0.5, time_bank=20)
    assert g["move_limit"] == 0.5 and g["time_bank"] == 20
    arena = app.extensions["arena"]
    sweeper = Sweeper(arena)
    spec = api.view(g["id"]).json
    seat = spec["turn"]
    token = tokens[spec["seats"][seat]["bot_id"]]
    v = seat_view(api, g["id"], token, seat)
    assert v["bank_left"] == 20 and v["move_limit"] == 0.5
    # the deadline is the decision's start + limit + bank, and the index agrees
    start = v["deadline"] - 20.5
    assert v["updated_at"] - 1 < start <= v["updated_at"] + 1
    store = arena.store
    assert store.r.zscore(store.deadlines_key, f"{g['id']}:{v['version']}") == \
        v["deadline"]
    # past the move limit but within the bank: the clock does not play
    assert sweeper.sweep_once(start + 0.5 + 5) == 0
    assert store.get_game(g["id"]).version == v["version"]
    time.sleep(1.0)  # slower than the limit
    before = time.time()
    r = api.act(g["id"], token, v["legal_actions"][0], version=v["version"])
    after = time.time()
    assert r.status_code == 200, r.json
    mine = seat_view(api, g["id"], token, seat)
    # drawn: the excess over the limit, measured by the service between our two clocks
    limit_end = v["deadline"] - 20
    assert 20 - (after - limit_end) - EPS <= mine["bank_left"] <= 20 - (before - limit_end) + EPS
    assert mine["bank_left"] < 20 - 0.4
    assert api.c.get(f"/games/{g['id']}/record").json["timeouts"] == []
    # the other seat's bank is whole, and its deadline counts all of it
    spec = api.view(g["id"]).json
    if spec["status"] == "active" and spec["turn"] != seat:
        other = seat_view(api, g["id"], tokens[spec["seats"][spec["turn"]]["bot_id"]],
                          spec["turn"])
        assert other["bank_left"] == 20
        assert abs(other["deadline"] - 20.5 - other["updated_at"]) < 1
        assert spec["bank_left"] == 20  # a spectator sees the bank of the seat in turn


def test_past_the_bank_the_clock_plays_and_the_bank_is_spent(app, api):
    (a, ta), (b, tb) = api.bot("a"), api.bot("b")
    g = api.game(ta, 2, seats=[a, b], seed=9, move_limit=0.5, time_bank=2)
    arena = app.extensions["arena"]
    sweeper = Sweeper(arena)
    spec = api.view(g["id"]).json
    seat = spec["turn"]
    token = ta if spec["seats"][seat]["bot_id"] == a else tb
    deadline = spec["deadline"]
    assert sweeper.sweep_once(deadline - 0.5) == 0  # within the bank: nothing
    assert sweeper.sweep_once(deadline + 0.01) == 1  # limit and bank both gone: the clock
    record = api.c.get(f"/games/{g['id']}/record").json
    assert [t["seat"] for t in record["timeouts"]] == [seat]
    mine = seat_view(api, g["id"], token, seat)
    assert mine["bank_left"] == 0
    game = arena.store.get_game(g["id"])
    if game.status == "active" and game.state.turn == seat:  # its next decision: the
        # limit alone, from the clock the timeout was applied with
        assert abs(game.deadline - (deadline + 0.01 + 0.5)) <= EPS


def test_every_payload_carries_the_seat_s_clock(app, api):
    (a, ta), (b, tb) = api.bot("a"), api.bot("b")
    g = api.game(ta, 2, seats=[a, b], seed=4, move_limit=30, time_bank=45)
    spec = api.view(g["id"]).json
    seat = spec["turn"]
    bot = spec["seats"][seat]["bot_id"]
    token = ta if bot == a else tb
    clock = {"move_limit": 30.0, "bank_left": 45.0, "deadline": spec["deadline"]}

    def has_clock(view: dict) -> None:
        assert {k: view[k] for k in clock} == clock, view

    has_clock(seat_view(api, g["id"], token, seat))
    turn = api.c.get(f"/games/{g['id']}/turn", headers=api.auth(token),
                     query_string={"timeout": 0})
    assert turn.status_code == 200
    has_clock(turn.json["view"])
    turns = api.c.get("/bots/me/turns", headers=api.auth(token), query_string={"timeout": 0})
    assert turns.status_code == 200 and turns.json["games"] == [g["id"]]
    assert turns.json["clocks"] == [{"game_id": g["id"], "seat": seat, **clock}]
    idle = tb if token == ta else ta  # the other bot: not its turn anywhere
    assert "clocks" not in api.c.get("/bots/me/turns", headers=api.auth(idle),
                                     query_string={"timeout": 0}).json
    # an action's answer: the clock of the seat that acted (its bank whole: it was quick)
    v = seat_view(api, g["id"], token, seat)
    r = api.act(g["id"], token, v["legal_actions"][0], version=v["version"])
    assert r.status_code == 200
    assert r.json["move_limit"] == 30 and r.json["bank_left"] == 45
    assert r.json["deadline"] is None or r.json["deadline"] > clock["deadline"]
    # a game with no bank says null; with no limit, no deadline either
    plain = api.game(ta, 2, seats=[a, b], seed=4)
    pv = api.view(plain["id"], ta, seat=0).json
    assert pv["bank_left"] is None and pv["move_limit"] is None and pv["deadline"] is None
    assert plain["time_bank"] is None


def test_a_bad_time_bank_is_refused_and_makes_nothing(api):
    _, ta = api.bot("a")
    for bad in (-1, 3601, "10", True):
        r = api.c.post("/games", json={"players": 2, "move_limit": 5, "time_bank": bad},
                       headers=api.auth(ta))
        assert r.status_code == 422 and r.json["type"] == "/problems/validation", bad
    assert api.c.get("/games").json["items"] == []
    ok = api.game(ta, 2, move_limit=5, time_bank=0)  # 0: no bank
    assert ok["time_bank"] is None
    # a bank with no move limit has nothing to extend: no bank shown, no deadline
    (a, ta2), (b, _) = api.bot("c"), api.bot("d")
    g = api.game(ta2, 2, seats=[a, b], time_bank=30)
    v = api.view(g["id"], ta2, seat=0).json
    assert v["bank_left"] is None and v["deadline"] is None


def test_a_tournament_gives_its_games_the_bank_it_was_created_with(app, api):
    bots = [api.bot(f"t{i}") for i in range(2)]
    r = api.c.post("/tournaments", headers=api.auth(ADMIN_TOKEN), json={
        "name": "banked", "format": "round_robin", "entrants": [b for b, _ in bots],
        "players": 2, "games_per_pairing": 1, "move_limit": 5, "time_bank": 12})
    assert r.status_code == 201, r.json
    assert r.json["settings"]["time_bank"] == 12
    gid = api.c.get("/bots/me/turns", headers=api.auth(bots[0][1]),
                    query_string={"timeout": 0}).json["games"] or \
        api.c.get("/bots/me/turns", headers=api.auth(bots[1][1]),
                  query_string={"timeout": 0}).json["games"]
    assert gid
    game = app.extensions["arena"].store.get_game(gid[0])
    assert game.meta["time_bank"] == 12 and game.meta["move_limit"] == 5
    assert abs(game.deadline - 17 - game.updated) < 1


def test_a_ladder_game_has_the_ladder_s_bank(app, api):
    lad = app.extensions["ladders"]
    assert lad.ladder("2p").time_bank == 30  # ARENA_LADDER_TIME_BANK's default
    assert api.c.get("/ladders/2p").json["time_bank"] == 30


def test_a_bank_changes_no_view_but_the_clock_hidden_cards_stay_hidden(api):
    """The bank is the arena's, not the engine's: with and without one, a seat and a
    spectator see exactly the same game (no card it has not seen), bar the clock."""
    (a, ta), (b, tb) = api.bot("a"), api.bot("b")
    plain = api.game(ta, 2, seats=[a, b], seed=31, move_limit=60)
    banked = api.game(ta, 2, seats=[a, b], seed=31, move_limit=60, time_bank=40)
    clockish = {"id", "bank_left", "deadline", "time_left", "updated_at"}
    for token, seat in ((None, None), (ta, 0), (tb, 1)):
        q = {} if seat is None else {"seat": seat}
        p = api.view(plain["id"], token, **q).json
        k = api.view(banked["id"], token, **q).json
        assert {x: y for x, y in p.items() if x not in clockish} == \
            {x: y for x, y in k.items() if x not in clockish}
        assert p["bank_left"] is None and k["bank_left"] == 40
        if seat is not None:
            assert k["hand"] and "hands" not in k  # its own cards only, while live


def test_a_retried_action_gets_the_bank_it_was_first_answered_with(app, api):
    """An Idempotency-Key's replay shows the seat's bank as the first answer did, though
    the bank has been drawn on since."""
    (a, ta), (b, tb) = api.bot("a"), api.bot("b")
    tokens = {a: ta, b: tb}
    g = api.game(ta, 2, seats=[a, b], seed=4, move_limit=0.5, time_bank=20)
    spec = api.view(g["id"]).json
    seat = spec["turn"]
    token = tokens[spec["seats"][seat]["bot_id"]]
    v = api.view(g["id"], token, seat=seat).json
    key = {"Idempotency-Key": "k-bank-1"}
    first = api.act(g["id"], token, v["legal_actions"][0], headers=key,
                    version=v["version"], seat=seat)
    assert first.status_code == 200 and first.json["bank_left"] == 20
    # the seat's bank drawn on afterwards (as a slow later decision would)
    store = app.extensions["arena"].store
    game = store.get_game(g["id"])
    meta = {**game.meta, "banks": [7.5, 7.5]}
    assert store.commit(game, meta=meta, status=game.status, deadline=game.deadline,
                        turn_seat=game.state.turn)[0] == 1
    again = api.act(g["id"], token, v["legal_actions"][0], headers=key,
                    version=v["version"], seat=seat)
    assert again.status_code == 200
    assert again.json["bank_left"] == 20 and again.json["deadline"] == first.json["deadline"]
    assert api.view(g["id"], token, seat=seat).json["bank_left"] == 7.5
