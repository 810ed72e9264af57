"""The table reads at a glance: real service, real Redis,
bots acting over HTTP (here: the tests themselves, to reach exact positions), Chromium.

What each page shows is checked against the public API's views.
"""

from __future__ import annotations

import re
import time
from typing import Any

from tests.web.support import screenshot, wait_until


def boxes(page: Any, selector: str) -> list[dict[str, float]]:
    return page.eval_on_selector_all(selector, """els => els.map(e => {
        const r = e.getBoundingClientRect();
        return {x: r.x, y: r.y, w: r.width, h: r.height};
    })""")


def overlap(a: dict[str, float], b: dict[str, float]) -> float:
    dx = min(a["x"] + a["w"], b["x"] + b["w"]) - max(a["x"], b["x"])
    dy = min(a["y"] + a["h"], b["y"] + b["h"]) - max(a["y"], b["y"])
    return max(0.0, dx) * max(0.0, dy)


def act(api: Any, game_id: str, tokens: list[str], action: str | None = None) -> dict:
    """The seat in turn acts (``action``, else its first legal action); returns the view."""
    turn = api.get(f"/games/{game_id}")["turn"]
    view = api.get(f"/games/{game_id}?seat={turn}", tokens[turn])
    chosen = action or view["legal_actions"][0]
    return api.post(f"/games/{game_id}/actions",
                    {"action": chosen, "version": view["version"], "seat": turn},
                    tokens[turn], status=200)


def two_bots(api: Any, seed: int, names: tuple[str, str] = ("Kaiso", "Chutney")) -> tuple:
    (a, ta), (b, tb) = api.bot(names[0]), api.bot(names[1])
    g = api.post("/games", {"players": 2, "seed": seed, "seats": [a, b]}, ta)
    return g["id"], [ta, tb]


# --- 5, 6, 10: kicks spread with their points; decisions on the table; one log line each --


def test_kicks_are_spread_with_their_points_and_decisions_show_on_the_table(page, api) -> None:
    # Seed 49: the beggar begs, the dealer runs the pack: six kicks (R9), among them the
    # Ace (+1) and the Jack (+3) of hearts (R6).
    game_id, tokens = two_bots(api, 49)
    act(api, game_id, tokens, "beg")
    act(api, game_id, tokens, "run_pack")
    view = api.get(f"/games/{game_id}")
    kicks = view["kicks"]
    assert len(kicks) >= 3 and any(k["points"] == 3 for k in kicks), kicks

    page.goto(f"/games/{game_id}")
    page.locator("#kicks .kick").first.wait_for()
    assert page.locator("#kicks .kick").count() == len(kicks)
    cards = boxes(page, "#kicks .kick > .card")
    badges = boxes(page, "#kicks .kick .pts")
    assert len(badges) == sum(1 for k in kicks if k["points"])
    for i, a in enumerate(cards):
        for b in cards[i + 1:]:
            assert overlap(a, b) == 0, (a, b)
        for badge in badges:
            assert overlap(a, badge) == 0, (a, badge)
    jack = page.locator('#kicks .kick[data-kick="JH"] .pts')
    assert jack.is_visible() and jack.inner_text().startswith("+3")

    # The beggar's and the dealer's decisions, on their seats (R8, R9).
    beggar, dealer = view["beggar"], view["dealer"]
    chip = page.locator(f'#felt .seat[data-seat="{beggar}"] [data-role=beggar]')
    assert chip.get_attribute("data-decision") == "beg" and chip.inner_text().lower() == "begged"
    ran = page.locator(f'#felt .seat[data-seat="{dealer}"] [data-role=decision]')
    assert ran.inner_text().lower() == "ran the pack"
    # 10: each kick is one line of the log, its points included.
    log = page.eval_on_selector_all("#log li", "els => els.map(e => e.textContent)")
    assert sum("Jack of hearts" in line for line in log) == 1, log
    screenshot(page, "table-kicks", full_page=False)

    # A beggar who stood is shown as having stood, not as "Beggar" still (R8).
    game_id, tokens = two_bots(api, 7)
    act(api, game_id, tokens, "stand")
    view = api.get(f"/games/{game_id}")
    page.goto(f"/games/{game_id}")
    chip = page.locator(f'#felt .seat[data-seat="{view["beggar"]}"] [data-role=beggar]')
    chip.wait_for()
    assert chip.get_attribute("data-decision") == "stand" and chip.inner_text().lower() == "stood"


# --- 7, 8, 12: named seats, last trick by player, thinking time, read-out trick ----------


