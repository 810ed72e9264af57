"""The ladder (service/arena/ladder/ladders.py): join, leave, matching, rating exactly once,
pausing after timeouts, standings and history — real Redis, the real Flask app.

The matchmaker's passes are called directly (``Ladders.pass_once``) instead of waiting for
its thread, so nothing here depends on timing;
``tests/service/ladder/test_ladder_processes.py`` runs it inside two real service processes."""

from __future__ import annotations

import itertools
import json
import random
import threading
import time

import pytest

from service.arena.core import ratings
from service.arena.games.deadlines import Sweeper
from service.arena.ladder.ladders import CLAIM_LEASE_S, Ladders, pair_up
from service.http.app import create_app
from tests.conftest import REDIS_URL
from tests.service.conftest import Api, settle

QUICK = json.dumps({"quick": {"players": 2, "variants": {"target": 5}, "move_limit": 30},
                    "quad": {"players": 4, "variants": {"target": 5}}})


@pytest.fixture
def app(key_prefix):
    return create_app({"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix,
                       "ARENA_RATE_LIMIT": 0, "TESTING": True, "ARENA_LADDERS": QUICK,
                       "ARENA_LADDER_REMATCH_WAIT": 0.0, "ARENA_OWNERS_PER_NETWORK": 0})


@pytest.fixture
def api(client):
    """Each bot an owner of its own: two bots of one owner are never matched."""
    return Api(client, one_owner=False)


@pytest.fixture
def lad(app) -> Ladders:
    return app.extensions["ladders"]


def join(api: Api, token: str, name: str = "quick", **body):
    return api.c.post(f"/ladders/{name}/entry", json=body, headers=api.auth(token))


def entry(api: Api, token: str, name: str = "quick"):
    r = api.c.get(f"/ladders/{name}/entry", headers=api.auth(token))
    assert r.status_code == 200, r.json
    return r.json


_CLOCK = [0.0]


def later() -> float:
    """A sweeper clock past every deadline so far: a timeout sets the next deadline from
    the clock it was applied with, so each call goes further."""
    _CLOCK[0] = max(_CLOCK[0], time.time()) + 3600
    return _CLOCK[0]


def play_game(api: Api, game_id: str, tokens: dict[str, str], rng: random.Random,
              skip: str | None = None, sweeper: Sweeper | None = None) -> None:
    """Play ``game_id`` to the end with random legal moves; ``skip``'s turns time out
    (the sweeper is run with a clock past every deadline)."""
    for _ in range(2000):
        spec = api.view(game_id).json
        if spec["status"] == "finished":
            settle(api.c)
            return
        bot = spec["seats"][spec["turn"]]["bot_id"]
        if bot == skip:
            assert sweeper is not None and sweeper.sweep_once(later()) == 1
            continue
        v = api.view(game_id, tokens[bot]).json
        r = api.act(game_id, tokens[bot], rng.choice(v["legal_actions"]),
                    version=v["version"])
        assert r.status_code == 200, r.json
    raise AssertionError("the game did not end")


def test_join_read_leave_and_the_problems(api):
    bot, token = api.bot("alice")
    assert entry(api, token)["state"] == "off"
    r = join(api, token, games=2)
    assert r.status_code == 200 and r.json["state"] == "waiting"
    assert r.json["games_left"] == 2 and r.json["waiting_since"] is not None
    assert r.json["rating"] == {"mu": 25.0, "sigma": 8.3333, "ordinal": 0.0, "games": 0,
                                "wins": 0, "provisional": True}
    queue = api.c.get("/ladders/quick").json["queue"]
    assert [q["bot_id"] for q in queue] == [bot]
    again = join(api, token)  # idempotent: the count is set anew
    assert again.json["state"] == "waiting" and again.json["games_left"] is None
    r = api.c.delete("/ladders/quick/entry", headers=api.auth(token))
    assert r.status_code == 200 and r.json["state"] == "off"
    assert api.c.get("/ladders/quick").json["queue"] == []
    assert join(api, None).status_code == 401
    nope = join(api, token, "nope")
    assert nope.status_code == 404 and nope.json["type"] == "/problems/not-found"
    for bad in ({"games": 0}, {"games": "3"}, {"games": True}, {"gmaes": 3}):
        r = join(api, token, **bad)
        assert r.status_code == 422 and r.json["type"] == "/problems/validation", bad
    assert entry(api, token)["state"] == "off"  # bad input changed nothing
    names = [x["name"] for x in api.c.get("/ladders").json["items"]]
    assert names == ["2p", "4p", "quick", "quad"]
    assert api.c.get("/ladders/nope/standings").status_code == 404
    assert api.c.get(f"/ladders/quick/bots/{'0' * 12}/history").status_code == 404


