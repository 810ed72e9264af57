"""The analysis queue is fair to everyone, and big analyses are cheap to serve.

- at most ``ARENA_ANALYSIS_QUEUED_PER_OWNER`` games per owner and
  ``ARENA_ANALYSIS_QUEUED_PER_NETWORK`` per network wait or are computed at once (429,
  nothing queued past them); the counts go down as games are done;
- each requester is served in turn: a player asking for one game goes ahead of a network
  with many waiting, a player's request ahead of an automatic one, two equal requesters
  alternate; a tournament's game whose seats are all one owner's is on that owner's cap;
- a done analysis is sent gzipped to a client that accepts it, from the process's cache,
  and one client may download only so much a minute (429 with Retry-After).

Real Redis, the real app; the worker's order is read from ``next_entry`` without
computing, and one real (``fast``) analysis is computed for the serving tests."""

from __future__ import annotations

import gzip
import json
from typing import Any

from service.arena.analyses.queue import Analyses, auto_analyse
from service.arena.analyses.worker import Worker
from service.http.app import create_app
from tests.conftest import REDIS_URL
from tests.service.analyses.test_analysis_serving import short_game
from tests.service.conftest import Api

EXPECTED_S = 30  # seconds, the whole module: the order workers take it in (tests/conftest.py)


def make(key_prefix: str, **settings: Any) -> Any:
    return create_app({"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix,
                       "ARENA_RATE_LIMIT": 0, "ARENA_OWNERS_PER_NETWORK": 0,
                       "ARENA_ANALYSIS_WORKERS": 0, "TESTING": True, **settings})


def player(app: Any, address: str) -> Api:
    """A client of its own address, with an owner of its own."""
    client = app.test_client()
    client.environ_base["REMOTE_ADDR"] = address
    return Api(client)


def ask(api: Api, gid: str, token: str) -> Any:
    return api.c.get(f"/games/{gid}/analysis", headers=api.auth(token))


def order(q: Analyses) -> list[str]:
    """The games in the order a worker takes them (settled at once: no computing)."""
    out = []
    while (got := q.next_entry("w-order", 0)) is not None:
        entry, gid = got
        out.append(gid)
        q.settle(entry)
    return out


def test_an_owner_and_a_network_have_a_cap_of_waiting_analyses(key_prefix) -> None:
    app = make(key_prefix, ARENA_ANALYSIS_QUEUED_PER_OWNER=2,
               ARENA_ANALYSIS_QUEUED_PER_NETWORK=3)
    q: Analyses = app.extensions["analyses"]
    q.ensure_group()
    one = player(app, "10.1.0.1")
    games = [short_game(one, seed) for seed in (1, 2, 3)]
    assert [ask(one, g, t[0]).status_code for g, t in games[:2]] == [202, 202]
    refused = ask(one, games[2][0], games[2][1][0])
    assert refused.status_code == 429 and refused.json["type"] == "/problems/rate-limited"
    assert "your owner" in refused.json["detail"] and int(refused.headers["Retry-After"]) > 0
    assert q.state(games[2][0]) is None and q.waiting() == 2  # nothing queued for it
    # another owner in the same /24 fills the network's third place, then is refused
    neighbour = player(app, "10.1.0.77")
    mine = [short_game(neighbour, seed) for seed in (4, 5)]
    assert ask(neighbour, *_first(mine[0])).status_code == 202
    refused = ask(neighbour, *_first(mine[1]))
    assert refused.status_code == 429 and "your network" in refused.json["detail"]
    # another network is not touched by either
    far = player(app, "10.2.0.1")
    assert ask(far, *_first(short_game(far, 6))).status_code == 202
    # a game done (here: taken and settled) gives its place back; the lightest network
    # (far's one game) is taken first
    taken = []
    while not {games[0][0], games[1][0]} & set(taken):
        entry, gid = q.next_entry("w", 0)
        q.settle(entry)
        taken.append(gid)
    assert taken[0] != games[0][0] and taken[0] != games[1][0]
    assert ask(one, games[2][0], games[2][1][0]).status_code == 202
    assert q.line.counts()[0][f"o:{_owner(app, games[0][1][0], one)}"] == 2


