"""``GET /bots/me/turns?playing=``: games the bot is already playing are left out and not
waited for, so a runner busy with one game hears of another game's first turn at once."""

from __future__ import annotations

import threading
import time

from tests.service.games.test_retries_and_waiting import PATIENCE_S, stop_poll_clock


def _turn_bot(api, seats_tokens, game_id):
    return seats_tokens[api.view(game_id).json["turn"]]


def test_playing_games_are_left_out_and_a_new_game_wakes_the_poll(app, api, monkeypatch):
    b0, t0 = api.bot("host")
    b1, t1 = api.bot("guest")
    games = []
    for seed in range(60):  # two games where it is the guest's (seat 1's) turn
        game = api.game(t0, 2, seats=[b0, b1], seed=seed)
        if api.view(game["id"]).json["turn"] == 1:
            games.append(game["id"])
        if len(games) == 2:
            break
    busy, _ = games
    q = {"timeout": 0, "playing": busy}
    r = api.c.get("/bots/me/turns", query_string=q, headers=api.auth(t1))
    assert r.status_code == 200
    assert r.json == {"timed_out": False, "games": [games[1]], "invitations": []}
    q["playing"] = ",".join(sorted(games))
    r = api.c.get("/bots/me/turns", query_string=q, headers=api.auth(t1))
    assert r.json == {"timed_out": True, "games": [], "invitations": []}

    # a poll naming both busy games waits, and a third game's first turn answers it: woken,
    # not run out (its clock is stopped: only a wake-up answers it)
    got: dict = {}
    stop_poll_clock(monkeypatch)

    def poll():
        c = app.test_client()
        got.update(c.get("/bots/me/turns", query_string={"timeout": 30, "playing": q["playing"]},
                         headers=api.auth(t1)).json)

    th = threading.Thread(target=poll, daemon=True)
    th.start()
    time.sleep(0.3)
    assert not got, "the busy games must not answer the poll"
    for seed in range(60, 120):
        new = api.game(t0, 2, seats=[b0, b1], seed=seed)["id"]
        if api.view(new).json["turn"] == 1:
            break
    th.join(PATIENCE_S)
    assert not th.is_alive(), "the new game's first turn did not wake the poll"
    assert got == {"timed_out": False, "games": [new], "invitations": []}


def test_a_bad_playing_list_is_refused(api):
    _, token = api.bot("x")
    for bad in ("nothex", "abcdef012345,", ",".join(["abcdef012345"] * 201)):
        r = api.c.get("/bots/me/turns", query_string={"timeout": 0, "playing": bad},
                      headers=api.auth(token))
        assert r.status_code == 422, (bad[:20], r.json)
        assert r.headers["Content-Type"].startswith("application/problem+json")
