"""Honest ratings and fair deals (docs/ratings.md): forfeits, withdrawals and
games abandoned to the clock are rated losses; a ladder bot that never moves loses; new
bots are provisional; one owner's games are unrated; the k-th game against one owner in a
day weighs 1/k (the farm); chosen seeds are marked, random ones committed to; a
tournament seed is never reused; the disqualification edge; the migration of ratings
written the old way. Real Redis, the real Flask app over its HTTP interface; clocks are
driven by calling the sweeper with a time past every deadline, so nothing waits."""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from service.arena.core import deals, ratings
from service.arena.games.deadlines import Sweeper
from service.arena.ladder.ladders import ladder_plan, pair_up
from service.arena.migrations import ratings as migration
from service.http.app import create_app
from tests.conftest import REDIS_URL
from tests.service.conftest import ADMIN_TOKEN, Api
from tests.service.ladder.test_ladder import QUICK, entry, join, later, play_game

EXPECTED_S = 35  # seconds, the whole module: the order workers take it in (tests/conftest.py)

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
FAST = {"target": 3}


@pytest.fixture
def app(key_prefix):
    return create_app({"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix,
                       "ARENA_RATE_LIMIT": 0, "TESTING": True, "ARENA_LADDERS": QUICK,
                       "ARENA_LADDER_REMATCH_WAIT": 0.0, "ARENA_ADMIN_TOKEN": ADMIN_TOKEN})


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def api(client):
    return Api(client)


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def register(client: Any, names: list[str]) -> dict[str, str]:
    out = {}
    for n in names:
        r = client.post("/bots", json={"name": n})
        out[r.json["id"]] = r.json["token"]
    return out


def set_owner(redis_client: Any, keys: Any, bot: str, owner: str) -> None:
    """What the owners' registration writes (the shared interface: the bot hash's field)."""
    redis_client.hset(keys.bot(bot), "owner", owner)


def tournament(client: Any, entrants: list[str], **settings: Any) -> dict[str, Any]:
    body = {"entrants": entrants, "variants": FAST, "format": "round_robin",
            "games_per_pairing": 2, "no_show": None, **settings}
    r = client.post("/tournaments", json=body, headers=ADMIN)
    assert r.status_code == 201, r.json
    return r.json


def slots(t: dict[str, Any]) -> list[dict[str, Any]]:
    return [g for r in t["rounds"] for g in r["games"]]


def my_turns(client: Any, token: str) -> list[dict[str, Any]]:
    gids = client.get("/bots/me/turns", query_string={"timeout": 0},
                      headers=auth(token)).json["games"]
    views = [client.get(f"/games/{g}", headers=auth(token)).json for g in gids]
    return [v for v in views if v["your_turn"]]


def act(client: Any, token: str, v: dict[str, Any], action: str) -> None:
    r = client.post(f"/games/{v['id']}/actions", headers=auth(token),
                    json={"action": action, "version": v["version"]})
    assert r.status_code in (200, 409), r.json


def board(client: Any) -> dict[str, dict[str, Any]]:
    return {r["bot_id"]: r for r in client.get("/leaderboard").json["items"]}


def rank_everyone(app: Any) -> None:
    """Tests of other rules than the provisional one rank every rated bot at once."""
    app.extensions["tournaments"].provisional_games = 0
    app.extensions["tournaments"].provisional_owners = 0
    app.extensions["ladders"].provisional_games = 0
    app.extensions["ladders"].provisional_owners = 0


# --- forfeits are rated losses ----------------------------------------------------------------


