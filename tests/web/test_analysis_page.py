"""The replay page's analysis (every decision marked by colour and symbol
with its name for screen readers, the best alternative and the loss beside it, a chart of
each team's chance to win whose points jump to their decision) and the bot page's average
loss by decision kind. Chromium at desktop and phone sizes, axe-core clean. The analysis
is computed by the service's own analysis worker (``gunicorn_conf.when_ready``)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.web.support import DESKTOP, PHONE, Api, RandomBot, new_page, screenshot, wait_until
from tests.web.test_a11y import axe_violations

EXPECTED_S = 45  # seconds, the whole module: the order workers take it in (tests/conftest.py)

SIZES = {"desktop": DESKTOP, "phone": PHONE}


@contextmanager
def playing(service: Any, made: list[tuple[str, str]], seed: int) -> Iterator[None]:
    """The bots ``made`` (id, token) playing at random while the block runs."""
    players = [RandomBot(service.base, t, seed=seed + i) for i, (_, t) in enumerate(made)]
    for p in players:
        p.start()
    try:
        yield
    finally:
        for p in players:
            p.stop()


def finished(api: Api, made: list[tuple[str, str]], seed: int) -> str:
    """A 2-player game to 3 points of the bots ``made``, played to its end: its id."""
    game = api.post("/games", {"players": 2, "seats": [b for b, _ in made],
                               "variants": {"target": 3}, "seed": seed}, made[0][1])
    gid = game["id"]
    wait_until(lambda: api.get(f"/games/{gid}")["status"] == "finished", 120,
               "the game to finish", every=0.3)
    return gid


@pytest.fixture(scope="module")
def analysed(service) -> Iterator[dict[str, Any]]:
    """A finished 2-player game to 3 points, analysed, with some decisions (a game may
    end on a kick before anyone decides anything: then the next seed)."""
    api = Api(service.base)
    made = [api.bot(n) for n in ("Calypso", "Chutney")]
    with playing(service, made, 10):
        for seed in range(1, 20):
            gid = finished(api, made, seed)
            first = api.call("GET", f"/games/{gid}/analysis", token=made[0][1])  # a player asks
            assert first.status_code in (200, 202), first.text
            # the service's own worker computes it (generous: the machine is shared)
            result = wait_until(
                lambda gid=gid: (r := api.call("GET", f"/games/{gid}/analysis")
                                 ).status_code == 200 and r.json(),
                300, "the analysis", every=0.5)
            if len(result["decisions"]) >= 6:
                break
        else:
            raise AssertionError("no game with six decisions")
    # the bots' averages are added right after the result is stored
    wait_until(lambda: api.get(f"/bots/{made[0][0]}/analysis")["games"] >= 1, 30,
               "the bot's averages")
    yield {"game": gid, "analysis": result, "bot": made[0][0]}


@pytest.mark.parametrize("size", sorted(SIZES))
def test_the_replay_shows_every_decision_marked_and_a_chart_to_jump_with(
        browser, service, analysed, size) -> None:
    pg = new_page(browser, service, SIZES[size])
    analysis = analysed["analysis"]
    try:
        pg.goto(f"/games/{analysed['game']}/replay")
        pg.locator("#analysis[data-state=done]").wait_for(timeout=60_000)
        pg.locator("details.an-all summary").click()  # "Every decision", open
        # every decision is a row; a marked one shows its symbol and its name as text
        rows = pg.locator("#an-list tbody tr")
        assert rows.count() == len(analysis["decisions"])
        for i, d in enumerate(analysis["decisions"]):
            assert rows.nth(i).get_attribute("data-move") == str(d["ply"] + 1)  # one numbering
            if d["mark"]:
                mark = rows.nth(i).locator(f".mark-{d['mark']}")
                assert mark.locator(".sr-only").inner_text() == d["mark"]
                symbol = {"inaccuracy": "?!", "mistake": "?", "blunder": "??"}[d["mark"]]
                assert mark.locator("[aria-hidden=true]").inner_text() == symbol
        # the chart: a point per decision, each at its move; one target to choose with
        dots = pg.locator("#an-chart circle.an-dot")
        assert dots.count() == len(analysis["decisions"])
        target = analysis["decisions"][len(analysis["decisions"]) // 2]
        move = target["ply"] + 1
        pg.locator("#an-chart").scroll_into_view_if_needed()
        dot = pg.locator(f"#an-chart circle[data-move='{move}']").bounding_box()
        pg.mouse.click(dot["x"] + dot["width"] / 2, dot["y"] + dot["height"] / 2)
        # choosing a point goes to its decision: the table just after it, explained
        pg.wait_for_function(
            f"() => document.getElementById('rp-pos').dataset.move === '{move}'")
        current = pg.inner_text("#an-current")
        assert f"Move {move}:" in current
        if target["best"] != target["chosen"]:
            assert "Better:" in current
        time.sleep(0.3)
        screenshot(pg, f"replay-analysis-{size}", full_page=True)
        bad = axe_violations(pg)
        assert not bad, "\n".join(json.dumps(v) for v in bad)
        assert not pg.problems, pg.problems
    finally:
        pg.context.close()


@pytest.mark.parametrize("size", sorted(SIZES))
def test_the_bot_page_shows_its_average_loss_by_decision_kind(browser, service, analysed,
                                                              size) -> None:
    pg = new_page(browser, service, SIZES[size])
    try:
        pg.goto(f"/bots/{analysed['bot']}")
        pg.locator("body[data-loaded=true]").wait_for()
        summary = pg.inner_text("[data-role=analysis-summary]")
        assert "analysed game" in summary
        seat = analysed["analysis"]["seats"]["0"]
        words = {"stand_or_beg": "Stand or beg", "give_one_or_run": "Give one or run the pack",
                 "play": "Play a card", "lead": "Lead a card", "follow": "Follow to a trick"}
        for kind in seat["by_kind"]:  # in the site's own words
            assert pg.locator("#analysis tbody th", has_text=words[kind]).count() >= 1
        assert not re.search(r"\b1 (inaccuracies|mistakes|blunders)\b", summary), summary
        screenshot(pg, f"bot-analysis-{size}", full_page=True)
        bad = axe_violations(pg)
        assert not bad, "\n".join(json.dumps(v) for v in bad)
        assert not pg.problems, pg.problems
    finally:
        pg.context.close()


def test_a_game_nobody_asked_about_offers_review_this_game(browser, service) -> None:
    """The replay of a finished game that nobody has asked to analyse offers "Review this
    game" (opening the replay queues nothing); pressed, with no token at all, it asks for
    the analysis (``POST``), shows the progress and fills the review in."""
    api = Api(service.base)
    made = [api.bot(n) for n in ("Soca", "Parang")]
    with playing(service, made, 30):
        gid = finished(api, made, 4)
    refused = api.call("GET", f"/games/{gid}/analysis")
    assert refused.status_code == 403, refused.text
    pg = new_page(browser, service, DESKTOP)
    try:
        pg.goto(f"/games/{gid}/replay")
        pg.locator("#analysis[data-state=unasked]").wait_for(timeout=60_000)
        assert pg.inner_text("#an-status") == "This game has not been reviewed yet."
        assert pg.get_attribute("#an-status", "aria-live") == "polite"  # read out, too
        button = pg.get_by_role("button", name="Review this game")
        assert button.is_visible()
        bad = axe_violations(pg)
        assert not bad, "\n".join(json.dumps(v) for v in bad)
        assert api.call("GET", f"/games/{gid}/analysis").status_code == 403  # still nobody's
        button.click()
        pg.locator("#analysis[data-state=done]").wait_for(timeout=120_000)
        assert pg.locator("#an-list tbody tr").count() == len(
            api.get(f"/games/{gid}/analysis")["decisions"])
        assert not pg.problems, pg.problems
    finally:
        pg.context.close()