def test_partners_sharing_a_name_are_told_apart_and_the_clock_counts_from_the_last_move(
        page, api) -> None:
    (a, ta), (b, tb) = api.bot("search"), api.bot("heuristic")
    g = api.post("/games", {"players": 4, "seed": 11, "seats": [a, b, a, b]}, ta)
    game_id, tokens = g["id"], [ta, tb, ta, tb]
    act(api, game_id, tokens, "stand")
    for _ in range(5):  # a whole trick (R16) and the first card of the next
        act(api, game_id, tokens)
    view = api.get(f"/games/{game_id}")
    assert len(view["tricks"]) == 1 and len(view["trick"]["cards"]) == 1, view
    time.sleep(4)  # the seat in turn has been thinking since the last move

    page.goto(f"/games/{game_id}")
    turn = view["turn"]
    page.locator(f'#turn-info[data-turn="{turn}"]').wait_for()  # the backlog is in
    page.locator("#last-trick figure").first.wait_for()
    name = "search" if turn % 2 == 0 else "heuristic"
    info = page.inner_text("#turn-info")
    assert info.startswith(f"{name} (seat {turn}) to play"), info
    thinking = int(re.search(r"thinking (\d+) s", info).group(1))
    assert thinking >= 4, info
    # The last trick: each card with the seat that played it.
    done = view["tricks"][0]
    shown = page.eval_on_selector_all("#last-trick figure", """els => els.map(e =>
        [+e.dataset.seat, e.querySelector('[data-card]').dataset.card,
         e.querySelector('figcaption').textContent])""")
    expected = [[pc["seat"], pc["card"], f"{'search' if pc['seat'] % 2 == 0 else 'heuristic'}"
                 f" (seat {pc['seat']})"] for pc in done["cards"]]
    assert shown == expected, (shown, done)
    assert f"won by {'search' if done['winner'] % 2 == 0 else 'heuristic'} (seat " \
        in page.inner_text("#last-trick")
    # 12: the trick on the table is read with its player (accessibility tree).
    lead = view["trick"]["cards"][0]
    tree = page.locator("#trick").aria_snapshot()
    assert f"(seat {lead['seat']}):" in tree and lead["card"] not in tree, tree


# --- 4: score pop-ups off the seats, and never about a finished hand ----------------------


def test_score_pop_ups_stay_off_the_seats_and_belong_to_the_hand_shown(page, api, bots) -> None:
    game_id, tokens = two_bots(api, 3, ("Soca", "Parang"))
    for t in tokens:
        bots(t, delay=0.03)
    page.goto(f"/games/{game_id}")
    page.locator("#felt .seat").first.wait_for()
    seen = 0
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and seen < 6:
        state = page.evaluate("""() => {
            const t = document.getElementById('toast');
            if (!t.classList.contains('show')) return null;
            const r = t.getBoundingClientRect();
            return {box: {x: r.x, y: r.y, w: r.width, h: r.height}, hand: t.dataset.hand,
                    shown: String(window.__arena.model.hand), over: window.__arena.model.over,
                    seats: [...document.querySelectorAll('#felt .seat')].map(s => {
                        const q = s.getBoundingClientRect();
                        return {x: q.x, y: q.y, w: q.width, h: q.height}; })};
        }""")
        if state and not state["over"]:
            seen += 1
            for seat in state["seats"]:
                assert overlap(state["box"], seat) == 0, state
            assert state["hand"] == state["shown"], state
            if seen == 1:
                screenshot(page, "table-toast", full_page=False)
        time.sleep(0.05)
    assert seen, "no score pop-up was seen"


# --- 12: a person hears each card and their turn; focus stays in the hand ------------------


def test_the_live_region_reads_every_card_and_the_turn_and_focus_stays_in_the_hand(
        page, api) -> None:
    made = api.post("/house/games", {"players": 2, "opponent": "random",
                                     "variants": {"target": 7}})
    game_id, token = made["game"]["id"], made["player"]["token"]
    page.goto(f"/games/{game_id}/play#token={token}")
    page.locator("body[data-seat='0']").wait_for()
    said: list[str] = []
    page.evaluate("""() => { window.__heard = [];
        new MutationObserver(ms => ms.forEach(m => m.addedNodes.forEach(n =>
            window.__heard.push(n.textContent)))).observe(
            document.getElementById('announce'), {childList: true}); }""")

    def heard() -> list[str]:
        return page.evaluate("window.__heard.splice(0)")

    for _ in range(40):
        page.wait_for_function("() => document.body.dataset.status === 'finished' || "
                               "document.body.dataset.yourTurn === 'true'", timeout=30_000)
        if page.get_attribute("body", "data-status") == "finished":
            break
        said += heard()
        version = page.get_attribute("body", "data-version")
        button = page.locator("#felt .seat.mine button:not([disabled])").first
        button.focus()
        page.keyboard.press("Enter")
        page.wait_for_function(f"() => document.body.dataset.version !== '{version}' || "
                               "document.body.dataset.status === 'finished'")
        # back to the hand; or, the game over, on the result
        wait_until(lambda: page.evaluate(
            "() => !!document.activeElement.closest('#felt .seat.mine') || "
            "(document.body.dataset.status === 'finished' && "
            "document.activeElement.id === 'game-over')"), 5,
            "the focus to come back to the hand")
        said += heard()
    said += heard()
    assert any(s.startswith("Your turn") for s in said), said
    assert any(re.match(r"house-random plays \w+ of \w+", s) for s in said), said
    assert any(re.match(r"guest plays \w+ of \w+", s) for s in said), said