def test_the_rage_quitter_withdraws_when_behind_and_ranks_below_its_winner(app, client):
    """A bot that withdraws as soon as it is behind turns the rest of its games into
    forfeits: each is a rated loss for it and a rated win for the winner, which gets its
    leaderboard entry (under the old rules no rating moved, and the winner had no entry)."""
    rank_everyone(app)
    bots = register(client, ["honest", "quitter"])
    honest, quitter = bots
    t = tournament(client, [honest, quitter], games_per_pairing=4, parallel=4, seed=6)
    rng = random.Random(5)
    quit_at = None
    for _ in range(3000):
        t = client.get(f"/tournaments/{t['id']}").json
        if t["status"] == "finished":
            break
        for v in my_turns(client, bots[quitter]):
            if v["scores"][v["team"]] < v["scores"][1 - v["team"]]:  # behind: rage-quit
                r = client.post(f"/tournaments/{t['id']}/entrants/{quitter}/withdraw",
                                headers=auth(bots[quitter]))
                assert r.status_code == 200, r.json
                quit_at = t["progress"]["games_done"]
                break
            act(client, bots[quitter], v, rng.choice(v["legal_actions"]))
        for v in my_turns(client, bots[honest]):
            act(client, bots[honest], v, v["legal_actions"][-1])
    assert t["status"] == "finished" and quit_at is not None, "it quit, and it ended"
    forfeits = [g for g in slots(t) if g["forfeit"]]
    assert forfeits and all(g["forfeit"] == [quitter] for g in forfeits)
    for g in forfeits:  # rated: the quitter's rating goes down, the winner's up
        assert g["winner"] == honest and g["rating"] is not None, g
        after = {r["bot_id"]: r for r in g["rating"]}
        assert after[quitter]["after"]["mu"] < after[quitter]["before"]["mu"]
        assert after[honest]["after"]["mu"] > after[honest]["before"]["mu"]
    rows = {r["bot_id"]: r for r in client.get(f"/tournaments/{t['id']}/standings").json["items"]}
    assert rows[quitter]["forfeits"] == len(forfeits) and rows[quitter]["status"] == "withdrawn"
    lb = board(client)
    assert lb[quitter]["games"] == lb[honest]["games"] == 4, "every game rated"
    assert lb[honest]["rank"] < lb[quitter]["rank"]
    assert lb[honest]["ordinal"] > lb[quitter]["ordinal"]


def weak(hand: list[str]) -> bool:
    """The abstainer's test of its first hand: no Jack, Queen, King or Ace."""
    return not any(card[0] in "JQKA" for card in hand)


def test_the_abstainer_that_never_acts_on_a_weak_hand_ranks_below_the_bots_that_beat_it(
        app, client):
    """A bot that looks at its first hand and never acts when it is weak lets the clock
    play every decision of that game: it forfeits it (every decision by the clock), a
    rated loss (under the old rules such forfeits moved no rating, and it ranked above the bot
    that beat it)."""
    rank_everyone(app)
    arena, tours = app.extensions["arena"], app.extensions["tournaments"]
    sweeper = Sweeper(arena)
    bots = register(client, ["abstainer", "a", "b"])
    abstainer = next(iter(bots))
    t = tournament(client, list(bots), games_per_pairing=4, parallel=8, move_limit=0.5,
                   seed=404)
    skipped: set[str] = set()
    rng = random.Random(9)
    for _ in range(5000):
        t = client.get(f"/tournaments/{t['id']}").json
        if t["status"] == "finished":
            break
        moved = 0
        for bot, token in bots.items():
            for v in my_turns(client, token):
                if bot == abstainer and (v["id"] in skipped or (v["ply"] < 3 and weak(v["hand"]))):
                    skipped.add(v["id"])
                    continue
                act(client, token, v, rng.choice(v["legal_actions"]))
                moved += 1
        if not moved:  # only the abstainer's decisions left: the clock plays them
            sweeper.sweep_once(later())
            tours.advance(t["id"])
    assert t["status"] == "finished"
    lost_by_absence = [g for g in slots(t) if g["forfeit"] == [abstainer]]
    assert lost_by_absence, "some first hand was weak (the seed is fixed)"
    beaten_by = set()
    for g in lost_by_absence:
        assert g["rating"] is not None and g["winner"] != abstainer
        beaten_by.add(g["winner"])
    lb = board(client)
    for winner in beaten_by:
        assert lb[winner]["ordinal"] > lb[abstainer]["ordinal"], (winner, lb)
        assert lb[winner]["rank"] < lb[abstainer]["rank"]


def test_a_ladder_bot_that_never_moves_is_rated_as_losing(app, api, client):
    """Every decision of the absent bot is played by the clock: whatever the board says
    at the end (against a thrower it may even be ahead), it forfeits, a rated loss."""
    rank_everyone(app)
    lad = app.extensions["ladders"]
    sweeper = Sweeper(app.extensions["arena"])
    bots = dict(api.bot(n, new_owner=True) for n in ("absent", "thrower"))  # two owners
    absent, thrower = bots
    for token in bots.values():
        join(api, token, games=1)
    gids = lad.pass_once()
    assert len(gids) == 1
    play_game(api, gids[0], bots, random.Random(1), skip=absent, sweeper=sweeper)
    lad.settle_all()
    hist = client.get(f"/ladders/quick/bots/{absent}/history").json["items"]
    assert hist[0]["won"] is False and hist[0]["forfeit"] is True and hist[0]["unrated"] is None
    rows = {r["bot_id"]: r for r in client.get("/ladders/quick/standings").json["items"]}
    assert rows[absent]["losses"] == 1 and rows[absent]["wins"] == 0
    assert rows[thrower]["wins"] == 1
    assert rows[thrower]["ordinal"] > rows[absent]["ordinal"]
    assert lad.results("quick")[0]["winner"] == thrower
    assert lad.results("quick")[0]["forfeit"] == [absent]
    assert entry(api, bots[absent])["rating"]["games"] == 1


