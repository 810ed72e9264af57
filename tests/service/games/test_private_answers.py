"""Answers that can hold a seat's own cards are never cached and vary by token:
``Cache-Control: no-store`` and ``Vary: Authorization`` on the seat's view, a join, a
turn, a record, every action answer (fresh, replayed from the retry memory, after
``?wait``, refused) and a seat's event stream."""

from __future__ import annotations

from typing import Any

from service.http.games.routes import SEAT_ANSWERS


def private(r: Any) -> None:
    assert r.headers.get("Cache-Control") == "no-store", (r.status_code, dict(r.headers))
    assert "authorization" in {v.strip().lower() for v in r.headers.get("Vary", "").split(",")}


def test_every_answer_that_can_carry_a_seats_cards_is_private(api):
    (a, ta), (_, tb) = api.bot("a"), api.bot("b")
    gid = api.game(ta, 2, seats=[a, None], seed=3)["id"]
    joined = api.c.post(f"/games/{gid}/seats/1", headers=api.auth(tb))
    assert joined.status_code == 200
    private(joined)
    view = api.view(gid, ta)
    private(view)
    seat_token = {0: ta, 1: tb}
    turn = view.json["turn"]
    token = seat_token[turn]
    private(api.c.get(f"/games/{gid}/turn", headers=api.auth(token),
                      query_string={"timeout": 0}))
    private(api.c.get(f"/games/{gid}/record", headers=api.auth(token)))
    mine = api.view(gid, token).json
    assert mine["hand"]  # what these answers carry: the seat's own cards
    key = {"Idempotency-Key": "move-1"}
    first = api.act(gid, token, mine["legal_actions"][0], key, version=mine["version"])
    assert first.status_code == 200
    private(first)
    replay = api.act(gid, token, mine["legal_actions"][0], key, version=mine["version"])
    assert replay.status_code == 200 and replay.get_data() == first.get_data()
    private(replay)
    refused = api.act(gid, token, "nonsense")
    assert refused.status_code >= 400
    private(refused)
    now = api.view(gid).json
    mover = seat_token[now["turn"]]
    legal = api.view(gid, mover).json
    waited = api.c.post(f"/games/{gid}/actions", query_string={"wait": 0.2},
                        json={"action": legal["legal_actions"][0],
                              "version": legal["version"]},
                        headers=api.auth(mover))
    assert waited.status_code == 200
    private(waited)
    stream = api.c.get(f"/games/{gid}/events", headers=api.auth(ta), buffered=False)
    try:
        assert stream.status_code == 200 and stream.mimetype == "text/event-stream"
        private(stream)
    finally:
        stream.close()
    # the rule is one set of endpoints: these are its members
    expected = {"games.get_game", "games.join", "games.act", "games.turn", "games.record",
                "games.events"}
    assert expected == SEAT_ANSWERS


def test_the_page_at_a_games_url_keeps_its_own_caching(api):
    (a, ta), (b, _) = api.bot("a"), api.bot("b")
    gid = api.game(ta, 2, seats=[a, b])["id"]
    r = api.c.get(f"/games/{gid}", headers={"Accept": "text/html"})
    assert r.status_code == 200 and r.mimetype == "text/html"
    assert r.headers["Cache-Control"] == "no-cache"
