"""Getting around: watching a duplicate-deal tournament shows what may be shown
and explains the rest (never an error page); bot names are links; rounds are counted from
1 and the standings' columns explained; a person's account is a player's page; "Your
games" leads to their replays; the result of a game where one bot holds both seats of a
team reads as English. Real service, real Redis, bots over HTTP, Chromium, axe-core.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from tests.web.support import ADMIN, PHONE, Api, RandomBot, new_page, wait_until
from tests.web.test_a11y import axe_violations

EXPECTED_S = 100  # seconds, the whole module: the order workers take it in (tests/conftest.py)

DESKTOP = {"width": 1366, "height": 768}


def clean(pg: Any) -> None:
    bad = axe_violations(pg)
    assert not bad, "\n".join(json.dumps(v) for v in bad)


def test_watching_a_duplicate_deal_shows_what_may_be_shown(browser, service) -> None:
    api = Api(service.base)
    made = [api.bot(n) for n in ("Steelpan", "Soca", "Parang", "Tassa")]
    gate = threading.Event()
    gate.set()
    players = [RandomBot(service.base, t, seed=i, gate=gate) for i, (_, t) in enumerate(made)]
    for p in players:
        p.start()
    try:
        t = api.post("/tournaments", {
            "name": "duplicate cup", "format": "round_robin", "entrants": [b for b, _ in made],
            # to 4: more than a kick can score (R6), so no game of round 1 is over before
            # its first move (a kicked jack ends a game to 3 at its deal, R22)
            "players": 2, "games_per_pairing": 2, "variants": {"target": 4}, "parallel": 4,
        }, ADMIN)
        assert t["settings"]["duplicate"] is True  # the default from 4 entrants
        first = t["rounds"][0]["games"][0]
        token = dict(made)[first["teams"][0]]  # a seat of that table may look

        def moving() -> bool:
            return api.get(f"/games/{first['game_id']}", token)["ply"] > 0

        wait_until(moving, 30, "round 1 to start")
        gate.clear()  # the bots stop: round 1 stays live
        live = [g for g in api.get(f"/tournaments/{t['id']}")["rounds"][0]["games"]
                if g["status"] == "live"]
        assert live
        assert api.call("GET", f"/games/{live[0]['game_id']}").status_code == 403  # embargoed

        pg = new_page(browser, service, PHONE, touch=True)
        try:
            pg.goto(f"/tournaments/{t['id']}")
            pg.locator("body[data-loaded=true]").wait_for()
            assert "round 1 of 3" in pg.inner_text("#t-info")  # counted from 1
            for g in live:
                row = pg.locator(f"#rounds tr[data-game-id='{g['game_id']}']")
                assert row.locator("[data-role=hidden-deal]").count() == 1
                assert row.locator("a[href^='/games/']").count() == 0  # nothing to open
                for bot in g["teams"]:
                    assert row.locator(f"a[href='/bots/{bot}']").count() == 1
            assert pg.locator("[data-role=hidden-note]").is_visible()
            for b, _ in made:  # every bot name a link, in the standings too
                assert pg.locator(f"#standings a[href='/bots/{b}']").count() == 1
            pg.locator("#standings details.explain summary").tap()
            terms = pg.eval_on_selector_all("#standings .explain dt",
                                            "els => els.map(e => e.textContent)")
            assert {"Score", "Matchpoints", "Ordinal", "Rating (μ ± σ)"} <= set(terms), terms
            clean(pg)
            assert not pg.problems, pg.problems

            # the table itself: a plain explanation, no table, no error
            pg.goto(f"/games/{live[0]['game_id']}")
            pg.locator("body[data-embargoed=true]").wait_for()
            assert pg.locator("#hidden-game").is_visible()
            assert "every table of the deal has finished" in pg.inner_text("#hidden-game")
            assert pg.locator("#felt").is_hidden() and pg.locator("#error").is_hidden()
            assert pg.get_attribute("#status", "data-status") == "embargoed"
            clean(pg)
            # ... and it opens by itself once the deal is played everywhere
            gate.set()
            pg.locator('#status[data-status="finished"]').wait_for(timeout=90_000)
            # the status is drawn with the view; the table's seats on the next frame
            pg.locator("#felt .seat").nth(1).wait_for(timeout=30_000)
            assert pg.locator("#felt .seat").count() == 2
            refused = [p for p in pg.problems if "403" in p]
            assert [p for p in pg.problems if p not in refused] == [], pg.problems
        finally:
            pg.context.close()
    finally:
        gate.set()
        for p in players:
            p.stop()


def test_a_team_of_one_bot_reads_as_english_and_names_are_links(browser, service) -> None:
    api = Api(service.base)
    (a, ta), (b, tb) = api.bot("heuristic-2"), api.bot("searcher")
    game = api.post("/games", {"players": 4, "seats": [a, b, a, b], "variants": {"target": 3}},
                    ta)
    players = [RandomBot(service.base, t, seed=i) for i, t in enumerate((ta, tb))]
    for p in players:
        p.start()
    try:
        final = wait_until(lambda: (v := api.get(f"/games/{game['id']}"))["status"] ==
                           "finished" and v, 120, "the game to finish", every=0.3)
    finally:
        for p in players:
            p.stop()
    pg = new_page(browser, service, DESKTOP)
    try:
        pg.goto(f"/games/{game['id']}")
        pg.locator("#game-over").wait_for()
        team = final["winner"]
        name = "heuristic-2" if team == 0 else "searcher"
        seats = "seats 0 and 2" if team == 0 else "seats 1 and 3"
        assert pg.inner_text("#game-over-h") == f"Team {'AB'[team]} won: {name} ({seats})"
        log = pg.eval_on_selector_all("#log li", "els => els.map(e => e.textContent)")
        assert any(line.startswith(f"Team {'AB'[team]} wins ") and line.endswith(
            f"({name} ({seats}))") for line in log), log
        assert not any("nobody scores nothing" in line for line in log), log
        # the lobby: the leaderboard's and the game lists' names are links
        pg.goto("/")
        pg.locator("body[data-loaded=true]").wait_for()
        row = pg.locator(f"#finished-games li[data-game-id='{game['id']}']")
        row.wait_for()
        assert row.locator(f"a[href='/bots/{a}']").count() == 1
        assert row.locator(f"a[href='/bots/{b}']").count() == 1
        assert not pg.problems, pg.problems
    finally:
        pg.context.close()


def test_a_persons_page_and_their_games_replays(browser, service) -> None:
    api = Api(service.base)
    made = api.post("/house/games", {"players": 2, "opponent": "random", "move_limit": 5,
                                     "variants": {"target": 2}})
    game_id, token, me = made["game"]["id"], made["player"]["token"], made["player"]["id"]
    pg = new_page(browser, service, PHONE, touch=True)
    try:
        pg.goto(f"/games/{game_id}/play#token={token}")  # seated: the game is "yours"
        pg.locator("body[data-seat='0']").wait_for()
        pg.locator('#status[data-status="finished"]').wait_for(timeout=180_000)  # the clock
        pg.goto("/")
        link = pg.locator(f"#my-games-list li[data-game-id='{game_id}'] a.replay")
        link.wait_for()
        assert link.get_attribute("href") == f"/games/{game_id}/replay"
        link.tap()
        pg.locator("#rp-pos[data-step]").wait_for()
        pg.goto(f"/bots/{me}")
        pg.locator("body[data-loaded=true]").wait_for()
        assert pg.inner_text("h1").startswith("Player guest")
        assert pg.title().startswith("Player guest")
        assert not pg.problems, pg.problems
    finally:
        pg.context.close()