# --- provisional ratings, the same-opponent weight, one owner's games ----------------------------


def test_provisional_bots_are_shown_but_not_ranked(app, client, redis_client, keys):
    """Thresholds 4 games and 3 owners here (defaults 10 and 3): of five bots, c and d
    share an owner, so their game is unrated and each has only 3 rated games."""
    tours = app.extensions["tournaments"]
    tours.provisional_games, tours.provisional_owners = 4, 3
    bots = register(client, ["a", "b", "c", "d", "e"])
    a, b, c, d, e = bots
    set_owner(redis_client, keys, c, "owner-cd")
    set_owner(redis_client, keys, d, "owner-cd")
    t = tournament(client, list(bots), games_per_pairing=1)
    rng = random.Random(3)
    for _ in range(3000):
        t = client.get(f"/tournaments/{t['id']}").json
        if t["status"] == "finished":
            break
        for token in bots.values():
            for v in my_turns(client, token):
                act(client, token, v, rng.choice(v["legal_actions"]))
    cd = next(g for g in slots(t) if set(g["teams"]) == {c, d})
    assert cd["rating"] is None, "one owner's game is never rated"
    lb = board(client)
    assert {b_: lb[b_]["games"] for b_ in bots} == {a: 4, b: 4, c: 3, d: 3, e: 4}
    for bot in (a, b, e):
        assert lb[bot]["provisional"] is False and lb[bot]["rank"] in (1, 2, 3)
    for bot in (c, d):  # 3 owners met, but 3 games < 4: listed, rated, not ranked
        assert lb[bot]["provisional"] is True and lb[bot]["rank"] is None
    items = client.get("/leaderboard").json["items"]
    assert [i["rank"] for i in items] == [1, 2, 3, None, None], "ranked ones first"
    # a suspended bot (the operator's act, a field of the bot hash) leaves the leaderboard
    redis_client.hset(keys.bot(a), "suspended", "farming")
    assert a not in board(client)


def test_the_kth_game_against_one_owner_within_a_day_weighs_one_kth():
    """The weighting rule, exactly: 1, 1/2, 1/3, ... against one owner within 24 h; another
    owner counts afresh; a game a day later counts in full again."""
    farmer, thrower = ratings.blank(), ratings.blank()
    weights = []
    for i in range(4):
        farmer, thrower, (w, _) = ratings.rate_published(farmer, thrower, ("F", "T"), 1000.0 + i)
        weights.append(w)
    assert weights == [1.0, 1 / 2, 1 / 3, 1 / 4]
    assert ratings.weight(farmer, "X", 1004.0) == 1.0
    assert ratings.weight(farmer, "T", 1000.0 + ratings.SAME_OPPONENT_WINDOW_S + 10) == 1.0
    # the same four wins against four distinct owners move the rating further
    honest, others = ratings.blank(), [ratings.blank() for _ in range(4)]
    for i in range(4):
        honest, others[i], _ = ratings.rate_published(honest, others[i], ("H", f"O{i}"), 1000.0)
    assert honest["mu"] - 3 * honest["sigma"] > farmer["mu"] - 3 * farmer["sigma"]
    assert ratings.provisional(farmer, 4, 3) and not ratings.provisional(honest, 4, 3)


@pytest.mark.parametrize("throwers_owners", [("farm", "farm"), ("farm-1", "farm-2")],
                         ids=["one-owner", "two-owners"])
