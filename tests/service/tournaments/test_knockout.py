"""Knockout tournaments: single elimination seeded by rating, byes
to the top seeds, matches of duplicate-safe deals, who goes through (games, points,
tiebreak pairs, then the higher seed), the bracket in the API and the export, standings by
round reached. Whole tournaments are played by bots over the HTTP API on a real Redis;
every decision is checked against a recomputation from the games' records."""

from __future__ import annotations

import csv
import io
import json
import random
from collections.abc import Callable
from typing import Any

import pytest

from service.arena.tournaments import knockout
from service.http.app import create_app
from tests.conftest import REDIS_URL
from tests.service.accounts.test_fair_play import Tournament
from tests.service.conftest import ADMIN_TOKEN, settle
from tests.service.tournaments.test_tournaments import ADMIN, FAST, all_games, auth, register

# a few long tests: pytest-xdist may run them on different workers (tests/conftest.py)
SPREAD_OVER_WORKERS = True
EXPECTED_S = 60  # seconds, the whole module: the order workers take it in (tests/conftest.py)

Chooser = Callable[[str, list[str]], str]


def create(client: Any, bots: dict[str, str], **settings: Any) -> dict[str, Any]:
    body = {"entrants": list(bots), "format": "knockout", "variants": FAST, **settings}
    r = client.post("/tournaments", json=body, headers=ADMIN)
    assert r.status_code == 201, r.json
    return r.json


def play(client: Any, bots: dict[str, str], choose: Chooser, only: set[str] | None = None
         ) -> int:
    """Every bot plays every turn it has now (in ``only``'s games, when given)."""
    moved = 0
    for bot, token in bots.items():
        turns = client.get("/bots/me/turns", query_string={"timeout": 0}, headers=auth(token))
        for gid in turns.json["games"]:
            if only is not None and gid not in only:
                continue
            v = client.get(f"/games/{gid}", headers=auth(token)).json
            if not v["your_turn"]:
                continue
            r = client.post(f"/games/{gid}/actions", headers=auth(token),
                            json={"action": choose(bot, v["legal_actions"]),
                                  "version": v["version"]})
            assert r.status_code in (200, 409), r.json
            moved += r.status_code == 200
    return moved


def run(client: Any, tid: str, bots: dict[str, str], choose: Chooser) -> dict[str, Any]:
    settled = False
    for _ in range(5000):
        t = client.get(f"/tournaments/{tid}").json
        if t["status"] == "finished":
            return t
        if play(client, bots, choose) > 0:
            settled = False
            continue
        assert not settled, t["progress"]  # nothing to play even after the next round
        settle(client)
        settled = True
    raise AssertionError("the knockout did not finish")


def randomly(seed: int) -> Chooser:
    rng = random.Random(seed)
    return lambda _bot, legal: rng.choice(legal)


def first_legal(_bot: str, legal: list[str]) -> str:
    return legal[0]  # the same choice in the same position, whoever holds the cards


def expected_winner(client: Any, games: list[dict[str, Any]], a: str, b: str,
                    seed: dict[str, int]) -> tuple[str, str]:
    """Who goes through, recomputed from the records: games won, then points, then (when
    every tiebreak pair was played) the higher seed."""
    wins, points = {a: 0, b: 0}, {a: 0, b: 0}
    for g in games:
        rec = client.get(f"/games/{g['game_id']}/record").json
        assert rec["complete"]
        for team, bot in enumerate(g["teams"]):
            wins[bot] += rec["winner"] == team
            points[bot] += rec["scores"][team]
    if wins[a] != wins[b]:
        return max((a, b), key=wins.__getitem__), "games"
    if points[a] != points[b]:
        return max((a, b), key=points.__getitem__), "points"
    return min((a, b), key=seed.__getitem__), "seed"


