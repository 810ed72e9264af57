"""A person at the table: sitting down in one click against the house bots,
the table before a seat is taken, the token kept and resumed, with a real service, real
Redis, the house bots playing over HTTP and headless Chromium.

Each test checks the page against the public API (views, records), not the page's own
idea of the game.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.web.support import PHONE, new_page, screenshot, wait_until

EXPECTED_S = 80  # seconds, the whole module: the order workers take it in (tests/conftest.py)

DESKTOP_800 = {"width": 1280, "height": 800}
SIZES = {"desktop": DESKTOP_800, "phone": PHONE}


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

    # 9. The end says who won from the person's side, the last hand's items, why it
    # ended (R22: the first side to the target wins at once), and what next.
    over = pg.locator("#game-over")
    over.wait_for()
    mine, theirs = final["scores"]
    assert pg.inner_text("#game-over-h") == ("You won" if final["winner"] == 0 else "You lost")
    assert f"You {mine} – {theirs} house-random" in pg.inner_text("#game-over-score")
    rec = api.get(f"/games/{game_id}/record")
    shown = pg.eval_on_selector_all("#game-over-items [data-item]", "els => els.map(e => "
                                    "[e.dataset.item, e.dataset.team, +e.dataset.points])")
    assert shown == [[i["item"], str(i["team"] if i["team"] is not None else ""), i["points"]]
                     for i in rec["hands"][-1]["items"]]
    last_item = [i for i in rec["hands"][-1]["items"] if i["team"] == final["winner"]][-1]
    why = pg.inner_text("#game-over-why")
    assert "reached 7 with" in why and f"in hand {len(rec['hands'])}" in why, why
    assert pg.get_by_role("link", name="Back to the lobby").get_attribute("href") == "/"
    assert last_item["item"]
    screenshot(pg, f"play-finished-{pg.size_name}")
    pg.get_by_role("button", name="Rematch").click()
    pg.wait_for_url(lambda url: "/play" in url and game_id not in url)
    pg.locator("body[data-seat='0']").wait_for()
    again = api.get(f"/games/{pg.url.split('/')[-2]}")
    assert again["seats"][0]["bot_id"] == me["id"] and again["variants"]["target"] == 7


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


# --- 2. the play page before a seat is taken -------------------------------------------


def shown_scores(pg: Any) -> list[int]:
    return [int(x) for x in pg.eval_on_selector_all(
        "#scoreboard [data-role=score]", "els => els.map(e => e.textContent)")]


def test_the_play_page_before_a_seat_is_taken_draws_the_live_table(page, api, bots) -> None:
    # Seed 3: the first kick scores (R6: a Six, 2–0) while the game waits for a player.
    _host, host_token = api.bot("host")
    waiting = api.post("/games", {"players": 2, "seed": 3}, host_token)
    assert waiting["status"] == "waiting" and waiting["scores"] == [2, 0]
    page.goto(f"/games/{waiting['id']}/play")
    page.locator("#felt .seat").first.wait_for()
    assert page.locator("#felt .seat").count() == 2
    assert page.locator("#kicks [data-card]").count() == 1
    wait_until(lambda: shown_scores(page) == [2, 0], 10, "the waiting game's score")
    assert page.locator("#token-form").is_visible()  # the form beside the table

    # A finished game: its final score and both hands, not an empty 0–0 table.
    a_id, a_token = api.bot("left")
    b_id, b_token = api.bot("right")
    done = api.post("/games", {"players": 2, "seats": [a_id, b_id],
                               "variants": {"target": 5}}, a_token)
    bots(a_token)
    bots(b_token)
    final = wait_until(lambda: (v := api.get(f"/games/{done['id']}"))["status"] == "finished"
                       and v, 120, "the game to finish", every=0.3)
    page.goto(f"/games/{done['id']}/play")
    page.locator('#status[data-status="finished"]').wait_for()
    wait_until(lambda: shown_scores(page) == final["scores"], 10, "the final score")
    assert page.locator("#felt .seat").count() == 2
    screenshot(page, "play-before-seat")


# --- 3. the person's token: shown once, kept with consent, resumed ------------------------


def test_the_token_is_shown_once_and_a_remembered_player_resumes_from_the_lobby(
        browser, service, api) -> None:
    pg = new_page(browser, service, DESKTOP_800)
    game_id = play_from_lobby(pg, keep=True)
    box = pg.locator("#new-token")
    assert box.is_visible()
    token = pg.input_value("#new-token-value")
    assert pg.get_attribute("#new-token-value", "type") == "text"  # copyable, not hidden
    assert api.get("/bots/me", token)["name"] == "guest"
    link = pg.input_value("#resume-link")
    assert link.endswith(f"/games/{game_id}/play#token={token}")
    assert pg.get_by_label("Player token", exact=True).input_value() == token
    assert pg.locator("label[for=token]").inner_text() == "Your player token"
    kept = pg.evaluate("JSON.parse(localStorage.getItem('allfours.player'))")
    assert kept["token"] == token
    screenshot(pg, "play-token")

    # Shown once: a reload keeps the seat but not the token box.
    pg.reload()
    pg.locator("body[data-seat='0']").wait_for()
    assert pg.locator("#new-token").is_hidden()

    # The tab closes; another tab of this browser finds the game in the lobby and resumes.
    context = pg.context
    pg.close()
    again = context.new_page()
    again.goto("/")
    resume = again.locator(f'#my-games-list li[data-game-id="{game_id}"] a.resume')
    resume.wait_for()
    resume.click()
    again.wait_for_url(f"**/games/{game_id}/play")
    again.locator("body[data-seat='0']").wait_for()
    context.close()

    # The resume link works in a browser that never saw the token.
    other = new_page(browser, service, DESKTOP_800)
    other.goto(link)
    other.locator("body[data-seat='0']").wait_for()
    assert "token" not in other.url  # not left in the address bar or history
    other.context.close()


def test_without_consent_nothing_is_kept_beyond_the_tab(page, api) -> None:
    play_from_lobby(page, keep=False)
    assert page.evaluate("localStorage.getItem('allfours.player')") is None
    assert page.evaluate("sessionStorage.getItem('allfours.token')")


def test_an_abandoned_game_against_the_house_ends_by_its_move_limit(page, api) -> None:
    made = api.post("/house/games", {"players": 2, "opponent": "random", "move_limit": 5,
                                     "variants": {"target": 2}})
    game_id = made["game"]["id"]
    assert made["game"]["move_limit"] == 5
    page.goto("/")
    live = page.locator(f'#live-games li[data-game-id="{game_id}"]')
    # Nobody ever acts for the person: the service's default actions finish the game.
    seen: list[tuple] = []

    def ended() -> Any:
        v = api.get(f"/games/{game_id}")
        seen.append((round(time.time()), v["version"], v["turn"], v["time_left"]))
        return v["status"] == "finished" and v

    try:
        final = wait_until(ended, 240, "the abandoned game to end", every=1)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; (time, version, turn, time_left): {seen[::10]}") from None
    assert max(final["scores"]) >= 2
    wait_until(lambda: live.count() == 0, 10, "the game to leave Live games")


def test_a_game_nobody_moves_in_leaves_live_games(page, api) -> None:
    """The service under test runs with ARENA_LOBBY_IDLE_S=8 (support.Service)."""
    (a, ta), (b, _tb) = api.bot("gone"), api.bot("away")
    game = api.post("/games", {"players": 2, "seats": [a, b]}, ta)
    assert game["status"] == "active" and game["move_limit"] is None
    page.goto("/")
    row = page.locator(f'#live-games li[data-game-id="{game["id"]}"]')
    row.wait_for()
    wait_until(lambda: row.count() == 0, 20, "the idle game to leave Live games", every=0.5)
    assert "idle" in page.inner_text("#live-idle")
    assert api.get(f"/games/{game['id']}")["status"] == "active"  # only the lobby hides it