def test_the_farm_a_heuristic_bot_and_two_throwing_accounts_is_not_ranked(
        app, api, client, redis_client, keys, throwers_owners):
    """A rating farm's attack on the ladder (with the default thresholds, 10 games and 3
    owners): a bot that plays its highest card against two accounts that play their lowest
    gets a dozen rated games, yet has met one or two owners: it is not ranked, however
    high its rating, and each repeat against an owner weighed less."""
    lad = app.extensions["ladders"]
    bots = dict(api.bot(n) for n in ("farmer", "throw-1", "throw-2"))
    farmer, t1, t2 = bots
    set_owner(redis_client, keys, t1, throwers_owners[0])
    set_owner(redis_client, keys, t2, throwers_owners[1])
    for token in bots.values():
        join(api, token, games=None)
    for _ in range(100):
        if entry(api, bots[farmer])["rating"]["games"] >= 12:
            break
        # a clock an hour on: the rating window has widened to let anyone meet anyone
        for gid in lad.pass_once(now=time.time() + 3600):
            for _ in range(2000):  # the farmer plays its highest card, the throwers their lowest
                spec = api.view(gid).json
                if spec["status"] == "finished":
                    break
                bot = spec["seats"][spec["turn"]]["bot_id"]
                v = api.view(gid, bots[bot]).json
                legal = v["legal_actions"]
                api.act(gid, bots[bot], legal[-1] if bot == farmer else legal[0],
                        version=v["version"])
            lad.settle_all()
    rows = {r["bot_id"]: r for r in client.get("/ladders/quick/standings").json["items"]}
    me = rows[farmer]
    assert me["games"] >= 10
    assert me["provisional"] is True and me["rank"] is None
    assert entry(api, bots[farmer])["rating"]["provisional"] is True
    # every game it played was against the throwers' one or two owners: weighted 1/k
    # (test_the_kth_game_against_one_owner_within_a_day_weighs_one_kth shows the ordinal
    # that the same wins against distinct owners would give is higher)
    mine = [res for res in lad.results("quick") if farmer in res["sides"]]
    assert len(mine) == me["games"]
    assert {o for res in mine for o in res["sides"] if o != farmer} <= {t1, t2}


def test_games_against_new_owners_buy_no_rating_and_no_ranking():
    """Owners' standing (docs/ratings.md, "Ratings a farm cannot buy"): a game against a
    bot whose owner is not established (younger than ``ARENA_ESTABLISHED_AGE``) moves a
    published rating by ``ARENA_NEW_OWNER_WEIGHT`` (0) and does not count towards the
    ranking; games against established owners count in full. The farmer with
    four fresh throwaway owners, 40 wins: its rating has not moved and it is
    provisional; an honest bot with 10 wins over three established owners is ranked."""
    standing = ratings.Standing(age_s=7 * 86_400, new_weight=0.0)
    now = 10_000_000.0
    fresh = standing.of(now - 60, now)  # made a minute ago
    old = standing.of(now - 8 * 86_400, now)
    assert (fresh, old, standing.of(None, now)) == (0.0, 1.0, 0.0)
    farmer = ratings.blank()
    for i in range(40):
        thrower = ratings.blank()
        farmer, _, (w, _) = ratings.rate_published(farmer, thrower, ("farm", f"t{i % 4}"),
                                                   now + i, standing=(fresh, fresh))
        assert w == 0.0
    assert farmer["games"] == 40 and len(farmer["owners"]) == 4
    assert (farmer["mu"], farmer["sigma"]) == (ratings.initial()["mu"],
                                               ratings.initial()["sigma"])
    assert farmer["established"] == [] and ratings.provisional(farmer, 10, 3)
    honest = ratings.blank()
    for i in range(10):
        honest, _, (w, _) = ratings.rate_published(honest, ratings.blank(), ("me", f"o{i % 3}"),
                                                   now + i, standing=(fresh, old))
    assert honest["established"] == ["o0", "o1", "o2"]
    assert not ratings.provisional(honest, 10, 3) and honest["mu"] > farmer["mu"]
    # a new owner's bot learns from an established opponent in full (the weight is the
    # opponent's standing): a newcomer is ranked by playing the regulars
    newcomer, _regular, (w_new, w_regular) = ratings.rate_published(
        ratings.blank(), ratings.blank(), ("new", "regular"), now, standing=(fresh, old))
    assert (w_new, w_regular) == (1.0, 0.0) and newcomer["mu"] > ratings.initial()["mu"]
    # 0 turns the rule off: every owner is established at once
    assert ratings.Standing(age_s=0).of(now, now) == 1.0


