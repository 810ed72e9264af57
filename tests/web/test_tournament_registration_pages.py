"""Open tournaments in the browser: the lobby lists the tournaments taking entries with a
countdown, their conditions and their entrants; the tournament's page shows its
registration before the start; every bot name there links to its bot page."""

from __future__ import annotations

import time

from tests.web.support import screenshot


def test_the_lobby_and_the_tournament_page_show_a_registration(page, api):
    _org, org_token = api.bot("Organizer Olive", new_owner=True)
    entrant, entrant_token = api.bot("Early Eddie", new_owner=True)
    r = api.call("POST", "/tournaments", org_token, json={
        "name": "Friday Swiss", "format": "swiss", "registration": "open", "rounds": 3,
        "starts_at": time.time() + 3600, "max_entrants": 16, "min_entrants": 4,
        "conditions": {"validated": False}})
    assert r.status_code == 201, r.text
    tid = r.json()["id"]
    assert api.call("POST", f"/tournaments/{tid}/entrants", entrant_token,
                    json={}).status_code == 201

    page.goto("/")
    item = page.locator(f'#registering li[data-tournament-id="{tid}"]')
    item.wait_for()
    assert "Friday Swiss" in item.text_content()
    assert item.locator(".countdown").text_content().startswith("starts in ")
    assert "one bot per owner" in item.text_content() and "4–16 entrants" in item.text_content()
    assert item.locator(f'a[href="/bots/{entrant}"]').text_content() == "Early Eddie"
    screenshot(page, "lobby-registering")

    page.goto(f"/tournaments/{tid}")
    page.locator("body[data-loaded=true]").wait_for()
    assert page.locator("#t-status").text_content() == "registering"
    panel = page.locator("#registration-panel")
    assert panel.is_visible()
    assert page.locator("#t-countdown").text_content().startswith("in ")
    assert panel.locator(f'a[href="/bots/{entrant}"]').text_content() == "Early Eddie"
    assert f"POST /tournaments/{tid}/entrants" in panel.text_content()
    screenshot(page, "tournament-registering")
    page.locator(f'#registration a[href="/bots/{entrant}"]').click()
    page.wait_for_url(f"**/bots/{entrant}")
