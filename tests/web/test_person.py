"""A person at the table (issue 15): sitting down in one click against the house bots,
the table before a seat is taken, the token kept and resumed, with a real service, real
Redis, the house bots playing over HTTP and headless Chromium.

Each test checks the page against the public API (views, records), not the page's own
idea of the game.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.web.support import PHONE, screenshot, wait_until

SIZES = {"desktop": {"width": 1280, "height": 800}, "phone": PHONE}


def new_page(browser: Any, service: Any, viewport: dict[str, int]) -> Any:
    context = browser.new_context(viewport=viewport, base_url=service.base)
    pg = context.new_page()
    pg.set_default_timeout(20_000)
    problems: list[str] = []
    pg.on("pageerror", lambda exc: problems.append(f"page error: {exc}"))
    pg.on("console", lambda m: problems.append(f"console {m.type}: {m.text}")
          if m.type == "error" and "409" not in m.text and "422" not in m.text else None)
    pg.problems = problems  # type: ignore[attr-defined]
    return pg


@pytest.fixture(params=sorted(SIZES))
def sized_page(request, browser, service) -> Iterator[Any]:
    pg = new_page(browser, service, SIZES[request.param])
    pg.size_name = request.param  # type: ignore[attr-defined]
    yield pg
    problems = pg.problems
    pg.context.close()
    assert not problems, problems


def play_from_lobby(pg: Any, players: int = 2, opponent: str = "random", target: str = "7",
                    keep: bool = False) -> str:
    """Lobby → "play against a bot" → the play page, seated; returns the game id."""
    pg.goto("/")
    form = pg.locator("#house-form")
    form.get_by_label(f"{players} players").check()
    form.get_by_label("Opponents").select_option(opponent)
    form.get_by_label("Play to").select_option(target)
    if keep:
        form.get_by_label("Remember me in this browser", exact=False).check()
    form.get_by_role("button", name="Play against a bot").click()
    pg.wait_for_url("**/games/*/play")
    pg.locator("body[data-seat='0']").wait_for()
    return pg.url.rstrip("/").split("/")[-2]


def play_to_the_end(pg: Any, api: Any, game_id: str, token: str, shots: str = "") -> int:
    """Click a legal card or decision on each of the person's turns until the game ends;
    every time the enabled controls must be exactly the API's legal actions."""
    moves = 0
    for _ in range(400):
        pg.wait_for_function(
            "() => document.body.dataset.status === 'finished' || "
            "document.body.dataset.yourTurn === 'true'", timeout=60_000)
        if pg.get_attribute("body", "data-status") == "finished":
            break
        view = api.get(f"/games/{game_id}", token)
        if not view["your_turn"]:
            continue
        version = str(view["version"])
        if pg.get_attribute("body", "data-version") != version:
            continue
        enabled = pg.eval_on_selector_all(
            "[data-role=hand][data-seat='0'] button.card:not([disabled]), "
            ".decisions button:not([disabled])",
            "els => els.map(e => e.dataset.card || e.dataset.action)")
        if pg.get_attribute("body", "data-your-turn") != "true":
            continue
        assert sorted(enabled) == sorted(view["legal_actions"]), (enabled, view)
        choice = enabled[0]
        if shots and moves == 2:
            screenshot(pg, shots, full_page=False)
        sel = (f'button.card[data-card="{choice}"]' if len(choice) == 2
               else f'.decisions button[data-action="{choice}"]')
        pg.click(sel)
        moves += 1
        pg.wait_for_function(
            f"() => document.body.dataset.version !== '{version}' || "
            "document.body.dataset.status === 'finished'", timeout=15_000)
    return moves


# --- 1. one click against a house bot ------------------------------------------------------


def test_a_person_plays_a_house_bot_from_the_lobby_to_the_end(sized_page, api) -> None:
    pg = sized_page
    game_id = play_from_lobby(pg)
    screenshot(pg, f"play-start-{pg.size_name}")
    token = pg.input_value("#new-token-value")
    me = api.get("/bots/me", token)
    game = api.get(f"/games/{game_id}")
    assert game["seats"][0]["bot_id"] == me["id"]
    assert game["seats"][1]["bot_name"] == "house-random"
    assert game["variants"]["target"] == 7 and game["move_limit"]
    moves = play_to_the_end(pg, api, game_id, token, shots=f"play-{pg.size_name}")
    final = api.get(f"/games/{game_id}")
    assert final["status"] == "finished", final
    assert moves >= 3
    pg.locator('#status[data-status="finished"]').wait_for()
    screenshot(pg, f"play-finished-{pg.size_name}")


def test_four_players_seat_the_person_with_a_house_partner(page, api) -> None:
    pg = page
    pg.goto("/")
    assert pg.locator("#hf-partner-field").is_hidden()
    pg.locator("#house-form").get_by_label("4 players").check()
    pg.locator("#house-form").get_by_label("Your partner").select_option("heuristic")
    pg.locator("#house-form").get_by_label("Opponents").select_option("random")
    pg.get_by_role("button", name="Play against a bot").click()
    pg.wait_for_url("**/games/*/play")
    pg.locator("body[data-seat='0']").wait_for()
    game_id = pg.url.split("/")[-2]
    seats = [s["bot_name"] for s in api.get(f"/games/{game_id}")["seats"]]
    assert seats[1:] == ["house-random", "house-heuristic-partner", "house-random"], seats