def check_bracket(client: Any, t: dict[str, Any]) -> dict[str, Any]:
    """Every played match of the finished knockout against its games' records; each round's
    lines are the previous round's winners; the champion won the final."""
    br = t["bracket"]
    seed = {s["bot_id"]: s["seed"] for s in br["seeds"]}
    winners: list[str | None] = []
    for rnd, played in zip(br["rounds"], t["rounds"], strict=True):
        assert rnd["round"] == played["round"]
        lines = [x for m in rnd["matches"] for x in m["entrants"]]
        if rnd["round"] > 1:
            assert lines == winners
        byes = []
        for m in rnd["matches"]:
            if m["status"] == "bye":
                assert m["decided_by"] == "bye" and m["games"] == []
                byes.append(m["winner"])
                continue
            assert m["status"] == "done"
            a, b = m["entrants"]
            games = [g for g in played["games"] if g["pairing"] == m["pairing"]]
            assert [g["game_id"] for g in games] == [g["game_id"] for g in m["games"]]
            assert all({*g["teams"]} == {a, b} for g in games)
            assert len(games) == t["settings"]["games_per_pairing"] + m["tiebreak_games"]
            assert m["tiebreak_games"] in range(0, knockout.TIEBREAK_GAMES + 1, 2)
            want, why = expected_winner(client, games, a, b, seed)
            if why == "seed":  # level after every game: only when the pairs ran out
                assert m["tiebreak_games"] == knockout.TIEBREAK_GAMES
            regular = t["settings"]["games_per_pairing"]
            for k in range(0, m["tiebreak_games"], 2):  # each pair: only after a level score
                assert expected_winner(client, games[:regular + k], a, b, seed)[1] == "seed"
            assert (m["winner"], m["decided_by"]) == (want, why), m
        assert sorted(byes) == sorted(played["byes"])
        winners = [m["winner"] for m in rnd["matches"]]
    assert br["champion"] == winners[0] and len(winners) == 1
    return br


# --- the bracket, pure ----------------------------------------------------------------------


def test_bracket_lines_put_the_top_seeds_apart_and_give_them_the_byes():
    assert knockout.bracket_order(2) == [1, 2]
    assert knockout.bracket_order(8) == [1, 8, 4, 5, 2, 7, 3, 6]
    assert [knockout.bracket_size(n) for n in (2, 3, 4, 5, 8, 9, 64)] == [2, 4, 4, 8, 8, 16, 64]
    assert [knockout.rounds_for(n) for n in (2, 3, 5, 8, 9, 64)] == [1, 2, 3, 3, 4, 6]
    seeds = [{"bot_id": f"s{i}", "ordinal": None} for i in range(1, 6)]
    lines = knockout.first_lines(seeds)  # 5 entrants: 8 lines, 3 byes to seeds 1-3
    assert lines == ["s1", None, "s4", "s5", "s2", None, "s3", None]
    assert knockout.pairs_of(lines) == ([("s4", "s5")], ["s1", "s2", "s3"])


def test_seeds_rated_by_ordinal_then_unrated_ties_in_entrants_order():
    board = {"a": None, "b": {"mu": 30.0, "sigma": 5.0}, "c": {"mu": 25.0, "sigma": 3.0},
             "d": None, "e": {"mu": 21.0, "sigma": 2.0}}  # ordinals b 15, c 16, e 15
    order = knockout.seed_order(["a", "b", "c", "d", "e"], board)
    assert [s["bot_id"] for s in order] == ["c", "b", "e", "a", "d"]
    assert [s["ordinal"] for s in order] == [16.0, 15.0, 15.0, None, None]


def _slot(teams: list[str], winner: int | None, scores: list[int], tiebreak: bool = False
          ) -> dict[str, Any]:
    res = None if winner is None else {"winner": winner, "scores": scores}
    return {"entrants": ["x", "y"], "teams": teams, "result": res, "tiebreak": tiebreak}


def test_who_goes_through_games_then_points_then_tiebreak_pairs_then_the_higher_seed():
    seeds = {"x": 2, "y": 1}
    d = knockout.decide([_slot(["x", "y"], 0, [3, 1]), _slot(["y", "x"], None, [0, 0])], seeds)
    assert d["winner"] is None and not d["needs_tiebreak"]  # a game is not recorded yet
    d = knockout.decide([_slot(["x", "y"], 0, [3, 1]), _slot(["y", "x"], 1, [2, 3])], seeds)
    assert (d["winner"], d["decided_by"], d["wins"]) == ("x", "games", [2, 0])
    # one game each: points decide (x: 3 + 1, y: 2 + 3)
    d = knockout.decide([_slot(["x", "y"], 0, [3, 2]), _slot(["y", "x"], 0, [3, 1])], seeds)
    assert (d["winner"], d["decided_by"], d["points"]) == ("y", "points", [4, 5])
    level = [_slot(["x", "y"], 0, [3, 2]), _slot(["y", "x"], 0, [3, 2])]
    d = knockout.decide(level, seeds)
    assert d["needs_tiebreak"] and d["winner"] is None
    one_pair = [*level, _slot(["x", "y"], 1, [0, 3], True), _slot(["y", "x"], 1, [0, 3], True)]
    assert knockout.decide(one_pair, seeds)["needs_tiebreak"]
    all_pairs = [*one_pair, *one_pair[2:]]
    d = knockout.decide(all_pairs, seeds)
    assert (d["winner"], d["decided_by"], d["tiebreak_games"]) == ("y", "seed", 4)
    d = knockout.decide([*one_pair, _slot(["x", "y"], 0, [3, 0], True),
                         _slot(["y", "x"], 1, [1, 3], True)], seeds)
    assert (d["winner"], d["decided_by"]) == ("x", "games")