def _first(game: tuple[str, list[str]]) -> tuple[str, str]:
    return game[0], game[1][0]


def _owner(app: Any, token: str, api: Api) -> str:
    return api.c.get("/bots/me", headers=api.auth(token)).json["owner"]


def test_a_player_asking_for_one_game_goes_ahead_of_a_flood(key_prefix) -> None:
    """A network with many games waiting (here three owners of one /24, four games each)
    and an automatic request queued first; a stranger then asks for its one game: it is
    the next one taken, and the flood's owners are served in turn after it, the automatic
    one last."""
    app = make(key_prefix, ARENA_ANALYSIS_QUEUED_PER_OWNER=4,
               ARENA_ANALYSIS_QUEUED_PER_NETWORK=12)
    q: Analyses = app.extensions["analyses"]
    q.ensure_group()
    auto = player(app, "10.9.0.1")
    auto_game = short_game(auto, 40)[0]
    game = app.extensions["arena"].get(auto_game)
    game.meta = {**game.meta, "tournament": {"id": "t1", "analyse": True}}
    auto_analyse(q, ladder=False)(game)  # queued first, by the tournament
    flood: dict[str, list[str]] = {}
    for n in range(3):
        api = player(app, f"10.3.0.{n + 1}")
        owner = None
        for seed in range(4):
            gid, tokens = short_game(api, 100 * n + seed)
            assert ask(api, gid, tokens[0]).status_code == 202
            owner = owner or _owner(app, tokens[0], api)
        flood[owner] = []
    honest = player(app, "10.4.0.1")
    gid, tokens = short_game(honest, 999)
    assert ask(honest, gid, tokens[0]).status_code == 202
    taken = order(q)
    assert taken[0] == gid  # the lightest network first
    assert taken[-1] == auto_game  # the automatic request after every player's
    # the flood's three owners alternate (round robin), not one owner's four in a row
    owners_in_turn = [app.extensions["arena"].owners.owner_of(
        app.extensions["arena"].get(g).seats[0]) for g in taken[1:-1]]
    assert len(owners_in_turn) == 12
    for i in range(0, 12, 3):
        assert len(set(owners_in_turn[i:i + 3])) == 3, owners_in_turn
    assert q.line.counts() == ({}, {})  # every count back to nothing


def test_a_tournament_game_of_one_owner_is_on_that_owners_cap(key_prefix) -> None:
    app = make(key_prefix, ARENA_ANALYSIS_QUEUED_PER_OWNER=1)
    q: Analyses = app.extensions["analyses"]
    api = player(app, "10.5.0.1")
    hook = auto_analyse(q, ladder=False, owners_of=app.extensions["arena"].owners.owners_of)
    games = []
    for seed in (1, 2):
        gid, tokens = short_game(api, seed)  # both seats one owner's
        game = app.extensions["arena"].get(gid)
        game.meta = {**game.meta, "tournament": {"id": "t9", "analyse": True}}
        hook(game)
        games.append(gid)
    owner = _owner(app, tokens[0], api)
    assert q.state(games[0])["status"] == "queued"
    assert q.state(games[1]) is None  # past the owner's cap: skipped, askable later
    assert q.line.counts()[0] == {f"o:{owner}": 1}


