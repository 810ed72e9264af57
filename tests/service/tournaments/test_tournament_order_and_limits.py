"""The order ratings take a tournament's games in (published, with each
game's rating change, and a function of the results alone), and the size limits of a
tournament, each refused under the field that can bring it within them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from service.arena.core import ratings
from tests.service.conftest import settle
from tests.service.tournaments.test_tournaments import (
    ADMIN,
    all_games,
    auth,
    check_standings,
    create,
    register,
)


def play_out(client: Any, gid: str, bots: dict[str, str]) -> None:
    """Play one game to its end, every seat taking its last legal action: the same cards
    and the same choices give the same game, whoever sits where."""
    store = client.application.extensions["arena"].store
    while (game := store.get_game(gid)).status != "finished":
        bot = game.seats[game.state.turn]
        v = client.get(f"/games/{gid}", headers=auth(bots[bot])).json
        r = client.post(f"/games/{gid}/actions", headers=auth(bots[bot]),
                        json={"action": v["legal_actions"][-1], "version": v["version"]})
        assert r.status_code == 200, r.json
    settle(client)  # its consequences: the tournament recorded it


def recompute(t: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Every entrant's rating from the published data alone: the games in their published
    ``recorded`` order, each a win of ``winner`` over the other entrant. Checks each
    game's published before/after on the way."""
    rates = {e["bot_id"]: ratings.initial() for e in t["entrants"]}
    games = sorted(all_games(t), key=lambda g: g["recorded"])
    assert [g["recorded"] for g in games] == list(range(1, len(games) + 1))
    for g in games:
        assert [r["bot_id"] for r in g["rating"]] == g["teams"]
        for r in g["rating"]:
            assert r["before"] == ratings.shown(rates[r["bot_id"]]), g
        loser = next(b for b in g["teams"] if b != g["winner"])
        rates[g["winner"]], rates[loser] = ratings.rate(rates[g["winner"]], rates[loser])
        for r in g["rating"]:
            assert r["after"] == ratings.shown(rates[r["bot_id"]]), g
    return rates


def test_mirrored_results_are_ranked_by_a_published_rating_order(client):
    """R20: a game is won by the team that reaches the target. Two entrants,
    trusted twins: each deal is played twice with the teams swapped, and both entrants
    take the same choices, so each twin is the other's mirror: every count of the
    standings ties and the rating ordinal ranks them. The later deal is played first,
    yet ratings take the games in slot order, and the detail shows that order and every
    game's rating before and after: recomputing from it gives the standings exactly."""
    bots = register(client, 2)
    t = create(client, bots, format="round_robin", games_per_pairing=4, trusted=True,
               seed=21, variants={"target": 5}, parallel=4)
    games = all_games(t)
    assert [g["deal"] for g in games] == [0, 0, 1, 1]
    assert all(g["recorded"] is None and g["rating"] is None for g in games)
    for g in (games[2], games[3], games[0], games[1]):  # deal 1 finishes first
        play_out(client, g["game_id"], bots)
        mid = all_games(client.get(f"/tournaments/{t['id']}").json)
        if g is games[3]:  # deal 1 is over and shown, but waits for slots 0, 1 to be rated
            assert mid[2]["winner"] and mid[3]["winner"]
            assert mid[2]["recorded"] is None and mid[2]["rating"] is None
    t = client.get(f"/tournaments/{t['id']}").json
    assert t["status"] == "finished"
    games = all_games(t)
    assert [g["recorded"] for g in games] == [1, 2, 3, 4]  # slot order, not finishing order
    for a, b in (games[0:2], games[2:4]):  # mirrored: same scores, the other winner
        assert a["scores"] == b["scores"] and a["winner"] != b["winner"]
    st = check_standings(client, t)
    one, two = st["items"]
    for key in ("score", "matchpoints", "won", "points_for", "points_against"):
        assert one[key] == two[key], key  # every count ties...
    assert one["rating"]["ordinal"] > two["rating"]["ordinal"]  # ...the ordinal decides
    rates = recompute(t)
    for row in st["items"]:
        assert row["rating"] == ratings.shown(rates[row["bot_id"]])
    # the last game's winner rose last: the order is what ranks them, and it is published
    assert one["bot_id"] == games[3]["winner"]


