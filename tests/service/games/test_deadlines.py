"""Move deadlines: the default actions, the sweeper (no client touches the game), a move in
time voiding its timeout, leases, several sweepers at once, and timeouts in standings."""

from __future__ import annotations

import time
from typing import Any

from service.arena.games.deadlines import Sweeper, default_action
from service.engine import (
    GIVE_ONE,
    RUN_PACK,
    STAND,
    action_name,
    apply,
    legal_actions,
    new_game,
    parse_action,
)
from tests.service.conftest import ADMIN_TOKEN


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def wait_for(pred: Any, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


def test_default_actions():
    state, _ = new_game(2, 21)
    assert state.phase == "stand_or_beg" and default_action(state) == STAND
    begged, _ = apply(state, parse_action("beg"))
    assert default_action(begged) == (GIVE_ONE if GIVE_ONE in legal_actions(begged)
                                      else RUN_PACK)
    playing, _ = apply(state, STAND)
    lowest = default_action(playing)
    legal = legal_actions(playing)
    assert lowest in legal
    assert all(lowest % 13 < c % 13 or (lowest % 13 == c % 13 and lowest <= c) for c in legal)


def test_timeouts_fire_with_no_client_polling(app, api):
    (a, ta), (b, _tb) = api.bot("a"), api.bot("b")
    g = api.game(ta, 2, seats=[a, b], seed=4, move_limit=0.5)
    assert g["move_limit"] == 0.5
    v = api.view(g["id"]).json
    assert v["move_limit"] == 0.5 and 0 < v["time_left"] <= 0.5
    assert v["deadline"] == app.extensions["arena"].store.get_game(g["id"]).deadline
    arena = app.extensions["arena"]
    sweepers = [Sweeper(arena, sweep_s=0.05).start() for _ in range(2)]  # two workers
    try:
        assert wait_for(lambda: len(arena.store.get_game(g["id"]).actions) >= 3, 6.0)
    finally:
        for s in sweepers:
            s.stop()
    game = arena.store.get_game(g["id"])
    timeouts = game.meta["timeouts"]
    # every action was a timeout, each version timed out once, each the default action
    assert [t["ply"] for t in timeouts] == list(range(1, len(game.actions) + 1))
    state, _ = new_game(2, 4)
    for t, action in zip(timeouts, game.actions):
        assert t["seat"] == state.turn and t["action"] == action_name(action)
        assert action == default_action(state)
        state, _ = apply(state, action)
    record = api.c.get(f"/games/{g['id']}/record").json
    assert record["timeouts"] == timeouts
    # the view says which moves were the clock's, so a page marks them as such
    assert api.view(g["id"]).json["timeouts"] == timeouts


def test_a_move_in_time_voids_the_timeout(app, api):
    (a, ta), (b, tb) = api.bot("a"), api.bot("b")
    g = api.game(ta, 2, seats=[a, b], seed=4, move_limit=30)
    arena = app.extensions["arena"]
    store = arena.store
    v = api.view(g["id"]).json
    token = ta if v["turn"] == 0 else tb
    mine = api.view(g["id"], token).json
    r = api.act(g["id"], token, mine["legal_actions"][-1], version=v["version"])
    assert r.status_code == 200 and r.json["deadline"] > v["deadline"] - 0.001
    entries = store.r.zrange(store.deadlines_key, 0, -1)
    assert entries == [f"{g['id']}:{v['version'] + 1}".encode()]  # the old one is gone
    later = time.time() + 60
    # the old version's deadline is void even if a sweeper still held it
    assert not arena.timeout(g["id"], v["version"], default_action, later)
    assert Sweeper(arena).sweep_once(now=later) == 1  # the current decision times out
    game = store.get_game(g["id"])
    assert game.version == v["version"] + 2 and len(game.meta["timeouts"]) == 1
    assert game.meta["timeouts"][0]["ply"] == 2
    assert [t["ply"] for t in api.view(g["id"]).json["timeouts"]] == [2]  # not ply 1


def test_a_claimed_deadline_is_retried_after_the_lease(app, api):
    (a, ta), (b, _) = api.bot("a"), api.bot("b")
    g = api.game(ta, 2, seats=[a, b], seed=4, move_limit=1)
    store = app.extensions["arena"].store
    now = time.time() + 5
    assert store.claim_due(now, 10) == [(g["id"], 1)]
    assert store.claim_due(now, 10) == []  # leased: nobody else takes it
    assert store.claim_due(now + 11, 10) == [(g["id"], 1)]  # the claimer died: retried


def test_a_tournament_nobody_plays_finishes_on_timeouts(app, client):
    bots = {}
    for i in range(2):
        r = client.post("/bots", json={"name": f"idle-{i}"})
        bots[r.json["id"]] = r.json["token"]
    r = client.post("/tournaments", headers=auth(ADMIN_TOKEN), json={
        "format": "round_robin", "entrants": list(bots), "games_per_pairing": 2,
        "variants": {"target": 1}, "move_limit": 0.5, "seed": 6,
    })
    assert r.status_code == 201, r.json
    tid = r.json["id"]
    games = [g["game_id"] for rd in r.json["rounds"] for g in rd["games"]]
    view = client.get(f"/games/{games[0]}").json
    assert view["deadline"] is not None or view["status"] == "finished"
    sweeper = Sweeper(app.extensions["arena"], [app.extensions["tournaments"].advance_all],
                      sweep_s=0.05).start()
    try:
        assert wait_for(
            lambda: client.get(f"/tournaments/{tid}").json["status"] == "finished", 90.0)
    finally:
        sweeper.stop()
    st = client.get(f"/tournaments/{tid}/standings").json
    total = 0
    for gid in games:
        rec = client.get(f"/games/{gid}/record").json
        assert rec["complete"]
        assert len(rec["timeouts"]) == len(rec["actions"])  # nobody played a card
        total += len(rec["timeouts"])
    assert total > 0
    # every decision of both sides was the clock's: both forfeit every game, and
    # a forfeited game is won by nobody and adds no timeouts, points or matchpoints
    slots = [s for rd in client.get(f"/tournaments/{tid}").json["rounds"] for s in rd["games"]]
    assert all(sorted(s["forfeit"]) == sorted(bots) for s in slots)
    assert sum(row["timeouts"] for row in st["items"]) == 0
    assert sum(row["forfeits"] for row in st["items"]) == 4
    assert sum(row["played"] for row in st["items"]) == 4