def test_two_bots_are_matched_play_and_are_rated_exactly_once(api, lad):
    rng = random.Random(7)
    bots = dict(api.bot(n) for n in ("a", "b"))
    for token in bots.values():
        assert join(api, token, games=1).status_code == 200
    [gid] = lad.pass_once()
    assert lad.pass_once() == []  # nobody is waiting any more: no second game
    for token in bots.values():
        e = entry(api, token)
        assert e["state"] == "playing" and e["game_id"] == gid
    game = api.view(gid).json
    assert {s["bot_id"] for s in game["seats"]} == set(bots)
    assert game["move_limit"] == 30 and game["variants"]["target"] == 5
    play_game(api, gid, bots, rng)
    # the finishing action rated it (Arena.on_finish); every later look finds nothing
    assert lad.results("quick")[0]["game_id"] == gid
    assert not lad.settle("quick", "anything")
    lad.pass_once()
    assert len(lad.results("quick")) == 1
    final = api.view(gid).json
    winner = final["seats"][final["winner"]]["bot_id"]
    loser = next(b for b in bots if b != winner)
    w, lo = ratings.rate(ratings.initial(), ratings.initial())
    table = api.c.get("/ladders/quick/standings").json
    assert [row["bot_id"] for row in table["items"]] == [winner, loser]
    top = table["items"][0]
    assert (top["mu"], top["games"], top["wins"], top["form"]) == \
        (round(w["mu"], 4), 1, 1, "W")
    assert table["items"][1]["form"] == "L" and table["next_cursor"] is None
    hist = api.c.get(f"/ladders/quick/bots/{loser}/history").json
    assert hist["games"] == 1 and hist["items"][0]["game_id"] == gid
    assert hist["items"][0]["won"] is False
    assert hist["items"][0]["opponent"]["bot_id"] == winner
    assert hist["items"][0]["after"]["mu"] == round(lo["mu"], 4)
    for token in bots.values():  # one game asked for: off again
        e = entry(api, token)
        assert e["state"] == "off" and e["games_left"] == 0 and e["game_id"] is None


def test_standings_and_history_are_paginated(api, lad):
    lad.provisional_games = lad.provisional_owners = 0  # every rated bot ranked at once
    rng = random.Random(3)
    bots = dict(api.bot(n) for n in ("a", "b", "c"))
    for token in bots.values():
        join(api, token)
    games = 0
    while games < 4:
        for gid in lad.pass_once():
            play_game(api, gid, bots, rng)
            games += 1
    page1 = api.c.get("/ladders/quick/standings?limit=2").json
    page2 = api.c.get(f"/ladders/quick/standings?limit=2&cursor={page1['next_cursor']}").json
    assert [r["rank"] for r in page1["items"] + page2["items"]] == [1, 2, 3]
    assert page2["next_cursor"] is None
    ords = [r["ordinal"] for r in page1["items"] + page2["items"]]
    assert ords == sorted(ords, reverse=True)
    bot = page1["items"][0]["bot_id"]
    total = page1["items"][0]["games"]
    seen, cursor = [], 0
    while cursor is not None:
        h = api.c.get(f"/ladders/quick/bots/{bot}/history?limit=1&cursor={cursor}").json
        seen += h["items"]
        cursor = h["next_cursor"]
    assert len(seen) == total
    # newest first, each game's "before" is the previous game's "after"
    for newer, older in itertools.pairwise(seen):
        assert newer["before"] == older["after"]