def test_ratings_take_the_games_in_slot_order_across_tables(client):
    """Four entrants with duplicate deals (two tables a round): the second
    table finishes each deal first, and the ratings still take the slots in order."""
    bots = register(client, 4)
    t = create(client, bots, format="swiss", rounds=2, games_per_pairing=1, seed=9,
               parallel=2)
    tid = t["id"]
    for rnd in range(2):
        games = client.get(f"/tournaments/{tid}").json["rounds"][rnd]["games"]
        for g in reversed(games):
            play_out(client, g["game_id"], bots)
    t = client.get(f"/tournaments/{tid}").json
    assert t["status"] == "finished"
    assert [g["recorded"] for g in all_games(t)] == [1, 2, 3, 4]
    st = check_standings(client, t)
    rates = recompute(t)
    for row in st["items"]:
        assert row["rating"] == ratings.shown(rates[row["bot_id"]])


def test_every_tiebreak_is_in_the_contract_the_readme_and_the_command_help(client):
    """The standings operation, docs/tournaments.md and ``allfours tournament --help``
    state the whole order (as ``service.arena.tournaments.service.standings`` sorts) and the rating
    order; the stated limits are the enforced ones."""
    from service.arena.tournaments import size as schemas
    from service.cli.tournament import RANKING_HELP
    from service.http.tournaments.routes import get_standings

    readme = (Path(__file__).resolve().parents[3] / "docs" / "tournaments.md").read_text()
    ranking = readme[readme.index("**Ranking.**"):]
    order = ["score", "matchpoints", "games won", "point difference", "ordinal", "bot id"]
    for text in (get_standings.operation.description, ranking, RANKING_HELP):
        places = [text.find(word) for word in order]
        assert -1 not in places and places == sorted(places), text
        assert "recorded" in text and "slot order" in text
    limits = readme[readme.index("**Limits.**"):]
    for text in (limits, RANKING_HELP):
        for number in (schemas.MAX_ENTRANTS, schemas.MAX_GAMES_PER_PAIRING,
                       schemas.MAX_ROUNDS, schemas.MAX_TOURNAMENT_GAMES):
            assert str(number) in text


# --- size limits -------------------------------------------------------------


def refused(client: Any, body: dict[str, Any]) -> dict[str, list[str]]:
    r = client.post("/tournaments", json=body, headers=ADMIN)
    assert r.status_code == 422, (r.status_code, r.json)
    assert r.json["type"] == "/problems/validation"
    return r.json["errors"]


def test_size_limits_are_refused_under_the_field_that_breaks_them(client):
    bots = list(register(client, 65))
    many = bots[:64]
    # a 64-entrant Swiss of 100 rounds: the rounds are too many, not the games per pairing
    errors = refused(client, {"format": "swiss", "entrants": many, "rounds": 100})
    assert set(errors) == {"rounds"}, errors
    assert "at most 15 rounds" in errors["rounds"][0] and "6400 games" in errors["rounds"][0]
    # fewer games a pairing would fit too, but the body left them at the default
    errors = refused(client, {"format": "swiss", "entrants": many, "rounds": 20})
    assert set(errors) == {"rounds"}, errors
    errors = refused(client, {"format": "swiss", "entrants": many, "rounds": 20,
                              "games_per_pairing": 2})
    assert set(errors) == {"rounds", "games_per_pairing"}, errors
    # a 4,032-game round robin: only fewer entrants can make it fit
    errors = refused(client, {"format": "round_robin", "entrants": many,
                              "games_per_pairing": 2})
    assert set(errors) == {"entrants"}, errors
    assert "4032 games" in errors["entrants"][0] and "at most 32 entrants" in errors["entrants"][0]
    # 20 entrants, 10 games a pairing: fewer games a pairing fit
    errors = refused(client, {"format": "round_robin", "entrants": bots[:20],
                              "games_per_pairing": 10})
    assert set(errors) == {"games_per_pairing"}, errors
    assert "at most 5 games per pairing" in errors["games_per_pairing"][0]
    errors = refused(client, {"format": "round_robin", "entrants": bots})  # 65
    assert errors == {"entrants": ["a tournament takes 2 to 64 entrants"]}
    assert client.get("/tournaments").json["items"] == [], "nothing was created"


def test_the_largest_tournament_allowed_stays_a_small_document(client):
    from service.arena.tournaments.size import MAX_TOURNAMENT_GAMES

    bots = list(register(client, 32))
    t = create(client, dict.fromkeys(bots, ""), format="round_robin", games_per_pairing=2,
               parallel=1)
    assert t["progress"]["games_planned"] == 992 <= MAX_TOURNAMENT_GAMES
    store = client.application.extensions["arena"].store
    size = len(store.r.get(f"{store.tours_prefix}tour:{t['id']}"))
    served = len(json.dumps(client.get(f"/tournaments/{t['id']}").json))
    print(f"992 games planned: document {size} bytes, detail {served} bytes")
    # pending slots; a result and a rating change add about 300 bytes a game
    assert size + 300 * 992 < 600_000, size
    assert served + 300 * 992 < 700_000, served