def test_the_farm_with_four_fresh_owners_reaches_neither_rank_nor_rating(
        app, api, client, redis_client, keys):
    """A rating farm's attack on the ladder with owners' standing on (an owner is established
    after an hour here, a week by default): a bot that plays its highest card against
    four throwaway owners' bots that play their lowest, each owner new and passing for a
    stranger. Its many rated wins moved its published rating not at all, and it is not
    ranked; a regular (an owner made two hours ago) that beats it is."""
    lad = app.extensions["ladders"]
    lad.standing = ratings.Standing(age_s=3600, new_weight=0.0)
    bots = dict(api.bot(n, new_owner=True) for n in ("farmer", "t1", "t2", "t3", "t4"))
    farmer = next(iter(bots))
    for token in bots.values():
        join(api, token, games=None)
    for _ in range(100):
        if entry(api, bots[farmer])["rating"]["games"] >= 12:
            break
        for gid in lad.pass_once(now=time.time() + 3600):
            for _ in range(2000):  # the farmer plays its highest card, the throwers their lowest
                spec = api.view(gid).json
                if spec["status"] == "finished":
                    break
                bot = spec["seats"][spec["turn"]]["bot_id"]
                v = api.view(gid, bots[bot]).json
                legal = v["legal_actions"]
                api.act(gid, bots[bot], legal[-1] if bot == farmer else legal[0],
                        version=v["version"])
            lad.settle_all()
    rows = {r["bot_id"]: r for r in client.get("/ladders/quick/standings").json["items"]}
    me = rows[farmer]
    assert me["games"] >= 10 and me["wins"] >= 1  # rated games, wins among them
    assert me["provisional"] is True and me["rank"] is None
    assert me["mu"] == pytest.approx(ratings.initial()["mu"])
    assert not any(r["rank"] == 1 and r["bot_id"] == farmer for r in rows.values())


def test_a_suspended_bot_is_off_the_ladder_standings(app, api, client, redis_client, keys):
    """As on the leaderboard: while the operator's suspension lasts, the bot is not listed
    on ``/ladders/{name}/standings``; lifting it lists it again with its rating."""
    rank_everyone(app)
    lad = app.extensions["ladders"]
    bots = dict(api.bot(n, new_owner=True) for n in ("good", "cheat"))
    good, cheat = bots
    for token in bots.values():
        join(api, token, games=None)
    rng = random.Random(3)
    for gid in lad.pass_once(now=time.time() + 3600):
        play_game(api, gid, bots, rng)
    lad.settle_all()
    listed = {r["bot_id"] for r in client.get("/ladders/quick/standings").json["items"]}
    assert listed == {good, cheat}
    assert client.post(f"/admin/bots/{cheat}/suspension", json={"reason": "farming"},
                       headers=ADMIN).status_code == 200
    rows = client.get("/ladders/quick/standings").json["items"]
    assert [r["bot_id"] for r in rows] == [good] and rows[0]["rank"] == 1
    assert client.delete(f"/admin/bots/{cheat}/suspension", headers=ADMIN).status_code == 200
    listed = {r["bot_id"] for r in client.get("/ladders/quick/standings").json["items"]}
    assert listed == {good, cheat}


def test_one_owners_bots_play_unrated_and_never_meet_on_a_ladder(app, client, redis_client,
                                                                 keys):
    bots = register(client, ["x", "y"])
    x, y = bots
    for b in bots:
        set_owner(redis_client, keys, b, "one-owner")
    t = tournament(client, [x, y], games_per_pairing=2)
    rng = random.Random(2)
    for _ in range(3000):
        t = client.get(f"/tournaments/{t['id']}").json
        if t["status"] == "finished":
            break
        for token in bots.values():
            for v in my_turns(client, token):
                act(client, token, v, rng.choice(v["legal_actions"]))
    assert all(g["rating"] is None and g["winner"] is not None for g in slots(t))
    assert not set(board(client)) & {x, y}
    rows = client.get(f"/tournaments/{t['id']}/standings").json["items"]
    assert all(r["rating"]["mu"] == 25.0 for r in rows)
    # the ladder's matching never pairs them
    pool = [{"bot": x, "since": 0.0, "ordinal": 0.0, "owner": "one-owner"},
            {"bot": y, "since": 0.0, "ordinal": 0.0, "owner": "one-owner"}]
    assert pair_up(pool, 1000.0, 0.0) == []
    pool[1]["owner"] = y
    assert [set(p) for p in pair_up(pool, 1000.0, 0.0)] == [{x, y}]


# --- fair deals ---------------------------------------------------------------------------------