def test_ratings_match_a_replay_of_the_results(api, lad):
    rng = random.Random(11)
    bots = dict(api.bot(f"b{i}") for i in range(4))
    for token in bots.values():
        join(api, token, games=3)
    while any(entry(api, t)["state"] != "off" for t in bots.values()):
        made = lad.pass_once()
        for gid in made:
            play_game(api, gid, bots, rng)
    replay = {b: ratings.blank() for b in bots}  # each bot its own owner
    for res in lad.results("quick"):
        w = res["winner"]
        lo = next(b for b in res["sides"] if b != w)
        replay[w], replay[lo], _ = ratings.rate_published(replay[w], replay[lo], (w, lo),
                                                          res["at"])
    table = {r["bot_id"]: r for r in api.c.get("/ladders/quick/standings").json["items"]}
    assert len(lad.results("quick")) == 6 and all(r["games"] == 3 for r in table.values())
    for b, r in replay.items():
        assert table[b]["mu"] == ratings.shown(r)["mu"]
        assert table[b]["sigma"] == ratings.shown(r)["sigma"]


def test_four_player_ladder_seats_each_bot_on_both_seats_of_its_team(api, lad):
    bots = dict(api.bot(n) for n in ("a", "b"))
    for token in bots.values():
        join(api, token, "quad", games=1)
    [gid] = lad.match_once("quad")
    seats = [s["bot_id"] for s in api.view(gid).json["seats"]]
    assert seats[0] == seats[2] and seats[1] == seats[3] and seats[0] != seats[1]
    play_game(api, gid, bots, random.Random(5))
    assert len(lad.results("quad")) == 1


def test_timeouts_pause_a_bot_with_a_reason_and_joining_resumes_it(api, lad, app):
    """A bot paused by its timeouts (ARENA_LADDER_PAUSE_TIMEOUTS, 3) is absent by the
    ladder's rules: its live game ends at the repair pass that pauses it, as its forfeit
    (the present bot does not sit through the clock playing the rest), and the game's
    view, record and both histories agree on who won and why."""
    bots = dict(api.bot(n) for n in ("active", "idle"))
    idle = list(bots)[1]
    other = next(b for b in bots if b != idle)
    for token in bots.values():  # the default rules (to 14): no game ends in 3 timeouts
        join(api, token, "2p")
    [gid] = lad.pass_once()
    sweeper = Sweeper(app.extensions["arena"])
    rng = random.Random(2)
    timeouts = 0
    while timeouts < 3:  # the active bot plays; the idle one's turns time out
        spec = api.view(gid).json
        assert spec["status"] == "active"
        bot = spec["seats"][spec["turn"]]["bot_id"]
        if bot == idle:
            assert sweeper.sweep_once(later()) == 1
            timeouts += 1
            continue
        v = api.view(gid, bots[bot]).json
        api.act(gid, bots[bot], rng.choice(v["legal_actions"]), version=v["version"])
    assert api.view(gid).json["status"] == "active"  # paused at the next repair pass
    lad.settle_all()  # the matchmaker's repair pass (every REPAIR_S)
    settle(api.c)  # the forfeit's consequences (the histories), off the repair pass
    view = api.view(gid, bots[other]).json
    seats = [s["bot_id"] for s in view["seats"]]
    assert view["status"] == "finished" and view["phase"] == "over" and view["turn"] is None
    assert view["ended"] == {"reason": "forfeit", "winner": seats.index(other),
                             "forfeit_by": [idle], "why": "paused"}
    assert view["winner"] == seats.index(other)
    assert len(view["timeouts"]) == 3  # not a game played out by the clock
    record = api.c.get(f"/games/{gid}/record").json
    assert record["winner"] == view["winner"] and record["ended"] == view["ended"]
    for bot, won in ((other, True), (idle, False)):
        [row] = api.c.get(f"/ladders/2p/bots/{bot}/history").json["items"]
        assert row["game_id"] == gid and row["won"] is won and row["forfeit"] is (bot == idle)
    e = entry(api, bots[idle], "2p")
    assert e["state"] == "paused" and "timed out 3 times" in e["reason"]
    assert e["game_id"] is None
    assert entry(api, bots[other], "2p")["state"] == "waiting"
    assert lad.pass_once() == []  # the paused bot is not matched
    r = join(api, bots[idle], "2p")
    assert r.json["state"] == "waiting" and r.json["reason"] is None
    # a minute on, the window has widened past any gap one game makes
    assert len(lad.pass_once(now=time.time() + 60)) == 1