def test_a_done_analysis_is_sent_gzipped_and_a_client_downloads_a_capped_amount(
        key_prefix) -> None:
    app = make(key_prefix, ARENA_ANALYSIS_DOWNLOAD_BYTES=1)
    q: Analyses = app.extensions["analyses"]
    api = player(app, "10.6.0.1")
    gid, tokens = short_game(api, 7)
    assert ask(api, gid, tokens[0]).status_code == 202
    q.ensure_group()
    assert Worker(q, quality="fast", name="w-gz").once() is True
    plain = api.c.get(f"/games/{gid}/analysis", environ_base={"REMOTE_ADDR": "10.6.1.1"})
    assert plain.status_code == 200 and "Content-Encoding" not in plain.headers
    packed = api.c.get(f"/games/{gid}/analysis", environ_base={"REMOTE_ADDR": "10.6.2.1"},
                       headers={"Accept-Encoding": "br;q=1, gzip;q=0.5"})
    assert packed.status_code == 200 and packed.headers["Content-Encoding"] == "gzip"
    body = packed.get_data()
    assert json.loads(gzip.decompress(body)) == plain.json
    assert len(body) < len(plain.get_data()) / 3
    assert packed.headers["ETag"] == plain.headers["ETag"][:-1] + '-gz"'
    assert "Accept-Encoding" in packed.headers["Vary"]
    # the cap (1 byte here): the first answer spent it; the next is refused until the
    # minute ends, a 304 costs nothing, and another client has its own
    again = api.c.get(f"/games/{gid}/analysis", environ_base={"REMOTE_ADDR": "10.6.1.1"})
    assert again.status_code == 429 and again.json["type"] == "/problems/rate-limited"
    assert 1 <= int(again.headers["Retry-After"]) <= 60
    assert "ARENA_ANALYSIS_DOWNLOAD_BYTES" in again.json["detail"]
    for tag in (plain.headers["ETag"], packed.headers["ETag"]):
        cached = api.c.get(f"/games/{gid}/analysis", headers={"If-None-Match": tag},
                           environ_base={"REMOTE_ADDR": "10.6.1.1"})
        assert cached.status_code == 304
    other = api.c.get(f"/games/{gid}/analysis", environ_base={"REMOTE_ADDR": "10.6.3.1"},
                      headers={"Accept-Encoding": "gzip;q=0"})
    assert other.status_code == 200 and "Content-Encoding" not in other.headers


def test_a_worker_makes_way_for_a_lighter_players_request(key_prefix, monkeypatch) -> None:
    """A player asking while a worker computes a game of a heavier network does not wait
    for it: the worker gives that game up (once: it is computed next time whatever
    comes), back at the head of its requester's list, and takes the player's."""
    from service.arena.analyses import worker as worker_module

    monkeypatch.setattr(worker_module, "YIELD_CHECK_S", 0.0)
    app = make(key_prefix)
    q: Analyses = app.extensions["analyses"]
    q.ensure_group()
    flood = player(app, "10.7.0.1")
    heavy = [short_game(flood, seed) for seed in (1, 2)]
    for gid, tokens in heavy:
        assert ask(flood, gid, tokens[0]).status_code == 202
    honest = player(app, "10.8.0.1")
    mine, my_tokens = short_game(honest, 3)
    computed: list[str] = []

    def analyser(players, seed, variants, actions, quality, progress):
        game = next(g for g in [*heavy, (mine, my_tokens)]
                    if app.extensions["arena"].get(g[0]).actions == actions)[0]
        computed.append(game)
        for i in range(3):
            if game != mine and len(computed) == 1 and i == 1:
                assert ask(honest, mine, my_tokens[0]).status_code == 202  # arrives now
            progress(i + 1, 3)
        return {"version": 1, "quality": {}, "thresholds": {}, "decisions": [],
                "seats": {}, "teams": {}}

    worker = Worker(q, analyser=analyser, name="w-yield")
    for _ in range(5):
        worker.once()
    first = computed[0]
    other = next(g for g, _ in heavy if g != first)
    # given up for the player's, then taken again (first in its list) and done
    assert computed == [first, mine, first, other]
    assert all(q.state(g)["status"] == "done" for g in (first, mine, other))
    assert int(q.state(first)["attempts"]) == 2
    assert q.line.counts() == ({}, {})
