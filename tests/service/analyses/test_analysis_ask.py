"""Asking for an analysis on purpose (``POST /games/{id}/analysis``, the pages' "Review this
game" button): a bot that played the game asks free; anyone else may ask for a game whose
complete record is open to all, within ``ARENA_ANALYSIS_ASKS`` new analyses per client
address an hour, so that a stranger reviews a handful of games and cannot queue every
public game. The analyser is the real one at its ``fast`` quality, on short games."""

from __future__ import annotations

import random
from typing import Any

import pytest

from service.arena.analyses.worker import Worker
from service.http.app import create_app
from tests.conftest import REDIS_URL
from tests.service.analyses.test_analysis_serving import queue, short_game
from tests.service.conftest import Api
from tests.service.tournaments.test_tournament_cancel_embargo import FAST, play_out
from tests.service.tournaments.test_tournaments import ADMIN, register

EXPECTED_S = 15  # seconds, the whole module: the order workers take it in (tests/conftest.py)

HOME = {"REMOTE_ADDR": "203.0.113.7"}
ELSEWHERE = {"REMOTE_ADDR": "198.51.100.9"}


@pytest.fixture
def counted(key_prefix: str) -> Any:
    """The app with a count of 2 asks per client address and an hour's window."""
    return create_app({"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix,
                       "ARENA_RATE_LIMIT": 0, "ARENA_OWNERS_PER_NETWORK": 0,
                       "ARENA_ANALYSIS_ASKS": 2, "TESTING": True})


def test_anyone_may_ask_for_a_finished_game_and_then_reads_it(api: Any, app: Any,
                                                               redis_client: Any) -> None:
    gid, _tokens = short_game(api, 5)
    q = queue(app)
    assert api.c.get(f"/games/{gid}/analysis").status_code == 403  # a visit queues nothing
    asked = api.c.post(f"/games/{gid}/analysis")  # no token: a person who watched it
    assert asked.status_code == 202, asked.json
    assert asked.json["status"] == "queued" and asked.json["game_id"] == gid
    assert asked.headers["Location"] == f"/games/{gid}/analysis"
    assert int(asked.headers["Retry-After"]) > 0
    again = api.c.post(f"/games/{gid}/analysis")
    assert again.status_code == 202 and q.waiting() == 1  # queued once
    assert api.c.get(f"/games/{gid}/analysis").status_code == 202  # anyone reads it now

    q.ensure_group()
    assert Worker(q, quality="fast", name="w-ask").once() is True
    done = api.c.post(f"/games/{gid}/analysis")  # done: the analysis itself, as GET's
    assert done.status_code == 200, done.json
    assert done.json == api.c.get(f"/games/{gid}/analysis").json
    assert done.json["decisions"] and done.headers["ETag"]
    assert q.waiting() == 0


def test_a_strangers_asks_are_counted_per_address_and_a_players_are_free(
        counted: Any, redis_client: Any) -> None:
    api = Api(counted.test_client())
    games = [short_game(api, seed) for seed in (4, 5, 7, 9)]
    q = queue(counted)
    (g1, t1), (g2, _), (g3, _), (g4, _) = games
    # a seat of the game asks free, with its token: nothing taken from its address
    assert api.c.post(f"/games/{g1}/analysis", headers=api.auth(t1[0]),
                      environ_base=HOME).status_code == 202
    for gid in (g2, g3):
        r = api.c.post(f"/games/{gid}/analysis", environ_base=HOME)
        assert r.status_code == 202, r.json
    # a game already asked for counts nothing
    assert api.c.post(f"/games/{g2}/analysis", environ_base=HOME).status_code == 202
    refused = api.c.post(f"/games/{g4}/analysis", environ_base=HOME)
    assert refused.status_code == 429, refused.json
    assert refused.json["type"] == "/problems/rate-limited"
    assert "ARENA_ANALYSIS_ASKS" in refused.json["detail"]
    assert 1 <= int(refused.headers["Retry-After"]) <= 3600
    assert q.state(g4) is None  # refused: nothing queued
    # a token that is no seat of the game is counted by its address all the same
    _, stranger = api.bot("stranger")
    assert api.c.post(f"/games/{g4}/analysis", headers=api.auth(stranger),
                      environ_base=HOME).status_code == 429
    # another address has a count of its own
    assert api.c.post(f"/games/{g4}/analysis", environ_base=ELSEWHERE).status_code == 202
    assert q.waiting() == 4


def test_asking_is_refused_as_reading_is(api: Any, app: Any, client: Any) -> None:
    """Live (409), unknown (404), and a duplicate deal still played at another table
    (403 ``embargoed``): refused, and nothing is queued or counted."""
    bots = [api.bot(f"b{i}") for i in range(2)]
    live = api.game(bots[0][1], 2, seats=[b for b, _ in bots], seed=3, variants=FAST)
    r = api.c.post(f"/games/{live['id']}/analysis")
    assert r.status_code == 409 and r.json["type"] == "/problems/game-not-over"
    assert queue(app).state(live["id"]) is None
    assert api.c.post("/games/nosuchgame/analysis").status_code == 404

    entrants = register(client, 4)
    t = client.post("/tournaments", headers=ADMIN, json={
        "entrants": list(entrants), "format": "round_robin", "variants": FAST,
        "games_per_pairing": 2, "parallel": 1, "seed": 12})
    assert t.status_code == 201, t.json
    first = t.json["rounds"][0]["games"][0]
    play_out(client, first["game_id"], [entrants[b] for b in first["teams"]],
             random.Random(2))
    r = client.post(f"/games/{first['game_id']}/analysis")
    assert r.status_code == 403 and r.json["type"] == "/problems/embargoed"
    assert queue(app).state(first["game_id"]) is None