def test_the_repair_pass_that_ends_an_absent_bots_game_runs_every_repair_s(lad):
    """The ladder's stated time for an absent opponent: its Nth timeout, then at most one
    repair interval (``REPAIR_S``): each matchmaker pass runs the repair once it is due."""
    from service.arena.ladder.ladders import REPAIR_S, Matchmaker

    mm = Matchmaker(lad)
    assert mm.repair_s == REPAIR_S
    calls = []
    lad.settle_all = lambda: calls.append(1)  # type: ignore[method-assign]
    lad.match_all = lambda now=None: []  # type: ignore[method-assign]
    mm.pass_once()
    assert calls == [1]


def test_leaving_mid_game_plays_it_out_then_stops(api, lad):
    bots = dict(api.bot(n) for n in ("a", "b"))
    for token in bots.values():
        join(api, token)
    [gid] = lad.pass_once()
    first = next(iter(bots.values()))
    r = api.c.delete("/ladders/quick/entry", headers=api.auth(first))
    assert r.json["state"] == "playing" and r.json["leaving"] is True
    play_game(api, gid, bots, random.Random(1))
    assert entry(api, first)["state"] == "off"
    assert [e["state"] for e in (entry(api, t) for t in bots.values())] == ["off", "waiting"]


def test_a_match_whose_creator_died_gets_its_game_from_another_matchmaker(api, lad, app):
    class Dies(Ladders):
        def _create(self, lad, mid, match):  # the process dies after claiming
            return None

    dying = Dies(app.extensions["arena"], app.config)
    bots = dict(api.bot(n) for n in ("a", "b"))
    for token in bots.values():
        join(api, token)
    assert dying.match_once("quick") == []
    assert {entry(api, t)["state"] for t in bots.values()} == {"matched"}
    assert lad.pass_once(now=time.time()) == []  # within the lease: left alone
    assert {entry(api, t)["state"] for t in bots.values()} == {"matched"}
    [mid] = lad.r.hkeys(lad.k_matches("quick"))
    raw = json.loads(lad.r.hget(lad.k_matches("quick"), mid))
    raw["at"] -= CLAIM_LEASE_S + 1  # the lease ran out
    lad.r.hset(lad.k_matches("quick"), mid, json.dumps(raw))
    assert lad.pass_once() == []  # the repair made the match's game: no new match
    games = {entry(api, t)["game_id"] for t in bots.values()}
    assert games == {lad.store.derived_id("ladder", "quick", mid.decode())}
    assert {entry(api, t)["state"] for t in bots.values()} == {"playing"}
    assert len(api.c.get("/games?status=active").json["items"]) == 1


def test_a_claimer_that_stalls_past_the_lease_never_seats_a_bot_twice(api, lad, app):
    """A claimer stalls after seeing its match unbound; past the lease another
    matchmaker makes and binds the match's game, which is played and rated, and the
    bots are matched again. When the stalled claimer wakes and carries on, it finds
    the match's game already there (its id is the match's) and makes nothing: neither
    bot is ever in two games."""
    stalled: list[tuple[str, dict]] = []

    class Stalls(Ladders):
        def _seat(self, lad, mid, match):  # stops here, after its check
            stalled.append((mid, match))
            return None

    slow = Stalls(app.extensions["arena"], app.config)
    bots = dict(api.bot(n) for n in ("a", "b"))
    for token in bots.values():
        join(api, token, games=2)
    assert slow.match_once("quick") == []
    [(mid, match)] = stalled
    raw = json.loads(lad.r.hget(lad.k_matches("quick"), mid))
    raw["at"] -= CLAIM_LEASE_S + 1
    lad.r.hset(lad.k_matches("quick"), mid, json.dumps(raw))
    lad.settle_all()  # the repair seats the match
    [first] = {entry(api, t)["game_id"] for t in bots.values()}
    # the claimer, woken mid-step while the game is live, makes nothing
    assert Ladders._seat(slow, lad.ladder("quick"), mid, match) is None
    assert len(api.c.get("/games?status=active").json["items"]) == 1
    play_game(api, first, bots, random.Random(5))
    # rated and queued again; matched again once the window has widened to their gap
    [second] = lad.pass_once(now=time.time() + 60)
    assert {entry(api, t)["game_id"] for t in bots.values()} == {second} != {first}
    # ... and woken after its match was rated and its bots matched again, nor then
    assert Ladders._seat(slow, lad.ladder("quick"), mid, match) is None
    active = api.c.get("/games?status=active").json["items"]
    assert [g["id"] for g in active] == [second]
    assert [r["game_id"] for r in lad.results("quick")] == [first]
    assert {entry(api, t)["state"] for t in bots.values()} == {"playing"}