# --- whole knockouts ------------------------------------------------------------------------


def test_eight_entrants_seeded_by_the_leaderboard_play_down_to_a_champion(app, client):
    bots = register(client, 8)
    ids = list(bots)
    # the leaderboard before: ids[5] best, then ids[2]; ids[7] and ids[0] equal; others unrated
    lb = app.extensions["tournaments"].lb_key
    store = app.extensions["tournaments"].r
    for bot, mu in ((ids[5], 40.0), (ids[2], 35.0), (ids[7], 30.0), (ids[0], 30.0)):
        store.hset(lb, bot, json.dumps({"mu": mu, "sigma": 5.0, "games": 3, "wins": 2}))
    t = create(client, bots, games_per_pairing=2, parallel=8, seed=5)
    want = [ids[5], ids[2], ids[0], ids[7], ids[1], ids[3], ids[4], ids[6]]
    br = t["bracket"]
    assert [s["bot_id"] for s in br["seeds"]] == want
    assert [s["ordinal"] for s in br["seeds"]] == [25.0, 20.0, 15.0, 15.0, None, None, None,
                                                   None]
    assert br["size"] == 8 and br["champion"] is None and br["tiebreak_pairs"] == 2
    assert [r["name"] for r in br["rounds"]] == ["quarterfinals", "semifinals", "final"]
    assert [m["seeds"] for m in br["rounds"][0]["matches"]] == [[1, 8], [4, 5], [2, 7], [3, 6]]
    assert all(m["status"] == "waiting" and m["entrants"] == [None, None]
               for r in br["rounds"][1:] for m in r["matches"])
    assert t["settings"]["rounds"] == 3 and t["progress"]["games_planned"] == 14
    assert t["settings"]["duplicate"] is True
    # round 1: four tables, deal k of the round dealt at every table
    r1 = t["rounds"][0]["games"]
    assert len(r1) == 8 and len({g["deal"] for g in r1}) == 2 and t["rounds"][0]["byes"] == []

    t = run(client, t["id"], bots, randomly(1))
    br = check_bracket(client, t)
    for rnd in t["rounds"]:
        regular = [g for g in rnd["games"] if g["deal"] < 2]
        for k in (0, 1):  # every table of the round played deal k: the same seed
            assert len({g["seed"] for g in regular if g["deal"] == k}) == 1
    assert t["progress"]["games_done"] == t["progress"]["games_planned"] == len(all_games(t))
    assert t["progress"]["rounds_done"] == 3
    st = client.get(f"/tournaments/{t['id']}/standings").json
    places = [(r["place"], r["eliminated"]) for r in st["items"]]
    assert places == [("1", None), ("2", 3), ("3-4", 2), ("3-4", 2), *[("5-8", 1)] * 4]
    assert st["items"][0]["bot_id"] == br["champion"]
    assert [r["score"] for r in st["items"]] == [3, 2, 1, 1, 0, 0, 0, 0]