def test_a_chosen_seed_is_shown_before_anyone_joins_and_is_never_rated(app, api, client):
    bot, token = api.bot("creator")
    r = client.post("/games", json={"players": 2, "seed": 42}, headers=auth(token))
    assert r.status_code == 201
    assert r.json["seed_chosen"] is True and r.json["seed_commitment"] is None
    gid = r.json["id"]
    listed = {g["id"]: g for g in client.get("/games").json["items"]}
    assert listed[gid]["seed_chosen"] is True
    view = client.get(f"/games/{gid}").json  # a joiner's look before it sits down
    assert view["seed_chosen"] is True and "seed" not in view
    # a rated path refuses it: the ladder's rule for a finished game
    game = app.extensions["arena"].store.get_game(gid)
    assert ladder_plan(game, [bot, "other"], {bot: bot, "other": "other"})["rated"] is False


def test_a_random_seeds_commitment_matches_the_seed_and_salt_revealed_at_the_end(api, client):
    a, ta = api.bot("a")
    b, tb = api.bot("b")
    r = client.post("/games", json={"players": 2, "seats": [a, b]}, headers=auth(ta))
    gid = r.json["id"]
    commitment = r.json["seed_commitment"]
    assert r.json["seed_chosen"] is False and len(commitment) == 64
    for token in (ta, tb, None):  # nobody sees the seed or the salt before the end
        v = client.get(f"/games/{gid}", headers=auth(token) if token else {}).json
        assert v["seed_commitment"] == commitment
        assert "seed" not in v and "seed_salt" not in v
    rec = client.get(f"/games/{gid}/record", headers=auth(ta)).json
    assert "seed" not in rec and "seed_salt" not in rec
    api.play_out(gid, [ta, tb] if api.view(gid).json["seats"][0]["bot_id"] == a else [tb, ta],
                 random.Random(4))
    end = client.get(f"/games/{gid}").json
    assert end["status"] == "finished"
    check = hashlib.sha256(bytes.fromhex(end["seed_salt"]) + str(end["seed"]).encode())
    assert check.hexdigest() == commitment == deals.commitment(end["seed"], end["seed_salt"])
    rec = client.get(f"/games/{gid}/record").json
    assert (rec["seed"], rec["seed_salt"]) == (end["seed"], end["seed_salt"])


def test_a_tournament_seed_is_never_used_twice_unless_trusted(client):
    bots = register(client, ["a", "b"])
    tournament(client, list(bots), seed=777)
    before = client.get("/tournaments").json["items"]
    r = client.post("/tournaments", json={"entrants": list(bots), "format": "round_robin",
                                           "seed": 777}, headers=ADMIN)
    assert r.status_code == 409 and r.json["type"].endswith("/seed-reused")
    assert r.json["errors"]["seed"]
    assert client.get("/tournaments").json["items"] == before, "nothing was created"
    again = tournament(client, list(bots), seed=777, trusted=True, games_per_pairing=2)
    assert again["settings"]["trusted"] is True


# --- the disqualification edge --------------------------------------------------------------------


def test_an_entrant_whose_opponent_withdrew_before_its_first_decision_wins(client):
    bots = register(client, ["honest", "leaver"])
    honest, leaver = bots
    for seed in range(100, 160):  # a deal whose first kick ends the game (R22) is played
        t = tournament(client, [honest, leaver], games_per_pairing=2, seed=seed)
        if all(g["status"] == "live" for g in slots(t)):
            break
        client.post(f"/tournaments/{t['id']}/cancel", headers=ADMIN)
    else:
        pytest.fail("no seed leaves both games live at the start")
    r = client.post(f"/tournaments/{t['id']}/entrants/{leaver}/withdraw",
                    headers=auth(bots[leaver]))
    assert r.status_code == 200
    t = client.get(f"/tournaments/{t['id']}").json
    assert t["status"] == "finished"
    assert all(g["winner"] == honest and g["forfeit"] == [leaver] for g in slots(t))
    rows = {r["bot_id"]: r for r in client.get(f"/tournaments/{t['id']}/standings").json["items"]}
    assert (rows[honest]["won"], rows[honest]["lost"]) == (2, 0)  # the old rules: 0, 2
    assert rows[honest]["rank"] == 1 and rows[honest]["score"] == 1.0


