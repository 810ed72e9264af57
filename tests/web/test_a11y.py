"""Every page at desktop and phone sizes: axe-core (npm ``axe-core``, injected by
Playwright) finds no serious or critical violation, and a screenshot of each is kept in
artifacts/screenshots/ (``{page}-{size}.png``).

axe-core comes from ``tests/web/package.json`` (``npm ci`` there; .ci/run does it).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import missing
from tests.web.support import ADMIN, PHONE, new_page, screenshot, wait_until
from tests.web.test_person import DESKTOP_800

EXPECTED_S = 180  # seconds, the whole module: the order workers take it in (tests/conftest.py)

AXE = Path(__file__).parent / "node_modules" / "axe-core" / "axe.min.js"
SIZES = {"desktop": DESKTOP_800, "phone": PHONE}


def axe_violations(pg: Any) -> list[dict[str, Any]]:
    """Serious and critical axe-core violations on the page as it is now."""
    if not AXE.exists() and shutil.which("npm"):
        # the README's test command alone must run every check: install it as .ci/run does
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--silent"],
                       cwd=AXE.parents[2], check=False, timeout=300)
    if not AXE.exists():
        missing(f"no axe-core at {AXE}: cd tests/web && npm ci")
    # As the page's own code would be, were it allowed: evaluated through the DevTools
    # protocol, so the page's strict Content-Security-Policy stays on.
    pg.evaluate(AXE.read_text() + "\n;undefined")
    result = pg.evaluate("""async () => {
        const r = await axe.run(document, {resultTypes: ['violations']});
        return r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
            nodes: v.nodes.slice(0, 5).map(n => n.target.join(' '))}));
    }""")
    return [v for v in result if v["impact"] in ("serious", "critical")]


@pytest.fixture(scope="module")
def pages(service) -> Iterator[dict[str, str]]:
    """One of each page: a live game, a finished one, a tournament, a knockout, a seated
    player."""
    from tests.web.support import Api, RandomBot

    api = Api(service.base)
    made = [api.bot(n) for n in ("Steelpan", "Soca", "Parang", "Tassa")]
    players = [RandomBot(service.base, t, seed=i) for i, (_, t) in enumerate(made)]
    for p in players:
        p.start()
    live = api.post("/games", {"players": 4, "seats": [b for b, _ in made]}, made[0][1])
    t = api.post("/tournaments", {
        "name": "axe cup", "format": "round_robin", "entrants": [b for b, _ in made[:3]],
        "players": 2, "games_per_pairing": 2, "variants": {"target": 3},
        "parallel": 3,
    }, ADMIN)
    ko = api.post("/tournaments", {
        "name": "axe knockout", "format": "knockout", "entrants": [b for b, _ in made],
        "players": 2, "games_per_pairing": 2, "variants": {"target": 3}, "parallel": 4,
    }, ADMIN)
    for tid in (t["id"], ko["id"]):
        wait_until(lambda tid=tid: api.get(f"/tournaments/{tid}")["status"] == "finished",
                   180, "the tournaments to finish", every=0.5)
    done = api.get(f"/tournaments/{t['id']}")["rounds"][0]["games"][0]["game_id"]
    house = api.post("/house/games", {"players": 2, "opponent": "random"})
    # a reviewed game: its replay with the analysis beside it (anyone may ask, POST)
    assert api.call("POST", f"/games/{done}/analysis").status_code in (200, 202)
    wait_until(lambda: api.call("GET", f"/games/{done}/analysis").status_code == 200, 180,
               "the review", every=0.5)
    for p in players:
        p.delay = 0.3  # keep the 4-player game live while the pages are looked at
    yield {
        "lobby": "/",
        "table": f"/games/{live['id']}",
        "finished": f"/games/{done}",
        "replay": f"/games/{done}/replay",
        "play": f"/games/{house['game']['id']}/play#token={house['player']['token']}",
        "play-before-seat": f"/games/{live['id']}/play",
        "tournament": f"/tournaments/{t['id']}",
        "knockout": f"/tournaments/{ko['id']}",
        "unknown-game": "/games/000000000000",
        "bot": f"/bots/{made[0][0]}",
        "review": f"/games/{done}/replay?move=8",
        "ladders": "/ladders",
        "ladder": "/ladders/2p",
        "api": "/docs",
    }
    for p in players:
        p.stop()


READY = {
    "lobby": "body[data-loaded=true]",
    "table": "#felt .seat",
    "finished": '#status[data-status="finished"]',
    "replay": "#rp-pos[data-step]",
    "play": "body[data-seat='0']",
    "play-before-seat": "#felt .seat",
    "tournament": "body[data-loaded=true]",
    "knockout": "#bracket .match",
    "unknown-game": "body[data-failed=true]",
    "bot": "body[data-loaded=true]",
    "review": "#analysis[data-state=done]",
    "ladders": "body[data-loaded=true]",
    "ladder": "body[data-loaded=true]",
    "api": "#schemas",
}


@pytest.mark.parametrize("size", sorted(SIZES))
@pytest.mark.parametrize("name", sorted(READY))
def test_every_page_has_no_serious_accessibility_violation(browser, service, pages, name,
                                                           size) -> None:
    pg = new_page(browser, service, SIZES[size])
    try:
        pg.goto(pages[name])
        pg.locator(READY[name]).first.wait_for()
        time.sleep(0.5)  # let the first render and the chart settle
        # the API page lists every operation and schema: many screens long, and a full-page
        # shot of it is the slowest step of the module; its first screen shows what it is
        screenshot(pg, f"{name}-{size}", full_page=name != "api")
        bad = axe_violations(pg)
        assert not bad, "\n".join(json.dumps(v) for v in bad)
        problems = [p for p in pg.problems if "404" not in p or name != "unknown-game"]
        assert not problems, problems
    finally:
        pg.context.close()


# --- 10, 11: smaller things, and phone sizes ------------------------------------------------


def box(pg: Any, selector: str) -> dict[str, float]:
    return pg.eval_on_selector(selector, """e => { const r = e.getBoundingClientRect();
        return {x: r.x, y: r.y, w: r.width, h: r.height}; }""")


def test_an_unknown_game_says_so(browser, service, pages) -> None:
    pg = new_page(browser, service, DESKTOP_800)
    try:
        pg.goto(pages["unknown-game"])
        pg.locator("body[data-failed=true]").wait_for()
        assert pg.inner_text("#status") == "not found"
    finally:
        pg.context.close()


def test_tournament_heads_colours_and_phone_columns(browser, service, pages) -> None:
    pg = new_page(browser, service, PHONE)
    try:
        pg.goto(pages["tournament"])
        pg.locator("#standings tbody tr").first.wait_for()
        heads = pg.eval_on_selector_all("#standings th", "els => els.map(e => e.innerText)")
        assert "Rating (μ ± σ)" in heads, heads  # not upper-cased to "Μ ± Σ"
        # On a phone every shown column fits: rating and ordinal are not cut off.
        widths = pg.eval_on_selector("#standings", "w => [w.scrollWidth, w.clientWidth, "
                                     "[...w.querySelectorAll('tr:first-child > *')].map("
                                     "c => c.offsetWidth)]")
        assert widths[0] <= widths[1] + 1, widths
        for col in ("rating", "ordinal"):
            cell = box(pg, f"#standings tbody tr [data-col={col}]")
            assert cell["w"] > 0 and cell["x"] + cell["w"] <= PHONE["width"], (col, cell)
        # The chart's bot colours are not the teams' colours.
        team = pg.evaluate("""() => { const s = getComputedStyle(document.documentElement);
            return [s.getPropertyValue('--team0').trim(), s.getPropertyValue('--team1').trim()]
                .map(c => c.toLowerCase()); }""")
        strokes = pg.eval_on_selector_all("#chart polyline",
                                          "els => els.map(e => e.getAttribute('stroke'))")
        assert strokes and not set(s.lower() for s in strokes) & set(team), (strokes, team)
    finally:
        pg.context.close()


def test_a_knockouts_page_shows_its_bracket(browser, service, pages) -> None:
    """Rounds, matches with seeds and games won, who went through (in words, not only in
    bold), links to every game, and the place column; the API's bracket is what is shown."""
    from tests.web.support import Api

    tid = pages["knockout"].rsplit("/", 1)[1]
    br = Api(service.base).get(f"/tournaments/{tid}")["bracket"]
    pg = new_page(browser, service, DESKTOP_800)
    try:
        pg.goto(pages["knockout"])
        pg.locator("#bracket .match").first.wait_for()
        heads = pg.eval_on_selector_all("#bracket h3", "els => els.map(e => e.textContent)")
        assert heads == [f"Round {r['round']}: {r['name']}" for r in br["rounds"]]
        for r in br["rounds"]:
            for m in r["matches"]:
                box_ = pg.locator(f"#bracket [data-round='{r['round']}'] "
                                  f"li[data-match='{m['match']}']")
                won = box_.locator(".match-line.won")
                assert won.get_attribute("data-bot-id") == m["winner"]
                assert "goes through" in won.inner_text() + won.text_content()
                links = box_.locator(".match-games a").evaluate_all(
                    "as => as.map(a => a.pathname)")
                assert links == [f"/games/{g['game_id']}" for g in m["games"]]
                bots = box_.locator(".match-line a").evaluate_all("as => as.map(a => a.pathname)")
                assert bots == [f"/bots/{b}" for b in m["entrants"] if b]  # names are links
                wins = box_.locator(".match-line .num").all_inner_texts()
                assert wins == [str(w) for w in m["wins"]]
        heads = pg.eval_on_selector_all("#standings th", "els => els.map(e => e.textContent)")
        assert heads[0] == "Place"
        places = pg.eval_on_selector_all("#standings [data-col=place]",
                                         "els => els.map(e => e.textContent)")
        assert places == ["1", "2", "3-4", "3-4"]
    finally:
        pg.context.close()
    pg = new_page(browser, service, PHONE)  # on a phone every shown column fits
    try:
        pg.goto(pages["knockout"])
        pg.locator("#standings tbody tr").first.wait_for()
        widths = pg.eval_on_selector("#standings", "w => [w.scrollWidth, w.clientWidth]")
        assert widths[0] <= widths[1] + 1, widths
        cell = box(pg, "#standings tbody tr [data-col=ordinal]")
        assert cell["w"] > 0 and cell["x"] + cell["w"] <= PHONE["width"], cell
    finally:
        pg.context.close()


def test_the_replay_bar_on_a_phone_covers_no_seat_and_keeps_its_buttons_on_one_line(
        browser, service, pages) -> None:
    pg = new_page(browser, service, PHONE)
    try:
        pg.goto(pages["replay"])
        pg.locator("#rp-pos[data-step]").wait_for()
        heights = {b: box(pg, f"#{b}")["h"] for b in ("rp-start", "rp-end", "rp-next-hand")}
        assert len(set(heights.values())) == 1, heights  # "▶|" does not wrap
        seat = pg.locator("#pos-bottom .seat")
        seat.evaluate("e => e.scrollIntoView({block: 'end'})")
        time.sleep(0.2)
        assert seat.is_visible()
        a, b = box(pg, "#pos-bottom .seat"), box(pg, "#replay-bar")
        dx = min(a["x"] + a["w"], b["x"] + b["w"]) - max(a["x"], b["x"])
        dy = min(a["y"] + a["h"], b["y"] + b["h"]) - max(a["y"], b["y"])
        assert dx <= 0 or dy <= 0, (a, b)
    finally:
        pg.context.close()