def test_five_entrants_the_top_three_seeds_have_byes(client):
    bots = register(client, 5)
    ids = list(bots)
    t = create(client, bots, games_per_pairing=1, players=4, seed=9)
    br = t["bracket"]
    assert [s["bot_id"] for s in br["seeds"]] == ids  # all unrated: the entrants' order
    first = br["rounds"][0]["matches"]
    assert [m["status"] for m in first] == ["bye", "live", "bye", "bye"]
    assert [m["winner"] for m in first] == [ids[0], None, ids[1], ids[2]]
    assert first[1]["entrants"] == [ids[3], ids[4]]
    assert t["rounds"][0]["byes"] == [ids[0], ids[1], ids[2]]
    assert len(t["rounds"][0]["games"]) == 1 and t["progress"]["games_planned"] == 4
    # the byes stand in round 2 already: seed 1 waits for the winner of 4 v 5
    assert br["rounds"][1]["matches"][0]["entrants"] == [ids[0], None]
    assert br["rounds"][1]["matches"][1]["entrants"] == [ids[1], ids[2]]
    st = client.get(f"/tournaments/{t['id']}/standings").json
    assert all(r["byes"] == 0 and r["place"] is None for r in st["items"])  # not yet
    t = run(client, t["id"], bots, randomly(2))
    check_bracket(client, t)
    rec = client.get(f"/games/{t['rounds'][0]['games'][0]['game_id']}/record").json
    assert rec["players"] == 4  # each entrant holds both seats of its team
    st = client.get(f"/tournaments/{t['id']}/standings").json
    assert [r["place"] for r in st["items"]] == ["1", "2", "3-4", "3-4", "5"]
    byes = {r["bot_id"]: r["byes"] for r in st["items"]}
    assert byes == {b: int(b in ids[:3]) for b in ids}


def test_an_exact_tie_plays_tiebreak_pairs_then_the_higher_seed_goes_through(client):
    """Trusted twins: each deal is played from both seats, so two bots that choose alike
    (the first legal action) win one game each with the same points, every time — the
    regular games, then both tiebreak pairs — and the higher seed goes through."""
    bots = register(client, 4)
    ids = list(bots)
    t = create(client, bots, games_per_pairing=2, trusted=True, seed=4)
    t = run(client, t["id"], bots, first_legal)
    br = check_bracket(client, t)
    for rnd in br["rounds"]:
        for m in rnd["matches"]:
            assert m["decided_by"] == "seed" and m["tiebreak_games"] == 4
            assert m["wins"] == [3, 3] and m["points"][0] == m["points"][1]
            assert m["winner"] == min(m["entrants"], key=ids.index)
            for twin in (m["games"][0:2], m["games"][2:4], m["games"][4:6]):
                deals = {g["seed"] for g in t["rounds"][rnd["round"] - 1]["games"]
                         if g["slot"] in {x["slot"] for x in twin}}
                assert len(deals) == 1  # a deal and its twin: both seats
    assert br["champion"] == ids[0]
    assert t["progress"]["games_planned"] == t["progress"]["games_done"] == 3 * 6


def test_a_deal_stays_embargoed_until_both_of_its_tables_finish(client):
    bots = register(client, 4)  # round 1: two tables share each deal
    t = create(client, bots, games_per_pairing=2, players=2, parallel=4, seed=8)
    games = t["rounds"][0]["games"]
    deal0 = [g for g in games if g["deal"] == 0]
    assert len(deal0) == 2 and all(g["status"] == "live" for g in deal0)
    first, other = deal0
    choose = randomly(3)
    for _ in range(2000):
        if client.get(f"/games/{first['game_id']}").json["status"] == "finished":
            break
        play(client, bots, choose, only={first["game_id"]})
    # one table of deal 0 is over, the other has not moved: everything about it is hidden
    r = client.get(f"/games/{first['game_id']}")
    assert r.status_code == 403 and r.json["type"] == "/problems/embargoed"
    t = client.get(f"/tournaments/{t['id']}").json
    g = next(x for x in t["rounds"][0]["games"] if x["slot"] == first["slot"])
    assert g["status"] == "live" and g["winner"] is None and g["seed"] is None
    match = t["bracket"]["rounds"][0]["matches"][first["pairing"]]
    assert match["wins"] == [0, 0] and match["points"] == [0, 0]
    assert all(x["winner"] is None and x["status"] == "live" for x in match["games"][:1])
    ex = client.get(f"/tournaments/{t['id']}/export").json
    assert ex["bracket"] == t["bracket"]
    # the other table finishes deal 0: both results appear together
    for _ in range(2000):
        if client.get(f"/games/{other['game_id']}").json["status"] == "finished":
            break
        play(client, bots, choose, only={other["game_id"]})
    assert client.get(f"/games/{first['game_id']}").status_code == 200
    t = client.get(f"/tournaments/{t['id']}").json
    shown = [x for x in t["rounds"][0]["games"] if x["deal"] == 0]
    assert all(x["status"] == "done" and x["winner"] for x in shown)
    match = t["bracket"]["rounds"][0]["matches"][first["pairing"]]
    assert sum(match["wins"]) == 1 and match["games"][0]["winner"] is not None