def test_an_entrant_whose_opponent_was_disqualified_before_its_first_decision_wins(
        app, client):
    """max_timeouts 1: the failing entrant's first decision (R8, the beggar stands or
    begs, comes first in a hand) is played by the clock and it is disqualified — before
    the honest entrant was ever asked. The honest entrant wins both games."""
    sweeper, tours = Sweeper(app.extensions["arena"]), app.extensions["tournaments"]
    bots = register(client, ["honest", "failing"])
    honest, failing = bots
    for seed in range(1, 60):
        t = tournament(client, [honest, failing], games_per_pairing=2, parallel=2,
                       move_limit=0.5, max_timeouts=1, seed=seed)
        live = [g for g in slots(t) if g["status"] == "live"]
        turns = {client.get(f"/games/{g['game_id']}").json["seats"][
            client.get(f"/games/{g['game_id']}").json["turn"]]["bot_id"] for g in live}
        if len(live) == 2 and turns == {failing}:
            break
        client.post(f"/tournaments/{t['id']}/cancel", headers=ADMIN)
    else:
        pytest.fail("no seed puts the failing entrant first in both games")
    assert sweeper.sweep_once(later()) == 2  # its first decisions, by the clock
    tours.advance(t["id"])
    t = client.get(f"/tournaments/{t['id']}").json
    assert t["status"] == "finished"
    assert {e["bot_id"]: e["status"] for e in t["entrants"]}[failing] == "disqualified"
    rows = {r["bot_id"]: r for r in client.get(f"/tournaments/{t['id']}/standings").json["items"]}
    assert (rows[honest]["won"], rows[honest]["lost"]) == (2, 0)
    assert (rows[failing]["won"], rows[failing]["lost"]) == (0, 2)


# --- the migration -----------------------------------------------------------------------------


def old_way(redis_client: Any, keys: Any, app: Any, tid: str) -> None:
    """Rewrite a tournament and the leaderboard as the service under the old rules left them:
    forfeits unrated (no ``rating``), no ``rated_at``/``unrated``, leaderboard entries of
    mu, sigma, games and wins over the rated (non-forfeit) games only; no version key."""
    tours = app.extensions["tournaments"]
    doc = json.loads(redis_client.get(tours.key(tid)))
    rates = {e["bot_id"]: ratings.initial() for e in doc["entrants"]}
    lb: dict[str, dict[str, Any]] = {}
    for rnd in doc["rounds"]:
        for slot in rnd["slots"]:
            slot.pop("rated_at", None)
            slot.pop("unrated", None)
            res = slot["result"]
            if res is None or "forfeit" in res:
                slot.pop("rating", None)
                continue
            w, lo = slot["teams"][res["winner"]], slot["teams"][1 - res["winner"]]
            before = [dict(rates[b]) for b in slot["teams"]]
            rates[w], rates[lo] = ratings.rate(rates[w], rates[lo])
            slot["rating"] = [[r["mu"], r["sigma"], rates[b]["mu"], rates[b]["sigma"]]
                              for b, r in zip(slot["teams"], before)]
            ew = lb.setdefault(w, {**ratings.initial(), "games": 0, "wins": 0})
            el = lb.setdefault(lo, {**ratings.initial(), "games": 0, "wins": 0})
            nw, nl = ratings.rate(ew, el)
            ew.update(nw, games=ew["games"] + 1, wins=ew["wins"] + 1)
            el.update(nl, games=el["games"] + 1)
    doc["ratings"] = rates
    redis_client.set(tours.key(tid), json.dumps(doc))
    redis_client.delete(tours.lb_key)
    for b, e in lb.items():
        redis_client.hset(tours.lb_key, b, json.dumps(e))
    redis_client.delete(migration.version_key(tours))


