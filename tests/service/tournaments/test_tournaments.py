"""Tournaments run by the service: bots (a simple in-test loop over the HTTP API) play whole
round robin and Swiss tournaments; standings are checked against the games' records;
duplicate deals against the dealt cards; scheduling against restarts and races."""

from __future__ import annotations

import random
import threading
from collections import Counter
from typing import Any

import pytest

from service.arena.tournaments.pairing import round_robin_rounds, swiss_pairs
from service.engine import apply, parse_action
from service.http.app import create_app
from tests.conftest import REDIS_URL
from tests.service.conftest import ADMIN_TOKEN, settle

EXPECTED_S = 25  # seconds, the whole module: the order workers take it in (tests/conftest.py)

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
FAST = {"target": 3}


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def register(client: Any, n: int) -> dict[str, str]:
    """n bots: bot id -> token."""
    out = {}
    for i in range(n):
        r = client.post("/bots", json={"name": f"entrant-{i}"})
        out[r.json["id"]] = r.json["token"]
    return out


def create(client: Any, bots: dict[str, str], **settings: Any) -> dict[str, Any]:
    body = {"entrants": list(bots), "variants": FAST, **settings}
    r = client.post("/tournaments", json=body, headers=ADMIN)
    assert r.status_code == 201, r.json
    return r.json


def play_turns(client: Any, bots: dict[str, str], rng: random.Random) -> int:
    """Every bot plays every turn it has now (found via GET /bots/me/turns); returns how
    many actions were accepted. Bot 0 of the list plays its highest card, the rest at
    random, so the standings are not all alike."""
    first = next(iter(bots))
    moved = 0
    for bot, token in bots.items():
        turns = client.get("/bots/me/turns", query_string={"timeout": 0}, headers=auth(token))
        for gid in turns.json["games"]:
            v = client.get(f"/games/{gid}", headers=auth(token)).json
            if not v["your_turn"]:
                continue
            legal = v["legal_actions"]
            action = legal[-1] if bot == first else rng.choice(legal)
            r = client.post(f"/games/{gid}/actions", headers=auth(token),
                            json={"action": action, "version": v["version"]})
            assert r.status_code in (200, 409), r.json
            moved += r.status_code == 200
    return moved


def run_to_end(client: Any, tid: str, bots: dict[str, str], seed: int = 1,
               max_passes: int = 5000) -> dict[str, Any]:
    rng = random.Random(seed)
    settled = False
    for _ in range(max_passes):
        t = client.get(f"/tournaments/{tid}").json
        if t["status"] == "finished":
            return t
        if play_turns(client, bots, rng) > 0:
            settled = False
            continue
        # nothing to play: the next games come from the after-finish loop; nothing even
        # once it has settled is a stuck tournament
        assert not settled, t["progress"]
        settle(client)
        settled = True
    raise AssertionError("tournament did not finish")


def all_games(t: dict[str, Any]) -> list[dict[str, Any]]:
    return [g for r in t["rounds"] for g in r["games"]]


def play_game_at_random(client: Any, bots: dict[str, str], gid: str,
                        rng: random.Random) -> dict[str, Any]:
    """Game ``gid`` played to its end, each bot in turn choosing at random, while the rest
    of its tournament waits; the last action's answer."""
    store = client.application.extensions["arena"].store
    last: dict[str, Any] = {}
    while (game := store.get_game(gid)).status != "finished":
        bot = game.seats[game.state.turn]
        v = client.get(f"/games/{gid}", headers=auth(bots[bot])).json
        r = client.post(f"/games/{gid}/actions", headers=auth(bots[bot]),
                        json={"action": rng.choice(v["legal_actions"])})
        assert r.status_code == 200
        last = r.json
    return last


def add_game(row: Any, rec: dict[str, Any], team: int) -> None:
    """One game's record added to the standings row of the entrant that played ``team``
    (seats of that parity): played, won, points for and against, timeouts, hands won."""
    row["played"] += 1
    row["won"] += rec["winner"] == team
    row["points_for"] += rec["scores"][team]
    row["points_against"] += rec["scores"][1 - team]
    row["timeouts"] += sum(1 for x in rec["timeouts"] if x["seat"] % 2 == team)
    for hand in rec["hands"]:
        pts = [0, 0]
        for item in hand["items"]:
            if item["team"] is not None:
                pts[item["team"]] += item["points"]
        row["hands_won"] += pts[team] > pts[1 - team]