def test_a_game_created_but_never_bound_is_adopted_not_doubled(api, lad, app):
    """The claimer created the game and died before binding it: after the lease, the
    repair finds that game and binds it; no second game is made for the same bots."""
    class DiesAfterCreating(Ladders):
        def _bind(self, name, mid, sides, gid):
            return True  # the process is gone before its bind reaches Redis

    dying = DiesAfterCreating(app.extensions["arena"], app.config)
    bots = dict(api.bot(n) for n in ("a", "b"))
    for token in bots.values():
        join(api, token)
    [orphan] = dying.match_once("quick")
    assert {entry(api, t)["state"] for t in bots.values()} == {"matched"}
    [mid] = lad.r.hkeys(lad.k_matches("quick"))
    raw = json.loads(lad.r.hget(lad.k_matches("quick"), mid))
    raw["at"] -= CLAIM_LEASE_S + 1  # the lease ran out
    lad.r.hset(lad.k_matches("quick"), mid, json.dumps(raw))
    assert lad.pass_once() == []  # adopted: no new game
    assert {entry(api, t)["game_id"] for t in bots.values()} == {orphan}
    assert {entry(api, t)["state"] for t in bots.values()} == {"playing"}
    assert len(api.c.get("/games?status=active").json["items"]) == 1


def test_racing_matchmakers_never_seat_a_bot_twice(api, lad, app):
    """Twelve matchmakers (threads, each its own Ladders) race over 40 waiting bots: every
    bot ends in exactly one match and one game."""
    bots = dict(api.bot(f"r{i}") for i in range(40))
    for token in bots.values():
        join(api, token, games=1)
    makers = [Ladders(app.extensions["arena"], app.config) for _ in range(12)]
    made: list[str] = []
    start = threading.Barrier(len(makers))

    def run(m: Ladders) -> None:
        start.wait()
        for _ in range(3):
            made.extend(m.match_once("quick"))

    threads = [threading.Thread(target=run, args=(m,)) for m in makers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(made) == 20 == len(set(made))
    seated = [s["bot_id"] for gid in made for s in api.view(gid).json["seats"]]
    assert sorted(seated) == sorted(bots)
    games = {entry(api, t)["game_id"] for t in bots.values()}
    assert games == set(made)


def test_pair_up_rule():
    now = 1000.0

    def w(bot, ordinal, since=now, last=None):
        return {"bot": bot, "ordinal": ordinal, "since": since, "last": last}

    # nearest ordinal, longest-waiting first
    assert pair_up([w("a", 0, 990), w("b", 20), w("c", 1)], now, 3) == [("a", "c")]
    # out of the window (5 + 1/s waited): no pair yet; later, yes
    assert pair_up([w("a", 0), w("b", 9)], now, 3) == []
    assert pair_up([w("a", 0, now - 4), w("b", 9)], now, 3) == [("a", "b")]
    # no immediate rematch while someone else is in reach; after both waited, allowed
    assert pair_up([w("a", 0, 999, "b"), w("b", 0, 999, "a"), w("c", 4)], now, 3) == \
        [("a", "c")]
    assert pair_up([w("a", 0, 999, "b"), w("b", 0, 999, "a")], now, 3) == []
    assert pair_up([w("a", 0, 990, "b"), w("b", 0, 990, "a")], now, 3) == [("a", "b")]
    assert pair_up([w("a", 0)], now, 0) == []


def test_a_game_that_ended_unrated_is_rated_once_by_a_restarted_service(api, lad, app, key_prefix):
    """The process that played the last move died before rating it (its hook never ran):
    the matchmaker of a service started afresh on the same Redis finds the finished game
    and rates it, once."""
    bots = dict(api.bot(n) for n in ("a", "b"))
    for token in bots.values():
        join(api, token, games=1)
    [gid] = lad.pass_once()
    assert api.c.get("/games?status=active").json["items"][0]["ladder"] == "quick"
    app.extensions["arena"].on_finish.remove(lad._game_finished)
    play_game(api, gid, bots, random.Random(9))
    assert lad.results("quick") == []  # nobody rated it
    stored = lad.r.hmget(lad.k_entries("quick"), list(bots))  # (not read through ``entry``)
    assert {json.loads(raw)["state"] for raw in stored} == {"playing"}
    fresh = create_app({"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix,
                        "ARENA_RATE_LIMIT": 0, "TESTING": True, "ARENA_LADDERS": QUICK})
    restarted = fresh.extensions["ladders"]
    restarted.pass_once()
    restarted.pass_once()
    lad.pass_once()
    assert [r["game_id"] for r in restarted.results("quick")] == [gid]
    assert {entry(api, t)["state"] for t in bots.values()} == {"off"}
    rows = api.c.get("/ladders/quick/standings").json["items"]
    assert sorted(r["games"] for r in rows) == [1, 1]


def test_an_operator_ladder_needs_a_sound_definition():
    from service.arena.ladder.ladders import declared

    assert declared({"ARENA_LADDERS": '{"fast7": {"variants": {"target": 7}}}'})["fast7"] \
        .variants == {"target": 7}
    for bad in ('{"Bad Name": {}}', '{"x{y}": {}}', '{"three": {"players": 3}}',
                '{"v": {"variants": {"target": 0}}}'):
        with pytest.raises(ValueError):
            declared({"ARENA_LADDERS": bad})


def test_the_entry_agrees_with_the_games_end_the_moment_it_is_visible(app, api, lad):
    """The process that makes a ladder game's last move settles it after its commit
    (``Arena.on_finish``); the other bot may see the game finished before that (its
    view, its ``?wait`` answer). Here the after-finish loop is held in a hook before the
    ladder's, once the last move has answered: the game reads ``finished``, and both
    entries already say so — not ``playing``, and ``games_left`` counted down, the result
    in the rating. Once the held loop goes on, nothing is rated twice."""
    rng = random.Random(11)
    bots = dict(api.bot(n) for n in ("a", "b"))
    for token in bots.values():
        assert join(api, token, games=1).status_code == 200
    [gid] = lad.pass_once()
    arena = app.extensions["arena"]
    held, release = threading.Event(), threading.Event()

    def hold(game) -> None:  # the finishing process, slow after its commit
        held.set()
        assert release.wait(30)

    arena.on_finish.insert(0, hold)
    finisher: dict = {}
    try:
        for _ in range(2000):  # play up to the last move, which goes on in a thread
            spec = api.view(gid).json
            bot = spec["seats"][spec["turn"]]["bot_id"]
            v = api.view(gid, bots[bot]).json
            action = rng.choice(v["legal_actions"])

            def last(bot=bot, action=action, v=v) -> None:
                r = Api(app.test_client()).act(gid, bots[bot], action, version=v["version"])
                finisher.update(status=r.status_code, view=r.json)

            th = threading.Thread(target=last)
            th.start()
            end = time.monotonic() + 10
            while th.is_alive() and not held.is_set():  # done, or held after the last move
                assert time.monotonic() < end
                time.sleep(0.002)
            if not held.is_set() and finisher.get("view", {}).get("status") == "finished":
                # the last move answered first: its hooks run once its answer went out
                assert held.wait(30), "the after-finish hooks never ran"
            if held.is_set():
                break
            assert finisher["status"] == 200
        assert held.is_set(), "the game did not end"
        assert api.view(gid).json["status"] == "finished"  # visible to every bot
        for token in bots.values():
            e = entry(api, token)
            assert e["state"] == "off" and e["games_left"] == 0 and e["game_id"] is None, e
            assert e["rating"]["games"] == 1
        assert [r["game_id"] for r in lad.results("quick")] == [gid]
    finally:
        release.set()
        arena.on_finish.remove(hold)
    th.join(10)
    assert finisher["status"] == 200 and finisher["view"]["status"] == "finished"
    assert [r["game_id"] for r in lad.results("quick")] == [gid]  # rated once
    lad.pass_once()
    assert len(lad.results("quick")) == 1
    assert sum(h["games"] for h in (
        api.c.get(f"/ladders/quick/bots/{b}/history").json for b in bots)) == 2
