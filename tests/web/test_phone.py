"""The pages on a phone: no page wider than the screen at 360 and 390 px — 2 and
4 players, live, finished and replayed, and every other page — and on the table pages every
touch target at least 44 × 44 px (the person's fanned cards overlap: each one's visible part
is measured). The replay's controls never cover a seat. The figures measured are kept in
``artifacts/phone-measures.json``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.web.support import ADMIN, PHONE, SHOTS, Api, RandomBot, new_page, wait_until

EXPECTED_S = 230  # seconds, the whole module: the order workers take it in (tests/conftest.py)

WIDTHS = (360, 390)
MEASURES = SHOTS.parent / "phone-measures.json"
TARGET = 44

# Every control a finger may aim at, with the box it offers: a checkbox or a radio its
# label's; a card of the person's hand what is visible of it (the next card covers the
# rest); links inside a sentence are not targets of their own (WCAG 2.5.5's inline
# exception) and are left out, as is the skip link, which shows only when focused.
TARGETS = """() => {
  const out = [];
  const sel = 'a[href], button, input, select, summary, textarea, [role=button], ' +
    '[tabindex]:not([tabindex="-1"])';
  for (const e of document.querySelectorAll(sel)) {
    if (e.classList.contains('skip') || !e.getClientRects().length) continue;
    if (getComputedStyle(e).visibility === 'hidden') continue;
    let box = e;
    if (e.type === 'checkbox' || e.type === 'radio') box = e.closest('label') || e;
    const r = box.getBoundingClientRect();
    if (r.width < 2 && r.height < 2) continue;
    if (e.tagName === 'A') {
      const parent = e.parentElement;
      const own = e.textContent.trim();
      const around = parent.textContent.replace(own, '').trim();
      const flow = getComputedStyle(parent).display;
      if (around && (flow === 'block' || flow === 'inline') && parent.tagName === 'P') continue;
    }
    let w = r.width;
    const next = e.nextElementSibling;
    if (e.matches('.my-hand button.card') && next && next.matches('button.card')) {
      const n = next.getBoundingClientRect();
      if (Math.abs(n.top - r.top) < 20) w = Math.min(w, n.left - r.left);  // the same row
    }
    const cls = String(e.className.baseVal ?? e.className).split(' ')[0];
    const name = (e.getAttribute('aria-label') || e.textContent || '').trim().slice(0, 30);
    out.push({what: `${e.tagName.toLowerCase()}${e.id ? '#' + e.id : ''}.${cls} ${name}`,
              w: Math.round(w * 10) / 10, h: Math.round(r.height * 10) / 10});
  }
  return out;
}"""


def finished(api: Api, tokens: list[str], ids: list[str], players: int, seed: int) -> str:
    game = api.post("/games", {"players": players, "seats": ids[:players], "seed": seed,
                               "variants": {"target": 5}}, tokens[0])
    wait_until(lambda: api.get(f"/games/{game['id']}")["status"] == "finished", 180,
               "a game to finish", every=0.3)
    return game["id"]


@pytest.fixture(scope="module")
def pages(service: Any) -> Iterator[dict[str, str]]:
    """A page of each kind, at 2 and 4 players: live, finished, replayed with its review,
    played by a person; a finished duplicate tournament; the lobby, ladders, API, a bot."""
    api = Api(service.base)
    fast = [api.bot(n) for n in ("Calypso", "Chutney", "Kaiso", "Rapso")]
    slow = [api.bot(n) for n in ("Steelpan", "Tassa", "Parang", "Soca")]
    players = [RandomBot(service.base, t, seed=i) for i, (_, t) in enumerate(fast)]
    players += [RandomBot(service.base, t, seed=10 + i, delay=0.4) for i, (_, t) in enumerate(slow)]
    for p in players:
        p.start()
    try:
        ids, tokens = [b for b, _ in fast], [t for _, t in fast]
        done2, done4 = finished(api, tokens, ids, 2, 5), finished(api, tokens, ids, 4, 6)
        for gid in (done2, done4):  # reviewed: the replay with its analysis beside it
            assert api.call("POST", f"/games/{gid}/analysis").status_code in (200, 202)
        for gid in (done2, done4):
            wait_until(lambda gid=gid: api.call("GET", f"/games/{gid}/analysis").status_code
                       == 200, 180, "the review", every=0.5)
        live = {n: api.post("/games", {"players": n, "seats": [b for b, _ in slow][:n]},
                            slow[0][1])["id"] for n in (2, 4)}
        t = api.post("/tournaments", {
            "name": "phone cup", "format": "round_robin", "entrants": ids, "players": 2,
            "games_per_pairing": 2, "variants": {"target": 3}, "parallel": 4}, ADMIN)
        wait_until(lambda: api.get(f"/tournaments/{t['id']}")["status"] == "finished", 180,
                   "the tournament to finish", every=0.5)
        house = {n: api.post("/house/games", {"players": n, "opponent": "random",
                                              "variants": {"target": 7}}) for n in (2, 4)}
        yield {
            "lobby": "/",
            "play-2p": f"/games/{house[2]['game']['id']}/play#token={house[2]['player']['token']}",
            "play-4p": f"/games/{house[4]['game']['id']}/play#token={house[4]['player']['token']}",
            "live-2p": f"/games/{live[2]}",
            "live-4p": f"/games/{live[4]}",
            "finished-2p": f"/games/{done2}",
            "finished-4p": f"/games/{done4}",
            "replay-2p": f"/games/{done2}/replay?move=12",
            "replay-4p": f"/games/{done4}/replay?move=12",
            "tournament": f"/tournaments/{t['id']}",
            "ladders": "/ladders",
            "ladder": "/ladders/4p",
            "api": "/docs",
            "bot": f"/bots/{ids[0]}",
        }
    finally:
        for p in players:
            p.stop()


READY = {
    "lobby": "body[data-loaded=true]",
    "play-2p": "body[data-seat='0'] #felt .seat.mine",
    "play-4p": "body[data-seat='0'] #felt .seat.mine",
    "live-2p": "#felt .seat",
    "live-4p": "#felt .seat",
    "finished-2p": '#status[data-status="finished"]',
    "finished-4p": '#status[data-status="finished"]',
    "replay-2p": "#analysis[data-state=done]",
    "replay-4p": "#analysis[data-state=done]",
    "tournament": "body[data-loaded=true]",
    "ladders": "body[data-loaded=true]",
    "ladder": "body[data-loaded=true]",
    "api": "#schemas",
    "bot": "body[data-loaded=true]",
}
TABLE_PAGES = [n for n in READY if n.split("-")[0] in ("play", "live", "finished", "replay")]


def open_phone(browser: Any, service: Any, width: int, path: str, ready: str) -> Any:
    pg = new_page(browser, service, {"width": width, "height": PHONE["height"]}, touch=True)
    pg.goto(path)
    pg.locator(ready).first.wait_for(timeout=60_000)
    pg.wait_for_timeout(600)  # the first render and the chart settle
    return pg


def keep(key: str, value: Any) -> None:
    MEASURES.parent.mkdir(parents=True, exist_ok=True)
    kept = json.loads(MEASURES.read_text()) if MEASURES.exists() else {}
    kept[key] = value
    MEASURES.write_text(json.dumps(kept, indent=1, sort_keys=True))


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", sorted(READY))
def test_no_page_is_wider_than_the_screen(browser, service, pages, name, width) -> None:
    pg = open_phone(browser, service, width, pages[name], READY[name])
    try:
        wide = pg.evaluate("""(w) => [document.documentElement.scrollWidth,
            [...document.querySelectorAll('body *')].filter(e => {
                const r = e.getBoundingClientRect();
                return r.width && r.right > w + 0.5 && !e.closest('.table-wrap, .an-list');
            }).slice(0, 5).map(e => `${e.tagName}.${String(e.className.baseVal ?? e.className)}`
                + ` ${Math.round(e.getBoundingClientRect().right)}`)]""",
            width)
        keep(f"width/{name}/{width}", wide[0])
        assert wide[0] <= width, (name, width, wide)
        assert not wide[1], (name, width, wide)
        assert not pg.problems, pg.problems
    finally:
        pg.context.close()


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", [*TABLE_PAGES, "lobby", "tournament"])
def test_every_touch_target_is_at_least_44_px(browser, service, pages, name, width) -> None:
    pg = open_phone(browser, service, width, pages[name], READY[name])
    try:
        if name.startswith("play"):  # the person's hand, their turn: every card a button
            pg.wait_for_function("() => document.body.dataset.yourTurn === 'true'",
                                 timeout=60_000)
        if name.startswith("replay"):
            pg.locator("details.an-all summary").tap()  # "Every decision", open: its buttons
        targets = pg.evaluate(TARGETS)
        assert targets, name
        small = [t for t in targets if t["w"] < TARGET - 0.5 or t["h"] < TARGET - 0.5]
        narrowest = min(targets, key=lambda t: t["w"])
        lowest = min(targets, key=lambda t: t["h"])
        cards = [t["w"] for t in targets if ".card " in t["what"]]
        keep(f"targets/{name}/{width}", {"count": len(targets), "narrowest": narrowest,
                                         "lowest": lowest, "card_visible_w": min(cards or [0])})
        assert not small, (name, width, small[:8])
        if name.startswith("play"):
            cards = pg.locator("#felt .my-hand button.card").count()
            assert cards and all(t["w"] >= TARGET for t in targets if ".card " in t["what"])
        assert not pg.problems, pg.problems
    finally:
        pg.context.close()


@pytest.mark.parametrize("name", ["replay-2p", "replay-4p"])
@pytest.mark.parametrize("size", ["phone", "desktop"])
def test_the_replay_controls_cover_no_seat(browser, service, pages, name, size) -> None:
    viewport = PHONE if size == "phone" else {"width": 1366, "height": 768}
    pg = new_page(browser, service, viewport, touch=size == "phone")
    try:
        pg.goto(pages[name])
        pg.locator(READY[name]).wait_for(timeout=60_000)
        seats = pg.locator("#felt .seat")
        for i in range(seats.count()):
            seats.nth(i).evaluate("e => e.scrollIntoView({block: 'end'})")
            pg.wait_for_timeout(100)
            a = seats.nth(i).bounding_box()
            b = pg.locator("#replay-bar").bounding_box()
            dx = min(a["x"] + a["width"], b["x"] + b["width"]) - max(a["x"], b["x"])
            dy = min(a["y"] + a["height"], b["y"] + b["height"]) - max(a["y"], b["y"])
            assert dx <= 0 or dy <= 0, (name, size, i, a, b)
        heights = {pg.locator(f"#{b}").bounding_box()["height"]
                   for b in ("rp-start", "rp-end", "rp-next-hand")}
        assert len(heights) == 1, heights  # "▶|" does not wrap
        assert not pg.problems, pg.problems
    finally:
        pg.context.close()