def expected_standings(client: Any, t: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Standings computed independently from each game's record."""
    rows: dict[str, Counter] = {e["bot_id"]: Counter() for e in t["entrants"]}
    for g in all_games(t):
        rec = client.get(f"/games/{g['game_id']}/record").json
        assert rec["complete"]
        for team, bot in enumerate(g["teams"]):
            add_game(rows[bot], rec, team)
    return {b: dict(c) for b, c in rows.items()}


def check_standings(client: Any, t: dict[str, Any]) -> dict[str, Any]:
    st = client.get(f"/tournaments/{t['id']}/standings").json
    want = expected_standings(client, t)
    for row in st["items"]:
        for k in ("played", "won", "hands_won", "points_for", "points_against", "timeouts"):
            assert row[k] == want[row["bot_id"]].get(k, 0), (k, row)
        assert row["lost"] == row["played"] - row["won"]
        r = row["rating"]
        assert r["ordinal"] == pytest.approx(r["mu"] - 3 * r["sigma"], abs=1e-3)
    scores = [(row["score"], row["matchpoints"], row["won"]) for row in st["items"]]
    assert scores == sorted(scores, reverse=True)
    assert [row["rank"] for row in st["items"]] == list(range(1, len(st["items"]) + 1))
    assert st["rounds_done"] == t["progress"]["rounds_planned"] == len(st["history"])
    return st


# --- pure pairing ----------------------------------------------------------------------------


def test_round_robin_rounds_meet_everyone_once():
    for n in (2, 3, 4, 5, 8):
        ids = [f"b{i}" for i in range(n)]
        rounds = round_robin_rounds(ids)
        met = [frozenset(p) for pairs, _ in rounds for p in pairs]
        assert len(met) == len(set(met)) == n * (n - 1) // 2
        for pairs, byes in rounds:
            seen = [b for p in pairs for b in p] + byes
            assert sorted(seen) == sorted(ids)


def test_swiss_avoids_rematches_when_possible():
    ranked = ["a", "b", "c", "d"]
    pairs, bye = swiss_pairs(ranked, {frozenset("ab")}, {})
    assert bye == [] and pairs == [("a", "c"), ("b", "d")]
    pairs, bye = swiss_pairs(["a", "b", "c"], set(), {"c": 1})
    assert bye == ["b"] and pairs == [("a", "c")]
    # everyone has met everyone: neighbours meet again rather than nobody playing
    all_met = {frozenset(p) for p in ("ab", "ac", "ad", "bc", "bd", "cd")}
    assert swiss_pairs(ranked, all_met, {})[0] == [("a", "b"), ("c", "d")]


# --- admin and validation --------------------------------------------------------------------


def test_who_creates_tournaments_and_whom_they_may_name(client):
    """No token: 401. A bot's token organizes, naming only its owner's bots (other bots
    enter themselves: 403 ``forbidden-entrant``); a wrong admin token is 403."""
    bots = register(client, 2)  # two owners
    body = {"format": "round_robin", "entrants": list(bots)}
    r = client.post("/tournaments", json=body)
    assert r.status_code == 401 and r.content_type == "application/problem+json"
    r = client.post("/tournaments", json=body, headers=auth(next(iter(bots.values()))))
    assert r.status_code == 403 and r.json["type"] == "/problems/forbidden-entrant"
    r = client.post("/tournaments", json=body, headers=auth("wrong" + ADMIN_TOKEN))
    assert r.status_code == 403 and r.json["type"] == "/problems/forbidden"
    bad = [
        ({**body, "entrants": [next(iter(bots))] * 2}, 422),
        # two entrants: a deal could only be replayed by the same two (see test_fair_play)
        ({**body, "duplicate": True}, 422),
        ({**body, "trusted": True, "games_per_pairing": 3}, 422),  # twins come in pairs
        ({**body, "rounds": 2}, 422),  # rounds: swiss only
        ({**body, "entrants": [*bots, "0123456789ab"]}, 404),
        ({**body, "format": "double_elimination"}, 422),
        ({**body, "format": "knockout", "rounds": 2}, 422),  # rounds: swiss only
    ]
    for b, status in bad:
        r = client.post("/tournaments", json=b, headers=ADMIN)
        assert r.status_code == status, (b, r.json)
        assert r.content_type == "application/problem+json"
    r = client.post("/tournaments", json={**body, "duplicate": True}, headers=ADMIN)
    assert "at least 4 entrants" in r.json["errors"]["duplicate"][0]
    assert "trusted" in r.json["detail"]
    assert client.get("/tournaments/0123456789ab").status_code == 404
    assert client.get("/tournaments/0123456789ab/standings").status_code == 404


def test_no_admin_token_configured_means_nobody_and_says_so(key_prefix):
    app = create_app({"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix,
                      "ARENA_RATE_LIMIT": 0})
    c = app.test_client()
    r = c.post("/tournaments", json={"format": "swiss"}, headers=ADMIN)
    assert r.status_code == 401  # no admin here: a token that is no bot's is unknown
    r = c.post("/owner-invitations", json={}, headers=ADMIN)
    assert r.status_code == 403 and r.json["type"] == "/problems/forbidden"
    assert "none configured" in r.json["detail"] and "ARENA_ADMIN_TOKEN" in r.json["detail"]


# --- whole tournaments -----------------------------------------------------------------------


def test_round_robin_runs_to_the_end_with_correct_standings(client):
    bots = register(client, 4)
    t = create(client, bots, name="rr", format="round_robin", games_per_pairing=2,
               parallel=3, seed=11)
    assert t["settings"].get("seed") is None  # secret while it runs
    assert all(g["seed"] is None for g in all_games(t))
    t = run_to_end(client, t["id"], bots)
    games = all_games(t)
    assert len(games) == t["progress"]["games_planned"] == 12 == t["progress"]["games_done"]
    assert len({g["game_id"] for g in games}) == 12
    met = Counter(frozenset(g["teams"]) for g in games)
    assert set(met.values()) == {2} and len(met) == 6  # every pair, twice
    assert t["settings"]["seed"] == 11
    st = check_standings(client, t)
    assert sum(row["won"] for row in st["items"]) == 12
    # the global leaderboard has everyone, with their 6 games each
    lb = client.get("/leaderboard").json["items"]
    assert sorted(row["bot_id"] for row in lb) == sorted(bots)
    assert all(row["games"] == 6 for row in lb)
    ordinals = [row["ordinal"] for row in lb]
    assert ordinals == sorted(ordinals, reverse=True)
    listed = client.get("/tournaments").json["items"]
    assert [x["id"] for x in listed] == [t["id"]] and listed[0]["status"] == "finished"
    # games are marked as the tournament's
    g0 = client.get("/games", query_string={"limit": 100}).json["items"]
    assert {g["tournament"] for g in g0} == {t["id"]}


def test_swiss_four_player_runs_to_the_end(client):
    bots = register(client, 5)  # odd: a bye each round
    t = create(client, bots, format="swiss", rounds=3, players=4, games_per_pairing=2,
               variants={"target": 2}, seed=5)
    t = run_to_end(client, t["id"], bots, seed=2)
    assert [len(r["games"]) for r in t["rounds"]] == [4, 4, 4]
    assert all(len(r["byes"]) == 1 for r in t["rounds"])
    byes = [r["byes"][0] for r in t["rounds"]]
    assert len(set(byes)) == 3  # the bye moves on
    for g in all_games(t):
        view = client.get(f"/games/{g['game_id']}").json
        a, b = g["teams"]
        assert [s["bot_id"] for s in view["seats"]] == [a, b, a, b]
    # no rematch while a fresh opponent was available (5 entrants, 3 rounds: always)
    pairs = [frozenset(g["teams"]) for r in t["rounds"] for g in r["games"][::2]]
    assert len(pairs) == len(set(pairs))
    st = check_standings(client, t)
    assert sum(row["byes"] for row in st["items"]) == 3
    assert [h["round"] for h in st["history"]] == [1, 2, 3]


def same_cards(r1: dict[str, Any], r2: dict[str, Any]) -> int:
    """Check two records were dealt alike (seed, cut, every hand both reach: dealer, cards
    per seat, first kick); returns how many hands were compared."""
    assert r1["seed"] == r2["seed"] and r1["first_dealer"] == r2["first_dealer"]
    both = min(len(r1["hands"]), len(r2["hands"]))
    for h1, h2 in zip(r1["hands"][:both], r2["hands"][:both]):
        assert h1["dealer"] == h2["dealer"]
        d1, d2 = h1["deals"][0], h2["deals"][0]
        assert d1["cards"] == d2["cards"] and d1["kicks"][0] == d2["kicks"][0]
    return both


def test_duplicate_deals_are_played_at_every_table_of_a_round(client):
    bots = register(client, 5)  # two tables and a bye each round
    t = create(client, bots, format="round_robin", games_per_pairing=2, seed=3,
               variants={"target": 5})
    assert t["settings"]["duplicate"] is True and t["settings"]["trusted"] is False
    t = run_to_end(client, t["id"], bots)
    compared = 0
    for rnd in t["rounds"]:
        deals: dict[int, list[dict[str, Any]]] = {}
        for g in rnd["games"]:
            deals.setdefault(g["deal"], []).append(g)
        assert len(deals) == 2  # games_per_pairing deals, each at both tables
        for tables in deals.values():
            assert len(tables) == 2
            first, second = tables
            # different entrants at each table: nobody plays a deal twice
            assert not set(first["teams"]) & set(second["teams"])
            compared += same_cards(
                client.get(f"/games/{first['game_id']}/record").json,
                client.get(f"/games/{second['game_id']}/record").json)
        # each entrant holds team 0's cards in one deal and team 1's in the other
        for bot in {b for g in rnd["games"] for b in g["teams"]}:
            assert sorted(g["teams"].index(bot) for g in rnd["games"] if bot in g["teams"]
                          ) == [0, 1]
    seeds = Counter(g["seed"] for g in all_games(t))
    assert set(seeds.values()) == {2} and len(seeds) == 10 and compared >= 10
    st = check_standings(client, t)
    # every entrant was compared with the other holder of its cards in each of its games
    assert all(row["comparisons"] == row["played"] for row in st["items"])


def test_one_game_at_a_time_still_plays_every_table_of_a_deal(client):
    """``parallel`` counts games being played: a finished game waiting for the other table
    of its deal (its result embargoed) does not hold the only place."""
    bots = register(client, 4)
    t = create(client, bots, format="swiss", rounds=1, games_per_pairing=1, parallel=1,
               seed=4)
    tid = t["id"]
    rng = random.Random(3)
    first = all_games(t)[0]
    for _ in range(1000):  # until the second table starts
        if client.get(f"/tournaments/{tid}").json["progress"]["games_live"] == 2:
            break
        assert play_turns(client, bots, rng) > 0, "nobody can move: the second table waits"
    t = client.get(f"/tournaments/{tid}").json
    one, two = all_games(t)
    assert one["game_id"] == first["game_id"] and one["status"] == "live"  # embargoed
    assert one["seed"] is None and one["scores"] is None and two["status"] == "live"
    listed = {g["id"]: g for g in client.get("/games?limit=100").json["items"]}
    assert listed[one["game_id"]]["status"] == "finished"
    assert listed[one["game_id"]]["scores"] is None
    t = run_to_end(client, tid, bots)
    one, two = all_games(t)
    assert one["recorded"] == 1 and two["recorded"] == 2  # a deal at once, in slot order
    assert one["seed"] == two["seed"] and one["scores"] is not None
    st = check_standings(client, t)
    assert sorted(r["matchpoints"] for r in st["items"]) in ([0, 0, 1, 1], [0.5] * 4)


def test_duplicate_is_on_where_possible_and_off_otherwise(client):
    three = create(client, register(client, 3), format="swiss", rounds=1)
    assert three["settings"]["duplicate"] is False
    assert len({g["deal"] for g in all_games(three)}) == 2  # a deal per game
    four = create(client, register(client, 4), format="swiss", rounds=1,
                  games_per_pairing=3)
    assert four["settings"]["duplicate"] is True
    assert sorted(g["deal"] for g in all_games(four)) == [0, 0, 1, 1, 2, 2]
    off = create(client, register(client, 4), format="swiss", rounds=1, duplicate=False)
    assert sorted(g["deal"] for g in all_games(off)) == [0, 1, 2, 3]


def test_trusted_twins_replay_a_deal_with_the_teams_swapped_under_embargo(client):
    bots = register(client, 2)
    t = create(client, bots, format="round_robin", games_per_pairing=6, seed=3,
               variants={"target": 7}, trusted=True, parallel=6)
    assert t["settings"]["duplicate"] is True and t["settings"]["trusted"] is True
    twins: dict[int, list[dict[str, Any]]] = {}
    for g in all_games(t):
        twins.setdefault(g["deal"], []).append(g)
    assert len(twins) == 3 and all(a["teams"] == b["teams"][::-1] for a, b in twins.values())

    # one twin played to its end while the other has not moved: the deal is embargoed
    first, second = twins[0]
    gid = first["game_id"]
    last = play_game_at_random(client, bots, gid, random.Random(1))
    assert last["status"] == "finished"
    assert "hands" not in last and "seed" not in last  # not even in the final answer
    for path in (f"/games/{gid}", f"/games/{gid}/record", f"/games/{gid}/turn",
                 f"/games/{gid}/events", f"/games/{second['game_id']}"):
        r = client.get(path)
        assert r.status_code == 403 and r.json["type"] == "/problems/embargoed", path
    a = first["teams"][0]
    mine = client.get(f"/games/{gid}", headers=auth(bots[a])).json
    assert mine["status"] == "finished" and mine["hand"] is not None
    assert "hands" not in mine and "seed" not in mine
    rec = client.get(f"/games/{gid}/record", headers=auth(bots[a])).json
    assert rec["complete"] is False and "seed" not in rec
    listed = {g["id"]: g for g in client.get("/games?limit=100").json["items"]}
    assert listed[gid]["status"] == "finished" and listed[gid]["scores"] is None
    slot = next(g for g in all_games(client.get(f"/tournaments/{t['id']}").json)
                if g["game_id"] == gid)
    assert slot["status"] == "live" and slot["seed"] is None and slot["scores"] is None

    t = run_to_end(client, t["id"], bots)
    compared = 0
    for g1, g2 in twins.values():
        r1 = client.get(f"/games/{g1['game_id']}/record").json
        r2 = client.get(f"/games/{g2['game_id']}/record").json
        assert r1["complete"] and r2["complete"]
        compared += same_cards(r1, r2)
    assert compared >= 3
    view = client.get(f"/games/{gid}").json  # all over: public again
    assert view["seed"] == next(g["seed"] for g in all_games(t) if g["game_id"] == gid)
    assert "hands" in view
    listed = {g["id"]: g for g in client.get("/games?limit=100").json["items"]}
    assert listed[gid]["scores"] is not None
    st = check_standings(client, t)
    assert all(row["comparisons"] == 6 for row in st["items"])


# --- restarts and crashes --------------------------------------------------------------------


def _tournament_games(app: Any, tid: str) -> list[Any]:
    store = app.extensions["arena"].store
    out = []
    for gid in store.r.zrange(f"{store.p}games:all", 0, -1):
        g = store.get_game(gid.decode())
        if g and (g.meta.get("tournament") or {}).get("id") == tid:
            out.append(g)
    return out


def test_a_tournament_survives_a_restart_and_a_crash_before_scheduling(key_prefix):
    config = {"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix, "ARENA_RATE_LIMIT": 0,
              "ARENA_ADMIN_TOKEN": ADMIN_TOKEN}
    app1 = create_app(config)
    c1 = app1.test_client()
    bots = register(c1, 3)
    t = create(c1, bots, format="round_robin", games_per_pairing=2, parallel=1, seed=8)
    tid = t["id"]
    rng = random.Random(4)
    while c1.get(f"/tournaments/{tid}").json["progress"]["games_done"] < 2:
        play_turns(c1, bots, rng)

    # A process dies right after finishing a game, before scheduling the next: play the
    # live game to its end with the finish hook switched off.
    arena1 = app1.extensions["arena"]
    arena1.on_finish.clear()
    live = [g for g in all_games(c1.get(f"/tournaments/{tid}").json) if g["status"] == "live"]
    assert len(live) == 1
    gid = live[0]["game_id"]
    while c1.get(f"/games/{gid}").json["status"] != "finished":
        play_turns(c1, bots, rng)
    after_crash = c1.get(f"/tournaments/{tid}").json
    assert after_crash["progress"]["games_live"] == 1  # nothing recorded, nothing started
    del app1, c1, arena1

    # A fresh service on the same Redis: its sweeper's re-check repairs and carries on.
    app2 = create_app(config)
    c2 = app2.test_client()
    app2.extensions["tournaments"].advance_all()
    t = c2.get(f"/tournaments/{tid}").json
    assert t["progress"]["games_done"] == 3 and t["progress"]["games_live"] == 1
    t = run_to_end(c2, tid, bots)
    slots = all_games(t)
    assert len(slots) == 6 and all(g["status"] == "done" for g in slots)
    games = _tournament_games(app2, tid)
    assert len(games) == 6  # every slot played exactly once
    assert sorted(g.id for g in games) == sorted(g["game_id"] for g in slots)
    assert sorted(g.meta["tournament"]["slot"] for g in games) == list(range(6))
    check_standings(c2, t)


# --- concurrency -----------------------------------------------------------------------------


def test_concurrent_finishes_never_schedule_a_slot_twice(app, client):
    """Eight games of one round end at the same instant (their last actions released by a
    barrier) while other threads call advance too; then the next round is checked."""
    bots = register(client, 4)
    t = create(client, bots, format="round_robin", games_per_pairing=4, parallel=8, seed=9)
    tid = t["id"]
    rng = random.Random(7)
    for _round in range(2):
        live = [g for g in all_games(client.get(f"/tournaments/{tid}").json)
                if g["status"] == "live"]
        assert live
        finals = [_play_to_last_action(client, bots, g["game_id"], rng) for g in live]
        assert _race(app, tid, finals) == []
        t = client.get(f"/tournaments/{tid}").json
        # the next round has started in full (a game its first kick ends is done at once)
        assert all(g["status"] == "done" for g in t["rounds"][_round]["games"])
        assert all(g["status"] != "pending" for g in t["rounds"][_round + 1]["games"])
        assert t["progress"]["games_done"] + t["progress"]["games_live"] == 8 * (_round + 2)
        games = _tournament_games(app, tid)
        assert len(games) == 8 * (_round + 2)
        assert len({g.meta["tournament"]["slot"] for g in games}) == len(games)
    t = run_to_end(client, tid, bots)
    assert len(_tournament_games(app, tid)) == 24 == t["progress"]["games_done"]


def _race(app: Any, tid: str, finals: list[tuple[str, str, dict[str, Any]]]) -> list[Any]:
    """Release every final action at once, with four threads calling advance meanwhile;
    returns the error answers."""
    tours = app.extensions["tournaments"]
    barrier = threading.Barrier(len(finals) + 4)
    errors: list[Any] = []

    def finish(gid: str, token: str, body: dict[str, Any]) -> None:
        c = app.test_client()
        barrier.wait()
        r = c.post(f"/games/{gid}/actions", json=body, headers=auth(token))
        if r.status_code != 200:
            errors.append(r.json)

    def poke() -> None:
        barrier.wait()
        for _ in range(3):
            tours.advance(tid)

    threads = [threading.Thread(target=finish, args=f) for f in finals]
    threads += [threading.Thread(target=poke) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return errors


def _play_to_last_action(client: Any, bots: dict[str, str], gid: str, rng: random.Random
                         ) -> tuple[str, str, dict[str, Any]]:
    """Play ``gid`` until one action would end it; return (game, token, that action)."""
    store = client.application.extensions["arena"].store
    while True:
        game = store.get_game(gid)
        state = game.state
        token = bots[game.seats[state.turn]]
        v = client.get(f"/games/{gid}", headers=auth(token)).json
        for a in v["legal_actions"]:
            if apply(state, parse_action(a))[0].is_over:
                return gid, token, {"action": a, "version": v["version"]}
        a = rng.choice(v["legal_actions"])
        r = client.post(f"/games/{gid}/actions", headers=auth(token),
                        json={"action": a, "version": v["version"]})
        assert r.status_code == 200, r.json