def test_the_migration_replays_ratings_written_the_old_way(app, client, redis_client, keys,
                                                           key_prefix):
    tours = app.extensions["tournaments"]
    bots = register(client, ["stays", "quits", "third"])
    quits = list(bots)[1]
    t = tournament(client, list(bots), games_per_pairing=2, seed=31)
    rng = random.Random(8)
    for _ in range(3000):
        t = client.get(f"/tournaments/{t['id']}").json
        if t["status"] == "finished":
            break
        if t["progress"]["games_done"] >= 2 and quits not in {
                e["bot_id"] for e in t["entrants"] if e["status"] != "in"}:
            client.post(f"/tournaments/{t['id']}/entrants/{quits}/withdraw",
                        headers=auth(bots[quits]))
        for token in bots.values():
            for v in my_turns(client, token):
                act(client, token, v, rng.choice(v["legal_actions"]))
    assert t["status"] == "finished"
    live_rules = board(client)  # as the new rules rated it, game by game
    live_doc = json.loads(redis_client.get(tours.key(t["id"])))
    assert any(g["forfeit"] for g in slots(t))
    old_way(redis_client, keys, app, t["id"])
    redis_client.delete(tours.seeds_key)  # the old way kept no used seeds
    old = board(client)
    assert old[quits]["games"] < live_rules[quits]["games"], "forfeits were unrated then"
    assert migration.current_version(tours) == 1
    # the startup of a new service process migrates (once)
    fresh = create_app({"REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix,
                        "ARENA_RATE_LIMIT": 0, "TESTING": True, "ARENA_LADDERS": QUICK})
    assert migration.current_version(tours) == migration.VERSION
    now = board(fresh.test_client())
    for bot in bots:
        for k in ("mu", "sigma", "ordinal", "games", "wins"):
            assert now[bot][k] == live_rules[bot][k], (bot, k)
    doc = json.loads(redis_client.get(tours.key(t["id"])))
    assert doc["ratings"] == live_doc["ratings"]
    assert [s.get("rating") for r in doc["rounds"] for s in r["slots"]] == \
        [s.get("rating") for r in live_doc["rounds"] for s in r["slots"]]
    assert doc["history"] == live_doc["history"]
    # a tournament from before the seed rule: its seed is taken as used
    assert redis_client.sismember(tours.seeds_key, 31)
    # idempotent: again, nothing; forced, the same ratings
    assert migration.migrate(tours, app.extensions["ladders"]) == {
        "version": migration.VERSION, "migrated": False}
    env = {**os.environ, "REDIS_URL": REDIS_URL, "ARENA_KEY_PREFIX": key_prefix,
           "ARENA_LADDERS": QUICK}
    allfours = str(Path(sys.executable).parent / "allfours")
    out = subprocess.run([allfours, "migrate", "ratings", "--force"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    said = json.loads(out.stdout.strip().splitlines()[-1])
    assert said["migrated"] is True and said["tournaments"] == 1
    again = board(client)
    assert {b: (r["mu"], r["sigma"]) for b, r in again.items()} == \
        {b: (r["mu"], r["sigma"]) for b, r in now.items()}


def test_the_migration_rates_an_old_ladder_win_by_a_bot_that_never_moved_as_a_loss(
        app, api, client, redis_client):
    lad = app.extensions["ladders"]
    sweeper = Sweeper(app.extensions["arena"])
    bots = dict(api.bot(n, new_owner=True) for n in ("absent", "thrower"))  # two owners
    absent, thrower = bots
    for token in bots.values():
        join(api, token, games=1)
    gid = lad.pass_once()[0]
    play_game(api, gid, bots, random.Random(1), skip=absent, sweeper=sweeper)
    lad.settle_all()
    game = app.extensions["arena"].store.get_game(gid)
    sides = lad.results("quick")[0]["sides"]
    # the old way: the board's winner rated, whoever it was; no forfeit field
    board_winner = sides[game.state.winner]
    board_loser = next(b for b in sides if b != board_winner)
    w, lo = ratings.rate(ratings.initial(), ratings.initial())
    redis_client.delete(lad.k_results("quick"))
    redis_client.rpush(lad.k_results("quick"), json.dumps(
        {"game_id": gid, "at": 1.0, "sides": sides, "winner": board_winner,
         "scores": list(game.state.scores)}))
    redis_client.hset(lad.k_ratings("quick"), board_winner,
                      json.dumps({**w, "games": 1, "wins": 1, "form": "W"}))
    redis_client.hset(lad.k_ratings("quick"), board_loser,
                      json.dumps({**lo, "games": 1, "wins": 0, "form": "L"}))
    redis_client.delete(migration.version_key(app.extensions["tournaments"]))
    done = migration.migrate(app.extensions["tournaments"], lad)
    assert done["migrated"] and done["ladders"]["quick"] == {"results": 1, "rated": 1,
                                                             "bots": 2}
    rows = {r["bot_id"]: r for r in client.get("/ladders/quick/standings").json["items"]}
    assert (rows[absent]["wins"], rows[absent]["losses"], rows[absent]["form"]) == (0, 1, "L")
    assert (rows[thrower]["wins"], rows[thrower]["form"]) == (1, "W")
    assert lad.results("quick")[0]["winner"] == thrower
    hist = client.get(f"/ladders/quick/bots/{absent}/history").json["items"]
    assert hist[0]["won"] is False and hist[0]["forfeit"] is True