def test_the_export_carries_the_bracket_as_json_and_csv(client):
    bots = register(client, 3)
    t = create(client, bots, games_per_pairing=1, seed=2)
    t = run(client, t["id"], bots, randomly(4))
    ex = client.get(f"/tournaments/{t['id']}/export").json
    assert ex["bracket"] == t["bracket"] and ex["bracket"]["champion"]
    r = client.get(f"/tournaments/{t['id']}/export.csv?table=bracket")
    assert r.status_code == 200 and r.mimetype == "text/csv"
    rows = list(csv.DictReader(io.StringIO(r.get_data(as_text=True))))
    matches = [(rnd, m) for rnd in ex["bracket"]["rounds"] for m in rnd["matches"]]
    assert len(rows) == len(matches) == 3
    for row, (rnd, m) in zip(rows, matches, strict=True):
        assert row["round"] == str(rnd["round"]) and row["name"] == rnd["name"]
        assert [row["entrant_0"], row["entrant_1"]] == [x or "" for x in m["entrants"]]
        assert row["winner"] == m["winner"] and row["decided_by"] == m["decided_by"]
        assert row["games"].split() == [g["game_id"] for g in m["games"]]
    assert rows[0]["status"] == "bye" and rows[0]["entrant_1"] == ""
    table = list(csv.DictReader(io.StringIO(client.get(
        f"/tournaments/{t['id']}/export.csv").get_data(as_text=True))))
    assert [row["place"] for row in table] == ["1", "2", "3"]
    # other formats: the bracket table is empty, the detail's bracket null
    rr = register(client, 2)
    t2 = client.post("/tournaments", json={"entrants": list(rr), "format": "round_robin"},
                     headers=ADMIN).json
    assert t2["bracket"] is None
    r = client.get(f"/tournaments/{t2['id']}/export.csv?table=bracket")
    assert r.get_data(as_text=True).strip() == ",".join(
        ["round", "name", "match", "entrant_0", "entrant_1", "seed_0", "seed_1", "status",
         "wins_0", "wins_1", "points_0", "points_1", "tiebreak_games", "winner",
         "decided_by", "games"])


@pytest.mark.parametrize(("body", "field", "said"), [
    ({"rounds": 2}, "rounds", "swiss"),
    ({"games_per_pairing": 15, "entrants": 64}, "games_per_pairing", "at most 11 games"),
])
def test_knockout_settings_outside_the_limits_are_refused_with_the_field(client, body, field,
                                                                         said):
    n = body.pop("entrants", 4)
    full = {"format": "knockout", "entrants": [f"{i:012x}" for i in range(n)], **body}
    r = client.post("/tournaments", json=full, headers=ADMIN)
    assert r.status_code == 422 and r.content_type == "application/problem+json", r.json
    assert field in r.json["errors"] and said in r.json["errors"][field][0], r.json


@pytest.fixture
def fair_app(key_prefix):
    # as test_fair_play's: a short keep-alive, so a live game's stream is read to it
    return create_app({"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix,
                       "ARENA_RATE_LIMIT": 0, "ARENA_ADMIN_TOKEN": ADMIN_TOKEN,
                       "ARENA_SSE_KEEPALIVE": 0.01, "TESTING": True})


def test_no_knockout_entrant_reads_a_card_hidden_from_it(fair_app):
    """The fair-play check of every format (tests/service/accounts/test_fair_play.py) on a knockout
    of 8 at uneven speeds: at many moments everything each entrant can read is collected,
    and none of it shows a card hidden from it in a live game, or the game's seed."""
    tour = Tournament(fair_app, 8, seed=23, format="knockout", players=2,
                      games_per_pairing=2, parallel=5)
    t = tour.run()
    assert tour.moments >= 10 and tour.checked >= 30, (tour.moments, tour.checked)
    assert tour.embargoes_met > 0  # a table over while its deal was still played elsewhere
    assert t["bracket"]["champion"]
    seen: dict[int, list[str]] = {}
    for g in tour.games():
        seen.setdefault(g.meta["seed"], []).extend(set(g.seats))
    assert all(len(v) == len(set(v)) for v in seen.values()), "an entrant saw a deal twice"
