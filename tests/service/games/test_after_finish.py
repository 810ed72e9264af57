"""The move that ends a tournament game is answered before the game's consequences run
(``service.arena.games.after_finish``): the tournament's advance, the ladder's rating and
the other after-finish hooks run in the process's after-finish loop, one game at a time,
and a hook that fails stops none of the others."""

from __future__ import annotations

import random
import threading
from typing import Any

from service.storage.store import Game
from tests.service.conftest import ADMIN_TOKEN, Api, settle

EXPECTED_S = 5  # seconds, the whole module: the order workers take it in (tests/conftest.py)

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def one_game_tournament(api: Api, seed: int) -> tuple[str, str, dict[str, str]]:
    """A round robin of two entrants, one game: (tournament id, game id, bot → token)."""
    bots = dict(api.bot(f"entrant-{i}", new_owner=True) for i in range(2))
    r = api.c.post("/tournaments", headers=ADMIN, json={
        "entrants": list(bots), "format": "round_robin", "games_per_pairing": 1,
        "variants": {"target": 3}, "seed": seed})
    assert r.status_code == 201, r.json
    [game] = r.json["rounds"][0]["games"]
    return r.json["id"], game["game_id"], bots


def play_to_the_end(api: Api, gid: str, bots: dict[str, str]) -> dict[str, Any]:
    """Random legal moves (R19: only legal actions are accepted) until the game is over:
    the answer to the last move."""
    rng = random.Random(3)
    for _ in range(2000):
        spec = api.view(gid).json
        token = bots[spec["seats"][spec["turn"]]["bot_id"]]
        v = api.view(gid, token).json
        r = api.act(gid, token, rng.choice(v["legal_actions"]), version=v["version"])
        assert r.status_code == 200, r.json
        if r.json["status"] == "finished":
            return r.json
    raise AssertionError("the game did not end")


def test_the_last_move_is_answered_before_the_tournament_advances(api: Api, app: Any) -> None:
    arena = app.extensions["arena"]
    tid, gid, bots = one_game_tournament(api, 4)
    release, ran = threading.Event(), []

    def held(game: Game) -> None:  # first in line: the tournament's advance waits for it
        assert release.wait(30)
        ran.append(game.id)

    arena.on_finish.insert(0, held)
    try:
        last = play_to_the_end(api, gid, bots)
        assert last["status"] == "finished" and last["winner"] in (0, 1)  # R20
        # answered while the hooks wait: nothing of the tournament has moved yet
        assert ran == []
        t = api.c.get(f"/tournaments/{tid}").json
        assert t["status"] == "running" and t["progress"]["games_done"] == 0
    finally:
        release.set()
    settle(api.c)
    assert ran == [gid]
    t = api.c.get(f"/tournaments/{tid}").json
    assert t["status"] == "finished" and t["progress"]["games_done"] == 1


def test_a_failing_hook_stops_neither_the_others_nor_the_loop(api: Api, app: Any) -> None:
    arena = app.extensions["arena"]

    def broken(game: Game) -> None:
        raise RuntimeError("a hook that fails")

    arena.on_finish.insert(0, broken)
    for seed in (5, 6):  # the loop survives the first failure and runs for the second game
        tid, gid, bots = one_game_tournament(api, seed)
        play_to_the_end(api, gid, bots)
        settle(api.c)
        assert api.c.get(f"/tournaments/{tid}").json["status"] == "finished"
